//! [`ObserverFeed`]: the leader's side of observers' metadata fetches.
//! Served by the quorum RPC itself (not the controller), so any quorum,
//! a controller's or a test's, feeds its observers.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

use super::batches::now_ms;
use super::quorum::MAX_WRITE_BYTES;
use super::recent::RecentEntries;
use super::snapshot::encoded_image;
use super::state_machine::ImageSender;
use super::VoterSummary;
use crate::service::{MetadataFetch, MetadataUpdate};

/// The longest an observer's fetch is held while nothing is newer.
const MAX_FETCH_WAIT: Duration = Duration::from_secs(1);
/// An observer not heard from for this long leaves DescribeQuorum's list
/// (KRaft's observer session timeout).
const OBSERVER_EXPIRY_MS: i64 = 5 * 60 * 1000;

pub(crate) struct ObserverFeed {
    image: ImageSender,
    recent: RecentEntries,
    /// Each observer's image offset and when it last fetched (wall-clock ms).
    observers: Mutex<BTreeMap<u64, (i64, i64)>>,
}

impl ObserverFeed {
    pub fn new(image: ImageSender, recent: RecentEntries) -> Self {
        Self {
            image,
            recent,
            observers: Mutex::default(),
        }
    }

    /// Answers a fetch with what was applied after the observer's image,
    /// holding it a while when nothing is newer yet.
    pub async fn serve(&self, fetch: MetadataFetch) -> MetadataUpdate {
        self.observers
            .lock()
            .insert(fetch.observer, (fetch.after, now_ms()));
        let wait = Duration::from_millis(fetch.max_wait_ms.into()).min(MAX_FETCH_WAIT);
        let mut images = self.image.subscribe();
        let _ = tokio::time::timeout(wait, images.wait_for(|i| i.offset > fetch.after)).await;
        match self.recent.after(fetch.after, MAX_WRITE_BYTES) {
            Some(entries) => MetadataUpdate::Entries(
                entries
                    .into_iter()
                    .map(|(offset, records)| (offset, records.to_vec()))
                    .collect(),
            ),
            None => {
                let image = self.image.borrow().clone();
                MetadataUpdate::Image {
                    offset: image.offset,
                    records: encoded_image(&image),
                }
            }
        }
    }

    /// The observers heard from lately, as DescribeQuorum lists them.
    pub fn observers(&self) -> Vec<VoterSummary> {
        let now = now_ms();
        let mut observers = self.observers.lock();
        observers.retain(|_, (_, fetched)| now - *fetched < OBSERVER_EXPIRY_MS);
        observers
            .iter()
            .map(|(id, (offset, fetched))| VoterSummary {
                id: *id,
                log_end_offset: offset.saturating_add(1),
                last_fetch_ms: Some(*fetched),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::watch;
    use uuid::Uuid;

    use super::*;
    use crate::image::MetadataImage;
    use crate::raft::snapshot::image_from;
    use crate::records::MetadataRecord;

    fn image_at(offset: i64) -> MetadataImage {
        let mut image = MetadataImage::empty();
        for name in ["a", "b"] {
            let topic = MetadataRecord::Topic {
                name: name.into(),
                topic_id: Uuid::new_v4(),
            };
            image.apply(offset, &topic);
        }
        image.offset = offset;
        image
    }

    #[tokio::test]
    async fn an_observer_behind_the_window_gets_the_whole_image() {
        let image = image_at(20);
        let (tx, _) = watch::channel(Arc::new(image.clone()));
        let recent = RecentEntries::default();
        for offset in 15..=20 {
            recent.push(offset, Arc::new(Vec::new()));
        }
        let feed = ObserverFeed::new(Arc::new(tx), recent);
        let fetch = |after| MetadataFetch {
            observer: 7,
            after,
            max_wait_ms: 0,
        };
        match feed.serve(fetch(3)).await {
            MetadataUpdate::Image { offset, records } => {
                assert_eq!(image_from(offset, &records).unwrap(), image)
            }
            other => panic!("{other:?}"),
        }
        match feed.serve(fetch(17)).await {
            MetadataUpdate::Entries(entries) => assert_eq!(
                entries.iter().map(|e| e.0).collect::<Vec<_>>(),
                [18, 19, 20]
            ),
            other => panic!("{other:?}"),
        }
        let observers = feed.observers();
        assert_eq!(observers.len(), 1);
        assert_eq!((observers[0].id, observers[0].log_end_offset), (7, 18));
    }
}
