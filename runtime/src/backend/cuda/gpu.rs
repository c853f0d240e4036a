//! Opening this PE's GPU (collective over the node-local PEs), the state published once the heap
//! exists, and the host-mapped error record kernels write before they stop.
//!
//! # Safety
//! The registry calls publish into modules that loaders keep live until they forget them
//! (`registry::forget`); the error record is page-locked host memory owned here.
#![allow(unsafe_code)]

use super::memory::CudaMemory;
use super::registry;
use super::select::{self, DeviceIdentity};
use super::stream_kernels::RuntimeKernels;
use crate::bootstrap::Bootstrap;
use crate::device_state::{DeviceState, ErrorRecord};
use crate::driver::host_mem::PinnedHost;
use crate::env::{Env, LocalPlace};
use crate::error::{Error, Result};
use std::sync::Arc;

/// Where the `peer_left` word lies in the error record's page-locked buffer: right after the record.
const PEER_LEFT_OFFSET: usize = std::mem::size_of::<ErrorRecord>();

/// The GPU this PE opened: its memory, plus what every node-local PE learned about the others.
pub(super) struct OpenedGpu {
    /// GPU memory of this PE's device.
    pub memory: Arc<CudaMemory>,
    /// The device's ordinal in this process.
    pub ordinal: i32,
    /// Per world PE: whether this PE's GPU reaches that PE's GPU by load/store (false for PEs on
    /// other hosts).
    pub load_store: Vec<bool>,
    /// How many node-local PEs (this one included) use this PE's GPU: 1 unless the GPU is shared.
    pub sharers: usize,
    /// This PE's index among them, in PE order (0 on a GPU of its own).
    pub sharer_index: usize,
}

/// This PE's place on its host: the launcher's variables (`LOCAL_RANK`, ..., read by `env.rs`)
/// when set, else its index among the PEs the bootstrap found on its host.
fn local_place(boot: &Bootstrap, env: &Env) -> LocalPlace {
    let node = boot.node();
    env.local_place.unwrap_or(LocalPlace { rank: node.local_index, size: node.local_pes.len() })
}

/// Collective over all PEs: each selects its GPU (`requested`, else by [`select::choose_ordinal`]'s rule), the
/// node-local PEs exchange their GPUs' identities, refuse two PEs on one GPU unless
/// `allow_shared`, work out who reaches whom, and open the cuda backend with access for every
/// reachable peer GPU visible here. A PE that fails makes every PE fail with an error naming it.
///
/// # Errors
/// [`Error::Unsupported`] without a usable driver or GPU, or when two GPUs of one host have no
/// peer access ([`select::check_peer_access`]); [`Error::InvalidArgument`] for a bad
/// device ordinal or a shared GPU (naming both PEs and `RSHMEM_ALLOW_SHARED_GPU`);
/// [`Error::Driver`]; bootstrap errors.
pub(super) fn open(boot: &Bootstrap, requested: Option<i32>, env: &Env) -> Result<OpenedGpu> {
    let allow_shared = env.allow_shared_gpu;
    let requested = requested
        .map(|d| {
            usize::try_from(d).map_err(|_| {
                Error::InvalidArgument(format!("device {d} was requested; a CUDA device ordinal is 0 or more"))
            })
        })
        .transpose()?;
    let mine = select::select(local_place(boot, env), requested, allow_shared)
        .and_then(|dev| Ok((dev, DeviceIdentity::of(dev)?)));
    // Everyone learns whether everyone got a GPU, so a failure is an error on every PE rather
    // than a hang in the next collective.
    let payload = match &mine {
        Ok((_, id)) => [&[1u8][..], &id.to_bytes()].concat(),
        Err(e) => [&[0u8][..], e.to_string().as_bytes()].concat(),
    };
    let all = boot.allgather(&payload)?;
    let (device, _) = mine?;
    if let Some((pe, msg)) = all.iter().enumerate().find(|(_, b)| b.first() != Some(&1)) {
        return Err(Error::Unsupported(format!(
            "PE {pe} could not open its GPU ({}), so the cuda backend cannot start on any PE",
            String::from_utf8_lossy(msg.get(1..).unwrap_or_default())
        )));
    }
    let me = boot.rank();
    let node: Vec<(usize, DeviceIdentity)> = boot
        .node()
        .local_pes
        .iter()
        .map(|&pe| Ok((pe, DeviceIdentity::from_bytes(&all[pe][1..])?)))
        .collect::<Result<_>>()?;
    // Check every node-local PE, not only this one, so all of them fail alike.
    for &(pe, _) in &node {
        match select::check_distinct(&node, pe, allow_shared) {
            Ok(()) => {}
            Err(e) if pe == me => return Err(e),
            Err(e) => {
                let why = match e {
                    Error::InvalidArgument(m) => m,
                    other => other.to_string(),
                };
                return Err(Error::InvalidArgument(format!("PE {me} cannot start because, on its host, {why}")));
            }
        }
    }
    let ids: Vec<DeviceIdentity> = node.iter().map(|(_, id)| id.clone()).collect();
    let my_uuid = node.iter().find(|(pe, _)| *pe == me).map(|(_, id)| id.uuid);
    let sharing: Vec<usize> = node.iter().filter(|(_, id)| Some(id.uuid) == my_uuid).map(|&(pe, _)| pe).collect();
    let sharers = sharing.len().max(1);
    let sharer_index = sharing.iter().filter(|&&pe| pe < me).count();
    if sharers > 1 {
        tracing::info!(sharers, "this PE's GPU is shared by {sharers} PEs (RSHMEM_ALLOW_SHARED_GPU=1)");
    }
    let reach = select::reachability(device, &ids)?;
    // Peer access is a property of a pair, so a PE whose own peers all reach it must still learn
    // that two others do not, and stop rather than wait in the heap's first collective.
    let verdict = select::check_peer_access(me, &node, &reach);
    let payload = match &verdict {
        Ok(()) => vec![1u8],
        Err(e) => [&[0u8][..], e.to_string().as_bytes()].concat(),
    };
    let all = boot.allgather(&payload)?;
    verdict?;
    if let Some((pe, msg)) = all.iter().enumerate().find(|(_, b)| b.first() != Some(&1)) {
        return Err(Error::Unsupported(format!(
            "PE {me} cannot start because PE {pe} cannot: {}",
            String::from_utf8_lossy(msg.get(1..).unwrap_or_default())
        )));
    }
    let mut load_store = vec![false; boot.nranks()];
    for ((pe, _), r) in node.iter().zip(&reach) {
        load_store[*pe] = r.load_store;
    }
    let memory = Arc::new(CudaMemory::new(device, &select::access_devices(&reach))?);
    Ok(OpenedGpu { memory, ordinal: device.ordinal() as i32, load_store, sharers, sharer_index })
}

/// What a started cuda backend publishes and launches.
///
/// Owns the published state, the error record (page-locked host memory that kernels write
/// through unified addressing) and the runtime's kernel modules, and shares the memory with
/// the heap. Dropping it unloads the kernels (after forgetting them in the registry), frees the
/// record, then lets go of the memory.
pub(super) struct Gpu {
    kernels: RuntimeKernels,
    /// The error record, then the `peer_left` word (shared with the bootstrap's watchers).
    error_buf: Arc<PinnedHost>,
    state: Box<DeviceState>,
    pub(super) memory: Arc<CudaMemory>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("device", &self.memory.device().ordinal()).finish_non_exhaustive()
    }
}

impl Gpu {
    /// Allocates the error record, loads the runtime's kernels and writes `state` into them, into
    /// every module remembered from an earlier init, and into modules handed over before init.
    ///
    /// # Errors
    /// [`Error::Driver`]; [`Error::InvalidArgument`] for a module built against another
    /// device-library version (its state global has another size).
    pub(super) fn new(memory: Arc<CudaMemory>, mut state: DeviceState) -> Result<Gpu> {
        let ctx = memory.context().clone();
        let mut error_buf = PinnedHost::new(&ctx, PEER_LEFT_OFFSET + 8)?;
        for off in (0..error_buf.len()).step_by(8) {
            error_buf.write_u64(off, 0);
        }
        state.error_buf = error_buf.addr() as u64;
        state.peer_left = (error_buf.addr() + PEER_LEFT_OFFSET) as u64;
        let error_buf = Arc::new(error_buf);
        // What every kernel will translate with: a BAD_ADDRESS record's "the kernel saw" is
        // compared with this line of RSHMEM_LOG=debug.
        let n = usize::try_from(state.n_pes).unwrap_or(0).min(state.pe_slot.len());
        tracing::debug!(
            my_pe = state.my_pe,
            my_slot = state.my_slot,
            heap_base = format_args!("{:#x}", state.heap_base),
            heap_stride = format_args!("{:#x}", state.heap_stride),
            heap_bound = format_args!("{:#x}", state.heap_bound),
            user_base = format_args!("{:#x}", state.user_base),
            proxy_ring = format_args!("{:#x}", state.proxy_ring),
            pe_slot = ?&state.pe_slot[..n.min(16)],
            "device state"
        );
        let kernels = RuntimeKernels::load(&ctx, &state)?;
        // SAFETY: remembered and pending modules are live: loaders call `registry::forget`
        // before unloading (the runtime's own modules do in their Drop).
        let republished = unsafe { registry::republish_all(&ctx, &state) }?;
        // SAFETY: as above.
        let pending = unsafe { registry::publish_pending(&ctx, &state) }?;
        tracing::debug!(republished, pending, "device state published");
        Ok(Gpu { kernels, error_buf, state: Box::new(state), memory })
    }

    /// The published state.
    pub(super) fn state(&self) -> &DeviceState {
        &self.state
    }

    /// The runtime's kernels.
    pub(super) fn kernels(&self) -> &RuntimeKernels {
        &self.kernels
    }

    /// The record a kernel wrote before it stopped, if any.
    pub(super) fn error_record(&self) -> Option<ErrorRecord> {
        let head = self.error_buf.read_u64(0);
        let flag = head as u32;
        if flag <= crate::device_state::ERROR_FLAG_WRITING {
            return None;
        }
        // The kernel stores the flag last, with release: the rest is complete now.
        Some(ErrorRecord {
            flag,
            pe: (head >> 32) as u32 as i32,
            addr: self.error_buf.read_u64(8),
            cmp: self.error_buf.read_u64(16),
            expected: self.error_buf.read_u64(24),
            seen: self.error_buf.read_u64(32),
            missing: self.error_buf.read_u64(40),
        })
    }

    /// What writes a peer's departure (`DeviceState::peer_left`) where this PE's kernels' waits
    /// look; it keeps the word's memory alive for as long as it is held.
    pub(super) fn peer_left_notifier(&self) -> crate::bootstrap::DepartureNotifier {
        let buf = self.error_buf.clone();
        Arc::new(move |word| buf.store_u64(PEER_LEFT_OFFSET, word))
    }

    /// Clears the state in every remembered module (at finalize).
    pub(super) fn unpublish(&self) -> Result<usize> {
        // SAFETY: as in `new`.
        unsafe { registry::unpublish_all(self.memory.context()) }
    }
}
