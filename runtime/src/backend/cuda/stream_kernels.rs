//! The runtime's kernels that run on a caller's stream (barrier, fcollects, reductions; from
//! `triton-lib/src/runtime_kernels.cu`, built by `build.rs` into PTX and cubins, [`super::image`]):
//! loading them into this PE's context at init, publishing the device state into them, and
//! launching them.
//!
//! # Safety
//! Each launch passes one pointer per kernel parameter, to a local of the exact type the kernel
//! declares (`int32_t` -> `i32`, pointers and `uint64_t` -> `u64`); the tests below check the PTX
//! parameter lists against these launches. A loaded module is forgotten by the device-state
//! registry before it is unloaded, so no later republish writes into an unloaded module.
//!
//! Every module is loaded at init, never on first use: loading a module may wait for kernels
//! already running (CUDA's lazy-loading hazard: a fcollect loaded while a kernel spins on a
//! signal that the peer sends only after its own first fcollect would never start), and loading
//! and publishing inside CUDA graph capture are not allowed.
#![allow(unsafe_code)]

use super::barrier_order::BarrierOrder;
use super::image::{self, Form, KernelImage};
use super::registry;
use crate::backend::Agreement;
use crate::device_state::DeviceState;
use crate::driver::context::PrimaryContext;
use crate::driver::module::{self, Function, LaunchDims, LoadedModule};
use crate::driver::stream::StreamHandle;
use crate::dtype::{DType, ReduceOp};
use crate::error::{Error, Result};
use std::ffi::{c_void, CStr};
use std::sync::Arc;

const BARRIER: &CStr = c"rshmemi_rt_barrier";
const AGREE: &CStr = c"rshmemi_rt_agree";
const REDUCE: &CStr = c"rshmemi_rt_reduce";
const FCOLLECT: &CStr = c"rshmemi_rt_fcollect";
const FCOLLECT_STAGED: &CStr = c"rshmemi_rt_fcollect_staged";

/// One warp: lane 0 runs the barrier, the others only wait at the warp sync (the `.cu` file's
/// launch bounds say 32).
const BARRIER_DIMS: LaunchDims = LaunchDims { grid: (1, 1, 1), block: (32, 1, 1), shared_bytes: 0 };
/// One block of `RSHMEMI_RT_REDUCE_THREADS` threads: the reduction has team barriers inside,
/// which one block can run; 512 threads keep enough loads in flight over NVLink.
const REDUCE_DIMS: LaunchDims = LaunchDims { grid: (1, 1, 1), block: (512, 1, 1), shared_bytes: 0 };
/// One block (`RSHMEMI_RT_FCOLLECT_THREADS`): see the kernel for why not more.
const FCOLLECT_DIMS: LaunchDims = LaunchDims { grid: (1, 1, 1), block: (512, 1, 1), shared_bytes: 0 };

/// The stream workspace, a symmetric allocation the runtime makes at init (zeroed): the staged
/// fcollect's words (`rshmemi_rt_fcollect_staged` in runtime_kernels.cu): `[u64; BLOCKS]`
/// epochs, `[u64; n_pes * BLOCKS]` flags, `[[u64; 2]; 2 * n_pes * BLOCKS]` argument words;
/// then the agreement slots of the other on-stream collectives (`rshmemi_agree_t` in
/// barrier_device.h), `[[u64; 2]; n_pes]` per team slot; then two parities of `n_pes` staging
/// slots of `SLOT_BYTES`.
pub(super) mod staged {
    use crate::consts::MAX_TEAMS;
    /// Blocks of every staged fcollect launch (the kernel needs the same count in every call).
    pub const BLOCKS: usize = 8;
    /// Largest fcollect per PE that goes through the staging slots.
    pub const SLOT_BYTES: usize = 256 << 10;
    /// Offset of the flags.
    pub const FLAGS: usize = BLOCKS * 8;
    /// Offset of the staged fcollect's argument words.
    pub const fn descs(n_pes: usize) -> usize {
        FLAGS + n_pes * BLOCKS * 8
    }
    /// Offset of team slot `team`'s agreement slots.
    pub const fn agree(n_pes: usize, team: usize) -> usize {
        descs(n_pes) + 2 * n_pes * BLOCKS * 16 + team * n_pes * 16
    }
    /// Offset of the staging slots for `n_pes` PEs (256-byte aligned).
    pub const fn staging(n_pes: usize) -> usize {
        agree(n_pes, MAX_TEAMS).next_multiple_of(256)
    }
    /// Total size for `n_pes` PEs.
    pub const fn bytes(n_pes: usize) -> usize {
        staging(n_pes) + 2 * n_pes * SLOT_BYTES
    }
}

/// This PE's agreement slots of team slot `team` (`[[u64; 2]; n_pes]`, indexed by member).
fn agree_slots(a: Agreement, team: i32) -> Result<u64> {
    match usize::try_from(team) {
        Ok(t) if t < crate::consts::MAX_TEAMS && a.ws != 0 => Ok((a.ws + staged::agree(a.n_pes, t)) as u64),
        _ => Err(Error::InvalidArgument(format!("team slot {team} has no agreement slots (stream workspace {:#x})", a.ws))),
    }
}

/// The operator code `rshmemi_rt_reduce` takes (`enum rshmemi_op` in `collective_device.h`).
pub(super) fn op_code(op: ReduceOp) -> i32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Min => 2,
        ReduceOp::Max => 3,
        ReduceOp::And => 4,
        ReduceOp::Or => 5,
        ReduceOp::Xor => 6,
    }
}

/// A runtime kernel module, loaded and published.
///
/// Owns the module (through [`LoadedModule`]). Dropping it first removes the module from the
/// device-state registry, then unloads it.
#[derive(Debug)]
struct RtModule {
    module: LoadedModule,
}

impl RtModule {
    fn load(ctx: &Arc<PrimaryContext>, image: &KernelImage, cc: (i32, i32), state: &DeviceState) -> Result<RtModule> {
        let started = std::time::Instant::now();
        let (module, form) = image::load(ctx, image, cc)?;
        // SAFETY: the module was loaded into `ctx` just above and stays loaded while this value
        // lives; Drop forgets it before unloading.
        let published = unsafe { registry::publish(ctx, module.handle(), state) };
        let m = RtModule { module };
        if !published? {
            return Err(Error::InvalidArgument(format!(
                "the runtime kernel module {} has no {} global; runtime/build.rs built it from a \
                 triton-lib that does not define the device state",
                image.name,
                registry::STATE_SYMBOL.to_string_lossy()
            )));
        }
        let ms = started.elapsed().as_secs_f64() * 1e3;
        match form {
            Form::Cubin(arch) => tracing::debug!(module = image.name, arch, ms, "runtime kernels loaded (cubin)"),
            Form::Ptx => tracing::info!(
                module = image.name,
                ms,
                "runtime kernels loaded from PTX: no cubin of this build fits the GPU, so the driver compiled it"
            ),
        }
        Ok(m)
    }

    fn function(&self, name: &CStr) -> Result<Function> {
        self.module.function(name)
    }
}

impl Drop for RtModule {
    fn drop(&mut self) {
        registry::forget(self.module.handle());
    }
}

/// The runtime's kernels in this PE's context, every module loaded at init, and the order of
/// the barrier-using ones per team ([`BarrierOrder`]).
#[derive(Debug)]
pub(super) struct RuntimeKernels {
    ctx: Arc<PrimaryContext>,
    barrier: Function,
    agree: Function,
    fcollect: Function,
    fcollect_staged: Function,
    reduce: Function,
    order: BarrierOrder,
    /// Keep the functions above valid; dropped (unpublished, unloaded) with `self`.
    _modules: [RtModule; 3],
}

impl RuntimeKernels {
    /// Loads every runtime kernel module into `ctx` (cubins for the device's architecture, else
    /// PTX) and writes `state` into each.
    ///
    /// # Errors
    /// [`Error::Driver`] when the driver rejects a module or a call fails.
    pub(super) fn load(ctx: &Arc<PrimaryContext>, state: &DeviceState) -> Result<RuntimeKernels> {
        let cc = ctx.device().compute_capability()?;
        let barrier = RtModule::load(ctx, &image::BARRIER, cc, state)?;
        let fcollect = RtModule::load(ctx, &image::FCOLLECT, cc, state)?;
        let reduce = RtModule::load(ctx, &image::REDUCE, cc, state)?;
        Ok(RuntimeKernels {
            ctx: ctx.clone(),
            barrier: barrier.function(BARRIER)?,
            agree: barrier.function(AGREE)?,
            fcollect: fcollect.function(FCOLLECT)?,
            fcollect_staged: fcollect.function(FCOLLECT_STAGED)?,
            reduce: reduce.function(REDUCE)?,
            order: BarrierOrder::new(ctx),
            _modules: [barrier, fcollect, reduce],
        })
    }

    /// Whether every barrier-using kernel queued so far for `team` has finished (host
    /// barriers wait for it: `barrier_order.rs`).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub(super) fn queued_done(&self, team: i32) -> Result<bool> {
        self.order.idle(team)
    }

    /// Enqueues a barrier (with quiet) over `team` on `stream`.
    ///
    /// # Safety
    /// `stream` is a live stream of this context (or 0). `team` is a team this PE is in whose
    /// device table entry is written, on every member (otherwise the kernel stops itself with an
    /// error record, or waits for members that never arrive).
    pub(super) unsafe fn barrier(&self, stream: StreamHandle, team: i32) -> Result<()> {
        self.ctx.bind()?;
        let mut p_team = team;
        let mut params: [*mut c_void; 1] = [(&mut p_team as *mut i32).cast()];
        // SAFETY: one pointer to an i32 for `.param .u32` (int32_t team); it outlives the call,
        // which copies the value; the caller vouches for the stream; the function comes from
        // our live module of the bound context.
        self.order.queue(team, stream, || unsafe { module::launch(self.barrier, BARRIER_DIMS, stream, &mut params) })
    }

    /// Enqueues a barrier over `team` that also checks `a` against every member's
    /// (`rshmemi_rt_agree`).
    ///
    /// # Safety
    /// As [`RuntimeKernels::barrier`]; `a.ws` is this PE's stream workspace for `a.n_pes`.
    pub(super) unsafe fn agreed_barrier(&self, stream: StreamHandle, team: i32, a: Agreement) -> Result<()> {
        self.ctx.bind()?;
        let mut p_team = team;
        let mut p_slots = agree_slots(a, team)?;
        let (mut p_desc, mut p_seq) = (a.desc, a.seq);
        let mut params: [*mut c_void; 4] = [
            (&mut p_team as *mut i32).cast(),
            (&mut p_slots as *mut u64).cast(),
            (&mut p_desc as *mut u64).cast(),
            (&mut p_seq as *mut u64).cast(),
        ];
        // SAFETY: four pointers matching `.u32, .u64, .u64, .u64` (checked against the PTX by
        // the tests); they outlive the call; the function belongs to our live module; the caller
        // vouches for the stream and the workspace.
        self.order.queue(team, stream, || unsafe { module::launch(self.agree, BARRIER_DIMS, stream, &mut params) })
    }

    /// Enqueues an fcollect of `nbytes` per member over `team` as one kernel (barrier agreeing
    /// on `a`, stores into every member's `dest`, barrier).
    ///
    /// # Safety
    /// As [`RuntimeKernels::agreed_barrier`]; `dest` (team size x `nbytes`) and `source` (`nbytes`) are
    /// this PE's symmetric addresses, mapped on every member, until the kernel has run.
    pub(super) unsafe fn fcollect(
        &self,
        stream: StreamHandle,
        team: i32,
        dest: usize,
        source: usize,
        nbytes: usize,
        a: Agreement,
    ) -> Result<()> {
        self.ctx.bind()?;
        let mut p_team = team;
        let mut p_dest = dest as u64;
        let mut p_source = source as u64;
        let mut p_nbytes = nbytes as u64;
        let mut p_slots = agree_slots(a, team)?;
        let (mut p_desc, mut p_seq) = (a.desc, a.seq);
        let mut params: [*mut c_void; 7] = [
            (&mut p_team as *mut i32).cast(),
            (&mut p_dest as *mut u64).cast(),
            (&mut p_source as *mut u64).cast(),
            (&mut p_nbytes as *mut u64).cast(),
            (&mut p_slots as *mut u64).cast(),
            (&mut p_desc as *mut u64).cast(),
            (&mut p_seq as *mut u64).cast(),
        ];
        // SAFETY: seven pointers matching `.u32` and six `.u64` (checked against the PTX by
        // the tests); they outlive the call; the function belongs to our live module; the caller
        // vouches for the addresses and the stream.
        self.order.queue(team, stream, || unsafe { module::launch(self.fcollect, FCOLLECT_DIMS, stream, &mut params) })
    }

    /// Enqueues a TEAM_WORLD fcollect of `nbytes` per PE through the staging slots of the
    /// workspace at `a.ws` ([`staged`]), with [`staged::BLOCKS`] blocks, agreeing on `a`.
    ///
    /// # Safety
    /// As [`RuntimeKernels::fcollect`] for the world team; `a.ws` is this PE's staged workspace
    /// (zeroed at init, used by nothing else) for the job's `a.n_pes`; `nbytes` is at most
    /// [`staged::SLOT_BYTES`].
    pub(super) unsafe fn fcollect_staged(
        &self,
        stream: StreamHandle,
        dest: usize,
        source: usize,
        nbytes: usize,
        a: Agreement,
    ) -> Result<()> {
        self.ctx.bind()?;
        let (ws, n_pes) = (a.ws, a.n_pes);
        let mut p_epochs = ws as u64;
        let mut p_flags = (ws + staged::FLAGS) as u64;
        let mut p_staging = (ws + staged::staging(n_pes)) as u64;
        let mut p_slot = staged::SLOT_BYTES as u64;
        let mut p_dest = dest as u64;
        let mut p_source = source as u64;
        let mut p_nbytes = nbytes as u64;
        let mut p_descs = (ws + staged::descs(n_pes)) as u64;
        let (mut p_desc, mut p_seq) = (a.desc, a.seq);
        let mut p_agree = agree_slots(a, crate::consts::TEAM_WORLD)?;
        let mut params: [*mut c_void; 11] = [
            (&mut p_epochs as *mut u64).cast(),
            (&mut p_flags as *mut u64).cast(),
            (&mut p_staging as *mut u64).cast(),
            (&mut p_slot as *mut u64).cast(),
            (&mut p_dest as *mut u64).cast(),
            (&mut p_source as *mut u64).cast(),
            (&mut p_nbytes as *mut u64).cast(),
            (&mut p_descs as *mut u64).cast(),
            (&mut p_desc as *mut u64).cast(),
            (&mut p_seq as *mut u64).cast(),
            (&mut p_agree as *mut u64).cast(),
        ];
        let dims = LaunchDims { grid: (staged::BLOCKS as u32, 1, 1), ..FCOLLECT_DIMS };
        // SAFETY: eleven pointers matching eleven `.u64` parameters (checked against the PTX by
        // the tests); they outlive the call; the function belongs to our live module; the caller
        // vouches for the workspace, the addresses and the stream.
        unsafe { module::launch(self.fcollect_staged, dims, stream, &mut params) }
    }

    /// Enqueues `dest[i] = op over team members of source[i]` on `stream` (with `scatter`, of
    /// `source[my_index * nelems + i]`), agreeing on `a`.
    ///
    /// # Safety
    /// As [`RuntimeKernels::agreed_barrier`]; `dest` (`nelems` elements of `dtype`) and `source`
    /// (`nelems`, or team size x `nelems` with `scatter`) are valid device addresses until the
    /// kernel has run; `op` takes `dtype`.
    #[allow(clippy::too_many_arguments)] // one per kernel parameter, plus stream
    pub(super) unsafe fn reduce(
        &self,
        stream: StreamHandle,
        team: i32,
        op: ReduceOp,
        dtype: DType,
        dest: usize,
        source: usize,
        nelems: usize,
        scatter: bool,
        a: Agreement,
    ) -> Result<()> {
        self.ctx.bind()?;
        let mut p_team = team;
        let mut p_op = op_code(op);
        let mut p_scatter = i32::from(scatter);
        let mut p_dtype = dtype.kernel_code();
        let mut p_dest = dest as u64;
        let mut p_source = source as u64;
        let mut p_nelems = nelems as u64;
        let mut p_slots = agree_slots(a, team)?;
        let (mut p_desc, mut p_seq) = (a.desc, a.seq);
        let mut params: [*mut c_void; 10] = [
            (&mut p_team as *mut i32).cast(),
            (&mut p_op as *mut i32).cast(),
            (&mut p_dtype as *mut i32).cast(),
            (&mut p_scatter as *mut i32).cast(),
            (&mut p_dest as *mut u64).cast(),
            (&mut p_source as *mut u64).cast(),
            (&mut p_nelems as *mut u64).cast(),
            (&mut p_slots as *mut u64).cast(),
            (&mut p_desc as *mut u64).cast(),
            (&mut p_seq as *mut u64).cast(),
        ];
        // SAFETY: ten pointers matching four `.u32` and six `.u64` (checked by the
        // tests against the PTX); they outlive the call; the module stays loaded (it is only
        // dropped with `self`); the caller vouches for the addresses and the stream.
        self.order.queue(team, stream, || unsafe { module::launch(self.reduce, REDUCE_DIMS, stream, &mut params) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{ALL_DTYPES, ALL_REDUCE_OPS};

    const SOURCE: &str = include_str!("../../../../triton-lib/src/runtime_kernels.cu");

    /// The parameter types of `.entry name( ... )` in `ptx`.
    fn entry_params(ptx: &str, name: &str) -> Vec<String> {
        let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no entry {name}"));
        let rest = &ptx[start..];
        let close = rest.find(')').unwrap();
        rest[..close].lines().skip(1).filter_map(|l| l.split_whitespace().nth(1).map(str::to_string)).collect()
    }

    const BARRIER_PTX: &str = image::BARRIER.ptx;
    const FCOLLECT_PTX: &str = image::FCOLLECT.ptx;
    const REDUCE_PTX: &str = image::REDUCE.ptx;

    #[test]
    fn ptx_entries_match_the_launch_code() {
        assert_eq!(entry_params(BARRIER_PTX, "rshmemi_rt_barrier"), [".u32"]);
        assert_eq!(entry_params(BARRIER_PTX, "rshmemi_rt_agree"), [".u32", ".u64", ".u64", ".u64"]);
        assert_eq!(entry_params(FCOLLECT_PTX, "rshmemi_rt_fcollect"), [".u32", ".u64", ".u64", ".u64", ".u64", ".u64", ".u64"]);
        assert_eq!(entry_params(FCOLLECT_PTX, "rshmemi_rt_fcollect_staged"), [".u64"; 11]);
        assert_eq!(
            entry_params(REDUCE_PTX, "rshmemi_rt_reduce"),
            [".u32", ".u32", ".u32", ".u32", ".u64", ".u64", ".u64", ".u64", ".u64", ".u64"]
        );
        // Each module defines the state global the runtime writes, and only its own kernel.
        for ptx in [BARRIER_PTX, FCOLLECT_PTX, REDUCE_PTX] {
            assert!(ptx.contains(".visible .global .align 8 .b8 rshmemi_device_state_d["), "state global");
            assert!(!ptx.contains('\0'));
        }
        assert!(!BARRIER_PTX.contains("rshmemi_rt_reduce"));
        assert!(!REDUCE_PTX.contains(".entry rshmemi_rt_barrier"));
        // The launch geometry is the one the kernels are bounded to.
        assert!(BARRIER_PTX.contains(".maxntid 32, 1, 1"));
        assert!(FCOLLECT_PTX.contains(&format!(".maxntid {}, 1, 1", FCOLLECT_DIMS.block.0)));
        assert!(!BARRIER_PTX.contains("rshmemi_rt_fcollect") && !REDUCE_PTX.contains(".entry rshmemi_rt_fcollect"));
        assert!(REDUCE_PTX.contains(&format!(".maxntid {}, 1, 1", REDUCE_DIMS.block.0)));
        let size = std::mem::size_of::<DeviceState>();
        assert!(BARRIER_PTX.contains(&format!("rshmemi_device_state_d[{size}]")), "state size {size}");
    }

    #[test]
    fn dtype_and_operator_codes_match_the_kernel_source() {
        // The kernel switches over the generated code lists, integers for every operator and
        // floats for the arithmetic ones; each dtype's code is in exactly one of them.
        let header = include_str!("../../../../triton-lib/include/rshmem/dtypes.h");
        let list = |name: &str| -> String {
            let start = header.find(&format!("#define {name}(X)")).unwrap_or_else(|| panic!("{name}"));
            header[start..].split("\n\n").next().unwrap().to_string()
        };
        let (ints, floats) = (list("RSHMEMI_FOR_INT_DTYPE_CODES"), list("RSHMEMI_FOR_FLOAT_DTYPE_CODES"));
        for d in ALL_DTYPES {
            let entry = format!("X({}, ", d.kernel_code());
            let (mine, other) = if d.is_integer() { (&ints, &floats) } else { (&floats, &ints) };
            assert!(mine.contains(&entry) && !other.contains(&entry), "{d:?}");
        }
        assert!(SOURCE.contains("RSHMEMI_FOR_INT_DTYPE_CODES(RSHMEMI_RT_CASE)"));
        assert!(SOURCE.contains("RSHMEMI_FOR_FLOAT_DTYPE_CODES(RSHMEMI_RT_CASE)"));
        for op in ALL_REDUCE_OPS {
            let code = op_code(op);
            assert!(
                SOURCE.contains(&format!(" {code} {} ", op.name()))
                    || SOURCE.contains(&format!(" {code} {}\n", op.name())),
                "{op:?}"
            );
        }
        assert!(SOURCE.contains("#define RSHMEMI_RT_REDUCE_THREADS 512"));
        assert!(SOURCE.contains("#define RSHMEMI_RT_FCOLLECT_THREADS 512"));
    }
}
