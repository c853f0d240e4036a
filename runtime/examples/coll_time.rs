//! Measures host collectives over all PEs: `barrier_all`, and broadcast, fcollect, alltoall and
//! a sum reduction (f32) of 8 B, 64 KiB and 1 MiB per PE; each the mean of several calls, the
//! slowest PE's mean printed by PE 0 (milliseconds).
//!
//! ```text
//! RSHMEM_VIRTUAL_HOSTS=2 UCX_TLS=tcp,self UCX_NET_DEVICES=lo cargo run --release -p rshmem \
//!     --example coll_time -- 8        # 8 PEs in 2 virtual hosts
//! RSHMEM_COLL_HIERARCHY_MIN_BYTES=1099511627776 ... # the flat forms, for comparison
//! ```
//! Launched without `RANK`/`WORLD_SIZE`, it re-runs itself once per PE with torchrun-style
//! variables on a free loopback port (as `init_time` does). Use `--release` for numbers worth
//! quoting.

use rshmem::dtype::{DType, ReduceOp};
use rshmem::runtime::{InitOptions, Runtime, Team};
#[path = "common/local_job.rs"]
mod local_job;
use std::time::Instant;

const CHILD: &str = "RSHMEM_COLL_TIME_CHILD";
/// Bytes per PE of each measured size.
const SIZES: [usize; 3] = [8, 64 << 10, 1 << 20];
/// What each column is.
const OPS: [&str; 4] = ["broadcast", "fcollect", "alltoall", "sum_reduce"];

fn main() {
    let launched = std::env::var_os("RANK").is_some() && std::env::var_os("WORLD_SIZE").is_some();
    if launched || std::env::var_os(CHILD).is_some() {
        if let Err(e) = pe_main() {
            eprintln!("coll_time: {e}");
            std::process::exit(1);
        }
        return;
    }
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 4,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => {
            eprintln!("usage: coll_time [NPES >= 1]");
            std::process::exit(2);
        }
    };
    std::process::exit(local_job::spawn_pes(n, CHILD, "coll-time", &[], &[("RSHMEM_BACKEND", "host".into())]));
}

/// Calls per measurement: fewer for the large sizes, whose calls take longer.
fn rounds(bytes: usize) -> u32 {
    if bytes >= 1 << 20 {
        5
    } else {
        20
    }
}

/// Mean seconds of `f` over `r` calls, after one call not counted (connections, first touch).
fn mean(r: u32, mut f: impl FnMut() -> rshmem::Result<()>) -> rshmem::Result<f64> {
    f()?;
    let t = Instant::now();
    for _ in 0..r {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() / r as f64)
}

fn pe_main() -> rshmem::Result<()> {
    let rt = Runtime::init(InitOptions::default())?;
    let n = rt.n_pes();
    let max = *SIZES.iter().max().expect("sizes");
    let src = rt.malloc(max * n)?;
    let dst = rt.malloc(max * n)?;
    let w = Team::WORLD;
    let mut mine = vec![mean(50, || rt.barrier_all())?];
    for bytes in SIZES {
        let r = rounds(bytes);
        let elems = bytes / 4;
        let root = (n - 1) as i32;
        mine.push(mean(r, || rt.broadcast(w, dst, src, bytes, root, DType::U8))?);
        mine.push(mean(r, || rt.fcollect(w, dst, src, bytes, DType::U8))?);
        mine.push(mean(r, || rt.alltoall(w, dst, src, bytes, DType::U8))?);
        mine.push(mean(r, || rt.reduce(w, ReduceOp::Sum, dst, src, elems.max(1), DType::F32))?);
    }
    let blob: Vec<u8> = mine.iter().flat_map(|s| s.to_le_bytes()).collect();
    let all = rt.bootstrap().allgather(&blob)?;
    if rt.my_pe() == 0 {
        let mut worst = vec![0f64; mine.len()];
        for b in &all {
            for (w, c) in worst.iter_mut().zip(b.chunks_exact(8)) {
                *w = w.max(f64::from_le_bytes(c.try_into().expect("8 bytes")));
            }
        }
        let hosts = std::env::var("RSHMEM_VIRTUAL_HOSTS").unwrap_or_else(|_| "1".into());
        let hier = std::env::var("RSHMEM_COLL_HIERARCHY_MIN_BYTES").unwrap_or_else(|_| "default".into());
        println!(
            "{n} PEs in {hosts} virtual host(s), RSHMEM_COLL_HIERARCHY_MIN_BYTES={hier}: slowest PE's mean, ms"
        );
        println!("barrier_all {:>9.3}", worst[0] * 1e3);
        println!("{:>9} {}", "bytes/PE", OPS.map(|o| format!("{o:>11}")).join(""));
        for (k, bytes) in SIZES.iter().enumerate() {
            let row: String = worst[1 + 4 * k..5 + 4 * k].iter().map(|s| format!("{:>11.3}", s * 1e3)).collect();
            println!("{bytes:>9} {row}");
        }
    }
    rt.free(dst)?;
    rt.free(src)?;
    rt.finalize()
}

