//! Writing the flexible encoding (compact strings and arrays, UUIDs, tagged
//! fields) that Kafka uses for every KIP-848 record value. Reading goes
//! through `codec::Reader` in flexible mode.

use uuid::Uuid;

use super::codec::FieldTooLong;

/// Writes one flexible record value, starting with its `int16` version.
pub struct FlexWriter {
    buf: Vec<u8>,
    too_long: bool,
}

impl FlexWriter {
    pub fn new(version: i16) -> Self {
        Self {
            buf: version.to_be_bytes().to_vec(),
            too_long: false,
        }
    }

    /// A writer for a nested struct (a tagged field's value): no version.
    pub fn nested() -> Self {
        Self {
            buf: Vec::new(),
            too_long: false,
        }
    }

    pub fn i8(&mut self, v: i8) -> &mut Self {
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

    pub fn uuid(&mut self, v: &Uuid) -> &mut Self {
        self.buf.extend_from_slice(v.as_bytes());
        self
    }

    fn uvarint(&mut self, mut v: u32) -> &mut Self {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
        self
    }

    /// A compact length: `n + 1`, so that 0 can mean null. Kafka's strings
    /// stop at `i16::MAX` bytes; longer values fail the record.
    fn length(&mut self, n: usize, max: usize) -> &mut Self {
        match u32::try_from(n + 1) {
            Ok(v) if n <= max => self.uvarint(v),
            _ => {
                self.too_long = true;
                self
            }
        }
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.length(s.len(), i16::MAX as usize);
        self.buf.extend_from_slice(s.as_bytes());
        self
    }

    pub fn nullable_string(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.string(s),
            None => self.uvarint(0),
        }
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.length(b.len(), i32::MAX as usize);
        self.buf.extend_from_slice(b);
        self
    }

    /// The element count of a (non-null) compact array.
    pub fn array_len(&mut self, n: usize) -> &mut Self {
        self.length(n, i32::MAX as usize)
    }

    /// No tagged fields.
    pub fn no_tags(&mut self) -> &mut Self {
        self.uvarint(0)
    }

    /// Tagged fields, in increasing tag order: `(tag, value bytes)`.
    pub fn tags(&mut self, fields: &[(u32, Vec<u8>)]) -> &mut Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Reader;

    #[test]
    fn round_trips_through_the_flexible_reader() {
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let mut w = FlexWriter::new(0);
        w.string("ab")
            .nullable_string(None)
            .i8(-3)
            .uuid(&id)
            .array_len(2)
            .i32(7)
            .i32(8)
            .tags(&[(0, 42i64.to_be_bytes().to_vec())]);
        let buf = w.finish().unwrap();
        assert_eq!(&buf[..5], &[0, 0, 3, b'a', b'b']);
        let mut r = Reader::new(&buf);
        assert_eq!(r.i16().unwrap(), 0);
        r.set_flexible(true);
        assert_eq!(r.string().unwrap(), "ab");
        assert_eq!(r.nullable_string().unwrap(), None);
        assert_eq!(r.i8().unwrap(), -3);
        assert_eq!(r.uuid().unwrap(), id);
        assert_eq!(r.array_len().unwrap(), 2);
        assert_eq!((r.i32().unwrap(), r.i32().unwrap()), (7, 8));
        let tags = r.tagged_fields().unwrap();
        assert_eq!(tags, vec![(0, &42i64.to_be_bytes()[..])]);
    }

    #[test]
    fn refuses_overlong_strings() {
        let mut w = FlexWriter::new(0);
        w.string(&"x".repeat(40_000));
        assert_eq!(w.finish(), Err(FieldTooLong));
    }
}
