//! Collectives on a stream: broadcast, fcollect, alltoall, reductions, reduce-scatters
//! (`*_on_stream`).
//!
//! Data collectives are "barrier kernel, pull copies, barrier kernel" queued on the caller's
//! stream: after the first barrier every member's source is ready, each PE's copy engine pulls
//! what it needs from its peers' sources (mapped in this process) into its own destination,
//! and the second barrier keeps a peer from changing its source while others still read it.
//! A small fcollect is one kernel instead: on TEAM_WORLD it stages the data in the peers'
//! workspace with a flag per slice and no barrier; on other teams it pushes between the same
//! two barriers (see [`FCOLLECT_PUSH_MAX_BYTES`]).
//! A reduction is one kernel (`rshmemi_rt_reduce`) that stages chunks of the source in the
//! collective workspace and combines every member's chunk in team order, with team barriers
//! inside; `dest` may equal `source`. A reduce-scatter is the same kernel, staging from every
//! member the block the other members need (`rshmemi_reduce` in `collective_device.h`).
//!
//! Every member must call them with the same arguments, in the same order as its other
//! collectives of the team: the first barrier of each (or the staged fcollect's flags) checks
//! that on the GPU and stops every member's kernel on a difference (`agree.rs`); a PE that
//! refuses its own arguments queues that check alone, so that the others stop too. On a backend without streams they are the host collectives
//! (`stream.rs` decides).
//!
//! # Safety
//! As `stream.rs`: `stream` is a live stream of this PE's context (or 0), and the symmetric
//! buffers stay allocated until the stream has run the collective.
#![allow(unsafe_code)]

use super::agree::{Kind, Signature};
use super::stream::OnStream;
use super::{Runtime, Team};
use crate::backend::{Agreement, Streams};
use crate::driver::stream::StreamHandle;
use crate::dtype::{DType, ReduceOp};
use crate::heap::SymAddr;
use crate::error::Result;

/// Up to this many bytes per member, an fcollect on a team other than TEAM_WORLD is one kernel
/// that pushes over NVLink between two team barriers (`rshmemi_rt_fcollect`); above it, the copy
/// engine pulls between two barrier kernels. The push kernel is one block, so its bandwidth is
/// one SM's; the pull pays two kernel launches and a copy command per member, which dominate up
/// to a few hundred KiB (`benchmarks.run --suite allgather` measures both). TEAM_WORLD
/// fcollects up to `workspace::staged::SLOT_BYTES` go through staging slots instead, with no
/// barrier (`rshmemi_rt_fcollect_staged`).
pub const FCOLLECT_PUSH_MAX_BYTES: usize = 256 << 10;

/// Refuses a reduce-scatter `dest` that overlaps `source` other than as one of its whole
/// blocks. The kernel stages one chunk of every block per round and writes `dest` for that
/// chunk before staging the next, so `dest` over a whole block only overwrites elements already
/// staged; one that straddles blocks would overwrite elements of a later chunk before they are
/// staged, and every member would combine half-written data.
fn check_whole_blocks(what: &str, dest: SymAddr, source: SymAddr, bytes: usize, blocks: usize) -> Result<()> {
    let (d, s) = (dest.get(), source.get());
    let disjoint = d + bytes <= s || s + bytes * blocks <= d;
    let whole_block = d >= s && (d - s) % bytes == 0;
    if bytes == 0 || disjoint || whole_block {
        return Ok(());
    }
    Err(crate::Error::InvalidArgument(format!(
        "{what}: dest ({bytes} bytes at {d:#x}) overlaps source ({blocks} blocks of {bytes} bytes at {s:#x}) \
         other than as one whole block; use a separate dest, or dest = source + k * nelems"
    )))
}

impl Runtime {
    /// Copies `nelems` elements from `source` on team PE `root` into `dest` on every member, in
    /// `stream`'s order. Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::broadcast`]; [`crate::Error::Unsupported`] for a team device code cannot
    /// address; [`crate::Error::Driver`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_broadcast_on_stream")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn broadcast_on_stream(
        &self,
        team: Team,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        root: i32,
        dtype: DType,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Broadcast { team, dest, source, nelems, root, dtype }) }
    }

    /// Concatenates every member's `nelems` elements at `source` into `dest` on every member,
    /// in team order, in `stream`'s order. Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::broadcast_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_fcollect_on_stream")]
    pub unsafe fn fcollect_on_stream(
        &self,
        team: Team,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Fcollect { team, dest, source, nelems, dtype }) }
    }

    /// Exchanges blocks of `nelems` elements: block `i` of member `j`'s `source` lands in block
    /// `j` of member `i`'s `dest`, in `stream`'s order. Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::broadcast_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_alltoall_on_stream")]
    pub unsafe fn alltoall_on_stream(
        &self,
        team: Team,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Alltoall { team, dest, source, nelems, dtype }) }
    }

    /// Barrier agreeing on `agree`, the copies `(dst, src)` of `bytes` each, barrier.
    ///
    /// # Safety
    /// As `queue_copy` and `queue_barrier`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn queue_pulls(
        &self,
        q: &dyn Streams,
        stream: StreamHandle,
        team: Team,
        copies: &[(usize, usize)],
        bytes: usize,
        agree: Agreement,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe {
            q.agreed_barrier(stream, team.0, agree)?;
            for &(d, s) in copies {
                self.queue_copy(q, stream, d, s, bytes)?;
            }
            q.barrier(stream, team.0)
        }
    }

    /// The agreement of this PE's next on-stream collective on `team` (`agree.rs`): its packed
    /// signature and its call number on the team, counted here.
    fn stream_agreement(&self, team: Team, sig: Signature) -> Result<Agreement> {
        let seq = self.teams().next_stream_call(team)?;
        Ok(Agreement { ws: self.staged_ws, n_pes: self.n_pes(), desc: sig.pack(), seq })
    }

    /// Queues `plan` (the collective, given its agreement) when this PE's own checks in `checked`
    /// passed; otherwise queues the agreement alone, marked refused, so that the other members
    /// stop with an error instead of waiting for this PE, and returns this PE's own error.
    /// `staged`: the members that would stage this call agree through the staged fcollect's
    /// flags, not a barrier (so does the refusal).
    ///
    /// # Safety
    /// As the module docs; `plan` queues only what `checked` vouched for.
    #[allow(clippy::too_many_arguments)]
    unsafe fn agreed<T>(
        &self,
        q: &dyn Streams,
        stream: StreamHandle,
        team: Team,
        sig: Signature,
        staged: bool,
        checked: Result<T>,
        plan: impl FnOnce(T, Agreement) -> Result<()>,
    ) -> Result<()> {
        match checked {
            Ok(t) => plan(t, self.stream_agreement(team, sig)?),
            Err(err) => {
                let refused = Signature { refused: true, ..sig };
                let queued = self.stream_agreement(team, refused).and_then(|a| {
                    // SAFETY: the team was checked (device_team); a refused staged fcollect of
                    // 0 bytes touches only the workspace; the caller vouches for the stream.
                    unsafe {
                        if staged {
                            q.fcollect_staged(stream, 0, 0, 0, a)
                        } else {
                            q.agreed_barrier(stream, team.0, a)
                        }
                    }
                });
                if let Err(e) = queued {
                    tracing::warn!(error = %e, "could not queue the refusal of an on-stream collective; the other members may wait for this PE");
                }
                Err(err)
            }
        }
    }

    /// Combines every member's `nelems` elements at `source` with `op` into `dest` on every
    /// member, in `stream`'s order; `dest` may be `source`. Floating-point results are the same
    /// on every member (team order); fp16/bf16 are combined in fp32. Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::reduce`]; [`crate::Error::Unsupported`] for a team device code cannot
    /// address; [`crate::Error::Driver`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_sum_reduce_on_stream")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reduce_on_stream(
        &self,
        team: Team,
        op: ReduceOp,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::Reduce { team, op, dest, source, nelems, dtype }) }
    }

    /// Combines block `me` (of `nelems` elements) of every member's `source` with `op` into
    /// `dest` on member `me`, in `stream`'s order: `source` holds `team_n_pes * nelems`
    /// elements, `dest` holds `nelems`. Results as [`Runtime::reduce_on_stream`]. `dest` may be
    /// this PE's own block of `source` (or any whole block), not a range that straddles blocks.
    /// Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::reducescatter`]; [`crate::Error::Unsupported`] for a team device code
    /// cannot address; [`crate::Error::Driver`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_sum_reducescatter_on_stream")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reducescatter_on_stream(
        &self,
        team: Team,
        op: ReduceOp,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.on_stream(stream, OnStream::ReduceScatter { team, op, dest, source, nelems, dtype }) }
    }

    /// The queued form of [`Runtime::broadcast_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn queue_broadcast(
        &self,
        q: &dyn Streams,
        stream: StreamHandle,
        team: Team,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        root: i32,
        dtype: DType,
    ) -> Result<()> {
        const WHAT: &str = "broadcast_on_stream";
        let info = self.device_team(team, WHAT)?;
        self.stream_precheck(WHAT)?;
        let sig = Signature { kind: Kind::Broadcast, dtype, op: None, root, nelems: nelems as u64, refused: false };
        let checked = (|| {
            let (_, bytes) = self.collective_setup(WHAT, team, nelems, dtype)?;
            let root_pe = info.world_pe(root.into())?;
            self.check_local(dest, bytes)?;
            self.check_local(source, bytes)?;
            if bytes == 0 {
                return Ok((0, 0, 0));
            }
            Ok((self.remote(dest.get(), bytes, self.my_pe())?, self.remote(source.get(), bytes, root_pe)?, bytes))
        })();
        // SAFETY: the team was checked; `d` / `s` are mapped for `bytes`; the caller vouches for
        // the stream and for the buffers living until it has run.
        unsafe {
            self.agreed(q, stream, team, sig, false, checked, |(d, s, bytes), agree| {
                q.agreed_barrier(stream, team.0, agree)?;
                self.queue_copy(q, stream, d, s, bytes)?;
                q.barrier(stream, team.0)
            })
        }
    }

    /// The queued form of [`Runtime::fcollect_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn queue_fcollect(
        &self,
        q: &dyn Streams,
        stream: StreamHandle,
        team: Team,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
    ) -> Result<()> {
        const WHAT: &str = "fcollect_on_stream";
        let info = self.device_team(team, WHAT)?;
        self.stream_precheck(WHAT)?;
        let sig = Signature { kind: Kind::Fcollect, dtype, op: None, root: 0, nelems: nelems as u64, refused: false };
        // The same rule on every member for the same call; a refused call follows it with the
        // count it was given.
        let guess = nelems.saturating_mul(dtype.size());
        let staged = guess > 0 && guess <= q.staged_max_bytes() && team == Team::WORLD && self.staged_ws != 0;
        let checked = (|| {
            let (_, bytes) = self.collective_setup(WHAT, team, nelems, dtype)?;
            self.check_local(dest, bytes * info.size())?;
            self.check_local(source, bytes)?;
            Ok(bytes)
        })();
        // SAFETY (each arm): the team was checked; `dest` / `source` are this PE's symmetric
        // ranges (check_local), mapped on every member; the staged workspace was zeroed at init
        // and only the staged kernel uses it; the caller vouches for the stream and for the
        // buffers living until it has run.
        unsafe {
            self.agreed(q, stream, team, sig, staged, checked, |bytes, agree| {
                if staged {
                    return q.fcollect_staged(stream, dest.get(), source.get(), bytes, agree);
                }
                if bytes > 0 && bytes <= FCOLLECT_PUSH_MAX_BYTES {
                    return q.fcollect(stream, team.0, dest.get(), source.get(), bytes, agree);
                }
                let copies = info
                    .members
                    .iter()
                    .enumerate()
                    .filter(|_| bytes > 0)
                    .map(|(j, &pe)| Ok((self.remote((dest + j * bytes).get(), bytes, self.my_pe())?, self.remote(source.get(), bytes, pe)?)))
                    .collect::<Result<Vec<_>>>()?;
                self.queue_pulls(q, stream, team, &copies, bytes, agree)
            })
        }
    }

    /// The queued form of [`Runtime::alltoall_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn queue_alltoall(
        &self,
        q: &dyn Streams,
        stream: StreamHandle,
        team: Team,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
    ) -> Result<()> {
        const WHAT: &str = "alltoall_on_stream";
        let info = self.device_team(team, WHAT)?;
        self.stream_precheck(WHAT)?;
        let sig = Signature { kind: Kind::Alltoall, dtype, op: None, root: 0, nelems: nelems as u64, refused: false };
        let checked = (|| {
            let (_, bytes) = self.collective_setup(WHAT, team, nelems, dtype)?;
            self.check_local(dest, bytes * info.size())?;
            self.check_local(source, bytes * info.size())?;
            let me = info.my_index;
            let copies = info
                .members
                .iter()
                .enumerate()
                .filter(|_| bytes > 0)
                .map(|(j, &pe)| {
                    Ok((self.remote((dest + j * bytes).get(), bytes, self.my_pe())?, self.remote((source + me * bytes).get(), bytes, pe)?))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((copies, bytes))
        })();
        // SAFETY: as in `queue_broadcast`.
        unsafe {
            self.agreed(q, stream, team, sig, false, checked, |(copies, bytes), agree| {
                self.queue_pulls(q, stream, team, &copies, bytes, agree)
            })
        }
    }

    /// The queued form of [`Runtime::reduce_on_stream`] (`scatter` false) and of
    /// [`Runtime::reducescatter_on_stream`] (`scatter` true).
    ///
    /// # Safety
    /// See the module docs.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn queue_reduce(
        &self,
        q: &dyn Streams,
        stream: StreamHandle,
        team: Team,
        op: ReduceOp,
        dest: SymAddr,
        source: SymAddr,
        nelems: usize,
        dtype: DType,
        scatter: bool,
    ) -> Result<()> {
        let (what, kind) =
            if scatter { ("reducescatter_on_stream", Kind::ReduceScatter) } else { ("reduce_on_stream", Kind::Reduce) };
        let info = self.device_team(team, what)?;
        self.stream_precheck(what)?;
        let sig = Signature { kind, dtype, op: Some(op), root: 0, nelems: nelems as u64, refused: false };
        let checked = (|| {
            op.check(dtype)?;
            let (_, bytes) = self.collective_setup(what, team, nelems, dtype)?;
            let blocks = if scatter { info.size() } else { 1 };
            let all = bytes.checked_mul(blocks).ok_or_else(|| {
                crate::Error::InvalidArgument(format!("{what}: {bytes} bytes per PE times {blocks} PEs overflow the address space"))
            })?;
            self.check_local(dest, bytes)?;
            self.check_local(source, all)?;
            if scatter {
                check_whole_blocks(what, dest, source, bytes, blocks)?;
            }
            Ok(())
        })();
        // The kernel runs for nelems == 0 too: it is this call's agreement with the members.
        // SAFETY: the team was checked; `op` takes `dtype`; `dest` and `source` are this PE's
        // symmetric ranges of `bytes`; the caller vouches for the stream and their lifetime.
        unsafe {
            self.agreed(q, stream, team, sig, false, checked, |(), agree| {
                q.reduce(stream, team.0, op, dtype, dest.get(), source.get(), nelems, scatter, agree)
            })
        }
    }
}
