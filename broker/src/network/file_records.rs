//! Record sets that stay in their segment files until the response is
//! written: a plaintext socket gets them with `sendfile(2)`, as Kafka's
//! `FileRecords` do, so they are never read into the broker's memory; other
//! transports (TLS) read them in pieces as they write.
//!
//! kafka-protocol's Fetch encoder wants the record bytes as a slice. A
//! record set kept in its file is therefore handed to it as a *stand-in*: a
//! slice of the same length from a read-only anonymous mapping that is never
//! touched (it costs address space, not memory). The encoding buffer
//! ([`super::response_frame`]) recognises each stand-in by its address and
//! puts the file range in the frame in its place, and the encoder checks that
//! every stand-in was replaced, so a stand-in cannot reach a client.

use std::sync::OnceLock;

use bytes::Bytes;
use ottla_storage::file_range::FileRange;

/// Address space for the stand-ins of one response. A response frame is at
/// most 2 GiB (its size is an i32); record sets beyond what fits are read
/// into memory instead.
const STAND_IN_SPACE: usize = 1 << 31;

/// The file-backed record sets of one response, each with its stand-in.
#[derive(Debug, Default)]
pub struct FileRecords {
    sets: Vec<(Bytes, FileRange)>,
    used: usize,
}

impl FileRecords {
    /// A stand-in for `range` to put in the response where its bytes go, or
    /// the range back when no stand-in can be made (the response's stand-in
    /// space is used up, or the mapping failed): read it instead.
    pub fn stand_in(&mut self, range: FileRange) -> Result<Bytes, FileRange> {
        let Some(space) = stand_in_space() else {
            return Err(range);
        };
        let Some(end) = self
            .used
            .checked_add(range.len)
            .filter(|e| *e <= space.len())
        else {
            return Err(range);
        };
        let stand_in = Bytes::from_static(&space[self.used..end]);
        self.used = end;
        self.sets.push((stand_in.clone(), range));
        Ok(stand_in)
    }

    /// The file range a stand-in stands for (same address and length). The
    /// encoder asks this of every slice it writes; the stand-ins are made at
    /// rising addresses, so they are searched by halves.
    pub(crate) fn range_for(&self, src: &[u8]) -> Option<&FileRange> {
        let at = self
            .sets
            .binary_search_by_key(&src.as_ptr(), |(s, _)| s.as_ptr())
            .ok()?;
        let (stand_in, range) = &self.sets[at];
        (stand_in.len() == src.len()).then_some(range)
    }

    /// How many stand-ins were made (the encoder must replace them all).
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// One read-only anonymous mapping, made on first use and kept for the
/// life of the process; nothing ever reads it.
fn stand_in_space() -> Option<&'static [u8]> {
    static SPACE: OnceLock<Option<&'static [u8]>> = OnceLock::new();
    *SPACE.get_or_init(|| {
        // SAFETY: a fresh private anonymous mapping, read-only (so it costs
        // no commit charge), never unmapped: the slice is valid for 'static
        // and reads as zeros.
        unsafe {
            let ptr = libc::mmap(
                std::ptr::null_mut(),
                STAND_IN_SPACE,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            (ptr != libc::MAP_FAILED)
                .then(|| std::slice::from_raw_parts(ptr as *const u8, STAND_IN_SPACE))
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;
    use std::sync::Arc;

    pub(crate) fn file_with(bytes: &[u8]) -> Arc<File> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        Arc::new(f)
    }

    #[test]
    fn stand_ins_are_distinct_and_map_back_to_their_ranges() {
        let file = file_with(&[5u8; 100]);
        let mut records = FileRecords::default();
        let a = records
            .stand_in(FileRange {
                file: file.clone(),
                position: 0,
                len: 40,
            })
            .unwrap();
        let b = records
            .stand_in(FileRange {
                file,
                position: 40,
                len: 60,
            })
            .unwrap();
        assert_ne!(a.as_ptr(), b.as_ptr());
        assert_eq!(records.range_for(&a).unwrap().position, 0);
        assert_eq!(records.range_for(&b).unwrap().len, 60);
        assert!(records.range_for(&a[..39]).is_none(), "length must match");
        assert!(
            records.range_for(&[0u8; 40]).is_none(),
            "address must match"
        );
    }

    #[test]
    fn a_range_past_the_stand_in_space_is_given_back() {
        let mut records = FileRecords::default();
        let too_long = FileRange {
            file: file_with(b""),
            position: 0,
            len: STAND_IN_SPACE + 1,
        };
        assert!(records.stand_in(too_long).is_err());
        assert!(records.is_empty());
    }
}
