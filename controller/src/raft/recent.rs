//! The newest applied entries, kept in memory so the leader can answer an
//! observer's fetch with just what it lacks. An observer further behind
//! than this window gets the whole image instead, as a KRaft broker that
//! fell behind the log start loads a snapshot.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

/// Entries kept, at most: a few seconds of heavy metadata traffic.
const MAX_ENTRIES: usize = 4096;
/// Bytes of records kept, at most.
const MAX_BYTES: usize = 32 << 20;

/// One applied entry: its offset and its encoded records (none for Raft's
/// own blank and membership entries, which only move the offset).
pub(crate) type AppliedEntry = (i64, Arc<Vec<Vec<u8>>>);

#[derive(Clone, Default)]
pub(crate) struct RecentEntries(Arc<Mutex<Window>>);

#[derive(Default)]
struct Window {
    entries: VecDeque<AppliedEntry>,
    bytes: usize,
}

fn size_of(records: &[Vec<u8>]) -> usize {
    records.iter().map(Vec::len).sum()
}

impl RecentEntries {
    /// Appends the entry applied after the previous one. An entry that does
    /// not follow the window (after a snapshot was installed) starts it anew.
    pub fn push(&self, offset: i64, records: Arc<Vec<Vec<u8>>>) {
        let mut w = self.0.lock();
        if w.entries.back().is_some_and(|(last, _)| last + 1 != offset) {
            w.entries.clear();
            w.bytes = 0;
        }
        w.bytes += size_of(&records);
        w.entries.push_back((offset, records));
        while w.entries.len() > MAX_ENTRIES || (w.bytes > MAX_BYTES && w.entries.len() > 1) {
            let (_, dropped) = w.entries.pop_front().expect("not empty");
            w.bytes -= size_of(&dropped);
        }
    }

    /// Forgets everything (a snapshot replaced the state).
    pub fn clear(&self) {
        let mut w = self.0.lock();
        w.entries.clear();
        w.bytes = 0;
    }

    /// The entries after offset `after`, up to about `max_bytes` (at least
    /// one when there is one). None when the window no longer reaches back
    /// to `after + 1`.
    pub fn after(&self, after: i64, max_bytes: usize) -> Option<Vec<AppliedEntry>> {
        let w = self.0.lock();
        let first = match w.entries.front() {
            Some((first, _)) => *first,
            None => return Some(Vec::new()),
        };
        // Saturating: `after` comes from a peer.
        let wanted = after.saturating_add(1);
        if wanted < first {
            return None;
        }
        let skip = usize::try_from(wanted - first).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let mut bytes = 0;
        for (offset, records) in w.entries.iter().skip(skip) {
            bytes += size_of(records);
            if !out.is_empty() && bytes > max_bytes {
                break;
            }
            out.push((*offset, records.clone()));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: usize) -> Arc<Vec<Vec<u8>>> {
        Arc::new(vec![vec![0; n]])
    }

    #[test]
    fn serves_what_follows_and_refuses_what_fell_out() {
        let recent = RecentEntries::default();
        assert_eq!(recent.after(-1, 100).unwrap().len(), 0);
        for offset in 0..5 {
            recent.push(offset, entry(10));
        }
        let offsets = |v: Vec<AppliedEntry>| v.into_iter().map(|(o, _)| o).collect::<Vec<_>>();
        assert_eq!(offsets(recent.after(-1, 1000).unwrap()), [0, 1, 2, 3, 4]);
        assert_eq!(offsets(recent.after(2, 1000).unwrap()), [3, 4]);
        assert_eq!(offsets(recent.after(4, 1000).unwrap()), Vec::<i64>::new());
        // The byte budget cuts the answer, but never below one entry.
        assert_eq!(offsets(recent.after(0, 15).unwrap()), [1]);
        assert_eq!(offsets(recent.after(0, 1).unwrap()), [1]);
        // A gap (a snapshot was installed) restarts the window.
        recent.push(9, entry(10));
        assert!(recent.after(4, 1000).is_none());
        assert_eq!(offsets(recent.after(8, 1000).unwrap()), [9]);
    }

    #[test]
    fn the_window_is_bounded() {
        let recent = RecentEntries::default();
        for offset in 0..(MAX_ENTRIES as i64 + 10) {
            recent.push(offset, entry(1));
        }
        assert!(recent.after(5, usize::MAX).is_none());
        assert_eq!(recent.after(9, usize::MAX).unwrap().len(), MAX_ENTRIES);
        let big = RecentEntries::default();
        big.push(0, entry(MAX_BYTES));
        big.push(1, entry(MAX_BYTES));
        assert!(big.after(-1, usize::MAX).is_none());
        assert_eq!(big.after(0, usize::MAX).unwrap().len(), 1);
    }
}
