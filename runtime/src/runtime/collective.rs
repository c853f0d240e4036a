//! Collectives over a team: broadcast, fcollect, alltoall, reductions, reduce-scatters.
//!
//! Every member must call them with the same arguments: the first barrier also checks that they
//! did (`agree.rs`), so a mismatch fails on every member, naming both calls, before any data
//! moves. Each is "barrier, pull, barrier": after
//! the first barrier every member's source is ready, each PE reads what it needs from its peers'
//! sources into its own destination (on the host backend all of them are mapped), and the last
//! barrier keeps a peer from changing its source while others still read it. A reduction pulls
//! every member's source into a local buffer, combining in team order (so every PE computes the
//! very same floating-point result), and writes its destination only after the last barrier,
//! which makes `dest == source` safe.
//!
//! # References
//! <https://docs.nvidia.com/nvshmem/api/gen/api/collectives.html>

use super::agree::{Kind, Signature};
use super::team_table::TeamInfo;
use super::{Runtime, Team};
use crate::dtype::{reduce_bytes, DType, ReduceOp};
use crate::heap::SymAddr;
use crate::error::{Error, Result};

/// `bytes * members`, or an error naming the collective when it overflows.
fn bytes_times(bytes: usize, members: usize, what: &str) -> Result<usize> {
    bytes.checked_mul(members).ok_or_else(|| {
        Error::InvalidArgument(format!("{what}: {bytes} bytes per PE times {members} PEs overflow the address space"))
    })
}

/// A copy of an error of the root check, which is needed twice (to agree, then to use the root).
fn clone_err(e: &Error) -> Error {
    match e {
        Error::PeOutOfRange { pe, n_pes, scope } => Error::PeOutOfRange { pe: *pe, n_pes: *n_pes, scope: scope.clone() },
        other => Error::InvalidArgument(other.to_string()),
    }
}

impl Runtime {
    /// The team's info and `nelems * dtype.size()`, checked.
    pub(super) fn collective_setup(&self, what: &str, team: Team, nelems: usize, dtype: DType) -> Result<(TeamInfo, usize)> {
        let info = self.teams().get(team)?.clone();
        let bytes = nelems.checked_mul(dtype.size()).ok_or_else(|| {
            Error::InvalidArgument(format!("{what}: {nelems} elements of {dtype} overflow the address space"))
        })?;
        Ok((info, bytes))
    }

    /// Checks that this PE's `len` bytes at `addr` are symmetric memory of the program (before
    /// any barrier, so that a bad pointer fails on every PE alike instead of leaving peers
    /// waiting).
    pub(super) fn check_local(&self, addr: SymAddr, len: usize) -> Result<()> {
        if len > 0 {
            self.remote(addr.get(), len, self.my_pe())?;
            self.user_range(addr, len, "a collective")?;
        }
        Ok(())
    }

    /// Copies `nelems` elements from `source` on team PE `root` into `dest` on every member
    /// (the root included). Collective over `team`.
    ///
    /// # Errors
    /// [`Error::PeOutOfRange`] for a root outside the team; [`Error::NotSymmetric`];
    /// [`Error::InvalidArgument`] for a team this PE is not in; [`Error::PeerDied`].
    #[doc(alias = "nvshmem_broadcast")]
    pub fn broadcast(
        &self,
        team: Team,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        root: i32,
        dtype: DType,
    ) -> Result<()> {
        let _named = crate::watchdog::call_scope("broadcast");
        let (info, bytes) = self.collective_setup("broadcast", team, nelems, dtype)?;
        let root_pe = info.world_pe(root.into());
        let local = root_pe.as_ref().map(drop).map_err(clone_err).and_then(|()| {
            self.check_local(dest, bytes)?;
            self.check_local(source, bytes)
        });
        let sig = Signature { kind: Kind::Broadcast, dtype, op: None, root, nelems: nelems as u64, refused: false };
        self.agreed_barrier(team, &info, sig, Some(dest), source, local)?;
        let root_pe = root_pe?;
        if bytes >= self.coll_hierarchy_min_bytes {
            if let Some(leader) = self.host_leader(&info) {
                return self.broadcast_by_hosts(team, leader, dest, source, root_pe, bytes);
            }
        }
        self.copy_heap(dest.get(), self.my_pe(), source.get(), root_pe, bytes)?;
        self.barrier(team)
    }

    /// [`Runtime::broadcast`] across hosts, hierarchically: on the root's host every member
    /// copies from the root (mapped); on every other host the leader alone fetches the root's
    /// block through the transport, and after a barrier the others copy it from the leader's
    /// `dest` (mapped). The network carries the block once per host instead of once per PE,
    /// for one barrier more (every member takes it, so all take equally many).
    fn broadcast_by_hosts(&self, team: Team, leader: usize, dest: SymAddr, source: SymAddr, root: usize, bytes: usize) -> Result<()> {
        let me = self.my_pe();
        let far_root = self.net()?.reaches(root);
        if !far_root || me == leader {
            self.copy_heap(dest.get(), me, source.get(), root, bytes)?;
        }
        self.barrier(team)?;
        if far_root && me != leader {
            self.copy_heap(dest.get(), me, dest.get(), leader, bytes)?;
        }
        self.barrier(team)
    }

    /// Concatenates every member's `nelems` elements at `source` into `dest` on every member,
    /// in team order: member `j`'s block lands at `dest + j * nelems * size`. `dest` holds
    /// `team_n_pes * nelems` elements. Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::broadcast`].
    #[doc(alias = "nvshmem_fcollect")]
    pub fn fcollect(&self, team: Team, dest: SymAddr, source: SymAddr, nelems: usize, dtype: DType) -> Result<()> {
        let _named = crate::watchdog::call_scope("fcollect");
        let (info, bytes) = self.collective_setup("fcollect", team, nelems, dtype)?;
        let local = bytes_times(bytes, info.size(), "fcollect").and_then(|all| {
            self.check_local(dest, all)?;
            self.check_local(source, bytes)
        });
        let sig = Signature { kind: Kind::Fcollect, dtype, op: None, root: 0, nelems: nelems as u64, refused: false };
        self.agreed_barrier(team, &info, sig, Some(dest), source, local)?;
        if let Some(leader) = self.host_leader(&info) {
            return self.fcollect_by_hosts(team, &info, leader, dest, source, bytes);
        }
        for (j, &pe) in info.members.iter().enumerate() {
            self.copy_heap((dest + j * bytes).get(), self.my_pe(), source.get(), pe, bytes)?;
        }
        self.barrier(team)
    }

    /// The member that fetches the blocks of other hosts for this PE's host (the first member on
    /// this host, in team order), when the team spans hosts; `None` where every member shares
    /// this PE's host. Every member gets `Some` or every member `None` (a team spans hosts for
    /// all its members alike), so all take the same number of barriers.
    fn host_leader(&self, info: &TeamInfo) -> Option<usize> {
        let net = self.net.as_ref()?;
        if !info.members.iter().any(|&pe| net.reaches(pe)) {
            return None;
        }
        info.members.iter().copied().find(|&pe| !net.reaches(pe))
    }

    /// [`Runtime::fcollect`] across hosts, hierarchically: every PE copies its own host's
    /// blocks (mapped), each host's leader alone fetches the other hosts' blocks through the
    /// transport, and after a barrier the others copy those from the leader's `dest` (mapped).
    /// The network carries each block once per host instead of once per PE, for one barrier more.
    fn fcollect_by_hosts(&self, team: Team, info: &TeamInfo, leader: usize, dest: SymAddr, source: SymAddr, bytes: usize) -> Result<()> {
        let me = self.my_pe();
        let net = self.net()?;
        for (j, &pe) in info.members.iter().enumerate() {
            if !net.reaches(pe) || me == leader {
                self.copy_heap((dest + j * bytes).get(), me, source.get(), pe, bytes)?;
            }
        }
        self.barrier(team)?;
        if me != leader {
            for (j, &pe) in info.members.iter().enumerate() {
                if net.reaches(pe) {
                    self.copy_heap((dest + j * bytes).get(), me, (dest + j * bytes).get(), leader, bytes)?;
                }
            }
        }
        self.barrier(team)
    }

    /// Exchanges blocks of `nelems` elements: block `i` of member `j`'s `source` lands in block
    /// `j` of member `i`'s `dest`. Both hold `team_n_pes * nelems` elements. Collective over
    /// `team`.
    ///
    /// # Errors
    /// As [`Runtime::broadcast`].
    #[doc(alias = "nvshmem_alltoall")]
    pub fn alltoall(&self, team: Team, dest: SymAddr, source: SymAddr, nelems: usize, dtype: DType) -> Result<()> {
        let _named = crate::watchdog::call_scope("alltoall");
        let (info, bytes) = self.collective_setup("alltoall", team, nelems, dtype)?;
        let local = bytes_times(bytes, info.size(), "alltoall").and_then(|all| {
            self.check_local(dest, all)?;
            self.check_local(source, all)
        });
        let sig = Signature { kind: Kind::Alltoall, dtype, op: None, root: 0, nelems: nelems as u64, refused: false };
        self.agreed_barrier(team, &info, sig, Some(dest), source, local)?;
        let me = info.my_index;
        let my_pe = self.my_pe();
        for (j, &pe) in info.members.iter().enumerate() {
            if self.net.as_ref().is_some_and(|net| net.reaches(pe)) {
                // A member on another host: push our block for it instead of pulling its block
                // for us (it pushes that one). A get waits a round trip, one after another; puts
                // go out together (small ones from a bounce buffer) and the last barrier's quiet
                // completes them. Every destination is free since the first barrier.
                self.copy_heap((dest + me * bytes).get(), pe, (source + j * bytes).get(), my_pe, bytes)?;
            } else {
                self.copy_heap((dest + j * bytes).get(), my_pe, (source + me * bytes).get(), pe, bytes)?;
            }
        }
        self.barrier(team)
    }

    /// Combines every member's `nelems` elements at `source` with `op` and stores the result
    /// in `dest` on every member. `dest` may be `source`. Integer sums and products wrap;
    /// `and`/`or`/`xor` take integer dtypes only. Collective over `team`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the operator and dtype when `op` does not take
    /// `dtype`; otherwise as [`Runtime::broadcast`].
    #[doc(alias = "nvshmem_sum_reduce")]
    #[doc(alias = "nvshmem_max_reduce")]
    pub fn reduce(
        &self,
        team: Team,
        op: ReduceOp,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
    ) -> Result<()> {
        let _named = crate::watchdog::call_scope("reduce");
        let (info, bytes) = self.collective_setup("reduce", team, nelems, dtype)?;
        let local = op.check(dtype).and_then(|()| {
            self.check_local(dest, bytes)?;
            self.check_local(source, bytes)
        });
        let sig = Signature { kind: Kind::Reduce, dtype, op: Some(op), root: 0, nelems: nelems as u64, refused: false };
        self.agreed_barrier(team, &info, sig, Some(dest), source, local)?;
        let leader = if bytes >= self.coll_hierarchy_min_bytes { self.host_leader(&info) } else { None };
        let me = self.my_pe();
        if leader.is_some_and(|l| l != me) {
            // Not a leader across hosts: the leader combines for this host (below).
            self.barrier(team)?;
        } else {
            let acc = self.combine_members(&info.members, source, bytes, dtype, op)?;
            self.barrier(team)?;
            self.write_heap(dest.get(), me, &acc)?;
            if leader.is_none() {
                return Ok(());
            }
        }
        // Across hosts, hierarchically: each host's leader alone read every member's source
        // (the other hosts' through the transport, so each crosses the network once per host
        // instead of once per PE) and combined them in team order as above; the others copy
        // its result (mapped) once it is written, and the last barrier keeps the leader's
        // `dest` unchanged until they have.
        self.barrier(team)?;
        if let Some(l) = leader.filter(|&l| l != me) {
            self.copy_heap(dest.get(), me, dest.get(), l, bytes)?;
        }
        self.barrier(team)
    }

    /// Combines block `me` (of `nelems` elements) of every member's `source` with `op` into
    /// `dest` on member `me`: `source` holds `team_n_pes * nelems` elements, one block per member
    /// in team order, and `dest` holds `nelems`. Combined in team order, as [`Runtime::reduce`];
    /// `dest` is written only after every member has read, so it may overlap `source`.
    /// Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::reduce`].
    #[doc(alias = "nvshmem_sum_reducescatter")]
    #[doc(alias = "nvshmem_max_reducescatter")]
    pub fn reducescatter(
        &self,
        team: Team,
        op: ReduceOp,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
    ) -> Result<()> {
        let _named = crate::watchdog::call_scope("reducescatter");
        let (info, bytes) = self.collective_setup("reducescatter", team, nelems, dtype)?;
        let local = op.check(dtype).and_then(|()| {
            let all = bytes_times(bytes, info.size(), "reducescatter")?;
            self.check_local(dest, bytes)?;
            self.check_local(source, all)
        });
        let sig = Signature { kind: Kind::ReduceScatter, dtype, op: Some(op), root: 0, nelems: nelems as u64, refused: false };
        self.agreed_barrier(team, &info, sig, None, source, local)?;
        let acc = self.combine_members(&info.members, source + info.my_index * bytes, bytes, dtype, op)?;
        self.barrier(team)?;
        self.write_heap(dest.get(), self.my_pe(), &acc)
    }

    /// Every member's `bytes` at `addr` combined with `op` in team order (the order that makes
    /// floating-point results the same on every PE): what `reduce` and `reducescatter` compute.
    fn combine_members(&self, members: &[usize], addr: SymAddr, bytes: usize, dtype: DType, op: ReduceOp) -> Result<Vec<u8>> {
        let mut acc = vec![0u8; bytes];
        let mut peer = vec![0u8; bytes];
        for (j, &pe) in members.iter().enumerate() {
            if j == 0 {
                self.read_heap(addr.get(), pe, &mut acc)?;
            } else {
                self.read_heap(addr.get(), pe, &mut peer)?;
                reduce_bytes(dtype, op, &mut acc, &peer)?;
            }
        }
        Ok(acc)
    }
}
