//! Ordering and barriers: `fence`, `quiet`, `barrier` / `sync` over a team.
//!
//! A barrier uses one `u64` counter per team slot in every member's workspace, never reset:
//! arriving adds 1 to the counter of every member (after `quiet`, so this PE's earlier puts are
//! visible first), then waits until its own counter reaches the number of arrivals expected so
//! far (team size times the barriers done; see `team.rs` for why that stays right across team
//! slots being reused). 10,000 barriers in a row need no reset and cannot confuse epochs: the
//! counter only grows, and a PE that runs ahead only makes the next target reached sooner.

use super::wait::Unmet;
use super::{workspace, Runtime, Team};
use crate::backend::{AmoOp, Width};
use crate::consts::Cmp;
use crate::error::Result;

impl Runtime {
    /// Orders this PE's puts, atomics and signals to each PE: those issued before the fence
    /// arrive before those issued after.
    ///
    /// # Errors
    /// When the backend reports an earlier asynchronous failure.
    #[doc(alias = "nvshmem_fence")]
    pub fn fence(&self) -> Result<()> {
        self.backend.quiet()
    }

    /// Completes every put, atomic and signal this PE issued before it: they are visible to
    /// all PEs.
    ///
    /// # Errors
    /// When the backend reports an earlier asynchronous failure.
    #[doc(alias = "nvshmem_quiet")]
    pub fn quiet(&self) -> Result<()> {
        self.backend.quiet()
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

    fn arrive_and_wait(&self, team: Team, during: &str) -> Result<()> {
        // Once a PE is dead no barrier can be trusted: the survivors' extra arrivals could
        // stand in for the dead PE's missing one.
        self.boot.health().check(during)?;
        let (members, target) = self.teams().next_barrier(team)?;
        let counter = self.workspace + workspace::COUNTERS + 8 * team.0 as usize;
        for &pe in &members {
            self.amo(counter, Width::W64, AmoOp::Add(1), pe)?;
        }
        self.poll(during, || {
            let seen = self.load_local(counter, Width::W64)?;
            Ok(if seen >= target {
                Ok(())
            } else {
                Err(Unmet { addr: counter, cmp: Cmp::Ge, expected: target.into(), seen: seen.into() })
            })
        })
    }
}
