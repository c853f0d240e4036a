//! Endpoints (`ucp_ep_*`), remote keys (`ucp_ep_rkey_unpack`) and the one-sided operations:
//! `ucp_put_nbx`, `ucp_get_nbx`, `ucp_atomic_op_nbx`, `ucp_am_send_nbx`.
//!
//! # Safety
//! Endpoints and remote keys are created from a live worker and released once, before it (each
//! holds an `Arc<Worker>`). Every operation takes the caller's buffers as raw addresses under
//! the contract its `# Safety` section states: they must stay valid until the returned
//! [`Request`] completes.
#![allow(unsafe_code)]

use super::{check, sys, MemType, Request, Worker};
use crate::error::Result;
use std::ffi::c_void;
use std::sync::Arc;

/// A connection to one peer's worker, with peer error handling: a broken connection calls the
/// error handler and fails the endpoint's requests instead of hanging them.
///
/// Owns the `ucp_ep_h`; dropping it closes it (forced: outstanding operations are cancelled),
/// before its [`Worker`].
pub struct Endpoint {
    worker: Arc<Worker>,
    raw: sys::ucp_ep_h,
    /// The peer's PE number (for messages).
    pub pe: usize,
}

// SAFETY: endpoints of a MULTI worker may be used from any thread (UCP serializes).
unsafe impl Send for Endpoint {}
// SAFETY: as above.
unsafe impl Sync for Endpoint {}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("pe", &self.pe).finish()
    }
}

/// The atomic operations of `ucp_atomic_op_nbx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// Fetch and add.
    Add,
    /// Swap.
    Swap,
    /// Compare and swap: the operand is the expected value, the reply word holds the new value
    /// on entry (ucp.h's table of atomic operations).
    CompareSwap,
    /// Fetch and `&`.
    And,
    /// Fetch and `|`.
    Or,
    /// Fetch and `^`.
    Xor,
}

impl AtomicOp {
    fn raw(self) -> std::ffi::c_int {
        match self {
            AtomicOp::Add => sys::UCP_ATOMIC_OP_ADD,
            AtomicOp::Swap => sys::UCP_ATOMIC_OP_SWAP,
            AtomicOp::CompareSwap => sys::UCP_ATOMIC_OP_CSWAP,
            AtomicOp::And => sys::UCP_ATOMIC_OP_AND,
            AtomicOp::Or => sys::UCP_ATOMIC_OP_OR,
            AtomicOp::Xor => sys::UCP_ATOMIC_OP_XOR,
        }
    }
}

impl Endpoint {
    /// `ucp_ep_create` to the worker at `address` (from that peer's [`Worker::address`]), with
    /// `on_error(arg, ep, status)` as its error handler.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// `arg` must stay valid, and `on_error` safe to call with it from any thread progressing
    /// the worker, while the endpoint lives.
    pub unsafe fn connect(
        worker: &Arc<Worker>,
        pe: usize,
        address: &[u8],
        on_error: sys::ucp_err_handler_cb_t,
        arg: *mut c_void,
    ) -> Result<Endpoint> {
        let params = sys::ucp_ep_params_t {
            // No UCP_ERR_HANDLING_MODE_PEER: with it UCX 1.22 finds no protocol for software
            // atomics (TCP, shared memory), so every fetching atomic fails with "Request
            // canceled". The error handler alone is still called when a connection breaks.
            field_mask: sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER,
            address: address.as_ptr() as *const c_void,
            err_mode: 0,
            err_handler: sys::ucp_err_handler_t { cb: Some(on_error), arg },
            _tail: [0; 8],
        };
        let mut raw: sys::ucp_ep_h = std::ptr::null_mut();
        let ucx = worker.ucx();
        // SAFETY: live worker, params (the address bytes live for the call; UCX copies what it
        // keeps) and out-parameter; the caller vouches for the handler.
        check(ucx, "ucp_ep_create", unsafe { (ucx.api.ucp_ep_create)(worker.raw, &params, &mut raw) })
            .map_err(|e| with_pe(e, pe))?;
        Ok(Endpoint { worker: worker.clone(), raw, pe })
    }

    /// Unpacks a remote key a peer packed with [`super::MemHandle::pack_rkey`].
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn unpack_rkey(&self, packed: &[u8]) -> Result<Rkey> {
        let ucx = self.worker.ucx();
        let mut raw: sys::ucp_rkey_h = std::ptr::null_mut();
        // SAFETY: live endpoint; `packed` is readable for the call; UCX copies it.
        check(ucx, "ucp_ep_rkey_unpack", unsafe { (ucx.api.ucp_ep_rkey_unpack)(self.raw, packed.as_ptr() as *const c_void, &mut raw) })
            .map_err(|e| with_pe(e, self.pe))?;
        Ok(Rkey { worker: self.worker.clone(), raw })
    }

    /// `ucp_put_nbx`: `len` bytes from local `src` (memory of type `kind`) to `remote`
    /// (covered by `rkey`). The request completes when `src` may be reused (not when the data
    /// has arrived: flush for that).
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes until the request completes.
    pub unsafe fn put(&self, src: usize, kind: MemType, len: usize, remote: u64, rkey: &Rkey) -> Result<Request> {
        let param = typed(kind);
        // SAFETY: live endpoint and rkey; the caller vouches for `src`.
        let p = unsafe { (self.worker.ucx().api.ucp_put_nbx)(self.raw, src as *const c_void, len, remote, rkey.raw, &param) };
        Request::from_status_ptr(&self.worker, "ucp_put_nbx", p, Some(self.pe))
    }

    /// `ucp_get_nbx`: `len` bytes from `remote` into local `dst` (memory of type `kind`);
    /// complete when they are there.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// `dst` must be writable for `len` bytes, and not otherwise accessed, until the request
    /// completes.
    pub unsafe fn get(&self, dst: usize, kind: MemType, len: usize, remote: u64, rkey: &Rkey) -> Result<Request> {
        let param = typed(kind);
        // SAFETY: live endpoint and rkey; the caller vouches for `dst`.
        let p = unsafe { (self.worker.ucx().api.ucp_get_nbx)(self.raw, dst as *mut c_void, len, remote, rkey.raw, &param) };
        Request::from_status_ptr(&self.worker, "ucp_get_nbx", p, Some(self.pe))
    }

    /// `ucp_atomic_op_nbx` on the `width`-byte (4 or 8) word at `remote`, with `*operand` as
    /// the operand; the old value lands in `*reply` (which holds the new value on entry for
    /// [`AtomicOp::CompareSwap`], whose operand is the expected value).
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// `operand` and `reply` must point at `width` valid bytes until the request completes.
    pub unsafe fn atomic(
        &self,
        op: AtomicOp,
        operand: *const c_void,
        reply: *mut c_void,
        width: usize,
        remote: u64,
        rkey: &Rkey,
    ) -> Result<Request> {
        let mut param = sys::ucp_request_param_t::empty();
        param.op_attr_mask = sys::UCP_OP_ATTR_FIELD_DATATYPE | sys::UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        param.datatype = sys::dt_contig(width as u64);
        param.reply_buffer = reply;
        // SAFETY: live endpoint and rkey; the caller vouches for both buffers.
        let p = unsafe { (self.worker.ucx().api.ucp_atomic_op_nbx)(self.raw, op.raw(), operand, 1, remote, rkey.raw, &param) };
        Request::from_status_ptr(&self.worker, "ucp_atomic_op_nbx", p, Some(self.pe))
    }

    /// `ucp_atomic_op_nbx` without a result (a post): `op` with `*operand` on the `width`-byte
    /// word at `remote`; complete at the target after a flush.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// `operand` must point at `width` valid bytes until the request completes.
    pub unsafe fn atomic_post(&self, op: AtomicOp, operand: *const c_void, width: usize, remote: u64, rkey: &Rkey) -> Result<Request> {
        let mut param = sys::ucp_request_param_t::empty();
        param.op_attr_mask = sys::UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = sys::dt_contig(width as u64);
        // SAFETY: live endpoint and rkey; the caller vouches for the operand.
        let p = unsafe { (self.worker.ucx().api.ucp_atomic_op_nbx)(self.raw, op.raw(), operand, 1, remote, rkey.raw, &param) };
        Request::from_status_ptr(&self.worker, "ucp_atomic_op_nbx", p, Some(self.pe))
    }

    /// `ucp_am_send_nbx` of active message `id` with `header` and `data`, eager (the receiver's
    /// handler gets the whole message at once). The header is copied at once.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// `data` must stay readable until the request completes.
    pub unsafe fn am_send(&self, id: u32, header: &[u8], data: &[u8]) -> Result<Request> {
        let mut param = sys::ucp_request_param_t::empty();
        param.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = sys::UCP_AM_SEND_FLAG_EAGER | sys::UCP_AM_SEND_FLAG_COPY_HEADER;
        // SAFETY: live endpoint; the header is copied (COPY_HEADER); the caller vouches for
        // `data`.
        let p = unsafe {
            (self.worker.ucx().api.ucp_am_send_nbx)(
                self.raw,
                id,
                header.as_ptr() as *const c_void,
                header.len(),
                data.as_ptr() as *const c_void,
                data.len(),
                &param,
            )
        };
        Request::from_status_ptr(&self.worker, "ucp_am_send_nbx", p, Some(self.pe))
    }

    /// `ucp_ep_flush_nbx`: completes when every operation issued on this endpoint before it is
    /// complete at the peer.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn flush(&self) -> Result<Request> {
        let param = sys::ucp_request_param_t::empty();
        // SAFETY: live endpoint.
        let p = unsafe { (self.worker.ucx().api.ucp_ep_flush_nbx)(self.raw, &param) };
        Request::from_status_ptr(&self.worker, "ucp_ep_flush_nbx", p, Some(self.pe))
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let mut param = sys::ucp_request_param_t::empty();
        param.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = sys::UCP_EP_CLOSE_FLAG_FORCE;
        // SAFETY: live endpoint, closed once.
        let p = unsafe { (self.worker.ucx().api.ucp_ep_close_nbx)(self.raw, &param) };
        // A forced close does not wait for the peer; bound the wait anyway, Drop must not hang.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        match Request::from_status_ptr(&self.worker, "ucp_ep_close_nbx", p, Some(self.pe)) {
            Ok(req) => {
                let r = req.wait(&|| {
                    if std::time::Instant::now() > deadline {
                        Err(crate::Error::Timeout { what: "closing a UCX endpoint".into(), after: std::time::Duration::from_secs(2) })
                    } else {
                        Ok(())
                    }
                });
                if let Err(e) = r {
                    tracing::debug!(pe = self.pe, error = %e, "closing the UCX endpoint");
                }
            }
            Err(e) => tracing::debug!(pe = self.pe, error = %e, "closing the UCX endpoint"),
        }
    }
}

/// A peer's remote key, unpacked on the endpoint to it. Owns the `ucp_rkey_h`; destroyed once,
/// before the worker.
pub struct Rkey {
    worker: Arc<Worker>,
    raw: sys::ucp_rkey_h,
}

// SAFETY: an unpacked rkey is read-only data for UCP, used under the MULTI worker's lock.
unsafe impl Send for Rkey {}
// SAFETY: as above.
unsafe impl Sync for Rkey {}

impl Drop for Rkey {
    fn drop(&mut self) {
        // SAFETY: live rkey, destroyed once.
        unsafe { (self.worker.ucx().api.ucp_rkey_destroy)(self.raw) };
    }
}

/// Request parameters naming the local buffer's memory type.
fn typed(kind: MemType) -> sys::ucp_request_param_t {
    let mut param = sys::ucp_request_param_t::empty();
    param.op_attr_mask = sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = kind.raw();
    param
}

fn with_pe(e: crate::Error, pe: usize) -> crate::Error {
    match e {
        crate::Error::Transport { call, status, name, .. } => crate::Error::Transport { call, status, name, pe: Some(pe) },
        other => other,
    }
}
