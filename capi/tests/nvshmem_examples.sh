#!/usr/bin/env bash
# NVIDIA's own NVSHMEM examples (NVIDIA/nvshmem `examples/`, unmodified, kept outside the
# repository: NVSHMEM_EXAMPLES names the folder) built against rshmem's nvshmem.h / nvshmemx.h
# and librshmem.so with nothing changed but the include and link line, then run on a GPU.
#
#   NVSHMEM_EXAMPLES=<nvshmem>/examples bash capi/tests/nvshmem_examples.sh [--build-only] [OUTDIR]
#
# --build-only compiles them and stops (no GPU needed: PyPI's nvcc, NVCC_LDFLAGS=-L<its lib>).
#
# Each is compiled as NVSHMEM's CMake file does it, with rshmem in NVSHMEM's place:
#     $NVCC -std=c++17 -arch=$CUDA_ARCH -I$PREFIX/include [MPI's flags] prog.cu -L$PREFIX/lib -lrshmem [-lcuda]
# (PREFIX: RSHMEM_PREFIX, default .gpu/c; MPI's flags from `$MPICC -show` as capi/tests/mpi_flags.sh
# reads them) and run with a deadline as 2 PEs: under $MPIRUN -np 2 for the MPI programs, under
# torchrun --no-python for the others. A program passes when every PE exits 0 (the examples check
# their own results and exit non-zero, or print "FAILED", when wrong).
#
# On a machine with one GPU the 2 PEs share it (RSHMEM_ALLOW_SHARED_GPU=1). Most examples pick
# their GPU by PE number with a checked `cudaSetDevice(mype_node)`, which fails for PE 1 there;
# those run as 1 PE on one GPU (and as 2 on two). `shmem-based-init` needs an OpenSHMEM
# library; `gemm_allreduce` is a CUTLASS program for NVLink multicast.
#
# One line per program (RUN-OK / FAIL / SKIP, with the PEs and why); the exit
# status is the number of unexpected failures.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BUILD_ONLY=0
[ "${1:-}" = "--build-only" ] && { BUILD_ONLY=1; shift; }
SRC="${NVSHMEM_EXAMPLES:?set NVSHMEM_EXAMPLES to the examples folder of NVIDIA/nvshmem}"
OUTDIR="$(realpath -m "${1:-/tmp/rshmem-nvshmem-examples}")"
PREFIX="$(realpath -m "${RSHMEM_PREFIX:-$ROOT/.gpu/c}")"
PY="${PYTHON:-$(command -v python3)}"
CUDA_ARCH="${CUDA_ARCH:-sm_90}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
LIMIT="${EXAMPLES_TIMEOUT:-120}"
[ -x "$NVCC" ] || { echo "nvshmem_examples.sh: no nvcc (set NVCC)" >&2; exit 1; }
[ -e "$PREFIX/lib/librshmem.so" ] || { echo "nvshmem_examples.sh: no librshmem.so in $PREFIX" >&2; exit 1; }
mkdir -p "$OUTDIR"

# name  mpi(yes/no)  device(rank: checked cudaSetDevice(mype_node); any: unchecked or none)
EXAMPLES="
collective-launch no rank
dev-guide-ring no any
dev-guide-ring-mpi yes rank
hello no any
moe_shuffle no rank
mpi-based-init yes rank
on-stream no rank
put-block no rank
ring-bcast no any
ring-reduce no rank
thread-group no rank
uid-based-init yes rank
user-buffer no rank
"

MPIRUN="${MPIRUN:-$(command -v mpirun || true)}"
MPICC="${MPICC:-}"
if [ -z "$MPICC" ] && [ -n "$MPIRUN" ] && [ -x "$(dirname "$MPIRUN")/mpicc" ]; then MPICC="$(dirname "$MPIRUN")/mpicc"; fi
# shellcheck source=capi/tests/mpi_flags.sh
source "$ROOT/capi/tests/mpi_flags.sh"
mpi_flags "$MPICC"
GPUS="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
[ "$GPUS" -lt 2 ] && export RSHMEM_ALLOW_SHARED_GPU=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export RSHMEM_DEBUG_WAIT_TIMEOUT_MS="${RSHMEM_DEBUG_WAIT_TIMEOUT_MS:-60000}"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
report() { printf '%-14s %-20s %s\n' "$1" "$2" "$3"; }
said() { grep -vE 'elastic|Traceback|File "|^\s*$|torch.distributed|warnings.warn|^\*+$' "$1" | tail -n 3 | tr '\n' ' ' | cut -c1-300; }

# build NAME MPI: compiles one example (the examples build side by side).
build() {
    local name="$1" mpi="$2" src="$SRC/$1.cu" flags=() lang=() driver=()
    [ -f "$src" ] || { src="$SRC/$1.cpp"; lang=(-x cu); }
    [ "$mpi" = yes ] && flags=("${MPI_FLAGS[@]}")
    # the driver API's library where the program calls it (user-buffer's cuMem* calls)
    grep -qE '\bcu[A-Z][A-Za-z]*\(' "$src" && driver=(-lcuda)
    "$NVCC" -std=c++17 -arch="$CUDA_ARCH" -I"$PREFIX/include" "${flags[@]}" "${lang[@]}" "$src" -o "$OUTDIR/$name" \
        ${NVCC_LDFLAGS:-} -L"$PREFIX/lib" -lrshmem "${driver[@]}" -Xlinker -rpath -Xlinker "$PREFIX/lib" \
        >"$OUTDIR/$name.build.log" 2>&1 || rm -f "$OUTDIR/$name"
}

FAILED=0
built=()
while read -r name mpi device; do
    [ -n "$name" ] || continue
    rm -f "$OUTDIR/$name"
    if [ "$mpi" = yes ] && [ ${#MPI_FLAGS[@]} -eq 0 ]; then continue; fi
    build "$name" "$mpi" &
done <<< "$EXAMPLES"
wait
while read -r name mpi device; do
    [ -n "$name" ] || continue
    if [ "$mpi" = yes ] && [ ${#MPI_FLAGS[@]} -eq 0 ]; then report SKIP "$name" "needs MPI: no mpicc (set MPICC)"; continue; fi
    if [ ! -x "$OUTDIR/$name" ]; then
        report FAIL "$name" "does not compile: $(grep -m1 -i error "$OUTDIR/$name.build.log")"
        FAILED=$((FAILED + 1))
        continue
    fi
    built+=("$name $mpi $device")
done <<< "$EXAMPLES"

if [ "$BUILD_ONLY" -eq 1 ]; then
    for row in "${built[@]}"; do report BUILT "${row%% *}" ""; done
    echo "nvshmem_examples.sh: $FAILED did not build"
    exit "$FAILED"
fi
for row in "${built[@]}"; do
    read -r name mpi device <<< "$row"
    bin="$OUTDIR/$name" log="$OUTDIR/$name.log"
    pes=2
    why=""
    if [ "$GPUS" -lt 2 ] && [ "$device" = rank ]; then
        pes=1
        why=" (checked cudaSetDevice(mype_node): 2 PEs need 2 GPUs, this machine has $GPUS)"
    fi
    if [ "$mpi" = yes ]; then
        timeout -k 10 "$LIMIT" "$MPIRUN" -np "$pes" -x RSHMEM_ALLOW_SHARED_GPU -x RSHMEM_DEBUG_WAIT_TIMEOUT_MS \
            "$bin" >"$log" 2>&1
    else
        timeout -k 10 "$LIMIT" "$PY" -m torch.distributed.run --nproc-per-node "$pes" --master-port "$(free_port)" \
            --no-python "$bin" >"$log" 2>&1
    fi
    code=$?
    if [ "$code" -eq 0 ] && ! grep -q "FAILED" "$log"; then
        report RUN-OK "$name" "$pes PE$why: $(said "$log")"
    else
        report FAIL "$name" "$pes PE$why: exit $code: $(said "$log")"
        FAILED=$((FAILED + 1))
    fi
done
report SKIP shmem-based-init "needs the shmem.h of an OpenSHMEM library and NVSHMEMX_INIT_WITH_SHMEM (no OpenSHMEM bootstrap in rshmem)"
report SKIP gemm_allreduce "a CUTLASS program for Blackwell with NVLink multicast, which rshmem never uses"
echo "nvshmem_examples.sh: $FAILED unexpected failure(s); logs in $OUTDIR"
exit "$FAILED"
