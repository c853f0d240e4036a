//! GPU memory of one device through the driver's virtual memory management: the cuda backend's
//! [`MemoryBackend`].
//!
//! Chunks are `cuMemCreate` allocations of pinned device memory, exportable as POSIX file
//! descriptors that node-local peers import (`cuMemImportFromShareableHandle`); both are mapped
//! with `cuMemMap` into the heap's reservation and opened read/write (`cuMemSetAccess`) to this
//! PE's GPU and every node-local GPU that reaches it. Peers then reach each other by plain loads,
//! stores and atomics over NVLink or PCIe. NVLink multicast is never used.
//!
//! Release order: mappings (each waits for the context's queued work), chunks, reservations,
//! kernels and private stream, then the primary context. Every RAII type holds an `Arc` of what
//! must outlive it, so any drop order of the handles is safe.
#![allow(unsafe_code)]

use super::{atomic, chunk, kernels, reserve, stream_ops};
use crate::backend::{AmoOp, BackendKind, Chunk, MemoryBackend, Reservation, Width};
use crate::driver::context::{self, Device, PrimaryContext};
use crate::driver::vmm;
use crate::error::{Error, Result};
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// GPU memory of one device, shared with node-local peers by file descriptor.
#[derive(Debug)]
pub struct CudaMemory {
    env: Arc<chunk::ChunkEnv>,
    host_ops: atomic::HostOps,
    kernels: Arc<kernels::Kernels>,
    stream_ops: stream_ops::StreamOps,
}

impl CudaMemory {
    /// Memory on `device` whose mappings are also opened to `peers` (node-local devices
    /// visible in this process that reach `device` by load/store; `device` itself may be in
    /// the list, duplicates are dropped).
    ///
    /// Initialises the driver, retains the device's primary context (the one PyTorch and
    /// Triton use), and loads the runtime's kernels.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without a driver, with a driver older than CUDA 12.0 (`driver::context::MIN_DRIVER_VERSION`), or when the
    /// device cannot export memory as file descriptors; [`Error::Driver`] for other failures.
    pub fn new(device: Device, peers: &[Device]) -> Result<CudaMemory> {
        context::init()?;
        if !device.supports_vmm_fd()? {
            return Err(Error::Unsupported(format!(
                "GPU {} ({}) cannot export memory as POSIX file descriptors through the virtual \
                 memory management API, which the cuda backend needs; use RSHMEM_BACKEND=host",
                device.ordinal(),
                device.name().unwrap_or_default()
            )));
        }
        let mem_ops_64 = device.supports_stream_mem_ops_64()?;
        let ctx = PrimaryContext::retain(device)?;
        let granularity = vmm::granularity(device, true)?;
        let mut access = vec![device];
        for &p in peers {
            if !access.contains(&p) {
                access.push(p);
            }
        }
        let kernels = Arc::new(kernels::Kernels::load(&ctx)?);
        let host_ops = atomic::HostOps::new(&ctx)?;
        let stream_ops = stream_ops::StreamOps::new(kernels.clone(), ctx.clone(), mem_ops_64);
        tracing::debug!(
            device = device.ordinal(),
            granularity,
            access = ?access.iter().map(|d| d.ordinal()).collect::<Vec<_>>(),
            mem_ops_64,
            "cuda backend ready"
        );
        let env = Arc::new(chunk::ChunkEnv { ctx, registry: Arc::default(), access, granularity });
        Ok(CudaMemory { env, host_ops, kernels, stream_ops })
    }

    /// The device this backend allocates on.
    pub fn device(&self) -> Device {
        self.env.ctx.device()
    }

    /// The retained primary context (to bind before other driver calls, e.g. publishing the
    /// device state).
    pub fn context(&self) -> &Arc<PrimaryContext> {
        &self.env.ctx
    }

    /// On-stream puts, gets, signals and waits (`*_on_stream`).
    pub fn stream_ops(&self) -> &stream_ops::StreamOps {
        &self.stream_ops
    }
}

impl MemoryBackend for CudaMemory {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn granularity(&self) -> usize {
        self.env.granularity
    }

    fn reserve(&self, len: usize) -> Result<Box<dyn Reservation>> {
        Ok(Box::new(reserve::reserve(&self.env.ctx, &self.env.registry, len, self.env.granularity)?))
    }

    fn create_chunk(&self, len: usize) -> Result<Box<dyn Chunk>> {
        Ok(Box::new(chunk::create(&self.env, len)?))
    }

    fn import_chunk(&self, fd: OwnedFd, len: usize) -> Result<Box<dyn Chunk>> {
        Ok(Box::new(chunk::import(&self.env, fd, len)?))
    }

    fn adopt_chunk(&self, addr: usize, len: usize) -> Result<Box<dyn Chunk>> {
        Ok(Box::new(chunk::adopt(&self.env, addr, len)?))
    }

    unsafe fn copy(&self, dst: usize, src: usize, len: usize) -> Result<()> {
        // SAFETY: forwarded contract (valid, non-overlapping ranges).
        unsafe { self.host_ops.copy(dst, src, len) }
    }

    fn checks_itself(&self, addr: usize) -> Result<bool> {
        self.env.ctx.bind()?;
        crate::driver::pointer::is_gpu_memory(addr)
    }

    unsafe fn atomic(&self, addr: usize, width: Width, op: AmoOp) -> Result<u64> {
        // SAFETY: forwarded contract (mapped, aligned heap address).
        unsafe { self.host_ops.atomic(&self.kernels, addr, width, op) }
    }

    unsafe fn load_acquire(&self, addr: usize, width: Width) -> Result<u64> {
        // SAFETY: forwarded contract.
        unsafe { self.host_ops.load_acquire(&self.kernels, addr, width) }
    }

    fn quiet(&self) -> Result<()> {
        self.host_ops.quiet()
    }
}
