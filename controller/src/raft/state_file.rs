//! `quorum-state`: what Raft must remember across restarts besides the log.
//!
//! Layout: format byte 0, postcard of [`QuorumState`], CRC-32C (big-endian)
//! of everything before it. The file is always rewritten whole with
//! [`write_atomically`], so a crash leaves the old or the new state.

use std::fs;
use std::io;
use std::path::Path;

use openraft::Vote;
use serde::{Deserialize, Serialize};

use super::LogId;

const FORMAT: u8 = 0;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QuorumState {
    pub vote: Option<Vote<u64>>,
    pub committed: Option<LogId>,
    /// Entries up to here are gone from the log (covered by a snapshot).
    pub purged: Option<LogId>,
}

impl QuorumState {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT];
        out.extend(postcard::to_allocvec(self).expect("in-memory serialization cannot fail"));
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, &'static str> {
        let (body, crc) = bytes.split_last_chunk::<4>().ok_or("file is truncated")?;
        if crc32c::crc32c(body) != u32::from_be_bytes(*crc) {
            return Err("checksum mismatch");
        }
        match body.split_first() {
            Some((&FORMAT, state)) => postcard::from_bytes(state).map_err(|_| "malformed state"),
            _ => Err("unknown format"),
        }
    }

    /// Reads the state, or the empty state for a new quorum member.
    pub fn load(path: &Path) -> ottla_storage::Result<Self> {
        match fs::read(path) {
            Ok(bytes) => Self::decode(&bytes)
                .map_err(|reason| ottla_storage::StorageError::corrupt_file(path, reason)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e.into()),
        }
    }
}

pub(crate) use ottla_storage::checkpoint::write_atomically;

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;

    #[test]
    fn state_round_trips_and_damage_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quorum-state");
        assert_eq!(QuorumState::load(&path).unwrap(), QuorumState::default());
        let state = QuorumState {
            vote: Some(Vote::new_committed(3, 2)),
            committed: Some(LogId::new(CommittedLeaderId::new(3, 2), 41)),
            purged: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)),
        };
        write_atomically(&path, &state.encode()).unwrap();
        assert_eq!(QuorumState::load(&path).unwrap(), state);

        let mut bytes = fs::read(&path).unwrap();
        bytes[2] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        assert!(QuorumState::load(&path).is_err());
        fs::write(&path, [0u8, 1]).unwrap();
        assert!(QuorumState::load(&path).is_err());
    }
}
