//! Tests of the host backend: reservations, chunks shared between mappings, copies and atomics.
//!
//! # Safety
//! Tests read and write the memory they just mapped through raw addresses.
#![allow(unsafe_code)]

use super::HostMemory;
use crate::backend::{AmoOp, MemoryBackend, Width};

fn page() -> usize {
    HostMemory::new().granularity()
}

#[test]
fn a_chunk_mapped_twice_aliases() {
    let b = HostMemory::new();
    let (g, len) = (page(), 4 * page());
    let res = b.reserve(4 * len).unwrap();
    let chunk = b.create_chunk(len).unwrap();
    let m1 = chunk.map_at(res.base()).unwrap();
    // An imported copy of the exported fd stands for a peer's view.
    let peer = b.import_chunk(chunk.export_fd().unwrap(), len).unwrap();
    let m2 = peer.map_at(res.base() + 2 * len).unwrap();
    assert_eq!((m1.addr(), m1.len(), m2.len()), (res.base(), len, len));
    let msg = b"written through the first mapping";
    // SAFETY: both ranges are inside the fresh mappings m1 and m2 and do not overlap the source.
    unsafe {
        b.copy(m1.addr() + g + 3, msg.as_ptr() as usize, msg.len()).unwrap();
        let mut back = [0u8; 33];
        b.copy(back.as_mut_ptr() as usize, m2.addr() + g + 3, msg.len()).unwrap();
        assert_eq!(&back, msg);
        // Fresh memfd pages read as zero.
        assert_eq!(b.load_acquire(m2.addr() + len - 8, Width::W64).unwrap(), 0);
    }
    // Unmapping one view leaves the other intact, and the hole is reserved again (a new
    // mapping fits there).
    drop(m1);
    // SAFETY: m2 is still mapped.
    assert_eq!(unsafe { b.atomic(m2.addr() + g + 3 - 3, Width::W32, AmoOp::Fetch) }.unwrap() >> 24, u64::from(b'w'));
    let m3 = chunk.map_at(res.base()).unwrap();
    // SAFETY: m3 is mapped for len bytes.
    unsafe { b.zero(m3.addr() + g, 64).unwrap() };
    // SAFETY: m2 is mapped and aliases m3.
    assert_eq!(unsafe { b.load_acquire(m2.addr() + g + 4, Width::W32) }.unwrap(), 0);
}

#[test]
fn maps_only_inside_a_reservation_and_never_over_a_mapping() {
    let b = HostMemory::new();
    let len = 2 * page();
    let res = b.reserve(2 * len).unwrap();
    let chunk = b.create_chunk(len).unwrap();
    let _m = chunk.map_at(res.base() + len).unwrap();
    let err = chunk.map_at(res.base() + page()).err().unwrap().to_string();
    assert!(err.contains("already mapped"), "{err}");
    let err = chunk.map_at(res.base() + 3 * page()).err().unwrap().to_string();
    assert!(err.contains("not inside a live reservation"), "{err}");
    let outside = vec![0u8; 4 * len];
    assert!(chunk.map_at(outside.as_ptr() as usize).is_err());
    assert!(b.reserve(page() + 1).is_err());
    assert!(b.create_chunk(0).is_err());
}

#[test]
fn import_checks_the_size() {
    let b = HostMemory::new();
    let chunk = b.create_chunk(page()).unwrap();
    let err = b.import_chunk(chunk.export_fd().unwrap(), 2 * page()).err().unwrap().to_string();
    assert!(err.contains(&format!("is {} bytes, expected at least {}", page(), 2 * page())), "{err}");
}

#[test]
fn reservation_outlives_its_mappings() {
    let b = HostMemory::new();
    let res = b.reserve(page()).unwrap();
    let base = res.base();
    let m = b.create_chunk(page()).unwrap().map_at(base).unwrap();
    drop(res);
    // The range is still held by the mapping: memory stays usable and the chunk (dropped
    // above) lives on in the mapping.
    // SAFETY: m is mapped.
    unsafe {
        b.atomic(base, Width::W64, AmoOp::Set(7)).unwrap();
        assert_eq!(b.load_acquire(base, Width::W64).unwrap(), 7);
    }
    drop(m);
}

#[test]
fn atomics_give_old_values() {
    let b = HostMemory::new();
    let res = b.reserve(page()).unwrap();
    let m = b.create_chunk(page()).unwrap().map_at(res.base()).unwrap();
    let (w, d) = (m.addr(), m.addr() + 8);
    // SAFETY: both words are inside the mapping, aligned.
    unsafe {
        assert_eq!(b.atomic(w, Width::W32, AmoOp::Set(5)).unwrap(), 0);
        assert_eq!(b.atomic(w, Width::W32, AmoOp::Add(u64::MAX)).unwrap(), 5); // -1, low bits
        assert_eq!(b.atomic(w, Width::W32, AmoOp::Fetch).unwrap(), 4);
        assert_eq!(b.atomic(w, Width::W32, AmoOp::CompareSwap { cond: 3, value: 9 }).unwrap(), 4);
        assert_eq!(b.atomic(w, Width::W32, AmoOp::CompareSwap { cond: 4, value: 9 }).unwrap(), 4);
        assert_eq!(b.atomic(w, Width::W32, AmoOp::Or(0x30)).unwrap(), 9);
        assert_eq!(b.atomic(w, Width::W32, AmoOp::And(0x31)).unwrap(), 0x39);
        assert_eq!(b.atomic(w, Width::W32, AmoOp::Xor(0xff)).unwrap(), 0x31);
        assert_eq!(b.atomic(w, Width::W32, AmoOp::Swap(1)).unwrap(), 0xce);
        assert_eq!(b.atomic(w + 4, Width::W32, AmoOp::Fetch).unwrap(), 0, "32-bit ops stay in their word");
        assert_eq!(b.atomic(d, Width::W64, AmoOp::Add(1 << 40)).unwrap(), 0);
        assert_eq!(b.atomic(d, Width::W64, AmoOp::Add((1u64 << 40).wrapping_neg())).unwrap(), 1 << 40);
        assert_eq!(b.load_acquire(d, Width::W64).unwrap(), 0);
        assert!(b.atomic(d + 4, Width::W64, AmoOp::Fetch).is_err(), "misaligned");
    }
    b.quiet().unwrap();
}

#[test]
fn atomic_adds_from_threads_through_two_views_do_not_lose_updates() {
    let b = std::sync::Arc::new(HostMemory::new());
    let res = b.reserve(2 * page()).unwrap();
    let chunk = b.create_chunk(page()).unwrap();
    let views = [chunk.map_at(res.base()).unwrap(), chunk.map_at(res.base() + page()).unwrap()];
    let addrs: Vec<usize> = views.iter().map(|m| m.addr() + 64).collect();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (b, a) = (b.clone(), addrs[t % 2]);
            // SAFETY: the views outlive the threads (joined below).
            std::thread::spawn(move || (0..10_000).for_each(|_| unsafe {
                b.atomic(a, Width::W64, AmoOp::Add(1)).unwrap();
            }))
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    // SAFETY: mapped.
    assert_eq!(unsafe { b.load_acquire(addrs[0], Width::W64) }.unwrap(), 40_000);
}
