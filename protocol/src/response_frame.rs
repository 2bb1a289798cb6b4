//! [`ResponseFrame`]: an encoded response as a list of chunks written back
//! to back with one vectored write, and the buffer that produces it.
//!
//! Record sets are the bulk of a Fetch response. Encoding them the plain
//! way copies each one into the response buffer (which also regrows as it
//! fills). Instead, [`SpliceBuf`] ends the current chunk where a record set
//! would be copied and takes the record set's `Bytes` as a chunk of its
//! own, so the bytes read from the log go to the socket as they are.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

/// Smaller record sets are copied: a chunk of their own would cost more
/// (an iovec, a refcount) than the copy saves.
pub const SPLICE_MIN: usize = 4096;

/// An encoded response, ready to write.
#[derive(Debug, Default)]
pub struct ResponseFrame {
    chunks: VecDeque<Bytes>,
    remaining: usize,
}

impl ResponseFrame {
    /// A frame of the given chunks, in order.
    pub fn new(chunks: impl IntoIterator<Item = Bytes>) -> Self {
        let chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let remaining = chunks.iter().map(Bytes::len).sum();
        Self { chunks, remaining }
    }

    /// How many chunks the frame holds (record sets spliced in count one each).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The frame in one buffer: its only chunk as it is, or the chunks
    /// copied together.
    pub fn into_bytes(mut self) -> Bytes {
        if self.chunks.len() == 1 {
            return self.chunks.pop_front().expect("one chunk");
        }
        let mut out = BytesMut::with_capacity(self.remaining);
        for c in &self.chunks {
            out.put_slice(c);
        }
        out.freeze()
    }
}

impl From<Bytes> for ResponseFrame {
    fn from(bytes: Bytes) -> Self {
        Self::new([bytes])
    }
}

impl Buf for ResponseFrame {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.chunks.front().map_or(&[], |c| c)
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the frame");
        self.remaining -= cnt;
        while cnt > 0 {
            let front = self.chunks.front_mut().expect("counted");
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.chunks.pop_front();
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, chunk) in dst.iter_mut().zip(&self.chunks) {
            *slot = IoSlice::new(chunk);
            n += 1;
        }
        n
    }
}

/// One piece of a frame being encoded: bytes written here, or a record set
/// shared with its owner.
enum Piece {
    Own(BytesMut),
    Shared(Bytes),
}

/// An encoding buffer that splices `shared` record sets in instead of
/// copying them. Only messages are encoded into it, and their encoders
/// never seek back, so `seek` and `range` need only reach the bytes since
/// the last splice.
pub(crate) struct SpliceBuf<'a> {
    done: Vec<Piece>,
    done_len: usize,
    current: BytesMut,
    shared: &'a [Bytes],
}

impl<'a> SpliceBuf<'a> {
    pub fn new(current: BytesMut, shared: &'a [Bytes]) -> Self {
        Self {
            done: Vec::new(),
            done_len: 0,
            current,
            shared,
        }
    }

    /// The buffer being written, for encoders that need a BytesMut (and
    /// splice nothing).
    pub fn unspliced(&mut self) -> &mut BytesMut {
        &mut self.current
    }

    /// The pieces in order; `patch` may edit the first bytes written (the
    /// size prefix), which are always in the first piece.
    pub fn finish(mut self, patch: impl FnOnce(&mut [u8])) -> ResponseFrame {
        self.done.push(Piece::Own(self.current));
        if let Some(Piece::Own(first)) = self.done.first_mut() {
            patch(first);
        }
        ResponseFrame::new(self.done.into_iter().map(|p| match p {
            Piece::Own(b) => b.freeze(),
            Piece::Shared(b) => b,
        }))
    }

    fn shared_as(&self, src: &[u8]) -> Option<&Bytes> {
        if src.len() < SPLICE_MIN {
            return None;
        }
        self.shared
            .iter()
            .find(|b| b.as_ptr() == src.as_ptr() && b.len() == src.len())
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
        match self.shared_as(src).cloned() {
            Some(shared) => {
                let written = std::mem::take(&mut self.current);
                self.done_len += written.len() + shared.len();
                self.done.push(Piece::Own(written));
                self.done.push(Piece::Shared(shared));
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

    #[test]
    fn shared_slices_become_chunks_and_the_rest_is_copied() {
        let big = Bytes::from(vec![7u8; SPLICE_MIN]);
        let small = Bytes::from(vec![1u8; 10]);
        let lookalike = vec![7u8; SPLICE_MIN];
        let shared = [big.clone(), small.clone()];
        let mut buf = SpliceBuf::new(BytesMut::from(&[0u8; 4][..]), &shared);
        buf.put_u8(9);
        buf.put_slice(&big);
        buf.put_slice(&small); // too small to splice
        buf.put_slice(&lookalike); // equal bytes, another buffer
        assert_eq!(buf.offset(), 4 + 1 + 2 * SPLICE_MIN + 10);
        let frame = buf.finish(|first| first[..4].copy_from_slice(&[1, 2, 3, 4]));
        assert_eq!(frame.chunk_count(), 3);
        let whole = frame.into_bytes();
        assert_eq!(&whole[..5], &[1, 2, 3, 4, 9]);
        assert_eq!(&whole[5..5 + SPLICE_MIN], &big[..]);
        assert_eq!(&whole[5 + SPLICE_MIN..15 + SPLICE_MIN], &small[..]);
        assert_eq!(whole.len(), 15 + 2 * SPLICE_MIN);
    }

    #[test]
    fn a_frame_is_read_across_its_chunks() {
        let mut frame = ResponseFrame::new([
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"cde"),
        ]);
        assert_eq!(frame.remaining(), 5);
        let mut slices = [IoSlice::new(&[]); 4];
        assert_eq!(frame.chunks_vectored(&mut slices), 2);
        frame.advance(3);
        assert_eq!(frame.chunk(), b"de");
        frame.advance(2);
        assert_eq!(frame.remaining(), 0);
        assert!(frame.chunk().is_empty());
    }
}
