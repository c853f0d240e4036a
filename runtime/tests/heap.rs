//! The symmetric heap across processes on the host backend: 2, 3 and 4 PEs, each a child
//! process of the test binary (see `common/mod.rs`).

mod common;
use common::Pes;

use rshmem::backend::host::HostMemory;
use rshmem::backend::{AmoOp, Width};
use rshmem::bootstrap::{Bootstrap, UniqueId};
use rshmem::heap::SymmetricHeap;
use rshmem::Error;
use std::sync::Arc;
use std::time::Duration;

const MIB: usize = 1 << 20;

fn boot() -> Bootstrap {
    let (uid, rank, n) = UniqueId::from_env().unwrap().expect("torchrun variables are set by the harness");
    Bootstrap::connect(&uid, rank, n, Duration::from_secs(30)).unwrap()
}

fn heap(boot: &Bootstrap) -> SymmetricHeap {
    let env = rshmem::env::env().unwrap();
    SymmetricHeap::new(Arc::new(HostMemory::new()), boot, env.symmetric_size, env.heap_growth).unwrap()
}

fn set(h: &SymmetricHeap, addr: usize, v: u64) {
    assert!(addr % 8 == 0);
    // SAFETY: every address passed here came from `translate`/`malloc` of 8+ bytes.
    unsafe { h.backend().atomic(addr, Width::W64, AmoOp::Set(v)) }.unwrap();
}

fn get(h: &SymmetricHeap, addr: usize) -> u64 {
    // SAFETY: as in `set`.
    unsafe { h.backend().load_acquire(addr, Width::W64) }.unwrap()
}

/// PE 0 writes into every peer's copy; every PE writes into its right neighbour's copy.
fn peer_writes(n: usize) {
    let b = boot();
    let h = heap(&b);
    let me = b.rank();
    let x = h.malloc(&b, 4096, 0).unwrap();
    if me == 0 {
        for pe in 1..n {
            set(&h, h.translate(x, 4096, pe).unwrap(), 1000 + pe as u64);
        }
    }
    let right = (me + 1) % n;
    set(&h, h.translate(x + 8 + 8 * me, 8, right).unwrap(), 7 + me as u64);
    b.barrier().unwrap();
    if me != 0 {
        assert_eq!(get(&h, x), 1000 + me as u64, "PE {me} did not see PE 0's write");
    }
    let left = (me + n - 1) % n;
    assert_eq!(get(&h, x + 8 + 8 * left), 7 + left as u64, "PE {me} did not see PE {left}'s write");
    assert_eq!(h.ptr(x, right), Some(h.slot_base(right).unwrap()));
    h.free(&b, x).unwrap();
    assert_eq!(h.in_use(), 0);
}

#[test]
fn peer_writes_2() {
    Pes::new("peer_writes_2", 2).run(|_, n| peer_writes(n));
}

#[test]
fn peer_writes_3() {
    Pes::new("peer_writes_3", 3).run(|_, n| peer_writes(n));
}

#[test]
fn peer_writes_4() {
    Pes::new("peer_writes_4", 4).run(|_, n| peer_writes(n));
}

/// 10 allocations from 1 KiB to 200 MiB with a 1 MiB growth step: every one grows the heap,
/// and earlier data and peer views stay valid.
fn growing(n: usize) {
    let b = boot();
    let h = heap(&b);
    let me = b.rank();
    let sizes = [1 << 10, 10 << 10, 100 << 10, MIB, 3 * MIB, 10 * MIB, 30 * MIB, 60 * MIB, 100 * MIB, 200 * MIB];
    let tag = |pe: usize, i: usize, end: u64| ((pe as u64) << 32) | ((i as u64) << 8) | end;
    let mut blocks = Vec::new();
    let mut grew = 0;
    for (i, &size) in sizes.iter().enumerate() {
        let before = h.mapped();
        let x = h.malloc(&b, size, 0).unwrap();
        grew += usize::from(h.mapped() > before);
        set(&h, x, tag(me, i, 1));
        set(&h, x + size - 8, tag(me, i, 2));
        blocks.push((x, size));
        // Each earlier block is still where it was, with its data.
        for (j, &(y, s)) in blocks.iter().enumerate() {
            assert_eq!((get(&h, y), get(&h, y + s - 8)), (tag(me, j, 1), tag(me, j, 2)), "block {j} after malloc {i}");
        }
    }
    assert!(grew >= 8, "only {grew} of 10 allocations grew the heap (growth step 1 MiB)");
    assert_eq!(h.in_use(), sizes.iter().map(|s| s.div_ceil(256) * 256).sum::<usize>());
    b.barrier().unwrap();
    for pe in 0..n {
        for (i, &(x, size)) in blocks.iter().enumerate() {
            let (first, last) = (h.translate(x, size, pe).unwrap(), h.translate(x + size - 8, 8, pe).unwrap());
            assert_eq!((get(&h, first), get(&h, last)), (tag(pe, i, 1), tag(pe, i, 2)), "PE {me} reading PE {pe}'s block {i}");
        }
    }
    b.barrier().unwrap();
    for (x, _) in blocks {
        h.free(&b, x).unwrap();
    }
    assert_eq!(h.in_use(), 0);
}

#[test]
fn growing_2() {
    Pes::new("growing_2", 2).env("RSHMEM_HEAP_GROWTH", "1M").run(|_, n| growing(n));
}

#[test]
fn growing_3() {
    Pes::new("growing_3", 3).env("RSHMEM_HEAP_GROWTH", "1M").run(|_, n| growing(n));
}

/// The last PE asks for a different size: every PE fails with Mismatch naming a differing PE.
fn mismatch(n: usize) {
    let b = boot();
    let h = heap(&b);
    let me = b.rank();
    let size = if me == n - 1 { 8192 } else { 4096 };
    match h.malloc(&b, size, 0) {
        Err(Error::Mismatch { what, me: m, pe, mine, theirs }) => {
            assert_eq!((what, m), ("malloc size", me));
            assert_eq!(pe, if me == n - 1 { 0 } else { n - 1 });
            assert_eq!(mine, size.to_string());
            assert_ne!(theirs, mine);
        }
        other => panic!("PE {me}: expected Mismatch, got {other:?}"),
    }
    // Every PE also fails when one frees a different allocation.
    let x = h.malloc(&b, 256, 0).unwrap();
    let y = h.malloc(&b, 256, 0).unwrap();
    let err = h.free(&b, if me == 0 { x } else { y }).unwrap_err();
    assert!(matches!(err, Error::Mismatch { what: "freed address", .. }), "{err}");
    h.free(&b, x).unwrap();
    h.free(&b, y).unwrap();
    // An out-of-step call count is caught too (PE 0 makes one extra free(0)).
    if me == 0 {
        h.free(&b, 0).unwrap_err();
    } else {
        h.malloc(&b, 256, 0).unwrap_err();
    }
}

#[test]
fn mismatch_2() {
    Pes::new("mismatch_2", 2).run(|_, n| mismatch(n));
}

#[test]
fn mismatch_4() {
    Pes::new("mismatch_4", 4).run(|_, n| mismatch(n));
}

/// `RSHMEM_SYMMETRIC_SIZE=64M`: a request past it is HeapExhausted on every PE, and the heap
/// still works afterwards.
fn bound(_n: usize) {
    let b = boot();
    let h = heap(&b);
    assert_eq!(h.bound(), 64 * MIB);
    let x = h.malloc(&b, 48 * MIB, 0).unwrap();
    match h.malloc(&b, 32 * MIB, 0) {
        Err(Error::HeapExhausted { requested, in_use, bound }) => {
            assert_eq!((requested, in_use, bound), (32 * MIB, 48 * MIB, 64 * MIB));
        }
        other => panic!("expected HeapExhausted, got {other:?}"),
    }
    assert!(matches!(h.malloc(&b, 65 * MIB, 0), Err(Error::HeapExhausted { .. })));
    let y = h.malloc(&b, 16 * MIB, 0).unwrap();
    assert_eq!(y - x, 48 * MIB);
    assert_eq!(h.mapped(), 64 * MIB);
}

#[test]
fn bound_2() {
    Pes::new("bound_2", 2).env("RSHMEM_SYMMETRIC_SIZE", "64M").run(|_, n| bound(n));
}

#[test]
fn bound_3() {
    Pes::new("bound_3", 3).env("RSHMEM_SYMMETRIC_SIZE", "64M").run(|_, n| bound(n));
}

/// Addresses outside the heap and PEs outside the job are refused, naming the values.
fn translate_errors(n: usize) {
    let b = boot();
    let h = heap(&b);
    let x = h.calloc(&b, 64, 8).unwrap();
    assert_eq!(get(&h, x + 256), 0);
    let on_stack = 0u64;
    let stack = &on_stack as *const u64 as usize;
    match h.translate(stack, 8, 0) {
        Err(Error::NotSymmetric { addr, len, heap_lo, heap_hi }) => {
            assert_eq!((addr, len, heap_lo), (stack, 8, h.my_base()));
            assert_eq!(heap_hi, h.my_base() + h.mapped());
        }
        other => panic!("expected NotSymmetric, got {other:?}"),
    }
    assert!(matches!(h.translate(x + h.mapped(), 1, 0), Err(Error::NotSymmetric { .. })));
    match h.translate(x, 8, n) {
        Err(Error::PeOutOfRange { pe, n_pes, .. }) => assert_eq!((pe, n_pes), (n as i64, n)),
        other => panic!("expected PeOutOfRange, got {other:?}"),
    }
    assert_eq!(h.ptr(stack, 0), None);
    assert_eq!(h.ptr(x, n), None);
    assert!(h.describe(x + 40).ends_with("allocation of 512 bytes at heap offset 0, +40"), "{}", h.describe(x + 40));
}

#[test]
fn translate_errors_2() {
    Pes::new("translate_errors_2", 2).run(|_, n| translate_errors(n));
}
