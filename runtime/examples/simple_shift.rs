//! simple_shift from Rust: each PE stores its number into the next PE's symmetric `i32`, a barrier,
//! then each PE checks it holds its left neighbour's number. The host API of [`rshmem::Runtime`]
//! on either backend (`RSHMEM_BACKEND=host` needs no GPU).
//!
//! ```text
//! cargo build --release -p rshmem --example simple_shift
//! RSHMEM_BACKEND=host torchrun --nproc-per-node 2 --no-python target/release/examples/simple_shift
//!
//! # the same program as an MPI program (MPI_COMM_WORLD's ranks are the PEs):
//! cargo build --release -p rshmem --features mpi --example simple_shift
//! RSHMEM_BACKEND=host mpirun -np 2 target/release/examples/simple_shift
//! ```
//! Exits 1 when the value is wrong.

mod common;

fn main() -> Result<(), rshmem::Error> {
    let (rt, _mpi) = common::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let dest = rt.calloc(1, std::mem::size_of::<i32>())?;
    rt.p::<i32>(dest, me as i32, (me + 1) % n)?;
    rt.barrier_all()?;
    let got = rt.g::<i32>(dest, me)?;
    let want = ((me + n - 1) % n) as i32;
    println!(
        "{me}: received message {got} ({}; joined by {})",
        if got == want { "correct" } else { "WRONG" },
        common::JOINED
    );
    rt.free(dest)?;
    rt.finalize()?;
    if got != want {
        std::process::exit(1);
    }
    Ok(())
}
