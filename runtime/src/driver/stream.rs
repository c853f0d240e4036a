//! Streams, events, copies and stream memory operations.
//!
//! References: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html>,
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html>,
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEMOP.html>,
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html>
//!
//! # Safety
//! Streams, events, copies and stream memory operations. Copies and memory operations take raw
//! addresses, so they are `unsafe fn`: the caller vouches that the ranges are valid for the whole
//! time the stream needs them. [`Stream`] and [`Event`] own their handles and destroy them once.
#![allow(unsafe_code)]

use super::context::PrimaryContext;
use super::{check, sys};
use crate::error::Result;
use std::sync::Arc;

/// A `CUstream` as an integer (`torch.cuda.Stream.cuda_stream`); 0 is the legacy default
/// stream. Not owned: whoever made it destroys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamHandle(pub usize);

impl StreamHandle {
    pub(crate) fn raw(self) -> sys::CUstream {
        self.0 as sys::CUstream
    }
}

/// A stream rshmem made for its own work.
///
/// Created `CU_STREAM_NON_BLOCKING`, so it never waits for (nor holds up) work on the legacy
/// default stream: a host atomic must be able to release a kernel that spins on the default
/// stream. Owns the `CUstream`; dropping it destroys the stream (the driver lets queued work
/// finish first), then lets go of the context.
#[derive(Debug)]
pub struct Stream {
    raw: sys::CUstream,
    ctx: Arc<PrimaryContext>,
}

// SAFETY: a CUstream is a driver handle that any thread may use with its context current; the
// driver API is thread-safe. It is never dereferenced here.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// `cuStreamCreate(CU_STREAM_NON_BLOCKING)` in `ctx`.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub fn new(ctx: &Arc<PrimaryContext>) -> Result<Stream> {
        ctx.bind()?;
        let mut raw: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: "Creates a stream and returns a handle in phStream"; `raw` is a live local.
        check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut raw, flags) })?;
        Ok(Stream { raw, ctx: ctx.clone() })
    }

    /// The stream as a [`StreamHandle`], for the functions below.
    pub fn handle(&self) -> StreamHandle {
        StreamHandle(self.raw as usize)
    }

    /// Waits until all work queued on the stream is done (`cuStreamSynchronize`).
    ///
    /// # Errors
    /// [`crate::Error::Driver`], including errors of earlier asynchronous work.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        synchronize(self.handle())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let destroyed = self.ctx.bind().and_then(|()| {
            // SAFETY: "Destroys the stream specified by hStream"; we created it and destroy it
            // once, here. Queued work still completes ("the function will return immediately
            // and the resources ... released automatically once the device has completed").
            check("cuStreamDestroy_v2", unsafe { sys::cuStreamDestroy_v2(self.raw) })
        });
        if let Err(e) = destroyed {
            super::deferred::record("rshmem's stream", e);
        }
    }
}

/// `cuStreamSynchronize` on any stream.
///
/// # Errors
/// [`crate::Error::Driver`].
pub fn synchronize(stream: StreamHandle) -> Result<()> {
    // SAFETY: "Waits until the device has completed all operations in the stream"; a dead
    // handle yields CUDA_ERROR_INVALID_HANDLE / CONTEXT_IS_DESTROYED rather than UB for
    // handles the driver tracks, and our handles are live.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(stream.raw()) })
}

/// `cuStreamIsCapturing`: whether `stream` is being captured into a CUDA graph (work queued on
/// it then becomes graph nodes, run at each replay rather than now).
///
/// # Errors
/// [`crate::Error::Driver`] (for instance the legacy stream queried while another stream
/// captures in global mode).
pub fn is_capturing(stream: StreamHandle) -> Result<bool> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: "Returns a stream's capture status" into *captureStatus, a live local; the caller's
    // handle is live (as for every function taking a StreamHandle).
    check("cuStreamIsCapturing", unsafe { sys::cuStreamIsCapturing(stream.raw(), &mut status) })?;
    Ok(status as u32 != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE as u32)
}

/// An event, made with timing disabled (the cheapest kind, for ordering only).
///
/// Owns the `CUevent`; dropping it destroys the event, then lets go of the context.
#[derive(Debug)]
pub struct Event {
    raw: sys::CUevent,
    ctx: Arc<PrimaryContext>,
}

// SAFETY: as for Stream: a thread-safe driver handle, never dereferenced.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// `cuEventCreate(CU_EVENT_DISABLE_TIMING)`.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub fn new(ctx: &Arc<PrimaryContext>) -> Result<Event> {
        ctx.bind()?;
        let mut raw: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: "Creates an event *phEvent for the current context"; live local.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut raw, flags) })?;
        Ok(Event { raw, ctx: ctx.clone() })
    }

    /// `cuEventRecord`: the event completes when all work queued on `stream` so far is done.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub fn record(&self, stream: StreamHandle) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: "Captures in event the contents of stream at the time of this call"; both
        // handles are live.
        check("cuEventRecord", unsafe { sys::cuEventRecord(self.raw, stream.raw()) })
    }

    /// `cuStreamWaitEvent`: work queued on `stream` later waits for this event.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub fn wait_on(&self, stream: StreamHandle) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: "Makes all future work submitted to hStream wait for all work captured in
        // hEvent"; flags must be 0; both handles are live.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(stream.raw(), self.raw, 0) })
    }

    /// `cuEventQuery`: whether all work captured by the last record has completed (`true` also
    /// for an event never recorded).
    ///
    /// # Errors
    /// [`crate::Error::Driver`] for any status but success and `CUDA_ERROR_NOT_READY` (an error
    /// of the recorded work included).
    pub fn query(&self) -> Result<bool> {
        self.ctx.bind()?;
        // SAFETY: "Queries the status of all work currently captured by hEvent"; returns
        // CUDA_SUCCESS when done, CUDA_ERROR_NOT_READY while not; the handle is live.
        let r = unsafe { sys::cuEventQuery(self.raw) };
        if r as u32 == sys::CUresult::CUDA_ERROR_NOT_READY as u32 {
            return Ok(false);
        }
        check("cuEventQuery", r).map(|()| true)
    }

    /// `cuEventSynchronize`: blocks the host until the event completes.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: "Waits until the completion of all work currently captured in hEvent".
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.raw) })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let destroyed = self.ctx.bind().and_then(|()| {
            // SAFETY: "Destroys the event specified by hEvent"; ours, destroyed once.
            check("cuEventDestroy_v2", unsafe { sys::cuEventDestroy_v2(self.raw) })
        });
        if let Err(e) = destroyed {
            super::deferred::record("an rshmem event", e);
        }
    }
}

/// `cuMemcpyAsync`: copies `len` bytes from `src` to `dst` in stream order. With unified
/// addressing the driver infers the direction, so any pair of device addresses (own or a
/// peer's memory mapped into our reservation), page-locked or pageable host addresses works.
///
/// # Errors
/// [`crate::Error::Driver`].
///
/// # Safety
/// Both ranges must be valid for `len` bytes until the copy is done (pageable host memory:
/// until this returns) and must not overlap; the stream's context is current.
pub unsafe fn memcpy_async(dst: usize, src: usize, len: usize, stream: StreamHandle) -> Result<()> {
    // SAFETY: "Copies data between two pointers ... Note that this function infers the type of
    // the transfer (host to host, host to device, device to device, or device to host) from the
    // pointer values"; the caller's contract above.
    check("cuMemcpyAsync", unsafe {
        sys::cuMemcpyAsync(dst as sys::CUdeviceptr, src as sys::CUdeviceptr, len, stream.raw())
    })
}

/// `cuMemcpyPeerAsync`: copies between memory of two contexts. Within one process the heap
/// maps peers' memory into our own reservation, so [`memcpy_async`] is the usual choice; this
/// one is for memory allocated in another context.
///
/// # Errors
/// [`crate::Error::Driver`].
///
/// # Safety
/// As [`memcpy_async`]; `dst` belongs to `dst_ctx`, `src` to `src_ctx`.
pub unsafe fn memcpy_peer_async(
    dst: usize,
    dst_ctx: &PrimaryContext,
    src: usize,
    src_ctx: &PrimaryContext,
    len: usize,
    stream: StreamHandle,
) -> Result<()> {
    // SAFETY: "Copies from device memory in one context to device memory in another context";
    // the caller's contract above; both contexts are retained by the references.
    check("cuMemcpyPeerAsync", unsafe {
        sys::cuMemcpyPeerAsync(
            dst as sys::CUdeviceptr,
            dst_ctx.raw(),
            src as sys::CUdeviceptr,
            src_ctx.raw(),
            len,
            stream.raw(),
        )
    })
}

/// Copies `src` to device address `dst` and waits for the copy, on a stream of its own.
///
/// Not `cuMemcpyHtoD`: that copy runs in the legacy default stream, which waits for every
/// kernel queued on blocking streams first, including a kernel spinning in a barrier or a
/// signal wait that needs this very process to go on (a Triton kernel loaded, and its state
/// written, between two communicating kernels would deadlock). A non-blocking stream waits for
/// nothing; the stream is created and destroyed here (a few microseconds), which writes of the
/// device state at module load can afford.
///
/// # Errors
/// [`crate::Error::Driver`].
///
/// # Safety
/// `[dst, dst+src.len())` must be valid device memory of `ctx`.
pub unsafe fn copy_to_device_sync(ctx: &PrimaryContext, dst: usize, src: &[u8]) -> Result<()> {
    ctx.bind()?;
    let mut raw: sys::CUstream = std::ptr::null_mut();
    let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
    // SAFETY: "Creates a stream and returns a handle in phStream"; `raw` is a live local.
    check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut raw, flags) })?;
    let stream = StreamHandle(raw as usize);
    // SAFETY: the caller vouches for `dst`; `src` is a live slice that outlives the copy, which
    // is finished when `synchronize` returns, before the slice can go away.
    let copied =
        unsafe { memcpy_async(dst, src.as_ptr() as usize, src.len(), stream) }.and_then(|()| synchronize(stream));
    // SAFETY: destroys the stream created above, once; nothing is queued on it any more.
    let destroyed = check("cuStreamDestroy_v2", unsafe { sys::cuStreamDestroy_v2(raw) });
    copied.and(destroyed)
}

/// `cuStreamWriteValue64_v2`: in stream order, stores `value` at `addr` (8-byte aligned).
/// With default flags the driver orders every earlier write of the stream before it, like a
/// system-scope fence (`CU_STREAM_WRITE_VALUE_DEFAULT`; `NO_MEMORY_BARRIER` is not offered).
///
/// # Errors
/// [`crate::Error::Driver`] (`CUDA_ERROR_NOT_SUPPORTED` on devices without 64-bit stream
/// memory operations).
///
/// # Safety
/// `addr` must stay a mapped, device-accessible, 8-byte-aligned address until the write runs.
pub unsafe fn write_value64(stream: StreamHandle, addr: usize, value: u64) -> Result<()> {
    let flags = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
    // SAFETY: "Write a value to memory ... The device ... must support
    // CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS"; the caller's contract above.
    check("cuStreamWriteValue64_v2", unsafe {
        sys::cuStreamWriteValue64_v2(stream.raw(), addr as sys::CUdeviceptr, value, flags)
    })
}

/// What [`wait_value64`] waits for. These are all the driver offers
/// (`CUstreamWaitValue_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitCmp {
    /// `(int64_t)(*addr - value) >= 0`: "greater or equal" in wrapping (cyclic) arithmetic.
    Geq,
    /// `*addr == value`.
    Eq,
    /// `(*addr & value) != 0`.
    And,
    /// `~(*addr | value) != 0`.
    Nor,
}

impl WaitCmp {
    fn flag(self) -> u32 {
        use sys::CUstreamWaitValue_flags::*;
        (match self {
            WaitCmp::Geq => CU_STREAM_WAIT_VALUE_GEQ,
            WaitCmp::Eq => CU_STREAM_WAIT_VALUE_EQ,
            WaitCmp::And => CU_STREAM_WAIT_VALUE_AND,
            WaitCmp::Nor => CU_STREAM_WAIT_VALUE_NOR,
        }) as u32
    }
}

/// `cuStreamWaitValue64_v2`: work queued on `stream` after this waits until the 64-bit word at
/// `addr` satisfies `cmp` against `value`.
///
/// # Errors
/// [`crate::Error::Driver`] (`CUDA_ERROR_NOT_SUPPORTED` on devices without 64-bit stream
/// memory operations).
///
/// # Safety
/// `addr` must stay a mapped, device-accessible, 8-byte-aligned address until the wait ends.
pub unsafe fn wait_value64(stream: StreamHandle, addr: usize, value: u64, cmp: WaitCmp) -> Result<()> {
    // SAFETY: "Enqueues a synchronization of the stream on the given memory location. Work
    // ordered after the operation will block until the given condition on the memory is
    // satisfied"; the caller's contract above.
    check("cuStreamWaitValue64_v2", unsafe {
        sys::cuStreamWaitValue64_v2(stream.raw(), addr as sys::CUdeviceptr, value, cmp.flag())
    })
}
