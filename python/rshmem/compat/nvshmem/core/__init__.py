"""``nvshmem.core`` (nvshmem4py's host API) on rshmem.

A program written for nvshmem4py runs after ``import rshmem.compat.nvshmem as nvshmem`` (and
``rshmem.compat.nvshmem.core`` for ``nvshmem.core``, ``rshmem.compat.nvshmem.core.device.numba``
for its Numba device API). Every function here is a thin wrapper: initialization is
``rshmem.init``, memory is ``rshmem.torch.create_symmetric_tensor``, the stream operations are
``rshmem.torch``'s ``*_on_stream`` calls.

- Devices: a cuda.core ``Device``, a Numba or torch device, ``"cuda:N"`` or an int.
- Streams: a cuda.core ``Stream``, a Numba stream, a torch stream or a raw ``CUstream`` (int);
  None is torch's current stream (the host backend has no streams: calls complete on return).
- Arrays: ``array`` returns a CuPy array where CuPy is installed (as nvshmem4py does), else a
  Numba device array, and a numpy array on the host backend; ``tensor`` returns a torch tensor.
  Every operation takes any of those kinds (they are viewed as torch tensors, never copied).

Not covered (raise ``NvshmemInvalid`` / ``rshmem.UnsupportedError`` or are absent): ``buffer`` /
``free`` / ``get_peer_buffer`` (cuda.core Buffers: use ``array``), multicast
(``get_multicast_array`` / ``_tensor`` / ``_buffer``), ``register_external_*``,
``team_init`` / ``get_team_unique_id`` / ``TeamConfig``,
``collective_on_buffer``, and the MPI communicator inside a ``"mpi"`` init is used to hand the
unique id around (rshmem's own bootstrap connects the PEs), not as NVSHMEM's transport.
"""
from __future__ import annotations

import enum

import rshmem
from rshmem import _native
from rshmem.compat.nvshmem.core._interop import (
    NvshmemError,
    NvshmemInvalid,
    array_kind,
    as_tensor,
    device_index,
    from_tensor,
    kind_of,
    stream_handle,
)

__all__ = [
    # types
    "Teams", "SignalOp", "ComparisonType", "InitStatus", "UniqueID", "Version", "NvshmemError", "NvshmemInvalid",
    # init
    "init", "finalize", "get_unique_id", "get_version", "init_status", "module_init", "module_finalize",
    "library_init", "library_finalize",
    # queries and teams
    "my_pe", "n_pes", "team_my_pe", "team_n_pes", "team_translate_pe", "team_split_strided", "team_split_2d",
    "team_destroy",
    # memory
    "array", "free_array", "get_peer_array", "tensor", "free_tensor", "get_peer_tensor", "array_get_buffer",
    # RMA and signals on a stream
    "put", "get", "put_signal", "signal_op", "signal_wait", "quiet",
    # collectives on a stream
    "barrier", "barrier_all", "sync", "sync_all", "reduce", "reducescatter", "alltoall", "fcollect", "broadcast",
]


class Teams(enum.IntEnum):
    """The predefined teams (values are rshmem's team handles). Teams made by
    `team_split_strided` are `rshmem.Team` values; every call takes either."""

    TEAM_INVALID = int(rshmem.Team.INVALID)
    TEAM_WORLD = int(rshmem.Team.WORLD)
    TEAM_SHARED = int(rshmem.Team.SHARED)
    TEAM_NODE = int(rshmem.Team.NODE)
    TEAM_SAME_MYPE_NODE = int(rshmem.Team.SAME_MYPE_NODE)


class SignalOp(enum.IntEnum):
    """Signal operations of put-with-signal and `signal_op` (NVSHMEM's values)."""

    SIGNAL_SET = rshmem.SIGNAL_SET
    SIGNAL_ADD = rshmem.SIGNAL_ADD


class ComparisonType(enum.IntEnum):
    """Comparisons of `signal_wait` / `wait_until` (NVSHMEM's values)."""

    CMP_EQ = rshmem.CMP_EQ
    CMP_NE = rshmem.CMP_NE
    CMP_GT = rshmem.CMP_GT
    CMP_LE = rshmem.CMP_LE
    CMP_LT = rshmem.CMP_LT
    CMP_GE = rshmem.CMP_GE


class InitStatus(enum.IntEnum):
    """What `init_status()` answers."""

    STATUS_NOT_INITIALIZED = 0
    STATUS_IS_INITIALIZED = 2


class Version:
    """`get_version()`: rshmem's version; `nvshmem4py_version` names the API it follows."""

    def __init__(self):
        self.rshmem_version = rshmem.__version__
        self.nvshmem4py_version = "0.4 (API shape)"

    def __repr__(self) -> str:
        return f"Version(rshmem={self.rshmem_version}, nvshmem4py API={self.nvshmem4py_version})"


class UniqueID:
    """The unique id of a job (from `get_unique_id()` on one PE), handed to the others by the
    program (it pickles: `torch.distributed.broadcast_object_list`, `comm.bcast`)."""

    def __init__(self, data: bytes = b""):
        self.data = bytes(data)

    def __bytes__(self) -> bytes:
        return self.data

    def __repr__(self) -> str:
        return f"UniqueID({'empty' if not self.data else f'{len(self.data)} bytes'})"


# ---------------------------------------------------------------------------- init, finalize


def get_unique_id(empty: bool = False) -> UniqueID:
    """A new job's unique id (call it on one PE); `empty=True` gives a placeholder to receive
    one into."""
    return UniqueID() if empty else UniqueID(rshmem.get_unique_id())


def init(device=None, uid=None, rank=None, nranks=None, mpi_comm=None, initializer_method: str = "") -> None:
    """Collective: starts rshmem (`rshmem.init`) on `device` (None: rshmem's rule,
    `rshmem.torch.device()`).

    `initializer_method`: "uid" (`uid`, `rank`, `nranks` from the program), "mpi" or
    "emulated_mpi" (`mpi_comm`, default `MPI.COMM_WORLD`, hands the unique id around), or ""
    (whichever the arguments give, else torch.distributed / torchrun / mpirun as `rshmem.init`
    finds them)."""
    if initializer_method not in ("", "uid", "mpi", "emulated_mpi"):
        raise NvshmemInvalid(f"initializer_method is {initializer_method!r}; use 'uid', 'mpi', 'emulated_mpi' or ''")
    index = device_index(device)
    if initializer_method in ("mpi", "emulated_mpi") or (not initializer_method and mpi_comm is not None):
        if mpi_comm is None:
            from mpi4py import MPI  # noqa: PLC0415

            mpi_comm = MPI.COMM_WORLD
        rshmem.init(mpi_comm=mpi_comm, device=index)
        return
    if initializer_method == "uid" or uid is not None:
        if uid is None or rank is None or nranks is None:
            raise NvshmemInvalid("a 'uid' init needs uid, rank and nranks")
        data = bytes(uid)
        if not data:
            raise NvshmemInvalid("uid is empty: make it with get_unique_id() on one PE and hand it to the others")
        rshmem.init(uid=data, rank=int(rank), nranks=int(nranks), device=index)
        return
    rshmem.init(device=index)


def finalize() -> None:
    """Collective: stops rshmem (`rshmem.finalize`); does nothing when it is not running, so a
    program may call it after `finalize_distributed` or twice."""
    if rshmem.is_initialized():
        rshmem.finalize()


def init_status() -> InitStatus:
    """Whether rshmem is running."""
    return InitStatus.STATUS_IS_INITIALIZED if rshmem.is_initialized() else InitStatus.STATUS_NOT_INITIALIZED


def get_version() -> Version:
    """rshmem's version."""
    return Version()


def _module(obj) -> int:
    from rshmem.numba._lower import _module_handle  # noqa: PLC0415 (needs cuda.bindings only)

    handle = getattr(obj, "_handle", None) if type(obj).__name__ == "Kernel" else None
    return _module_handle(obj if handle is None else handle)


def module_init(mod) -> None:
    """Writes the device state into a module the program loaded itself (a cuda.core
    ObjectCode, a CUlibrary / CUmodule, or an int): `nvshmemx_cumodule_init`. Numba kernels
    and Triton kernels do not need this."""
    _native.device_init_module(_module(mod))


def module_finalize(mod) -> None:
    """Forgets a module of `module_init` before the program unloads it."""
    _native.device_forget_module(_module(mod))


library_init = module_init
library_finalize = module_finalize


# ------------------------------------------------------------------------------ queries, teams


def my_pe() -> int:
    """This PE."""
    return rshmem.my_pe()


def n_pes() -> int:
    """Number of PEs."""
    return rshmem.n_pes()


def _team(team):
    # None (what a split gives the PEs it leaves out) stays None: rshmem's calls take it as
    # TEAM_INVALID.
    return None if team is None else int(team)


def team_my_pe(team) -> int:
    """This PE's index in `team`; -1 for None / `Teams.TEAM_INVALID`, as NVSHMEM."""
    return rshmem.team_my_pe(_team(team))


def team_n_pes(team) -> int:
    """Number of PEs in `team`; -1 for None / `Teams.TEAM_INVALID`."""
    return rshmem.team_n_pes(_team(team))


def team_translate_pe(src_team, src_pe: int, dest_team) -> int:
    """PE `src_pe` of `src_team` as numbered in `dest_team` (-1 if absent or either team is None
    / `Teams.TEAM_INVALID`)."""
    return rshmem.team_translate_pe(_team(src_team), int(src_pe), _team(dest_team))


def team_split_strided(parent_team, start: int, stride: int, size: int, config=None, config_mask: int = 0,
                       new_team_name=None):
    """Collective over `parent_team`: the team of PEs start, start+stride, ... (`size` of
    them); an `rshmem.Team` on its members, None elsewhere (as nvshmem4py). `config` is
    accepted and ignored (rshmem teams need none)."""
    return rshmem.team_split_strided(_team(parent_team), int(start), int(stride), int(size))


def team_split_2d(parent_team, xrange: int, xaxis_config=None, xaxis_mask: int = 0, yaxis_config=None,
                  yaxis_mask: int = 0, new_team_name=None):
    """Collective over `parent_team`: (this PE's x-axis team, its y-axis team) of the grid with
    `xrange` columns (`nvshmem_team_split_2d`); None for a team this PE is not in. The configs
    are accepted and ignored."""
    return rshmem.team_split_2d(_team(parent_team), int(xrange))


def team_destroy(team) -> None:
    """Collective over `team`: releases a team of `team_split_strided`; None /
    `Teams.TEAM_INVALID` does nothing."""
    rshmem.team_destroy(_team(team))


# ------------------------------------------------------------------------------------ memory

# Base address -> the symmetric tensor that `array` / `tensor` made, until `free_array` (as in
# nvshmem4py, memory lives until it is freed or the job finalizes; finalize warns about what was
# never freed, rshmem.torch's LiveTensorsWarning, and this map forgets it afterwards).
_made: dict = {}


def _forget_made() -> tuple:
    _made.clear()
    return (0, 0)


def _torch_dtype(dtype):
    import torch  # noqa: PLC0415

    from rshmem._dtype_names import runtime_name, torch_dtype  # noqa: PLC0415

    if isinstance(dtype, torch.dtype):
        return dtype
    return torch_dtype(runtime_name(dtype))


def _symmetric(shape, dtype):
    import rshmem.torch as rtorch  # noqa: PLC0415

    t = rtorch.create_symmetric_tensor(tuple(shape) if not isinstance(shape, int) else (shape,), _torch_dtype(dtype))
    if _forget_made not in rshmem._core._finalize_hooks:  # after rshmem.torch's, which counts the live ones
        rshmem._core._finalize_hooks.append(_forget_made)
    _made[t.data_ptr()] = t
    return t


def array(shape, dtype="float32", release=False, morder="C", except_on_del=True):
    """Collective: a zero-filled symmetric array (CuPy where installed, else a Numba device
    array; numpy on the host backend). Every PE passes the same shape and dtype."""
    if morder not in ("C", "F"):
        raise NvshmemInvalid(f"morder is {morder!r}; use 'C' or 'F'")
    t = _symmetric(shape, dtype)
    if morder == "F" and t.dim() > 1:
        t = t.view(tuple(reversed(t.shape))).permute(*reversed(range(t.dim())))
    return from_tensor(t, array_kind(t))


def tensor(shape, dtype=None, release=False, morder="C", except_on_del=True):
    """Collective: a zero-filled symmetric torch tensor (`rshmem.torch.create_symmetric_tensor`)."""
    import torch  # noqa: PLC0415

    if morder != "C":
        raise NvshmemInvalid("tensor() makes C-ordered tensors; permute the result for another order")
    return _symmetric(shape, torch.float32 if dtype is None else dtype)


def _owner(x, what: str):
    """The symmetric tensor `array` / `tensor` made for `x`."""
    made = _made.get(as_tensor(x, what).data_ptr())
    if made is None:
        raise NvshmemInvalid(f"{what} was not made by array() / tensor() of this PE (or was freed already); "
                             "free_array / free_tensor take exactly what those returned")
    return made


def free_array(array) -> None:
    """Collective: frees an array of `array()` (`rshmem.torch.free_tensor`)."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    t = _owner(array, "array")
    del _made[t.data_ptr()]
    rtorch.free_tensor(t)


def free_tensor(tensor) -> None:
    """Collective: frees a tensor of `tensor()`."""
    free_array(tensor)


def get_peer_array(array, peer_pe: int = None):
    """The view of symmetric `array` on node-local PE `peer_pe` (default: this PE), of the same
    kind as `array`: loads and stores through it reach `peer_pe`'s memory."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    pe = rshmem.my_pe() if peer_pe is None else int(peer_pe)
    return from_tensor(rtorch.peer_tensor(as_tensor(array, "array"), pe), kind_of(array))


def get_peer_tensor(tensor, peer_pe: int = None):
    """`get_peer_array` for torch tensors."""
    return get_peer_array(tensor, peer_pe)


def array_get_buffer(array):
    """(address, size in bytes, dtype name) of `array`'s memory; nvshmem4py returns a cuda.core
    Buffer first, rshmem its address."""
    from rshmem._dtype_names import runtime_name  # noqa: PLC0415

    t = as_tensor(array, "array")
    return t.data_ptr(), t.numel() * t.element_size(), runtime_name(t.dtype)


# ------------------------------------------------------------------------ RMA on a stream


def _pe(remote_pe, what: str) -> int:
    if remote_pe is None or int(remote_pe) < 0:
        raise NvshmemInvalid(f"{what}: pass remote_pe, the PE to reach")
    return int(remote_pe)


def _signal_word(signal_var):
    t = as_tensor(signal_var, "signal_var")
    return t.reshape(-1)[:1]


def put(dst, src, remote_pe: int = -1, stream=None) -> None:
    """Copies local `src` into symmetric `dst` on `remote_pe`, ordered on `stream`."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.putmem_on_stream(as_tensor(dst, "dst"), as_tensor(src, "src"), _pe(remote_pe, "put"),
                            stream_handle(stream))


def get(dst, src, remote_pe: int = -1, stream=None) -> None:
    """Copies symmetric `src` of `remote_pe` into local `dst`, ordered on `stream`."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.getmem_on_stream(as_tensor(dst, "dst"), as_tensor(src, "src"), _pe(remote_pe, "get"),
                            stream_handle(stream))


def put_signal(dst, src, signal_var, signal_val: int, signal_op, remote_pe: int = -1, stream=None) -> None:
    """`put`, then `signal_op` with `signal_val` on `signal_var[0]` of `remote_pe` once the data
    is there, ordered on `stream`."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.putmem_signal_on_stream(as_tensor(dst, "dst"), as_tensor(src, "src"), _signal_word(signal_var),
                                   int(signal_val), int(signal_op), _pe(remote_pe, "put_signal"),
                                   stream_handle(stream))


def signal_op(signal_var, signal_val: int, signal_op, remote_pe: int = -1, stream=None) -> None:
    """Applies `signal_op` (SignalOp) with `signal_val` to `signal_var[0]` on `remote_pe`."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.signal_op_on_stream(_signal_word(signal_var), int(signal_val), int(signal_op),
                               _pe(remote_pe, "signal_op"), stream_handle(stream))


def signal_wait(signal_var, signal_val: int, signal_op, stream=None) -> None:
    """Makes `stream` wait until local `signal_var[0]` compares to `signal_val` as `signal_op`
    (a ComparisonType) says."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.signal_wait_until_on_stream(_signal_word(signal_var), int(signal_op), int(signal_val),
                                       stream_handle(stream))


def quiet(stream=None) -> None:
    """Completes this PE's puts and signals issued on `stream` before later work on it."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.quiet_on_stream(stream_handle(stream))


# ------------------------------------------------------------------- collectives on a stream


def barrier(team, stream=None) -> None:
    """Collective over `team`: a barrier ordered on `stream`."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.barrier_on_stream(int(team), stream_handle(stream))


def barrier_all(stream=None) -> None:
    """Collective: a barrier of every PE, ordered on `stream`."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.barrier_all_on_stream(stream_handle(stream))


def sync(team, stream=None) -> None:
    """Collective over `team`, ordered on `stream`: a barrier (rshmem has no weaker on-stream
    sync; a barrier is a valid sync)."""
    barrier(team, stream)


def sync_all(stream=None) -> None:
    """As `sync` for every PE."""
    barrier_all(stream)


def reduce(team, dst_array, src_array, op: str, stream=None) -> None:
    """Collective over `team`: `dst_array` on every member gets the element-wise `op` ("sum",
    "prod", "min", "max", "and", "or", "xor") of every member's `src_array`."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.reduce_on_stream(as_tensor(dst_array, "dst_array"), as_tensor(src_array, "src_array"), op,
                            int(team), stream_handle(stream))


def reducescatter(team, dst_array, src_array, op: str, stream=None) -> None:
    """Collective over `team`: `dst_array` on member `me` gets the element-wise `op` (as for
    `reduce`) of block `me` of every member's `src_array`, which holds one block of
    `dst_array.size` elements per member."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    dst, src = as_tensor(dst_array, "dst_array"), as_tensor(src_array, "src_array")
    size = rshmem.team_n_pes(int(team))
    if src.numel() != dst.numel() * size:
        raise NvshmemInvalid(f"reducescatter: src_array holds {src.numel()} elements, but {size} members x "
                             f"dst_array's {dst.numel()} = {dst.numel() * size} are needed")
    rtorch.reducescatter_on_stream(dst, src, op, int(team), stream_handle(stream))


def alltoall(team, dst_array, src_array, stream=None) -> None:
    """Collective over `team`: block j of `src_array` lands in block `team_my_pe` of
    `dst_array` on member j."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.alltoall_on_stream(as_tensor(dst_array, "dst_array"), as_tensor(src_array, "src_array"), int(team),
                              stream_handle(stream))


def fcollect(team, dst_array, src_array, stream=None) -> None:
    """Collective over `team`: `dst_array` gets every member's `src_array`, in team order."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.fcollect_on_stream(as_tensor(dst_array, "dst_array"), as_tensor(src_array, "src_array"), int(team),
                              stream_handle(stream))


def broadcast(team, dst_array, src_array, root: int = 0, stream=None) -> None:
    """Collective over `team`: `src_array` of member `root` into `dst_array` on every member."""
    import rshmem.torch as rtorch  # noqa: PLC0415

    rtorch.broadcast_on_stream(as_tensor(dst_array, "dst_array"), as_tensor(src_array, "src_array"), int(root),
                               int(team), stream_handle(stream))


_NOT_COVERED = {
    "buffer": "cuda.core Buffers are not offered; use array() or tensor()",
    "free": "cuda.core Buffers are not offered; use free_array() / free_tensor()",
    "get_peer_buffer": "cuda.core Buffers are not offered; use get_peer_array()",
    "get_multicast_array": "NVLink multicast is not supported by rshmem",
    "get_multicast_tensor": "NVLink multicast is not supported by rshmem",
    "get_multicast_buffer": "NVLink multicast is not supported by rshmem",
    "register_external_array": "rshmem works on its own symmetric heap only; allocate with array()",
    "register_external_tensor": "rshmem works on its own symmetric heap only; allocate with tensor()",
    "register_external_buffer": "rshmem works on its own symmetric heap only",
    "team_split_2d": "use team_split_strided",
    "team_init": "use team_split_strided",
    "get_team_unique_id": "teams are made collectively with team_split_strided",
    "collective_on_buffer": "use the array collectives (reduce, fcollect, ...)",
    "bytearray": "use array(shape, dtype='uint8')",
    "bytetensor": "use tensor(shape, dtype=torch.uint8)",
}


def __getattr__(name: str):
    why = _NOT_COVERED.get(name)
    if why is not None:
        raise AttributeError(f"nvshmem.core.{name} is not provided by rshmem.compat.nvshmem: {why}")
    raise AttributeError(f"nvshmem.core.{name} is not provided by rshmem.compat.nvshmem; use the rshmem API for it")
