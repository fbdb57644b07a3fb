//! Settings of mimalloc, the allocator of klab's binaries, for heaps of many gigabytes.
//!
//! Every ten thousand allocations that miss mimalloc's fast path, it collects the thread's heap
//! by default: it visits every page of the heap with free space in it, to return empty ones. A
//! large cluster in one process holds many gigabytes in small objects, and the visit grows with
//! them: in `-- zones5000` (150 000 pods, 7 GB) those collections were 10 % of the process once
//! the pods ran. The binaries that may hold such heaps (`klab` and the sim benchmark) call
//! [`tune_mimalloc`] first; it is harmless where mimalloc is not the global allocator.

use std::os::raw::c_long;

/// mimalloc's `mi_option_generic_collect`: its place in the option enum of the mimalloc that
/// `libmimalloc-sys` builds (v3), which the Rust bindings do not name. A test holds the number
/// to the option by its default.
const GENERIC_COLLECT: libmimalloc_sys::mi_option_t = 34;

/// Slow-path allocations between two collections: the most mimalloc accepts (it clamps the
/// option to 1 000 000). Retired pages are still freed every thousand.
const COLLECT_EVERY: c_long = 1_000_000;

/// Makes mimalloc collect a thread's heap a hundred times less often.
pub fn tune_mimalloc() {
    // SAFETY: `mi_option_set` only stores the value in mimalloc's option table (atomically); it
    // takes no pointers and may be called at any time from any thread.
    unsafe { libmimalloc_sys::mi_option_set(GENERIC_COLLECT, COLLECT_EVERY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_mimallocs_generic_collect() {
        // SAFETY: reads mimalloc's option table; see `tune_mimalloc`.
        let get = || unsafe { libmimalloc_sys::mi_option_get(GENERIC_COLLECT) };
        // 10 000 is generic_collect's documented default, and no other option's.
        assert_eq!(get(), 10_000);
        tune_mimalloc();
        assert_eq!(get(), COLLECT_EVERY);
    }
}
