//! What a backend with a device adds to the host API: errors kernels recorded before they
//! stopped, and publishing the device state into modules Triton loads. On a backend without a
//! device these do nothing.

use super::{kernel_error, Runtime};
use crate::device_state::DeviceState;
use crate::error::{Error, Result};
use std::time::Duration;

impl Runtime {
    /// Reports an error a kernel of this PE recorded before it stopped (`trap`): a wait past
    /// `RSHMEM_DEBUG_WAIT_TIMEOUT_MS` becomes [`Error::WaitTimeout`] naming the PE, the
    /// allocation and offset, the comparison and the expected and last seen values. Does nothing
    /// on the host backend. Called by `quiet`, `barrier*` and `finalize`; the record stays, so
    /// every later call reports it too (the CUDA context is unusable after a trap).
    ///
    /// # Errors
    /// The recorded error.
    pub fn check_device_error(&self) -> Result<()> {
        // The proxy's own error explains a kernel stopped on its failure (ERROR_FLAG_PROXY).
        if let Some(e) = self.net.as_ref().and_then(|n| n.proxy_error()) {
            return Err(e);
        }
        let Some(rec) = self.backend.device_error() else { return Ok(()) };
        // The wait timeout the kernels ran with (`RSHMEM_DEBUG_WAIT_TIMEOUT_MS` plus this PE's
        // stop delay on a shared GPU), for the message.
        let timeout = self
            .backend
            .device_state()
            .filter(|s| s.debug_wait_timeout_ns > 0)
            .map(|s| s.debug_wait_timeout_ns.saturating_add(u64::from(s.stop_delay_ms) * 1_000_000));
        let health = self.boot.health();
        Err(kernel_error::record_error(&rec, |a, wait| self.describe_wait_word(a, wait), timeout.map(Duration::from_nanos), |pe| {
            health.how_left(pe)
        }))
    }

    /// Posts `d` to this PE's proxy from a host thread, as a GPU thread posts it, and waits
    /// until the proxy has run it; returns the result of a fetching descriptor (else 0). For
    /// tests of the proxy without a GPU: the host backend with `RSHMEM_NET_PROXY=1`.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without a proxy, or on a backend whose ticket word is device
    /// memory; the proxy's error; [`Error::Timeout`] after the bootstrap timeout.
    ///
    /// # Safety
    /// The local buffer `d` names (the source of a put, the destination of a get) must be
    /// valid for its `nbytes` until this returns.
    #[doc(hidden)]
    #[allow(unsafe_code)]
    pub unsafe fn proxy_post(&self, d: crate::device_state::ProxyDesc) -> Result<u64> {
        let proxy = self.net.as_deref().filter(|n| n.proxy_ring().is_some());
        let proxy = proxy.ok_or_else(|| Error::Unsupported("this PE runs no proxy (no PE on another host, or RSHMEM_NET_PROXY=0)".into()))?;
        if self.backend.device().is_some() {
            return Err(Error::Unsupported("proxy_post is for the host backend: on cuda the ticket word is GPU memory".into()));
        }
        let head = self.remote(self.workspace + super::workspace::PROXY_HEAD, 8, self.my_pe())?;
        // SAFETY: `head` is this PE's mapped (host memory, 8-byte aligned) ticket word, which
        // lives as long as the runtime and is only used atomically.
        let head = unsafe { &*(head as *const std::sync::atomic::AtomicU64) };
        // SAFETY: the caller's promise about the buffers.
        unsafe { proxy.proxy_post(head, d, crate::env::env()?.bootstrap_timeout) }
    }

    /// `err`, or the device error that explains it: after a kernel traps, every driver call
    /// fails with a bare launch error, and the record says why.
    pub(super) fn prefer_device_error(&self, err: Error) -> Error {
        match (&err, self.check_device_error()) {
            (Error::Driver { .. }, Err(recorded)) => recorded,
            _ => err,
        }
    }

    /// Writes this PE's device state into a CUDA module (a `CUmodule` as an integer) that links
    /// the device library, and remembers it so a later init writes it again. Returns `false`,
    /// quietly, for a module without the state global, and always on the host backend.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a module built against another device-library version;
    /// [`Error::Driver`] (for instance a module of another device's context).
    ///
    /// # Safety
    /// `module` must be a live module loaded in this PE's device's primary context (what
    /// Triton's `kernel_load_end_hook` hands over), and stay loaded until
    /// the backend forgets it (the loader does that before unloading).
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/setup.html> (`nvshmemx_cumodule_init`)
    #[doc(alias = "nvshmemx_cumodule_init")]
    #[allow(unsafe_code)]
    pub unsafe fn publish_module(&self, module: usize) -> Result<bool> {
        // SAFETY: the caller's contract above is the backend's.
        unsafe { self.backend.publish_module(module) }
    }

    /// The device state published into modules (backends with a device only).
    pub fn device_state(&self) -> Option<&DeviceState> {
        self.backend.device_state()
    }
}
