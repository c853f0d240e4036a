//! Misuse and failures end in clear errors, never a hang: a PE killed mid-run, mismatched
//! allocations, bad PEs, pointers, dtypes and constants, the heap bound, and wait timeouts.

mod common;

use common::{Exit, Pes};
use rshmem::backend::{AmoOp, Width};
use rshmem::SymAddr;
use rshmem::consts::{Cmp, SignalOp};
use rshmem::dtype::{DType, ReduceOp};
use rshmem::runtime::{InitOptions, Runtime, Team};
use rshmem::Error;
use std::time::{Duration, Instant};

fn init() -> Runtime {
    Runtime::init(InitOptions::default()).expect("init")
}

#[test]
fn killed_pe_is_named_by_blocked_peers() {
    Pes::new("killed_pe_is_named_by_blocked_peers", 3).exit(2, Exit::Code(3)).deadline(Duration::from_secs(60)).run(
        |pe, _n| {
            let rt = init();
            let word = rt.calloc(1, 8).unwrap();
            rt.barrier_all().unwrap();
            let started = Instant::now();
            let err = match pe {
                0 => rt.barrier_all().unwrap_err(),
                1 => rt.wait_until(word, DType::I64, Cmp::Eq, 1).unwrap_err(),
                _ => {
                    // Die while the others are blocked.
                    std::thread::sleep(Duration::from_millis(300));
                    std::process::exit(3);
                }
            };
            let msg = err.to_string();
            assert!(matches!(err, Error::PeerDied { pe: 2, .. }), "{msg}");
            let during = if pe == 0 { "barrier_all" } else { "wait_until" };
            assert!(msg.contains("PE 2") && msg.contains(during), "{msg}");
            assert!(started.elapsed() < Duration::from_secs(20), "noticed after {:?}", started.elapsed());
            // Later calls keep failing fast instead of hanging.
            assert!(matches!(rt.sync_all(), Err(Error::PeerDied { pe: 2, .. })));
        },
    );
}

#[test]
fn mismatched_malloc_sizes() {
    Pes::new("mismatched_malloc_sizes", 2).run(|pe, _n| {
        let rt = init();
        let err = rt.malloc(1024 * (pe + 1)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Mismatch { .. }), "{msg}");
        assert!(msg.contains("1024") && msg.contains("2048"), "{msg}");
        // Nothing was allocated and the runtime still works.
        let a = rt.malloc(4096).unwrap();
        rt.p::<u32>(a, 1, 1 - pe).unwrap();
        rt.barrier_all().unwrap();
        assert_eq!(rt.g::<u32>(a, pe).unwrap(), 1);
        rt.free(a).unwrap();
        rt.finalize().unwrap();
    });
}

fn expect_pe_out_of_range<T: std::fmt::Debug>(r: rshmem::Result<T>, what: &str) {
    match r {
        Err(Error::PeOutOfRange { pe: 2, n_pes: 2, .. }) => {}
        other => panic!("{what}: expected PeOutOfRange for PE 2 of 2, got {other:?}"),
    }
}

fn expect_invalid<T: std::fmt::Debug>(r: rshmem::Result<T>, needles: &[&str]) {
    match r {
        Err(Error::InvalidArgument(msg)) if needles.iter().all(|n| msg.contains(n)) => {}
        other => panic!("expected InvalidArgument naming {needles:?}, got {other:?}"),
    }
}

#[test]
fn bad_arguments_are_refused_and_the_runtime_goes_on() {
    Pes::new("bad_arguments_are_refused_and_the_runtime_goes_on", 2).run(|pe, n| {
        let rt = init();
        let a = rt.calloc(64, 8).unwrap();
        let sig = a + 256;
        let local = [0u8; 64];
        let lp = local.as_ptr() as usize;

        // A PE out of range, everywhere a PE is taken.
        // SAFETY (all unsafe calls below): `local` is a live buffer of 64 bytes.
        expect_pe_out_of_range(unsafe { rt.putmem(a, lp, 8, n) }, "putmem");
        expect_pe_out_of_range(unsafe { rt.getmem(lp, a, 8, n) }, "getmem");
        expect_pe_out_of_range(rt.p::<f32>(a, 1.0, n), "p");
        expect_pe_out_of_range(rt.g::<i16>(a, n), "g");
        expect_pe_out_of_range(rt.atomic(a, Width::W64, AmoOp::Fetch, n), "atomic");
        expect_pe_out_of_range(rt.signal_op(sig, 1, SignalOp::Set, n), "signal_op");
        expect_pe_out_of_range(unsafe { rt.putmem_signal(a, lp, 8, sig, 1, SignalOp::Add, n) }, "putmem_signal");
        expect_pe_out_of_range(rt.ptr(a, n), "ptr");
        let err = rt.broadcast(Team::WORLD, a, a + 64, 1, 2, DType::I8).unwrap_err().to_string();
        assert!(err.contains("PE 2") && err.contains("team WORLD"), "{err}");

        // Pointers outside the heap, or running past its end.
        let not_symmetric = |r: rshmem::Result<()>| match r {
            Err(e @ Error::NotSymmetric { .. }) => assert!(e.to_string().contains("symmetric heap")),
            other => panic!("expected NotSymmetric, got {other:?}"),
        };
        not_symmetric(unsafe { rt.putmem(SymAddr::new(lp), lp + 8, 8, 1 - pe) });
        not_symmetric(unsafe { rt.getmem(lp, SymAddr::new(lp + 8), 8, 1 - pe) });
        not_symmetric(rt.p::<u8>(SymAddr::new(lp), 1, pe));
        not_symmetric(rt.signal_op(SymAddr::new(lp & !7), 1, SignalOp::Set, pe));
        not_symmetric(rt.atomic(SymAddr::new(lp & !7), Width::W64, AmoOp::Fetch, pe).map(drop));
        let end = rt.heap().my_base() + rt.heap().mapped();
        not_symmetric(unsafe { rt.putmem(SymAddr::new(end - 4), lp, 8, 1 - pe) });
        not_symmetric(rt.wait_until(SymAddr::new(lp & !7), DType::I64, Cmp::Eq, 0).map(drop));
        not_symmetric(rt.reduce(Team::WORLD, ReduceOp::Sum, SymAddr::new(lp), a, 4, DType::I32));
        expect_invalid(unsafe { rt.putmem(a, (a + 8).get(), 16, pe) }, &["overlap"]);
        expect_invalid(rt.atomic(a + 4, Width::W64, AmoOp::Fetch, pe), &["8-byte aligned", "allocation"]);
        expect_invalid(rt.signal_op(sig + 4, 1, SignalOp::Set, 1 - pe), &["aligned"]);
        not_symmetric(rt.free(SymAddr::new(lp)));

        // Dtypes an operation does not take.
        expect_invalid(
            rt.wait_until(a, DType::F32, Cmp::Eq, 0),
            &["wait_until", "float32", "int32, int64, uint32, uint64"],
        );
        expect_invalid(rt.test(a, DType::I8, Cmp::Eq, 0), &["test", "int8"]);
        expect_invalid(rt.test_any(a, 4, None, DType::BF16, Cmp::Eq, 0), &["bfloat16"]);
        expect_invalid(rt.wait_until(a, DType::U32, Cmp::Eq, -1), &["-1", "uint32"]);
        expect_invalid(
            rt.test_all(a, 4, Some(&[0, 0]), DType::I64, Cmp::Eq, 0),
            &["status has 2 entries", "nelems is 4"],
        );
        for (op, dtype) in [(ReduceOp::And, DType::F32), (ReduceOp::Or, DType::F16), (ReduceOp::Xor, DType::F64)] {
            expect_invalid(
                rt.reduce(Team::WORLD, op, a, a + 64, 2, dtype),
                &[op.name(), dtype.name(), "integers only"],
            );
        }
        expect_invalid(DType::parse("complex64"), &["complex64", "bfloat16"]);
        expect_invalid(ReduceOp::parse("avg"), &["avg", "xor"]);

        // Bad SHMEM constants, as the Python layer passes them.
        expect_invalid(Cmp::from_raw(6), &["6", "CMP_EQ=0", "CMP_GE=5"]);
        expect_invalid(Cmp::from_raw(-1), &["-1"]);
        expect_invalid(SignalOp::from_raw(0), &["0", "SIGNAL_SET=9", "SIGNAL_ADD=10"]);
        expect_invalid(rt.barrier(Team(17)), &["team 17"]);

        // Every error above left the runtime usable.
        rt.barrier_all().unwrap();
        // SAFETY: `local` is a live buffer of 64 bytes.
        unsafe { rt.putmem(a, lp, 64, 1 - pe) }.unwrap();
        rt.reduce(Team::WORLD, ReduceOp::Sum, a + 64, a + 64, 8, DType::U64).unwrap();
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn heap_bound_exceeded() {
    Pes::new("heap_bound_exceeded", 2).env("RSHMEM_SYMMETRIC_SIZE", "32M").env("RSHMEM_HEAP_GROWTH", "4M").run(
        |_pe, _n| {
            let rt = init();
            let a = rt.malloc(16 << 20).unwrap();
            let err = rt.malloc(32 << 20).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::HeapExhausted { .. }), "{msg}");
            assert!(msg.contains(&(32usize << 20).to_string()) && msg.contains("RSHMEM_SYMMETRIC_SIZE"), "{msg}");
            // Smaller requests still fit.
            let b = rt.malloc(8 << 20).unwrap();
            rt.barrier_all().unwrap();
            rt.free(b).unwrap();
            rt.free(a).unwrap();
            rt.finalize().unwrap();
        },
    );
}

#[test]
fn debug_wait_timeout_names_the_word() {
    Pes::new("debug_wait_timeout_names_the_word", 2).env("RSHMEM_DEBUG_WAIT_TIMEOUT_MS", "300").run(|pe, _n| {
        let rt = init();
        let word = rt.calloc(2, 8).unwrap();
        let started = Instant::now();
        match rt.wait_until(word + 4, DType::I32, Cmp::Eq, 7).unwrap_err() {
            Error::WaitTimeout { pe: p, call, location, cmp, expected, seen, timeout_ms } => {
                assert_eq!((p, cmp, expected, seen, timeout_ms), (pe, "==", 7, 0, 300));
                assert_eq!(call, "wait_until");
                assert!(location.contains("allocation of 16 bytes") && location.contains("+4"), "{location}");
            }
            other => panic!("expected WaitTimeout, got {other}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(300));
        let msg = rt.signal_wait_until(word + 8, Cmp::Ge, 5).unwrap_err().to_string();
        assert!(msg.contains(&format!("PE {pe}")) && msg.contains(">= 5") && msg.contains("last seen 0"), "{msg}");
        let msg = rt.wait_until_all(word, 2, None, DType::U32, Cmp::Ne, 0).unwrap_err().to_string();
        assert!(msg.contains("!= 0"), "{msg}");
        rt.barrier_all().unwrap();
        // A barrier a peer reaches late times out; the next one still pairs up right. PE 1
        // polls without a wait call (which would time out too) until PE 0 has timed out.
        let flag = word + 8;
        if pe == 1 {
            while rt.signal_fetch(flag).unwrap() == 0 {
                rt.bootstrap().health().check("waiting for PE 0's timeout").unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            rt.barrier_all().unwrap();
        } else {
            let msg = rt.barrier_all().unwrap_err().to_string();
            assert!(msg.contains("PE 0") && msg.contains(">= 4") && msg.contains("last seen 3"), "{msg}");
            // The call, the team and the PE that has not arrived.
            assert!(msg.contains("barrier_all timed out") && msg.contains("team WORLD") && msg.contains("yet: [1]"), "{msg}");
            rt.signal_op(flag, 1, SignalOp::Set, 1).unwrap();
        }
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn partial_init_options_are_refused() {
    let err = Runtime::init(InitOptions { rank: Some(1), nranks: Some(2), ..Default::default() }).unwrap_err();
    assert!(err.to_string().contains("uid missing"), "{err}");
}

/// Every kind of mismatched collective fails on every PE with both values
/// named, moves no data, and leaves the team ready for the next collective.
#[test]
fn mismatched_collectives_fail_everywhere() {
    Pes::new("mismatched_collectives_fail_everywhere", 2).run(|pe, _n| {
        let rt = init();
        let (src, dst) = (rt.calloc(64, 8).unwrap(), rt.calloc(64, 8).unwrap());
        for i in 0..64 {
            rt.p::<i64>(src + 8 * i, (pe * 100 + i) as i64, pe).unwrap();
        }
        rt.barrier_all().unwrap();
        let w = Team::WORLD;
        let other = 1 - pe;
        let cases: Vec<(&str, rshmem::Result<()>, [String; 2])> = vec![
            ("broadcast nelems", rt.broadcast(w, dst, src, 4 + 4 * pe, 0, DType::I64), ["4 x int64".into(), "8 x int64".into()]),
            ("broadcast root", rt.broadcast(w, dst, src, 4, pe as i32, DType::I64), ["from root 0".into(), "from root 1".into()]),
            ("reduce op", rt.reduce(w, [ReduceOp::Sum, ReduceOp::Max][pe], dst, src, 4, DType::I64), ["reduce sum".into(), "reduce max".into()]),
            ("reduce dtype", rt.reduce(w, ReduceOp::Sum, dst, src, 4, [DType::I64, DType::F64][pe]), ["int64".into(), "float64".into()]),
            ("fcollect nelems", rt.fcollect(w, dst, src, 2 + pe, DType::I64), ["2 x int64".into(), "3 x int64".into()]),
            ("alltoall nelems", rt.alltoall(w, dst, src, 1 + pe, DType::I64), ["1 x int64".into(), "2 x int64".into()]),
        ];
        for (what, r, [a, b]) in cases {
            let msg = match r {
                Err(e @ Error::Mismatch { .. }) => e.to_string(),
                other => panic!("{what}: expected a Mismatch, got {other:?}"),
            };
            let (mine, theirs) = if pe == 0 { (&a, &b) } else { (&b, &a) };
            assert!(msg.contains(&format!("PE {pe} (this PE) passed")) && msg.contains(mine), "{what}: {msg}");
            assert!(msg.contains(&format!("PE {other} passed")) && msg.contains(theirs), "{what}: {msg}");
            // No data moved: dst is still zero.
            assert_eq!(rt.g::<i64>(dst, pe).unwrap(), 0, "{what}");
        }
        // One PE with a bad pointer: it gets its own error, the other hears of it; nobody hangs.
        let bad = if pe == 1 { dst + 64 * 8 - 8 } else { dst };
        match rt.broadcast(w, bad, src, 4, 0, DType::I64) {
            Err(Error::NotAllocated { .. }) if pe == 1 => {}
            Err(Error::InvalidArgument(m)) if pe == 0 => assert!(m.contains("PE 1 refused its arguments"), "{m}"),
            other => panic!("one-sided bad pointer: {other:?}"),
        }
        // The team is still in step.
        rt.broadcast(w, dst, src, 4, 1, DType::I64).unwrap();
        assert_eq!(rt.g::<i64>(dst + 8, pe).unwrap(), 101);
        rt.reduce(w, ReduceOp::Sum, dst, src, 2, DType::I64).unwrap();
        assert_eq!(rt.g::<i64>(dst + 8, pe).unwrap(), 1 + 101);
        rt.finalize().unwrap();
    });
}

#[test]
fn global_exit_ends_every_pe_with_the_status() {
    // PE 2 calls global_exit(7) while PEs 0 and 1 wait in a barrier it never joins: the relay
    // through PE 0 and PE 0 itself must both end with 7, not hang or report a dead peer.
    let mut pes = Pes::new("global_exit_ends_every_pe_with_the_status", 3).deadline(Duration::from_secs(60));
    for pe in 0..3 {
        pes = pes.exit(pe, Exit::Code(7));
    }
    pes.run(|pe, _| {
        let rt = init();
        rt.barrier_all().unwrap();
        if pe == 2 {
            std::thread::sleep(Duration::from_millis(200));
            let _ = rt.global_exit(7);
            unreachable!("global_exit returned");
        }
        let r = rt.barrier_all();
        panic!("the barrier ended without PE 2: {r:?}");
    });
}

/// A PE that finalizes instead of joining a barrier (or a collective) is not taken for the
/// barrier's last arrival: the members fail with `PeerExited` naming it and how it left, fast.
/// A point-to-point wait goes on while some other PE may still end it, and fails once every
/// other PE left. Every PE's finalize then completes.
#[test]
fn finalize_is_not_a_barrier() {
    Pes::new("finalize_is_not_a_barrier", 3).deadline(Duration::from_secs(60)).run(|pe, _n| {
        let rt = init();
        let word = rt.calloc(1, 8).unwrap();
        rt.barrier_all().unwrap();
        match pe {
            2 => {
                std::thread::sleep(Duration::from_millis(300));
                rt.finalize_as("a test's finalize").unwrap();
            }
            0 => {
                let started = Instant::now();
                let err = rt.barrier_all().unwrap_err();
                let msg = err.to_string();
                assert!(matches!(err, Error::PeerExited { pe: 2, .. }), "{msg}");
                assert!(msg.contains("PE 2 left the job (a test's finalize)") && msg.contains("barrier_all"), "{msg}");
                assert!(started.elapsed() < Duration::from_secs(5), "noticed after {:?}", started.elapsed());
                // Nothing more can match PE 2: later collectives fail at once, puts to it too.
                assert!(matches!(rt.sync_all(), Err(Error::PeerExited { pe: 2, .. })));
                let err = rt.fcollect(Team::WORLD, word, word, 0, DType::I64).unwrap_err().to_string();
                assert!(err.contains("PE 2 left") && err.contains("fcollect"), "{err}");
                assert!(matches!(rt.malloc(64), Err(Error::PeerExited { pe: 2, .. })));
                assert!(matches!(rt.p::<u64>(word, 1, 2), Err(Error::PeerExited { pe: 2, .. })));
                // PE 1 still waits, for PE 0: its wait ends with this put.
                rt.p::<u64>(word, 1, 1).unwrap();
                rt.quiet().unwrap();
                rt.finalize().unwrap();
            }
            _ => {
                assert_eq!(rt.wait_until(word, DType::I64, Cmp::Eq, 1).unwrap(), 1);
                // Now PE 0 leaves too: a wait nobody is left to end fails, naming a leaver.
                let started = Instant::now();
                let err = rt.wait_until(word, DType::I64, Cmp::Eq, 2).unwrap_err();
                assert!(matches!(err, Error::PeerExited { .. }) && err.to_string().contains("wait_until"), "{err}");
                assert!(started.elapsed() < Duration::from_secs(5), "noticed after {:?}", started.elapsed());
                rt.finalize().unwrap();
            }
        }
    });
}

/// The counterpart: PEs that finalize right after their last barrier, some later than others,
/// never fail a peer that is still on its way out of that barrier.
#[test]
fn finalize_right_after_a_barrier_is_clean() {
    Pes::new("finalize_right_after_a_barrier_is_clean", 3).run(|pe, _n| {
        let rt = init();
        let src = rt.calloc(3, 8).unwrap();
        let dst = rt.calloc(3 * 3, 8).unwrap();
        for _ in 0..20 {
            rt.barrier_all().unwrap();
            rt.fcollect(Team::WORLD, dst, src, 3, DType::I64).unwrap();
        }
        if pe == 1 {
            std::thread::sleep(Duration::from_millis(100));
        }
        rt.finalize().unwrap();
    });
}
