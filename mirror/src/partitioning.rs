//! Which `__mirror_state` partition holds a mirror partition's records.
//!
//! `partition = toPositive(murmur2(mirrorName ‖ topicId ‖ partition)) % numPartitions`
//!
//! - `mirrorName`: the name's UTF-8 bytes; `topicId`: its 16 bytes, most
//!   significant first (Kafka's wire order); `partition`: 4 bytes big-endian.
//!   Topic id and partition have fixed lengths, so no separator is needed.
//! - `murmur2` and `toPositive` are Kafka's `Utils.murmur2` (seed
//!   `0x9747b28c`) and `Utils.toPositive` (`x & 0x7fffffff`), the functions its
//!   default partitioner applies to record keys, so the choice can be
//!   reproduced with Kafka's own tools.
//! - `numPartitions` is `__mirror_state`'s partition count
//!   (`mirror.state.topic.num.partitions`), which must never change once the
//!   topic exists: every stored state would move.
//!
//! Both record types of one mirror partition (its state and its last
//! mirrored epoch) land in the same partition, so one coordinator shard owns
//! everything about it.

use std::num::NonZeroU32;

use uuid::Uuid;

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 with seed `0x9747b28c`, the
/// tail bytes mixed in little-endian order.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("chunks of 4"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u32::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which
/// overflows on `i32::MIN`).
pub fn to_positive(value: i32) -> i32 {
    value & 0x7fff_ffff
}

/// The bytes hashed for one mirror partition.
pub fn partition_hash_input(mirror_name: &str, topic_id: &Uuid, partition: i32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(mirror_name.len() + 20);
    bytes.extend_from_slice(mirror_name.as_bytes());
    bytes.extend_from_slice(topic_id.as_bytes());
    bytes.extend_from_slice(&partition.to_be_bytes());
    bytes
}

/// The `__mirror_state` partition of (mirror, topic id, partition).
pub fn mirror_state_partition(
    mirror_name: &str,
    topic_id: &Uuid,
    partition: i32,
    num_partitions: NonZeroU32,
) -> i32 {
    let hash = to_positive(murmur2(&partition_hash_input(
        mirror_name,
        topic_id,
        partition,
    )));
    // Both operands are non-negative and fit in i32 after the modulo.
    (hash as u32 % num_partitions.get()) as i32
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn murmur2_matches_kafkas_utils_test_vectors() {
        // From Apache Kafka's UtilsTest.testMurmur2.
        let cases: [(&str, i32); 6] = [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input.as_bytes()), expected, "{input}");
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(42), 42);
    }

    #[test]
    fn the_hash_input_is_name_then_id_then_partition() {
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let mut expected = b"dr".to_vec();
        expected.extend(1..=16u8);
        expected.extend([0, 0, 1, 2]);
        assert_eq!(partition_hash_input("dr", &id, 258), expected);
    }

    #[test]
    fn known_assignments() {
        // Computed independently (a Python port of Kafka's murmur2); pinned
        // because a change to the formula would move every stored state.
        let n = NonZeroU32::new(50).unwrap();
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        assert_eq!(
            to_positive(murmur2(&partition_hash_input("dr", &id, 0))),
            624248253
        );
        assert_eq!(mirror_state_partition("dr", &id, 0, n), 3);
        let id = Uuid::parse_str("6e0a9c8e-3e35-4f0a-9f5b-0c1d2e3f4a5b").unwrap();
        assert_eq!(mirror_state_partition("orders-dr", &id, 3, n), 24);
        assert_eq!(mirror_state_partition("dr", &id, 0, NonZeroU32::MIN), 0);
    }

    proptest! {
        #[test]
        fn always_a_valid_partition(
            name in "[a-z.]{1,20}",
            id in any::<u128>(),
            partition in any::<i32>(),
            n in 1u32..=10_000,
        ) {
            let n = NonZeroU32::new(n).unwrap();
            let p = mirror_state_partition(&name, &Uuid::from_u128(id), partition, n);
            prop_assert!((0..n.get() as i32).contains(&p));
        }
    }
}
