//! The replicated state machine: committed entries applied to the metadata
//! image, which is published through a tokio watch. The image itself lives
//! in memory; what survives a restart is the snapshot file plus the log,
//! which openraft replays from the snapshot up to the saved commit point.

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError, StoredMembership};
use tokio::sync::watch;

use super::recent::RecentEntries;
use super::snapshot::{decode, encode, Meta, SnapshotStore};
use super::{blocking, offset_of, Entry, LogId, Node, StorageError, TypeConfig};
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

pub(crate) type ImageSender = Arc<watch::Sender<Arc<MetadataImage>>>;

pub(crate) struct StateMachine {
    image: ImageSender,
    applied: Option<LogId>,
    membership: StoredMembership<u64, Node>,
    snapshots: Arc<SnapshotStore>,
    recent: RecentEntries,
}

impl StateMachine {
    /// Starts from the snapshot in `dir`, or from an empty image. Returns
    /// where applied images are published, and the window of recent
    /// entries observers are served from.
    pub fn open(
        dir: &std::path::Path,
    ) -> ottla_storage::Result<(Self, ImageSender, RecentEntries)> {
        let (store, loaded) = SnapshotStore::open(dir)?;
        let (meta, image) = loaded.unwrap_or_else(|| (Meta::default(), MetadataImage::empty()));
        let (tx, _) = watch::channel(Arc::new(image));
        let image = Arc::new(tx);
        let sm = Self {
            image: image.clone(),
            applied: meta.last_log_id,
            membership: meta.last_membership,
            snapshots: Arc::new(store),
            recent: RecentEntries::default(),
        };
        let recent = sm.recent.clone();
        Ok((sm, image, recent))
    }
}

/// Applies one entry's encoded records, all at `offset`. A record this
/// build cannot read must stop the node rather than be skipped.
pub(crate) fn apply_records(
    image: &mut MetadataImage,
    offset: i64,
    records: &[Vec<u8>],
) -> Result<(), String> {
    for bytes in records {
        let record = MetadataRecord::decode(bytes)
            .map_err(|e| format!("metadata record at offset {offset}: {e}"))?;
        image.apply(offset, &record);
    }
    image.offset = offset;
    Ok(())
}

fn snapshot_id(last: Option<LogId>) -> String {
    last.map_or_else(
        || "empty".to_string(),
        |id| {
            format!(
                "{}-{}-{}",
                id.index, id.leader_id.term, id.leader_id.node_id
            )
        },
    )
}

fn snapshot_error(meta: &Meta, e: impl ToString) -> StorageError {
    StorageIOError::write_snapshot(Some(meta.signature()), AnyError::error(e.to_string())).into()
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<u64, Node>), StorageError> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<i64>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut image = MetadataImage::clone(&self.image.borrow());
        let mut applied = Vec::new();
        for entry in entries {
            let offset = offset_of(entry.log_id.index);
            let records = match entry.payload {
                EntryPayload::Blank => Vec::new(),
                EntryPayload::Normal(records) => records,
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                    Vec::new()
                }
            };
            apply_records(&mut image, offset, &records)
                .map_err(|e| StorageIOError::apply(entry.log_id, AnyError::error(e)))?;
            self.recent.push(offset, Arc::new(records));
            self.applied = Some(entry.log_id);
            applied.push(offset);
        }
        if !applied.is_empty() {
            self.image.send_replace(Arc::new(image));
        }
        Ok(applied)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            image: self.image.borrow().clone(),
            applied: self.applied,
            membership: self.membership.clone(),
            snapshots: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let (stored_meta, image) = decode(&bytes).map_err(|e| snapshot_error(meta, e))?;
        if stored_meta.last_log_id != meta.last_log_id {
            return Err(snapshot_error(
                meta,
                "snapshot header does not match its metadata",
            ));
        }
        let store = self.snapshots.clone();
        let saved = meta.clone();
        blocking(move || store.save(&saved, &bytes))
            .await
            .map_err(|e| snapshot_error(meta, e))?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.recent.clear();
        self.image.send_replace(Arc::new(image));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let store = self.snapshots.clone();
        let saved = blocking(move || store.read())
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(saved.map(|(meta, bytes)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}

/// A frozen copy of the state machine, turned into a snapshot in the
/// background while entries keep being applied.
pub(crate) struct SnapshotBuilder {
    image: Arc<MetadataImage>,
    applied: Option<LogId>,
    membership: StoredMembership<u64, Node>,
    snapshots: Arc<SnapshotStore>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let meta = Meta {
            last_log_id: self.applied,
            last_membership: self.membership.clone(),
            snapshot_id: snapshot_id(self.applied),
        };
        let bytes = encode(&meta, &self.image);
        let store = self.snapshots.clone();
        let saved = meta.clone();
        let bytes = blocking(move || store.save(&saved, &bytes).map(|()| bytes))
            .await
            .map_err(|e| snapshot_error(&meta, e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}
