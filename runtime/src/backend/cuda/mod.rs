//! The cuda backend: everything rshmem does with GPUs.
//!
//! | file | what |
//! |---|---|
//! | [`select`] | which GPU a PE uses (one rule, before init too), who reaches whom by load/store |
//! | `gpu.rs` | opening the GPU (collective over the node-local PEs), the published state, the error record kernels write |
//! | `memory.rs` | [`CudaMemory`]: the [`MemoryBackend`] (same file roles as `backend::host`: [`reserve`], [`chunk`], `atomic.rs`) |
//! | [`kernels`] | the one-thread kernels of host atomics and the on-stream signal add |
//! | `stream_kernels.rs` | the kernels on a caller's stream: loaded at init; the barriers and the signal wait launched with their parameters, the collectives' kernels as the runtime's [`crate::backend::Launch`] says |
//! | [`stream_ops`] | on-stream copies and signals |
//! | `barrier_order.rs` | host barriers ordered after the barrier kernels queued on streams |
//! | [`registry`] | writing the device state into every loaded module that links the device library |
//! | [`image`] | the kernel modules as built into the crate (PTX and cubins), and which form a GPU loads |
//!
//! Every kernel comes from `triton-lib/src/runtime_kernels.cu`, built by `runtime/build.rs`.
//!
//! # Safety
//! [`CudaBackend`]'s `Streams` methods hand the work to the kernels and stream operations under the
//! contract of [`Streams`]; `publish_module` to [`registry::publish`] under its own.
#![allow(unsafe_code)]

mod atomic;
mod barrier_order;
pub mod chunk;
mod gpu;
pub mod image;
pub mod kernels;
mod memory;
pub mod registry;
pub mod reserve;
pub mod select;
mod stream_kernels;
pub mod stream_ops;

pub use memory::CudaMemory;

use crate::backend::{Agreement, Backend, BackendKind, MemoryBackend, Streams};
use crate::bootstrap::Bootstrap;
use crate::consts::{Cmp, SignalOp};
use crate::device_state::{DeviceState, ErrorRecord};
use crate::driver::context;
use crate::driver::host_mem::PinnedHost;
use crate::driver::module::ModuleHandle;
use crate::driver::stream::StreamHandle;
use crate::env::Env;
use crate::error::{Error, Result};
use std::sync::Arc;

/// Whether the CUDA driver loads and sees at least one GPU (the default backend's test).
pub fn gpu_visible() -> bool {
    context::init().is_ok() && context::device_count().is_ok_and(|n| n > 0)
}

/// The cuda backend of one PE: its GPU's memory, what the node-local PEs learned about each
/// other's GPUs, and once started the runtime's kernels, the published state and the error
/// record. Dropping it unloads the kernels and frees the record; the memory goes with the last
/// `Arc` (the heap holds one).
#[derive(Debug)]
pub struct CudaBackend {
    memory: Arc<CudaMemory>,
    ordinal: i32,
    load_store: Vec<bool>,
    sharers: usize,
    sharer_index: usize,
    gpu: Option<gpu::Gpu>,
}

impl CudaBackend {
    /// Collective over all PEs: each selects its GPU (`device`, else [`select::choose_ordinal`]'s
    /// rule on the launcher's variables), the node-local PEs exchange their GPUs' identities,
    /// refuse two PEs on one GPU unless `RSHMEM_ALLOW_SHARED_GPU`, work out who reaches whom, and
    /// open the GPU's memory with access for every reachable peer GPU visible here.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without a usable driver or GPU; [`Error::InvalidArgument`] for a
    /// bad device ordinal or a shared GPU; [`Error::Driver`]; bootstrap errors.
    pub fn open(boot: &Bootstrap, device: Option<i32>, env: &Env) -> Result<CudaBackend> {
        let g = gpu::open(boot, device, env)?;
        Ok(CudaBackend {
            memory: g.memory,
            ordinal: g.ordinal,
            load_store: g.load_store,
            sharers: g.sharers,
            sharer_index: g.sharer_index,
            gpu: None,
        })
    }

    fn started(&self) -> Result<&gpu::Gpu> {
        self.gpu.as_ref().ok_or_else(|| {
            Error::InvalidArgument("the cuda backend's kernels are used before init published the device state".into())
        })
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn memory(&self) -> Arc<dyn MemoryBackend> {
        self.memory.clone()
    }

    fn device(&self) -> Option<i32> {
        Some(self.ordinal)
    }

    fn device_sharers(&self) -> usize {
        self.sharers
    }

    fn device_sharer_index(&self) -> usize {
        self.sharer_index
    }

    fn load_store(&self, pe: usize) -> bool {
        self.load_store.get(pe).copied().unwrap_or(false)
    }

    fn stream_workspace_bytes(&self, n_pes: usize) -> usize {
        crate::backend::launch::workspace::bytes(n_pes)
    }

    fn streams(&self) -> Option<&dyn Streams> {
        Some(self)
    }

    fn thread_setup(&self) -> Option<crate::backend::ThreadSetup> {
        let ctx = self.memory.context().clone();
        Some(Arc::new(move || ctx.bind()))
    }

    fn ring_memory(&self) -> Result<Box<dyn crate::backend::RingMemory>> {
        let len = crate::backend::RING_BYTES;
        let mut ring = PinnedHost::new(self.memory.context(), len)?;
        for off in (0..len).step_by(8) {
            ring.write_u64(off, 0);
        }
        Ok(Box::new(ring))
    }

    fn start(&mut self, state: DeviceState) -> Result<()> {
        self.gpu = Some(gpu::Gpu::new(self.memory.clone(), state)?);
        Ok(())
    }

    fn device_state(&self) -> Option<&DeviceState> {
        self.gpu.as_ref().map(gpu::Gpu::state)
    }

    fn peer_left_notifier(&self) -> Option<crate::bootstrap::DepartureNotifier> {
        self.gpu.as_ref().map(gpu::Gpu::peer_left_notifier)
    }

    fn device_error(&self) -> Option<ErrorRecord> {
        self.gpu.as_ref()?.error_record()
    }

    unsafe fn publish_module(&self, module: usize) -> Result<bool> {
        let gpu = self.started()?;
        // SAFETY: the caller's contract (`Backend::publish_module`).
        unsafe { registry::publish(self.memory.context(), ModuleHandle(module), gpu.state()) }
    }

    fn unpublish(&self) -> Result<()> {
        match &self.gpu {
            Some(gpu) => gpu.unpublish().map(drop),
            None => Ok(()),
        }
    }

    fn synchronize(&self) -> Result<()> {
        context::synchronize(self.memory.context())
    }
}

/// Kernels write the proxy's ring through unified addressing (cuMemAllocHost memory is
/// page-aligned, so 64-byte aligned as the ring needs).
impl crate::backend::RingMemory for PinnedHost {
    fn addr(&self) -> usize {
        PinnedHost::addr(self)
    }
}

impl Streams for CudaBackend {
    unsafe fn copy(&self, stream: StreamHandle, dst: usize, src: usize, len: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.memory.stream_ops().copy(stream, dst, src, len) }
    }

    unsafe fn signal(&self, stream: StreamHandle, addr: usize, value: u64, op: SignalOp) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.memory.stream_ops().signal(stream, addr, value, op) }
    }

    unsafe fn wait(&self, stream: StreamHandle, addr: usize, cmp: Cmp, value: u64) -> Result<()> {
        stream_ops::check_aligned(addr, "wait")?;
        // SAFETY: forwarded contract.
        unsafe { self.started()?.kernels().signal_wait(stream, addr, cmp.raw(), value) }
    }

    unsafe fn barrier(&self, stream: StreamHandle, team: i32) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.started()?.kernels().barrier(stream, team) }
    }

    unsafe fn agreed_barrier(&self, stream: StreamHandle, team: i32, agree: Agreement) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.started()?.kernels().agreed_barrier(stream, team, agree) }
    }

    unsafe fn launch(&self, stream: StreamHandle, launch: &crate::backend::Launch) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.started()?.kernels().launch(stream, launch) }
    }

    fn queued_done(&self, team: i32) -> Result<bool> {
        self.started()?.kernels().queued_done(team)
    }
}
