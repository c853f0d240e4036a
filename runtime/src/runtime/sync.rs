//! Ordering and barriers: `fence`, `quiet`, `barrier` / `sync` over a team.
//!
//! Host, on-stream and in-kernel barriers share one layout (`DeviceState::barrier_ws`, see
//! `BARRIER_WS_BYTES_PER_TEAM` and `triton-lib/src/barrier_device.h`), so a PE may meet its
//! peers' device barriers with a host barrier and the other way round. For team slot `t`, two
//! `u64` words in every member's workspace: `arrive` (at `16 t`) and `epoch` (at `16 t + 8`).
//! A barrier takes `e = ++epoch` (own word, atomically: a kernel of this PE may be in a barrier
//! of the same team at the same time), adds 1 to every member's `arrive` (after `quiet`, so this
//! PE's earlier puts are visible first), then waits until its own `arrive >= e * size`.
//! Nothing is reset while the team lives (`team.rs` zeroes the words when a slot gets a new
//! team): the counters only grow, and a PE that runs ahead only makes the next target reached
//! sooner, so 10,000 barriers in a row need no extra phase.

use super::wait::Unmet;
use super::{workspace, Runtime, Team};
use crate::backend::{AmoOp, Width};
use crate::consts::Cmp;
use crate::device_state::BARRIER_WS_BYTES_PER_TEAM;
use crate::error::Result;

impl Runtime {
    /// Orders this PE's puts, atomics and signals to each PE: those issued before the fence
    /// arrive before those issued after.
    ///
    /// # Errors
    /// [`crate::Error::PeerDied`] once a peer is known dead; when the backend reports an earlier
    /// asynchronous failure.
    #[doc(alias = "nvshmem_fence")]
    pub fn fence(&self) -> Result<()> {
        self.boot.health().check("fence")?;
        self.backend.quiet()
    }

    /// Completes every put, atomic and signal this PE issued before it: they are visible to
    /// all PEs.
    ///
    /// # Errors
    /// [`crate::Error::PeerDied`] once a peer is known dead; when the backend reports an earlier
    /// asynchronous failure.
    ///
    /// On the cuda backend it also reports a kernel that stopped on an error
    /// ([`Runtime::check_device_error`]).
    #[doc(alias = "nvshmem_quiet")]
    pub fn quiet(&self) -> Result<()> {
        // Puts to a dead PE cannot be complete: say so instead of succeeding silently.
        self.boot.health().check("quiet")?;
        self.check_device_error()?;
        self.backend.quiet().map_err(|e| self.prefer_device_error(e))
    }

    /// `quiet`, then waits until every PE of `team` has arrived. Every member must call it.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a team this PE is not in;
    /// [`crate::Error::PeerDied`] naming a dead member; [`crate::Error::WaitTimeout`].
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/sync.html>
    #[doc(alias = "nvshmem_barrier")]
    pub fn barrier(&self, team: Team) -> Result<()> {
        self.quiet()?;
        self.arrive_and_wait(team, "barrier")
    }

    /// Waits until every PE of `team` has arrived, without completing outstanding puts first.
    /// Every member must call it.
    ///
    /// # Errors
    /// As [`Runtime::barrier`].
    #[doc(alias = "nvshmem_team_sync")]
    pub fn sync(&self, team: Team) -> Result<()> {
        self.arrive_and_wait(team, "sync")
    }

    /// [`Runtime::barrier`] over all PEs.
    ///
    /// # Errors
    /// As [`Runtime::barrier`].
    #[doc(alias = "nvshmem_barrier_all")]
    pub fn barrier_all(&self) -> Result<()> {
        self.quiet()?;
        self.arrive_and_wait(Team::WORLD, "barrier_all")
    }

    /// [`Runtime::sync`] over all PEs.
    ///
    /// # Errors
    /// As [`Runtime::barrier`].
    #[doc(alias = "nvshmem_sync_all")]
    pub fn sync_all(&self) -> Result<()> {
        self.arrive_and_wait(Team::WORLD, "sync_all")
    }

    /// Symmetric address of the barrier words (`arrive`, then `epoch`) of team slot `slot`.
    pub(super) fn barrier_words(&self, slot: usize) -> usize {
        self.workspace + workspace::BARRIER + BARRIER_WS_BYTES_PER_TEAM as usize * slot
    }

    fn arrive_and_wait(&self, team: Team, during: &str) -> Result<()> {
        // Once a PE is dead no barrier can be trusted: the survivors' extra arrivals could
        // stand in for the dead PE's missing one.
        self.boot.health().check(during)?;
        self.check_device_error()?;
        let (members, my_index) = {
            let t = self.teams();
            let info = t.get(team)?;
            (info.members.clone(), info.my_index)
        };
        let arrive = self.barrier_words(team.0 as usize);
        let epoch = arrive + 8;
        let me = self.my_pe();
        let run = || -> Result<()> {
            let e = self.amo(epoch, Width::W64, AmoOp::Add(1), me)?.wrapping_add(1);
            let target = e.wrapping_mul(members.len() as u64);
            // Start after ourselves, as the device barrier does, so members spread their first
            // arrivals instead of all hitting member 0.
            let n = members.len();
            for k in 1..=n {
                self.amo(arrive, Width::W64, AmoOp::Add(1), members[(my_index + k) % n])?;
            }
            let detail = |u: &Unmet| self.describe_barrier(team, &members, epoch, e, u);
            self.poll_with(during, &detail, || {
                let seen = self.load_local(arrive, Width::W64)?;
                Ok(if seen >= target {
                    Ok(())
                } else {
                    Err(Unmet { addr: arrive, cmp: Cmp::Ge, expected: target.into(), seen: seen.into() })
                })
            })
        };
        run().map_err(|e| self.prefer_device_error(e))
    }
}
