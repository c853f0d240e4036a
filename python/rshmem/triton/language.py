"""Thread-level helpers for Triton kernels that communicate through rshmem, and the names
Triton-distributed's kernels import as ``dl`` (``triton_dist.language``).

Execution model
---------------
Triton runs a kernel's scalar code in every thread of the program (CTA): ``num_warps * 32``
threads along axis 0. The functions of ``libshmem_device`` come in three scopes:

- ``*_block``: called by all threads of the CTA with the same arguments (it synchronizes the
  block before and after, splits the work over the threads, and issues any signal once).
- ``*_warp``: called by all 32 threads of a warp with the same arguments.
- thread scope (``putmem``, ``signal_op``, ``signal_wait_until``, ``barrier_all``, atomics, ...):
  acts once per calling thread, so guard it::

      if tid(0) == 0:
          libshmem_device.signal_op(sig, 1, libshmem_device.SIGNAL_ADD, peer)
      syncthreads()      # others wait for thread 0 when they depend on its result

The names of this module follow the same rules; each docstring says who acts:

- ``wait(ptrs, num_barriers, scope, semantic, waitValue=1)`` (Triton-distributed's): every warp
  waits on the flags, lane ``i`` on ``ptrs + i``; ``notify(ptr, rank, signal, sig_op,
  comm_scope)`` (theirs): thread 0 acts. ``wait_value(ptr, value, scope)`` and
  ``notify_thread(ptr, pe, value, sig_op)`` are rshmem's thread-scope single-word forms.
- ``consume_token(x, token)`` makes loads through ``x`` (pointers or tensor descriptors) wait for
  the ``wait`` that returned ``token``, also under Triton's software pipelining.
- Triton-distributed's ``language_extra`` names (``ld``/``st`` with scope and semantic, vector
  loads and stores, shuffles, ballots, fences, ...) act once per calling thread; inside
  ``with simt_exec_region() as (thread_idx, block_size):`` (rewritten by ``rshmem.triton.jit``)
  each thread works on its own values. NVLink multicast names (``multimem_*``) fail to compile
  with the reason.

``scope`` is ``"cta"``, ``"gpu"`` or ``"sys"`` (peers' memory needs ``"sys"``); ``semantic`` is
``"relaxed"``, ``"acquire"``, ``"release"`` or ``"acq_rel"``.
"""
from __future__ import annotations

import triton.language as _tl
from triton.runtime.jit import constexpr_function

from rshmem.triton._lang_dist import (consume_token, notify, notify_thread, num_ranks, rank, symm_at, wait,
                                      wait_value)
from rshmem.triton._lang_extra import (__ballot_sync, __fence, __shfl_down_sync_i32, __shfl_sync_i32,
                                       __shfl_up_sync_i32, __shfl_xor_sync_i32, __syncthreads, arrive_inc,
                                       arrive_inc_asm, atomic_add_per_warp, cp_async_bulk_wait_group, elect_one_sync,
                                       fence, globaltimer_hi, globaltimer_lo, ld, ld_b32, ld_vector, load_v2_b64,
                                       load_v4_b32, load_v4_s32, load_v4_u32, membar, multimem_ld_reduce_p_v4,
                                       multimem_ld_reduce_v4, multimem_st_b32, multimem_st_b64, multimem_st_p_b32,
                                       multimem_st_v2, multimem_st_v4, num_threads, num_warps, pack, pack_b32_v2,
                                       red_release, smid, st, st_b32, st_v2_u32, st_v4_b32, st_v4_u32, st_vector,
                                       threads_per_warp, tma_sync, unpack, wait_eq, cp_async_bulk_commit_group,
                                       fence_async_shared, fence_proxy_async, named_barrier_sync, warp_idx,
                                       prefetch_tensor_2d_l2, prefetch_tensormap)
from rshmem.triton._lang_simt import extract, insert, make_vector, simt_exec_region, vector, zeros_vector
from rshmem.triton._lang_thread import (atomic_add, atomic_cas, globaltimer, laneid, ld_acquire, ntid, st_release,
                                        syncthreads, tid)

# Triton-distributed's fork exports ``constexpr_function`` from ``triton.language``, and its kernels
# decorate module-level helpers with ``@tl.constexpr_function``; stock Triton 3.6 keeps it in
# ``triton.runtime.jit``. The name is added to ``triton.language`` (only when missing) so those
# modules import unchanged.
if not hasattr(_tl, "constexpr_function"):
    _tl.constexpr_function = constexpr_function

__all__ = [
    # rshmem's thread helpers
    "tid", "ntid", "laneid", "syncthreads", "ld_acquire", "st_release", "atomic_add", "atomic_cas", "globaltimer",
    # Triton-distributed's dl.*
    "wait", "notify", "consume_token", "symm_at", "rank", "num_ranks", "simt_exec_region", "vector", "make_vector",
    "zeros_vector", "extract", "insert", "ld_vector", "st_vector", "constexpr_function",
    # rshmem's single-word forms of wait / notify
    "wait_value", "notify_thread",
    # Triton-distributed's language_extra
    "__syncthreads", "__fence", "fence", "membar", "ld", "st", "ld_b32", "st_b32", "load_v4_u32", "load_v4_b32",
    "load_v4_s32", "load_v2_b64", "st_v4_u32", "st_v4_b32", "st_v2_u32", "pack_b32_v2", "pack", "unpack",
    "__shfl_sync_i32", "__shfl_up_sync_i32", "__shfl_down_sync_i32", "__shfl_xor_sync_i32", "__ballot_sync",
    "atomic_add_per_warp", "wait_eq", "red_release", "arrive_inc", "arrive_inc_asm", "globaltimer_lo",
    "globaltimer_hi", "smid", "threads_per_warp", "num_threads", "num_warps", "tma_sync", "cp_async_bulk_wait_group",
    "elect_one_sync", "cp_async_bulk_commit_group", "fence_async_shared", "fence_proxy_async", "named_barrier_sync",
    "warp_idx", "prefetch_tensor_2d_l2", "prefetch_tensormap",
    # NVLink multicast: present so ported kernels import, failing with a clear message when compiled
    "multimem_st_b32", "multimem_st_b64", "multimem_st_v2", "multimem_st_v4", "multimem_st_p_b32",
    "multimem_ld_reduce_v4", "multimem_ld_reduce_p_v4",
]
