//! Kafka's flexible message schemas for the APIs kafka-protocol does not
//! know (Ottla's mirror APIs, the streams-group APIs): the wire primitives
//! ([`wire`]), the `wire_struct!` macro that declares a schema struct with
//! its codec, and the version-checked body codec every top-level message
//! shares.

use std::ops::RangeInclusive;

use bytes::BytesMut;

pub mod wire;
#[cfg(test)]
#[macro_use]
pub(crate) mod testing;

use wire::{DecodeError, DecodeErrorKind, EncodeError, Reader, WireField, Writer};

/// Declares a schema struct: its fields in wire order (each optionally
/// `= default`, Kafka's `"default"`, and `; versions lo..=hi`, Kafka's
/// `"versions"` where a field is not in every version: it is read and
/// written only at those, and is its default at others), then the preserved
/// unknown tagged fields, with the codec (and, in tests, a proptest
/// strategy) generated from that order.
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident : $ty:ty $(= $default:expr)?
                $(; versions $lo:literal ..= $hi:literal)?, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: $ty, )*
            /// Tagged fields this version does not know, written back as read.
            pub unknown_tagged_fields: $crate::schema::wire::UnknownTaggedFields,
        }

        /// Every field at its schema default (`= value` in the declaration,
        /// else zero, empty or null).
        impl Default for $name {
            fn default() -> Self {
                Self {
                    $( $field: field_default!($($default)?), )*
                    unknown_tagged_fields: Default::default(),
                }
            }
        }

        impl $crate::schema::wire::WireField for $name {
            fn read(
                r: &mut $crate::schema::wire::Reader<'_>,
            ) -> Result<Self, $crate::schema::wire::DecodeError> {
                Ok(Self {
                    $( $field: if field_in_version!(r.version() $(, $lo, $hi)?) {
                        <$ty as $crate::schema::wire::WireField>::read(r)
                            .map_err(|e| e.at(concat!(stringify!($name), ".", stringify!($field))))?
                    } else {
                        field_default!($($default)?)
                    }, )*
                    unknown_tagged_fields: $crate::schema::wire::UnknownTaggedFields::read(r)
                        .map_err(|e| e.at(concat!(stringify!($name), ".tagged_fields")))?,
                })
            }

            fn write(
                &self,
                w: &mut $crate::schema::wire::Writer,
            ) -> Result<(), $crate::schema::wire::EncodeError> {
                $( if field_in_version!(w.version() $(, $lo, $hi)?) {
                    $crate::schema::wire::WireField::write(&self.$field, w)?;
                } )*
                self.unknown_tagged_fields.write(w)
            }

            // A struct is not an error code itself; its fields may be.
            fn error_codes(&self, _is_error_code: bool, f: &mut dyn FnMut(i16)) {
                let _ = &f; // a struct without fields
                $( $crate::schema::wire::WireField::error_codes(
                    &self.$field,
                    stringify!($field) == "error_code",
                    f,
                ); )*
            }

            #[cfg(test)]
            fn at_version(self, version: i16) -> Self {
                let _ = version; // a struct without fields
                Self {
                    $( $field: if field_in_version!(version $(, $lo, $hi)?) {
                        $crate::schema::wire::WireField::at_version(self.$field, version)
                    } else {
                        field_default!($($default)?)
                    }, )*
                    unknown_tagged_fields: self.unknown_tagged_fields,
                }
            }
        }

        #[cfg(test)]
        impl $crate::schema::testing::Arbitrary for $name {
            fn strategy() -> proptest::strategy::BoxedStrategy<Self> {
                use proptest::strategy::Strategy;
                nested_strategy!($($ty),*)
                    .prop_map(|nested_pattern!(unknown_tagged_fields; $($field),*)| Self {
                        $($field,)*
                        unknown_tagged_fields,
                    })
                    .boxed()
            }
        }
    };
}

/// A schema struct's proptest strategy as nested pairs (proptest's tuples
/// stop at twelve), its unknown tagged fields innermost.
#[cfg(test)]
macro_rules! nested_strategy {
    () => {
        <$crate::schema::wire::UnknownTaggedFields as $crate::schema::testing::Arbitrary>::strategy()
    };
    ($ty:ty $(, $rest:ty)*) => {
        (<$ty as $crate::schema::testing::Arbitrary>::strategy(), nested_strategy!($($rest),*))
    };
}

/// The pattern that takes [`nested_strategy`]'s values apart, `$last`
/// innermost.
#[cfg(test)]
macro_rules! nested_pattern {
    ($last:ident;) => {
        $last
    };
    ($last:ident; $field:ident $(, $rest:ident)*) => {
        ($field, nested_pattern!($last; $($rest),*))
    };
}

/// Whether a field of the versions `lo..=hi` (every version when not
/// given) is in `version`'s encoding.
macro_rules! field_in_version {
    ($version:expr) => {
        true
    };
    ($version:expr, $lo:literal, $hi:literal) => {
        ($lo..=$hi).contains(&$version)
    };
}

/// A field's default: the declared one, else the type's.
macro_rules! field_default {
    () => {
        Default::default()
    };
    ($default:expr) => {
        $default
    };
}

/// A top-level body in `version`'s encoding (without the header), refused
/// for versions outside `versions`.
pub fn encode_body<M: WireField>(
    message: &M,
    name: &'static str,
    versions: RangeInclusive<i16>,
    version: i16,
) -> Result<BytesMut, EncodeError> {
    if !versions.contains(&version) {
        return Err(EncodeError::UnsupportedVersion { api: name, version });
    }
    let mut w = Writer::at_version(version);
    message.write(&mut w)?;
    Ok(w.into_bytes())
}

/// Decodes exactly `body` (the bytes after the header): trailing bytes and
/// versions outside `versions` are errors.
pub fn decode_body<M: WireField>(
    body: &[u8],
    name: &'static str,
    versions: RangeInclusive<i16>,
    version: i16,
) -> Result<M, DecodeError> {
    if !versions.contains(&version) {
        return Err(DecodeErrorKind::UnsupportedVersion {
            api: name,
            version,
            min: *versions.start(),
            max: *versions.end(),
        }
        .into());
    }
    let mut r = Reader::at_version(body, version);
    let message = M::read(&mut r)?;
    r.finish()?;
    Ok(message)
}

/// Makes `Option<$ty>` a nullable struct field (`"nullableVersions"` on a
/// struct): an int8 marker, -1 for null or 1 before the struct.
macro_rules! nullable_struct {
    ($($ty:ty),+ $(,)?) => {$(
        impl $crate::schema::wire::WireField for Option<$ty> {
            fn read(
                r: &mut $crate::schema::wire::Reader<'_>,
            ) -> Result<Self, $crate::schema::wire::DecodeError> {
                match r.i8()? {
                    -1 => Ok(None),
                    _ => Ok(Some(<$ty as $crate::schema::wire::WireField>::read(r)?)),
                }
            }

            fn write(
                &self,
                w: &mut $crate::schema::wire::Writer,
            ) -> Result<(), $crate::schema::wire::EncodeError> {
                match self {
                    None => {
                        w.i8(-1);
                        Ok(())
                    }
                    Some(value) => {
                        w.i8(1);
                        $crate::schema::wire::WireField::write(value, w)
                    }
                }
            }

            #[cfg(test)]
            fn at_version(self, version: i16) -> Self {
                self.map(|v| $crate::schema::wire::WireField::at_version(v, version))
            }
        }

        #[cfg(test)]
        impl $crate::schema::testing::Arbitrary for Option<$ty> {
            fn strategy() -> proptest::strategy::BoxedStrategy<Self> {
                use proptest::strategy::Strategy;
                proptest::option::of(<$ty as $crate::schema::testing::Arbitrary>::strategy())
                    .boxed()
            }
        }
    )+};
}
