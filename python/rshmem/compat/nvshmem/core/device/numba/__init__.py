"""``nvshmem.core.device.numba`` on rshmem: nvshmem4py's Numba-CUDA device API, which
``rshmem.numba`` provides under the same names and argument orders (see its docstring).

Every collective of nvshmem4py is here with its thread, warp and block forms (``reduce``,
``reducescatter``, ``fcollect``, ``broadcast``, ``alltoall``); not covered: multicast.
"""
from rshmem.numba import *  # noqa: F403
from rshmem.numba import __all__  # noqa: F401
