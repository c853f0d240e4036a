"""``nvshmem.bindings`` on rshmem: the low-level functions nvshmem4py programs call as
``nvshmem.bindings.my_pe()`` and the like (module ``nvshmem``, re-exported here)."""
from rshmem.compat.nvshmem.bindings import nvshmem
from rshmem.compat.nvshmem.bindings.nvshmem import *  # noqa: F403
from rshmem.compat.nvshmem.bindings.nvshmem import __all__ as _names

__all__ = ["nvshmem", *_names]
