//! # Safety
//! rshmem's own kernels (`kernels.ptx`), loaded once per backend, and their launches. Each
//! launch passes one pointer per kernel parameter, to a local of the exact type the PTX
//! declares (`.u64` -> `u64`, `.u32` -> `u32`).
//!
//! Why hand-written PTX: these three kernels are a few instructions each, and their memory
//! ordering is the whole point (`fence.sc.sys`, `atom.acq_rel.sys`, `ld.acquire.sys`).
//! `runtime/build.rs` assembles the PTX into cubins like the runtime's other kernels
//! (`device::image::OPS`), so loading it compiles nothing on the GPUs built for.
#![allow(unsafe_code)]

use crate::backend::{AmoOp, Width};
use crate::device::image;
use crate::driver::context::PrimaryContext;
use crate::driver::module::{self, Function, LaunchDims, LoadedModule};
use crate::driver::stream::StreamHandle;
use crate::error::Result;
use std::ffi::{c_void, CStr};
use std::sync::Arc;

/// The PTX text of the kernels.
pub const PTX: &str = include_str!("kernels.ptx");

const AMO32: &CStr = c"rshmemi_amo32";
const AMO64: &CStr = c"rshmemi_amo64";
const SIGNAL_ADD: &CStr = c"rshmemi_signal_add";

/// The op codes `rshmemi_amo32/64` understand (see `kernels.ptx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum AmoCode {
    Fetch = 0,
    Set = 1,
    Swap = 2,
    CompareSwap = 3,
    Add = 4,
    And = 5,
    Or = 6,
    Xor = 7,
    LoadAcquire = 8,
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
    /// (`device::image`).
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

    #[test]
    fn the_loaded_image_is_this_ptx() {
        assert_eq!(image::OPS.ptx, PTX);
    }

    /// The parameter list of `.entry name( ... )` in the PTX text.
    fn entry_params(name: &str) -> Vec<String> {
        let start = PTX.find(&format!(".visible .entry {name}(")).unwrap_or_else(|| panic!("no entry {name}"));
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
        // signal_add; a change to the PTX signature must change the launch code too.
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
    fn op_codes_match_the_ptx_comment_and_branches() {
        assert!(PTX.contains("0 fetch   1 set   2 swap   3 compare-swap   4 add   5 and   6 or   7 xor   8 load-acquire"));
        let cases = [
            (AmoOp::Fetch, AmoCode::Fetch, 0, 0),
            (AmoOp::Set(5), AmoCode::Set, 5, 0),
            (AmoOp::Swap(6), AmoCode::Swap, 6, 0),
            (AmoOp::CompareSwap { cond: 1, value: 2 }, AmoCode::CompareSwap, 1, 2),
            (AmoOp::Add(7), AmoCode::Add, 7, 0),
            (AmoOp::And(8), AmoCode::And, 8, 0),
            (AmoOp::Or(9), AmoCode::Or, 9, 0),
            (AmoOp::Xor(10), AmoCode::Xor, 10, 0),
        ];
        for (op, code, a, b) in cases {
            assert_eq!(encode(op), (code, a, b), "{op:?}");
        }
        // Each code the host sends has a branch in both kernels (8 is tested first).
        for (code, label) in [(0, "FETCH"), (3, "CAS"), (4, "ADD"), (5, "AND"), (6, "OR"), (7, "XOR")] {
            for w in ["A32", "A64"] {
                assert!(PTX.contains(&format!("%op, {code};\n\t@%p{code} bra \t${w}_{label};")), "{w} {code}");
            }
        }
        assert_eq!(AmoCode::LoadAcquire as u32, 8);
        assert!(PTX.contains("setp.eq.u32 \t%p8, %op, 8;\n\t@%p8 bra \t$A64_LOAD_ACQUIRE;"));
    }
}
