"""Triton-distributed's host helpers that its test scripts, tutorials and layers import besides
the first set (``_td_utils``): random data, GPU facts (clocks, links, NUMA), cooperative launch,
occupancy, lazy symmetric allocation, TMA scratch, and ``contextual_autotune``. Same names and
arguments; re-exported by ``rshmem.compat.triton_dist``.

GPU facts come from ``nvidia-smi`` and sysfs, read only: nothing here changes a clock, a power
limit or a mode.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
import warnings
from typing import Callable

import torch

import rshmem
from rshmem.compat._td_cuda import CUDA_CHECK, cuda, has_fullmesh_nvlink
from rshmem.compat._td_tensors import nvshmem_create_tensor, nvshmem_free_tensor_sync

__all__ = [
    "rand_tensor", "is_fp8_dtype", "support_launch_cooperative_grid",
    "cuda_occupancy_max_activate_blocks_per_multiprocessor", "wait_until_max_gpu_clock_or_warning",
    "get_current_gpu_clock_rate_in_khz", "get_nvlink_max_speed_gbps", "get_pcie_link_max_speed_gbps",
    "calculate_pcie_bandwidth_gbps", "get_intranode_max_speed_gbps", "get_numa_node", "get_numa_node_count_in_group",
    "has_nvshmemi_bc_built", "init_nvshmem_by_torch_process_group", "LazyTensor", "LazyAllocator",
    "NVSHMEMLazyAllocator", "get_underlying_tensor", "nvshmem_free_lazy_tensor", "create_tmap_scratch",
    "create_tensormap_2d",
    "TENSORMAP_SIZE_BYTES", "contextual_autotune", "TORCH_VERSION", "apply_triton340_inductor_patch",
]


# ---------------------------------------------------------------- data
_INT_RANGES = {torch.int8: (-2**7, 2**7), torch.int16: (-2**15, 2**15), torch.int32: (-2**31, 2**31),
               torch.uint8: (0, 2**8)}
for _name, _hi in (("uint16", 2**16), ("uint32", 2**32)):
    if hasattr(torch, _name):
        _INT_RANGES[getattr(torch, _name)] = (0, _hi)


def is_fp8_dtype(dtype: torch.dtype) -> bool:
    """Whether ``dtype`` is a one-byte float (the fp8 formats)."""
    return dtype.itemsize == 1 and dtype.is_floating_point


def rand_tensor(shape, dtype: torch.dtype, device="cuda") -> torch.Tensor:
    """Uniform random data: floats (fp16, bf16, fp32, fp8) in [-1, 1), integers over their whole
    range (int8/16/32, uint8/16/32). Raises rshmem.DTypeError for other dtypes."""
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return torch.rand(shape, dtype=dtype, device=device) * 2 - 1
    if is_fp8_dtype(dtype):
        return (torch.rand(shape, dtype=torch.bfloat16, device=device) * 2 - 1).to(dtype)
    if dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        if dtype.itemsize == 4 and not dtype.is_signed:  # randint cannot make uint32 directly
            return torch.randint(-2**31, 2**31, shape, dtype=torch.int32, device=device).view(dtype)
        return torch.randint(lo, hi, shape, dtype=dtype, device=device)
    raise rshmem.DTypeError(f"rand_tensor: dtype {dtype} is not one of fp16, bf16, fp32, fp8, int8/16/32, "
                            "uint8/16/32")


# ---------------------------------------------------------------- launch
def support_launch_cooperative_grid() -> bool:
    """Whether Triton launches grids cooperatively on request (``launch_cooperative_grid=True``,
    Triton 3.3 and later)."""
    import triton  # noqa: PLC0415

    major, minor = (int(x) for x in triton.__version__.split(".")[:2])
    return (major, minor) >= (3, 3)


def cuda_occupancy_max_activate_blocks_per_multiprocessor(triton_func, num_warps, *func_args, **func_kwargs) -> int:
    """How many programs of ``triton_func`` (compiled for these arguments, not launched) fit on
    one SM at once (``cuOccupancyMaxActiveBlocksPerMultiprocessor``)."""
    compiled = triton_func.run(*func_args, grid=(1,), warmup=True, num_warps=num_warps, **func_kwargs)
    compiled._init_handles()
    err, blocks = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(cuda.CUfunction(compiled.function),
                                                                   num_warps * 32, compiled.metadata.shared)
    CUDA_CHECK(err)
    return blocks


# ---------------------------------------------------------------- GPU facts (read only)
def _smi(fields: list, gpu_index: int) -> list:
    """``nvidia-smi --query-gpu=FIELDS -i GPU``: the values as strings. RuntimeError without it."""
    if shutil.which("nvidia-smi") is None:
        raise RuntimeError("nvidia-smi not found: cannot read GPU clocks or links")
    out = subprocess.check_output(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                                   "-i", str(gpu_index)], text=True, timeout=30)
    return [v.strip() for v in out.strip().splitlines()[0].split(",")]


def _physical_index(device_id) -> int:
    """nvidia-smi's index of torch's device ``device_id`` (CUDA_VISIBLE_DEVICES renumbers)."""
    device_id = torch.cuda.current_device() if device_id is None else int(device_id)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if ids and device_id < len(ids) and ids[device_id].isdigit():
        return int(ids[device_id])
    return device_id


def get_current_gpu_clock_rate_in_khz(device_id=None) -> int:
    """The SM clock now, in kHz (nvidia-smi's ``clocks.sm``)."""
    return int(float(_smi(["clocks.sm"], _physical_index(device_id))[0]) * 1000)


def _max_clock_khz(device_id) -> int:
    return int(float(_smi(["clocks.max.sm"], _physical_index(device_id))[0]) * 1000)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def wait_until_max_gpu_clock_or_warning(device_id=None, timeout_sec: float = 10) -> bool:
    """With ``TRITON_DIST_WAIT_GPU_CLOCK`` true: polls the SM clock until it reaches the maximum
    (True) or ``timeout_sec`` passes (a warning naming both clocks, False). Otherwise returns True
    at once, as Triton-distributed does. Only reads clocks; never sets one."""
    if not _env_true("TRITON_DIST_WAIT_GPU_CLOCK"):
        return True
    target = _max_clock_khz(device_id)
    deadline = time.monotonic() + timeout_sec
    interval = 0.1
    while True:
        now = get_current_gpu_clock_rate_in_khz(device_id)
        if now >= target:
            return True
        if time.monotonic() >= deadline:
            warnings.warn(f"GPU clock {now} kHz did not reach its maximum {target} kHz in {timeout_sec} s "
                          "(benchmark numbers may be low; rshmem does not change clocks)")
            return False
        time.sleep(interval)
        interval = min(interval * 2, 1.0)


def calculate_pcie_bandwidth_gbps(generation: int, lanes: int) -> float:
    """One direction of a PCIe link in GB/s: transfer rate x encoding efficiency x lanes / 8."""
    rates = {1: (2.5, 0.8), 2: (5.0, 0.8), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130),
             6: (64.0, 242 / 256)}
    if generation not in rates:
        raise ValueError(f"PCIe generation {generation}: expected 1 to 6")
    if not isinstance(lanes, int) or lanes <= 0:
        raise ValueError(f"PCIe lanes {lanes!r}: expected a positive int")
    rate, efficiency = rates[generation]
    return rate * efficiency * lanes / 8


@functools.lru_cache()
def get_pcie_link_max_speed_gbps(gpu_index=0) -> float:
    """The GPU's PCIe link (current generation and width), one direction, GB/s."""
    gen, width = _smi(["pcie.link.gen.current", "pcie.link.width.current"], _physical_index(gpu_index))
    return calculate_pcie_bandwidth_gbps(int(gen), int(width))


@functools.lru_cache()
def get_nvlink_max_speed_gbps(gpu_index=0) -> float:
    """The sum of the GPU's active NVLink links, one direction, GB/s (``nvidia-smi nvlink -s``);
    0.0 without NVLink."""
    if shutil.which("nvidia-smi") is None:
        raise RuntimeError("nvidia-smi not found: cannot read NVLink speeds")
    out = subprocess.check_output(["nvidia-smi", "nvlink", "-s", "-i", str(_physical_index(gpu_index))], text=True,
                                  timeout=30)
    total = 0.0
    for line in out.splitlines():
        parts = line.split(":")
        if line.strip().startswith("Link") and len(parts) == 2 and "GB/s" in parts[1]:
            total += float(parts[1].split()[0])
    return total


def get_intranode_max_speed_gbps(gpu_index=0, with_scale: bool = False) -> float:
    """The GPU's peer bandwidth within the node, GB/s: NVLink where every GPU pair has it, else
    PCIe. ``with_scale`` gives what transfers reach in practice (0.8 of NVLink, 0.7 of PCIe), as
    Triton-distributed's performance models use it."""
    if has_fullmesh_nvlink() and get_nvlink_max_speed_gbps(gpu_index) > 0:
        return get_nvlink_max_speed_gbps(gpu_index) * (0.8 if with_scale else 1.0)
    return get_pcie_link_max_speed_gbps(gpu_index) * (0.7 if with_scale else 1.0)


@functools.lru_cache()
def get_numa_node(gpu_index=0) -> int:
    """The NUMA node of the GPU's PCI device (sysfs; 0 where the kernel reports none)."""
    bus = torch.cuda.get_device_properties(gpu_index).pci_bus_id if hasattr(
        torch.cuda.get_device_properties(gpu_index), "pci_bus_id") else None
    if bus is None:
        props = torch.cuda.get_device_properties(gpu_index)
        bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    path = f"/sys/bus/pci/devices/{bus.lower()}/numa_node"
    try:
        with open(path) as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return 0
    return max(node, 0)


def get_numa_node_count_in_group(pg) -> int:
    """Collective over ``pg``: 2 when its GPUs sit on exactly two NUMA nodes with the first half
    of the ranks on one and the second half on the other, else 1 (Triton-distributed optimizes
    only that split). 1 without a GPU (the same on every PE, so no collective is needed)."""
    import torch.distributed as dist  # noqa: PLC0415

    if not torch.cuda.is_available():
        return 1
    nodes = [None] * pg.size()
    dist.all_gather_object(nodes, get_numa_node(torch.cuda.current_device()), group=pg)
    if len(set(nodes)) != 2:
        return 1
    half = pg.size() // 2
    return 2 if len(set(nodes[:half])) == 1 and len(set(nodes[half:])) == 1 else 1


# ---------------------------------------------------------------- rshmem state
def has_nvshmemi_bc_built() -> bool:
    """False: rshmem has no counterpart of NVSHMEM's optional ``libnvshmemi_device.bc``, the
    internal transfer layer (``nvshmemi_transfer_rma*``) behind Triton-distributed's
    ``putmem_rma*`` / ``putmem_signal_rma*``; the scripts skip what needs it, as on an NVSHMEM
    install built without it."""
    return False


def init_nvshmem_by_torch_process_group(pg) -> None:
    """Starts rshmem on the PEs of ``pg`` (``rshmem.init(pg)``); nothing if already started."""
    if not rshmem.is_initialized():
        rshmem.init(pg)


# ---------------------------------------------------------------- lazy symmetric allocation
class LazyTensor:
    """A tensor allocated later: until its allocator materializes it, it knows its name, shape,
    dtype and size; afterwards every attribute and torch function reaches the tensor. Using the
    data before that raises rshmem.InvalidArgumentError naming the tensor."""

    def __init__(self, name: str, shape, dtype: torch.dtype, fill_value, allocator: "LazyAllocator"):
        self.name, self._shape, self._dtype, self.fill_value = name, torch.Size(shape), dtype, fill_value
        self._allocator = allocator
        self._tensor = None

    @property
    def is_materialized(self) -> bool:
        return self._tensor is not None

    @property
    def shape(self) -> torch.Size:
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def nbytes(self) -> int:
        return self._shape.numel() * self._dtype.itemsize

    def numel(self) -> int:
        return self._shape.numel()

    def size(self, dim=None):
        return self._shape if dim is None else self._shape[dim]

    def dim(self) -> int:
        return len(self._shape)

    def _materialize(self, tensor: torch.Tensor) -> None:
        if self.fill_value is not None:
            tensor.fill_(self.fill_value)
        self._tensor = tensor

    def get_underlying_tensor(self):
        return self._tensor

    @property
    def tensor(self) -> torch.Tensor:
        if self._tensor is None:
            raise rshmem.InvalidArgumentError(f"lazy tensor {self.name!r} is not allocated yet: call the allocator's sync()")
        return self._tensor

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.tensor, attr)

    def __getitem__(self, key):
        return self.tensor[key]

    def __setitem__(self, key, value):
        self.tensor[key] = value

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def unwrap(v):
            if isinstance(v, LazyTensor):
                return v.tensor
            if isinstance(v, (list, tuple)):
                return type(v)(unwrap(x) for x in v)
            return v

        return func(*unwrap(args), **{k: unwrap(v) for k, v in (kwargs or {}).items()})

    def __repr__(self):
        state = "allocated" if self.is_materialized else "not allocated"
        return f"LazyTensor({self.name!r}, shape={tuple(self._shape)}, dtype={self._dtype}, {state})"


class LazyAllocator:
    """Creates tensors with ``create_tensor_fn(shape, dtype)`` at once (``lazy=False``) or all
    together at ``sync()`` (``lazy=True``), so the total size is known before any allocation."""

    def __init__(self, create_tensor_fn: Callable, free_tensor_fn: Callable | None = None, lazy: bool = False):
        self._create, self._free, self._lazy = create_tensor_fn, free_tensor_fn, lazy
        self._tensors: list[LazyTensor] = []
        self._synced = False

    @property
    def lazy(self) -> bool:
        return self._lazy

    @property
    def is_materialized(self) -> bool:
        return self._synced or not self._lazy

    def create_tensor(self, name: str, shape, dtype: torch.dtype, fill_value=None) -> LazyTensor:
        t = LazyTensor(name, list(shape), dtype, fill_value, self)
        self._tensors.append(t)
        if self.is_materialized:
            t._materialize(self._create(list(shape), dtype))
        return t

    def get_total_size(self) -> int:
        return sum(t.nbytes for t in self._tensors)

    def get_total_size_mb(self) -> float:
        return self.get_total_size() / 2**20

    def get_total_size_gb(self) -> float:
        return self.get_total_size() / 2**30

    def get_tensor_breakdown(self) -> dict:
        return {t.name: t.nbytes for t in self._tensors}

    def print_memory_breakdown(self) -> None:
        for name, n in sorted(self.get_tensor_breakdown().items(), key=lambda kv: -kv[1]):
            print(f"{name:<60} {n:>14} B")
        print(f"{'TOTAL':<60} {self.get_total_size():>14} B")

    def sync(self) -> None:
        """Allocates every tensor not yet allocated, in creation order (collective when the
        create function is, e.g. for symmetric tensors: every PE creates the same list)."""
        for t in self._tensors:
            if not t.is_materialized:
                t._materialize(self._create(list(t.shape), t.dtype))
        self._synced = True

    materialize = sync

    def free_tensor(self, tensor) -> None:
        underlying = get_underlying_tensor(tensor)
        if underlying is not None and self._free is not None:
            self._free(underlying)

    def __len__(self) -> int:
        return len(self._tensors)


class NVSHMEMLazyAllocator(LazyAllocator):
    """A LazyAllocator of symmetric tensors (``nvshmem_create_tensor`` /
    ``nvshmem_free_tensor_sync``)."""

    def __init__(self, lazy: bool = False):
        super().__init__(nvshmem_create_tensor, nvshmem_free_tensor_sync, lazy)

    def get_total_nvshmem_size(self) -> int:
        return self.get_total_size()

    def get_total_nvshmem_size_mb(self) -> float:
        return self.get_total_size_mb()

    def get_total_nvshmem_size_gb(self) -> float:
        return self.get_total_size_gb()


def get_underlying_tensor(tensor_or_lazy):
    """The tensor of a LazyTensor (None before it is allocated), a tensor itself, or None."""
    if isinstance(tensor_or_lazy, LazyTensor):
        return tensor_or_lazy.get_underlying_tensor()
    return tensor_or_lazy


def nvshmem_free_lazy_tensor(tensor_or_lazy) -> None:
    """Collective: frees a symmetric tensor or an allocated LazyTensor's tensor
    (``nvshmem_free_tensor_sync``); nothing for None or an unallocated LazyTensor."""
    underlying = get_underlying_tensor(tensor_or_lazy)
    if underlying is not None:
        nvshmem_free_tensor_sync(underlying)


# ---------------------------------------------------------------- TMA scratch
TENSORMAP_SIZE_BYTES = 128
"""Bytes of one TMA descriptor (CUtensorMap)."""


def create_tmap_scratch(num_ctas: int, num_descs_per_cta: int = 1) -> torch.Tensor:
    """Zeroed global memory for descriptors built on the device: 128 bytes per descriptor,
    ``num_descs_per_cta`` per program (torch's allocations are 512-byte aligned, TMA needs 128)."""
    if num_ctas <= 0 or num_descs_per_cta <= 0:
        raise ValueError(f"create_tmap_scratch: num_ctas ({num_ctas}) and num_descs_per_cta ({num_descs_per_cta}) "
                         "must be positive")
    return torch.zeros(num_ctas * num_descs_per_cta * TENSORMAP_SIZE_BYTES, dtype=torch.uint8, device="cuda")


def create_tensormap_2d(tensor: torch.Tensor, tile_shape, *, swizzle_bytes: int = 0) -> torch.Tensor:
    """A TMA descriptor (128 bytes, a uint8 tensor on the tensor's GPU) for a 2-D row-major
    contiguous bf16 or fp32 CUDA tensor, boxes of ``tile_shape = (rows, cols)``, no swizzle or
    128-byte swizzle (``cuTensorMapEncodeTiled``)."""
    if tensor.dim() != 2 or not tensor.is_cuda or not tensor.is_contiguous():
        raise ValueError("create_tensormap_2d: expected a 2-D contiguous CUDA tensor")
    kinds = {torch.bfloat16: "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", torch.float32: "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"}
    if tensor.dtype not in kinds:
        raise rshmem.DTypeError(f"create_tensormap_2d: dtype {tensor.dtype} is not bf16 or fp32")
    if swizzle_bytes not in (0, 128):
        raise ValueError(f"create_tensormap_2d: swizzle_bytes {swizzle_bytes}: expected 0 or 128")
    rows, cols = int(tile_shape[0]), int(tile_shape[1])
    m, n = tensor.shape
    elem = tensor.element_size()
    inner = cols if swizzle_bytes == 0 else swizzle_bytes // elem
    enum = cuda.CUtensorMapSwizzle
    err, tmap = cuda.cuTensorMapEncodeTiled(
        getattr(cuda.CUtensorMapDataType, kinds[tensor.dtype]), 2, tensor.data_ptr(), [n, m], [n * elem],
        [inner, rows], [1, 1], cuda.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        enum.CU_TENSOR_MAP_SWIZZLE_NONE if swizzle_bytes == 0 else enum.CU_TENSOR_MAP_SWIZZLE_128B,
        cuda.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cuda.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    CUDA_CHECK(err)
    words = torch.tensor([w - (1 << 64) if w >= 1 << 63 else w for w in tmap.opaque], dtype=torch.int64)
    return words.view(torch.uint8).to(tensor.device)


# ---------------------------------------------------------------- contextual_autotune
def contextual_autotune(is_dist: bool = False, n_repeat: int = 5, n_warmup: int = 3):
    """Decorator for a host function that launches ``triton.autotune`` kernels.

    Triton-distributed's version reruns the whole function once per configuration of each such
    kernel, so that kernels which wait for one another are tuned in context. rshmem's does not
    search: every ``triton.autotune`` kernel launched inside the function runs its **first**
    configuration (after ``prune_configs_by``), the same on every PE, so that PEs never choose
    different configurations of a kernel that communicates. Outside the function, autotuning is
    Triton's as usual."""

    def decorate(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with _first_config_only():
                return fn(*args, **kwargs)

        run.is_dist, run.n_repeat, run.n_warmup = is_dist, n_repeat, n_warmup
        return run

    return decorate


class _first_config_only:
    """Within: ``triton.runtime.Autotuner`` benchmarks nothing and takes its first kept config."""
    _depth = 0
    _plain = None

    def __enter__(self):
        from triton.runtime.autotuner import Autotuner  # noqa: PLC0415

        if _first_config_only._depth == 0:
            _first_config_only._plain = Autotuner.run

            def run(tuner, *args, **kwargs):
                if len(tuner.configs) > 1:  # the key Triton 3.6's Autotuner.run computes
                    tuner.nargs = dict(zip(tuner.arg_names, args))
                    given = {k: v for k, v in {**tuner.nargs, **kwargs}.items() if k in tuner.arg_names}
                    key = [given[k] for k in tuner.keys if k in given]
                    key += [str(v.dtype) for v in given.values() if hasattr(v, "dtype")]
                    if tuple(key) not in tuner.cache:
                        tuner.cache[tuple(key)] = tuner.prune_configs(kwargs)[0]
                return _first_config_only._plain(tuner, *args, **kwargs)

            Autotuner.run = run
        _first_config_only._depth += 1
        return self

    def __exit__(self, *exc):
        from triton.runtime.autotuner import Autotuner  # noqa: PLC0415

        _first_config_only._depth -= 1
        if _first_config_only._depth == 0:
            Autotuner.run = _first_config_only._plain
        return False


# ---------------------------------------------------------------- triton_dist.tools.monkey_inductor
TORCH_VERSION = torch.torch_version.TorchVersion(torch.__version__)
"""torch's version, comparable with version strings."""


def apply_triton340_inductor_patch() -> None:
    """Triton-distributed patches torch 2.7's inductor for Triton 3.4.0 only, and otherwise
    prints that it applies nothing. rshmem runs on Triton 3.6, where nothing needs patching:
    it prints the same note; on torch 2.7 with Triton 3.4.0 it raises NotImplementedError (rshmem
    does not carry that patch)."""
    import triton  # noqa: PLC0415

    version = triton.__version__.split("+")[0]
    if "2.7.0a0" <= TORCH_VERSION < "2.8.0" and version == "3.4.0":
        raise NotImplementedError("apply_triton340_inductor_patch: rshmem does not carry the inductor patch for "
                                  "torch 2.7 with Triton 3.4.0; use Triton 3.6")
    print(f"torch {TORCH_VERSION} with triton {version}: inductor patch is not needed, not applied.")
