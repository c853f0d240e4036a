//! The host API on the host backend, with several PEs as processes: memory, RMA, atomics,
//! signals, point-to-point waits, ordering and barriers.

mod common;

use common::rng::Rng;
use common::Pes;
use half::{bf16, f16};
use rshmem::backend::{AmoOp, Width};
use rshmem::{Error, SymAddr};
use rshmem::consts::{Cmp, SignalOp};
use rshmem::dtype::{DType, Element};
use rshmem::runtime::{InitOptions, Runtime};

fn init() -> Runtime {
    Runtime::init(InitOptions::default()).expect("init")
}

/// This file's data generator (its own salt, so its data differs from the other files').
fn rng(seed: u64) -> Rng {
    Rng::salted(seed, 0x1234_5678)
}

/// Reads `len` bytes of this PE's symmetric memory.
fn local_bytes(rt: &Runtime, addr: SymAddr, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is a live buffer of `len` bytes.
    unsafe { rt.getmem(out.as_mut_ptr() as usize, addr, len, rt.my_pe()) }.unwrap();
    out
}

#[test]
fn single_pe_without_a_launcher() {
    // The parent test process has no torchrun variables: init makes a job of one PE.
    if std::env::var("WORLD_SIZE").is_ok() || std::env::var("RANK").is_ok() {
        return; // launched under torchrun/mpirun: not the case this test is about
    }
    let rt = init();
    assert_eq!((rt.my_pe(), rt.n_pes()), (0, 1));
    let a = rt.malloc(64).unwrap();
    rt.p::<u32>(a, 7, 0).unwrap();
    assert_eq!(rt.g::<u32>(a, 0).unwrap(), 7);
    rt.barrier_all().unwrap();
    rt.free(a).unwrap();
    rt.finalize().unwrap();
}

#[test]
fn memory_calls() {
    Pes::new("memory_calls", 2).run(|pe, n| {
        let rt = init();
        assert_eq!((rt.my_pe(), rt.n_pes()), (pe, n));
        assert_eq!(rt.backend_kind(), rshmem::backend::BackendKind::Host);
        let a = rt.malloc(1000).unwrap();
        assert_eq!(a.get() % rshmem::runtime::DEFAULT_ALIGN, 0);
        let b = rt.align(4096, 100).unwrap();
        assert_eq!(b.get() % 4096, 0);
        assert!(rt.align(3000, 8).is_err());
        let c = rt.calloc(1000, 8).unwrap();
        assert!(local_bytes(&rt, c, 8000).iter().all(|&x| x == 0));
        // The heap grows past its first chunk and earlier addresses stay valid.
        rt.p::<u64>(a, 0xabcd, pe).unwrap();
        let big = rt.malloc(96 << 20).unwrap();
        rt.p::<u8>(big + (96 << 20) - 1, 9, (pe + 1) % n).unwrap();
        rt.barrier_all().unwrap();
        assert_eq!(rt.g::<u8>(big + (96 << 20) - 1, pe).unwrap(), 9);
        assert_eq!(rt.g::<u64>(a, pe).unwrap(), 0xabcd);
        // ptr: own address for this PE, a mapped alias for the peer on this host, none for a
        // peer on another (virtual) host (RSHMEM_VIRTUAL_HOSTS, as .ci/run runs this file again).
        assert_eq!(rt.ptr(a, pe).unwrap(), Some(a.get()));
        let peer = (pe + 1) % n;
        let alias = rt.ptr(a, peer).unwrap();
        rt.barrier_all().unwrap();
        if rt.bootstrap().node().local_pes.contains(&peer) {
            let alias = alias.expect("node-local peer is mapped");
            assert_ne!(alias, a.get());
            // SAFETY: `alias` maps 1000 bytes of the peer's copy of `a` (ptr said so).
            let v = unsafe { std::ptr::read_volatile(alias as *const u64) };
            assert_eq!(v, 0xabcd);
        } else {
            assert_eq!(alias, None, "PE {peer} is on another host: no pointer to it");
        }
        rt.barrier_all().unwrap();
        for x in [a, b, c, big] {
            rt.free(x).unwrap();
        }
        // Freed space is reused.
        let again = rt.malloc(1000).unwrap();
        assert!(rt.heap().contains(again.get(), 1000));
        rt.free(again).unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn putmem_getmem_sizes() {
    Pes::new("putmem_getmem_sizes", 3).run(|pe, n| {
        let rt = init();
        const MAX: usize = 8 << 20;
        let inbox = rt.malloc(MAX).unwrap();
        let exposed = rt.malloc(MAX).unwrap();
        let next = (pe + 1) % n;
        let prev = (pe + n - 1) % n;
        for (case, size) in [1usize, 3, 8, 100, 4096, 65_537, 1 << 20, MAX].into_iter().enumerate() {
            let seed = |p: usize| (case as u64) << 8 | p as u64;
            let mine = rng(seed(pe)).bytes(size);
            // Write into the next PE's inbox; expose our data for gets.
            // SAFETY: `mine` is a live buffer of `size` bytes.
            unsafe { rt.putmem(inbox, mine.as_ptr() as usize, size, next) }.unwrap();
            unsafe { rt.putmem(exposed, mine.as_ptr() as usize, size, pe) }.unwrap();
            rt.barrier_all().unwrap();
            assert!(local_bytes(&rt, inbox, size) == rng(seed(prev)).bytes(size), "put of {size} bytes");
            let mut got = vec![0u8; size];
            // SAFETY: `got` is a live buffer of `size` bytes.
            unsafe { rt.getmem(got.as_mut_ptr() as usize, exposed, size, next) }.unwrap();
            assert!(got == rng(seed(next)).bytes(size), "get of {size} bytes");
            rt.barrier_all().unwrap();
            // Unaligned offsets inside an allocation.
            if (3..MAX).contains(&size) {
                unsafe { rt.putmem(inbox + 1, mine.as_ptr() as usize, size - 2, next) }.unwrap();
            }
            rt.barrier_all().unwrap();
            if (3..MAX).contains(&size) {
                assert!(local_bytes(&rt, inbox + 1, size - 2) == rng(seed(prev)).bytes(size)[..size - 2]);
            }
            rt.barrier_all().unwrap();
        }
        // Zero bytes: nothing moves, the PE is still checked.
        unsafe { rt.putmem(inbox, 0, 0, next) }.unwrap();
        assert!(unsafe { rt.getmem(0, inbox, 0, n) }.is_err());
        // Non-blocking puts: complete at the target after quiet (and a barrier for the target).
        let sizes = [3usize, 65_537, 1 << 20];
        let datas: Vec<Vec<u8>> = sizes.iter().map(|&size| rng(size as u64 * 7 + pe as u64).bytes(size)).collect();
        let mut at = 0;
        for d in &datas {
            // SAFETY: `d` stays unchanged until the quiet below.
            unsafe { rt.putmem_nbi(inbox + at, d.as_ptr() as usize, d.len(), next) }.unwrap();
            at += d.len();
        }
        rt.quiet().unwrap();
        rt.barrier_all().unwrap();
        let mut at = 0;
        for &size in &sizes {
            assert!(local_bytes(&rt, inbox + at, size) == rng(size as u64 * 7 + prev as u64).bytes(size), "putmem_nbi of {size} bytes");
            at += size;
        }
        let word = [0u8; 8];
        assert!(matches!(unsafe { rt.putmem_nbi(inbox, word.as_ptr() as usize, 8, n) }, Err(rshmem::Error::PeOutOfRange { .. })));
        assert!(unsafe { rt.putmem_nbi(inbox + MAX - 4, word.as_ptr() as usize, 8, next) }.is_err(), "across the end of the allocation");
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn strided_iput_iget() {
    Pes::new("strided_iput_iget", 2).run(|pe, n| {
        let rt = init();
        let (next, prev) = ((pe + 1) % n, (pe + n - 1) % n);
        let sym = rt.calloc(32, 8).unwrap();
        let src: Vec<u64> = (0..16).map(|i| 100 * pe as u64 + i).collect();
        rt.barrier_all().unwrap();
        // sym[3i] on next = src[2i], 5 elements of 8 bytes.
        unsafe { rt.iput(sym, src.as_ptr() as usize, 3, 2, 5, 8, next) }.unwrap();
        rt.barrier_all().unwrap();
        let mut back = [0u64; 5];
        unsafe { rt.iget(back.as_mut_ptr() as usize, sym, 1, 3, 5, 8, pe) }.unwrap();
        assert_eq!(back, [0, 2, 4, 6, 8].map(|i| 100 * prev as u64 + i));
        // A negative source stride walks backwards; a zero one repeats an element.
        let mut rev = [0u64; 4];
        let last = SymAddr::new(sym.get() + 9 * 8);
        unsafe { rt.iget(rev.as_mut_ptr() as usize, last, 1, -3, 4, 8, pe) }.unwrap();
        assert_eq!(rev, [6, 4, 2, 0].map(|i| 100 * prev as u64 + i));
        unsafe { rt.iget(rev.as_mut_ptr() as usize, sym, 1, 0, 4, 8, pe) }.unwrap();
        assert_eq!(rev, [100 * prev as u64; 4]);
        rt.barrier_all().unwrap();
        // Refused before anything moves: a span past the allocation, a bad element size, a zero
        // destination stride, an unreadable source.
        let before = local_bytes(&rt, sym, 256);
        let err = unsafe { rt.iput(sym, src.as_ptr() as usize, 16, 1, 3, 8, next) }.unwrap_err();
        assert!(matches!(err, Error::NotSymmetric { .. } | Error::NotAllocated { .. }), "{err}");
        let err = unsafe { rt.iput(sym, src.as_ptr() as usize, 1, 1, 3, 3, next) }.unwrap_err().to_string();
        assert!(err.contains("element size 3"), "{err}");
        let err = unsafe { rt.iput(sym, src.as_ptr() as usize, 0, 1, 3, 8, next) }.unwrap_err().to_string();
        assert!(err.contains("stride is 0"), "{err}");
        let err = unsafe { rt.iput(sym, 8, 1, 1, 3, 8, next) }.unwrap_err().to_string();
        assert!(err.contains("not readable"), "{err}");
        rt.barrier_all().unwrap();
        assert_eq!(local_bytes(&rt, sym, 256), before);
        rt.finalize().unwrap();
    });
}

fn bits<T: Element>(v: T) -> Vec<u8> {
    let mut b = vec![0u8; T::DTYPE.size()];
    v.write_ne(&mut b);
    b
}

/// Every PE writes its value into slot `me` of `buf` on every PE with `p`, then reads every
/// slot of every PE back with `g`.
fn p_and_g<T: Element>(rt: &Runtime, buf: SymAddr) {
    let (me, n, size) = (rt.my_pe(), rt.n_pes(), T::DTYPE.size());
    let value = |p: usize| T::read_ne(&rng(p as u64 * 31 + size as u64).bytes(size));
    for target in 0..n {
        rt.p(buf + me * size, value(me), target).unwrap();
    }
    rt.barrier_all().unwrap();
    for owner in 0..n {
        for src in 0..n {
            let got: T = rt.g(buf + src * size, owner).unwrap();
            assert_eq!(bits(got), bits(value(src)), "{}: PE {owner}'s slot {src}", T::DTYPE);
        }
    }
    rt.barrier_all().unwrap();
}

#[test]
fn p_and_g_every_dtype() {
    Pes::new("p_and_g_every_dtype", 3).run(|_pe, _n| {
        let rt = init();
        let buf = rt.malloc(64).unwrap();
        p_and_g::<i8>(&rt, buf);
        p_and_g::<i16>(&rt, buf);
        p_and_g::<i32>(&rt, buf);
        p_and_g::<i64>(&rt, buf);
        p_and_g::<u8>(&rt, buf);
        p_and_g::<u16>(&rt, buf);
        p_and_g::<u32>(&rt, buf);
        p_and_g::<u64>(&rt, buf);
        p_and_g::<f16>(&rt, buf);
        p_and_g::<bf16>(&rt, buf);
        p_and_g::<f32>(&rt, buf);
        p_and_g::<f64>(&rt, buf);
        rt.finalize().unwrap();
    });
}

#[test]
fn atomics_every_op() {
    Pes::new("atomics_every_op", 3).run(|pe, n| {
        let rt = init();
        // Per PE on its target: [sentinel u32][32-bit word][64-bit word], then two counters.
        let words = rt.calloc(2 * n + 2, 8).unwrap();
        let target = (pe + 1) % n;
        let sentinel = words + 16 * pe;
        rt.p::<u32>(sentinel, 0xdead_beef, target).unwrap();
        for width in [Width::W32, Width::W64] {
            let w = width.bytes();
            let mask = if w == 4 { 0xffff_ffffu64 } else { u64::MAX };
            let at = sentinel + if w == 4 { 4 } else { 8 };
            let op = |op| rt.atomic(at, width, op, target).unwrap();
            assert_eq!(op(AmoOp::Set(5)), 0);
            assert_eq!(op(AmoOp::Fetch), 5);
            assert_eq!(op(AmoOp::Swap(7)), 5);
            assert_eq!(op(AmoOp::CompareSwap { cond: 6, value: 100 }), 7, "failed CAS returns the old value");
            assert_eq!(op(AmoOp::Fetch), 7, "failed CAS leaves the word");
            assert_eq!(op(AmoOp::CompareSwap { cond: 7, value: 9 }), 7);
            assert_eq!(op(AmoOp::Add(3)), 9);
            assert_eq!(op(AmoOp::Add(-1i64 as u64)), 12, "adding -1");
            assert_eq!(op(AmoOp::And(0b1010)), 11);
            assert_eq!(op(AmoOp::Or(0b0101)), 0b1010);
            assert_eq!(op(AmoOp::Xor(0b0011)), 0b1111);
            assert_eq!(op(AmoOp::Fetch), 0b1100);
            assert_eq!(op(AmoOp::Add(-13i64 as u64)), 0b1100);
            assert_eq!(op(AmoOp::Fetch), mask, "wraps to -1 in {w} bytes");
            assert_eq!(op(AmoOp::Set(0)), mask);
            assert_eq!(rt.g::<u32>(sentinel, target).unwrap(), 0xdead_beef, "{w}-byte atomics stay in their word");
        }
        // Misaligned words are refused.
        assert!(rt.atomic(sentinel + 2, Width::W32, AmoOp::Fetch, target).is_err());
        assert!(rt.atomic(sentinel + 4, Width::W64, AmoOp::Fetch, target).is_err());
        // Contention: every PE adds 1 to PE 0's counters, by fetch_add and by a CAS loop.
        const N: u64 = 2000;
        let add_ctr = words + 16 * n;
        let cas_ctr = words + 16 * n + 8;
        rt.barrier_all().unwrap();
        for _ in 0..N {
            rt.atomic(add_ctr, Width::W64, AmoOp::Add(1), 0).unwrap();
            let mut seen = rt.atomic(cas_ctr, Width::W32, AmoOp::Fetch, 0).unwrap();
            loop {
                let old =
                    rt.atomic(cas_ctr, Width::W32, AmoOp::CompareSwap { cond: seen, value: seen + 1 }, 0).unwrap();
                if old == seen {
                    break;
                }
                seen = old;
            }
        }
        rt.barrier_all().unwrap();
        assert_eq!(rt.atomic(add_ctr, Width::W64, AmoOp::Fetch, 0).unwrap(), N * n as u64);
        assert_eq!(rt.atomic(cas_ctr, Width::W32, AmoOp::Fetch, 0).unwrap(), N * n as u64);
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn signals_and_putmem_signal_ordering() {
    Pes::new("signals_and_putmem_signal_ordering", 2).run(|pe, _n| {
        let rt = init();
        let sig = rt.calloc(2, 8).unwrap();
        let ack = sig + 8;
        const LEN: usize = 256 << 10;
        let data = rt.malloc(LEN).unwrap();
        let other = 1 - pe;
        // signal_op SET / ADD and signal_fetch.
        if pe == 0 {
            rt.signal_op(sig, 40, SignalOp::Set, 1).unwrap();
            rt.signal_op(sig, 2, SignalOp::Add, 1).unwrap();
        } else {
            assert_eq!(rt.signal_wait_until(sig, Cmp::Ge, 42).unwrap(), 42);
            assert_eq!(rt.signal_fetch(sig).unwrap(), 42);
            assert_eq!(rt.signal_wait_until(sig, Cmp::Ne, 0).unwrap(), 42);
            assert_eq!(rt.signal_wait_until(sig, Cmp::Lt, 100).unwrap(), 42);
        }
        rt.barrier_all().unwrap();
        rt.signal_op(sig, 0, SignalOp::Set, pe).unwrap();
        rt.barrier_all().unwrap();
        // Ping-pong: the data of round r is complete when round r's signal is seen.
        for round in 1..=50u64 {
            if pe == 0 {
                let payload: Vec<u8> = (0..LEN).map(|i| (i as u64 * 7 + round) as u8).collect();
                // SAFETY: `payload` is a live buffer of LEN bytes.
                unsafe { rt.putmem_signal(data, payload.as_ptr() as usize, LEN, sig, round, SignalOp::Set, other) }
                    .unwrap();
                rt.signal_wait_until(ack, Cmp::Eq, round).unwrap();
            } else {
                assert_eq!(rt.signal_wait_until(sig, Cmp::Eq, round).unwrap(), round);
                let got = local_bytes(&rt, data, LEN);
                assert!(
                    got.iter().enumerate().all(|(i, &b)| b == (i as u64 * 7 + round) as u8),
                    "round {round}: data incomplete when the signal was seen"
                );
                rt.signal_op(ack, 1, SignalOp::Add, other).unwrap();
            }
        }
        // putmem_signal with ADD from both sides.
        rt.barrier_all().unwrap();
        rt.signal_op(sig, 0, SignalOp::Set, pe).unwrap();
        rt.barrier_all().unwrap();
        let byte = [pe as u8 + 1];
        // SAFETY: `byte` is a live one-byte buffer.
        unsafe { rt.putmem_signal(data, byte.as_ptr() as usize, 1, sig, 5, SignalOp::Add, other) }.unwrap();
        assert_eq!(rt.signal_wait_until(sig, Cmp::Eq, 5).unwrap(), 5);
        assert_eq!(rt.g::<u8>(data, pe).unwrap(), other as u8 + 1);
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn fence_and_quiet_order_puts() {
    Pes::new("fence_and_quiet_order_puts", 2).run(|pe, _n| {
        let rt = init();
        let data = rt.calloc(1024, 8).unwrap();
        let flag = rt.calloc(1, 8).unwrap();
        for round in 1..=100i64 {
            if pe == 0 {
                for i in 0..1024 {
                    rt.p::<i64>(data + 8 * i, round * 1000 + i as i64, 1).unwrap();
                }
                if round % 2 == 0 { rt.fence() } else { rt.quiet() }.unwrap();
                rt.p::<i64>(flag, round, 1).unwrap();
                rt.quiet().unwrap();
                rt.wait_until(flag, DType::I64, Cmp::Eq, -(round as i128)).unwrap();
            } else {
                rt.wait_until(flag, DType::I64, Cmp::Eq, round.into()).unwrap();
                for i in (0..1024).step_by(97) {
                    assert_eq!(rt.g::<i64>(data + 8 * i, 1).unwrap(), round * 1000 + i as i64);
                }
                rt.p::<i64>(flag, -round, 0).unwrap();
            }
        }
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

/// Sets word `i` of the array at `arr` on PE 1 (from PE 0) to `v`, in `dtype`.
fn set_word(rt: &Runtime, arr: SymAddr, dtype: DType, i: usize, v: i64) {
    let at = arr + i * dtype.size();
    match dtype {
        DType::I32 => rt.p::<i32>(at, v as i32, 1),
        DType::U32 => rt.p::<u32>(at, v as u32, 1),
        DType::I64 => rt.p::<i64>(at, v, 1),
        DType::U64 => rt.p::<u64>(at, v as u64, 1),
        _ => unreachable!(),
    }
    .unwrap()
}

#[test]
fn wait_until_and_test_families() {
    Pes::new("wait_until_and_test_families", 2).run(|pe, _n| {
        let rt = init();
        let arr = rt.calloc(8, 8).unwrap();
        const CMPS: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Le, Cmp::Lt, Cmp::Ge];
        for dtype in [DType::I32, DType::I64, DType::U32, DType::U64] {
            let max = dtype.int_range().unwrap().1;
            // Single word: every comparison agrees with arithmetic, negative values included.
            let v: i64 = if dtype.is_signed_integer() { -5 } else { 5 };
            if pe == 0 {
                set_word(&rt, arr, dtype, 0, v);
            }
            rt.barrier_all().unwrap();
            if pe == 1 {
                for cmp in CMPS {
                    for x in [v as i128 - 1, v as i128, v as i128 + 1, 0, max] {
                        if x < dtype.int_range().unwrap().0 {
                            continue;
                        }
                        let want = cmp.holds(v as i128, x);
                        assert_eq!(rt.test(arr, dtype, cmp, x).unwrap(), want, "{dtype}: {v} {} {x}", cmp.symbol());
                        if want {
                            rt.wait_until(arr, dtype, cmp, x).unwrap();
                        }
                    }
                }
            }
            rt.barrier_all().unwrap();
            if pe == 0 {
                set_word(&rt, arr, dtype, 0, 0);
            }
            rt.barrier_all().unwrap();

            // Arrays with status masks: words 0..8, all zero.
            let skip3 = [0, 0, 0, 1, 0, 0, 0, 0];
            let only_1_6 = [1, 0, 1, 1, 1, 1, 0, 1];
            let all_skipped = [1; 8];
            if pe == 1 {
                assert!(rt.test_all(arr, 8, None, dtype, Cmp::Eq, 0).unwrap());
                assert_eq!(rt.test_any(arr, 8, None, dtype, Cmp::Ne, 0).unwrap(), None);
                assert_eq!(rt.test_some(arr, 8, None, dtype, Cmp::Eq, 0).unwrap(), (0..8).collect::<Vec<_>>());
                assert_eq!(rt.wait_until_any(arr, 8, Some(&all_skipped), dtype, Cmp::Ne, 0).unwrap(), None);
                assert!(rt.wait_until_some(arr, 8, Some(&all_skipped), dtype, Cmp::Ne, 0).unwrap().is_empty());
                rt.wait_until_all(arr, 8, Some(&all_skipped), dtype, Cmp::Ne, 0).unwrap();
                rt.wait_until_all(arr, 0, None, dtype, Cmp::Ne, 0).unwrap();
            }
            rt.barrier_all().unwrap();
            // Round A: word 3 becomes 5.
            if pe == 0 {
                set_word(&rt, arr, dtype, 3, 5);
            } else {
                assert_eq!(rt.wait_until_any(arr, 8, None, dtype, Cmp::Eq, 5).unwrap(), Some(3));
                assert_eq!(rt.test_any(arr, 8, Some(&skip3), dtype, Cmp::Eq, 5).unwrap(), None);
                assert!(!rt.test_all(arr, 8, None, dtype, Cmp::Eq, 5).unwrap());
            }
            rt.barrier_all().unwrap();
            // Round B: words 1 and 6 become 5 while PE 1 waits with word 3 masked out.
            if pe == 0 {
                set_word(&rt, arr, dtype, 6, 5);
                set_word(&rt, arr, dtype, 1, 5);
            } else {
                let some = rt.wait_until_some(arr, 8, Some(&skip3), dtype, Cmp::Eq, 5).unwrap();
                assert!(!some.is_empty() && some.iter().all(|i| [1, 6].contains(i)), "{some:?}");
                rt.wait_until_all(arr, 8, Some(&only_1_6), dtype, Cmp::Eq, 5).unwrap();
                assert_eq!(rt.test_some(arr, 8, Some(&skip3), dtype, Cmp::Ge, 5).unwrap(), [1, 6]);
                assert_eq!(rt.test_some(arr, 8, None, dtype, Cmp::Gt, 0).unwrap(), [1, 3, 6]);
                assert!(rt.test_all(arr, 8, Some(&only_1_6), dtype, Cmp::Eq, 5).unwrap());
                // Rotating scans (NVSHMEM's fairness): both ready words come back within 8 calls.
                let seen: std::collections::BTreeSet<_> =
                    (0..8).map(|_| rt.wait_until_any(arr, 8, Some(&skip3), dtype, Cmp::Gt, 4).unwrap()).collect();
                assert_eq!(seen.into_iter().collect::<Vec<_>>(), [Some(1), Some(6)]);
                let seen: std::collections::BTreeSet<_> =
                    (0..8).map(|_| rt.test_any(arr, 8, None, dtype, Cmp::Eq, 5).unwrap()).collect();
                assert_eq!(seen.into_iter().collect::<Vec<_>>(), [Some(1), Some(3), Some(6)]);
                assert!(!rt.test_all(arr, 8, Some(&skip3), dtype, Cmp::Eq, 5).unwrap());
            }
            rt.barrier_all().unwrap();
            if pe == 0 {
                for i in 0..8 {
                    set_word(&rt, arr, dtype, i, 0);
                }
            }
            rt.barrier_all().unwrap();
        }
        rt.finalize().unwrap();
    });
}

#[test]
fn ten_thousand_barriers() {
    Pes::new("ten_thousand_barriers", 4).run(|pe, n| {
        let rt = init();
        let ctr = rt.calloc(1, 8).unwrap();
        let n = n as u64;
        for i in 0..10_000u64 {
            // Every 10th round, check that nobody ran ahead or fell behind.
            if i % 10 == 0 {
                rt.atomic(ctr, Width::W64, AmoOp::Add(1), 0).unwrap();
                rt.barrier_all().unwrap();
                let c = rt.atomic(ctr, Width::W64, AmoOp::Fetch, 0).unwrap();
                // Nobody adds again before passing the next barriers, which need this PE.
                assert_eq!(c, n * (i / 10 + 1), "PE {pe} at barrier {i}");
            } else if i % 3 == 0 {
                rt.sync_all().unwrap();
            } else {
                rt.barrier_all().unwrap();
            }
        }
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}
