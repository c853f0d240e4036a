//! The cuda backend's one-thread kernels (host-issued atomics, the on-stream signal add), loaded
//! once per backend, and their launches.
//!
//! The kernels are the `RSHMEMI_RT_OPS` part of `triton-lib/src/runtime_kernels.cu`, the one
//! source of the runtime's kernels, built by `runtime/build.rs` into PTX and cubins
//! (`image::OPS`). Their memory ordering is the whole point (`fence.sc.sys`,
//! `atom.acq_rel.sys`, `ld.acquire.sys`); the operation codes are `device_state::AMO_*`, which
//! the kernel source reads from the generated header.
//!
//! # Safety
//! Each launch passes one pointer per kernel parameter, to a local of the exact type the PTX
//! declares (`.u64` -> `u64`, `.u32` -> `u32`); the tests check the PTX parameter lists.
#![allow(unsafe_code)]

use crate::backend::{AmoOp, Width};
use crate::device_state::{
    AMO_ADD, AMO_AND, AMO_COMPARE_SWAP, AMO_FETCH, AMO_LOAD_ACQUIRE, AMO_OR, AMO_SET, AMO_SWAP, AMO_XOR,
};
use super::image;
use crate::driver::context::PrimaryContext;
use crate::driver::module::{self, Function, LaunchDims, LoadedModule};
use crate::driver::stream::StreamHandle;
use crate::error::Result;
use std::ffi::{c_void, CStr};
use std::sync::Arc;

/// The PTX text of the kernels.
pub const PTX: &str = image::OPS.ptx;

const AMO32: &CStr = c"rshmemi_amo32";
const AMO64: &CStr = c"rshmemi_amo64";
const SIGNAL_ADD: &CStr = c"rshmemi_signal_add";

/// The op codes `rshmemi_amo32/64` understand (`device_state::AMO_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum AmoCode {
    Fetch = AMO_FETCH,
    Set = AMO_SET,
    Swap = AMO_SWAP,
    CompareSwap = AMO_COMPARE_SWAP,
    Add = AMO_ADD,
    And = AMO_AND,
    Or = AMO_OR,
    Xor = AMO_XOR,
    LoadAcquire = AMO_LOAD_ACQUIRE,
}

/// One launch of `rshmemi_amo*`: op code and the two operands.
pub(crate) fn encode(op: AmoOp) -> (AmoCode, u64, u64) {
    match op {
        AmoOp::Fetch => (AmoCode::Fetch, 0, 0),
        AmoOp::Set(v) => (AmoCode::Set, v, 0),
        AmoOp::Swap(v) => (AmoCode::Swap, v, 0),
        AmoOp::CompareSwap { cond, value } => (AmoCode::CompareSwap, cond, value),
        AmoOp::Add(v) => (AmoCode::Add, v, 0),
        AmoOp::And(v) => (AmoCode::And, v, 0),
        AmoOp::Or(v) => (AmoCode::Or, v, 0),
        AmoOp::Xor(v) => (AmoCode::Xor, v, 0),
    }
}

/// The loaded module and its kernels.
///
/// Owns the module ([`LoadedModule`]); the functions are valid as long as it lives.
#[derive(Debug)]
pub(crate) struct Kernels {
    amo32: Function,
    amo64: Function,
    signal_add: Function,
    _module: LoadedModule,
}

impl Kernels {
    /// Loads the module into `ctx`: the cubin for the device's architecture, else the PTX
    /// (`image`).
    pub(crate) fn load(ctx: &Arc<PrimaryContext>) -> Result<Kernels> {
        let cc = ctx.device().compute_capability()?;
        let (module, form) = image::load(ctx, &image::OPS, cc)?;
        tracing::debug!(?form, "backend kernels loaded");
        Ok(Kernels {
            amo32: module.function(AMO32)?,
            amo64: module.function(AMO64)?,
            signal_add: module.function(SIGNAL_ADD)?,
            _module: module,
        })
    }

    /// Enqueues `rshmemi_amo32/64` on `stream`: the old value of the word at `addr` is written
    /// (zero-extended to 64 bits) at `out`.
    ///
    /// # Safety
    /// `addr` must be a mapped, `width`-aligned device address and `out` an 8-byte-aligned
    /// address kernels can write (page-locked host memory, say); both must stay valid until
    /// the kernel has run. The context of `stream` is current.
    #[allow(clippy::too_many_arguments)] // one per kernel parameter, plus stream and width
    pub(crate) unsafe fn amo(
        &self,
        stream: StreamHandle,
        addr: usize,
        width: Width,
        code: AmoCode,
        a: u64,
        b: u64,
        out: usize,
    ) -> Result<()> {
        let f = match width {
            Width::W32 => self.amo32,
            Width::W64 => self.amo64,
        };
        let mut p_addr = addr as u64;
        let mut p_op = code as u32;
        let mut p_a = a;
        let mut p_b = b;
        let mut p_out = out as u64;
        let mut params: [*mut c_void; 5] = [
            (&mut p_addr as *mut u64).cast(),
            (&mut p_op as *mut u32).cast(),
            (&mut p_a as *mut u64).cast(),
            (&mut p_b as *mut u64).cast(),
            (&mut p_out as *mut u64).cast(),
        ];
        // SAFETY: the five pointers match `.param .u64 addr, .u32 op, .u64 a, .u64 b, .u64 out`
        // of both kernels and live until cuLaunchKernel returns (it copies the values); the
        // caller vouches for the addresses and the stream.
        unsafe { module::launch(f, LaunchDims::SINGLE_THREAD, stream, &mut params) }
    }

    /// Enqueues `rshmemi_signal_add`: after everything queued before it on `stream`, a
    /// system-scope fence, then an atomic add of `value` to the 64-bit word at `addr`.
    ///
    /// # Safety
    /// `addr` must stay a mapped, 8-byte-aligned device address until the kernel has run; the
    /// context of `stream` is current.
    pub(crate) unsafe fn signal_add(&self, stream: StreamHandle, addr: usize, value: u64) -> Result<()> {
        let mut p_addr = addr as u64;
        let mut p_value = value;
        let mut params: [*mut c_void; 2] = [(&mut p_addr as *mut u64).cast(), (&mut p_value as *mut u64).cast()];
        // SAFETY: the pointers match `.param .u64 addr, .u64 value` and outlive the call; the
        // caller vouches for the address and the stream.
        unsafe { module::launch(self.signal_add, LaunchDims::SINGLE_THREAD, stream, &mut params) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameter list of `.entry name( ... )` in the PTX text.
    fn entry_params(name: &str) -> Vec<String> {
        let start = PTX.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no entry {name}"));
        let rest = &PTX[start..];
        let close = rest.find(')').unwrap();
        rest[..close]
            .lines()
            .skip(1)
            .map(|l| l.trim().trim_end_matches(',').split_whitespace().nth(1).unwrap_or("").to_string())
            .filter(|t| !t.is_empty())
            .collect()
    }

    #[test]
    fn ptx_entries_match_the_launch_code() {
        // The launch code passes u64, u32, u64, u64, u64 to the amo kernels and u64, u64 to
        // signal_add; a change to the kernel signature must change the launch code too.
        for amo in ["rshmemi_amo32", "rshmemi_amo64"] {
            assert_eq!(entry_params(amo), [".u64", ".u32", ".u64", ".u64", ".u64"], "{amo}");
        }
        assert_eq!(entry_params("rshmemi_signal_add"), [".u64", ".u64"]);
        for name in [AMO32, AMO64, SIGNAL_ADD] {
            assert!(PTX.contains(name.to_str().unwrap()));
        }
        // NUL bytes would make cuModuleLoadData stop early.
        assert!(!PTX.contains('\0'));
    }

    #[test]
    fn the_kernels_order_as_seq_cst_atomics_at_system_scope() {
        for op in ["exch.b32", "exch.b64", "cas.b32", "cas.b64", "add.u32", "add.u64", "and.b64", "or.b64", "xor.b64"] {
            assert!(PTX.contains(&format!("atom.acq_rel.sys.{op}")), "{op}");
        }
        assert!(PTX.contains("fence.sc.sys") && PTX.contains("ld.acquire.sys") && PTX.contains("red.release.sys.add.u64"));
    }

    #[test]
    fn op_codes_come_from_the_shared_header() {
        let header = include_str!("../../../../triton-lib/include/rshmem/device_state.h");
        let cases = [
            (AmoOp::Fetch, AmoCode::Fetch, 0, 0, "FETCH"),
            (AmoOp::Set(5), AmoCode::Set, 5, 0, "SET"),
            (AmoOp::Swap(6), AmoCode::Swap, 6, 0, "SWAP"),
            (AmoOp::CompareSwap { cond: 1, value: 2 }, AmoCode::CompareSwap, 1, 2, "COMPARE_SWAP"),
            (AmoOp::Add(7), AmoCode::Add, 7, 0, "ADD"),
            (AmoOp::And(8), AmoCode::And, 8, 0, "AND"),
            (AmoOp::Or(9), AmoCode::Or, 9, 0, "OR"),
            (AmoOp::Xor(10), AmoCode::Xor, 10, 0, "XOR"),
        ];
        for (op, code, a, b, name) in cases {
            assert_eq!(encode(op), (code, a, b), "{op:?}");
            assert!(header.contains(&format!("#define RSHMEM_AMO_{name} {}\n", code as u32)), "{name}");
        }
        assert!(header.contains(&format!("#define RSHMEM_AMO_LOAD_ACQUIRE {}\n", AmoCode::LoadAcquire as u32)));
        let source = include_str!("../../../../triton-lib/src/runtime_kernels.cu");
        for name in ["FETCH", "SET", "SWAP", "COMPARE_SWAP", "ADD", "AND", "OR", "XOR", "LOAD_ACQUIRE"] {
            assert!(source.contains(&format!("RSHMEM_AMO_{name}")), "the kernels handle AMO_{name}");
        }
    }
}
