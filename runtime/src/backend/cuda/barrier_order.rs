//! Program order between this PE's host barriers and the barrier kernels it queues on streams.
//!
//! A PE's barrier instances of one team run one after another, in the order they take their
//! tickets (`triton-lib/src/barrier_device.h`), and an instance takes its ticket when it runs. A
//! kernel queued on a stream runs some time after the call that queued it, so a host barrier
//! called after `barrier_all_on_stream` could run first: it would take the earlier ticket, match
//! the peers' stream barrier instead of their host barrier, and return before they got there.
//! So, per team slot, the runtime keeps an event recorded after the last kernel it queued that
//! uses the team's barrier words (stream barriers, the one-kernel fcollect, reductions):
//!
//! - a host barrier of the team first waits until that event has completed ([`BarrierOrder::idle`]);
//! - such a kernel queued on another stream than the previous one first waits for the previous
//!   one on the GPU (`cuStreamWaitEvent`), so the team's kernels run in the order they were
//!   queued, whatever streams they are on ([`BarrierOrder::queue`]).
//!
//! Work captured into a CUDA graph is not tracked: it runs at each replay, which the runtime
//! does not see, and an event recorded during capture cannot be waited for outside it. Graph
//! replays and kernels of the caller's own (Triton kernels calling barriers) are ordered with
//! host barriers by the caller: synchronize their stream first (docs/memory-model.md).

use crate::consts::MAX_TEAMS;
use crate::driver::context::PrimaryContext;
use crate::driver::stream::{self, Event, StreamHandle};
use crate::error::{Error, Result};
use std::sync::{Arc, Mutex, MutexGuard};

/// The last barrier-using kernel queued for one team slot.
#[derive(Debug)]
struct Queued {
    /// Recorded on `stream` right after that kernel.
    event: Event,
    stream: StreamHandle,
    /// Whether the event may still be incomplete (false once a query said it completed).
    pending: bool,
}

/// Per team slot, the last barrier-using kernel queued on a stream.
///
/// Owns one event per team slot that ever had such a kernel (made on first use); dropping it
/// destroys them.
#[derive(Debug)]
pub(super) struct BarrierOrder {
    ctx: Arc<PrimaryContext>,
    slots: Mutex<Vec<Option<Queued>>>,
}

fn slot_of(team: i32) -> Result<usize> {
    usize::try_from(team)
        .ok()
        .filter(|&s| s < MAX_TEAMS)
        .ok_or_else(|| Error::InvalidArgument(format!("team {team} is not a team slot (0..{MAX_TEAMS})")))
}

impl BarrierOrder {
    pub(super) fn new(ctx: &Arc<PrimaryContext>) -> BarrierOrder {
        BarrierOrder { ctx: ctx.clone(), slots: Mutex::new((0..MAX_TEAMS).map(|_| None).collect()) }
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Option<Queued>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `launch`, which queues one kernel using the barrier words of `team` on `stream`,
    /// after the team's previous such kernel (on the GPU), and remembers it for host barriers.
    ///
    /// # Errors
    /// What `launch` returns; [`Error::Driver`] from the capture query or the event calls.
    pub(super) fn queue(&self, team: i32, stream: StreamHandle, launch: impl FnOnce() -> Result<()>) -> Result<()> {
        let slot = slot_of(team)?;
        if stream::is_capturing(stream)? {
            return launch();
        }
        // Held across the launch: two threads queueing for one team get one order on the GPU.
        let mut slots = self.slots();
        let entry = &mut slots[slot];
        if let Some(q) = entry.as_ref() {
            if q.pending && q.stream != stream {
                q.event.wait_on(stream)?;
            }
        }
        launch()?;
        let q = match entry {
            Some(q) => q,
            None => entry.insert(Queued { event: Event::new(&self.ctx)?, stream, pending: false }),
        };
        q.event.record(stream)?;
        q.stream = stream;
        q.pending = true;
        Ok(())
    }

    /// Whether every barrier-using kernel queued so far for `team` has finished.
    ///
    /// # Errors
    /// [`Error::Driver`], for instance when one of those kernels failed.
    pub(super) fn idle(&self, team: i32) -> Result<bool> {
        let slot = slot_of(team)?;
        let mut slots = self.slots();
        let Some(q) = slots[slot].as_mut().filter(|q| q.pending) else { return Ok(true) };
        let done = q.event.query()?;
        q.pending = !done;
        Ok(done)
    }
}
