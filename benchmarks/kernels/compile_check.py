"""Compiles every benchmark kernel to an sm_90 cubin without a GPU:

    python -m benchmarks.kernels.compile_check [--only rshmem|nvshmem]

rshmem kernels link rshmem's `libshmem_device.bc` (rshmem.triton.bitcode_path()); NVSHMEM kernels
link NVSHMEM's (torch's NvshmemLibFinder, or $NVSHMEM_LIB_DIR). Prints one line per kernel and
exits non-zero if any fails. Also reports whether every library call was inlined (a `call` left
in the PTX means the call's types differ from the library's definition).
"""
from __future__ import annotations

import argparse
import re
import sys
import time

U8, I64, I32 = "*u8", "*i64", "*i32"

# (name, kernel attribute, signature, constexprs, num_warps)
RSHMEM_CASES = [
    ("put_block w4", "put_kernel", {"dst": U8, "src": U8, "nbytes": "i32", "slice_bytes": "i32", "pe": "i32",
                                    "NBI": "constexpr"}, {"NBI": False}, 4),
    ("put_block w32 i64", "put_kernel", {"dst": U8, "src": U8, "nbytes": "i64", "slice_bytes": "i64", "pe": "i32",
                                         "NBI": "constexpr"}, {"NBI": False}, 32),
    ("put_nbi_block w16", "put_kernel", {"dst": U8, "src": U8, "nbytes": "i32", "slice_bytes": "i32", "pe": "i32",
                                         "NBI": "constexpr"}, {"NBI": True}, 16),
    ("pingpong_signal", "pingpong_signal_kernel", {"buf": U8, "src": U8, "sig": I64, "t_out": I64, "nbytes": "i32",
                                                   "iters": "i32", "base": "i32"}, {}, 1),
    ("pingpong_p", "pingpong_p_kernel", {"flag": I32, "t_out": I64, "iters": "i32", "base": "i32"}, {}, 1),
    ("barrier", "barrier_kernel", {"t_out": I64, "iters": "i32"}, {}, 1),
    ("allgather_push add", "allgather_push_kernel", {"out": U8, "inp": U8, "sig": I64, "nbytes": "i32",
                                                     "slice_bytes": "i32", "target": "i64", "npes": "i32",
                                                     "SET": "constexpr"}, {"SET": False}, 16),
    ("allgather_push set", "allgather_push_kernel", {"out": U8, "inp": U8, "sig": I64, "nbytes": "i32",
                                                     "slice_bytes": "i32", "target": "i64", "npes": "i32",
                                                     "SET": "constexpr"}, {"SET": True}, 4),
]

NVSHMEM_CASES = [
    ("nv put_block w4", "put", {"dst": U8, "src": U8, "nbytes": "i32", "slice_bytes": "i32", "pe": "i32",
                                "NBI": "constexpr"}, {"NBI": False}, 4),
    ("nv put_block w32 i64", "put", {"dst": U8, "src": U8, "nbytes": "i64", "slice_bytes": "i64", "pe": "i32",
                                     "NBI": "constexpr"}, {"NBI": False}, 32),
    ("nv put_nbi_block w16", "put", {"dst": U8, "src": U8, "nbytes": "i32", "slice_bytes": "i32", "pe": "i32",
                                     "NBI": "constexpr"}, {"NBI": True}, 16),
    ("nv pingpong_signal", "pingpong_signal", {"buf": U8, "src": U8, "sig": I64, "t_out": I64, "nbytes": "i32",
                                               "iters": "i32", "base": "i32"}, {}, 1),
    ("nv pingpong_p", "pingpong_p", {"flag": I32, "t_out": I64, "iters": "i32", "base": "i32"}, {}, 1),
    ("nv barrier", "barrier", {"t_out": I64, "iters": "i32"}, {}, 1),
]


def _compile(fn, signature: dict, constexprs: dict, lib_name: str, lib_path: str, num_warps: int):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"extern_libs": ((lib_name, lib_path),), "num_warps": num_warps})


def _check(label: str, build) -> dict:
    t0 = time.monotonic()
    try:
        k = build()
    except Exception as e:  # noqa: BLE001 (report every failure, keep going)
        from benchmarks.harness.common import short_error

        return {"kernel": label, "ok": False, "error": short_error(e)}
    ptx = k.asm.get("ptx", "")
    return {"kernel": label, "ok": bool(k.asm.get("cubin")), "cubin_bytes": len(k.asm.get("cubin", b"")),
            "calls_left": len(_inlinable_calls(ptx)), "seconds": round(time.monotonic() - t0, 1)}


def _inlinable_calls(ptx: str) -> list[str]:
    """Calls left in the PTX, but for rshmem's rare paths (rshmemi_* functions kept out of line on
    purpose: triton-lib/src/device.h, RSHMEMI_COLD)."""
    callees = re.findall(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)", ptx)
    return [c for c in callees if "rshmemi_" not in c]


def check_rshmem() -> list[dict]:
    """Compiles the rshmem kernels; a failure to find the bitcode or import rshmem is one failed row."""
    try:
        import rshmem.triton as rt

        from benchmarks.kernels import kernels_rshmem as K

        lib = str(rt.bitcode_path())
    except Exception as e:  # noqa: BLE001
        from benchmarks.harness.common import short_error

        return [{"kernel": "rshmem kernels", "ok": False, "error": short_error(e)}]
    return [_check(label, lambda a=attr, s=sig, c=cx, w=nw: _compile(getattr(K, a), s, c, "libshmem_device", lib, w))
            for label, attr, sig, cx, nw in RSHMEM_CASES]


def check_nvshmem() -> list[dict]:
    """Compiles the NVSHMEM kernels. Without a GPU, torch defines its NVSHMEM device functions
    only if `has_triton()` says yes, so it is told yes here (this process never launches)."""
    try:
        import torch.utils._triton as tu

        tu.has_triton = lambda: True
        from benchmarks.kernels import kernels_nvshmem as N

        lib = N.device_library()
    except Exception as e:  # noqa: BLE001
        from benchmarks.harness.common import short_error

        return [{"kernel": "nvshmem kernels", "ok": False, "error": short_error(e)}]
    rows = [_check(label, lambda a=attr, s=sig, c=cx, w=nw: _compile(N.RAW[a], s, c, "libnvshmem_device", lib, w))
            for label, attr, sig, cx, nw in NVSHMEM_CASES]
    bad = N.check_constants()
    rows.append({"kernel": "nvshmem constants", "ok": bad is None, "error": bad})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.kernels.compile_check")
    ap.add_argument("--only", choices=("rshmem", "nvshmem"))
    args = ap.parse_args(argv)
    rows = []
    if args.only in (None, "rshmem"):
        rows += check_rshmem()
    if args.only in (None, "nvshmem"):
        rows += check_nvshmem()
    for r in rows:
        if r["ok"]:
            extra = f"cubin {r['cubin_bytes']} B, calls left {r['calls_left']}, {r['seconds']} s" if "cubin_bytes" in r else ""
            print(f"ok    {r['kernel']:<24} {extra}")
        else:
            print(f"FAIL  {r['kernel']:<24} {r.get('error')}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
