"""``nvshmem.bindings`` on rshmem (only the ``nvshmem`` module)."""
from rshmem.compat.nvshmem.bindings import nvshmem

__all__ = ["nvshmem"]
