"""`torch.distributed` on rshmem: the process-group backend `"rshmem"`.

Importing this module registers the backend with `torch.distributed.Backend.register_backend`
for the `cpu` and `cuda` devices, so that::

    import rshmem.torch_backend
    dist.init_process_group("rshmem")                 # or "cpu:gloo,cuda:rshmem"
    dist.all_reduce(t)                                # runs on rshmem

works under torchrun. The first group made with it starts rshmem (`rshmem.init`, the unique id
handed over through the group's store) unless rshmem runs already, in which case PE `i` must be
torch rank `i`.

What runs where:

- On rshmem's host backend, CPU tensors go through rshmem's host collectives.
- On the cuda backend, CUDA tensors go through rshmem's on-stream collectives on the group's
  stream (see "Streams"); CPU tensors, which the GPU heap cannot take, go through a gloo group
  the backend makes from the same store.
- torch builds a Python backend as a whole `ProcessGroup` (a Python class cannot subclass c10d's
  `Backend`), and a `ProcessGroup` made by a plugin replaces the device map: with
  `"cpu:gloo,cuda:rshmem"` torch's own gloo is dropped and the rule above decides for CPU
  tensors too.

A CUDA all_reduce of one contiguous float32, float16 or bfloat16 tensor of up to 1 MiB
(`FAST_ALL_REDUCE_BYTES`) with SUM, AVG, MAX or MIN runs `rshmem.ops.all_reduce`'s kernels in
place on the caller's stream: after the first call of a shape (which agrees on it with the other
ranks and makes the workspace), one kernel launch and no copies, the latency path NCCL's eager
all_reduce is measured against (docs/benchmarks.md). Everything else stages:

Every collective stages the caller's tensors through a symmetric workspace of the group
(`RSHMEM_PG_WORKSPACE_BYTES`, default 8 MiB per group, in chunks when a message is larger):
rshmem's collectives take symmetric memory, torch's tensors are ordinary memory. That is one copy
in and one out per call, plus the Python of the call (tens of microseconds); programs that want
neither allocate symmetric tensors and call `rshmem.torch`'s collectives on them directly
(docs/pytorch-backend.md compares the paths).

Streams: on the cuda backend a collective waits for the caller's current stream, runs on the
group's own stream and returns a `Work` whose `wait()` makes the caller's current stream wait
for it (as NCCL's does); `get_future()` is a CUDA-aware future, so DDP's hooks compose. The fast
all_reduce above runs on the caller's stream itself: its `wait()` on that stream has nothing to
do, from another stream it waits for the caller's; a small all-reduce gives up overlapping the
caller's next kernels for the stream switch and event it saves (tens of microseconds). On the
host backend a call completes before it returns.

Groups: rshmem teams are made by a call every PE joins (`team_split_strided`), while torch
creates a backend only on a group's members; so a group of only some ranks is made with this
module's `new_group(ranks)`, which every rank calls, as `dist.new_group` requires anyway. Its
ranks must be evenly spaced. `dist.new_group(backend="rshmem")` of all ranks needs nothing more.

Not supported (`UnsupportedError` naming the call): `ReduceOp.PREMUL_SUM`, `AVG` of integer
tensors, send/recv tags other than 0, `recv` from any source, `gather` / `scatter` / `reduce`
to one root, coalesced calls, dtypes without a runtime name (bool, complex, fp8).
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work
from torch.distributed.distributed_c10d import ReduceOp

import rshmem as _rs  # the host API by tensor: collectives, signals

from . import _core, _cuda, _native, _teams
from . import torch as rtorch
from ._dtype_names import runtime_name
from ._native import DTypeError, InvalidArgumentError, UnsupportedError

BACKEND = "rshmem"
_DEFAULT_WORKSPACE = 8 << 20
# CUDA all_reduces up to this size run rshmem.ops.all_reduce's kernels on the caller's stream
# (latency decides there); larger ones run on the group's stream, overlapping the caller's work
# as NCCL's do, which a gradient bucket of DDP wants.
FAST_ALL_REDUCE_BYTES = 1 << 20
_RED = ReduceOp.RedOpType
_OPS = {_RED.SUM: "sum", _RED.PRODUCT: "prod", _RED.MIN: "min", _RED.MAX: "max",
        _RED.BAND: "and", _RED.BOR: "or", _RED.BXOR: "xor"}
# new_group(ranks) of this module -> (team, workspace) for the creator torch calls right after it.
_pending: dict = {}
# The world's team and workspace, kept across destroy/init_process_group (freeing symmetric
# memory is a collective the interpreter's teardown cannot run in order); `release` frees them.
_world_parts: list = []
# Every workspace made here, in order (non-members' copies of a group's workspace included).
_made: list = []


def _workspace_bytes() -> int:
    text = os.environ.get("RSHMEM_PG_WORKSPACE_BYTES")
    if text is None:
        return _DEFAULT_WORKSPACE
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 4096:
        raise InvalidArgumentError(f"RSHMEM_PG_WORKSPACE_BYTES={text!r}: give a number of bytes of at least 4096")
    return value


class _Parts:
    """A group's rshmem side: its team, its symmetric workspace (an int64 array of the same size
    on every member), and the point-to-point mailboxes carved from it."""

    def __init__(self, team, nbytes: int, n: int):
        self.team = team
        self.n = n
        # [ready words (n)] [credit words (n)] [one mailbox per source PE] [collective area]
        words = 2 * n
        slot = max(nbytes // (4 * n), 512) // 8 * 8
        self.ws = rtorch.create_symmetric_tensor((nbytes // 8 + words + slot * n // 8,), torch.int64)
        self.ready = self.ws[:n]
        self.credit = self.ws[n:2 * n]
        self.slot_bytes = slot
        base = words * 8
        raw = self.ws.view(torch.uint8)
        self.mail = [raw[base + i * slot: base + (i + 1) * slot] for i in range(n)]
        self.area = raw[base + n * slot:]
        self.sent = [0] * n
        self.received = [0] * n
        _made.append(self)

    def live(self) -> bool:
        """False once `release` or `rshmem.finalize` freed the workspace."""
        return _native.is_initialized() and _native.view_state(self.ws.data_ptr(), self.ws._rshmem_id) == "live"


def release() -> None:
    """Collective over every PE: frees the workspaces of every rshmem group made so far (call it
    after destroying them, before `rshmem.finalize`, to finalize without live tensors). Groups
    made later get new ones."""
    for parts in reversed(_made):
        if parts.live():
            rtorch.free_tensor(parts.ws)
    _made.clear()
    _world_parts.clear()
    _pending.clear()


def _split_team(ranks: list):
    """The rshmem team of evenly spaced world ranks `ranks` (sorted), made by every PE."""
    if len(ranks) > 1:
        steps = {b - a for a, b in zip(ranks, ranks[1:])}
        if len(steps) != 1 or 0 in steps:
            raise UnsupportedError(
                f"rshmem.torch_backend.new_group: ranks {ranks} are not evenly spaced; rshmem teams are strided "
                "(e.g. [0, 2, 4] or [1, 2, 3])")
        stride = steps.pop()
    else:
        stride = 1
    return _teams.team_split_strided(_teams.Team.WORLD, ranks[0], stride, len(ranks))


def new_group(ranks=None, **kwargs):
    """`dist.new_group(ranks, backend="rshmem", ...)` for a group of only some ranks.

    Collective over every rank (as `dist.new_group` is): each splits the rshmem team of `ranks`
    (evenly spaced world ranks) and sets aside the group's workspace, then torch makes the group.
    Returns what `dist.new_group` returns (`GroupMember.NON_GROUP_MEMBER` on the others)."""
    if not _native.is_initialized():
        raise _native.NotInitializedError("rshmem.torch_backend.new_group: make the world group first "
                                          "(dist.init_process_group(\"rshmem\") or rshmem.init)")
    n = _native.n_pes()
    members = sorted(range(n) if ranks is None else {int(r) for r in ranks})
    if not members or members[0] < 0 or members[-1] >= n:
        raise InvalidArgumentError(f"rshmem.torch_backend.new_group: ranks {ranks!r} must be world ranks 0..{n - 1}")
    team = _split_team(members)
    # Symmetric allocation is a collective over every PE, so the members' workspace is made here,
    # where every PE takes part (the non-members' copy stays unused).
    parts = _Parts(team, _workspace_bytes(), len(members))
    if team is not None:
        _pending[tuple(members)] = parts
    kwargs.setdefault("backend", BACKEND)
    return dist.new_group(members, **kwargs)


def _start_rshmem(store, rank: int, size: int) -> None:
    if _native.is_initialized():
        if _native.my_pe() != rank or _native.n_pes() != size:
            raise InvalidArgumentError(
                f"rshmem runs already as PE {_native.my_pe()} of {_native.n_pes()}, but this process is torch rank "
                f"{rank} of {size}: start rshmem with the same ranks (rshmem.init(dist.group.WORLD))")
        return
    key = "rshmem_torch_backend/uid"
    if rank == 0:
        store.set(key, _core.get_unique_id())
    uid = bytes(store.get(key))
    _core.init(uid=uid, rank=rank, nranks=size)


def _create(opts, backend_options):
    """The creator torch calls (extended API): `opts` carries the store, ranks and timeout."""
    store, rank, size = opts.store, opts.group_rank, opts.group_size
    key = tuple(sorted(opts.global_ranks_in_group)) or tuple(range(size))
    world = _native.n_pes() if _native.is_initialized() else size
    if key == tuple(range(world)):
        _start_rshmem(store, rank, size)
        if _world_parts and not _world_parts[0].live():  # rshmem was finalized and started again
            _world_parts.clear()
        if not _world_parts:
            _world_parts.append(_Parts(_teams.Team.WORLD, _workspace_bytes(), size))
        parts = _world_parts[0]
    elif key in _pending:
        parts = _pending.pop(key)
    else:
        raise UnsupportedError(
            f"a torch group of ranks {list(key)} on the rshmem backend is made with rshmem.torch_backend.new_group"
            f"({list(key)}), called on every rank: rshmem's teams and workspaces are made by every PE, and torch "
            "creates a backend only on the group's members")
    return RshmemProcessGroup(store, rank, size, parts, opts.timeout)


class _ResultWork(Work):
    """What `_Work` and `_CallerWork` share: a success with no exception, whose `result` is the one
    it was made with; `_device` is the collective's GPU (None on the host)."""

    def __init__(self, result, device=None):
        super().__init__()
        self._result, self._device = result, device

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result


class _Work(_ResultWork):
    """A finished (host) or queued (cuda, on the group's stream) collective."""

    def __init__(self, result, stream=None, device=None):
        super().__init__(result, device)
        self._event = None
        if stream is not None:
            self._event = torch.cuda.Event()
            self._event.record(stream)

    def wait(self, timeout=timedelta(0)):  # noqa: B008 - torch's signature
        if self._event is not None:
            torch.cuda.current_stream(self._device).wait_event(self._event)
        return True

    def is_completed(self):
        return self._event is None or self._event.query()

    def get_future(self):
        if self._event is None:
            fut = torch.futures.Future()
            fut.set_result(self._result)
            return fut
        fut = torch.futures.Future(devices=[self._device])
        with torch.cuda.device(self._device):
            torch.cuda.current_stream().wait_event(self._event)
            fut.set_result(self._result)  # records the current stream's work for fut.wait()
        return fut


# rshmem.ops (Triton) is imported by the first CUDA all_reduce, not by the host backend; then
# _fast_ops maps (dtype, torch's reduce op) to the ops' name for what the fast path takes.
_ops_library = _fast_ops = None


def _import_ops() -> None:
    global _ops_library, _fast_ops
    from .ops import _checks, _library

    names = {_RED.SUM: "sum", _RED.AVG: "avg", _RED.MAX: "max", _RED.MIN: "min"}
    _fast_ops = {(dt, kind): name for dt in _checks.REDUCE_DTYPES for kind, name in names.items()
                 if name in _library.REDUCE_OPS}
    _ops_library = _library


def _stream_of(raw: int, device: int):
    """The torch stream whose handle is `raw` on `device` (torch's ExternalStream of handle 0 is
    not the legacy default stream, so that one is looked up)."""
    current = torch.cuda.current_stream(device)
    if current.cuda_stream == raw:
        return current
    default = torch.cuda.default_stream(device)
    if default.cuda_stream == raw:
        return default
    return torch.cuda.ExternalStream(raw, device=device)


class _CallerWork(_ResultWork):
    """A collective queued on the caller's own stream (the all_reduce's fast path): nothing is
    recorded per call; `wait` from another stream, `is_completed` and `get_future` record an
    event on that stream when asked, which covers the collective and whatever the caller queued
    after it (later, never earlier)."""

    def __init__(self, result, raw: int, device: int):
        super().__init__(result, device)
        self._raw = raw

    def _event(self):
        event = torch.cuda.Event()
        event.record(_stream_of(self._raw, self._device))
        return event

    def wait(self, timeout=timedelta(0)):  # noqa: B008 - torch's signature
        if _cuda.current_raw_stream(self._device) != self._raw:
            torch.cuda.current_stream(self._device).wait_event(self._event())
        return True

    def is_completed(self):
        return self._event().query()

    def get_future(self):
        fut = torch.futures.Future(devices=[self._device])
        with torch.cuda.stream(_stream_of(self._raw, self._device)):
            fut.set_result(self._result)  # records the caller's stream for fut.wait()
        return fut


def _flat(t: torch.Tensor) -> torch.Tensor:
    if not t.is_contiguous():
        raise InvalidArgumentError(f"the rshmem backend takes contiguous tensors (got strides {t.stride()}); "
                                   "call .contiguous() first")
    return t.view(-1)


class RshmemProcessGroup(ProcessGroup):
    """A torch process group whose collectives run on rshmem (see the module docs)."""

    def __init__(self, store, rank: int, size: int, parts: _Parts, timeout):
        super().__init__(rank, size)
        self._parts = parts
        self._team = parts.team
        self._team_id = int(parts.team)
        self._gpu = _native.device_ordinal()
        self._stream = None
        self._gloo = None
        if self._gpu is not None:
            self._stream = torch.cuda.Stream(device=self._gpu)
            # CPU tensors cannot live on the GPU heap: they go through gloo on the same store.
            self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("rshmem_cpu", store), rank, size, timeout)

    # ------------------------------------------------------------------ torch's plumbing

    def getBackendName(self):  # noqa: N802 - torch's name
        return BACKEND

    def name(self):
        return BACKEND

    # torch stores a group's name on its C++ backends, which a Python process group has none of:
    # `group.group_name` (what torch.ops.symm_mem and functional collectives take) would raise
    # "ProcessGroup name not set". The name torch gives the group is kept here instead.
    def _set_group_name(self, name: str) -> None:
        self._rshmem_group_name = name

    @property
    def group_name(self) -> str:
        name = getattr(self, "_rshmem_group_name", None)
        if name is None:
            raise RuntimeError("ProcessGroup name not set")
        return name

    def _pe(self, group_rank: int, what: str) -> int:
        if not 0 <= group_rank < self.size():
            raise InvalidArgumentError(f"{what} {group_rank} is not a rank of this group of {self.size()}")
        return _teams.team_translate_pe(self._team, group_rank, _teams.Team.WORLD)

    def _route(self, tensors, call: str):
        """'host', 'cuda', or 'gloo' for a CPU tensor on the cuda backend."""
        cuda = {t.is_cuda for t in tensors}
        if len(cuda) > 1:
            raise InvalidArgumentError(f"{call}: mix of CPU and CUDA tensors; pass tensors of one device")
        for t in tensors:
            if t.dtype in (torch.bool,) or t.is_complex() or t.element_size() == 1 and t.is_floating_point():
                raise DTypeError(f"{call}: dtype {t.dtype} has no rshmem collective; use one of int8..uint64, "
                                 "float16, bfloat16, float32, float64")
            runtime_name(t.dtype)
        if not cuda or not cuda.pop():
            return "gloo" if self._gpu is not None else "host"
        if self._gpu is None:
            raise UnsupportedError(f"{call}: CUDA tensors need rshmem's cuda backend; this PE runs the host backend")
        for t in tensors:
            if t.get_device() != self._gpu:
                raise InvalidArgumentError(f"{call}: a tensor on {t.device}, but this PE's GPU is cuda:{self._gpu}")
        return "cuda"

    def _run(self, tensors, result, body):
        """Runs `body(cuda)` on the right side and returns its Work."""
        if self._stream is None:
            body(False)
            return _Work(result)
        caller = torch.cuda.current_stream(self._gpu)
        self._stream.wait_stream(caller)
        with torch.cuda.stream(self._stream):
            body(True)
        for t in tensors:
            t.record_stream(self._stream)
        return _Work(result, self._stream, self._gpu)

    def _area(self, dtype, *counts):
        """Views of the collective area as `dtype`, one per count, each 256-byte aligned."""
        views, off, size = [], 0, dtype.itemsize
        for c in counts:
            views.append(self._parts.area[off: off + c * size].view(dtype))
            off += (c * size + 255) // 256 * 256
        if off > self._parts.area.numel():
            raise AssertionError("chunking left the workspace too small")  # _chunk's arithmetic
        return views

    def _chunk(self, dtype, per_elem_slots: int) -> int:
        """Elements per chunk when each element of the chunk takes `per_elem_slots` slots."""
        room = self._parts.area.numel() - 256 * (per_elem_slots + 1)
        return max(room // (dtype.itemsize * per_elem_slots), 1)

    # collectives on heap memory, by side
    def _reduce(self, dst, src, op, cuda):
        (rtorch.reduce_on_stream if cuda else _rs.reduce)(dst, src, op, self._team)

    def _op(self, opts, dtype, call: str):
        kind = opts.reduceOp.op
        if kind == _RED.AVG:
            if not dtype.is_floating_point:
                raise UnsupportedError(f"{call}: ReduceOp.AVG of {dtype} (integer average); use SUM and divide")
            return "sum", True
        if kind not in _OPS:
            raise UnsupportedError(f"{call}: {kind} is not supported by the rshmem backend "
                                   "(SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR are)")
        if kind in (_RED.BAND, _RED.BOR, _RED.BXOR) and dtype.is_floating_point:
            raise DTypeError(f"{call}: bitwise {kind} of {dtype}; bitwise reductions take integer tensors")
        return _OPS[kind], False

    # ------------------------------------------------------------------ collectives

    def allreduce(self, tensors, opts):
        if self._gpu is not None and len(tensors) == 1:
            work = self._allreduce_ops(tensors[0], opts)
            if work is not None:
                return work
        call = "all_reduce"
        if self._route(tensors, call) == "gloo":
            return self._gloo.allreduce(tensors, opts)
        op, avg = self._op(opts, tensors[0].dtype, call)

        def body(cuda):
            for t in tensors:
                flat = _flat(t)
                m = self._chunk(t.dtype, 2)
                for i in range(0, flat.numel(), m):
                    piece = flat[i:i + m]
                    src, dst = self._area(t.dtype, piece.numel(), piece.numel())
                    src.copy_(piece)
                    self._reduce(dst, src, op, cuda)
                    piece.copy_(dst)
                if avg:
                    t.div_(self.size())
        return self._run(tensors, tensors, body)

    def _allreduce_ops(self, t, opts):
        """The fast path of a CUDA all_reduce: `rshmem.ops.all_reduce`'s kernels (one launch per
        call once its plan exists, no staging copies), in place, on the caller's stream. For one
        contiguous tensor of a dtype and op they take, on this PE's GPU; None sends the call the
        general way (with its checks and errors), as it does a call captured in a CUDA graph
        whose shape no eager call had (which has no plan). Every test here is one the general
        path makes too, in the order that costs least when it passes."""
        if _fast_ops is None:
            _import_ops()
        name = _fast_ops.get((t.dtype, opts.reduceOp.op))
        if name is None or not t.is_cuda or not t.is_contiguous() or t.get_device() != self._gpu or \
                not 0 < t.numel() * t.element_size() <= FAST_ALL_REDUCE_BYTES:
            return None
        team = self._team_id
        if torch.cuda.is_current_stream_capturing() and not _ops_library.all_reduce_planned(t, name, team):
            return None
        _ops_library.all_reduce_in_place(t, name, team)
        return _CallerWork([t], _cuda.current_raw_stream(self._gpu), self._gpu)

    def broadcast(self, tensors, opts):
        call = "broadcast"
        if self._route(tensors, call) == "gloo":
            return self._gloo.broadcast(tensors, opts)
        root = opts.rootRank
        self._pe(root, "broadcast: root")

        def body(cuda):
            for t in tensors:
                flat = _flat(t)
                m = self._chunk(t.dtype, 2)
                for i in range(0, flat.numel(), m):
                    piece = flat[i:i + m]
                    src, dst = self._area(t.dtype, piece.numel(), piece.numel())
                    if self.rank() == root:
                        src.copy_(piece)
                    (rtorch.broadcast_on_stream if cuda else _rs.broadcast)(dst, src, root, self._team)
                    if self.rank() != root:
                        piece.copy_(dst)
        return self._run(tensors, tensors, body)

    def _gather_blocks(self, outs, inp, cuda):
        """outs[j] (flat) gets member j's flat `inp`."""
        n, dtype = self.size(), inp.dtype
        m = self._chunk(dtype, n + 1)
        for i in range(0, inp.numel(), m):
            piece = inp[i:i + m]
            k = piece.numel()
            src, dst = self._area(dtype, k, n * k)
            src.copy_(piece)
            (rtorch.fcollect_on_stream if cuda else _rs.fcollect)(dst, src, self._team)
            for j in range(n):
                outs[j][i:i + k].copy_(dst[j * k:(j + 1) * k])

    def allgather(self, output_tensors, input_tensors, opts):
        call = "all_gather"
        flat_outs = [t for ts in output_tensors for t in ts]
        if self._route(flat_outs + list(input_tensors), call) == "gloo":
            return self._gloo.allgather(output_tensors, input_tensors, opts)
        for outs, inp in zip(output_tensors, input_tensors):
            self._same(outs, inp, call)

        def body(cuda):
            for outs, inp in zip(output_tensors, input_tensors):
                self._gather_blocks([_flat(o) for o in outs], _flat(inp), cuda)
        return self._run(flat_outs + list(input_tensors), output_tensors, body)

    def _allgather_base(self, output, input, opts):
        call = "all_gather_into_tensor"
        if self._route([output, input], call) == "gloo":
            return self._gloo._allgather_base(output, input, opts)
        if output.numel() != input.numel() * self.size() or output.dtype != input.dtype:
            raise InvalidArgumentError(f"{call}: output must hold group size ({self.size()}) x input's "
                                       f"{input.numel()} elements of {input.dtype}, not {output.numel()} of {output.dtype}")

        def body(cuda):
            k = input.numel()
            out = _flat(output)
            self._gather_blocks([out[j * k:(j + 1) * k] for j in range(self.size())], _flat(input), cuda)
        return self._run([output, input], [output], body)

    # torch's functional collectives (DTensor redistribution, FSDP2's full tensors, traced
    # collectives) call these coalesced forms from C++; the other C++ entry points of a process
    # group (`_allgather_base`, ...) dispatch to a C++ backend by device, which a Python process
    # group has none of ("No backend type associated with device type ...").
    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        return self._coalesced("allgather_into_tensor_coalesced", "_allgather_base", outputs, inputs, opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):
        return self._coalesced("reduce_scatter_tensor_coalesced", "_reduce_scatter_base", outputs, inputs, opts)

    def _coalesced(self, call, one, outputs, inputs, opts):
        """The coalesced method `call`: `one` (its single-tensor form) on each pair."""
        if len(outputs) != len(inputs):
            raise InvalidArgumentError(f"{call}: {len(outputs)} outputs for {len(inputs)} inputs")
        if self._route(list(outputs) + list(inputs), call) == "gloo":
            return getattr(self._gloo, call)(outputs, inputs, opts)
        # Each runs on the host, or in order on the group's stream: the last one's Work covers all.
        works = [getattr(self, one)(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1] if works else _Work(outputs)

    def _same(self, blocks, one, call):
        if len(blocks) != self.size():
            raise InvalidArgumentError(f"{call}: pass one tensor per rank ({self.size()}), not {len(blocks)}")
        for b in blocks:
            if b.numel() != one.numel() or b.dtype != one.dtype:
                raise InvalidArgumentError(f"{call}: every tensor must have {one.numel()} elements of {one.dtype}, "
                                           f"got {b.numel()} of {b.dtype}")

    def _scatter_reduce(self, out, ins, op, cuda):
        """out (flat) gets the reduction of block `me` (ins[me]) over the members."""
        n, dtype = self.size(), out.dtype
        m = self._chunk(dtype, n + 1)
        for i in range(0, out.numel(), m):
            k = min(m, out.numel() - i)
            src, dst = self._area(dtype, n * k, k)
            for j in range(n):
                src[j * k:(j + 1) * k].copy_(ins[j][i:i + k])
            (rtorch.reducescatter_on_stream if cuda else _rs.reducescatter)(dst, src, op, self._team)
            out[i:i + k].copy_(dst)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        call = "reduce_scatter"
        flat_ins = [t for ts in input_tensors for t in ts]
        if self._route(list(output_tensors) + flat_ins, call) == "gloo":
            return self._gloo.reduce_scatter(output_tensors, input_tensors, opts)
        op, avg = self._op(opts, output_tensors[0].dtype, call)
        for out, ins in zip(output_tensors, input_tensors):
            self._same(ins, out, call)

        def body(cuda):
            for out, ins in zip(output_tensors, input_tensors):
                self._scatter_reduce(_flat(out), [_flat(t) for t in ins], op, cuda)
                if avg:
                    out.div_(self.size())
        return self._run(list(output_tensors) + flat_ins, output_tensors, body)

    def _reduce_scatter_base(self, output, input, opts):
        call = "reduce_scatter_tensor"
        if self._route([output, input], call) == "gloo":
            return self._gloo._reduce_scatter_base(output, input, opts)
        op, avg = self._op(opts, output.dtype, call)
        if input.numel() != output.numel() * self.size() or output.dtype != input.dtype:
            raise InvalidArgumentError(f"{call}: input must hold group size ({self.size()}) x output's "
                                       f"{output.numel()} elements of {output.dtype}, not {input.numel()} of {input.dtype}")

        def body(cuda):
            k, src = output.numel(), _flat(input)
            self._scatter_reduce(_flat(output), [src[j * k:(j + 1) * k] for j in range(self.size())], op, cuda)
            if avg:
                output.div_(self.size())
        return self._run([output, input], [output], body)

    def _exchange_counts(self, sends, receives, cuda):
        """Every member's send and receive counts, as rows [sends..., receives...]."""
        n = self.size()
        mine = torch.tensor(sends + receives, dtype=torch.int64, device=f"cuda:{self._gpu}" if cuda else "cpu")
        src, dst = self._area(torch.int64, 2 * n, 2 * n * n)
        src.copy_(mine)
        (rtorch.fcollect_on_stream if cuda else _rs.fcollect)(dst, src, self._team)
        return dst.view(n, 2 * n).tolist()  # the host reads it: the counts decide the rounds

    def _alltoallv(self, outs, ins, cuda):
        """ins[j] (flat) goes to member j, which receives it as its outs[me]: padded rounds of
        rshmem's alltoall, the same number on every member (the largest block decides)."""
        n = self.size()
        dtype = ins[0].dtype if ins else outs[0].dtype
        rows = self._exchange_counts([t.numel() for t in ins], [t.numel() for t in outs], cuda)
        counts = [row[:n] for row in rows]
        # Every member checks every pair, so all raise together rather than one leaving the others waiting.
        for i in range(n):
            for j in range(n):
                if counts[i][j] != rows[j][n + i]:
                    raise InvalidArgumentError(
                        f"all_to_all: rank {i} sends {counts[i][j]} elements to rank {j}, which expects "
                        f"{rows[j][n + i]}; the splits of both ranks must agree")
        largest = max(max(row) for row in counts)
        c = self._chunk(dtype, 2 * n)
        for r in range(0, largest, c):
            src, dst = self._area(dtype, n * c, n * c)
            for j in range(n):
                k = max(min(c, ins[j].numel() - r), 0)
                if k:
                    src[j * c: j * c + k].copy_(ins[j][r:r + k])
            (rtorch.alltoall_on_stream if cuda else _rs.alltoall)(dst, src, self._team)
            for i in range(n):
                k = max(min(c, outs[i].numel() - r), 0)
                if k:
                    outs[i][r:r + k].copy_(dst[i * c: i * c + k])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts):
        call = "all_to_all_single"
        if self._route([output, input], call) == "gloo":
            return self._gloo.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)
        if output.dtype != input.dtype:
            raise DTypeError(f"{call}: output is {output.dtype} but input is {input.dtype}")

        def blocks(t, splits, what):
            flat, n = _flat(t), self.size()
            row = t[0].numel() if t.dim() and t.shape[0] else 0
            sizes = list(splits) if splits else [t.shape[0] // n] * n if t.dim() else []
            if len(sizes) != n or sum(sizes) != (t.shape[0] if t.dim() else 0):
                raise InvalidArgumentError(f"{call}: {what} splits {sizes} must be {n} sizes adding up to dim 0 "
                                           f"({t.shape[0] if t.dim() else 0})")
            out, at = [], 0
            for s in sizes:
                out.append(flat[at * row:(at + s) * row])
                at += s
            return out

        outs, ins = blocks(output, output_split_sizes, "output"), blocks(input, input_split_sizes, "input")
        return self._run([output, input], [output], lambda cuda: self._alltoallv(outs, ins, cuda))

    def alltoall(self, output_tensors, input_tensors, opts):
        call = "all_to_all"
        if self._route(list(output_tensors) + list(input_tensors), call) == "gloo":
            return self._gloo.alltoall(output_tensors, input_tensors, opts)
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise InvalidArgumentError(f"{call}: pass {n} output and {n} input tensors")
        if len({t.dtype for t in list(output_tensors) + list(input_tensors)}) != 1:
            raise DTypeError(f"{call}: every tensor must have one dtype")
        outs, ins = [_flat(t) for t in output_tensors], [_flat(t) for t in input_tensors]
        return self._run(list(output_tensors) + list(input_tensors), output_tensors,
                         lambda cuda: self._alltoallv(outs, ins, cuda))

    def barrier(self, opts):
        if self._stream is not None:
            # Work queued on the GPU comes first, as a barrier after collectives promises.
            torch.cuda.current_stream(self._gpu).synchronize()
            self._stream.synchronize()
        _teams.barrier(self._team)
        return _Work(None)

    # ------------------------------------------------------------------ point to point

    def _p2p_route(self, tensors, call, tag):
        if tag != 0:
            raise UnsupportedError(f"{call}: tag {tag}; the rshmem backend matches messages of a pair in order "
                                   "and takes tag 0 only")
        if len(tensors) != 1:
            raise InvalidArgumentError(f"{call}: pass one tensor, not {len(tensors)}")
        return self._route(tensors, call)

    def send(self, tensors, dst_rank, tag):
        call = "send"
        if self._p2p_route(tensors, call, tag) == "gloo":
            return self._gloo.send(tensors, dst_rank, tag)
        peer = self._pe(dst_rank, "send: dst")
        p, raw = self._parts, _flat(tensors[0]).view(torch.uint8)
        me = self.rank()

        def body(cuda):
            for i in range(0, max(raw.numel(), 1), p.slot_bytes):
                piece = raw[i:i + p.slot_bytes]
                p.sent[dst_rank] += 1
                seq = p.sent[dst_rank]
                # The receiver hands the mailbox back by setting our credit word to its count.
                if cuda:
                    rtorch.signal_wait_until_on_stream(p.credit[dst_rank], _native.CMP_GE, seq - 1)
                    rtorch.putmem_signal_on_stream(p.mail[me][:piece.numel()], piece, p.ready[me], seq,
                                                   _native.SIGNAL_SET, peer)
                else:
                    _rs.signal_wait_until(p.credit[dst_rank], _native.CMP_GE, seq - 1)
                    _rs.putmem_signal(p.mail[me][:piece.numel()], piece, p.ready[me], seq,
                                             _native.SIGNAL_SET, peer)
        return self._run(tensors, tensors, body)

    def recv(self, tensors, src_rank, tag):
        call = "recv"
        if self._p2p_route(tensors, call, tag) == "gloo":
            return self._gloo.recv(tensors, src_rank, tag)
        peer = self._pe(src_rank, "recv: src")
        p, raw = self._parts, _flat(tensors[0]).view(torch.uint8)
        sender = src_rank  # mailboxes and ready words are indexed by the sender's group rank
        me_rank = self.rank()

        def body(cuda):
            for i in range(0, max(raw.numel(), 1), p.slot_bytes):
                piece = raw[i:i + p.slot_bytes]
                p.received[src_rank] += 1
                seq = p.received[src_rank]
                if cuda:
                    rtorch.signal_wait_until_on_stream(p.ready[sender], _native.CMP_GE, seq)
                    piece.copy_(p.mail[sender][:piece.numel()])
                    rtorch.signal_op_on_stream(p.credit[me_rank], seq, _native.SIGNAL_SET, peer)
                else:
                    _rs.signal_wait_until(p.ready[sender], _native.CMP_GE, seq)
                    piece.copy_(p.mail[sender][:piece.numel()])
                    _rs.signal_op(p.credit[me_rank], seq, _native.SIGNAL_SET, peer)
        return self._run(tensors, tensors, body)

    def recv_anysource(self, tensors, tag):
        raise UnsupportedError("recv without a source: the rshmem backend receives from a named rank only")

    def _no(self, call):
        raise UnsupportedError(f"{call} is not supported by the rshmem backend (all_reduce, all_gather, "
                               "reduce_scatter, all_to_all, broadcast, barrier, send and recv are)")

    def gather(self, *args):
        self._no("gather")

    def scatter(self, *args):
        self._no("scatter")

    def reduce(self, *args):
        self._no("reduce")

    def allreduce_coalesced(self, *args):
        self._no("all_reduce_coalesced")

    def allgather_coalesced(self, *args):
        self._no("all_gather_coalesced")


dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "cuda"])

__all__ = ["BACKEND", "RshmemProcessGroup", "new_group", "release"]
