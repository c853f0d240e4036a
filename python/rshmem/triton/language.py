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

``scope`` is ``"cta"``, ``"gpu"`` or ``"sys"`` (peers' memory needs ``"sys"``); ``semantic`` is
``"relaxed"``, ``"acquire"``, ``"release"`` or ``"acq_rel"``.
"""
from __future__ import annotations

from rshmem.triton._lang_dist import (consume_token, notify, notify_thread, num_ranks, rank, symm_at, wait,
                                      wait_value)
from rshmem.triton._lang_thread import (atomic_add, atomic_cas, globaltimer, laneid, ld_acquire, ntid, st_release,
                                        syncthreads, tid)

__all__ = ["tid", "ntid", "laneid", "syncthreads", "ld_acquire", "st_release", "atomic_add", "atomic_cas",
           "globaltimer", "wait", "wait_value", "notify", "notify_thread", "consume_token", "symm_at", "rank",
           "num_ranks"]
