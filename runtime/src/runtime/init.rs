//! `init` and `finalize`, and the one place that chooses a memory backend.

use super::team::TeamTable;
use super::{workspace, Runtime};
use crate::backend::host::HostBackend;
use crate::backend::{BackendKind, MemoryBackend};
use crate::bootstrap::{Bootstrap, UniqueId};
use crate::env;
use crate::error::{Error, Result};
use crate::heap::SymmetricHeap;
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
    /// Memory backend; default `RSHMEM_BACKEND`, else host.
    pub backend: Option<BackendKind>,
    /// GPU ordinal for the cuda backend (ignored by the host backend).
    pub device: Option<i32>,
}

impl Runtime {
    /// Joins the job and builds this PE's runtime. Collective: every PE calls it.
    ///
    /// Peers: `uid` + `rank` + `nranks` when given; else the torchrun / mpirun environment
    /// (`UniqueId::from_env`); else a job of one PE. Backend: [`InitOptions::backend`], else
    /// `RSHMEM_BACKEND`, else host. The runtime's own symmetric workspace (barrier counters,
    /// collective scratch) comes from the heap.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when only some of `uid`/`rank`/`nranks` are given or
    /// `rank >= nranks`; [`Error::Config`] for bad `RSHMEM_*` values; [`Error::Mismatch`] when
    /// PEs chose different backends; [`Error::Unsupported`] for a backend this build lacks;
    /// bootstrap errors ([`Error::Timeout`], [`Error::Refused`], [`Error::PeerDied`]).
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
        let kind = choose_backend(opts.backend, env.backend.as_deref())?;
        agree_on_backend(&boot, kind)?;
        let backend = make_backend(kind, opts.device)?;
        let heap = SymmetricHeap::new(backend.clone(), &boot, env.symmetric_size, env.heap_growth)?;
        let ws = heap.calloc(&boot, 1, workspace::BYTES)?;
        // The counters must read zero on every PE before any PE can arrive at a barrier.
        boot.barrier()?;
        let reachable: Vec<bool> = (0..nranks).map(|pe| heap.ptr(ws, pe).is_some()).collect();
        let teams = TeamTable::new(rank, &boot.node().node_of, &reachable);
        tracing::debug!(
            pe = rank,
            n_pes = nranks,
            backend = kind.name(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "rshmem initialized"
        );
        Ok(Runtime {
            boot,
            heap,
            backend,
            kind,
            device: opts.device,
            teams: Mutex::new(teams),
            workspace: ws,
            wait_timeout: env.debug_wait_timeout_ms.map(Duration::from_millis),
        })
    }

    /// Leaves the job: a barrier over all PEs, then the workspace is freed, the heap unmapped
    /// and the bootstrap closed. Collective.
    ///
    /// # Errors
    /// [`Error::PeerDied`] / [`Error::Timeout`] when a peer does not finish; resources of this
    /// PE are released either way.
    #[doc(alias = "nvshmem_finalize")]
    pub fn finalize(self) -> Result<()> {
        self.barrier_all()?;
        let Runtime { boot, heap, workspace, .. } = self;
        heap.free(&boot, workspace)?;
        drop(heap);
        boot.finalize()
    }
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

/// The backend: the caller's choice, else `RSHMEM_BACKEND`, else host. The cuda backend will
/// take the last place ("a GPU is visible") here when it lands.
fn choose_backend(asked: Option<BackendKind>, env_value: Option<&str>) -> Result<BackendKind> {
    match (asked, env_value) {
        (Some(kind), _) => Ok(kind),
        (None, Some(name)) => BackendKind::parse(name),
        (None, None) => Ok(BackendKind::Host),
    }
}

/// Builds the chosen backend.
fn make_backend(kind: BackendKind, device: Option<i32>) -> Result<Arc<dyn MemoryBackend>> {
    match kind {
        BackendKind::Host => {
            if let Some(d) = device {
                tracing::debug!(device = d, "host backend: device ordinal ignored");
            }
            Ok(Arc::new(HostBackend::new()))
        }
        BackendKind::Cuda => Err(Error::Unsupported(
            "the cuda backend is not in this build yet; use backend=\"host\" (RSHMEM_BACKEND=host)".into(),
        )),
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
        assert_eq!(choose_backend(Some(BackendKind::Host), Some("cuda")).unwrap(), BackendKind::Host);
        assert_eq!(choose_backend(None, Some("cuda")).unwrap(), BackendKind::Cuda);
        assert_eq!(choose_backend(None, None).unwrap(), BackendKind::Host);
        assert!(choose_backend(None, Some("tpu")).unwrap_err().to_string().contains("`host`"));
        let err = make_backend(BackendKind::Cuda, None).err().unwrap().to_string();
        assert!(err.contains("RSHMEM_BACKEND=host"), "{err}");
    }

    #[test]
    fn partial_peer_options_are_refused() {
        let err = peers(None, Some(1), None).err().unwrap().to_string();
        assert!(err.contains("uid missing") && err.contains("rank Some(1)"), "{err}");
    }
}
