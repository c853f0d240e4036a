"""``nvshmem.core.device`` on rshmem: the device APIs (``numba``)."""
