//! A small big-endian writer and reader for Kafka's coordinator record
//! schemas: the group and transaction records' non-flexible versions, and
//! the flexible ones (compact lengths, tagged fields) the share
//! coordinator's records use and a log may hold.

use bytes::Bytes;
use ottla_protocol::schema::wire;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed coordinator record: {0}")]
pub struct DecodeError(pub &'static str);

pub type DecodeResult<T> = Result<T, DecodeError>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a field is too long for the coordinator record schema")]
pub struct FieldTooLong;

/// Writes schema fields: non-flexible ones with `int16` string lengths,
/// `int32` byte and array lengths, -1 for null; after
/// [`Writer::set_flexible`], compact lengths, and tagged fields. A value too
/// long for its length prefix fails the whole record at [`Writer::finish`]
/// (Kafka refuses it too).
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
    too_long: bool,
    flexible: bool,
}

impl Writer {
    /// From here on, write the flexible encoding: strings, bytes and array
    /// lengths compact (length + 1, 0 for null).
    pub fn set_flexible(&mut self, flexible: bool) -> &mut Self {
        self.flexible = flexible;
        self
    }

    /// A length prefix: `classic` (`int16` or `int32`) or compact; None
    /// for null (-1, or compact 0).
    fn length(
        &mut self,
        n: Option<usize>,
        classic: fn(&mut Self, Option<usize>) -> bool,
    ) -> &mut Self {
        let fits = if self.flexible {
            let compact = match n {
                None => Some(0),
                Some(n) => u32::try_from(n).ok().and_then(|n| n.checked_add(1)),
            };
            compact.map(|n| self.uvarint(n)).is_some()
        } else {
            classic(self, n)
        };
        if !fits {
            self.too_long = true;
        }
        self
    }

    /// A classic `int16` length, -1 for null; false if it does not fit.
    fn short_length(&mut self, n: Option<usize>) -> bool {
        let n = n.map_or(Ok(-1), i16::try_from);
        n.map(|n| self.i16(n)).is_ok()
    }

    /// A classic `int32` length, -1 for null; false if it does not fit.
    fn long_length(&mut self, n: Option<usize>) -> bool {
        let n = n.map_or(Ok(-1), i32::try_from);
        n.map(|n| self.i32(n)).is_ok()
    }

    pub fn i16(&mut self, v: i16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.nullable_string(Some(s))
    }

    pub fn nullable_string(&mut self, s: Option<&str>) -> &mut Self {
        self.length(s.map(str::len), Self::short_length);
        self.buf.extend_from_slice(s.unwrap_or_default().as_bytes());
        self
    }

    pub fn nullable_bytes(&mut self, b: Option<&[u8]>) -> &mut Self {
        self.length(b.map(<[u8]>::len), Self::long_length);
        self.buf.extend_from_slice(b.unwrap_or_default());
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.nullable_bytes(Some(b))
    }

    /// An array's element count; None for a null array.
    pub fn array_len(&mut self, n: Option<usize>) -> &mut Self {
        self.length(n, Self::long_length)
    }

    pub fn i8(&mut self, v: i8) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn uuid(&mut self, v: &uuid::Uuid) -> &mut Self {
        self.buf.extend_from_slice(v.as_bytes());
        self
    }

    /// Kafka's unsigned varint.
    fn uvarint(&mut self, mut v: u32) -> &mut Self {
        while v >= 0x80 {
            self.buf.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
        self
    }

    /// A flexible version's array length (the count plus one).
    pub fn compact_array_len(&mut self, n: usize) -> &mut Self {
        match u32::try_from(n).ok().and_then(|n| n.checked_add(1)) {
            Some(n) => self.uvarint(n),
            None => {
                self.too_long = true;
                self
            }
        }
    }

    /// A flexible struct's tagged fields, `(tag, value)` in tag order.
    pub fn tagged_fields(&mut self, fields: &[(u32, &[u8])]) -> &mut Self {
        self.uvarint(fields.len() as u32);
        for (tag, value) in fields {
            self.uvarint(*tag).uvarint(value.len() as u32);
            self.buf.extend_from_slice(value);
        }
        self
    }

    pub fn finish(self) -> Result<Vec<u8>, FieldTooLong> {
        if self.too_long {
            return Err(FieldTooLong);
        }
        Ok(self.buf)
    }
}

/// Reads schema fields over the protocol crate's reader; `flexible`
/// switches lengths to unsigned varints (length + 1, 0 for null) as
/// flexible versions encode them.
pub struct Reader<'a> {
    inner: wire::Reader<'a>,
    flexible: bool,
}

/// The shared reader's error, as this codec names it.
fn decode_error(e: wire::DecodeError) -> DecodeError {
    match e.kind {
        wire::DecodeErrorKind::Truncated { .. } => DecodeError("truncated"),
        wire::DecodeErrorKind::VarintTooLong => DecodeError("varint too long"),
        _ => DecodeError("malformed field"),
    }
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            inner: wire::Reader::new(buf),
            flexible: false,
        }
    }

    /// From here on, read the flexible encoding.
    pub fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }

    fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        self.inner.take(n as u64).map_err(decode_error)
    }

    pub fn i16(&mut self) -> DecodeResult<i16> {
        self.inner.i16().map_err(decode_error)
    }

    pub fn i32(&mut self) -> DecodeResult<i32> {
        self.inner.i32().map_err(decode_error)
    }

    pub fn i64(&mut self) -> DecodeResult<i64> {
        self.inner.i64().map_err(decode_error)
    }

    pub fn i8(&mut self) -> DecodeResult<i8> {
        self.inner.i8().map_err(decode_error)
    }

    pub fn uuid(&mut self) -> DecodeResult<uuid::Uuid> {
        self.inner.uuid().map_err(decode_error)
    }

    fn uvarint(&mut self) -> DecodeResult<u32> {
        self.inner.unsigned_varint().map_err(decode_error)
    }

    /// A length prefix; None for null.
    fn length(
        &mut self,
        classic: impl FnOnce(&mut Self) -> DecodeResult<i32>,
    ) -> DecodeResult<Option<usize>> {
        let n = if self.flexible {
            i64::from(self.uvarint()?) - 1
        } else {
            i64::from(classic(self)?)
        };
        Ok(usize::try_from(n).ok())
    }

    pub fn nullable_string(&mut self) -> DecodeResult<Option<String>> {
        let Some(n) = self.length(|r| r.i16().map(i32::from))? else {
            return Ok(None);
        };
        let raw = self.take(n)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| DecodeError("string is not UTF-8"))
    }

    pub fn string(&mut self) -> DecodeResult<String> {
        self.nullable_string()?
            .ok_or(DecodeError("null in a non-nullable string"))
    }

    pub fn bytes(&mut self) -> DecodeResult<Bytes> {
        self.nullable_bytes()?
            .ok_or(DecodeError("null in a non-nullable bytes field"))
    }

    pub fn nullable_bytes(&mut self) -> DecodeResult<Option<Bytes>> {
        let Some(n) = self.length(Self::i32)? else {
            return Ok(None);
        };
        Ok(Some(Bytes::copy_from_slice(self.take(n)?)))
    }

    /// An array's element count.
    pub fn array_len(&mut self) -> DecodeResult<usize> {
        self.nullable_array_len()?
            .ok_or(DecodeError("null in a non-nullable array"))
    }

    /// An array's element count; None for a null array.
    pub fn nullable_array_len(&mut self) -> DecodeResult<Option<usize>> {
        self.length(Self::i32)
    }

    /// A flexible struct's tagged fields as `(tag, value bytes)` pairs.
    pub fn tagged_fields(&mut self) -> DecodeResult<Vec<(u32, &'a [u8])>> {
        let count = self.uvarint()?;
        let mut fields = Vec::with_capacity(count.min(16) as usize);
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            fields.push((tag, self.take(size)?));
        }
        Ok(fields)
    }

    /// Skips a flexible struct's tagged fields (none are defined that Ottla
    /// needs); a no-op for non-flexible versions.
    pub fn skip_tagged_fields(&mut self) -> DecodeResult<()> {
        if !self.flexible {
            return Ok(());
        }
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_classic_fields() {
        let mut w = Writer::default();
        w.i16(-2)
            .i32(7)
            .i64(-9)
            .string("ab")
            .nullable_string(None)
            .bytes(b"xyz");
        let buf = w.finish().unwrap();
        let mut r = Reader::new(&buf);
        assert_eq!(r.i16().unwrap(), -2);
        assert_eq!(r.i32().unwrap(), 7);
        assert_eq!(r.i64().unwrap(), -9);
        assert_eq!(r.string().unwrap(), "ab");
        assert_eq!(r.nullable_string().unwrap(), None);
        assert_eq!(&r.bytes().unwrap()[..], b"xyz");
        assert!(r.i16().is_err());
    }

    #[test]
    fn round_trips_flexible_fields() {
        let id = uuid::Uuid::from_u128(42);
        let mut w = Writer::default();
        w.i8(-3)
            .uuid(&id)
            .compact_array_len(200)
            .tagged_fields(&[(0, &[1, 2, 3])]);
        let buf = w.finish().unwrap();
        let mut r = Reader::new(&buf);
        r.set_flexible(true);
        assert_eq!(r.i8().unwrap(), -3);
        assert_eq!(r.uuid().unwrap(), id);
        assert_eq!(r.array_len().unwrap(), 200, "two varint bytes");
        assert_eq!(r.tagged_fields().unwrap(), vec![(0, &[1u8, 2, 3][..])]);
    }

    #[test]
    fn refuses_strings_longer_than_their_length_prefix() {
        let mut w = Writer::default();
        w.string(&"x".repeat(40_000));
        assert_eq!(w.finish(), Err(FieldTooLong));
    }

    #[test]
    fn reads_flexible_fields() {
        // compact string "ab", compact null string, compact bytes [1],
        // one tagged field (tag 0, 2 bytes), array of 2.
        let buf = [3, b'a', b'b', 0, 2, 1, 1, 0, 2, 9, 9, 3];
        let mut r = Reader::new(&buf);
        r.set_flexible(true);
        assert_eq!(r.string().unwrap(), "ab");
        assert_eq!(r.nullable_string().unwrap(), None);
        assert_eq!(&r.bytes().unwrap()[..], &[1]);
        r.skip_tagged_fields().unwrap();
        assert_eq!(r.array_len().unwrap(), 2);
    }
}
