//! Host loads, stores, copies and atomics on heap addresses.
//!
//! # Safety
//! Host loads, stores and atomics on raw heap addresses. The callers (`unsafe fn`s of
//! [`crate::backend::MemoryBackend`]) promise the addresses are mapped, aligned and not
//! aliased by Rust references; peers may write the same bytes concurrently, which is why
//! every word access here is atomic.
#![allow(unsafe_code)]

use crate::backend::{AmoOp, Width};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

/// `memcpy` between two ranges this process can reach.
///
/// # Safety
/// Both ranges are valid for `len` bytes and do not overlap.
pub(crate) unsafe fn copy(dst: usize, src: usize, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: the caller guarantees both ranges are valid and disjoint, which is all
    // `copy_nonoverlapping` asks ("src and dst must not overlap", both valid for len bytes).
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, len) }
}

/// Writes `len` zero bytes at `addr`.
///
/// # Safety
/// The range is valid for writes of `len` bytes.
pub(crate) unsafe fn zero(addr: usize, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: the caller guarantees `[addr, addr+len)` is valid for writes.
    unsafe { std::ptr::write_bytes(addr as *mut u8, 0, len) }
}

fn check_aligned(addr: usize, width: Width) -> Result<()> {
    if addr % width.bytes() != 0 || addr == 0 {
        return Err(Error::InvalidArgument(format!(
            "atomic on {addr:#x}: a {}-byte atomic needs a non-null {}-byte-aligned address",
            width.bytes(),
            width.bytes()
        )));
    }
    Ok(())
}

/// Applies `op` and returns the old bits, as one SeqCst read-modify-write.
///
/// `MAP_SHARED` pages are the same physical memory in every process, and x86-64 / AArch64
/// atomics act on physical cache lines, so these are atomic across processes too.
///
/// # Safety
/// `addr` is mapped for `width` bytes.
pub(crate) unsafe fn atomic(addr: usize, width: Width, op: AmoOp) -> Result<u64> {
    check_aligned(addr, width)?;
    Ok(match width {
        Width::W32 => {
            // SAFETY: `AtomicU32::from_ptr` needs an aligned pointer valid for the lifetime
            // used (this call) and only atomic accesses meanwhile: aligned is checked above,
            // validity is the caller's promise, and every access this crate makes is atomic.
            let a = unsafe { AtomicU32::from_ptr(addr as *mut u32) };
            let v = |x: u64| x as u32; // 32-bit words take the low bits of the operand.
            u64::from(match op {
                AmoOp::Fetch => a.load(SeqCst),
                AmoOp::Set(x) | AmoOp::Swap(x) => a.swap(v(x), SeqCst),
                AmoOp::CompareSwap { cond, value } => {
                    a.compare_exchange(v(cond), v(value), SeqCst, SeqCst).unwrap_or_else(|old| old)
                }
                AmoOp::Add(x) => a.fetch_add(v(x), SeqCst),
                AmoOp::And(x) => a.fetch_and(v(x), SeqCst),
                AmoOp::Or(x) => a.fetch_or(v(x), SeqCst),
                AmoOp::Xor(x) => a.fetch_xor(v(x), SeqCst),
            })
        }
        Width::W64 => {
            // SAFETY: as for the 32-bit case above.
            let a = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
            match op {
                AmoOp::Fetch => a.load(SeqCst),
                AmoOp::Set(x) | AmoOp::Swap(x) => a.swap(x, SeqCst),
                AmoOp::CompareSwap { cond, value } => {
                    a.compare_exchange(cond, value, SeqCst, SeqCst).unwrap_or_else(|old| old)
                }
                AmoOp::Add(x) => a.fetch_add(x, SeqCst),
                AmoOp::And(x) => a.fetch_and(x, SeqCst),
                AmoOp::Or(x) => a.fetch_or(x, SeqCst),
                AmoOp::Xor(x) => a.fetch_xor(x, SeqCst),
            }
        }
    })
}

/// Reads a word with acquire ordering.
///
/// # Safety
/// `addr` is mapped for `width` bytes.
pub(crate) unsafe fn load_acquire(addr: usize, width: Width) -> Result<u64> {
    check_aligned(addr, width)?;
    use std::sync::atomic::Ordering::Acquire;
    Ok(match width {
        // SAFETY: as in `atomic`.
        Width::W32 => u64::from(unsafe { AtomicU32::from_ptr(addr as *mut u32) }.load(Acquire)),
        // SAFETY: as in `atomic`.
        Width::W64 => unsafe { AtomicU64::from_ptr(addr as *mut u64) }.load(Acquire),
    })
}
