//! The seam itself: the traits a backend implements ([`Backend`], [`Streams`]) and what a thread
//! runs first to touch its memory ([`ThreadSetup`]). The runtime names only these; the backends
//! (`host/`, `cuda/`) implement them.

use super::kind::BackendKind;
use super::launch::{Agreement, Launch};
use super::memory::MemoryBackend;
use super::transport::{HostRing, RingMemory};
use crate::consts::{Cmp, SignalOp};
use crate::device_state::{DeviceState, ErrorRecord};
use crate::driver::stream::StreamHandle;
// Only the docs name `Error` (their links).
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use std::sync::Arc;

/// What a thread the runtime starts runs first so that it may touch the backend's memory through
/// UCX (cuda: make the PE's context current, for UCX's copies of GPU memory).
pub type ThreadSetup = Arc<dyn Fn() -> Result<()> + Send + Sync>;

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

    /// This PE's index, in PE order, among the PEs of [`Backend::device_sharers`] (0 when the
    /// GPU is its own or there is none).
    fn device_sharer_index(&self) -> usize {
        0
    }

    /// Whether this PE's device reaches world PE `pe`'s memory by load/store once the heap maps
    /// it (false for PEs on other hosts, or GPUs without peer access).
    fn load_store(&self, pe: usize) -> bool {
        let _ = pe;
        true
    }

    /// Bytes of symmetric workspace the backend's stream kernels need for `n_pes` PEs (the
    /// runtime allocates it at init, zeroed, and lays it out as [`super::launch::workspace`] says).
    fn stream_workspace_bytes(&self, n_pes: usize) -> usize {
        let _ = n_pes;
        0
    }

    /// What the transport's and the proxy's threads run first (see [`ThreadSetup`]); `None`
    /// where threads need nothing.
    fn thread_setup(&self) -> Option<ThreadSetup> {
        None
    }

    /// Zeroed memory for the ring of the transport's proxy, which this backend's kernels write:
    /// page-locked host memory on cuda, ordinary memory without a device.
    ///
    /// # Errors
    /// [`Error::Driver`].
    fn ring_memory(&self) -> Result<Box<dyn RingMemory>> {
        Ok(Box::new(HostRing::new()))
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

    /// Once started on a device: what writes a peer's departure where this PE's kernels' waits
    /// look (`DeviceState::peer_left`); the runtime hands it to [`crate::bootstrap::Health`].
    fn peer_left_notifier(&self) -> Option<crate::bootstrap::DepartureNotifier> {
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

    /// Runs `launch` on `stream`, after checking its parameters against the types its kernel
    /// declares.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for parameters the kernel does not declare; [`Error::Driver`].
    ///
    /// # Safety
    /// See the trait; besides, every address among the parameters stays valid for what the
    /// kernel does with it (`runtime_kernels.cu`) until the stream has run it.
    unsafe fn launch(&self, stream: StreamHandle, launch: &Launch) -> Result<()>;

    /// Whether every barrier-using kernel queued so far for team slot `team` has finished (host
    /// barriers of the team wait for them).
    ///
    /// # Errors
    /// [`Error::Driver`].
    fn queued_done(&self, team: i32) -> Result<bool>;
}
