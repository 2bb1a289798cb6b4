//! Ottla's cluster-mirroring APIs (KIP-1279), which kafka-protocol does not
//! know: request and response types, their schemas and their codec.
//!
//! # The APIs
//! Key numbers are the KIP-1279 prototype's where the meaning matches; the
//! prototype left 97 unidentified (most likely its epoch lookup), so
//! LastMirroredEpochs takes it. Apache Kafka 4.4 allocated 94 to
//! UnregisterController, so CreateMirror moved to 106, the first key after
//! the prototype's range; 95-106 are not allocated upstream (the wire
//! compatibility test fails the day Apache Kafka serves one of them).
//!
//! | Key | API | From → to | Module |
//! |----:|-----|-----------|--------|
//! | 106 | CreateMirror | admin → broker | [`admin`] |
//! |  95 | AddTopicsToMirror | admin → broker | [`topics`] |
//! |  96 | RemoveTopicsFromMirror | admin → broker (failover) | [`topics`] |
//! |  97 | LastMirroredEpochs | mirror leader → source broker | [`epochs`] |
//! |  98 | ListMirrors | admin → broker | [`admin`] |
//! |  99 | DescribeMirrors | admin → broker | [`admin`] |
//! | 100 | ReadMirrorStates | mirror leader → `__mirror_state` leader | [`states`] |
//! | 101 | WriteMirrorStates | mirror leader → `__mirror_state` leader | [`states`] |
//! | 102 | PauseMirrorTopics | admin → broker | [`topics`] |
//! | 103 | ResumeMirrorTopics | admin → broker | [`topics`] |
//! | 104 | DeleteMirror | admin → broker | [`admin`] |
//! | 105 | BumpLeaderEpochs | broker → controller | [`epochs`] |
//!
//! # Conventions
//! - Every API has `"validVersions": "0"` and `"flexibleVersions": "0+"`:
//!   compact strings and arrays (length + 1 as an unsigned varint, 0 = null),
//!   and a tagged-field section at the end of every struct. Requests use
//!   request header v2 ([`REQUEST_HEADER_VERSION`]) and responses header v1
//!   ([`RESPONSE_HEADER_VERSION`]), as every flexible Kafka API but
//!   ApiVersions.
//! - Unknown tagged fields are kept in `unknown_tagged_fields` and written
//!   back unchanged, so a newer peer's additions survive a forward.
//! - Each module documents its schemas in the form of Kafka's JSON message
//!   specs (`clients/src/main/resources/common/message/*.json`).
//! - A later version adds fields as tagged fields where it can (no version
//!   bump needed); a change to the fixed fields raises
//!   [`MirrorApiKey::versions`] and makes the struct's codec version-aware.
//! - Decoding is strict: a body must be consumed exactly (trailing bytes are
//!   an error), tags must be strictly increasing, and no allocation is larger
//!   than the bytes actually present ([`wire`]).
//! - Error codes are Kafka's `Errors` codes; mirror-specific conditions use
//!   the codes listed in [`errors`].
//!
//! # Choices where KIP-1279 leaves room
//! - The API names are the seeds' (AddTopicsToMirror, not the prototype's
//!   later StartMirrorTopics); the topic-set APIs take topic names only: the
//!   mirror's own filters (`mirror.topics.include`) replace the prototype's
//!   per-request patterns, and the broker looks up the source topic's id and
//!   partition count itself.
//! - Read/WriteMirrorStates, LastMirroredEpochs and BumpLeaderEpochs name
//!   topics by id: the state is keyed by id, and ids are what survive a
//!   topic being deleted and re-created under the same name.
//! - Read/WriteMirrorStates carry the mirror partition's leader epoch, so
//!   the coordinator can fence a deposed leader (the mailing list's answer to
//!   AS18); no retry counters (the seeds have no automatic retry of FAILED).
//! - LastMirroredEpochs answers an epoch only, not an offset: the seeds
//!   truncate at the start of the first epoch beyond it.
//! - CreateMirror has `ValidateOnly`, as CreateTopics does, so the CLI can
//!   check a mirror config without creating anything.
//!
//! # Mirror partition states on the wire
//! `State` and `PreviousState` fields are int8 values, the prototype's
//! numbering with PREPARING in the place of its LOG_TRUNCATION:
//!
//! | Value | State |
//! |------:|-------|
//! | 0 | PREPARING |
//! | 1 | (reserved: the prototype's EPOCH_FENCING) |
//! | 2 | MIRRORING |
//! | 3 | PAUSING |
//! | 4 | PAUSED |
//! | 5 | STOPPING |
//! | 6 | STOPPED |
//! | 7 | FAILED |
//! | 16 | UNKNOWN (no state stored) |
//!
//! The codec carries the raw value; `ottla-mirror` interprets it.

use std::ops::RangeInclusive;

use bytes::BytesMut;

use crate::schema::wire::{DecodeError, EncodeError, WireField};

/// Makes a schema struct a top-level message of `$key`.
macro_rules! mirror_message {
    ($name:ident, $key:expr) => {
        impl $crate::mirror::MirrorMessage for $name {
            const API_KEY: $crate::mirror::MirrorApiKey = $key;
            const NAME: &'static str = stringify!($name);
        }
    };
}

/// Pairs a request with its response.
macro_rules! mirror_api {
    ($key:expr, $request:ident => $response:ident) => {
        mirror_message!($request, $key);
        mirror_message!($response, $key);
        impl $crate::mirror::MirrorRequest for $request {
            type Response = $response;
        }
    };
}

pub mod admin;
pub mod epochs;
pub mod errors;
pub mod states;
#[cfg(test)]
mod tests;
pub mod topics;

/// Flexible requests carry request header v2 (client id plus tagged fields).
pub const REQUEST_HEADER_VERSION: i16 = 2;
/// Flexible responses carry response header v1 (correlation id plus tagged fields).
pub const RESPONSE_HEADER_VERSION: i16 = 1;

/// The mirror API keys. See the module documentation for the numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum MirrorApiKey {
    CreateMirror = 106,
    AddTopicsToMirror = 95,
    RemoveTopicsFromMirror = 96,
    LastMirroredEpochs = 97,
    ListMirrors = 98,
    DescribeMirrors = 99,
    ReadMirrorStates = 100,
    WriteMirrorStates = 101,
    PauseMirrorTopics = 102,
    ResumeMirrorTopics = 103,
    DeleteMirror = 104,
    BumpLeaderEpochs = 105,
}

impl MirrorApiKey {
    pub const ALL: [MirrorApiKey; 12] = [
        Self::CreateMirror,
        Self::AddTopicsToMirror,
        Self::RemoveTopicsFromMirror,
        Self::LastMirroredEpochs,
        Self::ListMirrors,
        Self::DescribeMirrors,
        Self::ReadMirrorStates,
        Self::WriteMirrorStates,
        Self::PauseMirrorTopics,
        Self::ResumeMirrorTopics,
        Self::DeleteMirror,
        Self::BumpLeaderEpochs,
    ];

    pub fn from_i16(key: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_i16() == key)
    }

    pub fn as_i16(self) -> i16 {
        self as i16
    }

    /// The versions served, for ApiVersions. All APIs are at v0.
    pub fn versions(self) -> RangeInclusive<i16> {
        0..=0
    }
}

/// A top-level mirror request or response body.
pub trait MirrorMessage: WireField {
    const API_KEY: MirrorApiKey;
    const NAME: &'static str;

    /// The body in `version`'s encoding (without the header).
    fn encode(&self, version: i16) -> Result<BytesMut, EncodeError> {
        crate::schema::encode_body(self, Self::NAME, Self::API_KEY.versions(), version)
    }

    /// Decodes exactly `body` (the bytes after the header).
    fn decode(body: &[u8], version: i16) -> Result<Self, DecodeError> {
        crate::schema::decode_body(body, Self::NAME, Self::API_KEY.versions(), version)
    }
}

/// A request, tied to the response it is answered with.
pub trait MirrorRequest: MirrorMessage {
    type Response: MirrorMessage;
}
