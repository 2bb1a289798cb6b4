//! Property test: random and mutated request frames for every API key and
//! version kafka-protocol knows must decode to a request or an error, never
//! abort or panic. Case count per property comes from PROPTEST_CASES (default
//! 10000: about a second in a debug build); raise it for longer runs, or use
//! the cargo-fuzz target in protocol/fuzz.

mod common;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use ottla_protocol::request::{decode_request, RequestError};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: ottla_allocator::NoReserveAllocator = ottla_allocator::NoReserveAllocator;

const DEFAULT_CASES: u32 = 10_000;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Decodes with every version the crate knows accepted, and fails on a
/// decoder panic (which `decode_request` would otherwise report as an error).
fn check(frame: Bytes) -> Result<(), TestCaseError> {
    match decode_request(frame, |_, _| true) {
        Err(
            RequestError::InvalidHeader { reason, .. } | RequestError::InvalidBody { reason, .. },
        ) if reason.contains("panicked") => Err(TestCaseError::fail(reason)),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite 4 bytes with a huge or negative int32 (array/bytes lengths).
    PlantInt32(usize, i32),
    /// Overwrite with a huge unsigned varint (compact lengths).
    PlantVarint(usize),
    FlipBit(usize, u8),
    SetByte(usize, u8),
    Insert(usize, Vec<u8>),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (
            any::<usize>(),
            prop_oneof![
                Just(i32::MAX),
                Just(-1),
                Just(-2),
                Just(i32::MIN),
                any::<i32>()
            ]
        )
            .prop_map(|(at, v)| Mutation::PlantInt32(at, v)),
        any::<usize>().prop_map(Mutation::PlantVarint),
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit(at, bit)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::SetByte(at, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// Applies a mutation past the 8-byte prefix, so key and version stay valid
/// and the body decoder is what gets exercised.
fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    const KEEP: usize = 8;
    let span = frame.len().saturating_sub(KEEP).max(1);
    let at = |i: usize| KEEP + i % span;
    let overwrite = |frame: &mut Vec<u8>, pos: usize, bytes: &[u8]| {
        if frame.len() < pos + bytes.len() {
            frame.resize(pos + bytes.len(), 0);
        }
        frame[pos..pos + bytes.len()].copy_from_slice(bytes);
    };
    match m {
        Mutation::PlantInt32(i, v) => overwrite(frame, at(*i), &v.to_be_bytes()),
        Mutation::PlantVarint(i) => overwrite(frame, at(*i), &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        Mutation::FlipBit(i, bit) if frame.len() > KEEP => frame[at(*i)] ^= 1 << bit,
        Mutation::SetByte(i, b) if frame.len() > KEEP => frame[at(*i)] = *b,
        Mutation::Insert(i, bytes) => {
            let pos = at(*i).min(frame.len());
            frame.splice(pos..pos, bytes.iter().copied());
        }
        Mutation::Truncate(i) => frame.truncate(at(*i)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn mutated_valid_frames(seed in any::<prop::sample::Index>(), mutations in prop::collection::vec(mutation(), 1..6)) {
        let seeds = seeds();
        let mut frame = seeds[seed.index(seeds.len())].to_vec();
        for m in &mutations {
            apply(&mut frame, m);
        }
        check(Bytes::from(frame))?;
    }

    #[test]
    fn random_bodies_for_every_key_and_version(
        pair in any::<prop::sample::Index>(),
        body in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        let pairs = common::all_versions();
        let (key, version) = pairs[pair.index(pairs.len())];
        check(common::frame(key, version, &body))?;
    }

    #[test]
    fn random_frames(frame in prop::collection::vec(any::<u8>(), 0..64)) {
        check(Bytes::from(frame))?;
    }
}

fn seeds() -> &'static [Bytes] {
    static SEEDS: std::sync::OnceLock<Vec<Bytes>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(common::seed_frames)
}

#[test]
fn every_seed_decodes_cleanly() {
    for seed in seeds() {
        if let Err(e) = decode_request(seed.clone(), |_, _| true) {
            panic!("seed does not decode: {e}");
        }
    }
}

#[test]
fn seeds_cover_every_key_and_version_but_three() {
    // These three defaults carry a field their newest version cannot encode;
    // the random-body property still covers them.
    assert_eq!(
        common::unencodable_defaults(),
        vec![
            (ApiKey::OffsetCommit, 10),
            (ApiKey::OffsetFetch, 10),
            (ApiKey::InitProducerId, 6)
        ]
    );
}

#[test]
fn every_single_byte_and_length_mutation_of_every_seed() {
    // Deterministic sweep: plant a huge int32 and a huge varint at every
    // offset of every seed, and cut every seed at every length.
    for seed in seeds() {
        for at in 8..seed.len() {
            for m in [
                Mutation::PlantInt32(at - 8, i32::MAX),
                Mutation::PlantVarint(at - 8),
            ] {
                let mut f = seed.to_vec();
                apply(&mut f, &m);
                check(Bytes::from(f)).unwrap();
            }
            check(seed.slice(..at)).unwrap();
        }
    }
}
