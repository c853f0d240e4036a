//! simple_shift with arrays (feature `ndarray`): each PE puts a 4 x 8 `f32` matrix to the next PE
//! with [`rshmem::Runtime::put_array`], reads what arrived with
//! [`rshmem::Runtime::get_array`] and, on the host backend, also looks at the next PE's copy in
//! place through [`rshmem::Runtime::array_view`].
//!
//! ```text
//! cargo build --release -p rshmem --features ndarray --example array_shift
//! RSHMEM_BACKEND=host torchrun --nproc-per-node 2 --no-python target/release/examples/array_shift
//! ```
//! With `--features mpi` too it is an MPI program, run under `mpirun` (see `common/mod.rs`).
//! Exits 1 when an element is wrong.

mod common;

use ndarray::{Array2, Axis};
use rshmem::backend::BackendKind;

const SHAPE: (usize, usize) = (4, 8);

/// PE `pe`'s matrix: its number in the hundreds, the element's index below.
fn matrix(pe: usize) -> Array2<f32> {
    Array2::from_shape_fn(SHAPE, |(i, j)| (100 * pe + SHAPE.1 * i + j) as f32)
}

fn main() -> Result<(), rshmem::Error> {
    let (rt, _mpi) = common::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let buf = rt.calloc(SHAPE.0 * SHAPE.1, std::mem::size_of::<f32>())?;

    rt.put_array(buf, &matrix(me), next)?;
    rt.barrier_all()?;
    let got: Array2<f32> = rt.get_array(buf, SHAPE, me)?;
    let mut ok = got == matrix(prev);
    let row_sums = got.sum_axis(Axis(1));

    if rt.backend_kind() == BackendKind::Host {
        // SAFETY: between the two barriers no PE writes `buf` and nobody frees it.
        let theirs = unsafe { rt.array_view::<f32, _>(buf, SHAPE, next)? };
        ok &= theirs == matrix(me).view();
    }
    rt.barrier_all()?;
    println!(
        "[{me} of {n}, joined by {}] received PE {prev}'s matrix, row sums {row_sums} ({})",
        common::JOINED,
        if ok { "correct" } else { "WRONG" }
    );
    rt.free(buf)?;
    rt.finalize()?;
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
