//! Latency of the host API on the host backend: put, get, p, g, an atomic, a signal, barriers
//! and small collectives; what the safety checks (address, collective agreement) cost shows here.
//!
//! ```text
//! cargo run --release -p rshmem --example host_latency            # starts 2 PEs itself
//! cargo run --release -p rshmem --example host_latency -- 3       # or 3
//! ```
//! Without torchrun variables it re-runs itself once per PE on the loopback interface; under
//! `torchrun --no-python` it is one PE of that job. PE 0 prints the median of 7 rounds of each
//! measurement, per call.

use rshmem::backend::{AmoOp, Width};
use rshmem::consts::SignalOp;
use rshmem::dtype::{DType, ReduceOp};
use rshmem::runtime::{InitOptions, Runtime, Team};
use std::time::{Duration, Instant};

fn main() {
    if std::env::var("RANK").is_ok() {
        pe();
        return;
    }
    let n: usize = std::env::args().nth(1).map_or(2, |a| a.parse().expect("PE count"));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..n)
        .map(|rank| {
            std::process::Command::new(&exe)
                .env("MASTER_ADDR", "127.0.0.1")
                .env("RSHMEM_BOOTSTRAP_PORT", port.to_string())
                .env("RSHMEM_BOOTSTRAP_SECRET", format!("host-latency-{}", std::process::id()))
                .env("RSHMEM_BACKEND", "host")
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("LOCAL_WORLD_SIZE", n.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
}

fn pe() {
    let rt = Runtime::init(InitOptions::default()).unwrap();
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let peer = (me + 1) % n;
    let buf = rt.calloc(1, 1 << 16).unwrap();
    let dst = rt.calloc(1, 1 << 16).unwrap();
    let local = vec![7u8; 1 << 16];
    let mut back = vec![0u8; 1 << 16];
    // Each measurement: 7 rounds of `iters` calls, every PE in step (a barrier before each round,
    // so that collectives line up and one PE's loop does not overlap another's differently).
    let measure = |iters: u32, f: &mut dyn FnMut()| -> Duration {
        let mut rounds: Vec<Duration> = (0..7)
            .map(|_| {
                rt.barrier_all().unwrap();
                let t = Instant::now();
                (0..iters).for_each(|_| f());
                t.elapsed() / iters
            })
            .collect();
        rounds.sort();
        rounds[3]
    };
    let mut rows: Vec<(String, Duration)> = Vec::new();
    for bytes in [8usize, 4096] {
        // SAFETY: `local` / `back` are live Vecs of 64 KiB, disjoint from the heap.
        let put = measure(20_000, &mut || unsafe { rt.putmem(buf, local.as_ptr() as usize, bytes, peer).unwrap() });
        let get = measure(20_000, &mut || unsafe { rt.getmem(back.as_mut_ptr() as usize, buf, bytes, peer).unwrap() });
        rows.push((format!("putmem {bytes} B"), put));
        rows.push((format!("getmem {bytes} B"), get));
    }
    rows.push(("p<u64>".into(), measure(20_000, &mut || rt.p::<u64>(buf, 1, peer).unwrap())));
    rows.push(("g<u64>".into(), measure(20_000, &mut || { std::hint::black_box(rt.g::<u64>(buf, peer).unwrap()); })));
    rows.push((
        "atomic fetch_add u64".into(),
        measure(20_000, &mut || { std::hint::black_box(rt.atomic(buf, Width::W64, AmoOp::Add(1), peer).unwrap()); }),
    ));
    rows.push(("signal_op add".into(), measure(20_000, &mut || rt.signal_op(buf + 64, 1, SignalOp::Add, peer).unwrap())));
    rows.push(("barrier_all".into(), measure(2_000, &mut || rt.barrier_all().unwrap())));
    rows.push(("sync_all".into(), measure(2_000, &mut || rt.sync_all().unwrap())));
    rows.push((
        "broadcast 8 x i64".into(),
        measure(1_000, &mut || rt.broadcast(Team::WORLD, dst, buf, 8, 0, DType::I64).unwrap()),
    ));
    rows.push((
        "reduce sum 8 x i64".into(),
        measure(1_000, &mut || rt.reduce(Team::WORLD, ReduceOp::Sum, dst, buf, 8, DType::I64).unwrap()),
    ));
    rows.push((
        "fcollect 8 x i64".into(),
        measure(1_000, &mut || rt.fcollect(Team::WORLD, dst, buf, 8, DType::I64).unwrap()),
    ));
    if me == 0 {
        println!("{n} PEs, host backend, median of 7 rounds, per call:");
        for (what, d) in rows {
            println!("  {what:<24} {:>9.3} us", d.as_secs_f64() * 1e6);
        }
    }
    rt.free(dst).unwrap();
    rt.free(buf).unwrap();
    rt.finalize().unwrap();
}
