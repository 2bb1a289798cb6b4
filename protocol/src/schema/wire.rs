//! Kafka's flexible-version primitives, as its `ByteUtils` and generated
//! message classes define them, written for hostile input.
//!
//! kafka-protocol keeps its primitive `Encoder`/`Decoder` traits private
//! (0.18), and its decoders would not fit anyway: `CompactString` into a
//! `String` allocates the claimed length before checking that the bytes
//! exist, arrays reserve the claimed element count, and a fifth varint byte
//! with its continuation bit set is accepted. Kafka itself rejects such a
//! varint ("Varint is too long"), and so does [`Reader::unsigned_varint`].
//! `tests/mirror_kafka_encoding.rs` checks the bytes against kafka-protocol's
//! generated codec.
//!
//! Every decoder here checks a claimed length against the bytes actually left
//! before it allocates: a string needs `len` bytes, an array needs at least one
//! byte per element (every element type encodes to one byte or more), so no
//! reservation is larger than the input.

use bytes::{BufMut, BytesMut};
use thiserror::Error;
use uuid::Uuid;

/// Why a message could not be decoded. `field` names the innermost field
/// being read (`Struct.field`), so a hostile frame's log line says where it
/// went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{kind} (at {})", field.unwrap_or("message"))]
pub struct DecodeError {
    pub kind: DecodeErrorKind,
    pub field: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeErrorKind {
    #[error("needed {needed} more bytes, {remaining} left")]
    Truncated { needed: u64, remaining: usize },
    #[error("varint is too long")]
    VarintTooLong,
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("null where the schema has a non-nullable {0}")]
    UnexpectedNull(&'static str),
    #[error("tagged field {tag} follows tag {previous}: tags must be strictly increasing")]
    TagOutOfOrder { tag: u32, previous: u32 },
    #[error("{0} bytes left after the message")]
    TrailingBytes(usize),
    #[error("{api} does not have version {version} (supported {min}..={max})")]
    UnsupportedVersion {
        api: &'static str,
        version: i16,
        min: i16,
        max: i16,
    },
}

impl DecodeError {
    pub fn new(kind: DecodeErrorKind) -> Self {
        Self { kind, field: None }
    }

    /// Records `field` unless an inner field was already recorded.
    pub fn at(mut self, field: &'static str) -> Self {
        self.field.get_or_insert(field);
        self
    }
}

impl From<DecodeErrorKind> for DecodeError {
    fn from(kind: DecodeErrorKind) -> Self {
        Self::new(kind)
    }
}

/// A cursor over one message's bytes.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    /// The message version being read: fields not in it are skipped.
    version: i16,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self::at_version(bytes, 0)
    }

    pub fn at_version(bytes: &'a [u8], version: i16) -> Self {
        Self { bytes, version }
    }

    pub fn version(&self) -> i16 {
        self.version
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// Fails unless every byte was consumed.
    pub fn finish(self) -> Result<(), DecodeError> {
        match self.bytes.len() {
            0 => Ok(()),
            n => Err(DecodeErrorKind::TrailingBytes(n).into()),
        }
    }

    pub fn take(&mut self, len: u64) -> Result<&'a [u8], DecodeError> {
        let remaining = self.bytes.len();
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= remaining)
            .ok_or(DecodeErrorKind::Truncated {
                needed: len,
                remaining,
            })?;
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let bytes = self.take(N as u64)?;
        Ok(bytes.try_into().expect("take returned N bytes"))
    }

    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// Kafka reads any non-zero byte as true.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.array::<1>()?[0] != 0)
    }

    pub fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        Ok(Uuid::from_bytes(self.array()?))
    }

    /// At most five bytes; the fifth may only carry the top four bits.
    pub fn unsigned_varint(&mut self) -> Result<u32, DecodeError> {
        let mut value = 0u32;
        for i in 0..5 {
            let byte = self.array::<1>()?[0];
            if i == 4 && byte > 0x0f {
                return Err(DecodeErrorKind::VarintTooLong.into());
            }
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        unreachable!("the fifth byte either ends the varint or is refused")
    }

    /// A compact length: the varint holds `length + 1`, 0 meaning null.
    pub fn compact_length(&mut self) -> Result<Option<u64>, DecodeError> {
        Ok(match self.unsigned_varint()? {
            0 => None,
            n => Some(u64::from(n) - 1),
        })
    }

    pub fn compact_nullable_string(&mut self) -> Result<Option<String>, DecodeError> {
        let Some(len) = self.compact_length()? else {
            return Ok(None);
        };
        let bytes = self.take(len)?;
        let text = std::str::from_utf8(bytes).map_err(|_| DecodeErrorKind::InvalidUtf8)?;
        Ok(Some(text.to_owned()))
    }

    pub fn compact_string(&mut self) -> Result<String, DecodeError> {
        self.compact_nullable_string()?
            .ok_or_else(|| DecodeErrorKind::UnexpectedNull("string").into())
    }

    /// A compact nullable array. The reservation is capped by the bytes left,
    /// since every element takes at least one byte.
    pub fn compact_nullable_array<T>(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        let Some(len) = self.compact_length()? else {
            return Ok(None);
        };
        let remaining = self.remaining();
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= remaining)
            .ok_or(DecodeErrorKind::Truncated {
                needed: len,
                remaining,
            })?;
        let mut items = Vec::with_capacity(len);
        for _ in 0..len {
            items.push(element(self)?);
        }
        Ok(Some(items))
    }
}

/// The output side: appends to a buffer. Encoding cannot fail except for
/// lengths Kafka cannot express, which [`Writer::compact_length`] reports.
#[derive(Debug, Default)]
pub struct Writer {
    buf: BytesMut,
    /// The message version being written: fields not in it are left out.
    version: i16,
}

/// What a message cannot be encoded for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// Longer than a varint length can express.
    #[error("{what} of {len} entries is too long for the wire")]
    TooLong { what: &'static str, len: usize },
    /// Unknown tagged fields must be sorted by tag, each tag once.
    #[error("tagged field {tag} follows tag {previous}: tags must be strictly increasing")]
    TagOutOfOrder { tag: u32, previous: u32 },
    #[error("{api} does not have version {version}")]
    UnsupportedVersion { api: &'static str, version: i16 },
}

fn varint_length(what: &'static str, len: usize) -> Result<u32, EncodeError> {
    u32::try_from(len).map_err(|_| EncodeError::TooLong { what, len })
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn at_version(version: i16) -> Self {
        Self {
            version,
            ..Self::default()
        }
    }

    pub fn version(&self) -> i16 {
        self.version
    }

    pub fn into_bytes(self) -> BytesMut {
        self.buf
    }

    pub fn i8(&mut self, value: i8) {
        self.buf.put_i8(value);
    }

    pub fn i16(&mut self, value: i16) {
        self.buf.put_i16(value);
    }

    pub fn u16(&mut self, value: u16) {
        self.buf.put_u16(value);
    }

    pub fn i32(&mut self, value: i32) {
        self.buf.put_i32(value);
    }

    pub fn i64(&mut self, value: i64) {
        self.buf.put_i64(value);
    }

    pub fn bool(&mut self, value: bool) {
        self.buf.put_u8(u8::from(value));
    }

    pub fn uuid(&mut self, value: &Uuid) {
        self.buf.put_slice(value.as_bytes());
    }

    pub fn bytes(&mut self, value: &[u8]) {
        self.buf.put_slice(value);
    }

    pub fn unsigned_varint(&mut self, mut value: u32) {
        while value >= 0x80 {
            self.buf.put_u8((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.buf.put_u8(value as u8);
    }

    /// `None` is null (0); otherwise `len + 1`.
    pub fn compact_length(
        &mut self,
        what: &'static str,
        len: Option<usize>,
    ) -> Result<(), EncodeError> {
        let encoded = match len {
            None => 0,
            Some(len) => varint_length(what, len)?
                .checked_add(1)
                .ok_or(EncodeError::TooLong { what, len })?,
        };
        self.unsigned_varint(encoded);
        Ok(())
    }

    pub fn compact_nullable_string(&mut self, value: Option<&str>) -> Result<(), EncodeError> {
        self.compact_length("string", value.map(str::len))?;
        self.bytes(value.unwrap_or_default().as_bytes());
        Ok(())
    }

    pub fn compact_nullable_array<T>(
        &mut self,
        items: Option<&[T]>,
        mut element: impl FnMut(&mut Self, &T) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        self.compact_length("array", items.map(<[T]>::len))?;
        for item in items.unwrap_or_default() {
            element(self, item)?;
        }
        Ok(())
    }
}

/// Tagged fields this version does not know, kept byte for byte so a message
/// passed through (a forwarded request) loses nothing. Sorted by tag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnknownTaggedFields(pub Vec<RawTaggedField>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTaggedField {
    pub tag: u32,
    pub data: Vec<u8>,
}

impl UnknownTaggedFields {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The data of the field tagged `tag`, if present. Known tagged fields
    /// of a schema live here too, behind the struct's own accessors.
    pub fn get(&self, tag: u32) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|f| f.tag == tag)
            .map(|f| f.data.as_slice())
    }

    /// The field tagged `tag` decoded as a `T`: None if absent or not a
    /// well-formed `T` (a peer's field of another shape is ignored).
    pub fn get_field<T: WireField>(&self, tag: u32) -> Option<T> {
        let mut r = Reader::new(self.get(tag)?);
        let value = T::read(&mut r).ok()?;
        r.finish().ok()?;
        Some(value)
    }

    /// Sets (or, with None, removes) the field tagged `tag` to `value`'s
    /// encoding.
    pub fn set_field<T: WireField>(
        &mut self,
        tag: u32,
        value: Option<&T>,
    ) -> Result<(), EncodeError> {
        let data = match value {
            Some(value) => {
                let mut w = Writer::new();
                value.write(&mut w)?;
                Some(w.into_bytes().to_vec())
            }
            None => None,
        };
        self.set(tag, data);
        Ok(())
    }

    /// A bool tagged field: false when absent (its default).
    pub fn flag(&self, tag: u32) -> bool {
        self.get_field(tag).unwrap_or(false)
    }

    /// Sets a bool tagged field, leaving it out when false.
    pub fn set_flag(&mut self, tag: u32, value: bool) {
        self.set(tag, value.then(|| vec![1]));
    }

    /// Sets (or, with None, removes) the field tagged `tag`, keeping the
    /// fields in tag order.
    pub fn set(&mut self, tag: u32, data: Option<Vec<u8>>) {
        self.0.retain(|f| f.tag != tag);
        if let Some(data) = data {
            let at = self.0.partition_point(|f| f.tag < tag);
            self.0.insert(at, RawTaggedField { tag, data });
        }
    }

    /// The tagged-field section: a plain varint count (not `count + 1`),
    /// then `tag`, `size` and `size` bytes per field, tags strictly
    /// increasing as Kafka requires.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = r.unsigned_varint()?;
        // Each field takes at least two bytes (tag and size varints).
        let remaining = r.remaining();
        let count = usize::try_from(count)
            .ok()
            .filter(|&count| count <= remaining / 2)
            .ok_or(DecodeErrorKind::Truncated {
                needed: u64::from(count) * 2,
                remaining,
            })?;
        let mut fields: Vec<RawTaggedField> = Vec::with_capacity(count);
        for _ in 0..count {
            let tag = r.unsigned_varint()?;
            if let Some(previous) = fields.last().map(|f| f.tag) {
                if tag <= previous {
                    return Err(DecodeErrorKind::TagOutOfOrder { tag, previous }.into());
                }
            }
            let size = r.unsigned_varint()?;
            let data = r.take(u64::from(size))?.to_vec();
            fields.push(RawTaggedField { tag, data });
        }
        Ok(Self(fields))
    }

    pub fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        for pair in self.0.windows(2) {
            if pair[1].tag <= pair[0].tag {
                return Err(EncodeError::TagOutOfOrder {
                    tag: pair[1].tag,
                    previous: pair[0].tag,
                });
            }
        }
        w.unsigned_varint(varint_length("tagged fields", self.0.len())?);
        for field in &self.0 {
            w.unsigned_varint(field.tag);
            w.unsigned_varint(varint_length("tagged field", field.data.len())?);
            w.bytes(&field.data);
        }
        Ok(())
    }
}

/// A value with a fixed flexible-version wire form. Implemented for the
/// primitive types the mirror schemas use and, through `wire_struct!`, for
/// every schema struct.
pub trait WireField: Sized {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError>;

    /// This value as a round trip through `version` leaves it: fields not
    /// in that version at their defaults (what round-trip tests expect).
    #[cfg(test)]
    fn at_version(self, _version: i16) -> Self {
        self
    }

    /// Calls `f` with every error code this value holds: the fields named
    /// `error_code` (`is_error_code`), in it and in the structs it nests,
    /// as Kafka's `errorCounts` gathers a response's codes.
    fn error_codes(&self, is_error_code: bool, f: &mut dyn FnMut(i16)) {
        let _ = (is_error_code, f); // most fields hold none
    }
}

macro_rules! fixed_width_field {
    ($($ty:ty => $method:ident),* $(,)?) => {$(
        impl WireField for $ty {
            fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                r.$method()
            }
            fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
                w.$method(*self);
                Ok(())
            }
        }
    )*};
}

fixed_width_field!(i8 => i8, u16 => u16, i32 => i32, i64 => i64, bool => bool);

impl WireField for i16 {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.i16()
    }
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.i16(*self);
        Ok(())
    }
    fn error_codes(&self, is_error_code: bool, f: &mut dyn FnMut(i16)) {
        if is_error_code {
            f(*self);
        }
    }
}

impl WireField for Uuid {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.uuid()
    }
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.uuid(self);
        Ok(())
    }
}

/// `string` in Kafka's schemas: a compact string, never null.
impl WireField for String {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.compact_string()
    }
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.compact_nullable_string(Some(self))
    }
}

/// `"nullableVersions": "0+"` strings.
impl WireField for Option<String> {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.compact_nullable_string()
    }
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.compact_nullable_string(self.as_deref())
    }
}

/// `[]T` in Kafka's schemas: a compact array, never null.
impl<T: WireField> WireField for Vec<T> {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.compact_nullable_array(T::read)?
            .ok_or_else(|| DecodeErrorKind::UnexpectedNull("array").into())
    }
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.compact_nullable_array(Some(self), |w, item| item.write(w))
    }

    #[cfg(test)]
    fn at_version(self, version: i16) -> Self {
        self.into_iter().map(|v| v.at_version(version)).collect()
    }

    fn error_codes(&self, is_error_code: bool, f: &mut dyn FnMut(i16)) {
        self.iter()
            .for_each(|item| item.error_codes(is_error_code, f));
    }
}

/// Nullable arrays (`"nullableVersions": "0+"`), where null means "all".
impl<T: WireField> WireField for Option<Vec<T>> {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.compact_nullable_array(T::read)
    }
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.compact_nullable_array(self.as_deref(), |w, item| item.write(w))
    }

    #[cfg(test)]
    fn at_version(self, version: i16) -> Self {
        self.map(|items| items.into_iter().map(|v| v.at_version(version)).collect())
    }

    fn error_codes(&self, is_error_code: bool, f: &mut dyn FnMut(i16)) {
        self.iter()
            .flatten()
            .for_each(|item| item.error_codes(is_error_code, f));
    }
}

impl WireField for UnknownTaggedFields {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Self::read(r)
    }
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        Self::write(self, w)
    }
}
