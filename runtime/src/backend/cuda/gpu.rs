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
use crate::consts::Cmp;
use crate::device_state::{
    DeviceState, ErrorRecord, BAD_ADDRESS_BOUND_MASK, BAD_ADDRESS_REMOTE, BAD_ADDRESS_RING, BAD_ADDRESS_SEEN, ERROR_FLAG_BAD_ADDRESS, ERROR_FLAG_BAD_ARGUMENT, ERROR_FLAG_MISMATCH, ERROR_FLAG_PROXY, ERROR_FLAG_UNSAFE_ADDRESS, ERROR_FLAG_WAIT_TIMEOUT,
    CHECK_OP_AMO, CHECK_OP_G, CHECK_OP_GET, CHECK_OP_P, CHECK_OP_PUT, CHECK_OP_PUT_SIGNAL, CHECK_OP_SIGNAL,
};
use crate::driver::host_mem::PinnedHost;
use crate::env::{Env, LocalPlace};
use crate::error::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

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
    let sharers = ids.iter().filter(|id| Some(id.uuid) == my_uuid).count().max(1);
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
    Ok(OpenedGpu { memory, ordinal: device.ordinal() as i32, load_store, sharers })
}

/// What a started cuda backend publishes and launches.
///
/// Owns the published state, the error record (page-locked host memory that kernels write
/// through unified addressing) and the runtime's kernel modules, and shares the memory with
/// the heap. Dropping it unloads the kernels (after forgetting them in the registry), frees the
/// record, then lets go of the memory.
pub(super) struct Gpu {
    kernels: RuntimeKernels,
    error_buf: PinnedHost,
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
        let mut error_buf = PinnedHost::new(&ctx, std::mem::size_of::<ErrorRecord>())?;
        for off in (0..error_buf.len()).step_by(8) {
            error_buf.write_u64(off, 0);
        }
        state.error_buf = error_buf.addr() as u64;
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
        })
    }

    /// Clears the state in every remembered module (at finalize).
    pub(super) fn unpublish(&self) -> Result<usize> {
        // SAFETY: as in `new`.
        unsafe { registry::unpublish_all(self.memory.context()) }
    }

    /// The wait timeout device code runs with (`RSHMEM_DEBUG_WAIT_TIMEOUT_MS`), for messages.
    pub(super) fn wait_timeout(&self) -> Option<Duration> {
        Some(self.state.debug_wait_timeout_ns).filter(|&ns| ns > 0).map(Duration::from_nanos)
    }
}

/// The error for a record a kernel wrote; `describe` names a heap address, `timeout` is the
/// wait timeout the kernel ran with.
pub fn record_error(rec: &ErrorRecord, describe: impl Fn(usize) -> String, timeout: Option<Duration>) -> Error {
    let addr = rec.addr as usize;
    let at = |a: usize| format!("{a:#x} ({})", describe(a));
    match rec.flag {
        ERROR_FLAG_WAIT_TIMEOUT => Error::WaitTimeout {
            pe: rec.pe.max(0) as usize,
            // The word says which: a team's barrier words are described as that barrier.
            call: "a wait in a kernel".to_string(),
            location: at(addr),
            cmp: i32::try_from(rec.cmp as i64).ok().and_then(|c| Cmp::from_raw(c).ok()).map_or("?", Cmp::symbol),
            expected: rec.expected as i64,
            seen: rec.seen as i64,
            timeout_ms: timeout.map_or(0, |d| d.as_millis() as u64),
        },
        ERROR_FLAG_BAD_ADDRESS => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped: address {} cannot be reached on PE {} by load/store (not a \
             symmetric address, or that PE is not reachable from this GPU){}; the CUDA context is \
             unusable now, restart the job",
            rec.pe,
            at(addr),
            rec.cmp as i64,
            bad_address_seen(rec)
        )),
        ERROR_FLAG_BAD_ARGUMENT => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped on a bad argument {} (pointer {}): a comparison or signal \
             operation that is not a CMP_*/SIGNAL_* value, a team this PE is not in, a root outside \
             the team, or a missing workspace; the CUDA context is unusable now, restart the job",
            rec.pe,
            rec.cmp as i64,
            at(addr)
        )),
        ERROR_FLAG_UNSAFE_ADDRESS => Error::InvalidArgument(format!(
            "a kernel on PE {} built in check mode (RSHMEM_CHECK=1) stopped before a {} of {} bytes at {} \
             on PE {}: the range is not program memory (the runtime's own words lie below the first \
             program allocation, and nothing lies past the heap bound); the CUDA context is \
             unusable now, restart the job",
            rec.pe,
            check_op_name(rec.expected),
            rec.seen,
            at(addr),
            rec.cmp as i64
        )),
        ERROR_FLAG_MISMATCH => {
            crate::runtime::agree::stream_mismatch(rec.pe.max(0) as usize, rec.addr, rec.cmp, rec.expected, rec.seen)
        }
        ERROR_FLAG_PROXY => Error::Unsupported(format!(
            "a kernel on PE {} stopped: the proxy that carries its operations to PEs on other \
             hosts had failed (waiting at {} for operation {}; the proxy's own error was \
             reported by an earlier call); the CUDA context is unusable now, restart the job",
            rec.pe,
            at(addr),
            rec.expected
        )),
        other => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped with an error record of unknown kind {other} (address {}): \
             the device library and the runtime come from different versions",
            rec.pe,
            at(addr)
        )),
    }
}

/// What the translation of an [`ERROR_FLAG_BAD_ADDRESS`] record saw, as a parenthesis for the
/// message (empty for a record without it): which of its conditions failed is what tells a
/// wrong address from a PE that neither load/store nor the proxy reaches.
fn bad_address_seen(rec: &ErrorRecord) -> String {
    if rec.expected & BAD_ADDRESS_SEEN == 0 {
        return String::new();
    }
    let bound = rec.expected & BAD_ADDRESS_BOUND_MASK;
    let offset = if rec.seen < bound {
        format!("offset {:#x} in this PE's heap slot, within the bound {bound:#x}", rec.seen)
    } else {
        format!("offset {:#x} from this PE's heap slot, outside the bound {bound:#x}", rec.seen)
    };
    let remote = if rec.expected & BAD_ADDRESS_REMOTE != 0 { "on another host" } else { "mapped here" };
    let ring = if rec.expected & BAD_ADDRESS_RING != 0 { "a proxy ring" } else { "no proxy ring" };
    format!(" (the kernel saw: {offset}; the target PE {remote}; {ring} on this PE)")
}

/// The operation of an [`ERROR_FLAG_UNSAFE_ADDRESS`] record (`CHECK_OP_*`).
fn check_op_name(op: u64) -> &'static str {
    match u32::try_from(op).unwrap_or(0) {
        CHECK_OP_PUT => "put",
        CHECK_OP_GET => "get",
        CHECK_OP_P => "single-element put (p)",
        CHECK_OP_G => "single-element get (g)",
        CHECK_OP_SIGNAL => "signal operation",
        CHECK_OP_AMO => "atomic operation",
        CHECK_OP_PUT_SIGNAL => "put with signal",
        _ => "device operation",
    }
}

#[cfg(test)]
mod tests {
    use super::*;


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
        assert!(!msg.contains("the kernel saw"), "{msg}");
        let seen = BAD_ADDRESS_SEEN | BAD_ADDRESS_REMOTE | 0x100_0000;
        let rec = ErrorRecord { flag: ERROR_FLAG_BAD_ADDRESS, pe: 1, addr: 0x1010, cmp: 0, expected: seen, seen: 0x52_2500 };
        let msg = record_error(&rec, describe, None).to_string();
        assert!(msg.contains("offset 0x522500 in this PE's heap slot, within the bound 0x1000000"), "{msg}");
        assert!(msg.contains("target PE on another host") && msg.contains("no proxy ring on this PE"), "{msg}");
        let rec = ErrorRecord { expected: seen | BAD_ADDRESS_RING, seen: u64::MAX - 15, ..rec };
        let msg = record_error(&rec, describe, None).to_string();
        assert!(msg.contains("outside the bound") && msg.contains("a proxy ring on this PE"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_BAD_ARGUMENT, pe: 0, addr: 0x1000, cmp: 77, expected: 0, seen: 0 };
        let msg = record_error(&rec, describe, None).to_string();
        assert!(msg.contains("bad argument 77"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_UNSAFE_ADDRESS, pe: 0, addr: 0x1008, cmp: 1, expected: CHECK_OP_PUT_SIGNAL as u64, seen: 64 };
        let msg = record_error(&rec, describe, None).to_string();
        assert!(msg.contains("PE 0 built in check mode") && msg.contains("put with signal of 64 bytes"), "{msg}");
        assert!(msg.contains("0x1008") && msg.contains("on PE 1"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_PROXY, pe: 1, addr: 0x1000, cmp: 1, expected: 12, seen: 11 };
        let msg = record_error(&rec, describe, None).to_string();
        assert!(msg.contains("PE 1") && msg.contains("proxy") && msg.contains("operation 12"), "{msg}");
        let rec = ErrorRecord { flag: 99, ..rec };
        assert!(record_error(&rec, describe, None).to_string().contains("unknown kind 99"));
    }
}
