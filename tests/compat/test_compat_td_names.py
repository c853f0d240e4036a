"""Every name that Triton-distributed's NVIDIA test scripts, tutorials 01-08 and layers import
from its library modules resolves, through tools/port_triton_dist.py's module mapping, to an
rshmem module that has it, or is one that docs/porting-from-triton-distributed.md lists as not
provided.

The list was built from Triton-distributed 1512a81 by grepping the imports (`from triton_dist.X
import ...` in python/triton_dist/test/{nvidia,common}, python/triton_dist/layers/nvidia and
tutorials/0[1-8]*, AMD and Ascend folders left out) and the `dl.*` attributes they use; the
ported copies of its kernels, layers and test helpers (`triton_dist.kernels`, `.layers`, `.test`,
`.models`, `.function`) are its own code and not listed.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import port_triton_dist as port  # noqa: E402

IMPORTED = {
    "triton_dist": ["jit", "language", "tune"],
    "triton_dist.autotuner": ["contextual_autotune"],
    "triton_dist.jit": ["jit", "_parse_cga_cluster_size"],
    "triton_dist.language": ["consume_token", "notify", "num_ranks", "rank", "symm_at", "wait"],
    "triton_dist.language.extra": ["libshmem_device"],
    "triton_dist.language.extra.language_extra": ["__syncthreads", "atomic_cas", "tid"],
    "triton_dist.language.extra.cuda.language_extra": [
        "__ballot_sync", "__shfl_down_sync_i32", "__shfl_sync_i32", "__shfl_up_sync_i32", "__shfl_xor_sync_i32",
        "__syncthreads", "atomic_add", "atomic_add_per_warp", "laneid", "ld", "load_v4_u32", "multimem_ld_reduce_v4",
        "multimem_st_b32", "multimem_st_p_b32", "multimem_st_v2", "multimem_st_v4", "ntid", "st", "st_v4_b32", "tid"],
    "triton_dist.language.extra.cuda.tma_language": [
        "cp_async_bulk_commit_group", "cp_async_bulk_wait_group", "cvta_generic_to_shared", "elect_one_sync",
        "fence_async_shared", "fence_proxy_async", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx", "mbarrier_init",
        "mbarrier_invalidate", "mbarrier_try_wait_parity", "mbarrier_wait_parity", "named_barrier_sync",
        "prefetch_tensor_2d_l2", "prefetch_tensormap", "tma_load_2d", "tma_load_2d_pred", "tma_store_2d", "warp_idx"],
    "triton_dist.language.smem_ops": ["SharedMemDescType", "allocate_smem", "get_smem_shared_address_u32",
                                      "smem_dealloc", "smem_get_ptr", "smem_index", "smem_load", "smem_store"],
    "triton_dist.language.tma": ["ELEM_BF16", "PipelineState", "SWIZZLE_128B", "TmaPipeline", "create_tmap_2d",
                                 "store_and_wait"],
    "triton_dist.nv_utils": ["get_intranode_max_speed_gbps"],
    "triton_dist.profiler_utils": ["benchmark_latency_memory", "get_torch_prof_ctx", "group_profile", "perf_func",
                                   "perf_func_with_l2_reset", "print_benchmark_comparison"],
    "triton_dist.tma_utils": ["create_tensormap_2d", "create_tmap_scratch"],
    "triton_dist.tools": ["apply_triton340_inductor_patch", "aot_compile_spaces"],
    "triton_dist.tools.compile_aot": ["aot_compile_spaces"],
    "triton_dist.tools.monkey_inductor": ["TORCH_VERSION"],
    "triton_dist.tools.profiler": ["Profiler", "ProfilerBuffer", "alloc_profiler_buffer", "export_to_perfetto_trace",
                                   "reset_profiler_buffer"],
    "triton_dist.tune": ["to_hashable"],
    "triton_dist.utils": [
        "CUDA_CHECK", "HIP_CHECK", "NVSHMEMLazyAllocator", "NVSHMEM_SIGNAL_DTYPE", "cuda",
        "cuda_occupancy_max_activate_blocks_per_multiprocessor", "cudart", "dist_print", "finalize_distributed",
        "generate_data", "get_device_max_shared_memory_size", "get_group_numa_world_size",
        "get_numa_node_count_in_group", "get_triton_dist_world", "has_fullmesh_nvlink", "has_nvshmemi_bc_built",
        "has_tma", "init_nvshmem_by_torch_process_group", "initialize_distributed", "is_fp8_dtype",
        "is_nvshmem_multimem_supported", "launch_cooperative_grid_options", "mori_shmem_barrier_all_on_stream",
        "nvshmem_barrier_all_on_stream", "nvshmem_create_tensor", "nvshmem_create_tensors", "nvshmem_free_lazy_tensor",
        "nvshmem_free_tensor_sync", "rand_tensor", "requires_p2p_native_atomic", "rocshmem_barrier_all_on_stream",
        "sleep_async", "support_launch_cooperative_grid", "supports_p2p_native_atomic",
        "wait_until_max_gpu_clock_or_warning"],
}

# Not provided, with the reason docs/porting-from-triton-distributed.md gives (the phrase it must
# contain for the name).
NOT_PROVIDED = {
    **{n: "shared-memory parts of\n  `tma_language`" for n in (
        "cvta_generic_to_shared", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx", "mbarrier_init",
        "mbarrier_invalidate", "mbarrier_try_wait_parity", "mbarrier_wait_parity", "tma_load_2d", "tma_load_2d_pred",
        "tma_store_2d")},
    **{n: "explicit shared memory (`smem_ops`" for n in IMPORTED["triton_dist.language.smem_ops"]},
    **{n: "hand-written TMA pipelines (`triton_dist.language.tma`" for n in IMPORTED["triton_dist.language.tma"]},
    "_parse_cga_cluster_size": "`_parse_cga_cluster_size`",
    "HIP_CHECK": "`HIP_CHECK`",
    "rocshmem_barrier_all_on_stream": "`rocshmem_barrier_all_on_stream`",
    "mori_shmem_barrier_all_on_stream": "`mori_shmem_barrier_all_on_stream`",
}
# Multicast names: present, refusing to compile (docs: "NVLink multicast").
MULTICAST = {"multimem_ld_reduce_v4", "multimem_st_b32", "multimem_st_p_b32", "multimem_st_v2", "multimem_st_v4"}

CASES = [(m, n) for m, names in IMPORTED.items() for n in names]


@pytest.mark.parametrize("module,name", CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_name_is_provided_or_documented(module, name):
    import importlib

    target = port.map_module(module)
    assert target is not None, f"{module} has no rshmem counterpart in the port tool"
    if name in NOT_PROVIDED:
        doc = (ROOT / "docs" / "porting-from-triton-distributed.md").read_text()
        assert NOT_PROVIDED[name] in doc, f"{name}: the docs do not say why it is not provided"
        assert not port._has(target, name) or target == "rshmem.compat.missing"
        return
    mod = importlib.import_module(target)
    assert hasattr(mod, name), f"{module}.{name} -> {target} lacks {name}"
    if name in MULTICAST:
        assert "NVLink multicast" in (getattr(mod, name).__doc__ or "")
