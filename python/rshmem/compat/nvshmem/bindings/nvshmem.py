"""``nvshmem.bindings.nvshmem`` on rshmem: the PE queries and the two on-stream puts that
Triton-distributed's kernels call. Addresses are integers (``tensor.data_ptr()``) inside
symmetric allocations; ``stream`` is a raw CUstream (0: the current torch stream)."""
from __future__ import annotations

import rshmem
from rshmem import _native

__all__ = ["my_pe", "n_pes", "team_my_pe", "team_n_pes", "putmem_on_stream", "putmem_signal_on_stream"]


def my_pe() -> int:
    """This PE."""
    return rshmem.my_pe()


def n_pes() -> int:
    """Number of PEs."""
    return rshmem.n_pes()


def team_my_pe(team) -> int:
    """This PE's index in ``team``."""
    return rshmem.team_my_pe(int(team))


def team_n_pes(team) -> int:
    """Number of PEs in ``team``."""
    return rshmem.team_n_pes(int(team))


def _stream(stream) -> int:
    if stream:
        return int(stream)
    import torch  # noqa: PLC0415 (only the cuda backend has streams)

    return torch.cuda.current_stream().cuda_stream


def putmem_on_stream(dest: int, source: int, nbytes: int, pe: int, stream=0) -> None:
    """Queues a copy of ``nbytes`` from local ``source`` to symmetric ``dest`` on ``pe``."""
    _native.putmem_on_stream(int(dest), int(source), int(nbytes), int(pe), _stream(stream))


def putmem_signal_on_stream(dest: int, source: int, nbytes: int, sig_addr: int, signal: int, sig_op: int, pe: int,
                            stream=0) -> None:
    """``putmem_on_stream``, then ``sig_op`` (SIGNAL_SET / SIGNAL_ADD) with ``signal`` on
    ``sig_addr`` on ``pe`` once the data is there."""
    _native.putmem_signal_on_stream(int(dest), int(source), int(nbytes), int(sig_addr), int(signal), int(sig_op),
                                    int(pe), _stream(stream))


def __getattr__(name: str):
    raise AttributeError(f"nvshmem.bindings.nvshmem.{name} is not provided by rshmem.compat.nvshmem yet; use the "
                         "rshmem API for it")
