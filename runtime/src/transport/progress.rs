//! The progress thread: runs what peers send (active messages, and the RMA and atomics UCX
//! emulates in software on transports without them, such as TCP) while this PE's program does
//! something else.
//!
//! It progresses the worker until idle, arms it (`ucp_worker_arm`) and sleeps on its event fd;
//! a peer's message, or [`super::Net`]'s drop (`ucp_worker_signal`), wakes it. Sleeping costs no
//! CPU, which matters when PEs outnumber cores. Threads waiting on an operation progress the
//! worker themselves, so the thread only matters for work nobody here waits for: while some
//! thread polled the worker within the last [`BUSY`], it sleeps for that long instead of on the
//! event fd. Woken by every message, it would take the CPU and the worker's lock from the thread
//! that is already polling for that very message (on the 2-core CI machine that doubled an
//! 8-byte round trip).
//!
//! It polls on for `RSHMEM_NET_SPIN_US` after its last event before it sleeps, so that a stream
//! of incoming puts need not wait for it to wake, as `ucx_perftest`'s receiver, which only
//! polls, never waits. The default is [`SPIN_DEFAULT`] where the machine has at least
//! [`SPIN_MIN_CORES`] cores, else 0: on the GPU machine (16 cores, 2 PEs, TCP on loopback), once
//! threads no longer spun on UCX's worker lock, 100 us of it took `putmem_nbi` from 0.68-0.88x
//! of `ucp_put_bw -O 32` to 0.97-0.98x and the proxy's 8-byte latency from 1.67x to 1.48x of
//! `ucp_put_lat` (`docs/benchmarks.md`); where PEs outnumber cores a polling thread takes the
//! CPU from the one that computes.
//!
//! # Safety
//! The event fd belongs to the worker, which outlives the thread (the thread holds an `Arc` of
//! what owns it, and `Net` joins the thread before dropping that).
#![allow(unsafe_code)]

use super::state::Inner;
use crate::error::{Error, Result};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The longest sleep between looks at the stop flag (a wake-up normally comes sooner).
const SLEEP: Timespec = Timespec { tv_sec: 0, tv_nsec: 100_000_000 };

/// How recently another thread must have polled the worker for this one to leave it alone.
const BUSY: std::time::Duration = std::time::Duration::from_micros(500);

/// The polling time after an event where cores are spare (module docs).
const SPIN_DEFAULT: u64 = 100;
/// The fewest cores ([`std::thread::available_parallelism`]) for [`SPIN_DEFAULT`] to apply.
const SPIN_MIN_CORES: usize = 8;

/// How long the progress thread polls on after an event: `RSHMEM_NET_SPIN_US`, else
/// [`SPIN_DEFAULT`] on a machine of [`SPIN_MIN_CORES`] or more, else not at all (module docs).
pub(super) fn spin_for() -> std::time::Duration {
    let set = crate::env::env().ok().and_then(|e| e.net_spin_us);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    std::time::Duration::from_micros(set.unwrap_or(if cores >= SPIN_MIN_CORES { SPIN_DEFAULT } else { 0 }))
}

/// Starts the thread.
///
/// # Errors
/// [`Error::Transport`] when the worker has no event fd; [`Error::Os`] when the thread cannot
/// be spawned.
pub(super) fn start(inner: Arc<Inner>) -> Result<std::thread::JoinHandle<()>> {
    let fd = inner.worker.event_fd()?;
    std::thread::Builder::new()
        .name(format!("rshmem-net-{}", inner.me))
        .spawn(move || run(&inner, fd))
        .map_err(|e| Error::os("spawning the transport's progress thread", e))
}

fn run(inner: &Inner, fd: i32) {
    // Incoming RMA may land in GPU memory through UCX's CUDA copies.
    inner.enter_thread("progress");
    // SAFETY: the worker's event fd stays open while the worker lives (module docs).
    let efd = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut last_event = std::time::Instant::now();
    while !inner.stop.load(Ordering::Acquire) {
        // Checked before every round, not only once idle: a stream of acknowledgements kept
        // this loop busy, contending for the worker's lock with the thread that was putting
        // (and progressing) at the same time.
        if inner.worker.polled_within(BUSY) {
            std::thread::sleep(BUSY);
            continue;
        }
        if inner.worker.background_progress() > 0 {
            last_event = std::time::Instant::now();
            continue;
        }
        if last_event.elapsed() < inner.spin {
            std::hint::spin_loop();
            continue;
        }
        match inner.worker.arm() {
            Ok(true) => {
                let mut fds = [PollFd::new(&efd, PollFlags::IN)];
                let _ = poll(&mut fds, Some(&SLEEP));
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the transport's progress thread cannot arm the worker; polling");
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}
