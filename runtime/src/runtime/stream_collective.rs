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
//! refuses its own arguments queues that check alone, so that the others stop too. On a backend
//! without streams they are the host collectives (`stream.rs` decides).
//!
//! Each collective is written once: [`on_stream_collective!`] declares the struct of its
//! arguments and its public method, and its [`StreamCollective`] impl says what the members
//! agree on, its host fallback, its checks and its queued form, whose kernel launches are
//! written here as [`Launch`] values; [`Collective`] is the one path they all take.
//!
//! # Safety
//! As `stream.rs`: `stream` is a live stream of this PE's context (or 0), and the symmetric
//! buffers stay allocated until the stream has run the collective.
#![allow(unsafe_code)]

use super::agree::{Kind, Signature};
use super::stream::{OnStreamCall, Reach};
use super::team_table::TeamInfo;
use super::{Runtime, Team};
use crate::backend::launch::workspace;
use crate::backend::{Agreement, Kernel, Launch, Param, Streams};
use crate::driver::stream::StreamHandle;
use crate::dtype::{DType, ReduceOp};
use crate::heap::SymAddr;
use crate::error::Result;

/// Up to this many bytes per member, an fcollect on a team other than TEAM_WORLD is one kernel
/// that pushes over NVLink between two team barriers (`rshmemi_rt_fcollect`); above it, the copy
/// engine pulls between two barrier kernels. The push kernel is one block, so its bandwidth is
/// one SM's; the pull pays two kernel launches and a copy command per member, which dominate up
/// to a few hundred KiB (`benchmarks.run --suite allgather` measures both). TEAM_WORLD
/// fcollects up to [`workspace::SLOT_BYTES`] go through staging slots instead, with no
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

/// What the generic path needs of every collective: filled in by [`on_stream_collective!`].
pub(super) trait Header {
    /// The public call's name (waits and errors name it).
    fn name(&self) -> &'static str;
    /// Its team.
    fn team(&self) -> Team;
}

/// One on-stream collective: its arguments (a struct made by [`on_stream_collective!`]), what the
/// members agree on, its host fallback and its queued form. [`Collective`] runs any of them.
pub(super) trait StreamCollective: Header {
    /// What this PE's checks of its arguments found, which the queued form uses.
    type Checked;

    /// What every member must agree on (refused: false).
    fn signature(&self) -> Signature;

    /// Whether the members agree through the staged fcollect's flags, not a barrier (the same
    /// rule on every member for the same call, refused or not).
    fn staged(&self, rt: &Runtime) -> bool {
        let _ = rt;
        false
    }

    /// The host fallback: the host collective, which returns once done.
    fn run_on_host(&self, rt: &Runtime) -> Result<()>;

    /// This PE's own checks of its arguments, on `info` (the team as device code addresses it).
    ///
    /// # Errors
    /// What the host collective would refuse the arguments with.
    fn check(&self, rt: &Runtime, info: &TeamInfo) -> Result<Self::Checked>;

    /// Queues the collective once every check passed: its kernels and copies, the first of them
    /// agreeing on `agree`.
    ///
    /// # Safety
    /// As the module docs; `checked` vouches for the symmetric ranges.
    unsafe fn queue(
        &self,
        rt: &Runtime,
        q: &dyn Streams,
        stream: StreamHandle,
        info: &TeamInfo,
        checked: Self::Checked,
        agree: Agreement,
    ) -> Result<()>;
}

/// A collective as an [`OnStreamCall`]: the one path every collective takes.
pub(super) struct Collective<C>(pub C);

impl<C: StreamCollective> OnStreamCall for Collective<C> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn reach(&self) -> Reach {
        Reach::Team(self.0.team())
    }

    unsafe fn run_on_host(&self, rt: &Runtime) -> Result<()> {
        self.0.run_on_host(rt)
    }

    unsafe fn queue(&self, rt: &Runtime, q: &dyn Streams, stream: StreamHandle) -> Result<()> {
        let (c, team, what) = (&self.0, self.0.team(), self.0.name());
        let info = rt.device_team(team, what)?;
        rt.stream_precheck(what)?;
        let checked = c.check(rt, &info);
        // SAFETY: the team was checked; `queue` runs only on what `check` vouched for; the caller
        // vouches for the stream and for the buffers living until it has run.
        unsafe {
            rt.agreed(q, stream, team, c.signature(), c.staged(rt), checked, |t, agree| {
                c.queue(rt, q, stream, &info, t, agree)
            })
        }
    }
}

/// Declares on-stream collectives that share one struct of arguments: the struct (with the
/// public call's name and [`Kind`]), its [`Header`], and one public method per call, which runs
/// the struct through [`Runtime::on_stream`] (every method also takes the stream, last).
macro_rules! on_stream_collective {
    (
        $(#[$sdoc:meta])* struct $call:ident $fields:tt
        $( $(#[$doc:meta])* pub unsafe fn $name:ident as $kind:expr; )+
    ) => {
        on_stream_collective!(@struct $(#[$sdoc])* $call $fields);
        impl Runtime {
            $( on_stream_collective!(@fn $(#[$doc])* $name $call $kind, $fields); )+
        }
    };
    (@struct $(#[$sdoc:meta])* $call:ident { $($arg:ident: $ty:ty),* $(,)? }) => {
        $(#[$sdoc])*
        #[derive(Debug, Clone, Copy)]
        pub(super) struct $call {
            name: &'static str,
            kind: Kind,
            $($arg: $ty),*
        }

        impl Header for $call {
            fn name(&self) -> &'static str {
                self.name
            }
            fn team(&self) -> Team {
                self.team
            }
        }
    };
    (@fn $(#[$doc:meta])* $name:ident $call:ident $kind:expr, { $($arg:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name(&self, $($arg: $ty,)* stream: StreamHandle) -> Result<()> {
            let call = $call { name: stringify!($name), kind: $kind, $($arg),* };
            // SAFETY: forwarded contract.
            unsafe { self.on_stream(stream, Collective(call)) }
        }
    };
}

on_stream_collective! {
    /// The arguments of [`Runtime::broadcast_on_stream`].
    struct Broadcast { team: Team, dest: SymAddr, source: SymAddr, nelems: usize, root: i32, dtype: DType }

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
    pub unsafe fn broadcast_on_stream as Kind::Broadcast;
}

impl StreamCollective for Broadcast {
    /// The mapped destination, the root's mapped source, the bytes.
    type Checked = (usize, usize, usize);

    fn signature(&self) -> Signature {
        Signature { kind: self.kind, dtype: self.dtype, op: None, root: self.root, nelems: self.nelems as u64, refused: false }
    }

    fn run_on_host(&self, rt: &Runtime) -> Result<()> {
        rt.broadcast(self.team, self.dest, self.source, self.nelems, self.root, self.dtype)
    }

    fn check(&self, rt: &Runtime, info: &TeamInfo) -> Result<Self::Checked> {
        let (_, bytes) = rt.collective_setup(self.name, self.team, self.nelems, self.dtype)?;
        let root_pe = info.world_pe(self.root.into())?;
        rt.check_local(self.dest, bytes)?;
        rt.check_local(self.source, bytes)?;
        if bytes == 0 {
            return Ok((0, 0, 0));
        }
        Ok((rt.remote(self.dest.get(), bytes, rt.my_pe())?, rt.remote(self.source.get(), bytes, root_pe)?, bytes))
    }

    unsafe fn queue(
        &self,
        rt: &Runtime,
        q: &dyn Streams,
        stream: StreamHandle,
        _: &TeamInfo,
        (d, s, bytes): Self::Checked,
        agree: Agreement,
    ) -> Result<()> {
        // SAFETY: `d` / `s` are mapped for `bytes` (check); the caller's contract.
        unsafe {
            q.agreed_barrier(stream, self.team.0, agree)?;
            rt.queue_copy(q, stream, d, s, bytes)?;
            q.barrier(stream, self.team.0)
        }
    }
}

on_stream_collective! {
    /// The arguments of [`Runtime::fcollect_on_stream`].
    struct Fcollect { team: Team, dest: SymAddr, source: SymAddr, nelems: usize, dtype: DType }

    /// Concatenates every member's `nelems` elements at `source` into `dest` on every member,
    /// in team order, in `stream`'s order. Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::broadcast_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_fcollect_on_stream")]
    pub unsafe fn fcollect_on_stream as Kind::Fcollect;
}

/// The launch of a staged world fcollect of `nbytes` per PE from `source` into `dest`, through
/// the stream workspace at `a.ws` ([`workspace`]); a refused call launches it with 0 bytes.
fn fcollect_staged(dest: usize, source: usize, nbytes: usize, a: Agreement) -> Result<Launch> {
    let (ws, n) = (a.ws, a.n_pes);
    let params = vec![
        Param::addr(ws),
        Param::addr(ws + workspace::FLAGS),
        Param::addr(ws + workspace::staging(n)),
        Param::addr(workspace::SLOT_BYTES),
        Param::addr(dest),
        Param::addr(source),
        Param::addr(nbytes),
        Param::addr(ws + workspace::descs(n)),
        Param::U64(a.desc),
        Param::U64(a.seq),
        Param::U64(a.slots(Team::WORLD.0)?),
    ];
    Ok(Launch { kernel: Kernel::FcollectStaged, blocks: workspace::BLOCKS as u32, barriers_of: None, params })
}

impl Fcollect {
    /// The launch of the one-kernel fcollect of `bytes` per member that pushes between two team
    /// barriers.
    fn push(&self, bytes: usize, agree: Agreement) -> Result<Launch> {
        let team = self.team.0;
        let mut params = vec![Param::I32(team), Param::addr(self.dest.get()), Param::addr(self.source.get()), Param::addr(bytes)];
        params.extend(agree.params(team)?);
        Ok(Launch { kernel: Kernel::Fcollect, blocks: 1, barriers_of: Some(team), params })
    }
}

impl StreamCollective for Fcollect {
    /// Bytes per member.
    type Checked = usize;

    fn signature(&self) -> Signature {
        Signature { kind: self.kind, dtype: self.dtype, op: None, root: 0, nelems: self.nelems as u64, refused: false }
    }

    fn staged(&self, rt: &Runtime) -> bool {
        // From the count the call was given, checked or not.
        let guess = self.nelems.saturating_mul(self.dtype.size());
        guess > 0 && guess <= workspace::SLOT_BYTES && self.team == Team::WORLD && rt.staged_ws != 0
    }

    fn run_on_host(&self, rt: &Runtime) -> Result<()> {
        rt.fcollect(self.team, self.dest, self.source, self.nelems, self.dtype)
    }

    fn check(&self, rt: &Runtime, info: &TeamInfo) -> Result<usize> {
        let (_, bytes) = rt.collective_setup(self.name, self.team, self.nelems, self.dtype)?;
        rt.check_local(self.dest, bytes * info.size())?;
        rt.check_local(self.source, bytes)?;
        Ok(bytes)
    }

    unsafe fn queue(
        &self,
        rt: &Runtime,
        q: &dyn Streams,
        stream: StreamHandle,
        info: &TeamInfo,
        bytes: usize,
        agree: Agreement,
    ) -> Result<()> {
        let (team, dest, source) = (self.team, self.dest, self.source);
        // SAFETY (each way): `dest` / `source` are this PE's symmetric ranges (check), mapped on
        // every member; the staged workspace was zeroed at init and only the staged kernel uses
        // it; the caller vouches for the stream and for the buffers living until it has run.
        unsafe {
            if self.staged(rt) {
                return q.launch(stream, &fcollect_staged(dest.get(), source.get(), bytes, agree)?);
            }
            if bytes > 0 && bytes <= FCOLLECT_PUSH_MAX_BYTES {
                return q.launch(stream, &self.push(bytes, agree)?);
            }
            let copies = info
                .members
                .iter()
                .enumerate()
                .filter(|_| bytes > 0)
                .map(|(j, &pe)| Ok((rt.remote((dest + j * bytes).get(), bytes, rt.my_pe())?, rt.remote(source.get(), bytes, pe)?)))
                .collect::<Result<Vec<_>>>()?;
            rt.queue_pulls(q, stream, team, &copies, bytes, agree)
        }
    }
}

on_stream_collective! {
    /// The arguments of [`Runtime::alltoall_on_stream`].
    struct Alltoall { team: Team, dest: SymAddr, source: SymAddr, nelems: usize, dtype: DType }

    /// Exchanges blocks of `nelems` elements: block `i` of member `j`'s `source` lands in block
    /// `j` of member `i`'s `dest`, in `stream`'s order. Collective over `team`.
    ///
    /// # Errors
    /// As [`Runtime::broadcast_on_stream`].
    ///
    /// # Safety
    /// See the module docs.
    #[doc(alias = "nvshmemx_alltoall_on_stream")]
    pub unsafe fn alltoall_on_stream as Kind::Alltoall;
}

impl StreamCollective for Alltoall {
    /// The mapped copies `(dst, src)` and their bytes.
    type Checked = (Vec<(usize, usize)>, usize);

    fn signature(&self) -> Signature {
        Signature { kind: self.kind, dtype: self.dtype, op: None, root: 0, nelems: self.nelems as u64, refused: false }
    }

    fn run_on_host(&self, rt: &Runtime) -> Result<()> {
        rt.alltoall(self.team, self.dest, self.source, self.nelems, self.dtype)
    }

    fn check(&self, rt: &Runtime, info: &TeamInfo) -> Result<Self::Checked> {
        let (_, bytes) = rt.collective_setup(self.name, self.team, self.nelems, self.dtype)?;
        rt.check_local(self.dest, bytes * info.size())?;
        rt.check_local(self.source, bytes * info.size())?;
        let me = info.my_index;
        let copies = info
            .members
            .iter()
            .enumerate()
            .filter(|_| bytes > 0)
            .map(|(j, &pe)| {
                Ok((rt.remote((self.dest + j * bytes).get(), bytes, rt.my_pe())?, rt.remote((self.source + me * bytes).get(), bytes, pe)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((copies, bytes))
    }

    unsafe fn queue(
        &self,
        rt: &Runtime,
        q: &dyn Streams,
        stream: StreamHandle,
        _: &TeamInfo,
        (copies, bytes): Self::Checked,
        agree: Agreement,
    ) -> Result<()> {
        // SAFETY: the copies are mapped (check); the caller's contract.
        unsafe { rt.queue_pulls(q, stream, self.team, &copies, bytes, agree) }
    }
}

on_stream_collective! {
    /// The arguments of [`Runtime::reduce_on_stream`] and [`Runtime::reducescatter_on_stream`]
    /// (`kind` tells them apart).
    struct Reduce { team: Team, op: ReduceOp, dest: SymAddr, source: SymAddr, nelems: usize, dtype: DType }

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
    pub unsafe fn reduce_on_stream as Kind::Reduce;

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
    pub unsafe fn reducescatter_on_stream as Kind::ReduceScatter;
}

impl Reduce {
    fn scatter(&self) -> bool {
        self.kind == Kind::ReduceScatter
    }

    /// The launch of the reduction kernel (one block, team barriers inside).
    fn kernel(&self, agree: Agreement) -> Result<Launch> {
        let team = self.team.0;
        let mut params = vec![
            Param::I32(team),
            Param::I32(self.op.kernel_code()),
            Param::I32(self.dtype.kernel_code()),
            Param::I32(i32::from(self.scatter())),
            Param::addr(self.dest.get()),
            Param::addr(self.source.get()),
            Param::addr(self.nelems),
        ];
        params.extend(agree.params(team)?);
        Ok(Launch { kernel: Kernel::Reduce, blocks: 1, barriers_of: Some(team), params })
    }
}

impl StreamCollective for Reduce {
    type Checked = ();

    fn signature(&self) -> Signature {
        Signature { kind: self.kind, dtype: self.dtype, op: Some(self.op), root: 0, nelems: self.nelems as u64, refused: false }
    }

    fn run_on_host(&self, rt: &Runtime) -> Result<()> {
        if self.scatter() {
            rt.reducescatter(self.team, self.op, self.dest, self.source, self.nelems, self.dtype)
        } else {
            rt.reduce(self.team, self.op, self.dest, self.source, self.nelems, self.dtype)
        }
    }

    fn check(&self, rt: &Runtime, info: &TeamInfo) -> Result<()> {
        let what = self.name;
        self.op.check(self.dtype)?;
        let (_, bytes) = rt.collective_setup(what, self.team, self.nelems, self.dtype)?;
        let blocks = if self.scatter() { info.size() } else { 1 };
        let all = bytes.checked_mul(blocks).ok_or_else(|| {
            crate::Error::InvalidArgument(format!("{what}: {bytes} bytes per PE times {blocks} PEs overflow the address space"))
        })?;
        rt.check_local(self.dest, bytes)?;
        rt.check_local(self.source, all)?;
        if self.scatter() {
            check_whole_blocks(what, self.dest, self.source, bytes, blocks)?;
        }
        Ok(())
    }

    unsafe fn queue(
        &self,
        _: &Runtime,
        q: &dyn Streams,
        stream: StreamHandle,
        _: &TeamInfo,
        (): (),
        agree: Agreement,
    ) -> Result<()> {
        // The kernel runs for nelems == 0 too: it is this call's agreement with the members.
        // SAFETY: `op` takes `dtype`; `dest` and `source` are this PE's symmetric ranges of their
        // sizes (check); the caller vouches for the stream and their lifetime.
        unsafe { q.launch(stream, &self.kernel(agree)?) }
    }
}

impl Runtime {
    /// Barrier agreeing on `agree`, the copies `(dst, src)` of `bytes` each, barrier.
    ///
    /// # Safety
    /// As `queue_copy` and `queue_barrier`.
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
                            q.launch(stream, &fcollect_staged(0, 0, 0, a)?)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::image;
    use crate::backend::launch::ptx_params;

    /// The launches written here, checked against the kernels' PTX as the cuda backend checks
    /// them before each launch (which CI, without a GPU, never reaches).
    #[test]
    fn launches_match_the_kernels_parameters() {
        let a = Agreement { ws: 1 << 20, n_pes: 2, desc: 3, seq: 4 };
        let ptx = |l: &Launch, image: &'static str| ptx_params(image, l.kernel.entry()).unwrap();
        let (dest, source) = (SymAddr::new(0x1000), SymAddr::new(0x2000));
        let staged = fcollect_staged(0x100, 0x200, 64, a).unwrap();
        staged.check(&ptx(&staged, image::FCOLLECT.ptx)).unwrap();
        assert_eq!((staged.kernel, staged.blocks as usize, staged.barriers_of), (Kernel::FcollectStaged, workspace::BLOCKS, None));
        let f = Fcollect { name: "fcollect_on_stream", kind: Kind::Fcollect, team: Team(1), dest, source, nelems: 8, dtype: DType::F32 };
        let push = f.push(32, a).unwrap();
        push.check(&ptx(&push, image::FCOLLECT.ptx)).unwrap();
        assert_eq!((push.kernel, push.barriers_of), (Kernel::Fcollect, Some(1)));
        for kind in [Kind::Reduce, Kind::ReduceScatter] {
            let r = Reduce { name: "reduce_on_stream", kind, team: Team(1), op: ReduceOp::Max, dest, source, nelems: 8, dtype: DType::F32 };
            let l = r.kernel(a).unwrap();
            l.check(&ptx(&l, image::REDUCE.ptx)).unwrap();
            assert_eq!(l.params[1..4], [Param::I32(ReduceOp::Max.kernel_code()), Param::I32(DType::F32.kernel_code()), Param::I32(i32::from(kind == Kind::ReduceScatter))]);
        }
    }
}
