//! Property: the image a snapshot rebuilds equals the image replaying the
//! log gives, for random record sequences of every record type, and the
//! log replayed on top of a snapshot taken at any point ends where the
//! whole log does.

use openraft::CommittedLeaderId;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use uuid::Uuid;

use super::snapshot::{decode, encode, encoded_image, image_from, Meta};
use super::LogId;
use crate::image::MetadataImage;
use crate::records::acl::Acl;
use crate::records::quota::QuotaValue;
use crate::records::scram::{ScramCredential, ScramMechanism};
use crate::records::{Endpoint, MetadataRecord};

/// Small pools, so that records meet the brokers, topics, partitions and
/// keys earlier records created.
fn broker() -> impl Strategy<Value = i32> {
    0..4i32
}

fn topic_id() -> impl Strategy<Value = Uuid> {
    (1..6u128).prop_map(Uuid::from_u128)
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![Just(""), Just("a"), Just("b"), Just("c"), Just("1")].prop_map(String::from)
}

fn replicas() -> impl Strategy<Value = Vec<i32>> {
    vec(-1..4i32, 0..4)
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    (name(), name(), any::<u16>(), name()).prop_map(|(listener, host, port, protocol)| Endpoint {
        listener,
        host,
        port,
        security_protocol: protocol,
    })
}

fn credential() -> impl Strategy<Value = ScramCredential> {
    (
        vec(any::<u8>(), 0..4),
        vec(any::<u8>(), 0..4),
        vec(any::<u8>(), 0..4),
        any::<i32>(),
    )
        .prop_map(
            |(salt, stored_key, server_key, iterations)| ScramCredential {
                salt,
                stored_key,
                server_key,
                iterations,
            },
        )
}

fn acl() -> impl Strategy<Value = Acl> {
    (
        any::<i8>(),
        name(),
        any::<i8>(),
        name(),
        name(),
        any::<i8>(),
        any::<i8>(),
    )
        .prop_map(
            |(
                resource_type,
                resource_name,
                pattern_type,
                principal,
                host,
                operation,
                permission,
            )| {
                Acl {
                    resource_type,
                    resource_name,
                    pattern_type,
                    principal,
                    host,
                    operation,
                    permission,
                }
            },
        )
}

/// One arm per record type; `type_of` below fails to compile when a type
/// is added without a generator arm.
fn record() -> impl Strategy<Value = MetadataRecord> {
    prop_oneof![
        (name(), topic_id()).prop_map(|(name, topic_id)| MetadataRecord::Topic { name, topic_id }),
        (
            topic_id(),
            0..3i32,
            replicas(),
            replicas(),
            -1..4i32,
            0..50i32,
            0..50i32,
            (replicas(), replicas())
        )
            .prop_map(
                |(
                    topic_id,
                    partition,
                    replicas,
                    isr,
                    leader,
                    leader_epoch,
                    partition_epoch,
                    (elr, last_known_elr),
                )| {
                    MetadataRecord::Partition {
                        topic_id,
                        partition,
                        replicas,
                        isr,
                        leader,
                        leader_epoch,
                        partition_epoch,
                        elr,
                        last_known_elr,
                    }
                }
            ),
        (
            topic_id(),
            0..3i32,
            option::of(-1..4i32),
            option::of(replicas()),
            option::of(replicas()),
            option::of(replicas()),
            option::of(replicas())
        )
            .prop_map(
                |(topic_id, partition, leader, isr, replicas, elr, last_known_elr)| {
                    MetadataRecord::PartitionChange {
                        topic_id,
                        partition,
                        leader,
                        isr,
                        replicas,
                        elr,
                        last_known_elr,
                    }
                }
            ),
        topic_id().prop_map(|topic_id| MetadataRecord::RemoveTopic { topic_id }),
        (
            prop_oneof![Just(2i8), Just(4i8), Just(64i8), any::<i8>()],
            name(),
            prop_oneof![Just("mirror.name"), Just("retention.ms"), Just("k")],
            option::of(name())
        )
            .prop_map(|(resource_type, resource_name, key, value)| {
                MetadataRecord::Config {
                    resource_type,
                    resource_name,
                    name: key.to_string(),
                    value,
                }
            }),
        (
            broker(),
            1..4u128,
            vec(endpoint(), 0..3),
            option::of(name())
        )
            .prop_map(|(broker_id, incarnation, endpoints, rack)| {
                MetadataRecord::RegisterBroker {
                    broker_id,
                    incarnation_id: Uuid::from_u128(incarnation),
                    endpoints,
                    rack,
                }
            }),
        (broker(), -5..100_000i64).prop_map(|(broker_id, next_producer_id)| {
            MetadataRecord::ProducerIds {
                broker_id,
                next_producer_id,
            }
        }),
        (name(), any::<i16>())
            .prop_map(|(name, level)| MetadataRecord::FeatureLevel { name, level }),
        (broker(), any::<bool>())
            .prop_map(|(broker_id, fenced)| MetadataRecord::BrokerFence { broker_id, fenced }),
        (
            name(),
            prop_oneof![Just(ScramMechanism::Sha256), Just(ScramMechanism::Sha512)],
            option::of(credential())
        )
            .prop_map(|(user, mechanism, credential)| {
                MetadataRecord::ScramCredential {
                    user,
                    mechanism,
                    credential,
                }
            }),
        (1..5u128, acl()).prop_map(|(id, acl)| MetadataRecord::AccessControlEntry {
            id: Uuid::from_u128(id),
            acl,
        }),
        (1..5u128).prop_map(|id| MetadataRecord::RemoveAccessControlEntry {
            id: Uuid::from_u128(id)
        }),
        (topic_id(), 0..3i32, replicas(), replicas()).prop_map(
            |(topic_id, partition, adding, removing)| MetadataRecord::PartitionReassignment {
                topic_id,
                partition,
                adding,
                removing,
            }
        ),
        (topic_id(), 0..3i32, 0..60i32).prop_map(|(topic_id, partition, leader_epoch)| {
            MetadataRecord::LeaderEpochBump {
                topic_id,
                partition,
                leader_epoch,
            }
        }),
        (
            vec(
                (
                    prop_oneof![Just("user"), Just("client-id"), Just("ip")],
                    option::of(name())
                ),
                0..3
            ),
            prop_oneof![Just("producer_byte_rate"), Just("request_percentage")],
            option::of(any::<f64>())
        )
            .prop_map(|(entity, key, value)| MetadataRecord::ClientQuota {
                entity: entity
                    .into_iter()
                    .map(|(kind, name)| (kind.to_string(), name))
                    .collect(),
                key: key.to_string(),
                value: value.map(QuotaValue),
            }),
        broker().prop_map(|broker_id| MetadataRecord::UnregisterBroker { broker_id }),
        (broker(), 0..4u128).prop_map(|(controller_id, dir)| {
            MetadataRecord::ControllerDirectory {
                controller_id,
                directory_id: Uuid::from_u128(dir),
            }
        }),
    ]
}

/// The record type's number, exhaustively (no wildcard arm on purpose).
fn type_of(record: &MetadataRecord) -> u16 {
    match record {
        MetadataRecord::Topic { .. } => 1,
        MetadataRecord::Partition { .. } => 2,
        MetadataRecord::PartitionChange { .. } => 3,
        MetadataRecord::RemoveTopic { .. } => 4,
        MetadataRecord::Config { .. } => 5,
        MetadataRecord::RegisterBroker { .. } => 6,
        MetadataRecord::ProducerIds { .. } => 7,
        MetadataRecord::FeatureLevel { .. } => 8,
        MetadataRecord::BrokerFence { .. } => 9,
        MetadataRecord::ScramCredential { .. } => 10,
        MetadataRecord::AccessControlEntry { .. } => 11,
        MetadataRecord::RemoveAccessControlEntry { .. } => 12,
        MetadataRecord::PartitionReassignment { .. } => 13,
        MetadataRecord::LeaderEpochBump { .. } => 14,
        MetadataRecord::ClientQuota { .. } => 15,
        MetadataRecord::UnregisterBroker { .. } => 16,
        MetadataRecord::ControllerDirectory { .. } => 17,
    }
}

const RECORD_TYPES: u16 = 17;

/// Whether the controller could have written `record` on `image`: a topic
/// name belongs to one live topic at a time (CreateTopics and mirrors refuse
/// a name in use). Everything else goes, even records about unknown
/// brokers or topics, which the image ignores.
fn writable(image: &MetadataImage, record: &MetadataRecord) -> bool {
    match record {
        MetadataRecord::Topic { name, topic_id } => image
            .topic_ids
            .get(name)
            .is_none_or(|owner| owner == topic_id),
        _ => true,
    }
}

/// The log: the writable records, each at its own offset.
fn log_of(records: Vec<MetadataRecord>) -> Vec<(i64, MetadataRecord)> {
    let mut image = MetadataImage::empty();
    let mut log = Vec::new();
    for record in records {
        if writable(&image, &record) {
            let offset = log.len() as i64;
            image.apply(offset, &record);
            log.push((offset, record));
        }
    }
    log
}

fn replayed(log: &[(i64, MetadataRecord)]) -> MetadataImage {
    let mut image = MetadataImage::empty();
    for (offset, record) in log {
        image.apply(*offset, record);
    }
    image
}

fn meta_at(offset: i64) -> Meta {
    Meta {
        last_log_id: (offset >= 0).then(|| LogId::new(CommittedLeaderId::new(2, 1), offset as u64)),
        ..Meta::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_snapshot_rebuilds_the_replayed_image(
        records in vec(record(), 0..120),
        cut in any::<prop::sample::Index>(),
    ) {
        let log = log_of(records);
        let image = replayed(&log);

        // The snapshot file and the whole-image answer to observers.
        let (_, from_file) = decode(&encode(&meta_at(image.offset), &image))
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&from_file, &image);
        let sent = image_from(image.offset, &encoded_image(&image))
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&sent, &image);

        // A snapshot at any point, then the rest of the log.
        let at = cut.index(log.len() + 1);
        let head = replayed(&log[..at]);
        let (_, mut resumed) = decode(&encode(&meta_at(head.offset), &head))
            .map_err(TestCaseError::fail)?;
        for (offset, record) in &log[at..] {
            resumed.apply(*offset, record);
        }
        prop_assert_eq!(resumed, image);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn the_generator_covers_every_record_type(records in vec(record(), 400)) {
        let seen: std::collections::BTreeSet<u16> = records.iter().map(type_of).collect();
        prop_assert_eq!(seen.len(), usize::from(RECORD_TYPES), "types seen: {:?}", seen);
    }
}
