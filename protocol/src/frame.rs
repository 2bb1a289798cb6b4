//! Kafka framing: every request and response is a big-endian int32 size
//! followed by that many bytes.
//!
//! The reader never trusts the size prefix for allocation: it validates it
//! against `socket.request.max.bytes` and then grows its buffer only as bytes
//! actually arrive, so a client claiming 100 MiB and sending nothing holds a
//! few KiB. The buffer doubles as bytes arrive (a large frame costs O(size)
//! copying), or grows at once to the size of the last frame the same stream
//! sent whole: a producer's requests are alike, and its next one is then
//! read into one buffer without copies.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Kafka's default `socket.request.max.bytes` (100 MiB).
pub const DEFAULT_MAX_REQUEST_SIZE: usize = 100 * 1024 * 1024;

/// Bytes in the size prefix.
pub const SIZE_PREFIX_LEN: usize = 4;

/// Smallest read we ask the socket for within a frame, so pipelined small
/// requests arrive in few syscalls.
const MIN_READ: usize = 8 * 1024;

/// The buffer a frame starts in. Most requests fit, and an idle connection,
/// which waits here between frames, holds no more than this: 10,000 idle
/// connections cost about 10 MiB of buffers rather than 80.
const FIRST_READ: usize = 1024;

/// Why a connection's byte stream is no longer usable. Every variant means
/// "close this connection"; the message is what gets logged.
#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame size prefix {0} is negative")]
    NegativeSize(i32),
    #[error("frame size {size} exceeds socket.request.max.bytes ({max})")]
    TooLarge { size: usize, max: usize },
    #[error("connection closed in the middle of a frame ({buffered} bytes buffered)")]
    Truncated { buffered: usize },
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// Validates a size prefix against the cap.
fn frame_len(prefix: [u8; SIZE_PREFIX_LEN], max: usize) -> Result<usize, FrameError> {
    let size = i32::from_be_bytes(prefix);
    let len = usize::try_from(size).map_err(|_| FrameError::NegativeSize(size))?;
    if len > max {
        return Err(FrameError::TooLarge { size: len, max });
    }
    Ok(len)
}

/// Splits one complete frame (without its prefix) off the front of `buf`.
/// Returns `Ok(None)` when more bytes are needed. The frame shares `buf`'s
/// allocation, so decoding it later is zero-copy.
pub fn decode_frame(buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, FrameError> {
    let Some(prefix) = buf.first_chunk::<SIZE_PREFIX_LEN>() else {
        return Ok(None);
    };
    let len = frame_len(*prefix, max)?;
    if buf.len() < SIZE_PREFIX_LEN + len {
        return Ok(None);
    }
    buf.advance(SIZE_PREFIX_LEN);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Bytes still missing before the frame at the front of `buf` is complete.
/// Only called after [`decode_frame`] returned `Ok(None)`, so the prefix (if
/// present) is valid.
fn missing_bytes(buf: &BytesMut, max: usize) -> usize {
    match buf.first_chunk::<SIZE_PREFIX_LEN>() {
        Some(prefix) => {
            let len = frame_len(*prefix, max).unwrap_or(0);
            (SIZE_PREFIX_LEN + len).saturating_sub(buf.len())
        }
        None => SIZE_PREFIX_LEN - buf.len(),
    }
}

/// Reads size-prefixed frames from a byte stream.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    buf: BytesMut,
    max: usize,
    /// The length of the last frame returned: bytes this stream did send.
    last_frame_len: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// `max` is `socket.request.max.bytes`: larger frames are refused.
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            buf: BytesMut::new(),
            max,
            last_frame_len: 0,
        }
    }

    /// The stream and what was read from it beyond the frames returned so
    /// far, for a caller that switches the connection to another protocol.
    pub fn into_parts(self) -> (R, BytesMut) {
        (self.inner, self.buf)
    }

    /// Changes the frame cap, e.g. a smaller one until a client has
    /// authenticated.
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
    }

    /// The size of the next frame, once its prefix has arrived (validated
    /// against the cap), or `None` on a clean end of stream between frames.
    /// Lets a caller reserve memory before the body is read.
    ///
    /// Cancel-safe, like [`next_frame`](Self::next_frame).
    pub async fn next_frame_len(&mut self) -> Result<Option<usize>, FrameError> {
        while self.buf.len() < SIZE_PREFIX_LEN {
            self.make_room(MIN_READ);
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                return match self.buf.len() {
                    0 => Ok(None),
                    buffered => Err(FrameError::Truncated { buffered }),
                };
            }
        }
        let prefix = *self.buf.first_chunk().expect("a whole prefix is buffered");
        frame_len(prefix, self.max).map(Some)
    }

    /// Room for the next read: `grow` more bytes within a frame; between
    /// frames a fresh small buffer, which also lets go of the last frame's
    /// (a big request's allocation would otherwise stay with an idle
    /// connection).
    fn make_room(&mut self, grow: usize) {
        if self.buf.is_empty() {
            self.buf = BytesMut::with_capacity(FIRST_READ);
        } else {
            self.buf.reserve(grow);
        }
    }

    /// The next frame, or `None` on a clean end of stream between frames.
    ///
    /// Cancel-safe: bytes already read stay buffered in `self`, so it can be
    /// used in `tokio::select!`.
    pub async fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            if let Some(frame) = decode_frame(&mut self.buf, self.max)? {
                self.last_frame_len = frame.len();
                return Ok(Some(frame));
            }
            // Grow with what is missing, but never by more than the buffer's
            // current size or the last frame's: memory follows bytes this
            // stream has sent, not the claim.
            let missing = missing_bytes(&self.buf, self.max);
            let grow = missing
                .min(self.buf.capacity().max(self.last_frame_len).max(MIN_READ))
                .max(MIN_READ);
            self.make_room(grow);
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                return match self.buf.len() {
                    0 => Ok(None),
                    buffered => Err(FrameError::Truncated { buffered }),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            out.extend_from_slice(&(p.len() as i32).to_be_bytes());
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn splits_frames_and_waits_for_partial_ones() {
        let wire = framed(&[b"abc", b"", b"defgh"]);
        let mut buf = BytesMut::from(&wire[..wire.len() - 2]);
        assert_eq!(decode_frame(&mut buf, 100).unwrap().unwrap(), &b"abc"[..]);
        assert_eq!(decode_frame(&mut buf, 100).unwrap().unwrap(), &b""[..]);
        assert!(decode_frame(&mut buf, 100).unwrap().is_none());
        buf.extend_from_slice(&wire[wire.len() - 2..]);
        assert_eq!(decode_frame(&mut buf, 100).unwrap().unwrap(), &b"defgh"[..]);
        assert!(buf.is_empty());
    }

    #[test]
    fn short_prefixes_wait_for_more() {
        for n in 0..SIZE_PREFIX_LEN {
            let mut buf = BytesMut::from(&[0u8, 0, 0, 1][..n]);
            assert!(decode_frame(&mut buf, 100).unwrap().is_none());
        }
    }

    #[test]
    fn negative_and_oversized_prefixes_are_refused() {
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert!(matches!(
            decode_frame(&mut buf, 100),
            Err(FrameError::NegativeSize(-1))
        ));
        let mut buf = BytesMut::from(&i32::MAX.to_be_bytes()[..]);
        assert!(matches!(
            decode_frame(&mut buf, DEFAULT_MAX_REQUEST_SIZE),
            Err(FrameError::TooLarge { size, .. }) if size == i32::MAX as usize
        ));
        let mut buf = BytesMut::from(&101i32.to_be_bytes()[..]);
        assert!(matches!(
            decode_frame(&mut buf, 100),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn reader_yields_frames_then_clean_eof() {
        let wire = framed(&[b"one", b"two"]);
        let mut reader = FrameReader::new(&wire[..], 100);
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), &b"one"[..]);
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), &b"two"[..]);
        assert!(reader.next_frame().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn reader_reports_eof_inside_a_frame() {
        let wire = framed(&[b"hello"]);
        let mut reader = FrameReader::new(&wire[..6], 100);
        assert!(matches!(
            reader.next_frame().await,
            Err(FrameError::Truncated { buffered: 6 })
        ));
    }

    #[tokio::test]
    async fn a_huge_claim_does_not_allocate_the_claim() {
        // Claims 100 MiB, sends 10 bytes, then stalls at EOF.
        let mut wire = (DEFAULT_MAX_REQUEST_SIZE as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&[0; 10]);
        let mut reader = FrameReader::new(&wire[..], DEFAULT_MAX_REQUEST_SIZE);
        assert!(matches!(
            reader.next_frame().await,
            Err(FrameError::Truncated { .. })
        ));
        assert!(reader.buf.capacity() < 1 << 20);
    }

    #[tokio::test]
    async fn a_reader_waiting_between_frames_holds_a_small_buffer() {
        let big = vec![7u8; 300_000];
        let wire = framed(&[&big]);
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        tokio::io::AsyncWriteExt::write_all(&mut tx, &wire)
            .await
            .unwrap();
        let mut reader = FrameReader::new(rx, DEFAULT_MAX_REQUEST_SIZE);
        assert_eq!(reader.next_frame().await.unwrap().unwrap().len(), big.len());
        // Nothing more arrives: the reader waits, as an idle connection does.
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(20), reader.next_frame()).await;
        assert!(waiting.is_err(), "no frame was sent");
        assert!(
            reader.buf.capacity() <= FIRST_READ,
            "an idle reader holds {} bytes",
            reader.buf.capacity()
        );
        // The next frame still arrives whole.
        tokio::io::AsyncWriteExt::write_all(&mut tx, &framed(&[b"next"]))
            .await
            .unwrap();
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), &b"next"[..]);
    }

    #[tokio::test]
    async fn large_frames_arrive_intact_across_many_reads() {
        let payload: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let wire = framed(&[&payload]);
        let (mut tx, rx) = tokio::io::duplex(4096);
        let writer = tokio::spawn(async move {
            tokio::io::AsyncWriteExt::write_all(&mut tx, &wire)
                .await
                .unwrap();
        });
        let mut reader = FrameReader::new(rx, DEFAULT_MAX_REQUEST_SIZE);
        let frame = reader.next_frame().await.unwrap().unwrap();
        assert_eq!(&frame[..], &payload[..]);
        writer.await.unwrap();
        assert!(reader.next_frame().await.unwrap().is_none());
    }

    /// A stream that counts the reads it answers.
    struct CountingStream<'a> {
        data: &'a [u8],
        reads: usize,
    }

    impl tokio::io::AsyncRead for CountingStream<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            self.reads += 1;
            std::pin::Pin::new(&mut self.data).poll_read(cx, buf)
        }
    }

    #[tokio::test]
    async fn a_frame_like_the_last_one_is_read_into_one_buffer() {
        let body = vec![3u8; 500_000];
        let wire = framed(&[&body, &body]);
        let stream = CountingStream {
            data: &wire,
            reads: 0,
        };
        let mut reader = FrameReader::new(stream, DEFAULT_MAX_REQUEST_SIZE);
        assert_eq!(
            reader.next_frame().await.unwrap().unwrap().len(),
            body.len()
        );
        let first = reader.inner.reads;
        assert!(first > 5, "the first frame doubles its way: {first} reads");
        assert_eq!(
            reader.next_frame().await.unwrap().unwrap().len(),
            body.len()
        );
        // The prefix's read (or the first frame's last), then the rest at once.
        let second = reader.inner.reads - first;
        assert!(second <= 2, "{second} reads");
    }

    #[tokio::test]
    async fn a_small_frame_does_not_open_the_way_to_a_huge_claim() {
        let mut wire = framed(&[b"small"]);
        wire.extend_from_slice(&(DEFAULT_MAX_REQUEST_SIZE as i32).to_be_bytes());
        wire.extend_from_slice(&[0; 100_000]);
        let mut reader = FrameReader::new(&wire[..], DEFAULT_MAX_REQUEST_SIZE);
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), &b"small"[..]);
        assert!(matches!(
            reader.next_frame().await,
            Err(FrameError::Truncated { .. })
        ));
        assert!(reader.buf.capacity() < 1 << 20);
    }

    #[tokio::test]
    async fn the_length_comes_before_the_body() {
        let wire = framed(&[b"one", b"two!"]);
        let mut reader = FrameReader::new(&wire[..], 100);
        assert_eq!(reader.next_frame_len().await.unwrap(), Some(3));
        assert_eq!(
            reader.next_frame_len().await.unwrap(),
            Some(3),
            "peeking consumes nothing"
        );
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), &b"one"[..]);
        assert_eq!(reader.next_frame_len().await.unwrap(), Some(4));
        assert_eq!(reader.next_frame().await.unwrap().unwrap(), &b"two!"[..]);
        assert_eq!(reader.next_frame_len().await.unwrap(), None);
        let oversized = framed(&[&[0u8; 101]]);
        let mut reader = FrameReader::new(&oversized[..], 100);
        assert!(matches!(
            reader.next_frame_len().await,
            Err(FrameError::TooLarge { size: 101, .. })
        ));
    }
}
