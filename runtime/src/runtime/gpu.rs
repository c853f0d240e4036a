//! # Safety
//! The cuda side of a runtime: choosing and opening the GPU, the [`DeviceState`] published into
//! every module that links the device library, the host-mapped error record kernels write
//! before they stop, and publishing modules handed over by Triton's load hook
//! ([`Runtime::publish_module`], which is `unsafe`: its caller vouches for the module handle).
#![allow(unsafe_code)]

use super::kernels::RuntimeKernels;
use super::Runtime;
use crate::backend::cuda::CudaBackend;
use crate::bootstrap::Bootstrap;
use crate::consts::Cmp;
use crate::device::registry;
use crate::device::select::{self, DeviceIdentity, LocalPlace};
use crate::device_state::{
    DeviceState, ErrorRecord, DEVICE_FLAG_ALL_REACHABLE, ERROR_FLAG_BAD_ADDRESS, ERROR_FLAG_BAD_ARGUMENT,
    ERROR_FLAG_WAIT_TIMEOUT, MAX_PES, PE_NOT_REACHABLE,
};
use crate::driver::host_mem::PinnedHost;
use crate::driver::module::ModuleHandle;
use crate::error::{Error, Result};
use crate::heap::layout::Layout;
use std::sync::Arc;
use std::time::Duration;

/// The GPU this PE opened: the backend, plus what every node-local PE learned about the others.
pub(super) struct OpenedGpu {
    /// The cuda backend on this PE's device.
    pub backend: Arc<CudaBackend>,
    /// The device's ordinal in this process.
    pub ordinal: i32,
    /// Per world PE: whether this PE's GPU reaches that PE's GPU by load/store (false for PEs on
    /// other hosts).
    pub load_store: Vec<bool>,
    /// How many node-local PEs (this one included) use this PE's GPU: 1 unless the GPU is shared.
    pub sharers: usize,
}

/// This PE's place on its host: the launcher's variables (`LOCAL_RANK`, ...) when set, else its
/// index among the PEs the bootstrap found on its host.
fn local_place(boot: &Bootstrap) -> Result<LocalPlace> {
    let node = boot.node();
    Ok(LocalPlace::from_env()?.unwrap_or(LocalPlace { rank: node.local_index, size: node.local_pes.len() }))
}

/// Collective over all PEs: each selects its GPU (`requested`, else by [`select::choose_ordinal`]'s rule), the
/// node-local PEs exchange their GPUs' identities, refuse two PEs on one GPU unless
/// `allow_shared`, work out who reaches whom, and open the cuda backend with access for every
/// reachable peer GPU visible here. A PE that fails makes every PE fail with an error naming it.
///
/// # Errors
/// [`Error::Unsupported`] without a usable driver or GPU; [`Error::InvalidArgument`] for a bad
/// device ordinal or a shared GPU (naming both PEs and `RSHMEM_ALLOW_SHARED_GPU`);
/// [`Error::Driver`]; bootstrap errors.
pub(super) fn open(boot: &Bootstrap, requested: Option<i32>, allow_shared: bool) -> Result<OpenedGpu> {
    let requested = requested
        .map(|d| {
            usize::try_from(d).map_err(|_| {
                Error::InvalidArgument(format!("device {d} was requested; a CUDA device ordinal is 0 or more"))
            })
        })
        .transpose()?;
    let mine = local_place(boot)
        .and_then(|place| select::select(place, requested, allow_shared))
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
    let sharers = ids.iter().filter(|id| Some(id.uuid) == my_uuid).count().max(1);
    if sharers > 1 {
        tracing::info!(sharers, "this PE's GPU is shared by {sharers} PEs (RSHMEM_ALLOW_SHARED_GPU=1)");
    }
    let reach = select::reachability(device, &ids)?;
    let mut load_store = vec![false; boot.nranks()];
    for ((pe, _), r) in node.iter().zip(&reach) {
        load_store[*pe] = r.load_store;
    }
    let backend = Arc::new(CudaBackend::new(device, &select::access_devices(&reach))?);
    Ok(OpenedGpu { backend, ordinal: device.ordinal() as i32, load_store, sharers })
}

/// Everything the device state is made of, gathered by init.
#[derive(Debug, Clone)]
pub(super) struct StateInputs<'a> {
    pub my_pe: usize,
    pub n_pes: usize,
    pub layout: &'a Layout,
    /// `RSHMEM_SYMMETRIC_SIZE`: the bytes of a slot that may hold symmetric data.
    pub heap_bound: usize,
    /// Per world PE: reachable by load/store (heap slot mapped here and the GPUs connected).
    pub reachable: &'a [bool],
    pub team_table: usize,
    pub barrier_ws: usize,
    pub coll_ws: usize,
    pub coll_ws_size: usize,
    pub wait_timeout: Option<Duration>,
}

/// The device state of `i` (without `error_buf`, which [`Gpu::new`] fills in).
pub(super) fn device_state(i: &StateInputs<'_>) -> DeviceState {
    let clamp = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
    let mut s = DeviceState::new(clamp(i.my_pe), clamp(i.n_pes));
    s.node_size = clamp(i.layout.nslots());
    s.my_slot = clamp(i.layout.my_slot);
    s.heap_base = i.layout.base as u64;
    s.heap_stride = i.layout.stride as u64;
    s.heap_bound = i.heap_bound.min(i.layout.stride) as u64;
    s.team_table = i.team_table as u64;
    s.barrier_ws = i.barrier_ws as u64;
    s.coll_ws = i.coll_ws as u64;
    s.coll_ws_size = i.coll_ws_size as u64;
    s.debug_wait_timeout_ns = i.wait_timeout.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1));
    let mut all = true;
    for pe in 0..i.n_pes {
        let slot = i.layout.slot_of.get(pe).copied().flatten().filter(|_| pe == i.my_pe || i.reachable[pe]);
        all &= slot.is_some();
        if pe < MAX_PES {
            s.pe_slot[pe] = slot.map_or(PE_NOT_REACHABLE, clamp);
        }
    }
    if all && i.n_pes <= MAX_PES {
        s.flags |= DEVICE_FLAG_ALL_REACHABLE;
    }
    s
}

/// The cuda part of a runtime.
///
/// Owns the published state, the error record (page-locked host memory that kernels write
/// through unified addressing) and the runtime's kernel modules, and shares the backend with
/// the heap. Dropping it unloads the kernels (after forgetting them in the registry), frees the
/// record, then lets go of the backend.
pub(super) struct Gpu {
    kernels: RuntimeKernels,
    error_buf: PinnedHost,
    state: Box<DeviceState>,
    pub(super) backend: Arc<CudaBackend>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("device", &self.backend.device().ordinal()).finish_non_exhaustive()
    }
}

impl Gpu {
    /// Allocates the error record, loads the runtime's kernels and writes `state` into them, into
    /// every module remembered from an earlier init, and into modules handed over before init.
    ///
    /// # Errors
    /// [`Error::Driver`]; [`Error::InvalidArgument`] for a module built against another
    /// device-library version (its state global has another size).
    pub(super) fn new(backend: Arc<CudaBackend>, mut state: DeviceState) -> Result<Gpu> {
        let ctx = backend.context().clone();
        let mut error_buf = PinnedHost::new(&ctx, std::mem::size_of::<ErrorRecord>())?;
        for off in (0..error_buf.len()).step_by(8) {
            error_buf.write_u64(off, 0);
        }
        state.error_buf = error_buf.addr() as u64;
        let kernels = RuntimeKernels::load(&ctx, &state)?;
        // SAFETY: remembered and pending modules are live: loaders call `registry::forget`
        // before unloading (the runtime's own modules do in their Drop).
        let republished = unsafe { registry::republish_all(&ctx, &state) }?;
        // SAFETY: as above.
        let pending = unsafe { registry::publish_pending(&ctx, &state) }?;
        tracing::debug!(republished, pending, "device state published");
        Ok(Gpu { kernels, error_buf, state: Box::new(state), backend })
    }

    /// The published state.
    pub(super) fn state(&self) -> &DeviceState {
        &self.state
    }

    /// Whether device code of this PE reaches world PE `pe`'s memory by load/store (the state's
    /// `pe_slot` table, which kernels consult before every remote access).
    pub(super) fn reaches(&self, pe: usize) -> bool {
        self.state.pe_slot.get(pe).is_some_and(|&slot| slot != PE_NOT_REACHABLE)
    }

    /// The runtime's kernels.
    pub(super) fn kernels(&self) -> &RuntimeKernels {
        &self.kernels
    }

    /// The record a kernel wrote before it stopped, if any.
    fn error_record(&self) -> Option<ErrorRecord> {
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
        })
    }

    /// Clears the state in every remembered module (at finalize).
    fn unpublish(&self) -> Result<usize> {
        // SAFETY: as in `new`.
        unsafe { registry::unpublish_all(self.backend.context()) }
    }
}

/// The error for a record a kernel wrote; `describe` names a heap address.
pub(super) fn record_error(rec: &ErrorRecord, describe: impl Fn(usize) -> String, timeout: Option<Duration>) -> Error {
    let addr = rec.addr as usize;
    let at = |a: usize| format!("{a:#x} ({})", describe(a));
    match rec.flag {
        ERROR_FLAG_WAIT_TIMEOUT => Error::WaitTimeout {
            pe: rec.pe.max(0) as usize,
            location: at(addr),
            cmp: i32::try_from(rec.cmp as i64).ok().and_then(|c| Cmp::from_raw(c).ok()).map_or("?", Cmp::symbol),
            expected: rec.expected as i64,
            seen: rec.seen as i64,
            timeout_ms: timeout.map_or(0, |d| d.as_millis() as u64),
        },
        ERROR_FLAG_BAD_ADDRESS => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped: address {} cannot be reached on PE {} by load/store (not a \
             symmetric address, or that PE is not reachable from this GPU); the CUDA context is \
             unusable now, restart the job",
            rec.pe,
            at(addr),
            rec.cmp as i64
        )),
        ERROR_FLAG_BAD_ARGUMENT => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped on a bad argument {} (pointer {}): a comparison or signal \
             operation that is not a CMP_*/SIGNAL_* value, a team this PE is not in, a root outside \
             the team, or a missing workspace; the CUDA context is unusable now, restart the job",
            rec.pe,
            rec.cmp as i64,
            at(addr)
        )),
        other => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped with an error record of unknown kind {other} (address {}): \
             the device library and the runtime come from different versions",
            rec.pe,
            at(addr)
        )),
    }
}

impl Runtime {
    /// Reports an error a kernel of this PE recorded before it stopped (`trap`): a wait past
    /// `RSHMEM_DEBUG_WAIT_TIMEOUT_MS` becomes [`Error::WaitTimeout`] naming the PE, the
    /// allocation and offset, the comparison and the expected and last seen values. Does nothing
    /// on the host backend. Called by `quiet`, `barrier*` and `finalize`; the record stays, so
    /// every later call reports it too (the CUDA context is unusable after a trap).
    ///
    /// # Errors
    /// The recorded error.
    pub fn check_device_error(&self) -> Result<()> {
        let Some(gpu) = &self.gpu else { return Ok(()) };
        match gpu.error_record() {
            None => Ok(()),
            Some(rec) => Err(record_error(&rec, |a| self.heap.describe(a), self.wait_timeout)),
        }
    }

    /// `err`, or the device error that explains it: after a kernel traps, every driver call
    /// fails with a bare launch error, and the record says why.
    pub(super) fn prefer_device_error(&self, err: Error) -> Error {
        match (&err, self.check_device_error()) {
            (Error::Driver { .. }, Err(recorded)) => recorded,
            _ => err,
        }
    }

    /// Writes this PE's device state into a CUDA module (a `CUmodule` as an integer) that links
    /// the device library, and remembers it so a later init writes it again. Returns `false`,
    /// quietly, for a module without the state global, and always on the host backend.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a module built against another device-library version;
    /// [`Error::Driver`] (for instance a module of another device's context).
    ///
    /// # Safety
    /// `module` must be a live module loaded in this PE's device's primary context (what
    /// Triton's `kernel_load_end_hook` hands over), and stay loaded until
    /// `device::registry::forget` is called for it.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/setup.html> (`nvshmemx_cumodule_init`)
    #[doc(alias = "nvshmemx_cumodule_init")]
    pub unsafe fn publish_module(&self, module: usize) -> Result<bool> {
        let Some(gpu) = &self.gpu else { return Ok(false) };
        // SAFETY: the caller's contract above.
        unsafe { registry::publish(gpu.backend.context(), ModuleHandle(module), &gpu.state) }
    }

    /// The device state published into modules (cuda backend only).
    pub fn device_state(&self) -> Option<&DeviceState> {
        self.gpu.as_ref().map(Gpu::state)
    }

    /// Clears the published state (finalize): a kernel launched afterwards sees `magic == 0`.
    pub(super) fn unpublish_device_state(&self) -> Result<()> {
        match &self.gpu {
            Some(gpu) => gpu.unpublish().map(drop),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_state::{DEVICE_FLAG_INITIALIZED, DEVICE_STATE_MAGIC};

    fn layout() -> Layout {
        // Three PEs on this host (slots 0..3), PE 1 on another host.
        Layout { base: 0x7000_0000_0000, stride: 1 << 30, my_slot: 1, slot_of: vec![Some(0), None, Some(1), Some(2)] }
    }

    #[test]
    fn state_describes_layout_reachability_and_workspaces() {
        let l = layout();
        let reachable = [true, false, true, false];
        let s = device_state(&StateInputs {
            my_pe: 2,
            n_pes: 4,
            layout: &l,
            heap_bound: 1 << 40,
            reachable: &reachable,
            team_table: 0x10,
            barrier_ws: 0x20,
            coll_ws: 0x30,
            coll_ws_size: 1 << 20,
            wait_timeout: Some(Duration::from_millis(250)),
        });
        assert_eq!((s.magic, s.my_pe, s.n_pes, s.node_size, s.my_slot), (DEVICE_STATE_MAGIC, 2, 4, 3, 1));
        assert_eq!(s.flags, DEVICE_FLAG_INITIALIZED, "PE 1 and PE 3 are not reachable");
        assert_eq!((s.heap_base, s.heap_stride), (0x7000_0000_0000, 1 << 30));
        assert_eq!(s.heap_bound, 1 << 30, "the bound never exceeds a slot");
        assert_eq!((s.team_table, s.barrier_ws, s.coll_ws, s.coll_ws_size), (0x10, 0x20, 0x30, 1 << 20));
        assert_eq!(s.debug_wait_timeout_ns, 250_000_000);
        assert_eq!(&s.pe_slot[..5], &[0, PE_NOT_REACHABLE, 1, PE_NOT_REACHABLE, PE_NOT_REACHABLE]);
        assert_eq!(s.error_buf, 0);

        let all = [true; 4];
        let one_host = Layout { slot_of: vec![Some(0), Some(1), Some(2), Some(3)], ..l };
        let s = device_state(&StateInputs {
            my_pe: 0,
            n_pes: 4,
            layout: &one_host,
            heap_bound: 4096,
            reachable: &all,
            team_table: 0,
            barrier_ws: 0,
            coll_ws: 0,
            coll_ws_size: 0,
            wait_timeout: None,
        });
        assert_eq!(s.flags, DEVICE_FLAG_INITIALIZED | DEVICE_FLAG_ALL_REACHABLE);
        assert_eq!((s.heap_bound, s.debug_wait_timeout_ns), (4096, 0));
        assert_eq!(&s.pe_slot[..4], &[0, 1, 2, 3]);
    }

    #[test]
    fn error_records_become_errors_naming_pe_address_and_values() {
        let describe = |a: usize| format!("allocation of 64 bytes at heap offset 0, +{}", a - 0x1000);
        let rec = ErrorRecord { flag: ERROR_FLAG_WAIT_TIMEOUT, pe: 1, addr: 0x1008, cmp: 5, expected: 7, seen: 3 };
        let e = record_error(&rec, describe, Some(Duration::from_millis(100)));
        assert!(
            matches!(e, Error::WaitTimeout { pe: 1, cmp: ">=", expected: 7, seen: 3, timeout_ms: 100, .. }),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("PE 1") && msg.contains("0x1008") && msg.contains("+8") && msg.contains(">= 7"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_BAD_ADDRESS, pe: 0, addr: 0x1010, cmp: 3, expected: 0, seen: 0 };
        let msg = record_error(&rec, describe, None).to_string();
        assert!(msg.contains("PE 0") && msg.contains("0x1010") && msg.contains("on PE 3"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_BAD_ARGUMENT, pe: 0, addr: 0x1000, cmp: 77, expected: 0, seen: 0 };
        let msg = record_error(&rec, describe, None).to_string();
        assert!(msg.contains("bad argument 77"), "{msg}");
        let rec = ErrorRecord { flag: 99, ..rec };
        assert!(record_error(&rec, describe, None).to_string().contains("unknown kind 99"));
    }
}
