//! Any byte string handed to the request decoder (with every version the
//! crate knows accepted) must produce a request or an error: no abort, and
//! no decoder panic (which `decode_request` would report as an error).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ottla_protocol::request::{decode_request, RequestError};

// Without it, hostile array lengths abort the process (and libFuzzer would
// report them as crashes); see ottla_protocol::alloc.
#[global_allocator]
static ALLOC: ottla_protocol::alloc::NoReserveAllocator = ottla_protocol::alloc::NoReserveAllocator;

fuzz_target!(|data: &[u8]| {
    match decode_request(bytes::Bytes::copy_from_slice(data), |_, _| true) {
        Err(
            RequestError::InvalidHeader { reason, .. } | RequestError::InvalidBody { reason, .. },
        ) if reason.contains("panicked") => {
            panic!("{reason}")
        }
        _ => {}
    }
});
