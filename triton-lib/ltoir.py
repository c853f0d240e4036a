"""The device library as LTO-IR, for Numba-CUDA kernels (``rshmem.numba``).

Numba compiles a kernel with NVIDIA's NVVM, which for sm_90 reads only LLVM 7 IR: it cannot read
the clang-19 bitcode that Triton links. It can take LTO-IR, which nvJitLink optimizes together
with the kernel's own LTO-IR at load time, so library calls inline as they do in Triton. NVRTC
makes that LTO-IR from the same sources (``src/libshmem_device.cu``), with ``nvrtc/prelude.h``
force-included to map the few clang builtins the sources use; the memory ordering is the same
inline PTX text either way.

``build(out)`` is called by ``build.py`` when ``missing()`` finds nothing missing (NVRTC from
``cuda-bindings`` and ``nvidia-cuda-nvrtc``, the CUDA headers); it needs no GPU.
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src" / "libshmem_device.cu"
PRELUDE = HERE / "nvrtc" / "prelude.h"
# The oldest supported GPU (build.py's ARCH, sm_80), as a virtual architecture: nvJitLink links
# LTO-IR into kernels for its own architecture and every newer one (sm_89, sm_90, sm_100, ...),
# optimizing and assembling the whole kernel for the GPU at hand, so one library serves them all
# and each GPU gets only instructions it has. Built for compute_90, it was refused for sm_80 and
# sm_89 ("LTOIR arch newer than target arch"). tests/numba_device/test_numba_compile.py links
# and assembles a kernel for each of build.py's SUPPORTED architectures.
ARCH = "compute_80"


class LtoirError(RuntimeError):
    """NVRTC is missing or refused the sources; the message says which and why."""


def missing() -> str | None:
    """What this machine lacks to build the LTO-IR, or None: NVRTC (``cuda-bindings`` plus the
    NVRTC library) and the CUDA headers api.h includes (cuda_fp16.h, which includes CCCL's
    nv/target: the nvidia-cuda-runtime and nvidia-cuda-cccl wheels; numba-cuda[cu13] brings them)."""
    try:
        from cuda.bindings import nvrtc  # noqa: PLC0415

        nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001 - any failure to load means "not here"
        return f"NVRTC is not importable ({type(e).__name__}: {e}; pip install cuda-bindings nvidia-cuda-nvrtc)"
    try:
        headers = _cuda_headers()
    except LtoirError as e:
        return str(e)
    if not (headers / "nv" / "target").is_file():
        return f"CCCL's nv/target is not in {headers} (pip install nvidia-cuda-cccl, or numba-cuda[cu13])"
    return None


def _cuda_headers() -> Path:
    """The folder holding cuda_fp16.h / cuda_bf16.h (api.h includes them outside clang)."""
    try:
        from cuda import pathfinder  # noqa: PLC0415

        found = pathfinder.find_nvidia_header_directory("cudart")
    except Exception as e:  # noqa: BLE001 - an old cuda-pathfinder, or none
        raise LtoirError(f"the CUDA headers cannot be located ({e}): pip install cuda-pathfinder") from None
    if found is None or not (Path(found) / "cuda_fp16.h").is_file():
        raise LtoirError("cuda_fp16.h not found: install the nvidia-cuda-runtime wheel (torch brings it) or a CUDA toolkit")
    return Path(found)


def options() -> list[str]:
    """NVRTC options: relocatable device code as LTO-IR, the sources' include folders, the prelude."""
    return [
        f"-arch={ARCH}", "-dlto", "-rdc=true", "-std=c++17", "-fmad=true",
        f"-I{HERE / 'nvrtc' / 'include'}", f"-I{HERE / 'include'}", f"-I{HERE / 'src'}", f"-I{_cuda_headers()}",
        f"-include={PRELUDE}",
    ]


def build(out: Path) -> Path:
    """Compiles the device library to LTO-IR at ``out``; raises LtoirError with NVRTC's log."""
    from cuda.bindings import nvrtc  # noqa: PLC0415

    def check(result, what):
        err = result[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise LtoirError(f"{what} failed: {err.name}")
        return result[1:]

    opts = [o.encode() for o in options()]
    (prog,) = check(nvrtc.nvrtcCreateProgram(SRC.read_bytes(), SRC.name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = b" " * size
        check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise LtoirError(f"NVRTC could not compile {SRC.name} ({err.name}):\n{log.decode(errors='replace')}")
        (size,) = check(nvrtc.nvrtcGetLTOIRSize(prog), "nvrtcGetLTOIRSize")
        ltoir = b" " * size
        check(nvrtc.nvrtcGetLTOIR(prog, ltoir), "nvrtcGetLTOIR")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(ltoir)
    return out
