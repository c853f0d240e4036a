//! Init over an MPI communicator (feature `mpi`, the `mpi` crate): the ranks of the communicator
//! become the PEs, in its order. MPI carries only the unique id (one broadcast); the job's own
//! traffic then goes through rshmem's bootstrap as with any other launcher.

use super::InitOptions;
use crate::bootstrap::UniqueId;
use crate::error::{Error, Result};
use mpi::traits::{Communicator, Root};

/// First byte of the broadcast: rank 0 made an id (the id follows) or failed to.
const MADE: u8 = 1;
const FAILED: u8 = 0;

impl InitOptions {
    /// Options that make every rank of `comm` a PE, PE `i` being rank `i` of `comm`
    /// (`nvshmemx_init_attr` with `NVSHMEMX_INIT_WITH_MPI_COMM`). Collective over `comm`: rank 0
    /// makes the unique id and broadcasts it; pass the result to [`crate::Runtime::init`].
    ///
    /// ```no_run
    /// use mpi::traits::Communicator;
    /// let universe = mpi::initialize().expect("MPI_Init");
    /// let rt = rshmem::Runtime::init(rshmem::InitOptions::from_mpi(&universe.world())?)?;
    /// assert_eq!(rt.my_pe(), universe.world().rank() as usize);
    /// rt.finalize()?; // before `universe` drops (MPI_Finalize)
    /// # Ok::<(), rshmem::Error>(())
    /// ```
    ///
    /// # Errors
    /// On rank 0, what [`UniqueId::new`] returns ([`Error::Os`]); on the other ranks then
    /// [`Error::Refused`] naming rank 0's failure, so that no rank waits for a job that cannot
    /// start.
    #[doc(alias = "NVSHMEMX_INIT_WITH_MPI_COMM")]
    pub fn from_mpi<C: Communicator>(comm: &C) -> Result<InitOptions> {
        let (rank, size) = (comm.rank(), comm.size());
        let mut msg = vec![FAILED; 1 + UniqueId::ENCODED_LEN];
        // Rank 0 broadcasts even when it failed, so that the others return instead of waiting.
        let made = (rank == 0).then(UniqueId::new);
        if let Some(Ok(uid)) = &made {
            msg[0] = MADE;
            msg[1..].copy_from_slice(&uid.to_bytes());
        }
        comm.process_at_rank(0).broadcast_into(&mut msg[..]);
        let uid = match made {
            Some(mine) => mine?,
            None if msg[0] == MADE => UniqueId::from_bytes(&msg[1..])?,
            None => return Err(Error::Refused {
                reason: format!(
                    "MPI rank 0 of {size} could not make the job's unique id (its error says why)"
                ),
            }),
        };
        tracing::debug!(rank, size, "rshmem: unique id shared over MPI");
        Ok(InitOptions {
            uid: Some(uid),
            rank: Some(rank as usize),
            nranks: Some(size as usize),
            ..InitOptions::default()
        })
    }
}
