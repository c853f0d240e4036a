//! The executor thread: runs the work peers' active messages left for this PE's runtime
//! (`am::Job`: atomics, and puts-with-signal into a GPU heap), then replies.
//!
//! The work is the host API's own on this PE's heap: [`MemoryBackend::atomic`] (on the cuda
//! backend a one-thread kernel on a private stream, waited for) and [`MemoryBackend::copy`].
//! It runs here, not in UCX's callback, because it waits for the GPU, and a callback holds the
//! worker: the proxy and every other thread using the transport would wait with it.
//!
//! Jobs run one at a time in arrival order, so two operations a peer sent to this PE land in
//! the order it sent them (its put-with-signal before its next atomic). A job that fails is
//! logged here and answered with a failure, which the origin reports as [`Error::Transport`].
//!
//! # Safety
//! Offsets in jobs were checked by the handler against the mapped heap (`am.rs`), which stays
//! mapped while the transport lives; atomic words were checked for alignment there too.
#![allow(unsafe_code)]

use super::am::{self, Job};
use super::state::Inner;
use crate::backend::{AmoOp, Width};
use crate::consts::SignalOp;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The longest sleep between looks at the stop flag (a queued job wakes the thread sooner).
const SLEEP: Duration = Duration::from_millis(100);

/// Starts the thread.
///
/// # Errors
/// [`Error::Os`] when the thread cannot be spawned.
pub(super) fn start(inner: Arc<Inner>) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("rshmem-exec-{}", inner.me))
        .spawn(move || run(&inner))
        .map_err(|e| Error::os("spawning the transport's executor thread", e))
}

fn run(inner: &Inner) {
    inner.enter_thread("executor");
    let target = &inner.target;
    loop {
        let job = {
            let mut jobs = target.jobs.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if inner.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Some(job) = jobs.pop_front() {
                    break job;
                }
                jobs = target.job_ready.wait_timeout(jobs, SLEEP).unwrap_or_else(|e| e.into_inner()).0;
            }
        };
        let (from, header) = match job {
            Job::Amo { from, id, offset, width, op } => {
                let result = logged(atomic(inner, offset, width, op), from, "an atomic");
                let what = if id == 0 { am::REPLY_ACK } else { am::REPLY_AMO };
                (from, am::reply(inner.me, &inner.secret, id, what, result))
            }
            Job::PutSignal { from, id, dest, sig, value, op, data } => {
                let result = put_signal(inner, dest, &data, sig, value, op).map(|()| 0);
                (from, am::reply(inner.me, &inner.secret, id, am::REPLY_ACK, logged(result, from, "a put-with-signal")))
            }
        };
        if let Err(e) = reply(inner, from, &header) {
            tracing::warn!(pe = from, error = %e, "the transport cannot answer a peer's operation");
        }
    }
}

fn logged(result: Result<u64>, from: usize, what: &str) -> am::Answer {
    result.map_err(|e| tracing::warn!(pe = from, error = %e, "cannot run {what} PE {from} sent to this PE's heap"))
}

fn atomic(inner: &Inner, offset: usize, width: Width, op: AmoOp) -> Result<u64> {
    // SAFETY: a mapped, aligned heap word (module docs).
    unsafe { inner.mem.atomic(inner.target.base + offset, width, op) }
}

fn put_signal(inner: &Inner, dest: usize, data: &[u8], sig: usize, value: u64, op: SignalOp) -> Result<()> {
    // SAFETY: `[dest, dest + len)` lies in the mapped heap (module docs); `data` is this
    // thread's own buffer, so the two cannot overlap.
    unsafe { inner.mem.copy(inner.target.base + dest, data.as_ptr() as usize, data.len())? };
    let amo = match op {
        SignalOp::Set => AmoOp::Set(value),
        SignalOp::Add => AmoOp::Add(value),
    };
    // The copy above has completed (the backend's copies wait for themselves), so whoever
    // sees the signal sees the data.
    atomic(inner, sig, Width::W64, amo).map(drop)
}

fn reply(inner: &Inner, to: usize, header: &[u8]) -> Result<()> {
    let ep = inner.eps.get(to).and_then(Option::as_ref).ok_or_else(|| {
        Error::InvalidArgument(format!("PE {to} is not reached through the network transport of PE {}", inner.me))
    })?;
    // SAFETY: no payload; the header is copied at once.
    let req = unsafe { ep.am_send(am::AM_ID, header, &[])? };
    req.wait(&|| inner.health.check("answering a peer's operation"))
}
