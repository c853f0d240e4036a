//! The runtime's kernels that run on a caller's stream (barrier, fcollects, reductions; from
//! `triton-lib/src/runtime_kernels.cu`, built by `build.rs` into PTX and cubins, [`super::image`]):
//! loading them into this PE's context at init, publishing the device state into them, and
//! launching them: the barriers with their own parameters, the collectives' kernels as the
//! runtime wrote their [`Launch`] (`crate::backend::launch`).
//!
//! # Safety
//! Each launch passes one pointer per kernel parameter, to a local of the exact type the kernel
//! declares (`int32_t` -> `i32`, pointers and `uint64_t` -> `u64`): the barriers' lists are
//! checked against the PTX by the tests below, a [`Launch`]'s against the PTX parameter types
//! read at load, before every launch. A loaded module is forgotten by the device-state
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
use crate::backend::launch::{self, Kernel, Launch, Param};
use crate::backend::Agreement;
use crate::device_state::DeviceState;
use crate::driver::context::PrimaryContext;
use crate::driver::module::{self, Function, LaunchDims, LoadedModule};
use crate::driver::stream::StreamHandle;
use crate::error::{Error, Result};
use std::ffi::{c_void, CStr};
use std::sync::Arc;

const BARRIER: &CStr = c"rshmemi_rt_barrier";
const AGREE: &CStr = c"rshmemi_rt_agree";
const SIGNAL_WAIT: &CStr = c"rshmemi_rt_signal_wait";

/// One warp: lane 0 runs the barrier, the others only wait at the warp sync (the `.cu` file's
/// launch bounds say 32).
const BARRIER_DIMS: LaunchDims = LaunchDims { grid: (1, 1, 1), block: (32, 1, 1), shared_bytes: 0 };
/// One block of `RSHMEMI_RT_REDUCE_THREADS` threads: the reduction has team barriers inside,
/// which one block can run; 512 threads keep enough loads in flight over NVLink.
const REDUCE_DIMS: LaunchDims = LaunchDims { grid: (1, 1, 1), block: (512, 1, 1), shared_bytes: 0 };
/// One block (`RSHMEMI_RT_FCOLLECT_THREADS`): see the kernel for why not more.
const FCOLLECT_DIMS: LaunchDims = LaunchDims { grid: (1, 1, 1), block: (512, 1, 1), shared_bytes: 0 };

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

/// A collective's kernel: its function, the PTX types of its parameters (what every
/// [`Launch`] of it is checked against) and its block size.
#[derive(Debug)]
struct Launchable {
    function: Function,
    params: Vec<&'static str>,
    block: u32,
}

impl Launchable {
    fn find(module: &RtModule, image: &KernelImage, kernel: Kernel, block: u32) -> Result<Launchable> {
        let name = kernel.entry();
        let params = launch::ptx_params(image.ptx, name).ok_or_else(|| {
            Error::InvalidArgument(format!("the runtime kernel module {} has no entry {name}", image.name))
        })?;
        let c_name = std::ffi::CString::new(name).map_err(|_| Error::InvalidArgument(format!("kernel name {name:?}")))?;
        Ok(Launchable { function: module.function(&c_name)?, params, block })
    }
}

/// The runtime's kernels in this PE's context, every module loaded at init, and the order of
/// the barrier-using ones per team ([`BarrierOrder`]).
#[derive(Debug)]
pub(super) struct RuntimeKernels {
    ctx: Arc<PrimaryContext>,
    barrier: Function,
    agree: Function,
    signal_wait: Function,
    /// The collectives' kernels, in [`Kernel::ALL`]'s order.
    launchable: Vec<Launchable>,
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
        let launchable = Kernel::ALL
            .into_iter()
            .map(|k| match k {
                Kernel::Fcollect | Kernel::FcollectStaged => Launchable::find(&fcollect, &image::FCOLLECT, k, FCOLLECT_DIMS.block.0),
                Kernel::Reduce => Launchable::find(&reduce, &image::REDUCE, k, REDUCE_DIMS.block.0),
            })
            .collect::<Result<_>>()?;
        Ok(RuntimeKernels {
            ctx: ctx.clone(),
            barrier: barrier.function(BARRIER)?,
            agree: barrier.function(AGREE)?,
            signal_wait: barrier.function(SIGNAL_WAIT)?,
            launchable,
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

    /// Enqueues `rshmemi_rt_signal_wait`: work queued after it on `stream` waits until the
    /// 64-bit word at `addr` satisfies `*addr <cmp> value` (`cmp` a `CMP_*` value), or the
    /// kernel stops with an error record (a debug timeout, a peer that left the job).
    ///
    /// # Safety
    /// `stream` is a live stream of this context (or 0); `addr` stays a mapped, 8-byte-aligned
    /// address of this GPU until the kernel has run.
    pub(super) unsafe fn signal_wait(&self, stream: StreamHandle, addr: usize, cmp: i32, value: u64) -> Result<()> {
        self.ctx.bind()?;
        let mut p_addr = addr as u64;
        let mut p_cmp = cmp;
        let mut p_value = value;
        let mut params: [*mut c_void; 3] =
            [(&mut p_addr as *mut u64).cast(), (&mut p_cmp as *mut i32).cast(), (&mut p_value as *mut u64).cast()];
        // SAFETY: pointers matching `.u64, .u32, .u64` (checked against the PTX by the tests);
        // they outlive the call; the function belongs to our live module; the caller vouches for
        // the stream and the address.
        unsafe { module::launch(self.signal_wait, LaunchDims::SINGLE_THREAD, stream, &mut params) }
    }

    /// Enqueues a barrier over `team` that also checks `a` against every member's
    /// (`rshmemi_rt_agree`).
    ///
    /// # Safety
    /// As [`RuntimeKernels::barrier`]; `a.ws` is this PE's stream workspace for `a.n_pes`.
    pub(super) unsafe fn agreed_barrier(&self, stream: StreamHandle, team: i32, a: Agreement) -> Result<()> {
        self.ctx.bind()?;
        let mut p_team = team;
        let mut p_slots = a.slots(team)?;
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

    /// Enqueues `l` on `stream`, ordered with the barrier kernels of `l.barriers_of`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for parameters that are not the kernel's; [`Error::Driver`].
    ///
    /// # Safety
    /// As [`RuntimeKernels::agreed_barrier`]; the addresses among `l.params` are valid for what
    /// the kernel does with them (`runtime_kernels.cu`) until it has run.
    pub(super) unsafe fn launch(&self, stream: StreamHandle, l: &Launch) -> Result<()> {
        let k = Kernel::ALL.iter().position(|&k| k == l.kernel).and_then(|i| self.launchable.get(i)).ok_or_else(|| {
            Error::InvalidArgument(format!("kernel {} is not loaded", l.kernel.entry()))
        })?;
        l.check(&k.params)?;
        self.ctx.bind()?;
        let mut values = l.params.clone();
        let mut params: Vec<*mut c_void> = values
            .iter_mut()
            .map(|p| match p {
                Param::I32(v) => (v as *mut i32).cast(),
                Param::U64(v) => (v as *mut u64).cast(),
            })
            .collect();
        let dims = LaunchDims { grid: (l.blocks, 1, 1), block: (k.block, 1, 1), shared_bytes: 0 };
        // SAFETY: one pointer per parameter, each to a local of the type the kernel's PTX declares
        // there (`check` above compared the lists); they outlive the call, which copies the
        // values; the function belongs to our live module of the bound context; the caller
        // vouches for the addresses and the stream.
        let mut run = || unsafe { module::launch(k.function, dims, stream, &mut params) };
        match l.barriers_of {
            Some(team) => self.order.queue(team, stream, run),
            None => run(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{ALL_DTYPES, ALL_REDUCE_OPS};

    const SOURCE: &str = include_str!("../../../../triton-lib/src/runtime_kernels.cu");

    /// The parameter types of `.entry name( ... )` in `ptx`.
    fn entry_params(ptx: &str, name: &str) -> Vec<String> {
        launch::ptx_params(ptx, name).unwrap_or_else(|| panic!("no entry {name}")).into_iter().map(str::to_string).collect()
    }

    const BARRIER_PTX: &str = image::BARRIER.ptx;
    const FCOLLECT_PTX: &str = image::FCOLLECT.ptx;
    const REDUCE_PTX: &str = image::REDUCE.ptx;

    #[test]
    fn ptx_entries_match_the_launch_code() {
        assert_eq!(entry_params(BARRIER_PTX, "rshmemi_rt_barrier"), [".u32"]);
        assert_eq!(entry_params(BARRIER_PTX, "rshmemi_rt_agree"), [".u32", ".u64", ".u64", ".u64"]);
        assert_eq!(entry_params(BARRIER_PTX, "rshmemi_rt_signal_wait"), [".u64", ".u32", ".u64"]);
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
            let code = op.kernel_code();
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
