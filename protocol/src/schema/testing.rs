//! Proptest strategies for the schema types: `wire_struct!` builds a struct's
//! strategy from its fields' strategies, defined here for the primitives.

use proptest::collection::vec;
use proptest::prelude::*;
use uuid::Uuid;

use super::wire::{DecodeErrorKind, RawTaggedField, UnknownTaggedFields, WireField};
use super::{decode_body, encode_body};

pub trait Arbitrary: Sized {
    fn strategy() -> BoxedStrategy<Self>;
}

macro_rules! any_strategy {
    ($($ty:ty),*) => {$(
        impl Arbitrary for $ty {
            fn strategy() -> BoxedStrategy<Self> {
                any::<$ty>().boxed()
            }
        }
    )*};
}

any_strategy!(i8, i16, u16, i32, i64, bool);

impl Arbitrary for Uuid {
    fn strategy() -> BoxedStrategy<Self> {
        any::<u128>().prop_map(Uuid::from_u128).boxed()
    }
}

/// Names as topics have them, plus any Unicode (multi-byte lengths).
impl Arbitrary for String {
    fn strategy() -> BoxedStrategy<Self> {
        prop_oneof!["[a-zA-Z0-9._-]{0,12}", "\\PC{0,6}"].boxed()
    }
}

impl Arbitrary for Option<String> {
    fn strategy() -> BoxedStrategy<Self> {
        proptest::option::of(String::strategy()).boxed()
    }
}

impl<T: Arbitrary + std::fmt::Debug + 'static> Arbitrary for Vec<T> {
    fn strategy() -> BoxedStrategy<Self> {
        vec(T::strategy(), 0..4).boxed()
    }
}

impl<T: Arbitrary + std::fmt::Debug + 'static> Arbitrary for Option<Vec<T>> {
    fn strategy() -> BoxedStrategy<Self> {
        proptest::option::of(Vec::<T>::strategy()).boxed()
    }
}

/// Sorted, distinct tags, some above 127 (two-byte varints), payloads above
/// 127 bytes now and then.
impl Arbitrary for UnknownTaggedFields {
    fn strategy() -> BoxedStrategy<Self> {
        proptest::collection::btree_map(0u32..300, vec(any::<u8>(), 0..140), 0..3)
            .prop_map(|fields| {
                UnknownTaggedFields(
                    fields
                        .into_iter()
                        .map(|(tag, data)| RawTaggedField { tag, data })
                        .collect(),
                )
            })
            .boxed()
    }
}

/// Encoding then decoding gives the message back; re-encoding gives the
/// same bytes; every strict prefix fails to decode, as does a trailing byte.
pub fn check_round_trip<M: WireField + PartialEq + Clone + std::fmt::Debug>(
    message: &M,
    version: i16,
) -> Result<(), TestCaseError> {
    let encode = |m: &M| encode_body(m, "test", version..=version, version).expect("encodable");
    let decode = |b: &[u8]| decode_body::<M>(b, "test", version..=version, version);
    let bytes = encode(message);
    let decoded = decode(&bytes).expect("decodable");
    prop_assert_eq!(&decoded, &message.clone().at_version(version));
    prop_assert_eq!(encode(&decoded), bytes.clone());
    for len in 0..bytes.len() {
        prop_assert!(decode(&bytes[..len]).is_err(), "prefix {len} decoded");
    }
    let mut longer = bytes.to_vec();
    longer.push(0);
    prop_assert_eq!(
        decode(&longer).unwrap_err().kind,
        DecodeErrorKind::TrailingBytes(1)
    );
    Ok(())
}

macro_rules! round_trips {
    ($($test:ident: $message:ty $(; at version $version:literal)?,)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            $(
                #[test]
                fn $test(message in <$message as Arbitrary>::strategy()) {
                    check_round_trip(&message, 0 $(+ $version)?)?;
                }
            )*
        }
    };
}
