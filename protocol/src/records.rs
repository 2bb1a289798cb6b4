//! Record-level access inside v2 batches, without re-encoding them.
//!
//! Records are walked as raw, self-delimited byte ranges so that a batch can
//! be inspected (timestamps, keys) or rewritten (compaction) while every kept
//! record stays byte-identical, duplicate header keys included.

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Decompressor, Gzip, Lz4, Snappy, Zstd};

use crate::batch::{BatchError, BatchView, Compression, VarintCursor};

/// One record inside a batch's (decompressed) records section.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The whole record, length prefix included.
    pub raw: &'a [u8],
}

/// Upper bound on what decompressing one stored batch may produce. Batches are
/// bounded by `max.message.bytes`, and compression ratios above 100x are not
/// real data: this stops a decompression bomb that slipped in.
const MAX_DECOMPRESSED: usize = 256 << 20;

/// The records section of `view`, decompressed when needed. gzip, lz4 and
/// zstd are inflated as streams that stop at [`MAX_DECOMPRESSED`], so a
/// decompression bomb stored by a client never costs more memory than that;
/// snappy's format bounds its own ratio, so kafka-protocol's codec (which
/// also understands Java's xerial framing) is used for it.
pub fn records_section(view: &BatchView<'_>) -> Result<Bytes, BatchError> {
    let payload = view.records_payload();
    let codec = view
        .compression()
        .ok_or(BatchError::Invalid("unknown compression codec"))?;
    let inflated = match codec {
        Compression::None => return Ok(Bytes::copy_from_slice(payload)),
        Compression::Gzip => read_capped(flate2::read::GzDecoder::new(payload)),
        Compression::Lz4 => lz4::Decoder::new(payload).and_then(read_capped),
        Compression::Zstd => zstd::stream::read::Decoder::new(payload).and_then(read_capped),
        Compression::Snappy => {
            let mut input = Bytes::copy_from_slice(payload);
            return Snappy::decompress(&mut input, |b: &mut Bytes| -> anyhow::Result<Bytes> {
                anyhow::ensure!(b.len() <= MAX_DECOMPRESSED, "decompressed batch too large");
                Ok(std::mem::take(b))
            })
            .map_err(|_| BatchError::Invalid("records cannot be decompressed"));
        }
    };
    match inflated {
        Ok(Some(bytes)) => Ok(Bytes::from(bytes)),
        Ok(None) => Err(BatchError::Invalid(
            "decompressed batch exceeds the size limit",
        )),
        Err(_) => Err(BatchError::Invalid("records cannot be decompressed")),
    }
}

/// Reads `reader` to the end, or returns None once it yields more than
/// [`MAX_DECOMPRESSED`] bytes.
fn read_capped(reader: impl std::io::Read) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut out = Vec::new();
    reader
        .take(MAX_DECOMPRESSED as u64 + 1)
        .read_to_end(&mut out)?;
    Ok((out.len() <= MAX_DECOMPRESSED).then_some(out))
}

/// Compresses a records section with `codec` (compaction rewrites).
pub fn compress_records(codec: Compression, records: &[u8]) -> Result<Vec<u8>, BatchError> {
    let mut out = BytesMut::new();
    let write = |buf: &mut BytesMut| -> anyhow::Result<()> {
        buf.extend_from_slice(records);
        Ok(())
    };
    let r = match codec {
        Compression::None => {
            out.extend_from_slice(records);
            Ok(())
        }
        Compression::Gzip => Gzip::compress(&mut out, write),
        Compression::Snappy => Snappy::compress(&mut out, write),
        Compression::Lz4 => Lz4::compress(&mut out, write),
        Compression::Zstd => Zstd::compress(&mut out, write),
    };
    r.map_err(|_| BatchError::Invalid("records cannot be compressed"))?;
    Ok(out.to_vec())
}

/// Walks the records of a records section, checking that each is well
/// formed. Returns the number of records.
pub fn walk_records<'a>(
    section: &'a [u8],
    mut visit: impl FnMut(RecordRef<'a>),
) -> Result<usize, BatchError> {
    const BAD: BatchError = BatchError::Invalid("malformed record");
    // One cursor for the whole section: a record whose fields run past its
    // length ends elsewhere than its length says, which is refused below.
    let mut r = VarintCursor::new(section);
    let mut count = 0;
    while r.position() < section.len() {
        let start = r.position();
        let len = r.varint().ok_or(BAD)?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| r.position().checked_add(len))
            .filter(|&end| end <= section.len())
            .ok_or(BAD)?;
        let _attributes = r.byte().ok_or(BAD)?;
        let timestamp_delta = r.varlong().ok_or(BAD)?;
        let offset_delta = r.varint().ok_or(BAD)?;
        let key = nullable_bytes(&mut r).ok_or(BAD)?;
        let value = nullable_bytes(&mut r).ok_or(BAD)?;
        let headers = r.varint().ok_or(BAD)?;
        if headers < 0 {
            return Err(BAD);
        }
        for _ in 0..headers {
            let name_len = r.varint().ok_or(BAD)?;
            if name_len < 0 {
                return Err(BAD);
            }
            r.take(name_len as usize).ok_or(BAD)?;
            nullable_bytes(&mut r).ok_or(BAD)?;
        }
        if r.position() != end {
            return Err(BAD);
        }
        visit(RecordRef {
            offset_delta,
            timestamp_delta,
            key,
            value,
            raw: &section[start..end],
        });
        count += 1;
    }
    Ok(count)
}

#[inline(always)]
fn nullable_bytes<'a>(r: &mut VarintCursor<'a>) -> Option<Option<&'a [u8]>> {
    let len = r.varint()?;
    if len < 0 {
        return Some(None);
    }
    r.take(len as usize).map(Some)
}

/// Checks an uncompressed batch's records against its header: the count
/// matches and offset deltas run 0, 1, 2, ... as producers write them.
pub fn validate_producer_records(view: &BatchView<'_>) -> Result<(), BatchError> {
    if view.last_offset_delta() as i64 != view.record_count() as i64 - 1 {
        return Err(BatchError::Invalid(
            "lastOffsetDelta does not match the record count",
        ));
    }
    if view.compression() != Some(Compression::None) {
        return Ok(());
    }
    let mut expected = 0;
    let mut contiguous = true;
    let count = walk_records(view.records_payload(), |r| {
        contiguous &= r.offset_delta == expected;
        expected += 1;
    })?;
    if count != view.record_count() as usize {
        return Err(BatchError::Invalid(
            "record count does not match the records",
        ));
    }
    if !contiguous {
        return Err(BatchError::Invalid("record offsets are not contiguous"));
    }
    Ok(())
}

/// The first record with timestamp >= `timestamp`: `(offset, timestamp)`.
pub fn first_record_at_or_after(
    view: &BatchView<'_>,
    timestamp: i64,
) -> Result<Option<(i64, i64)>, BatchError> {
    if view.timestamp_type() == crate::batch::TimestampType::LogAppendTime {
        let ts = view.max_timestamp();
        return Ok((ts >= timestamp).then(|| (view.base_offset(), ts)));
    }
    let section = records_section(view)?;
    let mut found = None;
    walk_records(&section, |r| {
        let ts = view.base_timestamp() + r.timestamp_delta;
        if found.is_none() && ts >= timestamp {
            found = Some((view.base_offset() + r.offset_delta as i64, ts));
        }
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchBuilder, BatchView, SimpleRecord};

    fn batch(records: &[(i64, &str)]) -> Vec<u8> {
        let recs: Vec<_> = records
            .iter()
            .map(|(ts, v)| SimpleRecord {
                timestamp: *ts,
                key: Some(b"k".to_vec()),
                value: Some(v.as_bytes().to_vec()),
                headers: vec![
                    ("dup".into(), Some(b"1".to_vec())),
                    ("dup".into(), Some(b"2".to_vec())),
                ],
            })
            .collect();
        BatchBuilder {
            base_offset: 100,
            ..Default::default()
        }
        .build(&recs)
    }

    #[test]
    fn walks_records_and_validates_counts() {
        let b = batch(&[(10, "a"), (20, "b"), (30, "c")]);
        let v = BatchView::parse(&b).unwrap();
        validate_producer_records(&v).unwrap();
        let mut values = Vec::new();
        walk_records(v.records_payload(), |r| {
            values.push(r.value.unwrap().to_vec())
        })
        .unwrap();
        assert_eq!(values, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn finds_first_record_by_timestamp() {
        let b = batch(&[(10, "a"), (20, "b"), (30, "c")]);
        let v = BatchView::parse(&b).unwrap();
        assert_eq!(first_record_at_or_after(&v, 15).unwrap(), Some((101, 20)));
        assert_eq!(first_record_at_or_after(&v, 5).unwrap(), Some((100, 10)));
        assert_eq!(first_record_at_or_after(&v, 31).unwrap(), None);
    }

    #[test]
    fn compression_round_trips_every_codec() {
        let raw = batch(&[(1, "hello"), (2, "world")]);
        let section = BatchView::parse(&raw).unwrap().records_payload().to_vec();
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let packed = compress_records(codec, &section).unwrap();
            let mut input = Bytes::from(packed);
            let back = match codec {
                Compression::Gzip => Gzip::decompress(&mut input, |b: &mut Bytes| Ok(b.clone())),
                Compression::Snappy => {
                    Snappy::decompress(&mut input, |b: &mut Bytes| Ok(b.clone()))
                }
                Compression::Lz4 => Lz4::decompress(&mut input, |b: &mut Bytes| Ok(b.clone())),
                Compression::Zstd => Zstd::decompress(&mut input, |b: &mut Bytes| Ok(b.clone())),
                Compression::None => unreachable!(),
            }
            .unwrap();
            assert_eq!(&back[..], &section[..], "{codec:?}");
        }
    }

    #[test]
    fn decompression_bombs_stop_at_the_limit() {
        use std::io::Write;
        // ~300 MiB of zeros in a few hundred KiB of gzip, wrapped in a batch
        // header claiming one record.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..300 {
            gz.write_all(&zeros).unwrap();
        }
        let payload = gz.finish().unwrap();
        let mut b = batch(&[(1, "x")]);
        b.truncate(crate::batch::BATCH_HEADER_LEN);
        b.extend_from_slice(&payload);
        let len = (b.len() - crate::batch::LOG_OVERHEAD) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[22] |= 1; // attributes: gzip
        crate::batch::BatchViewMut::new(&mut b).update_crc();
        let v = BatchView::parse(&b).unwrap();
        assert_eq!(
            records_section(&v).unwrap_err(),
            BatchError::Invalid("decompressed batch exceeds the size limit")
        );
    }

    #[test]
    fn a_record_must_end_where_its_length_says() {
        let b = batch(&[(10, "a"), (20, "b")]);
        let section = BatchView::parse(&b).unwrap().records_payload().to_vec();
        let mut raws = Vec::new();
        walk_records(&section, |r| raws.push(r.raw.to_vec())).unwrap();
        assert_eq!(raws.concat(), section, "the records tile the section");
        // The first record's length (a one-byte zigzag varint, 2 x length)
        // claiming a byte less, then a byte more, than its fields take.
        for claim in [section[0] - 2, section[0] + 2] {
            let mut bad = section.clone();
            bad[0] = claim;
            assert!(walk_records(&bad, |_| {}).is_err(), "claim {claim}");
        }
    }

    #[test]
    fn rejects_inconsistent_counts() {
        let mut b = batch(&[(10, "a"), (20, "b")]);
        // claim three records while holding two (and fix up the CRC)
        b[57..61].copy_from_slice(&3i32.to_be_bytes());
        b[23..27].copy_from_slice(&2i32.to_be_bytes());
        crate::batch::BatchViewMut::new(&mut b).update_crc();
        let v = BatchView::parse(&b).unwrap();
        assert!(validate_producer_records(&v).is_err());
    }
}
