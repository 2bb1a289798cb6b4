//! A global allocator that lets the broker survive hostile array-length claims.
//!
//! # Why
//! kafka-protocol 0.18 decodes `Array`/`CompactArray` fields with
//! `Vec::with_capacity(n)` for whatever `n` the request claims. A 4-byte
//! MetadataRequest v1 body `7f ff ff ff` asks for 2^31 topics, i.e. a 154 GB
//! reservation. glibc's malloc serves that with an ordinary `mmap`, which the
//! kernel refuses under its overcommit heuristic; Rust then calls
//! `handle_alloc_error`, which aborts the whole process. An abort cannot be
//! caught, and we may not patch the crate.
//!
//! The reservation is never *used*: the decoder pushes one element per element
//! actually present in the frame and fails at the first missing byte, so the
//! touched memory is bounded by the frame size (itself capped by
//! `socket.request.max.bytes`). Only the reservation has to succeed.
//!
//! # How
//! [`NoReserveAllocator`] forwards everything to the system allocator except
//! blocks of [`HUGE_ALLOCATION`] bytes or more, which it maps with
//! `mmap(MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)`. Untouched pages of such a
//! mapping cost no memory, and with `MAP_NORESERVE` the mapping is not charged
//! against the commit limit in the default heuristic overcommit mode
//! (`vm.overcommit_memory=0`) or in mode 1. Such blocks are released with
//! `munmap` and grown or shrunk with `mremap`. The rest of the process keeps the
//! system allocator's behaviour; large legitimate buffers (a 100 MiB produce
//! frame) simply come from a lazily backed mapping, as glibc would give them anyway.
//!
//! # Limits
//! - `vm.overcommit_memory=2` (strict accounting) ignores `MAP_NORESERVE`; a
//!   hostile claim then fails the mapping and the process still aborts. So does
//!   a `ulimit -v`/`-d` (RLIMIT_AS, RLIMIT_DATA) smaller than the claim. Run the
//!   broker with mode 0 or 1 and without address-space limits.
//! - Address space: x86-64 and arm64 give a process 128 TiB. One claim is at
//!   most 2^32 elements × the element's in-memory size (a few hundred bytes), so
//!   under 1 TiB; a message nests arrays a few levels deep, and each level can
//!   hold one live reservation while an inner one is attempted.
//! - Decoding is synchronous and runs on the runtime's fixed set of worker
//!   threads, so at most one decode per worker (and thus a bounded number of
//!   hostile reservations) exists at any moment.
//! - What *is* touched is real memory: a frame full of tiny elements can still
//!   decode into tens of times its size in structs. That is bounded by
//!   `socket.request.max.bytes`, which is the knob for untrusted networks.
//!
//! Install it in every binary (and every test binary feeding hostile input):
//! ```
//! #[global_allocator]
//! static ALLOC: ottla_allocator::NoReserveAllocator = ottla_allocator::NoReserveAllocator;
//! # fn main() {}
//! ```

#![cfg(target_os = "linux")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

/// Blocks at least this large are served by `MAP_NORESERVE` mappings.
pub const HUGE_ALLOCATION: usize = 64 << 20;

/// `mmap` returns page-aligned memory and pages are at least 4 KiB everywhere
/// Ottla runs, so any alignment up to this is satisfied by a fresh mapping.
const MAPPING_ALIGN: usize = 4096;

/// The system allocator, except that huge blocks are lazily backed mappings.
/// See the module documentation for why and for the limits.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoReserveAllocator;

/// Whether a block is (or would be) a mapping. Depends on the layout only, so
/// `alloc` and `dealloc` of the same block always agree.
fn is_mapped(layout: Layout) -> bool {
    layout.size() >= HUGE_ALLOCATION && layout.align() <= MAPPING_ALIGN
}

/// Maps `size` zero-filled bytes without reserving commit charge.
fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping with no address hint has no
    // preconditions; failure is reported as MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

/// # Safety
/// `ptr` must come from [`map`] with the same `size`.
unsafe fn unmap(ptr: *mut u8, size: usize) {
    // Nothing useful can be done if munmap fails (it cannot for a valid mapping).
    libc::munmap(ptr.cast(), size);
}

/// Resizes a mapping in place or by moving it; new pages stay unreserved.
///
/// # Safety
/// `ptr` must come from [`map`] with `old_size`.
unsafe fn remap(ptr: *mut u8, old_size: usize, new_size: usize) -> *mut u8 {
    let p = libc::mremap(ptr.cast(), old_size, new_size, libc::MREMAP_MAYMOVE);
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

/// glibc malloc settings for a broker's allocation pattern, set once at
/// start-up, before any thread is spawned.
///
/// A Fetch reads up to `max.partition.fetch.bytes` (1 MiB) per partition
/// into a fresh buffer, freed once the response is written. With glibc's
/// defaults those buffers straddle the dynamic mmap threshold and the heap
/// trim threshold, so the memory goes back to the kernel after each fetch
/// and comes back as freshly zeroed, faulted-in pages: on the development
/// machine, one page fault per 4 KiB served (123,000 per 500 MB consumed)
/// and twice the kernel time of the fetch itself. Fixed thresholds keep
/// buffers up to 32 MiB on the heap and keep up to 64 MiB of freed memory
/// per arena for reuse; consuming 500 MB then costs ~6,500 faults.
pub fn tune_system_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator parameters; it is called before
    // other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

unsafe impl GlobalAlloc for NoReserveAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_mapped(layout) {
            map(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_mapped(layout) {
            // Anonymous mappings are already zero-filled, and stay untouched.
            map(layout.size())
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_mapped(layout) {
            unmap(ptr, layout.size())
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the GlobalAlloc contract guarantees new_size, rounded up to
        // the alignment, does not overflow isize.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (is_mapped(layout), is_mapped(new_layout)) {
            (false, false) => System.realloc(ptr, layout, new_size),
            (true, true) => remap(ptr, layout.size(), new_size),
            // Crossing the threshold changes who owns the block: move it.
            _ => {
                let new_ptr = self.alloc(new_layout);
                if !new_ptr.is_null() {
                    ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new_ptr
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    #[test]
    fn small_blocks_use_the_system_allocator_and_round_trip() {
        let a = NoReserveAllocator;
        unsafe {
            let p = a.alloc(layout(100));
            assert!(!p.is_null());
            p.write_bytes(7, 100);
            let p = a.realloc(p, layout(100), 1000);
            assert_eq!(*p.add(99), 7);
            a.dealloc(p, layout(1000));
        }
    }

    #[test]
    fn a_terabyte_reservation_succeeds_and_is_usable_where_touched() {
        let a = NoReserveAllocator;
        let size = 1 << 40;
        unsafe {
            let p = a.alloc(layout(size));
            assert!(!p.is_null(), "1 TiB MAP_NORESERVE mapping was refused");
            p.write(1);
            p.add(size - 1).write(2);
            assert_eq!(*p, 1);
            a.dealloc(p, layout(size));
        }
    }

    #[test]
    fn realloc_moves_data_across_the_threshold_both_ways() {
        let a = NoReserveAllocator;
        unsafe {
            let p = a.alloc(layout(4096));
            p.write_bytes(9, 4096);
            let p = a.realloc(p, layout(4096), HUGE_ALLOCATION * 2);
            assert_eq!(*p.add(4095), 9);
            let p = a.realloc(p, layout(HUGE_ALLOCATION * 2), HUGE_ALLOCATION * 4);
            assert_eq!(*p.add(4095), 9);
            let p = a.realloc(p, layout(HUGE_ALLOCATION * 4), 4096);
            assert_eq!(*p.add(4095), 9);
            a.dealloc(p, layout(4096));
        }
    }

    #[test]
    fn zeroed_huge_blocks_read_as_zero() {
        let a = NoReserveAllocator;
        unsafe {
            let p = a.alloc_zeroed(layout(HUGE_ALLOCATION));
            assert_eq!(*p.add(HUGE_ALLOCATION / 2), 0);
            a.dealloc(p, layout(HUGE_ALLOCATION));
        }
    }
}
