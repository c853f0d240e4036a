"""``nvshmem.core.device.numba`` on rshmem: nvshmem4py's Numba-CUDA device API, which
``rshmem.numba`` provides under the same names and argument orders (see its docstring).

Not covered (a compile-time error says so): ``reduce_warp``, ``alltoall_warp`` and
``reducescatter*`` (the device library has no such functions).
"""
from rshmem.numba import *  # noqa: F403
from rshmem.numba import __all__  # noqa: F401
