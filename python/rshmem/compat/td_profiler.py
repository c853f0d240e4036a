"""The in-kernel profiler that Triton-distributed's kernels take as an argument
(``triton_dist.tools.profiler``), on stock Triton: same names, same calls, same buffer layout.

In a kernel::

    profiler = Profiler.create(profiler_buffer=buf, group_id=0, num_groups=1, is_leader=(tid(0) == 0),
                               ENABLE_PROFILING=ENABLE_PROFILING)
    profiler = profiler.record(is_start=True, task_type=0)
    ...
    profiler = profiler.record(is_start=False, task_type=0)

With ``ENABLE_PROFILING=False`` (a constexpr) every call compiles to nothing. On the host::

    buf = alloc_profiler_buffer(max_num_profile_slots=100_000)
    kernel[grid](..., buf, ENABLE_PROFILING=True)
    export_to_perfetto_trace(buf, ["dispatch", "combine"], "trace")   # trace.json, Chrome/Perfetto

Buffer (uint64 slots): slot 0 holds (number of programs, groups per program) as two int32;
slot 1 + p holds (p, SM id) for program p; then record k of group g of program p is at
``1 + num_programs + k * num_programs * num_groups + p * num_groups + g``. A record is
``tag | globaltimer_lo << 32`` with ``tag = (p * num_groups + g) << 12 | task_type << 1 |
is_start``. Unwritten slots hold EMPTY_VALUE.

Triton-distributed's own ``Profiler`` does not compile on stock Triton 3.6 (its ``__init__`` is
a plain function, which Triton's dependency scan refuses); this one's constructor is a Triton
builtin, and the rest is ``@triton.jit``.
"""
# No `from __future__ import annotations`: Triton checks aggregate fields against their annotations.

import json
from pathlib import Path

import torch
import triton
import triton.language as tl

from rshmem.triton.language import fence, globaltimer_lo, smid

__all__ = ["Profiler", "PROFILER_ENTRY_DTYPE", "EMPTY_VALUE", "alloc_profiler_buffer", "reset_profiler_buffer",
           "ProfilerBuffer", "parse_to_tracks", "export_to_perfetto_trace", "set_export_trace_on",
           "set_export_trace_off", "get_export_trace_on"]

PROFILER_ENTRY_DTYPE = torch.uint64
EMPTY_VALUE = 0x7FFFFFFFFFFFFFFF
"""What an unwritten slot holds (not all ones: torch.profiler chokes on that value)."""
NUM_BITS_ID = 20
NUM_BITS_TASK_TYPE = 11
NUM_BITS_EVENT = 1
_ID_SHIFT = tl.constexpr(NUM_BITS_TASK_TYPE + NUM_BITS_EVENT)
_TASK_SHIFT = tl.constexpr(NUM_BITS_EVENT)


def _as_tensor(value, _semantic):
    value = tl.core._unwrap_if_constexpr(value)
    return value if isinstance(value, tl.tensor) else _semantic.to_tensor(value)


@tl.core._aggregate
class Profiler:
    buffer: tl.tensor  # this program's and group's next slot (uint64*)
    stride: tl.tensor  # slots between two records of one program and group
    is_leader: tl.tensor
    group_id: tl.tensor
    num_groups: tl.constexpr
    ENABLE_PROFILING: tl.constexpr

    def __init__(self, buffer, stride, is_leader, group_id, num_groups, ENABLE_PROFILING, _semantic=None):
        self.buffer = _as_tensor(buffer, _semantic)
        self.stride = _as_tensor(stride, _semantic)
        self.is_leader = _as_tensor(is_leader, _semantic)
        self.group_id = _as_tensor(group_id, _semantic)
        self.num_groups = tl.constexpr(tl.core._unwrap_if_constexpr(num_groups))
        self.ENABLE_PROFILING = tl.constexpr(bool(tl.core._unwrap_if_constexpr(ENABLE_PROFILING)))

    # A builtin to Triton's dependency scan (a plain function there is refused); it runs at
    # compile time with the code generator's semantic.
    __init__.__triton_builtin__ = True

    @triton.jit
    def create(profiler_buffer, group_id, num_groups=1, is_leader=True, num_blocks=None, ENABLE_PROFILING=True):
        nx = tl.num_programs(axis=0)
        ny = tl.num_programs(axis=1)
        nz = tl.num_programs(axis=2)
        if num_blocks is None:
            num_blocks = nx * ny * nz
        pid = tl.program_id(0) + tl.program_id(1) * nx + tl.program_id(2) * nx * ny
        slots = profiler_buffer.to(tl.pointer_type(tl.uint64))
        if ENABLE_PROFILING:
            words = slots.to(tl.pointer_type(tl.int32))
            if pid == 0:
                tl.store(words, num_blocks)
                tl.store(words + 1, num_groups)
            tl.store(words + (pid + 1) * 2, pid)
            tl.store(words + (pid + 1) * 2 + 1, smid())
            slots = slots + 1 + num_blocks
        return Profiler(slots + pid * num_groups + group_id, num_blocks * num_groups, is_leader, group_id, num_groups,
                        ENABLE_PROFILING)

    @triton.jit
    def record(self, is_start, task_type):
        next_slot = self.buffer
        if self.ENABLE_PROFILING:
            fence(semantic="sc", scope="cta")
            if self.is_leader:
                nx = tl.num_programs(axis=0)
                ny = tl.num_programs(axis=1)
                pid = tl.program_id(0) + tl.program_id(1) * nx + tl.program_id(2) * nx * ny
                global_id = pid * self.num_groups + self.group_id
                tag = ((global_id << _ID_SHIFT) | (tl.cast(task_type, tl.int32) << _TASK_SHIFT)
                       | tl.cast(is_start, tl.int32))
                now = globaltimer_lo().to(tl.uint32, bitcast=True).to(tl.uint64)
                entry = (now << 32) | tag.to(tl.uint32, bitcast=True).to(tl.uint64)
                tl.store(self.buffer, entry)
            next_slot = self.buffer + self.stride
            fence(semantic="sc", scope="cta")
        return Profiler(next_slot, self.stride, self.is_leader, self.group_id, self.num_groups, self.ENABLE_PROFILING)


# ---------------------------------------------------------------- host side
_export_on = True


def set_export_trace_on() -> None:
    global _export_on
    _export_on = True


def set_export_trace_off() -> None:
    global _export_on
    _export_on = False


def get_export_trace_on() -> bool:
    return _export_on


def reset_profiler_buffer(buf: torch.Tensor) -> torch.Tensor:
    """Marks every slot unwritten; returns ``buf``."""
    return buf.fill_(EMPTY_VALUE)


def alloc_profiler_buffer(max_num_profile_slots: int) -> torch.Tensor:
    """A reset profiler buffer of ``max_num_profile_slots`` uint64 slots on the current GPU."""
    if max_num_profile_slots < 2:
        raise ValueError(f"alloc_profiler_buffer: {max_num_profile_slots} slots; the header alone needs 2")
    return reset_profiler_buffer(torch.empty((max_num_profile_slots,), dtype=PROFILER_ENTRY_DTYPE,
                                             device=torch.cuda.current_device()))


def parse_to_tracks(profiler_buffer: torch.Tensor) -> dict:
    """``{(program, group): {"sm": id, "spans": [(task_type, start_ns, end_ns), ...]}}`` from a
    buffer a kernel filled. Times are relative to the earliest record (the 32-bit timer's wrap
    taken into account for spans under 4 s)."""
    if profiler_buffer.dtype != PROFILER_ENTRY_DTYPE:
        raise TypeError(f"parse_to_tracks: expected a uint64 profiler buffer, got {profiler_buffer.dtype}")
    raw = profiler_buffer.cpu().view(torch.int64).tolist()
    if not raw or raw[0] == EMPTY_VALUE:
        return {}
    word = raw[0] & 0xFFFFFFFFFFFFFFFF
    num_blocks, num_groups = word & 0xFFFFFFFF, word >> 32
    sms = {}
    for p in range(num_blocks):
        w = raw[1 + p] & 0xFFFFFFFFFFFFFFFF
        if raw[1 + p] != EMPTY_VALUE:
            sms[w & 0xFFFFFFFF] = w >> 32
    records = [r & 0xFFFFFFFFFFFFFFFF for r in raw[1 + num_blocks:] if r != EMPTY_VALUE]
    if not records:
        return {}
    t0 = min(r >> 32 for r in records)
    tracks, open_at = {}, {}
    for r in records:
        tag, ts = r & 0xFFFFFFFF, ((r >> 32) - t0) & 0xFFFFFFFF
        is_start, task = tag & 1, (tag >> NUM_BITS_EVENT) & ((1 << NUM_BITS_TASK_TYPE) - 1)
        gid = tag >> (NUM_BITS_EVENT + NUM_BITS_TASK_TYPE)
        key = (gid // num_groups, gid % num_groups)
        track = tracks.setdefault(key, {"sm": sms.get(key[0], -1), "spans": []})
        if is_start:
            open_at[(key, task)] = ts
        elif (key, task) in open_at:
            track["spans"].append((task, open_at.pop((key, task)), ts))
    return tracks


def export_to_perfetto_trace(profiler_buffer: torch.Tensor, task_names, file_name: str, verbose: bool = False) -> Path:
    """Writes the buffer's spans as a Chrome trace (JSON; Perfetto's UI and chrome://tracing
    open it) to ``file_name`` (``.json`` added unless present): one row per program and group,
    named by its SM. Returns the path."""
    path = Path(file_name if str(file_name).endswith(".json") else f"{file_name}.json")
    events = []
    for (program, group), track in sorted(parse_to_tracks(profiler_buffer).items()):
        for task, start, end in track["spans"]:
            name = task_names[task] if task < len(task_names) else f"task{task}"
            events.append({"name": name, "ph": "X", "ts": start / 1000, "dur": max(end - start, 0) / 1000,
                           "pid": f"program {program} (SM {track['sm']})", "tid": f"group {group}"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events}))
    if verbose:
        print(f"profiler: {len(events)} spans written to {path}")
    return path


class ProfilerBuffer:
    """Context manager: yields a reset buffer; on exit (unless export is switched off) writes
    its trace with ``task_names`` to ``trace_file``."""

    def __init__(self, max_num_profile_slots: int, trace_file: str, task_names):
        self.trace_file, self.task_names = trace_file, task_names
        self.profiler_buffer = alloc_profiler_buffer(max_num_profile_slots)

    def __enter__(self) -> torch.Tensor:
        return reset_profiler_buffer(self.profiler_buffer)

    def __exit__(self, *exc):
        if get_export_trace_on():
            torch.cuda.synchronize()
            export_to_perfetto_trace(self.profiler_buffer, self.task_names, self.trace_file)
        return False
