//! A ring reduction from Rust: for `n - 1` rounds each PE puts its running sum into the next PE's
//! word and a barrier separates the rounds, so every PE ends with the sum of all PE numbers; then
//! the same sum by the runtime's reduction ([`rshmem::Runtime::reduce`]) as a check.
//!
//! ```text
//! cargo build --release -p rshmem --example ring_reduce
//! RSHMEM_BACKEND=host torchrun --nproc-per-node 2 --no-python target/release/examples/ring_reduce
//! ```
//! With `--features mpi` it is an MPI program, run under `mpirun` (see `common/mod.rs`).
//! Exits 1 when a sum is wrong.

mod common;

use rshmem::dtype::{DType, ReduceOp};
use rshmem::runtime::Team;

fn main() -> Result<(), rshmem::Error> {
    let (rt, _mpi) = common::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let word = rt.calloc(1, std::mem::size_of::<i64>())?;
    let mut value = me as i64;
    for _round in 1..n {
        rt.p::<i64>(word, value, (me + 1) % n)?;
        rt.barrier_all()?; // the neighbour's put has arrived
        value = rt.g::<i64>(word, me)? + me as i64;
        rt.barrier_all()?; // nobody overwrites `word` before this PE read it
    }
    // The runtime's own reduction of every PE's number, into a second word.
    let (src, dst) = (rt.calloc(1, 8)?, rt.calloc(1, 8)?);
    rt.p::<i64>(src, me as i64, me)?;
    rt.reduce(Team::WORLD, ReduceOp::Sum, dst, src, 1, DType::I64)?;
    let reduced = rt.g::<i64>(dst, me)?;
    let want = (n * (n - 1) / 2) as i64;
    let ok = value == want && reduced == want;
    println!(
        "[{me} of {n}, joined by {}] ring reduction: {value}, reduce: {reduced} ({})",
        common::JOINED,
        if ok { "correct" } else { "WRONG" }
    );
    for addr in [word, src, dst] {
        rt.free(addr)?;
    }
    rt.finalize()?;
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
