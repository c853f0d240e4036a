"""An nvshmem4py-shaped face of rshmem: a program written for nvshmem4py runs after replacing
``nvshmem`` by ``rshmem.compat.nvshmem`` in its imports::

    import rshmem.compat.nvshmem as nvshmem                      # import nvshmem
    import rshmem.compat.nvshmem.core                            # import nvshmem.core
    from rshmem.compat.nvshmem.core import SignalOp, ComparisonType
    from rshmem.compat.nvshmem.core.device.numba import put_signal_nbi, signal_wait, my_pe, n_pes

- ``core``: the host API (init, arrays and tensors, RMA, signals and collectives on streams);
- ``core.device.numba``: the Numba-CUDA device API (``rshmem.numba``);
- ``bindings``: ``my_pe``, ``n_pes``, ``team_my_pe``, ``team_n_pes`` and the raw on-stream puts.

Each module's docstring lists what it does not cover; a missing name raises AttributeError
saying so.
"""
from rshmem.compat.nvshmem import bindings, core

__all__ = ["core", "bindings"]
