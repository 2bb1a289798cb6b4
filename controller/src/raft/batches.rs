//! Record batches as the quorum stores them: the Raft log and the snapshot
//! file are both sequences of plain (uncompressed, non-idempotent) v2 batches
//! whose record values carry the payload, so both are checked by the batch
//! CRC and readable with Kafka's tooling.

use ottla_protocol::batch::{BatchBuilder, BatchError, BatchIter, SimpleRecord};
use ottla_protocol::records::{records_section, walk_records};

/// One batch read back.
pub(crate) struct StoredBatch {
    pub base_offset: i64,
    pub values: Vec<Vec<u8>>,
}

/// Appends to `out` one batch at `base_offset` stamped with `epoch`, holding
/// one record per value.
pub(crate) fn put_batch(out: &mut Vec<u8>, base_offset: i64, epoch: i32, values: Vec<Vec<u8>>) {
    let now = now_ms();
    let records: Vec<SimpleRecord> = values
        .into_iter()
        .map(|v| SimpleRecord {
            timestamp: now,
            key: None,
            value: Some(v),
            headers: Vec::new(),
        })
        .collect();
    let builder = BatchBuilder {
        base_offset,
        leader_epoch: epoch,
        ..BatchBuilder::default()
    };
    out.extend_from_slice(&builder.build(&records));
}

/// Parses whole batches, checking each one's CRC.
pub(crate) fn read_batches(bytes: &[u8]) -> Result<Vec<StoredBatch>, BatchError> {
    let mut out = Vec::new();
    for batch in BatchIter::new(bytes) {
        let batch = batch?;
        batch.validate()?;
        let section = records_section(&batch)?;
        let mut values = Vec::new();
        walk_records(&section, |r| {
            values.push(r.value.unwrap_or_default().to_vec());
        })?;
        out.push(StoredBatch {
            base_offset: batch.base_offset(),
            values,
        });
    }
    Ok(out)
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_and_crc_is_checked() {
        let mut bytes = Vec::new();
        put_batch(&mut bytes, 7, 3, vec![b"a".to_vec(), Vec::new()]);
        put_batch(&mut bytes, 8, 4, vec![b"bc".to_vec()]);
        let batches = read_batches(&bytes).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].base_offset, 7);
        assert_eq!(batches[0].values, vec![b"a".to_vec(), Vec::new()]);
        assert_eq!(batches[1].base_offset, 8);
        assert_eq!(batches[1].values, vec![b"bc".to_vec()]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(read_batches(&bytes).is_err());
    }
}
