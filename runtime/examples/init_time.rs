//! Measures how long `Runtime::init` and the first symmetric `malloc` take, per PE, then the
//! steady cost of a host `barrier_all` and of a bootstrap all-gather of 8 bytes (means of 20).
//!
//! ```text
//! cargo run -p rshmem --example init_time            # spawns 4 PEs of itself (host backend)
//! cargo run -p rshmem --example init_time -- 8       # 8 PEs
//! RSHMEM_VIRTUAL_HOSTS=8 UCX_TLS=tcp,self UCX_NET_DEVICES=lo cargo run --release -p rshmem \
//!     --example init_time -- 64 --summary            # 64 PEs in 8 virtual hosts, one line
//! torchrun --nproc-per-node 4 target/debug/examples/init_time   # or under a launcher
//! ```
//! Launched without `RANK`/`WORLD_SIZE`, it re-runs itself once per PE with torchrun-style
//! variables on a free loopback port, as the test harness does. PE 0 prints one line per PE and
//! the slowest. Use `--release` for numbers worth quoting.

use rshmem::runtime::{InitOptions, Runtime};
#[path = "common/local_job.rs"]
mod local_job;
use std::time::Instant;

const CHILD: &str = "RSHMEM_INIT_TIME_CHILD";
/// Size of the first allocation. The heap's first growth step (`RSHMEM_HEAP_GROWTH`) already
/// happens inside init, for the runtime's workspace, so this measures a plain allocation.
const FIRST_MALLOC: usize = 1 << 20;

fn main() {
    let launched = std::env::var_os("RANK").is_some() && std::env::var_os("WORLD_SIZE").is_some();
    if launched || std::env::var_os(CHILD).is_some() {
        if let Err(e) = pe_main() {
            eprintln!("init_time: {e}");
            std::process::exit(1);
        }
        return;
    }
    let n: usize = match std::env::args().nth(1).filter(|a| a != "--summary").map(|a| a.parse()) {
        None => 4,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => {
            eprintln!("usage: init_time [NPES >= 1] [--summary]");
            std::process::exit(2);
        }
    };
    let backend = std::env::var("RSHMEM_BACKEND").unwrap_or_else(|_| "host".into());
    let args: Vec<String> = std::env::args().skip(2).collect();
    std::process::exit(local_job::spawn_pes(n, CHILD, "init-time", &args, &[("RSHMEM_BACKEND", backend)]));
}

/// One PE: time init, the first malloc and the first barrier; PE 0 prints everyone's.
fn pe_main() -> rshmem::Result<()> {
    let t0 = Instant::now();
    let rt = Runtime::init(InitOptions::default())?;
    let init = t0.elapsed();
    let t1 = Instant::now();
    let buf = rt.malloc(FIRST_MALLOC)?;
    let malloc = t1.elapsed();
    let t2 = Instant::now();
    rt.barrier_all()?;
    let barrier = t2.elapsed();
    const ROUNDS: u32 = 20;
    let t3 = Instant::now();
    for _ in 0..ROUNDS {
        rt.barrier_all()?;
    }
    let warm_barrier = t3.elapsed() / ROUNDS;
    let t4 = Instant::now();
    for _ in 0..ROUNDS {
        rt.bootstrap().allgather(&[0u8; 8])?;
    }
    let allgather = t4.elapsed() / ROUNDS;
    let mine: Vec<u8> =
        [init, malloc, barrier, warm_barrier, allgather].iter().flat_map(|d| (d.as_nanos() as u64).to_le_bytes()).collect();
    let all = rt.bootstrap().allgather(&mine)?;
    if rt.my_pe() == 0 {
        let hosts = std::env::var("RSHMEM_VIRTUAL_HOSTS").unwrap_or_else(|_| "1".into());
        println!(
            "{} PEs in {hosts} virtual host(s), backend {}: init / first malloc ({} KiB) / first barrier_all / \
             barrier_all / bootstrap all-gather of 8 B, in ms",
            rt.n_pes(),
            rt.backend_kind().name(),
            FIRST_MALLOC >> 10
        );
        let summary = std::env::args().any(|a| a == "--summary");
        let mut worst = [0f64; 5];
        for (pe, blob) in all.iter().enumerate() {
            let ms: Vec<f64> =
                blob.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as f64 / 1e6).collect();
            for (w, v) in worst.iter_mut().zip(&ms) {
                *w = w.max(*v);
            }
            if !summary {
                println!("PE {pe:>3}: {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}", ms[0], ms[1], ms[2], ms[3], ms[4]);
            }
        }
        println!(
            "slowest: {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            worst[0], worst[1], worst[2], worst[3], worst[4]
        );
    }
    rt.free(buf)?;
    rt.finalize()
}

