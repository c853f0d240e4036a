//! `init` and `finalize`, and the device state this PE describes itself with.

use super::team_table::{TeamTable, PREDEFINED};
use super::{workspace, Runtime, DEFAULT_ALIGN};
use crate::backend::{self, BackendKind};
use crate::bootstrap::{Bootstrap, UniqueId};
use crate::device_state::{DeviceState, DEVICE_FLAG_ALL_REACHABLE, MAX_PES, PE_NOT_REACHABLE, STOP_STAGGER_MS};
use crate::env;
use crate::error::{Error, Result};
use crate::heap::layout::Layout;
use crate::heap::{Owner, SymmetricHeap};
use std::sync::Mutex;
use std::time::Duration;

/// How [`Runtime::init`] finds its peers and what it builds. Every field is optional.
#[derive(Debug, Default)]
pub struct InitOptions {
    /// The job's unique id, made by one PE with `UniqueId::new()` and shared by the caller
    /// (torch.distributed, MPI, ...). Goes with `rank` and `nranks`.
    pub uid: Option<UniqueId>,
    /// This PE's rank in `0..nranks`.
    pub rank: Option<usize>,
    /// Number of PEs.
    pub nranks: Option<usize>,
    /// Memory backend; default `RSHMEM_BACKEND`, else cuda when a GPU is visible, else host.
    pub backend: Option<BackendKind>,
    /// GPU ordinal for the cuda backend (ignored by the host backend); default `LOCAL_RANK`,
    /// else this PE's index among the PEs of its host.
    pub device: Option<i32>,
}

impl Runtime {
    /// Joins the job and builds this PE's runtime. Collective: every PE calls it.
    ///
    /// Peers: `uid` + `rank` + `nranks` when given; else the torchrun / mpirun environment
    /// (`UniqueId::from_env`); else a job of one PE. Backend: [`InitOptions::backend`], else
    /// `RSHMEM_BACKEND`, else cuda when the driver loads and sees a GPU, else host. Every PE must
    /// end up with the same backend.
    ///
    /// On cuda, each PE takes GPU [`InitOptions::device`] (else `LOCAL_RANK`, else its index on
    /// its host) and uses its primary context, the one PyTorch and Triton use; node-local PEs
    /// exchange their GPUs' identities, two PEs on one GPU are refused unless
    /// `RSHMEM_ALLOW_SHARED_GPU=1`, and every node-local GPU that reaches this one gets access
    /// to the heap. After the heap and the runtime's symmetric workspace (barrier words, device
    /// team table, collective scratch) exist, the device state is written into the runtime's
    /// kernels, into every module published before an earlier finalize, and into modules handed
    /// over before init (`backend::cuda::registry::defer`). `finalize` then `init` again works.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when only some of `uid`/`rank`/`nranks` are given,
    /// `rank >= nranks`, for a bad device or a shared GPU; [`Error::Config`] for bad `RSHMEM_*`
    /// values; [`Error::Mismatch`] when PEs chose different backends; [`Error::Unsupported`]
    /// for cuda without a usable driver or GPU; [`Error::Driver`]; bootstrap errors
    /// ([`Error::Timeout`], [`Error::Refused`], [`Error::PeerDied`]).
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/setup.html>
    #[doc(alias = "nvshmem_init")]
    #[doc(alias = "nvshmemx_init_attr")]
    pub fn init(opts: InitOptions) -> Result<Runtime> {
        let started = std::time::Instant::now();
        let env = env::env()?;
        crate::log::install(env.log_directives().as_deref());
        let (uid, rank, nranks) = peers(opts.uid, opts.rank, opts.nranks)?;
        crate::log::set_pe(rank, nranks);
        tracing::debug!(nranks, "joining the job");
        let boot = Bootstrap::connect_with(&uid, rank, nranks, env.bootstrap_timeout, env.virtual_hosts)?;
        let kind = BackendKind::choose(opts.backend, env.backend.as_deref())?;
        agree_on_backend(&boot, kind)?;
        let backend = backend::open(kind, &boot, opts.device, env)?;
        let mem = backend.memory();
        let heap = SymmetricHeap::new(mem.clone(), &boot, env.symmetric_size, env.heap_growth)?;
        // Before the first allocation: every growth step is registered with the transport.
        let net = crate::transport::open(&boot, &heap, &*backend, env)?;
        let ws = heap.calloc(&boot, 1, workspace::BYTES)?;
        let coll_ws = heap.malloc(&boot, workspace::COLL_WS_BYTES, DEFAULT_ALIGN)?;
        let staged_ws = match backend.stream_workspace_bytes(nranks) {
            0 => 0,
            bytes => heap.calloc(&boot, 1, bytes)?,
        };
        // The runtime's own words: host calls with a program's addresses refuse them.
        for addr in [ws, coll_ws, staged_ws].into_iter().filter(|&a| a != 0) {
            heap.set_owner(addr, Owner::Runtime)?;
        }
        let reachable: Vec<bool> = (0..nranks).map(|pe| backend.load_store(pe) && heap.ptr(ws, pe).is_some()).collect();
        let teams = TeamTable::new(rank, &boot.node().node_of, &reachable);
        let wait_timeout = env.debug_wait_timeout_ms.map(Duration::from_millis);
        // Device-initiated operations towards other hosts go through the proxy's ring.
        let proxy_ring = net.as_ref().and_then(|n| n.proxy_ring()).unwrap_or(0);
        let mut rt = Runtime {
            net,
            boot,
            heap,
            backend,
            mem,
            reachable,
            teams: Mutex::new(teams),
            workspace: ws,
            staged_ws,
            wait_timeout,
            stuck_report: env.stuck_report,
            coll_hierarchy_min_bytes: env.coll_hierarchy_min_bytes,
        };
        // Split slots are zero already (calloc).
        for slot in 0..PREDEFINED {
            rt.write_team_desc(slot)?;
        }
        let state = device_state(&StateInputs {
            my_pe: rank,
            n_pes: nranks,
            layout: rt.heap.layout(),
            heap_bound: rt.heap.bound(),
            user_base: user_base(rt.heap.my_base(), &[(ws, workspace::BYTES), (coll_ws, workspace::COLL_WS_BYTES), (staged_ws, rt.backend.stream_workspace_bytes(nranks))]),
            reachable: &rt.reachable,
            team_table: ws + workspace::TEAM_TABLE,
            barrier_ws: ws + workspace::BARRIER,
            coll_ws,
            coll_ws_size: workspace::COLL_WS_BYTES_PER_TEAM,
            wait_timeout,
            sharer_index: rt.backend.device_sharer_index(),
            proxy_ring,
            proxy_head: if proxy_ring == 0 { 0 } else { ws + workspace::PROXY_HEAD },
        });
        rt.backend.start(state)?;
        if let Some(notify) = rt.backend.peer_left_notifier() {
            rt.boot.health().on_departure(notify);
        }
        // Every PE's barrier words and team table must be in place before any PE can arrive
        // at a barrier.
        rt.boot.barrier()?;
        tracing::debug!(
            pe = rank,
            n_pes = nranks,
            backend = kind.name(),
            device = ?rt.backend.device(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "rshmem initialized"
        );
        Ok(rt)
    }

    /// Leaves the job (`nvshmem_finalize`) as [`Runtime::finalize_as`] with `"finalize"`.
    ///
    /// # Errors
    /// As [`Runtime::finalize_as`].
    #[doc(alias = "nvshmem_finalize")]
    pub fn finalize(self) -> Result<()> {
        self.finalize_as("finalize")
    }

    /// Leaves the job, saying `how` to the other PEs (the front end's words: "rshmem.finalize()",
    /// "the exit handler after an uncaught KeyError: ..."). Collective, but not a barrier: this
    /// PE completes its own work (a recorded device error, outstanding puts), announces that it
    /// leaves, and waits until every PE has announced it too; a PE still blocked in a barrier,
    /// wait or collective meanwhile fails with [`Error::PeerExited`] naming this PE and `how`,
    /// never mistakes the finalize for its own call. Then the device state is cleared in every
    /// published module, the runtime's kernels unloaded, the heap unmapped and the bootstrap
    /// closed.
    ///
    /// # Errors
    /// A recorded device error ([`Runtime::check_device_error`]) or a failed completion of this
    /// PE's puts; [`Error::PeerDied`] when a peer died instead of finalizing; [`Error::Timeout`]
    /// naming the PEs that did not begin their finalize within `RSHMEM_BOOTSTRAP_TIMEOUT_S`.
    /// This PE's resources are released and it leaves either way.
    pub fn finalize_as(self, how: &str) -> Result<()> {
        let own = self.complete_own_work();
        let left = self.boot.leave(how);
        // Work still queued on the device may touch the heap that is unmapped below.
        let synced = self.backend.synchronize().map_err(|e| self.prefer_device_error(e));
        let unpublished = self.backend.unpublish();
        // The runtime's own allocations end with the heap: no collective free (the peers have
        // left), and every peer is done with this PE's memory (each has announced it leaves).
        let Runtime { boot, heap, backend, mem, net, .. } = self;
        // The transport's proxy, registrations and endpoints go before the heap is unmapped.
        heap.set_grow_hook(None);
        drop(net);
        drop(backend);
        drop(mem);
        drop(heap);
        let closed = boot.finalize();
        own.and(left).and(synced).and(unpublished).and(closed)
    }

    /// What finalize completes before announcing that this PE leaves: a recorded device error,
    /// the proxy's queue (what kernels posted for PEs on other hosts), this PE's puts. Unlike
    /// [`Runtime::quiet`] it does not fail because a peer left.
    fn complete_own_work(&self) -> Result<()> {
        self.check_device_error()?;
        if self.net.as_ref().is_some_and(|n| n.proxy_ring().is_some()) {
            self.backend.synchronize().map_err(|e| self.prefer_device_error(e))?;
        }
        if let Some(net) = &self.net {
            net.quiet()?;
        }
        self.mem.quiet().map_err(|e| self.prefer_device_error(e))
    }
}

/// Everything the device state is made of, gathered by init.
#[derive(Debug, Clone)]
struct StateInputs<'a> {
    my_pe: usize,
    n_pes: usize,
    layout: &'a Layout,
    /// `RSHMEM_SYMMETRIC_SIZE`: the bytes of a slot that may hold symmetric data.
    heap_bound: usize,
    /// [`DeviceState::user_base`].
    user_base: usize,
    /// Per world PE: reachable by load/store (heap slot mapped here and the GPUs connected).
    reachable: &'a [bool],
    team_table: usize,
    barrier_ws: usize,
    coll_ws: usize,
    coll_ws_size: usize,
    wait_timeout: Option<Duration>,
    /// This PE's index among the PEs sharing its GPU (0 on a GPU of its own).
    sharer_index: usize,
    /// The proxy's ring, 0 without one.
    proxy_ring: usize,
    /// Symmetric address of the ticket word, 0 without a proxy.
    proxy_head: usize,
}

/// The device state of `i` (without `error_buf`, which [`Gpu::new`] fills in).
fn device_state(i: &StateInputs<'_>) -> DeviceState {
    let clamp = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
    let mut s = DeviceState::new(clamp(i.my_pe), clamp(i.n_pes));
    s.node_size = clamp(i.layout.nslots());
    s.my_slot = clamp(i.layout.my_slot);
    s.heap_base = i.layout.base as u64;
    s.heap_stride = i.layout.stride as u64;
    s.heap_bound = i.heap_bound.min(i.layout.stride) as u64;
    s.user_base = i.user_base as u64;
    s.team_table = i.team_table as u64;
    s.barrier_ws = i.barrier_ws as u64;
    s.coll_ws = i.coll_ws as u64;
    s.coll_ws_size = i.coll_ws_size as u64;
    s.proxy_ring = i.proxy_ring as u64;
    s.proxy_head = i.proxy_head as u64;
    s.stop_delay_ms = u32::try_from(i.sharer_index).unwrap_or(u32::MAX).saturating_mul(STOP_STAGGER_MS);
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


/// The offset in a heap slot below which only the runtime's own allocations `(address, bytes)`
/// lie: the end of the run of them that starts at `slot_base`, each rounded up to the
/// allocator's unit as the allocator places them (first fit, from an empty heap at init). A
/// runtime allocation after a gap is left out: a program allocation may fill the gap.
fn user_base(slot_base: usize, runtime: &[(usize, usize)]) -> usize {
    let mut allocs: Vec<(usize, usize)> = runtime.iter().copied().filter(|&(a, _)| a != 0).collect();
    allocs.sort_unstable();
    let mut end = 0;
    for (addr, bytes) in allocs {
        if addr.checked_sub(slot_base) != Some(end) {
            break;
        }
        end = (end + bytes).next_multiple_of(crate::heap::allocator::MIN_ALIGN);
    }
    end
}

/// Who we are and whom to join.
fn peers(uid: Option<UniqueId>, rank: Option<usize>, nranks: Option<usize>) -> Result<(UniqueId, usize, usize)> {
    let (uid, rank, nranks) = match (uid, rank, nranks) {
        (Some(u), Some(r), Some(n)) => (u, r, n),
        (None, None, None) => match UniqueId::from_env()? {
            Some(found) => found,
            None => (UniqueId::new()?, 0, 1),
        },
        (u, r, n) => {
            return Err(Error::InvalidArgument(format!(
                "init: uid, rank and nranks go together, got uid {}, rank {r:?}, nranks {n:?}; \
                 pass all three or none (then the torchrun/mpirun environment is used)",
                if u.is_some() { "given" } else { "missing" }
            )))
        }
    };
    if nranks == 0 || rank >= nranks {
        return Err(Error::InvalidArgument(format!(
            "init: rank {rank} is not in 0..{nranks} (nranks must be at least 1)"
        )));
    }
    Ok((uid, rank, nranks))
}

/// Every PE must use the same backend: a heap of host memory cannot map a peer's GPU memory.
fn agree_on_backend(boot: &Bootstrap, kind: BackendKind) -> Result<()> {
    let mine = kind.name();
    let all = boot.allgather(mine.as_bytes())?;
    match all.iter().enumerate().find(|(_, b)| b.as_slice() != mine.as_bytes()) {
        None => Ok(()),
        Some((pe, theirs)) => Err(Error::Mismatch {
            what: "memory backend",
            me: boot.rank(),
            pe,
            mine: mine.to_string(),
            theirs: String::from_utf8_lossy(theirs).into_owned(),
        }),
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
            user_base: 0x900,
            reachable: &reachable,
            team_table: 0x10,
            barrier_ws: 0x20,
            coll_ws: 0x30,
            coll_ws_size: 1 << 20,
            wait_timeout: Some(Duration::from_millis(250)),
            sharer_index: 2,
            proxy_ring: 0,
            proxy_head: 0,
        });
        assert_eq!((s.magic, s.my_pe, s.n_pes, s.node_size, s.my_slot), (DEVICE_STATE_MAGIC, 2, 4, 3, 1));
        assert_eq!(s.flags, DEVICE_FLAG_INITIALIZED, "PE 1 and PE 3 are not reachable");
        assert_eq!((s.heap_base, s.heap_stride), (0x7000_0000_0000, 1 << 30));
        assert_eq!(s.heap_bound, 1 << 30, "the bound never exceeds a slot");
        assert_eq!(s.user_base, 0x900);
        assert_eq!((s.team_table, s.barrier_ws, s.coll_ws, s.coll_ws_size), (0x10, 0x20, 0x30, 1 << 20));
        assert_eq!(s.debug_wait_timeout_ns, 250_000_000);
        assert_eq!(s.stop_delay_ms, 2 * STOP_STAGGER_MS, "the third PE on a GPU stops two steps later");
        assert_eq!(&s.pe_slot[..5], &[0, PE_NOT_REACHABLE, 1, PE_NOT_REACHABLE, PE_NOT_REACHABLE]);
        assert_eq!(s.error_buf, 0);

        let all = [true; 4];
        let one_host = Layout { slot_of: vec![Some(0), Some(1), Some(2), Some(3)], ..l };
        let s = device_state(&StateInputs {
            my_pe: 0,
            n_pes: 4,
            layout: &one_host,
            heap_bound: 4096,
            user_base: 0,
            reachable: &all,
            team_table: 0,
            barrier_ws: 0,
            coll_ws: 0,
            coll_ws_size: 0,
            wait_timeout: None,
            sharer_index: 0,
            proxy_ring: 0,
            proxy_head: 0,
        });
        assert_eq!(s.flags, DEVICE_FLAG_INITIALIZED | DEVICE_FLAG_ALL_REACHABLE);
        assert_eq!((s.heap_bound, s.debug_wait_timeout_ns, s.stop_delay_ms), (4096, 0, 0));
        assert_eq!(&s.pe_slot[..4], &[0, 1, 2, 3]);
    }

    #[test]
    fn user_memory_starts_after_the_runtimes_first_allocations() {
        let base = 0x7000_0000_0000;
        // The workspaces as init makes them: 2088 bytes (rounded to 2304), 4 MiB, then 1000.
        let ws = [(base, 2088), (base + 2304, 4 << 20), (base + 2304 + (4 << 20), 1000)];
        assert_eq!(user_base(base, &ws), 2304 + (4 << 20) + 1024);
        // Absent (0) workspaces are skipped; a gap ends the run.
        assert_eq!(user_base(base, &[(base, 2088), (0, 64)]), 2304);
        assert_eq!(user_base(base, &[(base, 2088), (base + 4096, 64)]), 2304);
        assert_eq!(user_base(base, &[(base + 256, 64)]), 0);
    }

    #[test]
    fn partial_peer_options_are_refused() {
        let err = peers(None, Some(1), None).err().unwrap().to_string();
        assert!(err.contains("uid missing") && err.contains("rank Some(1)"), "{err}");
    }
}
