//! Proptest strategies for the schema types: `wire_struct!` builds a struct's
//! strategy from its fields' strategies, defined here for the primitives.

use proptest::collection::vec;
use proptest::prelude::*;
use uuid::Uuid;

use super::wire::{RawTaggedField, UnknownTaggedFields};

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

any_strategy!(i8, i16, i32, i64, bool);

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
