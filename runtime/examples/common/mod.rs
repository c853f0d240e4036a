//! How the examples join the job. Built with the `mpi` feature they are MPI programs: MPI_Init,
//! then the ranks of MPI_COMM_WORLD become the PEs ([`InitOptions::from_mpi`]; run them under
//! `mpirun`). Without it, the launcher's environment says who the peers are (torchrun, or
//! `mpirun` with `MASTER_ADDR`/`MASTER_PORT` exported), else the job is this one PE.

use rshmem::runtime::{InitOptions, Runtime};

/// What must outlive [`Runtime::finalize`]: MPI itself (dropping it is MPI_Finalize).
#[cfg(feature = "mpi")]
pub type Guard = mpi::environment::Universe;
/// Nothing to keep without MPI.
#[cfg(not(feature = "mpi"))]
pub type Guard = ();

/// Joins the job; keep the guard until after `finalize`.
pub fn init() -> rshmem::Result<(Runtime, Guard)> {
    #[cfg(feature = "mpi")]
    {
        let universe = mpi::initialize().ok_or_else(|| {
            rshmem::Error::InvalidArgument("MPI was initialized before this example".into())
        })?;
        let rt = Runtime::init(InitOptions::from_mpi(&universe.world())?)?;
        Ok((rt, universe))
    }
    #[cfg(not(feature = "mpi"))]
    {
        Ok((Runtime::init(InitOptions::default())?, ()))
    }
}

/// How this build joined, for the examples' output.
pub const JOINED: &str = if cfg!(feature = "mpi") {
    "MPI_COMM_WORLD"
} else {
    "launcher env"
};
