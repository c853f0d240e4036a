//! Host put bandwidth and 8-byte latencies between 2 PEs on different (virtual) hosts, through
//! the UCX transport: the rshmem half of `benchmarks/net_vs_ucx.py`, which runs UCX's own
//! `ucx_perftest` beside it on the same transport.
//!
//! ```text
//! RSHMEM_UCX_DIR=... UCX_TLS=tcp,self UCX_NET_DEVICES=lo \
//!     cargo run --release -p rshmem --example net_bench -- [--sizes 65536,1048576] [--iters N] [--warmup N] [--tests put_bw,p_lat]
//! ```
//! Launched without `RANK`/`WORLD_SIZE` it re-runs itself as 2 PEs in 2 virtual hosts
//! (`RSHMEM_VIRTUAL_HOSTS=2`) with the proxy on (`RSHMEM_NET_PROXY=1`). PE 0 prints one JSON
//! object per line:
//! - `put_bw`: PE 0 puts `size` bytes from host memory to PE 1 `iters` times with the blocking
//!   `putmem` (each returns once its source may be reused), then `quiet`; MB/s.
//! - `put_nbi_bw`: the same with `putmem_nbi` (at most 32 in flight, as `ucx_perftest`'s window),
//!   then `quiet`.
//! - `p_lat`: ping-pong of 8-byte `p` + `wait_until` (half the round trip, µs), as
//!   `ucx_perftest -t ucp_put_lat` does with puts and polling.
//! - `put_signal_lat`: the same with an 8-byte `putmem_signal` and `signal_wait_until`.
//! - `proxy_put_signal_lat`: the same posted to the proxy's ring from a host thread, as a GPU
//!   thread posts it: the proxy's own cost on top of the transport.

use rshmem::consts::{Cmp, SignalOp, SIGNAL_SET};
use rshmem::device_state::{ProxyDesc, PROXY_PUT_SIGNAL};
use rshmem::runtime::{InitOptions, Runtime};
#[path = "common/local_job.rs"]
mod local_job;
use std::time::Instant;

const CHILD: &str = "RSHMEM_NET_BENCH_CHILD";

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let launched = std::env::var_os("RANK").is_some() && std::env::var_os("WORLD_SIZE").is_some();
    if launched || std::env::var_os(CHILD).is_some() {
        if let Err(e) = pe_main() {
            eprintln!("net_bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    // 2 PEs in 2 virtual hosts: every put crosses the transport.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let proxy = std::env::var("RSHMEM_NET_PROXY").unwrap_or_else(|_| "1".into());
    let env = [("RSHMEM_BACKEND", "host".into()), ("RSHMEM_VIRTUAL_HOSTS", "2".into()), ("RSHMEM_NET_PROXY", proxy)];
    std::process::exit(local_job::spawn_pes(2, CHILD, "net-bench", &args, &env));
}

fn pe_main() -> rshmem::Result<()> {
    let sizes: Vec<usize> = arg("--sizes")
        .unwrap_or_else(|| "65536,262144,1048576,4194304".into())
        .split(',')
        .map(|s| s.trim().parse().expect("--sizes: comma-separated byte counts"))
        .collect();
    let iters: usize = arg("--iters").map_or(200, |s| s.parse().expect("--iters: a count"));
    // As `ucx_perftest -w`, which benchmarks/net_vs_ucx gives the same count.
    let warmup: usize = arg("--warmup").map_or((iters / 10).max(10), |s| s.parse().expect("--warmup: a count"));
    let lat_iters: usize = arg("--lat-iters").map_or(2000, |s| s.parse().expect("--lat-iters: a count"));
    let rt = Runtime::init(InitOptions::default())?;
    let (me, peer) = (rt.my_pe(), 1 - rt.my_pe());
    let top = sizes.iter().copied().max().unwrap_or(0);
    let dst = rt.malloc(top.max(8))?;
    let src: Vec<u8> = (0..top).map(|i| i as u8).collect();
    rt.barrier_all()?;
    // `--tests put_bw,p_lat` runs only those (a profile of one of them).
    let chosen = arg("--tests");
    let wanted = |test: &str| chosen.as_deref().is_none_or(|list| list.split(',').any(|t| t.trim() == test));
    for test in ["put_bw", "put_nbi_bw"].into_iter().filter(|t| wanted(t)) {
        for &size in &sizes {
            if me == 0 {
                let put = || -> rshmem::Result<()> {
                    // SAFETY: `src` is a live buffer of at least `size` bytes, unchanged until
                    // the quiet that follows every series.
                    unsafe {
                        if test == "put_bw" {
                            rt.putmem(dst, src.as_ptr() as usize, size, peer)
                        } else {
                            rt.putmem_nbi(dst, src.as_ptr() as usize, size, peer)
                        }
                    }
                };
                // `warmup` untimed puts, then the timed ones.
                for _ in 0..warmup {
                    put()?;
                }
                rt.quiet()?;
                let t = Instant::now();
                for _ in 0..iters {
                    put()?;
                }
                rt.quiet()?;
                let s = t.elapsed().as_secs_f64();
                println!(r#"{{"test": "{test}", "size": {size}, "iters": {iters}, "MB_s": {:.1}}}"#, (size * iters) as f64 / s / 1e6);
            }
            rt.barrier_all()?;
        }
    }
    let flag = rt.calloc(1, 8)?;
    let data = rt.malloc(8)?;
    let word = 7u64.to_le_bytes();
    let proxied = std::env::var("RSHMEM_NET_PROXY").as_deref() == Ok("1");
    for test in ["p_lat", "put_signal_lat", "proxy_put_signal_lat"] {
        if (test == "proxy_put_signal_lat" && !proxied) || !wanted(test) {
            continue;
        }
        let base = match test {
            "p_lat" => 0u64,
            "put_signal_lat" => 1 << 32,
            _ => 2 << 32,
        };
        let send = |i: u64| -> rshmem::Result<()> {
            match test {
                "p_lat" => rt.p::<u64>(flag, i, peer),
                // SAFETY: `word` is 8 live bytes.
                "put_signal_lat" => unsafe { rt.putmem_signal(data, word.as_ptr() as usize, 8, flag, i, SignalOp::Set, peer) },
                _ => {
                    let d = ProxyDesc {
                        kind: PROXY_PUT_SIGNAL,
                        pe: peer as i32,
                        dest: data.get() as u64,
                        source: word.as_ptr() as u64,
                        nbytes: 8,
                        sig_addr: flag.get() as u64,
                        value: i,
                        sub: SIGNAL_SET as u8,
                        ..ProxyDesc::default()
                    };
                    // SAFETY: `word` lives until the post returns.
                    unsafe { rt.proxy_post(d) }.map(drop)
                }
            }
        };
        let wait = |i: u64| rt.signal_wait_until(flag, Cmp::Eq, i).map(drop);
        rt.barrier_all()?;
        let warm = 100u64;
        let mut t = Instant::now();
        for k in 1..=(lat_iters as u64 + warm) {
            if k == warm + 1 {
                t = Instant::now();
            }
            let i = base + k;
            if me == 0 {
                send(i)?;
                wait(i)?;
            } else {
                wait(i)?;
                send(i)?;
            }
        }
        let half_rtt_us = t.elapsed().as_secs_f64() / lat_iters as f64 / 2.0 * 1e6;
        if me == 0 {
            println!(r#"{{"test": "{test}", "size": 8, "iters": {lat_iters}, "us": {half_rtt_us:.2}}}"#);
        }
        rt.barrier_all()?;
    }
    rt.finalize()
}

