//! The UCP worker (`ucp_worker_*`): address, progress, wake-up, flush, active-message handlers;
//! and [`Request`], an operation UCX has not finished yet.
//!
//! # Safety
//! Every call passes the worker this module created (alive until [`Worker`] drops, after every
//! endpoint, which holds an `Arc` of it) and live out-parameters. Requests are polled with
//! `ucp_request_check_status` and released once with `ucp_request_free`.
#![allow(unsafe_code)]

use super::{check, error, status_ptr, sys, Context, StatusPtr, Ucx};
use crate::error::Result;
use std::ffi::c_void;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A UCP worker in `UCS_THREAD_MODE_MULTI`: the progress thread and the threads making calls
/// use it at once.
///
/// Owns the `ucp_worker_h`; destroyed after its endpoints (they hold an `Arc`), before its
/// [`Context`].
pub struct Worker {
    pub(crate) ctx: Arc<Context>,
    pub(crate) raw: sys::ucp_worker_h,
    /// When [`Worker::progress`] last ran, in nanoseconds since `born` (see [`Worker::polled_within`]).
    polled_at: AtomicU64,
    /// A thread is inside `ucp_worker_progress` (see [`Worker::background_progress`]).
    progressing: AtomicBool,
    born: Instant,
}

// SAFETY: the worker is created in UCS_THREAD_MODE_MULTI, in which UCP serializes concurrent
// calls on it internally (ucp.h, ucs_thread_mode_t).
unsafe impl Send for Worker {}
// SAFETY: as above.
unsafe impl Sync for Worker {}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

/// How often a waiting call asks its caller whether to give up.
const ABORT_CHECK_EVERY: Duration = Duration::from_millis(1);

impl Worker {
    /// `ucp_worker_create` in `UCS_THREAD_MODE_MULTI`.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Worker>> {
        let params = sys::ucp_worker_params_t {
            field_mask: sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE,
            thread_mode: sys::UCS_THREAD_MODE_MULTI,
            cpu_mask: sys::ucs_cpu_set_t { bits: [0; 16] },
            _tail: [0; 7],
        };
        let mut raw: sys::ucp_worker_h = std::ptr::null_mut();
        let ucx = ctx.ucx;
        // SAFETY: live context, params and out-parameter.
        check(ucx, "ucp_worker_create", unsafe { (ucx.api.ucp_worker_create)(ctx.raw, &params, &mut raw) })?;
        Ok(Arc::new(Worker { ctx: ctx.clone(), raw, polled_at: AtomicU64::new(0), progressing: AtomicBool::new(false), born: Instant::now() }))
    }

    /// The context the worker was made from.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    pub(crate) fn ucx(&self) -> &'static Ucx {
        self.ctx.ucx
    }

    /// This worker's address (`ucp_worker_get_address`): what a peer needs to connect.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn address(&self) -> Result<Vec<u8>> {
        let ucx = self.ucx();
        let mut addr: *mut sys::ucp_address_t = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live worker, out-parameters are live locals.
        check(ucx, "ucp_worker_get_address", unsafe { (ucx.api.ucp_worker_get_address)(self.raw, &mut addr, &mut len) })?;
        // SAFETY: UCX returned `len` readable bytes, valid until released below.
        let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec();
        // SAFETY: released once, with the worker that made it.
        unsafe { (ucx.api.ucp_worker_release_address)(self.raw, addr) };
        Ok(bytes)
    }

    /// One round of progress (`ucp_worker_progress`) by a thread that waits for something;
    /// the number of events it handled.
    pub fn progress(&self) -> u32 {
        self.polled_at.store(self.born.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.background_progress()
    }

    /// [`Worker::progress`] by the thread that progresses in the background: not counted by
    /// [`Worker::polled_within`].
    ///
    /// Returns 0 at once while another thread is inside `ucp_worker_progress`: that thread runs
    /// whatever there is to run (any request completes whichever thread progresses), and UCX's
    /// worker lock is a spin lock, so a second caller would only spin on it. A receiver's
    /// waiting thread did so for half of its time while the progress thread took in a stream of
    /// puts, on cores the sender needed.
    pub fn background_progress(&self) -> u32 {
        if self.progressing.swap(true, Ordering::Acquire) {
            return 0;
        }
        // SAFETY: live worker (MULTI mode: any thread).
        let events = unsafe { (self.ucx().api.ucp_worker_progress)(self.raw) };
        self.progressing.store(false, Ordering::Release);
        events
    }

    /// Whether a waiting thread ran [`Worker::progress`] within `window`: one is polling, so
    /// what peers send is being run without the background thread.
    pub fn polled_within(&self, window: Duration) -> bool {
        let now = self.born.elapsed().as_nanos() as u64;
        now.saturating_sub(self.polled_at.load(Ordering::Relaxed)) < window.as_nanos() as u64
    }

    /// The event fd that becomes readable when the worker has something to do
    /// (`ucp_worker_get_efd`); valid while the worker lives.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn event_fd(&self) -> Result<RawFd> {
        let mut fd: RawFd = -1;
        // SAFETY: live worker and out-parameter.
        check(self.ucx(), "ucp_worker_get_efd", unsafe { (self.ucx().api.ucp_worker_get_efd)(self.raw, &mut fd) })?;
        Ok(fd)
    }

    /// `ucp_worker_arm`: `Ok(true)` when armed (sleep on the event fd now), `Ok(false)` when
    /// events are pending (progress first).
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn arm(&self) -> Result<bool> {
        // SAFETY: live worker.
        match unsafe { (self.ucx().api.ucp_worker_arm)(self.raw) } {
            sys::UCS_OK => Ok(true),
            sys::UCS_ERR_BUSY => Ok(false),
            other => Err(error(self.ucx(), "ucp_worker_arm", other, None)),
        }
    }

    /// Wakes a thread sleeping on the event fd (`ucp_worker_signal`).
    pub fn signal(&self) {
        // SAFETY: live worker; the call is thread safe by contract.
        let _ = unsafe { (self.ucx().api.ucp_worker_signal)(self.raw) };
    }

    /// Installs `cb(arg, ...)` as the handler of active-message `id` (`ucp_worker_set_am_recv_handler`).
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    ///
    /// # Safety
    /// `arg` must stay valid, and `cb` safe to call with it from any thread that progresses the
    /// worker, until the worker is destroyed or the handler replaced.
    pub unsafe fn set_am_handler(&self, id: u32, cb: sys::ucp_am_recv_callback_t, arg: *mut c_void) -> Result<()> {
        let params = sys::ucp_am_handler_param_t {
            field_mask: sys::UCP_AM_HANDLER_PARAM_FIELD_ID
                | sys::UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                | sys::UCP_AM_HANDLER_PARAM_FIELD_CB
                | sys::UCP_AM_HANDLER_PARAM_FIELD_ARG,
            id,
            flags: sys::UCP_AM_FLAG_WHOLE_MSG,
            cb: Some(cb),
            arg,
        };
        // SAFETY: live worker and params; the caller vouches for `cb` and `arg`.
        check(self.ucx(), "ucp_worker_set_am_recv_handler", unsafe {
            (self.ucx().api.ucp_worker_set_am_recv_handler)(self.raw, &params)
        })
    }

    /// Starts a flush of every endpoint (`ucp_worker_flush_nbx`): when it completes, every
    /// operation issued before it is complete at its target.
    ///
    /// # Errors
    /// [`crate::Error::Transport`].
    pub fn flush(self: &Arc<Self>) -> Result<Request> {
        let param = sys::ucp_request_param_t::empty();
        // SAFETY: live worker and params.
        let p = unsafe { (self.ucx().api.ucp_worker_flush_nbx)(self.raw, &param) };
        Request::from_status_ptr(self, "ucp_worker_flush_nbx", p, None)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: live worker; its endpoints are gone (they hold an Arc of it).
        unsafe { (self.ucx().api.ucp_worker_destroy)(self.raw) };
    }
}

/// An operation UCX may not have finished: done at once, or a request to progress until done.
/// Dropping an unfinished request lets UCX release it when it completes (`ucp_request_free`).
pub struct Request {
    worker: Arc<Worker>,
    call: &'static str,
    pe: Option<usize>,
    raw: *mut c_void,
}

// SAFETY: a request of a MULTI worker may be tested and freed from any thread (UCP serializes
// calls on the worker); the handle is used by one owner at a time (`&mut self`).
unsafe impl Send for Request {}

impl Request {
    /// From what a `*_nbx` call returned.
    ///
    /// # Errors
    /// [`crate::Error::Transport`] when the call failed at once.
    pub(crate) fn from_status_ptr(
        worker: &Arc<Worker>,
        call: &'static str,
        p: sys::ucs_status_ptr_t,
        pe: Option<usize>,
    ) -> Result<Request> {
        match status_ptr(p) {
            StatusPtr::Done => Ok(Request { worker: worker.clone(), call, pe, raw: std::ptr::null_mut() }),
            StatusPtr::Failed(s) => Err(error(worker.ucx(), call, s, pe)),
            StatusPtr::Pending(raw) => Ok(Request { worker: worker.clone(), call, pe, raw }),
        }
    }

    /// Whether it is finished: `Ok(true)` done, `Ok(false)` still running.
    ///
    /// # Errors
    /// [`crate::Error::Transport`] when it finished with an error.
    pub fn test(&mut self) -> Result<bool> {
        if self.raw.is_null() {
            return Ok(true);
        }
        let ucx = self.worker.ucx();
        // SAFETY: a live request of this worker, not freed yet.
        let status = unsafe { (ucx.api.ucp_request_check_status)(self.raw) };
        if status == sys::UCS_INPROGRESS {
            return Ok(false);
        }
        // SAFETY: completed; released once, then forgotten.
        unsafe { (ucx.api.ucp_request_free)(self.raw) };
        self.raw = std::ptr::null_mut();
        if status == sys::UCS_OK {
            Ok(true)
        } else {
            Err(error(ucx, self.call, status, self.pe))
        }
    }

    /// Progresses the worker until the request is done. About every millisecond `abort` says
    /// whether to give up (a peer died, a deadline passed): its error is returned and the
    /// request left to UCX.
    ///
    /// # Errors
    /// [`crate::Error::Transport`] when the operation failed; what `abort` returns.
    pub fn wait(mut self, abort: &dyn Fn() -> Result<()>) -> Result<()> {
        let mut last = Instant::now();
        let mut spins = 0u32;
        loop {
            if self.test()? {
                return Ok(());
            }
            if self.worker.progress() == 0 {
                spins += 1;
                if spins > 64 {
                    // Others (the peer on a shared core, the progress thread) need the CPU.
                    std::thread::yield_now();
                }
            }
            if last.elapsed() >= ABORT_CHECK_EVERY {
                abort()?;
                last = Instant::now();
            }
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: a live request; ucp_request_free on an unfinished request releases it
            // when it completes (ucp.h, ucp_request_free).
            unsafe { (self.worker.ucx().api.ucp_request_free)(self.raw) };
        }
    }
}
