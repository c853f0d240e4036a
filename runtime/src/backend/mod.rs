//! Backends: the one seam between the runtime and what it runs on.
//!
//! A [`Backend`] owns everything that differs between running on host memory and on GPUs: the
//! memory the symmetric heap is made of ([`MemoryBackend`]), how on-stream work is queued
//! ([`Streams`]: copies, signals, waits and the runtime's kernels), the device state published
//! into modules that link the device library, and the errors kernels record. The runtime holds
//! one `Box<dyn Backend>` and never names an implementation: [`open`] is the one place that
//! does, so a new backend is a new folder here plus one line there.
//!
//! | folder | what |
//! |---|---|
//! | [`host`] | memfd chunks in host memory; no streams (on-stream calls run as their host forms), no device state |
//! | [`cuda`] | GPU memory through the driver's VMM API, GPU selection, the runtime's kernels, streams, the device state and its publication, kernel error records |
//! | [`memory`] | the traits the heap uses: reservations, chunks, mappings, copies and atomics |

pub mod cuda;
pub mod host;
pub mod net;
pub mod memory;

pub use memory::{AmoOp, Chunk, Mapping, MemoryBackend, Reservation, Width};

use crate::bootstrap::Bootstrap;
use crate::consts::{Cmp, SignalOp};
use crate::device_state::{DeviceState, ErrorRecord};
use crate::driver::stream::StreamHandle;
use crate::dtype::{DType, ReduceOp};
use crate::env::Env;
// Only the docs name `Error` (their links).
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use std::sync::Arc;

/// Which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Host memory (memfd).
    Host,
    /// GPU memory through the CUDA driver.
    Cuda,
}

impl BackendKind {
    /// The name used by `RSHMEM_BACKEND` and `init(backend=...)`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Host => "host",
            BackendKind::Cuda => "cuda",
        }
    }

    /// Parses `"host"` / `"cuda"`.
    ///
    /// # Errors
    /// [`crate::Error::Config`] listing the allowed values.
    pub fn parse(name: &str) -> Result<BackendKind> {
        match name {
            "host" => Ok(BackendKind::Host),
            "cuda" => Ok(BackendKind::Cuda),
            other => Err(crate::Error::Config {
                var: "backend",
                value: other.to_string(),
                reason: "allowed values are `cuda` and `host`".into(),
            }),
        }
    }

    /// The backend of a job: the caller's choice, else `RSHMEM_BACKEND` (`env_value`), else
    /// cuda when the driver loads and sees a GPU, else host.
    ///
    /// # Errors
    /// [`crate::Error::Config`] for an unknown name.
    pub fn choose(asked: Option<BackendKind>, env_value: Option<&str>) -> Result<BackendKind> {
        choose_with(asked, env_value, cuda::gpu_visible)
    }
}

/// [`BackendKind::choose`] with the GPU probe as an argument (tests pass their own).
fn choose_with(
    asked: Option<BackendKind>,
    env_value: Option<&str>,
    gpu_visible: impl FnOnce() -> bool,
) -> Result<BackendKind> {
    match (asked, env_value) {
        (Some(kind), _) => Ok(kind),
        (None, Some(name)) => BackendKind::parse(name),
        (None, None) if gpu_visible() => Ok(BackendKind::Cuda),
        (None, None) => Ok(BackendKind::Host),
    }
}

/// Opens this PE's backend of `kind`. Collective over all PEs for backends that pick devices
/// (cuda: node-local PEs exchange their GPUs' identities, so a PE that fails makes every PE fail
/// with an error naming it). `device` is an explicit GPU ordinal, ignored by the host backend.
///
/// # Errors
/// What the backend's own `open` returns: [`Error::Unsupported`] without a usable driver or GPU,
/// [`Error::InvalidArgument`] for a bad device or a shared GPU, bootstrap errors.
pub fn open(kind: BackendKind, boot: &Bootstrap, device: Option<i32>, env: &Env) -> Result<Box<dyn Backend>> {
    Ok(match kind {
        BackendKind::Host => Box::new(host::HostBackend::open(device)),
        BackendKind::Cuda => Box::new(cuda::CudaBackend::open(boot, device, env)?),
    })
}

/// What a thread the runtime starts runs first so that it may touch the backend's memory through
/// UCX (cuda: make the PE's context current, for UCX's copies of GPU memory).
pub type ThreadSetup = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// Opens the network transport ([`net::Net`]) when the job's PEs sit on more than one host
/// (virtual hosts included); `None` when every PE is node-local. Collective over all PEs;
/// `heap_base` is this PE's heap offset 0; the heap is host memory when `backend` has no device.
///
/// # Errors
/// What [`net::Net::open`] returns: [`Error::Unsupported`] naming the remote PEs when UCX is
/// missing, [`Error::Transport`], bootstrap errors.
pub fn open_transport(boot: &Bootstrap, heap_base: usize, backend: &dyn Backend, env: &Env) -> Result<Option<Arc<net::Net>>> {
    let host_memory = backend.device().is_none();
    let node_of = &boot.node().node_of;
    let mine = node_of[boot.rank()];
    let remote: Vec<bool> = node_of.iter().map(|&n| n != mine).collect();
    if !remote.iter().any(|&r| r) {
        return Ok(None);
    }
    let setup = backend.thread_setup();
    let net = net::Net::open(
        boot,
        &remote,
        heap_base,
        backend.memory(),
        host_memory,
        env.net_target_atomics,
        setup,
        env.bootstrap_timeout,
    )?;
    Ok(Some(Arc::new(net)))
}

/// One backend of a runtime: memory, streams, the runtime's kernels and the device state.
///
/// Defaults describe a backend without devices (the host backend): no device, no streams, no
/// state to publish, no kernel errors.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// The memory the symmetric heap is made of.
    fn memory(&self) -> Arc<dyn MemoryBackend>;

    /// The ordinal (in this process) of the GPU this PE uses; `None` without one.
    fn device(&self) -> Option<i32> {
        None
    }

    /// How many PEs of this host use this PE's GPU, this one included (0 without a GPU).
    fn device_sharers(&self) -> usize {
        0
    }

    /// Whether this PE's device reaches world PE `pe`'s memory by load/store once the heap maps
    /// it (false for PEs on other hosts, or GPUs without peer access).
    fn load_store(&self, pe: usize) -> bool {
        let _ = pe;
        true
    }

    /// Bytes of symmetric workspace the backend's stream kernels need for `n_pes` PEs (the
    /// runtime allocates it at init, zeroed, and hands it to [`Streams::fcollect_staged`]).
    fn stream_workspace_bytes(&self, n_pes: usize) -> usize {
        let _ = n_pes;
        0
    }

    /// What the transport's and the proxy's threads run first (see [`ThreadSetup`]); `None`
    /// where threads need nothing.
    fn thread_setup(&self) -> Option<ThreadSetup> {
        None
    }

    /// Zeroed memory for the proxy's ring (`net::proxy`), which this backend's kernels write:
    /// page-locked host memory on cuda, ordinary memory without a device.
    ///
    /// # Errors
    /// [`Error::Driver`].
    fn ring_memory(&self) -> Result<Box<dyn net::proxy::RingMemory>> {
        Ok(Box::new(net::proxy::HostRing::new()))
    }

    /// On-stream work; `None` when the backend has no streams, where every `*_on_stream` call
    /// runs as its host form, synchronously.
    fn streams(&self) -> Option<&dyn Streams> {
        None
    }

    /// Called once by init after the heap and the runtime's workspace exist: publishes `state`
    /// (loads the runtime's kernels, writes the state into them and into every module handed
    /// over before). Backends without devices ignore it.
    ///
    /// # Errors
    /// [`Error::Driver`]; [`Error::InvalidArgument`] for a module built against another
    /// device-library version.
    fn start(&mut self, state: DeviceState) -> Result<()> {
        let _ = state;
        Ok(())
    }

    /// The state published into modules, once started.
    fn device_state(&self) -> Option<&DeviceState> {
        None
    }

    /// The error record a kernel of this PE wrote before it stopped, if any, as the kernel wrote
    /// it: the runtime words it (it knows the heap's allocations and the collectives' calls).
    fn device_error(&self) -> Option<ErrorRecord> {
        None
    }

    /// Writes the device state into a loaded module (a `CUmodule` as an integer) and remembers
    /// it; `false` for a module without the state global, and for backends without devices.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a module of another device-library version; [`Error::Driver`].
    ///
    /// # Safety
    /// `module` must be a live module loaded in this PE's device's context, and stay loaded
    /// until it is forgotten (`backend::cuda::registry::forget`).
    #[allow(unsafe_code)]
    unsafe fn publish_module(&self, module: usize) -> Result<bool> {
        let _ = module;
        Ok(false)
    }

    /// Clears the published state in every module (finalize).
    ///
    /// # Errors
    /// [`Error::Driver`].
    fn unpublish(&self) -> Result<()> {
        Ok(())
    }

    /// Waits until every operation queued on this PE's device has run (before memory is freed).
    ///
    /// # Errors
    /// [`Error::Driver`], for instance when a queued kernel failed.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

/// What the members of one on-stream collective agree on, on the device
/// (`runtime/src/runtime/agree.rs`): this PE's packed call and its call number on the team, which
/// the collective's first barrier (or, staged, its flags) compares with every member's, through
/// the agreement slots of the stream workspace at `ws`, laid out for `n_pes` PEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    /// Symmetric address of the backend's stream workspace.
    pub ws: usize,
    /// PEs of the job (the workspace layout depends on it).
    pub n_pes: usize,
    /// This PE's call, packed (`agree::Signature::pack`).
    pub desc: u64,
    /// This PE's on-stream collective calls of the team so far, this one included.
    pub seq: u64,
}

/// The on-stream operations of a backend with streams: each is queued on the caller's stream
/// (a `CUstream` as a [`StreamHandle`]; 0 is the legacy default stream) and ordered with the
/// caller's other work there; each call returns once the work is queued.
///
/// # Safety
/// Every method takes a stream handle, which must be a live stream of this PE's device (or 0),
/// and addresses that must stay mapped and valid until the stream has run the operation.
#[allow(unsafe_code)]
pub trait Streams: Send + Sync {
    /// Copies `len` bytes from `src` to `dst` (two disjoint ranges mapped in this process).
    ///
    /// # Safety
    /// See the trait.
    unsafe fn copy(&self, stream: StreamHandle, dst: usize, src: usize, len: usize) -> Result<()>;

    /// Updates the 64-bit signal word at `addr`, ordered after everything queued before it at
    /// system scope.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn signal(&self, stream: StreamHandle, addr: usize, value: u64, op: SignalOp) -> Result<()>;

    /// Makes later work on the stream wait until the 64-bit word at `addr` compares `cmp` to
    /// `value`.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn wait(&self, stream: StreamHandle, addr: usize, cmp: Cmp, value: u64) -> Result<()>;

    /// A barrier (with quiet) over team slot `team`, whose device table entry is written on
    /// every member.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn barrier(&self, stream: StreamHandle, team: i32) -> Result<()>;

    /// [`Streams::barrier`] that also checks `agree` against every member's: on a difference
    /// every member's kernel stops with a mismatch record.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn agreed_barrier(&self, stream: StreamHandle, team: i32, agree: Agreement) -> Result<()>;

    /// An fcollect of `nbytes` per member over team slot `team` as one kernel; `dest` and
    /// `source` are this PE's symmetric addresses; its first barrier checks `agree`.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn fcollect(
        &self,
        stream: StreamHandle,
        team: i32,
        dest: usize,
        source: usize,
        nbytes: usize,
        agree: Agreement,
    ) -> Result<()>;

    /// The largest fcollect per PE that [`Streams::fcollect_staged`] takes.
    fn staged_max_bytes(&self) -> usize;

    /// An fcollect over all PEs of up to [`Streams::staged_max_bytes`] per PE through the
    /// workspace at `agree.ws` (zeroed at init, used by nothing else), without barriers; the
    /// flags carry the agreement.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn fcollect_staged(
        &self,
        stream: StreamHandle,
        dest: usize,
        source: usize,
        nbytes: usize,
        agree: Agreement,
    ) -> Result<()>;

    /// `dest[i] = op over the members of team slot `team` of source[i]`, or with `scatter`
    /// `dest[i] = op over the members of source[me * nelems + i]` (a reduce-scatter: `source`
    /// holds one block of `nelems` per member); `op` takes `dtype`; the first barrier checks
    /// `agree`.
    ///
    /// # Safety
    /// See the trait.
    #[allow(clippy::too_many_arguments)]
    unsafe fn reduce(
        &self,
        stream: StreamHandle,
        team: i32,
        op: ReduceOp,
        dtype: DType,
        dest: usize,
        source: usize,
        nelems: usize,
        scatter: bool,
        agree: Agreement,
    ) -> Result<()>;

    /// Whether every barrier-using kernel queued so far for team slot `team` has finished (host
    /// barriers of the team wait for them).
    ///
    /// # Errors
    /// [`Error::Driver`].
    fn queued_done(&self, team: i32) -> Result<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_choice_order() {
        let never = || -> bool { panic!("the GPU probe runs only when nothing was asked") };
        assert_eq!(choose_with(Some(BackendKind::Host), Some("cuda"), never).unwrap(), BackendKind::Host);
        assert_eq!(choose_with(None, Some("cuda"), never).unwrap(), BackendKind::Cuda);
        assert_eq!(choose_with(None, Some("host"), never).unwrap(), BackendKind::Host);
        assert_eq!(choose_with(None, None, || false).unwrap(), BackendKind::Host);
        assert_eq!(choose_with(None, None, || true).unwrap(), BackendKind::Cuda);
        assert!(choose_with(None, Some("tpu"), never).unwrap_err().to_string().contains("`host`"));
    }
}
