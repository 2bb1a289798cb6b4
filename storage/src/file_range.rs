//! A byte range of a segment file, handed from a log read to the network
//! layer, which sends it with `sendfile(2)` or reads it in pieces.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A byte range of a file: one partition's record set, whole batches.
#[derive(Clone)]
pub struct FileRange {
    pub file: Arc<File>,
    pub position: u64,
    pub len: usize,
}

impl std::fmt::Debug for FileRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileRange({}+{})", self.position, self.len)
    }
}

impl FileRange {
    /// Reads `buf.len()` bytes from `at` bytes into the range. A file that
    /// shrank since the range was planned (a truncation racing the write)
    /// is an error: the frame's length is already promised to the client.
    pub fn read_exact_at(&self, at: usize, buf: &mut [u8]) -> io::Result<()> {
        debug_assert!(at + buf.len() <= self.len);
        self.file
            .read_exact_at(buf, self.position + at as u64)
            .map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => shrunk(),
                _ => e,
            })
    }
}

/// The error for a segment file that got shorter while it was being sent.
pub fn shrunk() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "a segment file was truncated while its records were being sent",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> Arc<File> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        Arc::new(f)
    }

    #[test]
    fn a_shrunk_file_is_an_error_not_short_data() {
        let range = FileRange {
            file: file_with(&[1u8; 10]),
            position: 4,
            len: 10,
        };
        let mut buf = [0u8; 6];
        range.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(buf, [1u8; 6]);
        let mut buf = [0u8; 10];
        let e = range.read_exact_at(0, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
