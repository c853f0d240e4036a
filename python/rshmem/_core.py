"""Init / finalize, PE queries and raw symmetric memory (teams: `_teams.py`).

`init` picks how the PEs find each other (the *bootstrap*): every PE needs the same unique id,
made on PE 0 by `get_unique_id()`, plus its rank and the PE count. Who hands the id around:

1. `uid`, `rank`, `nranks` given: the caller already shared it.
2. a torch.distributed group given, or torch.distributed initialized: PE 0 of the group makes the
   id and `torch.distributed.broadcast_object_list` shares it.
3. an mpi4py communicator given: `comm.bcast` shares it.
4. torchrun / mpirun variables (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`): the runtime
   reads them itself and PE 0 listens on `MASTER_PORT + 1` (or `RSHMEM_BOOTSTRAP_PORT`). Nothing
   in them is secret, so without `RSHMEM_BOOTSTRAP_SECRET` PE 0 hands a random secret only to
   processes of its own user on its own host (multi-host jobs need the variable, or one of the
   ways above); see docs/security.md.
5. none of these: one PE.

At interpreter exit a job still running is finalized (an `atexit` handler registered by `init`),
so a program that never calls `finalize` exits cleanly; see `finalize` and `init`.

A child forked from a PE (`os.fork`, multiprocessing's "fork" start method, a data-loader worker)
is not a PE of its parent's job: `is_initialized()` is False there, every call raises
`NotInitializedError` saying so, and its exit finalizes nothing (the runtime tells the child
apart by `pthread_atfork`, this module by `os.register_at_fork`).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import warnings

from . import _native
from ._native import InvalidArgumentError
from ._errors import api

# Called in order before the runtime stops. `_count_live` asks the runtime how many tensors made by
# rshmem.torch Python still references: layers that only cache tensors (rshmem.ops) insert their
# hook before it, layers that keep what their users never freed (rshmem.compat.nvshmem) append
# theirs after it, so those are counted (and warned about) before they are let go.
_live_at_finalize = [(0, 0)]


def _count_live():
    _live_at_finalize[0] = _native.live_tensors()


_finalize_hooks = [_count_live]
_log = logging.getLogger("rshmem")
_atexit_registered = [False]
# True in a child forked from a PE: its inherited exit handler must leave the parent's job alone.
_forked_child = [False]


def _after_fork_in_child() -> None:
    _forked_child[0] = True


class LiveTensorsWarning(RuntimeWarning):
    """Warned by `finalize` when symmetric tensors made by `rshmem.torch` are still referenced:
    their allocations end with the heap (their memory stays mapped here until they die, no longer
    shared with the peers), and rshmem calls on them raise afterwards."""


def global_exit(status: int) -> None:
    """Ends the job at once: every PE's process exits with `status`, this one included, whatever
    the others are doing (`nvshmem_global_exit`). Nothing is finalized and the call never
    returns; Python's stdout and stderr are flushed first, as the process ends without Python's
    own shutdown."""
    status = int(status)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    _native.global_exit(status)


def get_unique_id() -> bytes:
    """Makes the unique id of a new job on this PE (call it on PE 0 only and share the bytes)."""
    return _native.get_unique_id()


def _device_index(device) -> int | None:
    if device is None:
        return None
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)  # torch.device("cuda:1")
    if index is None and isinstance(device, str) and ":" in device:
        index = int(device.rsplit(":", 1)[1])
    if index is None:
        raise InvalidArgumentError(f"device {device!r} names no GPU index; pass an int or 'cuda:N'")
    return int(index)


def _dist_initialized() -> bool:
    # Never import torch just to ask: a program that has not imported it has not initialized it.
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def _launcher_env() -> bool:
    """Whether torchrun or mpirun started this process (the runtime then reads the env)."""
    env = os.environ
    return ("RANK" in env and "WORLD_SIZE" in env) or "OMPI_COMM_WORLD_RANK" in env or "PMI_RANK" in env


def _uid_from_torch(group):
    import torch.distributed as dist

    rank = dist.get_rank(group)
    nranks = dist.get_world_size(group)
    if rank < 0:
        raise InvalidArgumentError("this process is not a member of the torch.distributed group passed to rshmem.init()")
    box = [get_unique_id() if rank == 0 else None]
    src = dist.get_global_rank(group, 0) if group is not None else 0
    kwargs = {}
    if dist.get_backend(group) == "nccl":
        import torch

        kwargs["device"] = torch.device("cuda", torch.cuda.current_device())
    dist.broadcast_object_list(box, src=src, group=group, **kwargs)
    return box[0], rank, nranks


@api
def init(group=None, *, uid=None, rank=None, nranks=None, mpi_comm=None, device=None, backend=None) -> None:
    """Collective: starts rshmem on every PE (`nvshmem_init`).

    `backend` is `"cuda"` or `"host"` (default: `RSHMEM_BACKEND`, else cuda when a GPU is
    visible); `device` is the GPU of this PE (int, `"cuda:N"` or `torch.device`). See the module
    docstring for how the PEs are found. Raises `AlreadyInitializedError` when already running.

    Without `device`, the GPU follows one rule (`rshmem.torch.device()` gives it, before init
    too): one GPU per PE by its rank on the host (`LOCAL_RANK`); with fewer GPUs than PEs on the
    host, `RSHMEM_ALLOW_SHARED_GPU=1` makes the PEs share them round-robin, and without it init
    raises `InvalidArgumentError` naming both counts. init never changes a device the program
    chose: when torch's current CUDA device is already set to another GPU, it raises instead;
    when none was chosen yet, this PE's GPU becomes torch's current device.

    rshmem's bootstrap is its own TCP connection between the PEs: once `init` has returned, the
    torch.distributed group (or MPI communicator) that handed the unique id around is no longer
    needed, and `torch.distributed.destroy_process_group()` may run before or after `finalize`.
    A process that exits without `finalize` is finalized at interpreter exit (`atexit`): like
    `finalize` this waits for the other PEs, at most `RSHMEM_BOOTSTRAP_TIMEOUT_S`; an error there
    (a peer already gone) is logged as a warning on the `rshmem` logger, and this PE's resources
    are released anyway.
    """
    given = [uid is not None, rank is not None, nranks is not None]
    if any(given) and not all(given):
        raise InvalidArgumentError("pass uid, rank and nranks together (or none of them)")
    if not any(given):
        if group is not None or (mpi_comm is None and _dist_initialized()):
            uid, rank, nranks = _uid_from_torch(group)
        elif mpi_comm is not None:
            rank, nranks = mpi_comm.Get_rank(), mpi_comm.Get_size()
            uid = mpi_comm.bcast(get_unique_id() if rank == 0 else None, root=0)
        elif not _launcher_env():
            uid, rank, nranks = get_unique_id(), 0, 1
    if uid is not None and not isinstance(uid, (bytes, bytearray)):
        raise InvalidArgumentError(f"uid must be the bytes returned by rshmem.get_unique_id(), not {type(uid).__name__}")
    index = _device_index(device)
    if "torch" in sys.modules:
        from . import _cuda  # torch is loaded already; without it, importing rshmem.torch does this

        if _cuda.cuda_wanted(backend):
            # Checked before joining, so every PE fails alike and none waits for the others.
            _cuda.check_current_device(index)
    _native.init(bytes(uid) if uid is not None else None, rank, nranks, backend, index)
    if not _atexit_registered[0]:
        atexit.register(_finalize_at_exit)
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _atexit_registered[0] = True
    if "torch" in sys.modules and _native.backend() == "cuda":
        _cuda.use_device()  # torch's current device = this PE's GPU, where the heap lives


def _point_at_ucx_wheel() -> None:
    """Sets RSHMEM_UCX_DIR to the `libucx-cu12` wheel's libraries when that wheel is installed and
    the variable is unset, so a job spanning hosts finds UCX there (docs/network.md). Nothing is
    loaded here: the runtime opens UCX only when some PE sits on another host."""
    if os.environ.get("RSHMEM_UCX_DIR"):
        return
    import importlib.util

    spec = importlib.util.find_spec("libucx")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        lib = os.path.join(root, "lib")
        if os.path.isfile(os.path.join(lib, "libucp.so.0")):
            os.environ["RSHMEM_UCX_DIR"] = lib
            return


# At import, before any call can make the runtime read the environment (it reads it once).
_point_at_ucx_wheel()


@api
def finalize() -> None:
    """Collective: frees every symmetric allocation and stops rshmem (`nvshmem_finalize`).
    Calling it when rshmem is not running does nothing.

    Not a barrier: this PE tells every other PE that it leaves, then waits until each has called
    `finalize` too (at most `RSHMEM_BOOTSTRAP_TIMEOUT_S`). A peer still blocked in a barrier, wait
    or collective that this PE never called raises `PeerExitedError` instead of taking the
    finalize for its own call (docs/errors.md, "When a peer fails").

    Symmetric tensors of `rshmem.torch` that Python still references are freed too: one
    `LiveTensorsWarning` says how many and how many bytes, and `free_tensor` / `peer_tensor` on
    them raise `NotSymmetricError` afterwards. Their memory stays mapped in this process until the
    last of them dies, so reading or writing them never faults, but it is no longer shared.
    """
    if _forked_child[0]:
        _native.finalize()  # raises: a forked child must not end its parent's job
    _finalize(warn_live=True, how="rshmem.finalize()")


def _finalize(warn_live: bool, how: str) -> None:
    if not _native.is_initialized():
        return
    for hook in list(_finalize_hooks):
        hook()
    count, nbytes = _live_at_finalize[0]
    _native.finalize(how)
    # Warned only now: with warnings turned into errors, raising before the runtime stopped would
    # leave it running with its tensors already forgotten.
    if warn_live and count:
        warnings.warn(
            f"rshmem.finalize(): {count} symmetric tensor(s) ({nbytes} bytes) are still alive; their allocations "
            "are freed with the heap: rshmem calls on them raise, and their memory stays mapped here (no longer "
            "shared with the other PEs) until they die (free_tensor them before finalize)",
            LiveTensorsWarning,
            stacklevel=3,
        )


def _finalize_at_exit() -> None:
    """atexit: finalizes a job the program left running. Never raises: a peer may already be gone
    (PeerDiedError, or TimeoutError after RSHMEM_BOOTSTRAP_TIMEOUT_S), and the runtime releases
    this PE's resources whether the collective part succeeds or not. In a forked child it does
    nothing: the runtime there is the parent's."""
    if _forked_child[0] or not _native.is_initialized():
        return
    _log.info("rshmem: finalizing at interpreter exit (the program did not call rshmem.finalize())")
    try:
        # No LiveTensorsWarning here: every tensor dies with the interpreter anyway.
        _finalize(warn_live=False, how=_how_exiting())
    except Exception as e:  # noqa: BLE001 - an exit handler must not raise
        _log.warning("rshmem: finalize at interpreter exit failed (%s: %s); this PE left the job without "
                     "its peers agreeing", type(e).__name__, e)


def _require_init(call: str) -> None:
    """Raises `NotInitializedError` naming `call`, the public function the user called (before a
    helper's own native call could name itself instead)."""
    if not _native.is_initialized():
        raise _native.NotInitializedError(f"rshmem is not initialized: call rshmem.init() before {call}")


def _how_exiting() -> str:
    """What the peers are told when this PE finalizes at exit: the uncaught exception that ended
    the program (Python sets `sys.last_value` before the exit handlers run), or a plain exit."""
    e = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if e is None:
        return "its program exited without calling rshmem.finalize()"
    text = str(e).splitlines()[0][:200] if str(e) else ""
    return f"its program ended on an uncaught {type(e).__name__}" + (f": {text}" if text else "")


def is_initialized() -> bool:
    """Whether `init` has run and `finalize` has not."""
    return _native.is_initialized()


def my_pe() -> int:
    """This PE's number in the job (`nvshmem_my_pe`)."""
    return _native.my_pe()


def n_pes() -> int:
    """How many PEs the job has (`nvshmem_n_pes`)."""
    return _native.n_pes()


def backend() -> str:
    """The memory backend in use: `"host"` or `"cuda"`."""
    return _native.backend()


_ADDRESS_SPACE = 1 << 64


def _size_arg(value, what: str) -> int:
    """`value` as a byte count the runtime takes, else InvalidArgumentError (not the bare
    TypeError / OverflowError the conversion to a C integer would raise)."""
    if isinstance(value, bool) or not isinstance(value, int):
        index = getattr(value, "__index__", None)  # numpy integers, 0-d integer tensors
        if index is None:
            raise InvalidArgumentError(f"{what} must be an int, not {type(value).__name__}")
        value = index()
    if value < 0:
        raise InvalidArgumentError(f"{what} is {value}; it must be >= 0")
    if value >= _ADDRESS_SPACE:
        raise InvalidArgumentError(f"{what} is {value}, more than the address space holds (2**64 bytes)")
    return value


@api
def malloc(size: int) -> int:
    """Collective: `size` bytes of symmetric memory; returns this PE's address
    (`nvshmem_malloc`). Every PE must pass the same size (`MismatchError` otherwise)."""
    return _native.malloc(_size_arg(size, "malloc size"))


@api
def calloc(count: int, size: int) -> int:
    """Collective: `count * size` zeroed bytes of symmetric memory (`nvshmem_calloc`)."""
    return _native.calloc(_size_arg(count, "calloc count"), _size_arg(size, "calloc size"))


@api
def align(alignment: int, size: int) -> int:
    """Collective: `size` bytes aligned to `alignment`, a power of two (`nvshmem_align`)."""
    return _native.align(_size_arg(alignment, "alignment"), _size_arg(size, "align size"))


@api
def free(addr: int) -> None:
    """Collective: frees an allocation of `malloc` / `calloc` / `align` (`nvshmem_free`).
    Every PE must free the same allocation (`MismatchError` otherwise)."""
    _native.free(_size_arg(addr, "free address"))


@api
def buffer_register_symmetric(addr: int, size: int) -> int:
    """Collective: makes the program's own `size` bytes at `addr` symmetric and returns their
    symmetric address (`nvshmemx_buffer_register_symmetric`). The buffer is one allocation of
    this PE's GPU made with `cuMemCreate` (with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` among
    its handle types) and mapped with `cuMemMap`: `addr` its first byte, `size` its size. Both
    addresses reach the same memory. The cuda backend on one host only (`UnsupportedError`)."""
    return _native.buffer_register_symmetric(_size_arg(addr, "buffer address"), _size_arg(size, "buffer size"))


@api
def buffer_unregister_symmetric(addr: int, size: int) -> None:
    """Collective: ends a registration of `buffer_register_symmetric`, `addr` being the address
    it returned (`nvshmemx_buffer_unregister_symmetric`)."""
    _native.buffer_unregister_symmetric(_size_arg(addr, "buffer address"), _size_arg(size, "buffer size"))


@api
def ptr(addr: int, pe: int):
    """The address of symmetric `addr` on `pe` if this PE reaches it by load/store, else None,
    also for an address outside the heap (`nvshmem_ptr`)."""
    return _native.ptr(_size_arg(addr, "address"), pe)


def heap_in_use() -> int:
    """Bytes of this PE's symmetric heap allocated and not freed."""
    return _native.heap_in_use()


def heap_mapped() -> int:
    """Bytes of this PE's symmetric heap backed by memory."""
    return _native.heap_mapped()

