//! The on-stream building blocks of `*_on_stream` operations: copies and signal updates, queued
//! on a caller's stream (a `torch.cuda.Stream`, say). Addresses of node-local peers are plain
//! addresses inside our own reservation (the heap maps their chunks there), so a put or get is an
//! ordinary async copy between two mapped addresses. (The on-stream wait is a runtime kernel:
//! `stream_kernels.rs`.)
//!
//! # Safety
//! The caller vouches that the addresses stay mapped until the stream has run the operation,
//! hence `unsafe fn`.
#![allow(unsafe_code)]

use super::kernels::Kernels;
use crate::consts::SignalOp;
use crate::driver::context::PrimaryContext;
use crate::driver::stream::{self, StreamHandle};
use crate::error::{Error, Result};
use std::sync::Arc;

/// Stream-ordered puts, gets and signals on symmetric memory.
///
/// Holds the runtime's kernels (for `SIGNAL_ADD`) and the context; cheap to share.
#[derive(Debug, Clone)]
pub struct StreamOps {
    kernels: Arc<Kernels>,
    ctx: Arc<PrimaryContext>,
    mem_ops_64: bool,
}

impl StreamOps {
    pub(crate) fn new(kernels: Arc<Kernels>, ctx: Arc<PrimaryContext>, mem_ops_64: bool) -> StreamOps {
        StreamOps { kernels, ctx, mem_ops_64 }
    }

    fn need_mem_ops(&self, what: &str) -> Result<()> {
        if self.mem_ops_64 {
            return Ok(());
        }
        Err(Error::Unsupported(format!(
            "{what} on a stream needs 64-bit stream memory operations, which GPU {} does not \
             offer (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0)",
            self.ctx.device().ordinal()
        )))
    }

    /// Copies `len` bytes from `src` to `dst` in `stream`'s order: a put when `dst` is a
    /// peer's address, a get when `src` is. Returns once queued.
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuMemcpyAsync`.
    ///
    /// # Safety
    /// Both ranges must stay mapped and valid for `len` bytes until the stream has run the copy,
    /// and must not overlap; `stream` must be a live stream of this PE's device.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/rma.html> (`nvshmemx_putmem_on_stream`)
    #[doc(alias = "nvshmemx_putmem_on_stream")]
    #[doc(alias = "nvshmemx_getmem_on_stream")]
    pub unsafe fn copy(&self, stream: StreamHandle, dst: usize, src: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the caller's contract above.
        unsafe { stream::memcpy_async(dst, src, len, stream) }
    }

    /// Updates the 64-bit signal word at `addr` in `stream`'s order, after (and ordered after,
    /// at system scope) everything queued before it: `Set` is `cuStreamWriteValue64` (whose
    /// default flags include a memory barrier), `Add` is a one-thread kernel doing
    /// `fence.sc.sys; red.release.sys.add.u64`.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without 64-bit stream memory operations (`Set`); [`Error::Driver`].
    ///
    /// # Safety
    /// `addr` must stay a mapped, 8-byte-aligned address until the stream has run the update;
    /// `stream` must be a live stream of this PE's device.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/signal.html> (`nvshmemx_signal_op_on_stream`)
    #[doc(alias = "nvshmemx_signal_op_on_stream")]
    pub unsafe fn signal(&self, stream: StreamHandle, addr: usize, value: u64, op: SignalOp) -> Result<()> {
        check_aligned(addr, "signal")?;
        self.ctx.bind()?;
        match op {
            SignalOp::Set => {
                self.need_mem_ops("SIGNAL_SET")?;
                // SAFETY: the caller's contract above.
                unsafe { stream::write_value64(stream, addr, value) }
            }
            // SAFETY: the caller's contract above.
            SignalOp::Add => unsafe { self.kernels.signal_add(stream, addr, value) },
        }
    }
}

/// Refuses a signal address that is not 8-byte aligned (signals are 64-bit words).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the address.
pub(super) fn check_aligned(addr: usize, what: &str) -> Result<()> {
    if addr % 8 != 0 {
        return Err(Error::InvalidArgument(format!(
            "{what} on a stream: signal address {addr:#x} is not 8-byte aligned (signals are 64-bit words)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_words_must_be_aligned() {
        assert!(check_aligned(0x1008, "wait").is_ok());
        assert!(check_aligned(0x1004, "wait").unwrap_err().to_string().contains("0x1004"));
    }
}
