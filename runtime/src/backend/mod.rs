//! Backends: the one seam between the runtime and what it runs on.
//!
//! A [`Backend`] owns everything that differs between running on host memory and on GPUs: the
//! memory the symmetric heap is made of ([`MemoryBackend`]), how on-stream work is queued
//! ([`Streams`]: copies, signals, waits and the runtime's kernels), the device state published
//! into modules that link the device library, and the errors kernels record. PEs on other
//! hosts are reached through a [`Transport`]. The runtime holds one `Box<dyn Backend>` (and,
//! when the job spans hosts, one `Box<dyn Transport>`) and never names an implementation:
//! [`open`] is the one place that names a backend, so a new backend is a new folder here plus
//! one line there; `crate::transport::open` opens the transport.
//!
//! | file or folder | what |
//! |---|---|
//! | [`host`] | memfd chunks in host memory; no streams (on-stream calls run as their host forms), no device state |
//! | [`cuda`] | GPU memory through the driver's VMM API, GPU selection, the runtime's kernels, streams, the device state and its publication, kernel error records |
//! | `seam.rs` | the traits a backend implements: [`Backend`], [`Streams`]; [`ThreadSetup`] |
//! | `kind.rs` | [`BackendKind`]: which backend, by name |
//! | [`memory`] | the traits the heap uses: reservations, chunks, mappings, copies and atomics |
//! | [`launch`] | launches of the runtime's collective kernels, as the runtime writes them, and the stream workspace they share |
//! | [`transport`] | the trait PEs on other hosts are reached through, and the memory of the proxy's ring |

pub mod cuda;
pub mod host;
mod kind;
pub mod launch;
pub mod memory;
mod seam;
pub mod transport;

pub use kind::BackendKind;
pub use launch::{Agreement, Kernel, Launch, Param};
pub use memory::{AmoOp, Chunk, Mapping, MemoryBackend, Reservation, Width};
pub use seam::{Backend, Streams, ThreadSetup};
pub use transport::{HostRing, RingMemory, Transport, RING_BYTES};

use crate::bootstrap::Bootstrap;
use crate::env::Env;
// Only the docs name `Error` (their links).
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;

// The probe names a backend, so `choose` lives here, beside `open`, not with the type.
impl BackendKind {
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
