#!/usr/bin/env bash
# Prints the path of a CUDA toolkit tree made of PyPI wheels, without a GPU or a system CUDA: NVIDIA's
# nvcc (the nvidia-cuda-nvcc and nvidia-cuda-crt wheels of the CUDA version of the venv's
# nvidia-cuda-runtime, which torch brings; numba-cuda[cu13] brings NVVM's cicc), installed once
# into target/cuda/wheels-<version>; target/cuda/tree-<version> joins them into the layout nvcc
# expects (bin, include, lib, nvvm). Its include/ is also the complete set of CUDA's headers a host
# compiler needs (cuda_fp16.h includes crt/host_defines.h, which only the crt wheel has).
# Used by examples/compile_cuda.sh (nvcc) and capi/tests/run.sh (cuda_fp16.h for nvshmem.h's half
# types). Usage: TREE="$(bash scripts/cuda_tree.sh)"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VPY="${RSHMEM_VENV:-$ROOT/.venv}/bin/python"
CUDA_ROOT="$("$VPY" -c 'import nvidia.cu13; print(list(nvidia.cu13.__path__)[0])')"
VERSION="$("$VPY" -c 'from importlib.metadata import version; print(".".join(version("nvidia-cuda-runtime").split(".")[:2]))')"
WHEELS="$ROOT/target/cuda/wheels-$VERSION"
TREE="$ROOT/target/cuda/tree-$VERSION"
if [ ! -x "$WHEELS/nvidia/cu13/bin/nvcc" ]; then
    "$VPY" -m pip install --quiet --no-deps --target "$WHEELS" "nvidia-cuda-nvcc==$VERSION.*" "nvidia-cuda-crt==$VERSION.*" >&2
fi
[ -f "$CUDA_ROOT/nvvm/bin/cicc" ] || { echo "cuda_tree.sh: no cicc in $CUDA_ROOT/nvvm (pip install nvidia-nvvm)" >&2; exit 1; }
if [ ! -x "$TREE/bin/nvcc" ]; then
    rm -rf "$TREE" && mkdir -p "$TREE/include"
    # nvcc finds its tools and headers relative to its own (resolved) path: a real bin folder.
    cp -al "$WHEELS/nvidia/cu13/bin" "$TREE/bin" 2>/dev/null || cp -a "$WHEELS/nvidia/cu13/bin" "$TREE/bin"
    ln -s "$CUDA_ROOT"/include/* "$TREE/include/"
    ln -s "$WHEELS"/nvidia/cu13/include/* "$TREE/include/"
    ln -s "$CUDA_ROOT/lib" "$TREE/lib"
    ln -s "$CUDA_ROOT/nvvm" "$TREE/nvvm"
fi
echo "$TREE"
