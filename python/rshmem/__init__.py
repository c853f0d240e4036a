"""rshmem: a SHMEM runtime for GPUs, for Triton kernels and PyTorch programs.

Every process (a *PE*) owns a symmetric heap that the other PEs can read, write and update
atomically, from the host, on a CUDA stream, and inside Triton kernels. A program::

    import torch, rshmem, rshmem.torch
    rshmem.init()                                           # under torchrun: every PE calls it
    me, n = rshmem.my_pe(), rshmem.n_pes()
    x = rshmem.torch.create_symmetric_tensor((1024,), torch.float32)   # collective
    x.fill_(me)
    rshmem.barrier_all()
    rshmem.getmem(x, x, (me + 1) % n)                      # x <- the next PE's x
    rshmem.torch.free_tensor(x)
    rshmem.finalize()

The functions you call
----------------------
- start and stop: `init`, `finalize`, `my_pe`, `n_pes`, `is_initialized`, `backend`
- symmetric memory: `rshmem.torch.create_symmetric_tensor`, `rshmem.torch.free_tensor`,
  `rshmem.torch.peer_tensor` (a node-local peer's copy as a tensor); raw: `malloc`, `free`, `ptr`
- host RMA (blocks until done): `putmem(dst, src, pe)`, `getmem(dst, src, pe)`, `put`, `get`,
  `p`, `g`; atomics `atomic_fetch_add(dst, value, pe)`, ...
- signals and waits: `putmem_signal(dst, src, sig, value, sig_op, pe)`, `signal_op`,
  `signal_wait_until(sig, cmp, value)`, `wait_until(ivar, cmp, value)`, `test`
- ordering: `barrier_all`, `barrier(team)`, `sync_all`, `quiet`, `fence`
- collectives (every PE of the team calls them): `broadcast(dst, src, root)`, `fcollect`,
  `alltoall`, `reduce(dst, src, op="sum")`; `op` is a name, `ReduceOp.MAX` or
  `torch.distributed.ReduceOp.MAX`
- teams: `Team.WORLD` / `Team.NODE`, `team_split_strided`, `team_my_pe`, `team_n_pes`
- on a CUDA stream: `rshmem.torch.putmem_on_stream(dst, src, pe)` and the other `*_on_stream`
- in Triton kernels: `rshmem.triton.jit`, `rshmem.triton.libshmem_device`

Arguments come in one order everywhere: destination first (`dst`, `src`), sizes the tensors give
(`nbytes`, `nelems`, `dtype`) as keywords, `stream` last. Given CUDA tensors, host calls that
move data wait for torch's current stream first; the `*_on_stream` forms queue on the stream
(docs/streams.md says which calls block and which can be captured in a CUDA graph).

How the PEs find each other (the bootstrap)
-------------------------------------------
`init()` needs every PE to hold the same unique id (made on PE 0 by `get_unique_id()`), its rank
and the PE count. It takes the first of:

1. `init(uid=..., rank=..., nranks=...)`: the program shared the id itself.
2. `init(group)`, or torch.distributed already initialized: PE 0 of the group makes the id and
   `broadcast_object_list` shares it.
3. `init(mpi_comm=comm)` (mpi4py): `comm.bcast` shares it.
4. torchrun / mpirun variables (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`): PE 0 listens
   on `MASTER_PORT + 1` (or `RSHMEM_BOOTSTRAP_PORT`). Without `RSHMEM_BOOTSTRAP_SECRET` it hands
   a random secret only to processes of its own user on its own host (docs/security.md).
5. none of these: one PE.

`init(backend="host")` runs without a GPU on CPU tensors; `device=` picks the GPU (default: one
per PE by `LOCAL_RANK`; `RSHMEM_ALLOW_SHARED_GPU=1` lets PEs share one). Variables:
docs/environment.md; `RSHMEM_LOG=debug` prints the runtime's logs, `RSHMEM_DEBUG_WAIT_TIMEOUT_MS`
turns a hang into an error naming what was awaited (README, "Debugging hangs").

`import rshmem` needs neither torch nor triton; `rshmem.torch` and `rshmem.triton` import them.
Errors are subclasses of `RshmemError` (docs/errors.md).
"""

from ._native import (
    AlreadyInitializedError,
    ArgumentRangeError,
    ArgumentTypeError,
    BootstrapRefusedError,
    ConfigError,
    DriverError,
    DTypeError,
    HeapExhaustedError,
    InvalidArgumentError,
    MismatchError,
    NotInitializedError,
    NotSymmetricError,
    OsError,
    PeerDiedError,
    PeerExitedError,
    PeOutOfRangeError,
    RshmemError,
    TimeoutError,
    TransportError,
    UnsupportedError,
    __version__,
)
from ._core import (
    LiveTensorsWarning,
    align,
    backend,
    buffer_register_symmetric,
    buffer_unregister_symmetric,
    calloc,
    finalize,
    free,
    get_unique_id,
    global_exit,
    heap_in_use,
    heap_mapped,
    init,
    is_initialized,
    malloc,
    my_pe,
    n_pes,
    ptr,
)
from . import _atomics, _collectives, _rma, _signals, _teams
from ._teams import Team
from ._teams import *  # noqa: F401,F403 - teams, ordering, barriers
from ._calling import REDUCE_OPS, ReduceOp
from .host import (
    CMP_EQ,
    CMP_GE,
    CMP_GT,
    CMP_LE,
    CMP_LT,
    CMP_NE,
    SIGNAL_ADD,
    SIGNAL_SET,
)
from ._rma import *  # noqa: F401,F403 - puts and gets
from ._atomics import *  # noqa: F401,F403
from ._signals import *  # noqa: F401,F403 - signals and waits
from ._collectives import *  # noqa: F401,F403

__all__ = [
    # errors
    "RshmemError",
    "NotInitializedError",
    "AlreadyInitializedError",
    "PeOutOfRangeError",
    "InvalidArgumentError",
    "NotSymmetricError",
    "DTypeError",
    "ConfigError",
    "ArgumentTypeError",
    "ArgumentRangeError",
    "HeapExhaustedError",
    "MismatchError",
    "PeerDiedError",
    "PeerExitedError",
    "TimeoutError",
    "BootstrapRefusedError",
    "UnsupportedError",
    "OsError",
    "DriverError",
    "TransportError",
    "LiveTensorsWarning",
    # setup and queries
    "__version__",
    "init",
    "get_unique_id",
    "finalize",
    "global_exit",
    "is_initialized",
    "my_pe",
    "n_pes",
    "backend",
    "heap_in_use",
    "heap_mapped",
    # teams (the team functions, ordering and barriers: _teams.__all__, added below)
    "Team",
    # raw symmetric memory
    "malloc",
    "calloc",
    "align",
    "free",
    "buffer_register_symmetric",
    "buffer_unregister_symmetric",
    "ptr",
    # RMA, atomics, signals, waits, collectives: added below
    # signal and comparison constants
    "CMP_EQ",
    "CMP_NE",
    "CMP_GT",
    "CMP_LE",
    "CMP_LT",
    "CMP_GE",
    "SIGNAL_SET",
    "SIGNAL_ADD",
    # reduction names
    "REDUCE_OPS",
    "ReduceOp",
]
__all__ += _teams.__all__
__all__ += _rma.__all__ + _atomics.__all__ + _signals.__all__ + _collectives.__all__
