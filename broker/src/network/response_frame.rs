//! [`ResponseFrame`]: an encoded response as a list of chunks written back
//! to back, and the buffer that produces it.
//!
//! Record sets are the bulk of a Fetch response. Encoding them the plain
//! way copies each one into the response buffer (which also regrows as it
//! fills). Instead, [`SpliceBuf`] ends the current chunk where a record set
//! would be copied and puts the record set in as a chunk of its own: its
//! `Bytes` when it was read into memory, or its file range when it stayed in
//! the segment file ([`super::file_records`]), which a plaintext socket gets
//! with `sendfile(2)`.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use ottla_storage::file_range::{shrunk, FileRange};

use super::file_records::FileRecords;

/// Smaller record sets are copied: a chunk of their own would cost more
/// (an iovec, a refcount) than the copy saves.
pub const SPLICE_MIN: usize = 4096;

/// How many memory chunks one vectored write takes at most.
const MAX_IOVECS: usize = 64;

/// How much of a file chunk is read into memory at a time where it cannot
/// go to the socket directly (TLS).
const FILE_READ_PIECE: usize = 256 * 1024;

/// One piece of an encoded response.
#[derive(Debug)]
enum Chunk {
    Memory(Bytes),
    File(FileRange),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Memory(b) => b.len(),
            Chunk::File(f) => f.len,
        }
    }
}

/// An encoded response, ready to write.
#[derive(Debug, Default)]
pub struct ResponseFrame {
    chunks: VecDeque<Chunk>,
    remaining: usize,
}

impl ResponseFrame {
    /// A frame of the given chunks, in order.
    pub fn new(chunks: impl IntoIterator<Item = Bytes>) -> Self {
        Self::of(chunks.into_iter().map(Chunk::Memory))
    }

    fn of(chunks: impl IntoIterator<Item = Chunk>) -> Self {
        let chunks: VecDeque<Chunk> = chunks.into_iter().filter(|c| c.len() > 0).collect();
        let remaining = chunks.iter().map(Chunk::len).sum();
        Self { chunks, remaining }
    }

    /// Bytes left to write.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// How many chunks the frame holds (record sets spliced in count one each).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// How many chunks are file ranges.
    pub fn file_chunk_count(&self) -> usize {
        self.chunks
            .iter()
            .filter(|c| matches!(c, Chunk::File(_)))
            .count()
    }

    /// The frame in one buffer: its only chunk as it is, or the chunks
    /// copied (and file ranges read) together.
    pub fn into_bytes(mut self) -> io::Result<Bytes> {
        if let [Chunk::Memory(_)] = self.chunks.make_contiguous() {
            let Some(Chunk::Memory(only)) = self.chunks.pop_front() else {
                unreachable!("matched above")
            };
            return Ok(only);
        }
        let mut out = BytesMut::zeroed(self.remaining);
        let mut at = 0;
        for c in &self.chunks {
            let dst = &mut out[at..at + c.len()];
            match c {
                Chunk::Memory(b) => dst.copy_from_slice(b),
                Chunk::File(f) => f.read_exact_at(0, dst)?,
            }
            at += c.len();
        }
        Ok(out.freeze())
    }

    /// Writes the frame through any writer (a TLS stream): memory chunks
    /// with vectored writes, file ranges read into memory a piece at a time.
    pub async fn write_to<W: AsyncWrite + Unpin>(mut self, write: &mut W) -> io::Result<()> {
        let mut piece = Vec::new();
        while let Some(front) = self.chunks.front_mut() {
            match front {
                Chunk::Memory(_) => {
                    let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
                    let count = self.memory_slices(&mut slices);
                    let n = write.write_vectored(&slices[..count]).await?;
                    if n == 0 {
                        return Err(io::ErrorKind::WriteZero.into());
                    }
                    self.advance(n);
                }
                Chunk::File(range) => {
                    let len = range.len.min(FILE_READ_PIECE);
                    piece.resize(len, 0);
                    range.read_exact_at(0, &mut piece)?;
                    write.write_all(&piece).await?;
                    self.advance(len);
                }
            }
        }
        Ok(())
    }

    /// Writes the frame to a plaintext socket: memory chunks with vectored
    /// writes, file ranges from the page cache with `sendfile(2)`.
    pub async fn send_to(mut self, socket: &TcpStream) -> io::Result<()> {
        while let Some(front) = self.chunks.front() {
            socket.writable().await?;
            let sent = match front {
                Chunk::Memory(_) => {
                    let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
                    let count = self.memory_slices(&mut slices);
                    socket.try_write_vectored(&slices[..count])
                }
                Chunk::File(range) => socket.try_io(Interest::WRITABLE, || sendfile(socket, range)),
            };
            match sent {
                Ok(0) if matches!(front, Chunk::File(_)) => return Err(shrunk()),
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Fills `dst` with the memory chunks at the front, up to the next file
    /// range, and says how many (no allocation per write).
    fn memory_slices<'a>(&'a self, dst: &mut [IoSlice<'a>; MAX_IOVECS]) -> usize {
        let memory = self.chunks.iter().map_while(|c| match c {
            Chunk::Memory(b) => Some(b),
            Chunk::File(_) => None,
        });
        let mut count = 0;
        for (slot, chunk) in dst.iter_mut().zip(memory) {
            *slot = IoSlice::new(chunk);
            count += 1;
        }
        count
    }

    /// Drops `cnt` written bytes from the front.
    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the frame");
        self.remaining -= cnt;
        while cnt > 0 {
            let front = self.chunks.front_mut().expect("counted");
            let len = front.len();
            if cnt < len {
                match front {
                    Chunk::Memory(b) => b.advance(cnt),
                    Chunk::File(f) => {
                        f.position += cnt as u64;
                        f.len -= cnt;
                    }
                }
                return;
            }
            cnt -= len;
            self.chunks.pop_front();
        }
    }
}

/// One `sendfile(2)` of the front of `range` to the socket.
fn sendfile(socket: &TcpStream, range: &FileRange) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut offset = libc::off_t::try_from(range.position)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset out of range"))?;
    // Linux sends at most 0x7ffff000 bytes per call anyway.
    let count = range.len.min(0x7fff_f000);
    // SAFETY: both descriptors are open for the duration of the call (the
    // socket is borrowed, the file held by its Arc) and `offset` is a local.
    let n = unsafe {
        libc::sendfile(
            socket.as_raw_fd(),
            range.file.as_raw_fd(),
            &mut offset,
            count,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl From<Bytes> for ResponseFrame {
    fn from(bytes: Bytes) -> Self {
        Self::new([bytes])
    }
}

/// One piece of a frame being encoded: bytes written here, a record set
/// shared with its owner, or a record set left in its file.
enum Piece {
    Own(BytesMut),
    Shared(Bytes),
    File(FileRange),
}

/// An encoding buffer that splices `shared` record sets, and the stand-ins
/// of `files`, in instead of copying them. Only messages are encoded into
/// it, and their encoders never seek back, so `seek` and `range` need only
/// reach the bytes since the last splice.
pub(crate) struct SpliceBuf<'a> {
    done: Vec<Piece>,
    done_len: usize,
    current: BytesMut,
    shared: &'a [Bytes],
    files: &'a FileRecords,
    files_spliced: usize,
}

impl<'a> SpliceBuf<'a> {
    pub fn new(current: BytesMut, shared: &'a [Bytes], files: &'a FileRecords) -> Self {
        Self {
            done: Vec::new(),
            done_len: 0,
            current,
            shared,
            files,
            files_spliced: 0,
        }
    }

    /// The buffer being written, for encoders that need a BytesMut (and
    /// splice nothing).
    pub fn unspliced(&mut self) -> &mut BytesMut {
        &mut self.current
    }

    /// How many of `files`' stand-ins were met and replaced so far.
    pub fn files_spliced(&self) -> usize {
        self.files_spliced
    }

    /// The pieces in order; `patch` may edit the first bytes written (the
    /// size prefix), which are always in the first piece.
    pub fn finish(mut self, patch: impl FnOnce(&mut [u8])) -> ResponseFrame {
        self.done.push(Piece::Own(self.current));
        if let Some(Piece::Own(first)) = self.done.first_mut() {
            patch(first);
        }
        ResponseFrame::of(self.done.into_iter().map(|p| match p {
            Piece::Own(b) => Chunk::Memory(b.freeze()),
            Piece::Shared(b) => Chunk::Memory(b),
            Piece::File(f) => Chunk::File(f),
        }))
    }

    fn splice_for(&self, src: &[u8]) -> Option<Piece> {
        if let Some(range) = self.files.range_for(src) {
            return Some(Piece::File(range.clone()));
        }
        if src.len() < SPLICE_MIN {
            return None;
        }
        self.shared
            .iter()
            .find(|b| b.as_ptr() == src.as_ptr() && b.len() == src.len())
            .map(|b| Piece::Shared(b.clone()))
    }
}

// SAFETY: every method forwards to `current`, a BytesMut, except
// `put_slice`, which only appends through safe calls.
unsafe impl BufMut for SpliceBuf<'_> {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut`, which
        // is `current`'s.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.splice_for(src) {
            Some(piece) => {
                if matches!(piece, Piece::File(_)) {
                    self.files_spliced += 1;
                }
                let written = std::mem::take(&mut self.current);
                self.done_len += written.len() + src.len();
                self.done.push(Piece::Own(written));
                self.done.push(piece);
            }
            None => self.current.put_slice(src),
        }
    }
}

impl ByteBufMut for SpliceBuf<'_> {
    fn offset(&self) -> usize {
        self.done_len + self.current.len()
    }

    fn seek(&mut self, offset: usize) {
        let local = offset
            .checked_sub(self.done_len)
            .expect("message encoders never seek before a spliced record set");
        self.current.resize(local, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        let base = self.done_len;
        &mut self.current[r.start - base..r.end - base]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::file_records::tests::file_with;
    use tokio::io::AsyncReadExt;

    #[test]
    fn shared_slices_become_chunks_and_the_rest_is_copied() {
        let big = Bytes::from(vec![7u8; SPLICE_MIN]);
        let small = Bytes::from(vec![1u8; 10]);
        let lookalike = vec![7u8; SPLICE_MIN];
        let shared = [big.clone(), small.clone()];
        let files = FileRecords::default();
        let mut buf = SpliceBuf::new(BytesMut::from(&[0u8; 4][..]), &shared, &files);
        buf.put_u8(9);
        buf.put_slice(&big);
        buf.put_slice(&small); // too small to splice
        buf.put_slice(&lookalike); // equal bytes, another buffer
        assert_eq!(buf.offset(), 4 + 1 + 2 * SPLICE_MIN + 10);
        let frame = buf.finish(|first| first[..4].copy_from_slice(&[1, 2, 3, 4]));
        assert_eq!(frame.chunk_count(), 3);
        let whole = frame.into_bytes().unwrap();
        assert_eq!(&whole[..5], &[1, 2, 3, 4, 9]);
        assert_eq!(&whole[5..5 + SPLICE_MIN], &big[..]);
        assert_eq!(&whole[5 + SPLICE_MIN..15 + SPLICE_MIN], &small[..]);
        assert_eq!(whole.len(), 15 + 2 * SPLICE_MIN);
    }

    #[test]
    fn stand_ins_become_file_chunks() {
        let contents: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
        let file = file_with(&contents);
        let mut files = FileRecords::default();
        let stand_in = files
            .stand_in(FileRange {
                file,
                position: 100,
                len: 10_000,
            })
            .unwrap();
        let mut buf = SpliceBuf::new(BytesMut::new(), &[], &files);
        buf.put_slice(b"head");
        buf.put_slice(&stand_in);
        buf.put_slice(b"tail");
        assert_eq!(buf.files_spliced(), 1);
        let frame = buf.finish(|_| {});
        assert_eq!(frame.file_chunk_count(), 1);
        let whole = frame.into_bytes().unwrap();
        assert_eq!(&whole[..4], b"head");
        assert_eq!(&whole[4..10_004], &contents[100..10_100]);
        assert_eq!(&whole[10_004..], b"tail");
    }

    /// Memory chunks around two file ranges of a file large enough that
    /// the socket takes it in several calls.
    fn mixed_frame() -> (ResponseFrame, Vec<u8>) {
        let contents: Vec<u8> = (0..6_000_000u32).map(|i| (i % 251) as u8).collect();
        let file = file_with(&contents);
        let range = |position: usize, len: usize| {
            Chunk::File(FileRange {
                file: file.clone(),
                position: position as u64,
                len,
            })
        };
        let frame = ResponseFrame::of([
            Chunk::Memory(Bytes::from_static(b"ab")),
            Chunk::Memory(Bytes::new()),
            range(7, 4_000_000),
            Chunk::Memory(Bytes::from_static(b"cde")),
            range(5_000_000, 1_000_000),
        ]);
        let expected = [
            &b"ab"[..],
            &contents[7..4_000_007],
            b"cde",
            &contents[5_000_000..6_000_000],
        ]
        .concat();
        (frame, expected)
    }

    #[tokio::test]
    async fn a_frame_is_written_through_any_writer() {
        let (frame, expected) = mixed_frame();
        assert_eq!(frame.remaining(), expected.len());
        let mut out = Vec::new();
        frame.write_to(&mut out).await.unwrap();
        assert_eq!(out, expected);
    }

    #[tokio::test]
    async fn a_frame_is_sent_to_a_socket_with_sendfile() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (frame, expected) = mixed_frame();
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; expected.len()];
            server.read_exact(&mut got).await.unwrap();
            assert!(got == expected, "the bytes sent are the frame's");
        });
        frame.send_to(&client).await.unwrap();
        reader.await.unwrap();
    }

    #[tokio::test]
    async fn a_file_that_shrank_fails_the_write() {
        let file = file_with(&[1u8; 100]);
        let short = |len| {
            ResponseFrame::of([Chunk::File(FileRange {
                file: file.clone(),
                position: 50,
                len,
            })])
        };
        let e = short(80).write_to(&mut Vec::new()).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let _server = listener.accept().await.unwrap();
        let e = short(80).send_to(&client).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
