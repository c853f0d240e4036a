//! The runtime on the cuda backend, two PEs as processes: init, host API on GPU memory,
//! on-stream operations, collectives on a stream, heap growth, finalize + init again, the
//! shared-GPU check, device error records, and (printed, not asserted) put bandwidth and
//! barrier latency on a stream.
//!
//! They need two GPUs joined by NVLink, or one that the two PEs share (`RSHMEM_ALLOW_SHARED_GPU=1`),
//! and are `#[ignore]`d. The binary embeds everything it
//! needs (the runtime's PTX included), so it can be built here and run on the GPU machine:
//! `cargo test -p rshmem --test cuda_runtime --no-run`, copy the binary, then
//! `./cuda_runtime-<hash> --ignored --test-threads=1 --nocapture`.

mod common;

use common::rng::Rng;
use common::Pes;
use half::bf16;
use rshmem::backend::{AmoOp, BackendKind, Width};
use rshmem::SymAddr;
use rshmem::consts::{Cmp, SignalOp};
use rshmem::device_state::{DEVICE_FLAG_ALL_REACHABLE, DEVICE_STATE_MAGIC};
use rshmem::driver::context::{Device, PrimaryContext};
use rshmem::driver::stream::{Stream, StreamHandle};
use rshmem::dtype::{reduce_bytes, DType, ReduceOp};
use rshmem::runtime::{InitOptions, Runtime, Team};
use rshmem::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn two_pes(name: &'static str) -> Pes {
    Pes::new(name, 2).env("RSHMEM_BACKEND", "cuda").deadline(Duration::from_secs(240))
}

fn init() -> Runtime {
    Runtime::init(InitOptions::default()).expect("init on the cuda backend")
}

/// A private stream on the runtime's device (its primary context), as torch would hand over.
fn stream_of(rt: &Runtime) -> (Arc<PrimaryContext>, Stream) {
    let ordinal = rt.device().expect("cuda backend has a device") as usize;
    let ctx = PrimaryContext::retain(Device::get(ordinal).unwrap()).unwrap();
    let s = Stream::new(&ctx).unwrap();
    (ctx, s)
}

/// `nelems` values of `dtype` for PE `pe` in case `case`: any bits for integers, small exact
/// values for floating types (no NaN, sums stay finite).
fn data(dtype: DType, nelems: usize, pe: usize, case: u64) -> Vec<u8> {
    let mut r = Rng::new(case * 1000 + pe as u64);
    if dtype.is_integer() {
        return r.bytes(nelems * dtype.size());
    }
    let mut out = Vec::with_capacity(nelems * dtype.size());
    for _ in 0..nelems {
        let v = (r.next() % 4001) as f64 / 8.0 - 250.0;
        match dtype {
            DType::BF16 => out.extend_from_slice(&bf16::from_f64(v).to_ne_bytes()),
            DType::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_ne_bytes()),
            DType::F32 => out.extend_from_slice(&(v as f32).to_ne_bytes()),
            DType::F64 => out.extend_from_slice(&v.to_ne_bytes()),
            _ => unreachable!(),
        }
    }
    out
}

fn put_local(rt: &Runtime, addr: SymAddr, bytes: &[u8]) {
    // SAFETY: `bytes` is a live Rust buffer; the runtime checks `addr`.
    unsafe { rt.putmem(addr, bytes.as_ptr() as usize, bytes.len(), rt.my_pe()) }.unwrap();
}

fn get(rt: &Runtime, addr: SymAddr, len: usize, pe: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is a live Rust buffer of `len` bytes.
    unsafe { rt.getmem(out.as_mut_ptr() as usize, addr, len, pe) }.unwrap();
    out
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn init_on_cuda_host_rma_and_atomics_on_device_memory() {
    two_pes("init_on_cuda_host_rma_and_atomics_on_device_memory").run(|pe, n| {
        let rt = init();
        assert_eq!(rt.backend_kind(), BackendKind::Cuda);
        // LOCAL_RANK picks the GPU; round-robin on fewer GPUs (RSHMEM_ALLOW_SHARED_GPU=1).
        let gpus = rshmem::driver::context::device_count().unwrap();
        assert_eq!(rt.device(), Some((pe % gpus) as i32), "LOCAL_RANK picks the GPU");
        assert_eq!(rt.gpu_sharers(), if gpus < 2 { 2 } else { 1 });
        let s = rt.device_state().expect("a device state on cuda");
        assert_eq!((s.magic, s.my_pe, s.n_pes, s.node_size), (DEVICE_STATE_MAGIC, pe as i32, 2, 2));
        assert_eq!(&s.pe_slot[..3], &[0, 1, -1]);
        assert_ne!(s.flags & DEVICE_FLAG_ALL_REACHABLE, 0);
        assert!(s.team_table != 0 && s.barrier_ws != 0 && s.coll_ws != 0 && s.error_buf != 0);

        let a = rt.malloc(1 << 20).unwrap();
        let mine = data(DType::U8, 1 << 20, pe, 1);
        put_local(&rt, a, &mine);
        rt.barrier_all().unwrap();
        let peer = 1 - pe;
        assert_eq!(get(&rt, a, 1 << 20, peer), data(DType::U8, 1 << 20, peer, 1), "peer's data over NVLink");
        rt.barrier_all().unwrap();

        // Atomics from both PEs on PE 0's words.
        let w = rt.calloc(2, 8).unwrap();
        rt.barrier_all().unwrap();
        for _ in 0..100 {
            rt.atomic(w, Width::W64, AmoOp::Add(1), 0).unwrap();
            rt.atomic(w + 8, Width::W32, AmoOp::Add(3), 0).unwrap();
        }
        rt.barrier_all().unwrap();
        assert_eq!(rt.atomic(w, Width::W64, AmoOp::Fetch, 0).unwrap(), 200);
        assert_eq!(rt.atomic(w + 8, Width::W32, AmoOp::Fetch, 0).unwrap(), 600);
        rt.barrier_all().unwrap();
        if pe == 1 {
            assert_eq!(rt.atomic(w, Width::W64, AmoOp::CompareSwap { cond: 200, value: 7 }, 0).unwrap(), 200);
        }
        rt.barrier_all().unwrap();
        assert_eq!(rt.g::<u64>(w, 0).unwrap(), 7);
        rt.p::<i32>(w + 8, -(pe as i32) - 1, peer).unwrap();
        rt.barrier_all().unwrap();
        assert_eq!(rt.g::<i32>(w + 8, pe).unwrap(), -(peer as i32) - 1);
        assert_eq!(n, 2);
        rt.free(w).unwrap();
        rt.free(a).unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn on_stream_put_get_signal_wait_and_barriers() {
    two_pes("on_stream_put_get_signal_wait_and_barriers").run(|pe, _n| {
        let rt = init();
        let (_ctx, st) = stream_of(&rt);
        let s = st.handle();
        let peer = 1 - pe;
        const N: usize = 4 << 20;
        let src = rt.malloc(N).unwrap();
        let recv = rt.calloc(1, N).unwrap();
        let copy = rt.calloc(1, N).unwrap();
        let sig = rt.calloc(1, 8).unwrap();
        put_local(&rt, src, &data(DType::U8, N, pe, 2));
        rt.barrier_all().unwrap();

        // PE 1's stream waits for PE 0's signal, then copies what arrived: the copy must see
        // the data, so the wait really held the stream.
        if pe == 1 {
            // SAFETY: symmetric buffers, live stream.
            unsafe {
                rt.signal_wait_until_on_stream(sig, Cmp::Ge, 1, s).unwrap();
                rt.putmem_on_stream(copy, recv.get(), N, pe, s).unwrap();
            }
        }
        rt.bootstrap().barrier().unwrap();
        if pe == 0 {
            std::thread::sleep(Duration::from_millis(200));
            // SAFETY: as above.
            unsafe { rt.putmem_signal_on_stream(recv, src.get(), N, sig, 1, SignalOp::Add, 1, s).unwrap() };
        }
        st.synchronize().unwrap();
        rt.barrier_all().unwrap();
        if pe == 1 {
            assert_eq!(get(&rt, copy, N, pe), data(DType::U8, N, 0, 2), "stream wait ordered the copy after the data");
            assert_eq!(rt.signal_fetch(sig).unwrap(), 1);
        }
        // Nobody updates the signal again before PE 1 has read it.
        rt.barrier_all().unwrap();

        // Get on a stream, and a signal SET on a stream.
        // SAFETY: as above.
        unsafe {
            rt.getmem_on_stream(copy.get(), src, N, peer, s).unwrap();
            rt.signal_op_on_stream(sig, 41 + pe as u64, SignalOp::Set, peer, s).unwrap();
            rt.quiet_on_stream(s).unwrap();
            rt.barrier_all_on_stream(s).unwrap();
        }
        st.synchronize().unwrap();
        assert_eq!(get(&rt, copy, N, pe), data(DType::U8, N, peer, 2));
        assert_eq!(rt.signal_fetch(sig).unwrap(), 41 + peer as u64);

        // 10,000 barriers in a row on a stream: no deadlock, no reset.
        let t = Instant::now();
        for _ in 0..10_000 {
            // SAFETY: live stream.
            unsafe { rt.barrier_all_on_stream(s).unwrap() };
        }
        st.synchronize().unwrap();
        rt.check_device_error().unwrap();
        eprintln!("PE {pe}: 10,000 barrier_all_on_stream in {:?}", t.elapsed());

        // Host and stream barriers meet each other (same words).
        for i in 0..200 {
            if (i + pe) % 2 == 0 {
                rt.barrier_all().unwrap();
            } else {
                // SAFETY: live stream.
                unsafe { rt.barrier_all_on_stream(s).unwrap() };
                st.synchronize().unwrap();
            }
        }
        // A split team on a stream, destroyed, and a new one in the same slot.
        for round in 0..3 {
            let team = rt.team_split_strided(Team::WORLD, 0, 1, 2).unwrap().expect("member");
            for _ in 0..(100 + round) {
                // SAFETY: live stream.
                unsafe { rt.barrier_on_stream(team, s).unwrap() };
            }
            st.synchronize().unwrap();
            rt.barrier(team).unwrap();
            rt.team_destroy(team).unwrap();
        }
        // A team device code cannot address is refused, not launched.
        let reversed = rt.team_split_strided(Team::WORLD, 1, -1, 2).unwrap().unwrap();
        // SAFETY: live stream.
        let err = unsafe { rt.barrier_on_stream(reversed, s) }.unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)), "{err}");
        rt.team_destroy(reversed).unwrap();
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

/// Runs every on-stream collective for `dtype` and checks it against a host-side reference.
fn check_collectives(rt: &Runtime, s: StreamHandle, st: &Stream, dtype: DType, nelems: usize, case: u64) {
    let (pe, n) = (rt.my_pe(), rt.n_pes());
    let sz = dtype.size();
    let bytes = nelems * sz;
    let src = rt.malloc(bytes * n).unwrap();
    let dst = rt.malloc(bytes * n).unwrap();
    let all: Vec<Vec<u8>> = (0..n).map(|p| data(dtype, nelems * n, p, case)).collect();
    put_local(rt, src, &all[pe]);
    rt.barrier_all().unwrap();
    let run = |f: &dyn Fn()| {
        f();
        st.synchronize().unwrap();
        rt.check_device_error().unwrap();
    };
    // broadcast from team PE 1
    // SAFETY: symmetric buffers, live stream (all four calls below).
    run(&|| unsafe { rt.broadcast_on_stream(Team::WORLD, dst, src, nelems, 1, dtype, s).unwrap() });
    assert_eq!(get(rt, dst, bytes, pe), all[1][..bytes], "broadcast {dtype}");
    run(&|| unsafe { rt.fcollect_on_stream(Team::WORLD, dst, src, nelems, dtype, s).unwrap() });
    let want: Vec<u8> = (0..n).flat_map(|p| all[p][..bytes].to_vec()).collect();
    assert_eq!(get(rt, dst, bytes * n, pe), want, "fcollect {dtype}");
    run(&|| unsafe { rt.alltoall_on_stream(Team::WORLD, dst, src, nelems, dtype, s).unwrap() });
    let want: Vec<u8> = (0..n).flat_map(|p| all[p][pe * bytes..(pe + 1) * bytes].to_vec()).collect();
    assert_eq!(get(rt, dst, bytes * n, pe), want, "alltoall {dtype}");
    let ops: &[ReduceOp] = if dtype.is_integer() {
        &[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Xor]
    } else {
        &[ReduceOp::Sum, ReduceOp::Min]
    };
    for &op in ops {
        let mut want = all[0][..bytes].to_vec();
        for other in &all[1..] {
            reduce_bytes(dtype, op, &mut want, &other[..bytes]).unwrap();
        }
        run(&|| unsafe { rt.reduce_on_stream(Team::WORLD, op, dst, src, nelems, dtype, s).unwrap() });
        assert!(get(rt, dst, bytes, pe) == want, "reduce {} {dtype}", op.name());
        // In place: dest == source (restore the source afterwards).
        run(&|| unsafe { rt.reduce_on_stream(Team::WORLD, op, src, src, nelems, dtype, s).unwrap() });
        assert!(get(rt, src, bytes, pe) == want, "in-place reduce {} {dtype}", op.name());
        put_local(rt, src, &all[pe]);
        rt.barrier_all().unwrap();
    }
    rt.free(dst).unwrap();
    rt.free(src).unwrap();
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn collectives_on_stream_match_the_reference() {
    two_pes("collectives_on_stream_match_the_reference").run(|_pe, _n| {
        let rt = init();
        let (_ctx, st) = stream_of(&rt);
        let s = st.handle();
        // Sizes above the 1 MiB collective workspace make reductions take several rounds.
        let cases = [
            (DType::I32, 1000),
            (DType::F32, 300_000),
            (DType::BF16, 700_001),
            (DType::F64, 1 << 17),
            (DType::U8, 2_500_003),
            (DType::I64, 3),
        ];
        for (case, (dtype, nelems)) in cases.into_iter().enumerate() {
            check_collectives(&rt, s, &st, dtype, nelems, case as u64);
        }
        // A bitwise reduction of floats is refused before anything is queued.
        let a = rt.malloc(64).unwrap();
        // SAFETY: live stream.
        let err = unsafe { rt.reduce_on_stream(Team::WORLD, ReduceOp::Xor, a, a, 4, DType::F32, s) }.unwrap_err();
        assert!(err.to_string().contains("integers only"), "{err}");
        rt.free(a).unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn heap_grows_over_ten_allocations_and_keeps_data() {
    two_pes("heap_grows_over_ten_allocations_and_keeps_data").env("RSHMEM_HEAP_GROWTH", "2M").run(|pe, _n| {
        let rt = init();
        let (_ctx, st) = stream_of(&rt);
        let mut allocs = Vec::new();
        let start_mapped = rt.heap().mapped();
        for i in 1..=10usize {
            let len = i * (3 << 20) + 4096 * i;
            let a = rt.malloc(len).unwrap();
            put_local(&rt, a, &data(DType::U8, len, pe, 100 + i as u64));
            allocs.push((a, len, i));
        }
        assert!(rt.heap().mapped() > start_mapped + (100 << 20), "the heap grew");
        rt.barrier_all().unwrap();
        let peer = 1 - pe;
        let scratch = rt.malloc(31 << 20).unwrap();
        for &(a, len, i) in &allocs {
            assert_eq!(get(&rt, a, len, pe), data(DType::U8, len, pe, 100 + i as u64), "own allocation {i}");
            assert_eq!(get(&rt, a, len, peer), data(DType::U8, len, peer, 100 + i as u64), "peer allocation {i}");
            // SAFETY: symmetric buffers, live stream.
            unsafe { rt.getmem_on_stream(scratch.get(), a, len, peer, st.handle()).unwrap() };
            st.synchronize().unwrap();
            assert_eq!(get(&rt, scratch, len, pe), data(DType::U8, len, peer, 100 + i as u64), "stream get {i}");
        }
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn finalize_then_init_again_in_one_process() {
    two_pes("finalize_then_init_again_in_one_process").run(|pe, _n| {
        for round in 0..3u64 {
            let rt = init();
            let (_ctx, st) = stream_of(&rt);
            let a = rt.malloc(1 << 16).unwrap();
            put_local(&rt, a, &data(DType::U8, 1 << 16, pe, 200 + round));
            // SAFETY: live stream.
            unsafe { rt.barrier_all_on_stream(st.handle()).unwrap() };
            st.synchronize().unwrap();
            rt.barrier_all().unwrap();
            assert_eq!(get(&rt, a, 1 << 16, 1 - pe), data(DType::U8, 1 << 16, 1 - pe, 200 + round), "round {round}");
            rt.barrier_all().unwrap();
            drop(st);
            rt.finalize().unwrap();
        }
    });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn two_pes_on_one_gpu_are_refused_without_the_opt_in() {
    two_pes("two_pes_on_one_gpu_are_refused_without_the_opt_in")
        .env("CUDA_VISIBLE_DEVICES", "0")
        .env("RSHMEM_ALLOW_SHARED_GPU", "0")
        .run(|_pe, _n| {
        let err = Runtime::init(InitOptions::default()).expect_err("two PEs on GPU 0 must be refused");
        let msg = err.to_string();
        assert!(msg.contains("same GPU") && msg.contains("RSHMEM_ALLOW_SHARED_GPU=1"), "{msg}");
        assert!(msg.contains("PE 0") && msg.contains("PE 1"), "{msg}");
    });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn two_pes_on_one_gpu_work_with_the_opt_in() {
    two_pes("two_pes_on_one_gpu_work_with_the_opt_in")
        .env("CUDA_VISIBLE_DEVICES", "0")
        .env("RSHMEM_ALLOW_SHARED_GPU", "1")
        .run(|pe, _n| {
            let rt = init();
            assert_eq!(rt.device(), Some(0));
            let a = rt.malloc(4096).unwrap();
            put_local(&rt, a, &data(DType::U8, 4096, pe, 300));
            rt.barrier_all().unwrap();
            assert_eq!(get(&rt, a, 4096, 1 - pe), data(DType::U8, 4096, 1 - pe, 300));
            rt.barrier_all().unwrap();
            rt.finalize().unwrap();
        });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn a_stream_barrier_past_the_debug_timeout_reports_pe_address_and_values() {
    two_pes("a_stream_barrier_past_the_debug_timeout_reports_pe_address_and_values")
        .env("RSHMEM_DEBUG_WAIT_TIMEOUT_MS", "300")
        .run(|pe, _n| {
            let rt = init();
            if pe == 0 {
                let (_ctx, st) = stream_of(&rt);
                // PE 1 never joins: the barrier kernel gives up and records why.
                // SAFETY: live stream.
                unsafe { rt.barrier_all_on_stream(st.handle()).unwrap() };
                assert!(st.synchronize().is_err(), "the kernel stopped with trap");
                let err = rt.check_device_error().unwrap_err();
                let msg = err.to_string();
                match err {
                    Error::WaitTimeout { pe: 0, cmp: ">=", expected: 2, seen: 1, timeout_ms: 300, .. } => {}
                    other => panic!("expected a WaitTimeout on PE 0 (>= 2, seen 1), got {other:?}"),
                }
                assert!(msg.contains("allocation of") && msg.contains("heap offset"), "{msg}");
                // quiet and barrier report it too instead of a bare launch failure.
                assert!(matches!(rt.quiet(), Err(Error::WaitTimeout { .. })));
                assert!(matches!(rt.barrier_all(), Err(Error::WaitTimeout { .. })));
            }
            // Meet outside the broken CUDA context, then leave without finalize.
            rt.bootstrap().barrier().unwrap();
            std::mem::forget(rt);
        });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn measure_put_bandwidth_and_barrier_latency_on_stream() {
    let report = std::env::temp_dir().join(format!("rshmem-cuda-measure-{}", std::process::id()));
    let report_path = report.to_string_lossy().into_owned();
    two_pes("measure_put_bandwidth_and_barrier_latency_on_stream").env("RSHMEM_TEST_REPORT", &report_path).run(
        |pe, _n| {
            let rt = init();
            let (_ctx, st) = stream_of(&rt);
            let s = st.handle();
            const LEN: usize = 256 << 20;
            let src = rt.malloc(LEN).unwrap();
            let dst = rt.malloc(LEN).unwrap();
            rt.barrier_all().unwrap();
            let mut lines = Vec::new();
            if pe == 0 {
                for _ in 0..3 {
                    // SAFETY: symmetric buffers, live stream.
                    unsafe { rt.putmem_on_stream(dst, src.get(), LEN, 1, s).unwrap() };
                }
                st.synchronize().unwrap();
                let iters = 20;
                let t = Instant::now();
                for _ in 0..iters {
                    // SAFETY: as above.
                    unsafe { rt.putmem_on_stream(dst, src.get(), LEN, 1, s).unwrap() };
                }
                st.synchronize().unwrap();
                let secs = t.elapsed().as_secs_f64();
                lines.push(format!(
                    "putmem_on_stream 256 MiB PE 0 -> PE 1: {:.1} GB/s ({:.3} ms per put)",
                    (LEN * iters) as f64 / secs / 1e9,
                    secs * 1e3 / iters as f64
                ));
            }
            rt.barrier_all().unwrap();
            for _ in 0..200 {
                // SAFETY: live stream.
                unsafe { rt.barrier_all_on_stream(s).unwrap() };
            }
            st.synchronize().unwrap();
            rt.bootstrap().barrier().unwrap();
            let iters = 5000;
            let t = Instant::now();
            for _ in 0..iters {
                // SAFETY: live stream.
                unsafe { rt.barrier_all_on_stream(s).unwrap() };
            }
            st.synchronize().unwrap();
            lines.push(format!(
                "barrier_all_on_stream, PE {pe}: {:.2} us per barrier ({iters} back to back, wall clock after sync)",
                t.elapsed().as_secs_f64() * 1e6 / iters as f64
            ));
            let t = Instant::now();
            for _ in 0..200 {
                rt.barrier_all().unwrap();
            }
            lines.push(format!(
                "barrier_all (host), PE {pe}: {:.2} us per barrier",
                t.elapsed().as_secs_f64() * 1e6 / 200.0
            ));
            // Reductions: the first call loads (and the driver compiles) the reduction module.
            let nelems = 16 << 20; // 64 MiB of f32
            let reduce = || {
                // SAFETY: symmetric buffers of 256 MiB, live stream.
                unsafe { rt.reduce_on_stream(Team::WORLD, ReduceOp::Sum, dst, src, nelems, DType::F32, s).unwrap() };
            };
            let t = Instant::now();
            reduce();
            st.synchronize().unwrap();
            lines.push(format!(
                "reduce_on_stream, PE {pe}: first call {:.1} ms (module load included)",
                t.elapsed().as_secs_f64() * 1e3
            ));
            let t = Instant::now();
            for _ in 0..5 {
                reduce();
            }
            st.synchronize().unwrap();
            let secs = t.elapsed().as_secs_f64() / 5.0;
            lines.push(format!(
                "reduce_on_stream sum of 64 MiB f32, PE {pe}: {:.2} ms ({:.1} GB/s of source)",
                secs * 1e3,
                (nelems * 4) as f64 / secs / 1e9
            ));
            let path = format!("{}.{pe}", std::env::var("RSHMEM_TEST_REPORT").unwrap());
            std::fs::write(path, lines.join("\n") + "\n").unwrap();
            rt.finalize().unwrap();
        },
    );
    if Pes::child_pe().is_none() {
        for pe in 0..2 {
            let path = format!("{report_path}.{pe}");
            print!("{}", std::fs::read_to_string(&path).unwrap_or_default());
            let _ = std::fs::remove_file(&path);
        }
    }
}
