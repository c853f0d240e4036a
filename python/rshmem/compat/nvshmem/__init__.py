"""An nvshmem4py-shaped face of rshmem (``import nvshmem``), as far as Triton-distributed's
tutorials and kernels call it: ``nvshmem.core.finalize``, ``nvshmem.core.Teams``,
``nvshmem.core.SignalOp`` and a few functions of ``nvshmem.bindings.nvshmem``. A program ports
by importing ``rshmem.compat.nvshmem as nvshmem``. The rest of nvshmem4py is not here yet; a
name that is missing raises AttributeError saying so.
"""
from rshmem.compat.nvshmem import bindings, core

__all__ = ["core", "bindings"]
