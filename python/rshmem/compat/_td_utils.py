"""More of Triton-distributed's host helpers (``triton_dist.utils``, ``triton_dist.profiler_utils``,
``triton_dist.tools``, ``triton_dist.tune``, ``triton_dist.kernels.common_ops``), same names and
arguments, re-exported by ``rshmem.compat.triton_dist``.

They need torch; the CUDA ones need a GPU and ``cuda-bindings`` (``cuda.bindings``, a torch
dependency), which is what ``cuda`` / ``cudart`` name here: the modules that Triton-distributed
imports as ``from cuda import cuda, cudart`` and current cuda-bindings calls
``cuda.bindings.driver`` / ``cuda.bindings.runtime``.
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable, Sequence

import torch

import rshmem
import rshmem.torch as rtorch
from rshmem.compat._td_cuda import CUDA_CHECK, cuda, cudart, has_fullmesh_nvlink  # noqa: F401 - part of this API
from rshmem.compat._td_host import get_numa_node_count_in_group, support_launch_cooperative_grid

__all__ = [
    "cuda", "cudart", "CUDA_CHECK", "is_cuda", "is_hip", "is_maca", "is_ascend", "launch_cooperative_grid_options",
    "aot_compile_spaces", "has_fullmesh_nvlink", "supports_p2p_native_atomic", "requires_p2p_native_atomic",
    "has_tma", "requires", "perf_func", "sleep_async", "generate_data", "get_device_max_shared_memory_size",
    "get_device_property", "get_max_gpu_clock_rate_in_khz", "torch_stream_max_priority",
    "is_nvshmem_multimem_supported", "get_group_numa_world_size", "get_triton_dist_world", "wait_eq", "set_signal",
    "BarrierAllContext", "barrier_all_on_stream", "tune", "to_hashable", "stage_cuda_collectives_through_cpu",
]


def is_cuda() -> bool:
    """True: rshmem runs on NVIDIA GPUs (or on the host backend, which Triton-distributed's
    CUDA paths also take)."""
    return True


def is_hip() -> bool:
    """False: rshmem has no AMD backend."""
    return False


def is_maca() -> bool:
    """False: rshmem has no MetaX backend."""
    return False


def is_ascend() -> bool:
    """False: rshmem has no Ascend backend."""
    return False


def launch_cooperative_grid_options() -> dict:
    """Launch options that make Triton launch a grid cooperatively (all programs resident):
    ``{"launch_cooperative_grid": True}`` where Triton supports it (3.3 and later), else {}."""
    return {"launch_cooperative_grid": True} if support_launch_cooperative_grid() else {}


def aot_compile_spaces(spaces: dict):
    """Decorator recording Triton-distributed's ahead-of-time compile spaces on a kernel
    (``fn.__aot_compile_spaces__``); rshmem compiles just in time and keeps them as metadata
    (tools/port_triton_dist.py reads their signatures). Checks their shape as theirs does."""
    if not isinstance(spaces, dict):
        raise TypeError("aot_compile_spaces: expected a dict of kernel name -> space")
    for name, space in spaces.items():
        missing = [k for k in ("signature", "grid", "triton_algo_infos") if k not in space]
        if missing or not isinstance(space["grid"], list) or not space["triton_algo_infos"]:
            raise ValueError(f"aot_compile_spaces: space {name!r} needs signature, grid (a list) and a non-empty "
                             f"triton_algo_infos list (missing {missing})")

    def decorate(fn):
        fn.__aot_compile_spaces__ = spaces
        return fn

    return decorate


@functools.lru_cache()
def supports_p2p_native_atomic() -> bool:
    """Whether GPU 0 and GPU 1 support native atomics over their peer link (true with one GPU)."""
    if torch.cuda.device_count() <= 1:
        return True
    err, ok = cudart.cudaDeviceGetP2PAttribute(cudart.cudaDeviceP2PAttr.cudaDevP2PAttrNativeAtomicSupported, 0, 1)
    CUDA_CHECK(err)
    return ok == 1


def requires_p2p_native_atomic(fn):
    """Decorator: warns when ``fn`` runs where peers lack native atomics."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not supports_p2p_native_atomic():
            warnings.warn(f"{fn.__name__} needs native peer atomics, which these GPUs lack: results may be wrong")
        return fn(*args, **kwargs)

    return wrapper


@functools.lru_cache()
def has_tma() -> bool:
    """Whether this GPU has the Tensor Memory Accelerator (compute capability 9.0 or newer)."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def requires(condition: Callable[[], bool]):
    """Decorator: the function raises RuntimeError unless ``condition()`` holds when called."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not condition():
                raise RuntimeError(f"{fn.__name__} needs {condition.__name__}(), which is false here")
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def perf_func(func, iters: int, warmup_iters: int):
    """Runs ``func`` ``warmup_iters`` times, then ``iters`` times between two CUDA events;
    returns (last output, milliseconds per call)."""
    for _ in range(warmup_iters):
        func()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    output = None
    for _ in range(iters):
        output = func()
    stop.record()
    torch.cuda.synchronize()
    return output, start.elapsed_time(stop) / max(iters, 1)


@functools.lru_cache()
def get_max_gpu_clock_rate_in_khz(device_id=0) -> int:
    """The GPU's maximum SM clock in kHz."""
    device_id = torch.cuda.current_device() if device_id is None else device_id
    err, khz = cudart.cudaDeviceGetAttribute(cudart.cudaDeviceAttr.cudaDevAttrClockRate, device_id)
    CUDA_CHECK(err)
    return khz


def sleep_async(duration_ms: float) -> None:
    """Queues a kernel that spins for about ``duration_ms`` on the current stream."""
    cycles = int(get_max_gpu_clock_rate_in_khz(torch.cuda.current_device()) * duration_ms)
    torch.cuda._sleep(cycles)


def _make_tensor(shape, dtype, init_args, device="cuda"):
    if callable(shape):
        shape = shape()
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(s() if callable(s) else s for s in shape)
    scale, bias = init_args
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return (torch.rand(shape, dtype=dtype, device=device) * 2 - 1) * scale + bias
    if dtype == torch.int8:
        return torch.randint(-scale, scale, shape, dtype=torch.int8, device=device) + bias
    if dtype.itemsize == 1 and dtype.is_floating_point:  # fp8
        return ((torch.rand(shape, dtype=torch.float16, device=device) * 2 - 1) * scale + bias).to(dtype)
    raise ValueError(f"generate_data: dtype {dtype} is not one of fp16, bf16, fp32, int8, fp8")


def generate_data(configs: Sequence):
    """Endless generator: each item yields one tensor per config ``(shape, dtype, (scale,
    bias))`` (uniform in [-scale, scale) + bias; integers from randint), or None for an empty
    config. Shapes may hold callables, evaluated per item."""
    while True:
        yield (_make_tensor(*c) if c else None for c in configs)


@functools.lru_cache()
def get_device_max_shared_memory_size(device_id) -> int:
    """Shared memory per block available with opt-in, in bytes."""
    err, value = cudart.cudaDeviceGetAttribute(cudart.cudaDeviceAttr.cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                               device_id)
    CUDA_CHECK(err)
    return value


@functools.lru_cache()
def get_device_property(device_id=0):
    """``torch.cuda.get_device_properties(device_id)``."""
    return torch.cuda.get_device_properties(device_id)


@functools.lru_cache()
def torch_stream_max_priority() -> int:
    """The highest stream priority torch can create (-1 if it cannot say)."""
    try:
        return torch.cuda.current_stream().priority_range()[1]
    except Exception:  # noqa: BLE001 (no stream support: Triton-distributed answers -1 too)
        return -1


def is_nvshmem_multimem_supported() -> bool:
    """False: rshmem offers no NVLink multicast (see docs/porting-from-triton-distributed.md)."""
    return False


def get_group_numa_world_size(pg) -> int:
    """Collective over ``pg``: its size divided by ``get_numa_node_count_in_group(pg)`` (the
    PEs per NUMA domain where the group splits evenly over two, else the group size)."""
    return pg.size() // get_numa_node_count_in_group(pg)


def get_triton_dist_world():
    """The process group Triton-distributed's kernels use: torch.distributed's WORLD."""
    return torch.distributed.group.WORLD


# ---------------------------------------------------------------- stream flags
def _stream(stream):
    return (stream or torch.cuda.current_stream()).cuda_stream


def wait_eq(signal_tensor: torch.Tensor, signal: int, stream=None, require_i64=False) -> None:
    """Makes ``stream`` (default: current) wait until the first word of ``signal_tensor``
    (int32 or int64) equals ``signal`` (``cuStreamWaitValue32/64``)."""
    flags = cuda.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ
    if signal_tensor.dtype == torch.int32 and not require_i64:
        (err,) = cuda.cuStreamWaitValue32(_stream(stream), signal_tensor.data_ptr(), signal, flags)
    elif signal_tensor.dtype in (torch.int64, torch.uint64):
        (err,) = cuda.cuStreamWaitValue64(_stream(stream), signal_tensor.data_ptr(), signal, flags)
    else:
        raise rshmem.DTypeError(f"wait_eq: signal tensors are int32 or int64, got {signal_tensor.dtype}")
    CUDA_CHECK(err)


def set_signal(signal_tensor: torch.Tensor, signal: int, stream=None) -> None:
    """Writes ``signal`` to the first word of ``signal_tensor`` (int32 or int64) in ``stream``
    order (``cuStreamWriteValue32/64``)."""
    flags = cuda.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT
    if signal_tensor.dtype == torch.int32:
        (err,) = cuda.cuStreamWriteValue32(_stream(stream), signal_tensor.data_ptr(), signal, flags)
    elif signal_tensor.dtype in (torch.int64, torch.uint64):
        (err,) = cuda.cuStreamWriteValue64(_stream(stream), signal_tensor.data_ptr(), signal, flags)
    else:
        raise rshmem.DTypeError(f"set_signal: signal tensors are int32 or int64, got {signal_tensor.dtype}")
    CUDA_CHECK(err)


class BarrierAllContext:
    """State for ``barrier_all_on_stream(ctx, stream)``: a barrier of all PEs
    (``is_intra_node=False``) or of this node's PEs (``True``), ordered on a stream."""

    def __init__(self, is_intra_node: bool):
        self.is_intra_node = is_intra_node
        self.rank = rshmem.my_pe()
        self.local_rank = rshmem.team_my_pe(rshmem.Team.NODE)
        self.num_local_ranks = rshmem.team_n_pes(rshmem.Team.NODE)

    def finalize(self) -> None:
        """Nothing to release: the barrier keeps no buffers of its own."""


def barrier_all_on_stream(ctx: BarrierAllContext, stream=None) -> None:
    """Collective: a barrier of ``ctx``'s PEs ordered on ``stream`` (default: current)."""
    if ctx.is_intra_node:
        rtorch.barrier_on_stream(rshmem.Team.NODE, stream)
    else:
        rtorch.barrier_all_on_stream(stream)


# ---------------------------------------------------------------- reference collectives on gloo
# send / recv too: gloo reads and writes their buffer as host memory ("writev: Bad address" and
# an abort, where Triton-distributed's pipeline test sends CUDA tensors).
_STAGED = ("all_gather", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single", "send", "recv")


def _tensors_of(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_of(v)]
    return []


def _needs_staging(group, tensors) -> bool:
    """gloo has no CUDA all_gather / reduce_scatter / all_to_all (those calls raise) and takes a
    CUDA tensor's device address for host memory in send / recv."""
    import torch.distributed as dist  # noqa: PLC0415

    return dist.get_backend(group) == "gloo" and any(t.is_cuda for t in tensors)


def _staged(name: str, plain):
    @functools.wraps(plain)
    def call(*args, **kwargs):
        group = kwargs.get("group")
        tensors = _tensors_of(list(args) + [v for k, v in kwargs.items() if k != "group"])
        if kwargs.get("async_op") or not _needs_staging(group, tensors):
            return plain(*args, **kwargs)
        host = {id(t): t.cpu() for t in tensors}

        def swap(v):
            if isinstance(v, torch.Tensor):
                return host[id(v)]
            if isinstance(v, (list, tuple)):
                return type(v)(swap(x) for x in v)
            return v

        out = plain(*[swap(a) for a in args], **{k: swap(v) for k, v in kwargs.items()})
        for t in tensors:  # the outputs (and the unchanged inputs) come back
            t.copy_(host[id(t)])
        return out

    call.__rshmem_staged__ = plain
    return call


def _gloo_for_nccl(backend):
    """"gloo" for a backend that names NCCL ("nccl", "cpu:gloo,cuda:nccl"); others unchanged."""
    if isinstance(backend, str) and "nccl" in backend.lower():
        return "gloo"
    return backend


def _gloo_groups(name: str, plain):
    import rshmem.torch as rt  # noqa: PLC0415

    @functools.wraps(plain)
    def call(*args, **kwargs):
        if rt.dist_backend() == "gloo":
            if "backend" in kwargs:
                kwargs["backend"] = _gloo_for_nccl(kwargs["backend"])
            elif name == "init_process_group" and args:
                args = (_gloo_for_nccl(args[0]),) + args[1:]
            if name == "init_process_group":
                kwargs.pop("device_id", None)  # binds NCCL to a GPU; gloo takes none
        return plain(*args, **kwargs)

    call.__rshmem_staged__ = plain
    return call


def _shared_set_device(plain):
    import rshmem.torch as rt  # noqa: PLC0415

    @functools.wraps(plain)
    def set_device(device):
        index = device if isinstance(device, int) else getattr(torch.device(device), "index", None)
        if index is not None and index >= torch.cuda.device_count() and rt.gpu_shared():
            device = rt.device()  # the GPU rshmem gives this PE (round-robin over the visible ones)
        return plain(device)

    set_device.__rshmem_staged__ = plain
    return set_device


def stage_cuda_collectives_through_cpu() -> None:
    """Lets Triton-distributed's torch.distributed calls run where PEs share one GPU.

    PEs sharing one GPU run torch.distributed on gloo (NCCL refuses two ranks on one GPU), and
    gloo refuses CUDA tensors for all_gather, all_gather_into_tensor, reduce_scatter_tensor and
    all_to_all_single, and send / recv of a CUDA tensor abort the process; Triton-distributed
    calls them on CUDA tensors for its reference results. After this call:

    - those six take CUDA tensors on a gloo group, through host copies (calls on other
      backends, on CPU tensors, or with ``async_op=True`` are unchanged);
    - where ``rshmem.torch.dist_backend()`` is gloo (a shared GPU, or none),
      ``init_process_group`` and ``new_group`` given a backend that names NCCL (``"nccl"``,
      ``"cpu:gloo,cuda:nccl"``) create gloo groups instead; with a GPU per PE they are unchanged;
    - where PEs share a GPU, ``torch.cuda.set_device(LOCAL_RANK)`` with an ordinal past the
      visible GPUs selects the GPU rshmem gives this PE (``rshmem.torch.device()``) instead of
      failing with "invalid device ordinal".

    ``initialize_distributed`` calls it when it chooses gloo on a GPU. Idempotent."""
    import torch.distributed as dist  # noqa: PLC0415

    for name in _STAGED:
        plain = getattr(dist, name)
        if not hasattr(plain, "__rshmem_staged__"):
            setattr(dist, name, _staged(name, plain))
    for name in ("init_process_group", "new_group"):
        plain = getattr(dist, name)
        if not hasattr(plain, "__rshmem_staged__"):
            setattr(dist, name, _gloo_groups(name, plain))
    if not hasattr(torch.cuda.set_device, "__rshmem_staged__"):
        torch.cuda.set_device = _shared_set_device(torch.cuda.set_device)


# ---------------------------------------------------------------- triton_dist.tune
class _Tune:
    """``triton_dist.tune``: ``to_hashable`` and ``autotune``.

    rshmem's ``autotune`` does not search: it runs the function with the first configuration
    that ``prune_fn`` keeps (what Triton-distributed does with ``autotune=False``), the same on
    every PE, so PEs never disagree on a launch. Pass the configuration's keyword (e.g.
    ``gemm_config=``) to choose another.
    """

    @staticmethod
    def to_hashable(t: torch.Tensor):
        return tuple(t.shape), t.stride(), t.dtype

    @staticmethod
    def autotune(config_space, key_fn, prune_fn=None):
        if not config_space:
            raise ValueError("autotune: config_space is empty")

        def decorate(fn):
            @functools.wraps(fn)
            def run(*args, autotune=True, autotune_verbose=False, autotune_allow_arg_overwrite=False,
                    autotune_pg=None, **kwargs):
                if set(config_space[0]) <= set(kwargs):  # the caller chose the configuration
                    return fn(*args, **kwargs)
                space = [c for c in config_space if prune_fn is None or prune_fn(c, *args, **kwargs)]
                if not space:
                    raise ValueError(f"autotune: prune_fn left no configuration for {fn.__name__}")
                chosen = {k: v for k, v in space[0].items() if k not in kwargs}
                return fn(*args, **chosen, **kwargs)

            run.fn = fn  # Triton-distributed's AutoTuner.fn: the function itself, no configuration chosen
            run.config_space, run.key_fn, run.prune_fn = config_space, key_fn, prune_fn
            return run

        return decorate


tune = _Tune()
to_hashable = _Tune.to_hashable
