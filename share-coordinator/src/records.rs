//! The `__share_group_state` records in Kafka 4.4's formats: ShareSnapshot
//! (record type 0) holds a share partition's whole state, ShareUpdate
//! (type 1) a change to it. Keys are non-flexible version 0 (group, topic
//! id, partition); values flexible version 0. Ottla writes snapshots only
//! and reads both.

use ottla_coordinator_common::codec::{DecodeError, DecodeResult, FieldTooLong, Reader, Writer};

use crate::state::{ShareState, StateBatch, StateKey};

const SNAPSHOT: i16 = 0;
const UPDATE: i16 = 1;
const VALUE_VERSION: i16 = 0;

/// A ShareSnapshot value's fields beyond the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotMeta {
    pub snapshot_epoch: i32,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    Snapshot(StateKey, Option<(SnapshotMeta, ShareState)>),
    /// A change: the start offset (-1: unchanged) and the batches it sets.
    Update(StateKey, Option<(i64, Vec<StateBatch>)>),
}

/// The ShareSnapshot key of `key`'s state (a tombstone is this key with no
/// value).
pub fn snapshot_key(key: &StateKey) -> Result<Vec<u8>, FieldTooLong> {
    let mut k = Writer::default();
    k.i16(SNAPSHOT)
        .string(&key.group)
        .uuid(&key.topic_id)
        .i32(key.partition);
    k.finish()
}

pub fn encode_snapshot(
    key: &StateKey,
    meta: SnapshotMeta,
    state: &ShareState,
) -> Result<(Vec<u8>, Vec<u8>), FieldTooLong> {
    let mut v = Writer::default();
    v.i16(VALUE_VERSION)
        .i32(meta.snapshot_epoch)
        .i32(state.state_epoch)
        .i32(state.leader_epoch)
        .i64(state.start_offset)
        .i64(meta.create_timestamp)
        .i64(meta.write_timestamp)
        .compact_array_len(state.batches.len());
    for b in &state.batches {
        v.i64(b.first_offset)
            .i64(b.last_offset)
            .i8(b.delivery_state)
            .i16(b.delivery_count)
            .tagged_fields(&[]);
    }
    v.tagged_fields(&[]);
    Ok((snapshot_key(key)?, v.finish()?))
}

/// A record of `__share_group_state`; None for record types it does not
/// hold (a newer Kafka's).
pub fn decode(key: &[u8], value: Option<&[u8]>) -> DecodeResult<Option<StateRecord>> {
    let mut k = Reader::new(key);
    let kind = k.i16()?;
    if kind != SNAPSHOT && kind != UPDATE {
        return Ok(None);
    }
    let state_key = StateKey {
        group: k.string()?,
        topic_id: k.uuid()?,
        partition: k.i32()?,
    };
    let Some(value) = value else {
        return Ok(Some(if kind == SNAPSHOT {
            StateRecord::Snapshot(state_key, None)
        } else {
            StateRecord::Update(state_key, None)
        }));
    };
    let mut v = Reader::new(value);
    if v.i16()? != VALUE_VERSION {
        return Err(DecodeError("unknown share state value version"));
    }
    v.set_flexible(true);
    if kind == SNAPSHOT {
        let snapshot_epoch = v.i32()?;
        let state_epoch = v.i32()?;
        let leader_epoch = v.i32()?;
        let start_offset = v.i64()?;
        let create_timestamp = v.i64()?;
        let write_timestamp = v.i64()?;
        let batches = read_batches(&mut v)?;
        v.skip_tagged_fields()?;
        let meta = SnapshotMeta {
            snapshot_epoch,
            create_timestamp,
            write_timestamp,
        };
        let state = ShareState {
            state_epoch,
            leader_epoch,
            start_offset,
            batches,
        };
        Ok(Some(StateRecord::Snapshot(state_key, Some((meta, state)))))
    } else {
        let _snapshot_epoch = v.i32()?;
        let _leader_epoch = v.i32()?;
        let start_offset = v.i64()?;
        let batches = read_batches(&mut v)?;
        v.skip_tagged_fields()?;
        Ok(Some(StateRecord::Update(
            state_key,
            Some((start_offset, batches)),
        )))
    }
}

fn read_batches(v: &mut Reader<'_>) -> DecodeResult<Vec<StateBatch>> {
    let n = v.array_len()?;
    let mut batches = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        batches.push(StateBatch {
            first_offset: v.i64()?,
            last_offset: v.i64()?,
            delivery_state: v.i8()?,
            delivery_count: v.i16()?,
        });
        v.skip_tagged_fields()?;
    }
    Ok(batches)
}

/// Applies a ShareUpdate to `state`: its start offset, if set, and its
/// batches over what was there (offsets before the start dropped).
pub fn apply_update(state: &mut ShareState, start_offset: i64, batches: &[StateBatch]) {
    if start_offset >= 0 {
        state.start_offset = start_offset;
    }
    let mut merged: Vec<StateBatch> = Vec::new();
    for old in &state.batches {
        // The parts of an old batch no new batch covers.
        let mut pieces = vec![(old.first_offset, old.last_offset)];
        for new in batches {
            pieces = pieces
                .into_iter()
                .flat_map(|(f, l)| {
                    let mut kept = Vec::new();
                    if f < new.first_offset {
                        kept.push((f, l.min(new.first_offset - 1)));
                    }
                    if l > new.last_offset {
                        kept.push((f.max(new.last_offset + 1), l));
                    }
                    kept
                })
                .collect();
        }
        merged.extend(pieces.into_iter().map(|(f, l)| StateBatch {
            first_offset: f,
            last_offset: l,
            ..*old
        }));
    }
    merged.extend_from_slice(batches);
    merged.retain(|b| b.last_offset >= state.start_offset);
    for b in &mut merged {
        b.first_offset = b.first_offset.max(state.start_offset);
    }
    merged.sort_by_key(|b| b.first_offset);
    state.batches = merged;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ottla_share::persisted::{ACKNOWLEDGED, ARCHIVED, AVAILABLE};
    use uuid::Uuid;

    fn key() -> StateKey {
        StateKey {
            group: "g".into(),
            topic_id: Uuid::from_u128(9),
            partition: 3,
        }
    }

    fn batch(first: i64, last: i64, state: i8, count: i16) -> StateBatch {
        StateBatch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        }
    }

    #[test]
    fn a_snapshot_round_trips_in_kafkas_layout() {
        let meta = SnapshotMeta {
            snapshot_epoch: 4,
            create_timestamp: 1000,
            write_timestamp: 2000,
        };
        let state = ShareState {
            state_epoch: 1,
            leader_epoch: 7,
            start_offset: 10,
            batches: vec![batch(10, 12, ACKNOWLEDGED, 1), batch(13, 13, AVAILABLE, 2)],
        };
        let (k, v) = encode_snapshot(&key(), meta, &state).unwrap();
        // Key: type 0, string "g", 16-byte id, partition.
        assert_eq!(k.len(), 2 + 2 + 1 + 16 + 4);
        assert_eq!(&k[..2], &[0, 0]);
        // Value: version 0, 3 ints, 3 longs, compact array of 2 (byte 3),
        // each 19 bytes and no tags, then no tags.
        assert_eq!(v.len(), 2 + 12 + 24 + 1 + 2 * (8 + 8 + 1 + 2 + 1) + 1);
        assert_eq!(v[2 + 12 + 24], 3);
        assert_eq!(
            decode(&k, Some(&v)).unwrap(),
            Some(StateRecord::Snapshot(key(), Some((meta, state))))
        );
        assert_eq!(
            decode(&k, None).unwrap(),
            Some(StateRecord::Snapshot(key(), None))
        );
        assert_eq!(decode(&[0, 9], None).unwrap(), None, "another record type");
        assert!(decode(&k[..5], None).is_err(), "truncated");
    }

    #[test]
    fn an_update_overrides_the_offsets_it_names() {
        let mut state = ShareState {
            start_offset: 0,
            batches: vec![batch(0, 9, AVAILABLE, 1)],
            ..ShareState::default()
        };
        apply_update(&mut state, 2, &[batch(4, 5, ARCHIVED, 3)]);
        assert_eq!(
            state.batches,
            vec![
                batch(2, 3, AVAILABLE, 1),
                batch(4, 5, ARCHIVED, 3),
                batch(6, 9, AVAILABLE, 1)
            ]
        );
    }
}
