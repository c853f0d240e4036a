//! The UCP context (`ucp_init`, `ucp_context_query`) and memory registrations (`ucp_mem_map`, `ucp_rkey_pack`).
//!
//! # Safety
//! Each call passes live out-parameters and a context this module created and keeps until its
//! [`Context`] drops; registrations hold an `Arc<Context>`, so the context outlives them.
#![allow(unsafe_code)]

use super::{check, sys, Ucx};
use crate::error::Result;
use std::ffi::c_void;
use std::sync::Arc;

/// A UCP context with the features rshmem uses: RMA, 32/64-bit atomics, active messages and
/// wake-up (the progress thread sleeps on the worker's event fd).
///
/// Owns the `ucp_context_h`; dropped (`ucp_cleanup`) after every worker and registration made
/// from it, which hold an `Arc` of it.
pub struct Context {
    pub(crate) ucx: &'static Ucx,
    pub(crate) raw: sys::ucp_context_h,
}

// SAFETY: a UCP context may be used from any thread; rshmem's workers are created in
// UCS_THREAD_MODE_MULTI and registrations are made under the heap's collective lock.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("ucx", &self.ucx.version).finish()
    }
}

impl Context {
    /// `ucp_config_read` (UCX_* variables) + `ucp_init_version`.
    ///
    /// # Errors
    /// [`crate::Error::Transport`] from either call.
    pub fn new(ucx: &'static Ucx, estimated_eps: usize) -> Result<Arc<Context>> {
        let mut config: *mut sys::ucp_config_t = std::ptr::null_mut();
        // SAFETY: NULL prefix and file mean "UCX_ variables, default file"; `config` is a live
        // out-parameter (ucp_config_read).
        check(ucx, "ucp_config_read", unsafe { (ucx.api.ucp_config_read)(std::ptr::null(), std::ptr::null(), &mut config) })?;
        let params = sys::ucp_params_t {
            field_mask: sys::UCP_PARAM_FIELD_FEATURES | sys::UCP_PARAM_FIELD_MT_WORKERS_SHARED | sys::UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
            features: sys::UCP_FEATURE_RMA
                | sys::UCP_FEATURE_AMO32
                | sys::UCP_FEATURE_AMO64
                | sys::UCP_FEATURE_AM
                | sys::UCP_FEATURE_WAKEUP,
            request_size: 0,
            request_init: std::ptr::null_mut(),
            request_cleanup: std::ptr::null_mut(),
            tag_sender_mask: 0,
            mt_workers_shared: 1,
            estimated_num_eps: estimated_eps,
            _tail: [0; 3],
        };
        let mut raw: sys::ucp_context_h = std::ptr::null_mut();
        // SAFETY: `params` and `config` are valid for the call; ucp_init_version copies what it
        // needs. The API version passed is the one the layouts in `sys` follow.
        let status = unsafe {
            (ucx.api.ucp_init_version)(super::MIN_VERSION.0, super::MIN_VERSION.1, &params, config, &mut raw)
        };
        // SAFETY: `config` came from ucp_config_read and is released once (ucp_config_release).
        unsafe { (ucx.api.ucp_config_release)(config) };
        check(ucx, "ucp_init", status)?;
        Ok(Arc::new(Context { ucx, raw }))
    }

    /// The memory types this context moves (`ucp_context_query`), as `1 << ucs_memory_type_t`
    /// bits: CUDA memory is among them only when UCX was built with CUDA and found a GPU.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn memory_types(&self) -> Result<u64> {
        let mut attr = sys::ucp_context_attr_t {
            field_mask: sys::UCP_ATTR_FIELD_MEMORY_TYPES,
            request_size: 0,
            thread_mode: 0,
            memory_types: 0,
            _tail: [0; 8],
        };
        // SAFETY: live context; `attr` is a live out-parameter at least as large as UCX's struct.
        check(self.ucx, "ucp_context_query", unsafe { (self.ucx.api.ucp_context_query)(self.raw, &mut attr) })?;
        Ok(attr.memory_types)
    }

    /// Whether this context moves CUDA memory (a CUDA-aware UCX).
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn cuda_aware(&self) -> Result<bool> {
        Ok(self.memory_types()? & (1 << sys::UCS_MEMORY_TYPE_CUDA) != 0)
    }

    /// Registers `[addr, addr+len)`, memory of type `kind`, for remote access (`ucp_mem_map`
    /// without allocation). The type is given, not detected: UCX detects it through its memory
    /// type cache, which learns of GPU mappings by hooking `cuMemMap` — calls made through
    /// function pointers resolved before UCX was loaded (rshmem's driver table) escape it, and
    /// the heap would be registered as host memory (peers' puts and UCX's software atomics then
    /// write GPU addresses with the CPU: a SIGSEGV).
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// The range must stay mapped while the returned handle lives.
    pub unsafe fn map(self: &Arc<Self>, addr: usize, len: usize, kind: super::MemType) -> Result<MemHandle> {
        let params = sys::ucp_mem_map_params_t {
            field_mask: sys::UCP_MEM_MAP_PARAM_FIELD_ADDRESS
                | sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH
                | sys::UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
            address: addr as *mut c_void,
            length: len,
            flags: 0,
            prot: 0,
            memory_type: kind.raw(),
            _tail: [0; 3],
        };
        let mut memh: sys::ucp_mem_h = std::ptr::null_mut();
        // SAFETY: live context and out-parameter; the caller keeps the range mapped.
        check(self.ucx, "ucp_mem_map", unsafe { (self.ucx.api.ucp_mem_map)(self.raw, &params, &mut memh) })?;
        Ok(MemHandle { ctx: self.clone(), raw: memh, addr, len })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context is live and nothing made from it remains (they hold Arcs).
        unsafe { (self.ucx.api.ucp_cleanup)(self.raw) };
    }
}

/// A registered range (`ucp_mem_h`). Owns the registration; dropping it unmaps it
/// (`ucp_mem_unmap`), before its [`Context`].
pub struct MemHandle {
    ctx: Arc<Context>,
    raw: sys::ucp_mem_h,
    /// Start of the range.
    pub addr: usize,
    /// Its length.
    pub len: usize,
}

// SAFETY: a memory handle is plain data for UCP, usable from any thread of a MULTI context.
unsafe impl Send for MemHandle {}
// SAFETY: as above.
unsafe impl Sync for MemHandle {}

impl MemHandle {
    /// The remote key peers need to reach this range (`ucp_rkey_pack`), as bytes.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn pack_rkey(&self) -> Result<Vec<u8>> {
        let ucx = self.ctx.ucx;
        let mut buf: *mut c_void = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live context and handle; out-parameters are live locals.
        check(ucx, "ucp_rkey_pack", unsafe { (ucx.api.ucp_rkey_pack)(self.ctx.raw, self.raw, &mut buf, &mut len) })?;
        // SAFETY: UCX returned `len` readable bytes at `buf`, valid until released below.
        let bytes = unsafe { std::slice::from_raw_parts(buf as *const u8, len) }.to_vec();
        // SAFETY: `buf` came from ucp_rkey_pack and is released once.
        unsafe { (ucx.api.ucp_rkey_buffer_release)(buf) };
        Ok(bytes)
    }
}

impl Drop for MemHandle {
    fn drop(&mut self) {
        // SAFETY: live context and handle, unmapped once.
        let status = unsafe { (self.ctx.ucx.api.ucp_mem_unmap)(self.ctx.raw, self.raw) };
        if status != sys::UCS_OK {
            tracing::warn!(status, addr = self.addr, len = self.len, "ucp_mem_unmap failed");
        }
    }
}
