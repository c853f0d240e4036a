//! Ordering and barriers: `fence`, `quiet`, `barrier` / `sync` over a team.
//!
//! Host, on-stream and in-kernel barriers share one layout (`DeviceState::barrier_ws`, see
//! `BARRIER_WS_BYTES_PER_TEAM` and `triton-lib/src/barrier_device.h`), so a PE may meet its
//! peers' device barriers with a host barrier and the other way round. For team slot `t`, three
//! `u64` words in every member's workspace: `arrive` (at `24 t`), `ticket` (`+ 8`) and `done`
//! (`+ 16`). A barrier instance takes `e = ++ticket` (own word, atomically: a kernel of this PE
//! may be in a barrier of the same team at the same time), waits until `done >= e - 1` (this
//! PE's previous instance of the team is over), adds 1 to every member's `arrive` (after
//! `quiet`, so this PE's earlier puts are visible first), waits until its own
//! `arrive >= e * size`, then sets `done = e`. So a PE's instances of one team, host or device,
//! run one after another and never count each other's arrivals. Nothing is reset while the team
//! lives (`team.rs` zeroes the words when a slot gets a new team): the counters only grow, and a
//! PE that runs ahead only makes the next target reached sooner, so 10,000 barriers in a row
//! need no extra phase.
//!
//! Across hosts on the host backend (no kernel or stream barrier shares the words there), a
//! team that spans hosts takes the same tickets but arrives differently: hierarchically, each
//! host's leader gathering its host's arrivals and running a dissemination barrier with the
//! other hosts' leaders (ceil(log2 H) rounds of one message for H hosts, instead of every PE
//! sending one to every member), then releasing its host; words at `workspace::HOSTS_BARRIER`
//! (see `Runtime::hosts_barrier` and docs/network.md, "Scale"). On the cuda backend across
//! hosts the shared layout stays: kernels' barriers meet the host's.
//!
//! On the cuda backend a host barrier first waits for the barrier kernels this PE queued on
//! streams for the team (`backend/cuda/barrier_order.rs`): instances match in the order each PE calls them,
//! host calls and stream calls alike, as long as every member calls them in the same order.

use super::wait::{Awaits, Unmet};
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
        // A peer that left (finalize) owes nothing to this PE's ordering; a dead one makes it void.
        self.boot.health().check_dead("fence")?;
        if let Some(net) = &self.net {
            net.quiet()?;
        }
        self.mem.quiet()
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
        self.boot.health().check_dead("quiet")?;
        self.check_device_error()?;
        if let Some(net) = &self.net {
            net.quiet()?;
        }
        self.mem.quiet().map_err(|e| self.prefer_device_error(e))
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
        let (members, my_index) = {
            let t = self.teams();
            let info = t.get(team)?;
            (info.members.clone(), info.my_index)
        };
        // Once a PE is dead no barrier can be trusted: the survivors' extra arrivals could
        // stand in for the dead PE's missing one. A member that left (finalize) never arrives.
        let awaits = Awaits::Members(&members);
        self.peers_gone(awaits, during)?;
        self.check_device_error()?;
        let arrive = self.barrier_words(team.0 as usize);
        let ticket = arrive + 8;
        let done = arrive + 16;
        let me = self.my_pe();
        let run = || -> Result<()> {
            self.wait_for_queued_barriers(team, during)?;
            let e = self.amo(ticket, Width::W64, AmoOp::Add(1), me)?.wrapping_add(1);
            let previous = e.wrapping_sub(1);
            self.poll_with(during, awaits, &|u| self.describe_unmet(u), || {
                let seen = self.load_local(done, Width::W64)?;
                Ok(if seen >= previous {
                    Ok(())
                } else {
                    Err(Unmet { addr: done, cmp: Cmp::Ge, expected: previous.into(), seen: seen.into() })
                })
            })?;
            let waited = match self.barrier_hosts(&members) {
                Some(hosts) => self.hosts_barrier(team, &hosts, e, during),
                None => self.linear_arrivals(team, &members, my_index, e, during),
            };
            // Also after a wait that gave up (a debug timeout): this instance's arrivals are out,
            // so the next one may go, and pairs up with the peers' next one as if this had
            // completed late.
            let finished = self.amo(done, Width::W64, AmoOp::Set(e), me).map(drop);
            waited.and(finished)
        };
        run().map_err(|e| self.prefer_device_error(e))
    }

    /// The arrivals and the wait of a barrier instance `e` where every member adds 1 to every
    /// member's `arrive` word (the layout that device and stream barriers share).
    fn linear_arrivals(&self, team: Team, members: &[usize], my_index: usize, e: u64, during: &str) -> Result<()> {
        let arrive = self.barrier_words(team.0 as usize);
        let target = e.wrapping_mul(members.len() as u64);
        // Start after ourselves, as the device barrier does, so members spread their first
        // arrivals instead of all hitting member 0.
        let n = members.len();
        // Posted: towards other hosts the arrivals go out together instead of one round trip
        // after another.
        for k in 1..=n {
            self.amo_post(arrive, Width::W64, AmoOp::Add(1), members[(my_index + k) % n])?;
        }
        // A member whose ticket is below ours has not entered this barrier yet.
        let detail = |u: &Unmet| self.describe_barrier(team, members, arrive + 8, e, u);
        self.poll_with(during, Awaits::Members(members), &detail, || {
            let seen = self.load_local(arrive, Width::W64)?;
            Ok(if seen >= target {
                Ok(())
            } else {
                Err(Unmet { addr: arrive, cmp: Cmp::Ge, expected: target.into(), seen: seen.into() })
            })
        })
    }

    /// Symmetric address of the hosts-barrier words of team slot `slot` (`workspace::HOSTS_BARRIER_WORDS`).
    pub(super) fn hosts_barrier_words(&self, slot: usize) -> usize {
        self.workspace + workspace::HOSTS_BARRIER + workspace::HOSTS_BARRIER_WORDS * 8 * slot
    }

    /// The members of a team grouped by host (hosts in the order of their first member, members
    /// in team order) when they span hosts and the barrier across hosts applies: on the host
    /// backend, where no kernel or stream barrier shares the team's words. `None` otherwise.
    fn barrier_hosts(&self, members: &[usize]) -> Option<Vec<Vec<usize>>> {
        if self.net.is_none() || self.backend.device().is_some() || self.backend.streams().is_some() {
            return None;
        }
        let node_of = &self.boot.node().node_of;
        let mut hosts: Vec<(usize, Vec<usize>)> = Vec::new();
        for &pe in members {
            match hosts.iter_mut().find(|(node, _)| *node == node_of[pe]) {
                Some((_, on)) => on.push(pe),
                None => hosts.push((node_of[pe], vec![pe])),
            }
        }
        (hosts.len() > 1).then(|| hosts.into_iter().map(|(_, on)| on).collect())
    }

    /// Barrier instance `e` of a team spanning hosts: each host's first member (its leader)
    /// counts its host's arrivals (`gather`, mapped atomics), the leaders run a dissemination
    /// barrier among themselves (in round k leader h adds 1 to `round[k]` of leader
    /// `h + 2^k mod H` and waits until its own `round[k] >= e`: ceil(log2 H) rounds, one message
    /// each across hosts), then each leader releases its host (`release = e`). Every counter
    /// only grows: `round[k]` has a single sender, whose e-th add is instance e's, and a member
    /// adds to `gather` for instance e + 1 only after instance e released it, so no count can
    /// be met by a later instance's arrival.
    fn hosts_barrier(&self, team: Team, hosts: &[Vec<usize>], e: u64, during: &str) -> Result<()> {
        let me = self.my_pe();
        let base = self.hosts_barrier_words(team.0 as usize);
        let (gather, release) = (base, base + 8);
        let round = |k: usize| base + 16 + 8 * k;
        let members: Vec<usize> = hosts.iter().flatten().copied().collect();
        let wait_ge = |addr: usize, target: u64| {
            self.poll_with(during, Awaits::Members(&members), &|u| self.describe_unmet(u), || {
                let seen = self.load_local(addr, Width::W64)?;
                Ok(if seen >= target {
                    Ok(())
                } else {
                    Err(Unmet { addr, cmp: Cmp::Ge, expected: target.into(), seen: seen.into() })
                })
            })
        };
        let h = hosts.iter().position(|on| on.contains(&me)).ok_or_else(|| {
            crate::Error::InvalidArgument(format!("PE {me} is not a member of team {}", team.0))
        })?;
        let local = &hosts[h];
        let leader = local[0];
        if me != leader {
            self.amo(gather, Width::W64, AmoOp::Add(1), leader)?;
            return wait_ge(release, e);
        }
        wait_ge(gather, e.wrapping_mul(local.len() as u64 - 1))?;
        let (n, mut dist, mut k) = (hosts.len(), 1, 0);
        while dist < n {
            self.amo_post(round(k), Width::W64, AmoOp::Add(1), hosts[(h + dist) % n][0])?;
            wait_ge(round(k), e)?;
            dist <<= 1;
            k += 1;
        }
        for &pe in &local[1..] {
            self.amo(release, Width::W64, AmoOp::Set(e), pe)?;
        }
        Ok(())
    }

    /// Waits until the barrier-using kernels this PE queued on streams for `team` have run
    /// (cuda backend; nothing to wait for on the host backend, where on-stream calls run at once).
    pub(super) fn wait_for_queued_barriers(&self, team: Team, during: &str) -> Result<()> {
        let Some(queue) = self.backend.streams() else { return Ok(()) };
        if queue.queued_done(team.0)? {
            return Ok(());
        }
        // For the timeout message: the queued kernels must take tickets past the current one.
        let ticket = self.barrier_words(team.0 as usize) + 8;
        let now = self.load_local(ticket, Width::W64)?;
        self.poll(during, || {
            Ok(if queue.queued_done(team.0)? {
                Ok(())
            } else {
                Err(Unmet { addr: ticket, cmp: Cmp::Gt, expected: now.into(), seen: now.into() })
            })
        })
    }
}
