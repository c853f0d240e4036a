//! The state the transport's threads share: what [`super::Net`] holds, and what its progress
//! and executor threads get a handle of (`progress.rs`, `exec.rs`), so that they need nothing of
//! `Net` itself.

use super::am;
use super::segments::Segments;
use super::staging::Staging;
use super::ucx::{Context, Endpoint, Worker};
use crate::backend::{MemoryBackend, ThreadSetup};
use crate::bootstrap::Health;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

/// The first endpoint error, per PE (0: none), written by UCX's error callback.
pub(super) struct PeerErrors {
    pub(super) status: Vec<AtomicI32>,
}

/// What the open transport holds. Field order is drop order: remote keys and endpoints go
/// before the worker, the worker before what its callbacks read.
pub(super) struct Inner {
    pub(super) segments: Segments,
    pub(super) eps: Vec<Option<Endpoint>>,
    pub(super) worker: Arc<Worker>,
    pub(super) target: Box<am::Target>,
    pub(super) errors: Box<PeerErrors>,
    /// Per PE: puts issued since the last flush of its endpoint.
    pub(super) dirty: Vec<AtomicBool>,
    /// Per PE: atomics posted through UCX since the last flush (completed by a quiet; later
    /// atomics need not wait for them: the runtime's posts are adds whose order does not matter).
    pub(super) posted: Vec<AtomicBool>,
    /// Small puts in flight from bounce buffers.
    pub(super) staging: Staging,
    /// Every PE's heap base (the address of its heap offset 0 in its own process).
    pub(super) bases: Vec<usize>,
    pub(super) me: usize,
    pub(super) secret: [u8; am::SECRET_BYTES],
    /// The heap is host memory this process may write (put-with-signal as one message).
    pub(super) host_memory: bool,
    /// Atomics and puts-with-signal are run by the target's runtime (`exec.rs`), not by UCX.
    pub(super) target_ops: bool,
    /// The last id given to an `AMO` (its reply carries it).
    pub(super) next_id: AtomicU64,
    /// The heap's memory (the executor's atomics and copies; local buffers' memory types).
    pub(super) mem: Arc<dyn MemoryBackend>,
    /// How long the progress thread polls on after an event (`progress.rs`).
    pub(super) spin: Duration,
    /// What the progress and proxy threads run first.
    pub(super) setup: Option<ThreadSetup>,
    pub(super) health: Health,
    pub(super) stop: AtomicBool,
    pub(super) _ctx: Arc<Context>,
}

impl Inner {
    /// Runs what a thread touching the heap through UCX runs first (see [`ThreadSetup`]); a
    /// failure is logged, the thread goes on.
    pub(super) fn enter_thread(&self, name: &str) {
        if let Some(setup) = &self.setup {
            if let Err(e) = setup() {
                tracing::warn!(thread = name, error = %e, "cannot prepare the thread for the backend's memory");
            }
        }
    }
}
