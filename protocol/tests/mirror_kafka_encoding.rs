//! The mirror codec against kafka-protocol's generated codec. Its primitive
//! encoders are private (0.18), so the check goes through a Kafka message of
//! the same layout: the same bytes both ways, long strings, high tags and
//! large tagged payloads (multi-byte varints) included.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use ottla_protocol::mirror::admin::MirrorConfigEntry;
use ottla_protocol::schema::wire::{
    RawTaggedField, Reader, UnknownTaggedFields, WireField, Writer,
};
use proptest::prelude::*;

fn ours<T: WireField>(value: &T) -> Vec<u8> {
    let mut w = Writer::new();
    value.write(&mut w).unwrap();
    w.into_bytes().to_vec()
}

proptest! {
    /// ApiVersionsRequest v3 is two compact strings and a tagged-field
    /// section, as a MirrorConfigEntry with a value is.
    #[test]
    fn a_struct_with_unknown_tagged_fields(
        name in "\\PC{0,150}",
        value in "[ -~]{0,140}",
        tagged in proptest::collection::btree_map(0i32..1000, proptest::collection::vec(any::<u8>(), 0..200), 0..4),
    ) {
        let theirs = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_string(name.clone()))
            .with_client_software_version(StrBytes::from_string(value.clone()))
            .with_unknown_tagged_fields(
                tagged.iter().map(|(&tag, data)| (tag, Bytes::from(data.clone()))).collect::<BTreeMap<_, _>>(),
            );
        let mut their_bytes = BytesMut::new();
        theirs.encode(&mut their_bytes, 3).unwrap();

        let entry = MirrorConfigEntry {
            name,
            value: Some(value),
            unknown_tagged_fields: UnknownTaggedFields(
                tagged
                    .iter()
                    .map(|(&tag, data)| RawTaggedField { tag: tag as u32, data: data.clone() })
                    .collect(),
            ),
        };
        let our_bytes = ours(&entry);
        prop_assert_eq!(&our_bytes[..], &their_bytes[..]);
        prop_assert_eq!(MirrorConfigEntry::read(&mut Reader::new(&their_bytes)).unwrap(), entry);
        let back = ApiVersionsRequest::decode(&mut Bytes::from(our_bytes), 3).unwrap();
        prop_assert_eq!(back, theirs);
    }
}
