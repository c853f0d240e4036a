//! What a heap allocation costs: the allocator alone, and a collective malloc/free pair.
//!
//! ```text
//! cargo run --release -p rshmem --example heap_cost            # starts 2 PEs itself
//! cargo run --release -p rshmem --example heap_cost -- 4       # or 4
//! ```
//! Without torchrun variables it re-runs itself once per PE on the loopback interface with the
//! host backend; under `torchrun --no-python` it is one PE of that job.

use rshmem::backend::host::HostMemory;
use rshmem::bootstrap::{Bootstrap, UniqueId};
use rshmem::heap::allocator::{Allocator, MIN_ALIGN};
use rshmem::heap::SymmetricHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    match UniqueId::from_env().expect("torchrun variables") {
        Some((uid, rank, n)) => pe(&uid, rank, n),
        None => {
            let n: usize = std::env::args().nth(1).map_or(2, |a| a.parse().expect("PE count"));
            allocator_alone();
            launch(n);
        }
    }
}

/// Malloc/free pairs on a heap fragmented by `live` allocations with holes between them.
fn allocator_alone() {
    for live in [0usize, 100, 1000] {
        let mut a = Allocator::new(MIN_ALIGN).unwrap();
        a.grow(1 << 40).unwrap();
        let blocks: Vec<usize> = (0..2 * live).map(|_| a.malloc(4096, 0).unwrap().unwrap()).collect();
        for off in blocks.iter().step_by(2) {
            a.free(*off).unwrap();
        }
        let n = 200_000;
        let t = Instant::now();
        for i in 0..n {
            let off = a.malloc(8192 + (i % 7) * 256, 0).unwrap().unwrap();
            a.free(std::hint::black_box(off)).unwrap();
        }
        println!("allocator alone, {live} live blocks + {live} holes: {:?} per malloc+free", t.elapsed() / n as u32);
    }
}

fn launch(n: usize) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..n)
        .map(|rank| {
            std::process::Command::new(&exe)
                .env("MASTER_ADDR", "127.0.0.1")
                .env("RSHMEM_BOOTSTRAP_PORT", port.to_string())
                .env("RSHMEM_BOOTSTRAP_SECRET", format!("heap-cost-{}", std::process::id()))
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

fn pe(uid: &UniqueId, rank: usize, n: usize) {
    let b = Bootstrap::connect(uid, rank, n, Duration::from_secs(30)).unwrap();
    let h = SymmetricHeap::new(Arc::new(HostMemory::new()), &b, 1 << 30, 64 << 20).unwrap();
    let keep = h.malloc(&b, 1 << 20, 0).unwrap(); // grow once: measure the steady state
    let iters = 2000;
    let time = |f: &dyn Fn()| {
        b.barrier().unwrap();
        let t = Instant::now();
        (0..iters).for_each(|_| f());
        t.elapsed() / iters
    };
    let pair = time(&|| {
        let x = h.malloc(&b, 4096, 0).unwrap();
        h.free(&b, x).unwrap();
    });
    let barrier = time(&|| b.barrier().unwrap());
    let allgather = time(&|| drop(b.allgather(&[0u8; 25]).unwrap()));
    // A growth step: 64 MiB chunk per PE, created, exchanged and mapped by every PE.
    let t = Instant::now();
    let big = h.malloc(&b, 64 << 20, 0).unwrap();
    let grow = t.elapsed();
    if rank == 0 {
        println!(
            "{n} PEs: collective malloc+free pair {pair:?}; bootstrap barrier {barrier:?}; \
             25-byte allgather {allgather:?}; malloc that grows the heap by 64 MiB {grow:?}"
        );
    }
    h.free(&b, big).unwrap();
    h.free(&b, keep).unwrap();
    b.finalize().unwrap();
}
