//! The runtime: init / finalize and the host API.
//!
//! [`Runtime`] is a value (no global): [`Runtime::init`] joins the job, builds the symmetric
//! heap on the chosen backend and allocates the runtime's own symmetric workspace; every host
//! call is a method. Submodules, one area each:
//!
//! | file | what |
//! |---|---|
//! | `init.rs` | [`InitOptions`], init, finalize, the device state this PE publishes |
//! | `device.rs` | what the backend's device side adds to the host API: kernel error records, module publication |
//! | `mem.rs` | checked access to symmetric memory (the only place that dereferences heap addresses, with `rma.rs`) |
//! | `rma.rs` | `putmem` / `getmem` / `p` / `g` |
//! | `raw.rs` | checks on raw local addresses a front end received as integers |
//! | `atomic.rs` | remote atomics |
//! | `signal.rs` | signal words: `signal_op`, `putmem_signal`, `signal_fetch`, `signal_wait_until` |
//! | `wait.rs` | the polling loop (health checks, debug timeout) and `wait_until` / `test` families |
//! | `sync.rs` | `fence`, `quiet`, barriers |
//! | `team_table.rs` | [`Team`], the team table, the split arithmetic |
//! | `team.rs` | the `team_*` calls |
//! | `collective.rs` | broadcast, fcollect, alltoall, reductions |
//! | `agree.rs` | every member of a host collective checks the others' arguments in its first barrier |
//! | `stream.rs` | on-stream puts, gets, signals, waits, quiet, barriers (`*_on_stream`): queued on the backend's streams, or run as their host forms where it has none |
//! | `array.rs` | (feature `ndarray`) typed arrays of symmetric allocations: copies on any backend, views on the host backend |
//! | `mpi_init.rs` | (feature `mpi`) [`InitOptions::from_mpi`]: the ranks of an MPI communicator become the PEs |
//! | `stream_collective.rs` | on-stream broadcast, fcollect, alltoall, reductions: one struct of arguments per collective, its host fallback and its kernel launches, one path for all |
//!
//! The runtime reaches memory, streams, kernels and the device state only through its
//! [`crate::backend::Backend`], and PEs on other hosts only through its
//! [`crate::backend::Transport`]; it never names an implementation of either.
//!
//! Semantics follow OpenSHMEM 1.5 and NVSHMEM; each method names its SHMEM equivalent.

pub(crate) mod agree;
#[cfg(feature = "ndarray")]
mod array;
mod atomic;
mod collective;
mod device;
mod init;
mod kernel_error;
mod mem;
#[cfg(feature = "mpi")]
mod mpi_init;
mod raw;
mod rma;
mod signal;
mod stream;
mod stream_collective;
mod strided;
mod sync;
mod team;
mod team_table;
mod wait;
mod workspace;

pub use init::InitOptions;
pub use raw::Access;
pub use team_table::Team;

use crate::backend::{Backend, BackendKind, MemoryBackend, Transport};
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::heap::{SymAddr, SymmetricHeap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use team_table::TeamTable;

/// Alignment of [`Runtime::malloc`] and [`Runtime::calloc`]: enough for any element type and
/// for 128-byte vector loads on the GPU (NVSHMEM aligns its allocations the same way or less).
pub const DEFAULT_ALIGN: usize = 256;

/// An initialized PE: the bootstrap, the symmetric heap and the runtime's own state.
///
/// `Send + Sync`: methods take `&self`. Collective methods must be called by every PE of the
/// team in the same order; calling collectives of one team from two threads at once is not
/// supported (as in SHMEM), except barriers: a PE's barrier instances of one team run one after
/// another whoever calls them (docs/memory-model.md, "Barriers").
pub struct Runtime {
    /// The transport to PEs on other hosts, with its proxy for device-initiated operations
    /// where one runs; `None` when every PE is node-local. Dropped first: its registrations of
    /// heap memory go before the heap.
    net: Option<Box<dyn Transport>>,
    boot: Bootstrap,
    heap: SymmetricHeap,
    /// Memory, streams, the runtime's kernels and the device state.
    backend: Box<dyn Backend>,
    /// The backend's memory (the heap's too), kept here for the host API's copies and atomics.
    mem: Arc<dyn MemoryBackend>,
    /// Per world PE: whether device code of this PE reaches it by load/store (its heap slot is
    /// mapped here and the backend's device reaches its device).
    reachable: Vec<bool>,
    teams: Mutex<TeamTable>,
    /// Symmetric address of the runtime workspace (see `workspace`).
    workspace: usize,
    /// Symmetric address of the backend's stream workspace (`Backend::stream_workspace_bytes`);
    /// 0 where it needs none.
    staged_ws: usize,
    /// `RSHMEM_DEBUG_WAIT_TIMEOUT_MS`.
    wait_timeout: Option<Duration>,
    /// `RSHMEM_STUCK_REPORT_MS` (`None`: never).
    stuck_report: Option<Duration>,
    /// `RSHMEM_COLL_HIERARCHY_MIN_BYTES`: host broadcasts and reductions across hosts of at
    /// least this many bytes per PE go hierarchically (`runtime/collective.rs`).
    coll_hierarchy_min_bytes: usize,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("my_pe", &self.my_pe())
            .field("n_pes", &self.n_pes())
            .field("backend", &self.backend.kind())
            .field("device", &self.backend.device())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// This PE's number in the job.
    #[doc(alias = "nvshmem_my_pe")]
    pub fn my_pe(&self) -> usize {
        self.boot.rank()
    }

    /// Number of PEs in the job.
    #[doc(alias = "nvshmem_n_pes")]
    pub fn n_pes(&self) -> usize {
        self.boot.nranks()
    }

    /// Ends the job at once: every PE's process exits with `status`, this one included, whatever
    /// the others are doing (waiting in a barrier, computing, or in no rshmem call); nothing is
    /// finalized. Never returns (the `Result` lets the host API tables call it like the others).
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/setup.html>
    #[doc(alias = "nvshmem_global_exit")]
    pub fn global_exit(&self, status: i32) -> Result<()> {
        tracing::debug!(pe = self.my_pe(), status, "global_exit");
        self.boot.global_exit(status)
    }

    /// The memory backend of the symmetric heap.
    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// The ordinal (in this process) of the GPU this PE uses; `None` on the host backend.
    pub fn device(&self) -> Option<i32> {
        self.backend.device()
    }

    /// How many PEs of this host use this PE's GPU, this one included: 1 for a GPU of its own,
    /// more when `RSHMEM_ALLOW_SHARED_GPU=1` let PEs share it, 0 on the host backend.
    pub fn gpu_sharers(&self) -> usize {
        self.backend.device_sharers()
    }

    /// The symmetric heap.
    pub fn heap(&self) -> &SymmetricHeap {
        &self.heap
    }

    /// The bootstrap (byte-blob collectives among all PEs, peer health).
    pub fn bootstrap(&self) -> &Bootstrap {
        &self.boot
    }

    /// Allocates `size` bytes of symmetric memory, aligned to [`DEFAULT_ALIGN`]; returns this
    /// PE's address of it. Every PE must call it with the same size.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when PEs pass different sizes, [`Error::HeapExhausted`] past
    /// `RSHMEM_SYMMETRIC_SIZE`, bootstrap errors ([`Error::PeerDied`], [`Error::Timeout`]).
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/memory.html>
    #[doc(alias = "nvshmem_malloc")]
    pub fn malloc(&self, size: usize) -> Result<SymAddr> {
        let _named = crate::watchdog::call_scope("malloc");
        self.heap.malloc(&self.boot, size, DEFAULT_ALIGN).map(SymAddr::new)
    }

    /// Allocates zeroed symmetric memory for `count` elements of `size` bytes. Collective.
    ///
    /// # Errors
    /// As [`Runtime::malloc`]; [`Error::InvalidArgument`] when `count * size` overflows.
    #[doc(alias = "nvshmem_calloc")]
    pub fn calloc(&self, count: usize, size: usize) -> Result<SymAddr> {
        let _named = crate::watchdog::call_scope("calloc");
        self.heap.calloc(&self.boot, count, size).map(SymAddr::new)
    }

    /// [`Runtime::calloc`] of memory the caller describes in its own words (`"a tensor of shape
    /// (4, 8) and dtype torch.float32"`): every PE must pass the same description too, and a
    /// difference is reported in those words, even where the sizes agree. Collective.
    ///
    /// # Errors
    /// As [`Runtime::calloc`]; [`Error::Mismatch`] quoting both descriptions.
    pub fn calloc_described(&self, count: usize, size: usize, what: &str) -> Result<SymAddr> {
        let _named = crate::watchdog::call_scope("calloc");
        self.heap.calloc_described(&self.boot, count, size, what).map(SymAddr::new)
    }

    /// Allocates `size` bytes of symmetric memory aligned to `alignment` (a power of two).
    /// Collective.
    ///
    /// # Errors
    /// As [`Runtime::malloc`]; [`Error::InvalidArgument`] when `alignment` is not a power of two.
    #[doc(alias = "nvshmem_align")]
    pub fn align(&self, alignment: usize, size: usize) -> Result<SymAddr> {
        if !alignment.is_power_of_two() {
            return Err(Error::InvalidArgument(format!("align: alignment {alignment} is not a power of two")));
        }
        let _named = crate::watchdog::call_scope("align");
        self.heap.malloc(&self.boot, size, alignment).map(SymAddr::new)
    }

    /// Frees symmetric memory allocated by [`Runtime::malloc`] and friends. Collective: every
    /// PE frees the same allocation; outstanding puts of this PE are completed first, and on a
    /// backend with a device every operation queued there has run (a kernel or copy still queued
    /// on a stream could otherwise touch memory a later allocation reuses).
    ///
    /// # Errors
    /// [`Error::NotSymmetric`] / [`Error::InvalidArgument`] for an address that is not an
    /// allocation, [`Error::Mismatch`] when PEs free different allocations, bootstrap errors.
    #[doc(alias = "nvshmem_free")]
    pub fn free(&self, addr: SymAddr) -> Result<()> {
        let _named = crate::watchdog::call_scope("free");
        self.quiet()?;
        self.backend.synchronize().map_err(|e| self.prefer_device_error(e))?;
        self.heap.free(&self.boot, addr.get())
    }

    /// Makes the program's own `len` bytes at `addr` symmetric (`nvshmemx_buffer_register_symmetric`):
    /// one allocation of this PE's GPU that the program created with `cuMemCreate` (exportable
    /// as a POSIX file descriptor) and mapped with `cuMemMap`, `addr` its first byte and `len`
    /// its size. Returns the buffer's symmetric address, where every symmetric call reaches
    /// it (the program's own address of it stays valid too: both map the same memory).
    /// Collective: every PE passes a buffer of the same size.
    ///
    /// # Errors
    /// See [`SymmetricHeap::register_in`].
    #[doc(alias = "nvshmemx_buffer_register_symmetric")]
    pub fn register_symmetric(&self, addr: usize, len: usize) -> Result<SymAddr> {
        let _named = crate::watchdog::call_scope("buffer_register_symmetric");
        self.heap.register_in(&self.boot, addr, len).map(SymAddr::new)
    }

    /// Ends a registration of [`Runtime::register_symmetric`] (`addr` the symmetric address it
    /// returned, `len` its size): this PE's puts are completed and its queued device work has
    /// run first, as for [`Runtime::free`]. Collective.
    ///
    /// # Errors
    /// See [`SymmetricHeap::unregister_in`].
    #[doc(alias = "nvshmemx_buffer_unregister_symmetric")]
    pub fn unregister_symmetric(&self, addr: SymAddr, len: usize) -> Result<()> {
        let _named = crate::watchdog::call_scope("buffer_unregister_symmetric");
        self.quiet()?;
        self.backend.synchronize().map_err(|e| self.prefer_device_error(e))?;
        self.heap.unregister_in(&self.boot, addr.get(), len)
    }

    /// The address at which this process reaches `addr` of PE `pe` by load/store, or `None`
    /// when `pe`'s memory is not mapped here.
    ///
    /// # Errors
    /// [`Error::PeOutOfRange`].
    #[doc(alias = "nvshmem_ptr")]
    pub fn ptr(&self, addr: SymAddr, pe: usize) -> Result<Option<usize>> {
        self.check_pe(pe)?;
        Ok(self.heap.ptr(addr.get(), pe))
    }

    /// Fails with [`Error::PeOutOfRange`] unless `pe < n_pes`.
    fn check_pe(&self, pe: usize) -> Result<()> {
        if pe < self.n_pes() {
            Ok(())
        } else {
            Err(Error::PeOutOfRange { pe: pe as i64, n_pes: self.n_pes(), scope: "the job".into() })
        }
    }

    /// The team table (a poisoned lock still holds consistent data: every update is one
    /// assignment).
    fn teams(&self) -> MutexGuard<'_, TeamTable> {
        self.teams.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runtime_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::Runtime>();
    }
}
