//! The compaction key map: for each key of the part of a log being cleaned,
//! the offset of its latest record, in bounded memory.
//!
//! As Kafka's SkimpyOffsetMap, keys are kept as 16-byte digests next to an
//! 8-byte offset, and the map holds at most as many keys as
//! `log.cleaner.dedupe.buffer.size` (shared by the cleaner threads) allows
//! at `log.cleaner.io.buffer.load.factor`; a pass whose dirty part has more
//! keys cleans up to where the map filled and leaves the rest to the next
//! pass. The digest is two SipHash-1-3 values under keys drawn at random
//! for every pass, so a producer cannot choose keys that collide (a
//! collision would make one key's record look superseded by another's).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// Bytes one entry stands for in the dedupe buffer: a 16-byte digest and
/// an 8-byte offset, as in Kafka.
pub const ENTRY_BYTES: u64 = 24;

/// How many keys a cleaner thread's map may hold.
pub fn capacity(dedupe_buffer_size: u64, threads: usize, load_factor: f64) -> usize {
    let per_thread = dedupe_buffer_size / threads.max(1) as u64;
    // Kafka caps a thread's buffer at 2 GiB; its load factor is used as is,
    // here held to (0, 1] so no setting can promise more than the buffer.
    let per_thread = per_thread.min(i32::MAX as u64);
    let load = if load_factor > 0.0 {
        load_factor.min(1.0)
    } else {
        0.0
    };
    ((per_thread / ENTRY_BYTES) as f64 * load) as usize
}

pub struct KeyMap {
    digests: (RandomState, RandomState),
    latest: HashMap<u128, i64, BuildHasherDefault<DigestHasher>>,
    capacity: usize,
}

impl KeyMap {
    pub fn new(capacity: usize) -> Self {
        Self {
            digests: (RandomState::new(), RandomState::new()),
            latest: HashMap::default(),
            capacity,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// Whether `records` more keys would still fit (each may be new).
    pub fn has_room_for(&self, records: usize) -> bool {
        self.latest.len().saturating_add(records) <= self.capacity
    }

    /// Records that `key`'s latest record so far is at `offset`. The caller
    /// checks [`Self::has_room_for`] first; the map never grows past its
    /// capacity.
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let digest = self.digest(key);
        if self.latest.len() < self.capacity || self.latest.contains_key(&digest) {
            self.latest.insert(digest, offset);
        }
    }

    /// The offset of `key`'s latest record, if the map has the key.
    pub fn latest(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(&self.digest(key)).copied()
    }

    fn digest(&self, key: &[u8]) -> u128 {
        (u128::from(self.digests.0.hash_one(key)) << 64) | u128::from(self.digests.1.hash_one(key))
    }
}

/// The map's own hasher: its keys are already uniformly random digests.
#[derive(Default)]
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached: the map's keys are u128 digests.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u128(&mut self, digest: u128) {
        self.0 = digest as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_follows_kafkas_arithmetic() {
        // 128 MiB, one thread, 0.9: Kafka's default map of ~5 million keys.
        assert_eq!(capacity(128 << 20, 1, 0.9), 5_033_164);
        assert_eq!(capacity(128 << 20, 2, 0.9), 2_516_581);
        assert_eq!(capacity(24 * 100, 1, 1.0), 100);
        assert_eq!(capacity(24 * 100, 1, 7.0), 100, "no more than the buffer");
        assert_eq!(capacity(24 * 100, 1, -1.0), 0);
        assert_eq!(capacity(u64::MAX, 1, 1.0), (i32::MAX as u64 / 24) as usize);
    }

    #[test]
    fn the_latest_offset_wins_and_the_map_stays_within_capacity() {
        let mut map = KeyMap::new(2);
        map.put(b"a", 1);
        map.put(b"b", 2);
        map.put(b"a", 3);
        assert_eq!(map.latest(b"a"), Some(3));
        assert_eq!(map.latest(b"b"), Some(2));
        assert!(!map.has_room_for(1));
        assert!(map.has_room_for(0));
        map.put(b"c", 4);
        assert_eq!(map.len(), 2, "a full map takes no new key");
        assert_eq!(map.latest(b"c"), None);
        assert_eq!(map.latest(b"d"), None);
    }

    #[test]
    fn many_distinct_keys_do_not_collide() {
        let mut map = KeyMap::new(200_000);
        for i in 0..200_000i64 {
            map.put(format!("key-{i}").as_bytes(), i);
        }
        assert_eq!(map.len(), 200_000);
        assert!((0..200_000i64).all(|i| map.latest(format!("key-{i}").as_bytes()) == Some(i)));
    }
}
