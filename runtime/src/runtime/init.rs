//! `init` and `finalize`, and the one place that chooses a memory backend.

use super::gpu::{self, Gpu, StateInputs};
use super::team::{TeamTable, PREDEFINED};
use super::{workspace, Runtime, DEFAULT_ALIGN};
use crate::backend::cuda::CudaBackend;
use crate::backend::host::HostBackend;
use crate::backend::{BackendKind, MemoryBackend};
use crate::bootstrap::{Bootstrap, UniqueId};
use crate::driver::context;
use crate::env;
use crate::error::{Error, Result};
use crate::heap::{Owner, SymmetricHeap};
use std::sync::{Arc, Mutex};
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
    /// over before init (`device::registry::defer`). `finalize` then `init` again works.
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
        let (uid, rank, nranks) = peers(opts.uid, opts.rank, opts.nranks)?;
        let boot = Bootstrap::connect(&uid, rank, nranks, env.bootstrap_timeout)?;
        let kind = choose_backend(opts.backend, env.backend.as_deref(), gpu_visible)?;
        agree_on_backend(&boot, kind)?;
        let (backend, cuda, device, load_store, gpu_sharers): (Arc<dyn MemoryBackend>, Option<Arc<CudaBackend>>, _, _, _) = match kind {
            BackendKind::Host => {
                if let Some(d) = opts.device {
                    tracing::debug!(device = d, "host backend: device ordinal ignored");
                }
                (Arc::new(HostBackend::new()), None, None, vec![true; nranks], 0)
            }
            BackendKind::Cuda => {
                let g = gpu::open(&boot, opts.device, env.allow_shared_gpu)?;
                (g.backend.clone(), Some(g.backend), Some(g.ordinal), g.load_store, g.sharers)
            }
        };
        let heap = SymmetricHeap::new(backend.clone(), &boot, env.symmetric_size, env.heap_growth)?;
        let ws = heap.calloc(&boot, 1, workspace::BYTES)?;
        let coll_ws = heap.malloc(&boot, workspace::COLL_WS_BYTES, DEFAULT_ALIGN)?;
        let staged_ws = match kind {
            BackendKind::Cuda => heap.calloc(&boot, 1, workspace::staged::bytes(nranks))?,
            BackendKind::Host => 0,
        };
        // The runtime's own words: host calls with a program's addresses refuse them.
        for addr in [ws, coll_ws, staged_ws].into_iter().filter(|&a| a != 0) {
            heap.set_owner(addr, Owner::Runtime)?;
        }
        let reachable: Vec<bool> = (0..nranks).map(|pe| load_store[pe] && heap.ptr(ws, pe).is_some()).collect();
        let teams = TeamTable::new(rank, &boot.node().node_of, &reachable);
        let wait_timeout = env.debug_wait_timeout_ms.map(Duration::from_millis);
        let mut rt = Runtime {
            boot,
            heap,
            backend,
            kind,
            device,
            gpu_sharers,
            teams: Mutex::new(teams),
            workspace: ws,
            coll_ws,
            staged_ws,
            gpu: None,
            wait_timeout,
            stuck_report: env.stuck_report,
        };
        // Split slots are zero already (calloc).
        for slot in 0..PREDEFINED {
            rt.write_team_desc(slot)?;
        }
        if let Some(cuda) = cuda {
            let state = gpu::device_state(&StateInputs {
                my_pe: rank,
                n_pes: nranks,
                layout: rt.heap.layout(),
                heap_bound: rt.heap.bound(),
                reachable: &reachable,
                team_table: ws + workspace::TEAM_TABLE,
                barrier_ws: ws + workspace::BARRIER,
                coll_ws,
                coll_ws_size: workspace::COLL_WS_BYTES_PER_TEAM,
                wait_timeout,
            });
            rt.gpu = Some(Gpu::new(cuda, state)?);
        }
        // Every PE's barrier words and team table must be in place before any PE can arrive
        // at a barrier.
        rt.boot.barrier()?;
        tracing::debug!(
            pe = rank,
            n_pes = nranks,
            backend = kind.name(),
            device = ?rt.device,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "rshmem initialized"
        );
        Ok(rt)
    }

    /// Leaves the job: reports a recorded device error, a barrier over all PEs, then the device
    /// state is cleared in every published module, the workspaces freed, the runtime's kernels
    /// unloaded, the heap unmapped and the bootstrap closed. Collective.
    ///
    /// # Errors
    /// A recorded device error ([`Runtime::check_device_error`]); [`Error::PeerDied`] /
    /// [`Error::Timeout`] when a peer does not finish; resources of this PE are released
    /// either way.
    #[doc(alias = "nvshmem_finalize")]
    pub fn finalize(self) -> Result<()> {
        self.check_device_error()?;
        self.barrier_all()?;
        self.unpublish_device_state()?;
        let Runtime { boot, heap, workspace, coll_ws, staged_ws, gpu, .. } = self;
        heap.free_runtime_in(&boot, staged_ws)?;
        heap.free_runtime_in(&boot, coll_ws)?;
        heap.free_runtime_in(&boot, workspace)?;
        drop(gpu);
        drop(heap);
        boot.finalize()
    }
}

/// Whether the CUDA driver loads and sees at least one GPU (the default backend's test).
fn gpu_visible() -> bool {
    context::init().is_ok() && context::device_count().is_ok_and(|n| n > 0)
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

/// The backend: the caller's choice, else `RSHMEM_BACKEND`, else cuda when `gpu_visible()`,
/// else host.
fn choose_backend(
    asked: Option<BackendKind>,
    env_value: Option<&str>,
    gpu_visible: impl FnOnce() -> bool,
) -> Result<BackendKind> {
    match (asked, env_value) {
        (Some(kind), _) => Ok(kind),
        (None, Some(name)) => BackendKind::parse(name),
        (None, None) if gpu_visible() => Ok(BackendKind::Cuda),
        (None, None) => Ok(BackendKind::Host),
    }
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

    #[test]
    fn backend_choice_order() {
        let never = || -> bool { panic!("the GPU probe runs only when nothing was asked") };
        assert_eq!(choose_backend(Some(BackendKind::Host), Some("cuda"), never).unwrap(), BackendKind::Host);
        assert_eq!(choose_backend(None, Some("cuda"), never).unwrap(), BackendKind::Cuda);
        assert_eq!(choose_backend(None, Some("host"), never).unwrap(), BackendKind::Host);
        assert_eq!(choose_backend(None, None, || false).unwrap(), BackendKind::Host);
        assert_eq!(choose_backend(None, None, || true).unwrap(), BackendKind::Cuda);
        assert!(choose_backend(None, Some("tpu"), never).unwrap_err().to_string().contains("`host`"));
    }

    #[test]
    fn partial_peer_options_are_refused() {
        let err = peers(None, Some(1), None).err().unwrap().to_string();
        assert!(err.contains("uid missing") && err.contains("rank Some(1)"), "{err}");
    }
}
