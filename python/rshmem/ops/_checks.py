"""Input checks of the ops: local ones on every call (cheap: dtype, device, layout, shapes), and
one exchange between the PEs per (team, op, shapes, dtype), cached, that every PE passes the
same shapes and dtype.

The exchange is a host-side `fcollect` of a few integers through a small symmetric tensor of
this module, so it is collective: every PE must make the same op calls in the same order (as
with any collective). It runs only on the first call of a key, never again; that is also when an
op allocates its workspace, so a first call cannot happen inside CUDA graph capture (see
`not_capturing`).
"""
from __future__ import annotations

import hashlib

import torch

from .. import _native
from .._native import DTypeError, InvalidArgumentError, MismatchError, RshmemError
from . import _group

# Words of one PE's entry in the exchange: a hash of the key, then the key's numbers.
_WORDS = 16
# float32 multiplies as TF32 on GPUs (tl.dot's default, torch's `allow_tf32`), exactly on the host backend.
GEMM_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
FP8 = torch.float8_e4m3fn
AG_DTYPES = GEMM_DTYPES + (FP8,)  # AllGather+GEMM also multiplies fp8 (e4m3), into a bf16 C


def out_dtype(dtype):
    """The dtype of a GEMM's C for inputs of `dtype`: bf16 for fp8, else the inputs'."""
    return torch.bfloat16 if dtype == FP8 else dtype
REDUCE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

_agreed: set = set()
_exchange: dict = {}  # team -> (src, dst) symmetric int64 tensors


def forget() -> None:
    """Drops every cached agreement and the exchange tensors (rshmem.finalize frees the heap)."""
    _agreed.clear()
    _exchange.clear()


def capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def not_capturing(what: str, key) -> None:
    """Raises when a first call (an exchange or an allocation) would happen during CUDA graph
    capture, where neither can run."""
    if capturing():
        raise RshmemError(
            f"rshmem.ops.{what}: the first call with these shapes and dtype ({key}) happens during CUDA graph capture, "
            "but a first call agrees on the shapes with the other PEs, may allocate symmetric memory and compiles "
            "kernels, none of which can be captured. Before capturing, call "
            f"rshmem.ops.prepare(rshmem.ops.{what}, *args, **kwargs) with tensors like the captured call's on every "
            "PE (or call the op once eagerly: a warm-up run); with torch.compile(mode='reduce-overhead') and dynamic "
            "shapes, once per shape")


def is_tensor(x, name: str, what: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise InvalidArgumentError(f"rshmem.ops.{what}: {name} must be a torch.Tensor, not {type(x).__name__}")


def tensor(x, name: str, what: str, info: _group.TeamInfo, dtypes) -> torch.Tensor:
    """`x` checked: a tensor of one of `dtypes`, on this PE's device."""
    if not isinstance(x, torch.Tensor):
        raise InvalidArgumentError(f"rshmem.ops.{what}: {name} must be a torch.Tensor, not {type(x).__name__}")
    if x.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise DTypeError(f"rshmem.ops.{what}: {name} is {str(x.dtype).replace('torch.', '')}; this op takes {names}")
    if info.backend == "cuda":
        if not x.is_cuda or x.get_device() != info.device_index:
            want = _group.device()
            raise InvalidArgumentError(
                f"rshmem.ops.{what}: {name} is on {x.device}, but this PE computes on {want} (rshmem runs on the cuda "
                f"backend): move it there ({name}.to('{want}'))")
    elif x.device.type != "cpu":
        raise InvalidArgumentError(
            f"rshmem.ops.{what}: {name} is on {x.device}, but rshmem runs on the host backend, which takes CPU "
            f"tensors (or init rshmem with backend='cuda' on a GPU machine)")
    return x


def contiguous(x: torch.Tensor, name: str, what: str) -> None:
    if not x.is_contiguous():
        raise InvalidArgumentError(f"rshmem.ops.{what}: {name} must be contiguous (call .contiguous() first); its "
                                   f"strides are {tuple(x.stride())} for shape {tuple(x.shape)}")


def matrix(x: torch.Tensor, name: str, what: str) -> None:
    if x.dim() != 2:
        raise InvalidArgumentError(f"rshmem.ops.{what}: {name} must be a matrix (2-D), not of shape {tuple(x.shape)}; "
                                   "flatten leading dimensions first (x.reshape(-1, x.shape[-1]))")


def weight_layout(b: torch.Tensor, what: str) -> bool:
    """Whether matrix `b` is column-major (the transpose of a row-major matrix, e.g.
    `linear.weight.t()`, or of a slice of rows of one); False for a row-major one (contiguous, or
    rows of a wider matrix). Any other layout is refused."""
    if b.is_contiguous() or (b.stride(1) == 1 and b.stride(0) >= b.shape[1]):
        return False
    if b.stride(0) == 1 and b.stride(1) >= b.shape[0]:
        return True
    raise InvalidArgumentError(
        f"rshmem.ops.{what}: b must be row-major or column-major (such as weight.t()) with unit stride in one "
        f"dimension; its strides are {tuple(b.stride())} for shape {tuple(b.shape)} (call .contiguous() first)")


def same_dtype(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(f"rshmem.ops.{what}: a is {a.dtype} but b is {b.dtype}; pass one dtype")


def _key_words(key: tuple) -> list:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    words = [int.from_bytes(digest, "little", signed=True)]
    for item in key:
        if isinstance(item, int) and not isinstance(item, bool):
            words.append(item)
    return (words + [0] * _WORDS)[:_WORDS]


def _exchange_tensors(info: _group.TeamInfo):
    found = _exchange.get(info.team)
    if found is None:
        src = _group.symmetric(info, (_WORDS,), torch.int64, "exchange")
        dst = _group.symmetric(info, (info.size, _WORDS), torch.int64, "exchange")
        found = _exchange[info.team] = (src, dst)
    return found


def exchange(info: _group.TeamInfo, words: list) -> list:
    """Collective over the team: every PE's `words` (at most 16 integers), in team order."""
    import rshmem

    src, dst = _exchange_tensors(info)
    mine = (list(words) + [0] * _WORDS)[:_WORDS]
    src.copy_(torch.tensor(mine, dtype=torch.int64))
    if info.backend == "cuda":
        torch.cuda.synchronize(_group.device())  # the host collective below reads the heap itself
    rshmem.fcollect(dst, src, info.team)
    return dst.cpu().tolist()


def agree(what: str, info: _group.TeamInfo, key: tuple, describe) -> None:
    """Once per `key` (cached): every PE of the team passed the same `key`, else MismatchError on
    every PE naming the first PE that differs. `describe()` returns this call's shapes and dtype
    in words, for the message."""
    full = (info.team, what) + tuple(key)
    if full in _agreed:
        return
    not_capturing(what, describe())
    mine = _key_words(full)
    for i, words in enumerate(exchange(info, mine)):
        if words != mine:
            theirs = [w for w in words[1:] if w] or "other values"
            raise MismatchError(
                f"rshmem.ops.{what}: PE {info.pes[i]} called it with other shapes or dtype than this PE "
                f"(PE {_native.my_pe()}: {describe()}; PE {info.pes[i]} sent the numbers {theirs}); every PE must "
                "pass the same shapes and dtype. (The check runs on the first call of each shape, dtype and group.)")
    _agreed.add(full)
