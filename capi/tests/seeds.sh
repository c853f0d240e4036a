#!/usr/bin/env bash
# The NVSHMEM guides' example programs (outside the repo: RSHMEM_SEEDS names the folder of the
# guides' text) built unmodified against
# rshmem's nvshmem.h / nvshmemx.h and librshmem.so, and with --run run as 2 PEs on a GPU.
#
#   capi/tests/seeds.sh [--run] [OUTDIR]        (OUTDIR default target/c/seeds)
#
# tools/seed_programs.py writes each listing out as OUTDIR/<name>.cu and OUTDIR/programs.tsv says
# how it is built and run. Each is compiled with
#     $NVCC -std=c++17 -arch=$CUDA_ARCH -I$PREFIX/include [MPI's flags] prog.cu -L$PREFIX/lib -lrshmem
# (NVCC: default nvcc on PATH or /usr/local/cuda/bin/nvcc; PREFIX: RSHMEM_PREFIX, default
# target/c, where scripts/install_c.sh put the C ABI; MPI's flags from `$MPICC -show`, MPICC
# default mpicc beside $MPIRUN or on PATH: without one, the MPI programs are reported as not
# built; NVCC_LDFLAGS: more link flags, e.g. -L<cuda>/lib for PyPI's nvcc). With --run each runs as 2 PEs: MPI programs under $MPIRUN -np 2, the others under
# torchrun --no-python ($PYTHON -m torch.distributed.run), each with a deadline, and every PE's
# output must match the program's expected line (programs.tsv). On one GPU the PEs share it
# (RSHMEM_ALLOW_SHARED_GPU=1) and programs that pick their GPU by PE number with a checked
# cudaSetDevice are skipped with that reason: they go with a two-GPU run.
#
# One line per program (BUILT / RUN-OK / FAIL / SKIP / EXPECTED-FAIL, with why); the exit status
# is the number of unexpected failures; without RSHMEM_SEEDS it fails (nothing to build is not a
# pass).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
RUN=0
[ "${1:-}" = "--run" ] && { RUN=1; shift; }
OUTDIR="$(realpath -m "${1:-$ROOT/target/c/seeds}")"
PREFIX="$(realpath -m "${RSHMEM_PREFIX:-$ROOT/target/c}")"
PY="${PYTHON:-$(command -v python3)}"
CUDA_ARCH="${CUDA_ARCH:-sm_90}"

# Listings that do not compile as printed, whatever the library: name, why, and the compiler's
# error that shows it (any other error is a failure).
declare -A KNOWN_BAD=(
    [devguide_set_and_shift_kernel]="the listing calls min() with three arguments (min(blockDim.x, num_elems, - block_offset)), which no CUDA overload takes: it does not build against NVSHMEM either"
)
declare -A KNOWN_BAD_ERROR=(
    [devguide_set_and_shift_kernel]='no instance of overloaded function "min"'
)

[ -f "$PREFIX/include/nvshmem.h" ] && [ -e "$PREFIX/lib/librshmem.so" ] \
    || { echo "seeds.sh: no rshmem C install in $PREFIX (scripts/install_c.sh $PREFIX, or set RSHMEM_PREFIX)" >&2; exit 1; }
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$NVCC" ] || { echo "seeds.sh: no nvcc (set NVCC)" >&2; exit 1; }

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
"$PY" tools/seed_programs.py "$OUTDIR" >/dev/null
code=$?
[ "$code" -eq 0 ] || { echo "seeds.sh: the guides' programs were not written out (RSHMEM_SEEDS: the folder of the guides)" >&2; exit 1; }

MPIRUN="${MPIRUN:-$(command -v mpirun || true)}"
MPICC="${MPICC:-}"
if [ -z "$MPICC" ] && [ -n "$MPIRUN" ] && [ -x "$(dirname "$MPIRUN")/mpicc" ]; then MPICC="$(dirname "$MPIRUN")/mpicc"; fi
[ -n "$MPICC" ] || MPICC="$(command -v mpicc || true)"
# shellcheck source=capi/tests/mpi_flags.sh
source "$ROOT/capi/tests/mpi_flags.sh"
mpi_flags "$MPICC"

GPUS=0
if [ "$RUN" -eq 1 ]; then
    GPUS="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
    if [ "$GPUS" -lt 2 ]; then export RSHMEM_ALLOW_SHARED_GPU=1; fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    # A device wait past this stops its kernel with a message instead of hanging the run.
    export RSHMEM_DEBUG_WAIT_TIMEOUT_MS="${RSHMEM_DEBUG_WAIT_TIMEOUT_MS:-60000}"
fi
LIMIT="${SEEDS_TIMEOUT:-180}"

FAILED=0
report() { printf '%-14s %-34s %s\n' "$1" "$2" "$3"; }
# The program's own complaints in LOG (not the launcher's traceback).
said() { grep -E '\.cu:|\.c:|rshmem|nvshmem|error|WRONG' "$1" | grep -vE 'elastic|Traceback|File "|^\s*$' | head -n 3 | tr '\n' ' '; }
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# check_output LOG EXPECT: every PE's line matches EXPECT ({pe}, {prev}, {n} filled in).
check_output() {
    "$PY" - "$1" "$2" <<'PY'
import re, sys
text, expect = open(sys.argv[1], errors="replace").read(), sys.argv[2]
n = 2
lines = [re.sub(r"^\[\w+\]:", "", l) for l in text.splitlines()]  # torchrun's rank prefixes
missing = []
for pe in range(n):
    pat = expect.replace("{pe}", str(pe)).replace("{prev}", str((pe + n - 1) % n)).replace("{n}", str(n))
    if not any(re.search(pat, l) for l in lines):
        missing.append(pat)
if missing:
    sys.exit("no output line matches " + " / ".join(missing))
PY
}

while IFS=$'\t' read -r name source mpi device expect note; do
    [ "$name" = name ] && continue
    for v in mpi device expect note; do [ "${!v}" = - ] && printf -v "$v" '%s' ""; done
    if [[ "$note" == *excerpt* ]]; then
        report SKIP "$name" "($source) $note"
        continue
    fi
    src="$OUTDIR/$name.cu" bin="$OUTDIR/$name" log="$OUTDIR/$name.log"
    flags=()
    if [ -n "$mpi" ]; then
        if [ ${#MPI_FLAGS[@]} -eq 0 ]; then
            report SKIP "$name" "($source) needs MPI's headers and library: no mpicc found (set MPICC)"
            continue
        fi
        flags=("${MPI_FLAGS[@]}")
    fi
    if ! "$NVCC" -std=c++17 -arch="$CUDA_ARCH" -I"$PREFIX/include" "${flags[@]}" "$src" -o "$bin" \
            ${NVCC_LDFLAGS:-} -L"$PREFIX/lib" -lrshmem -Xlinker -rpath -Xlinker "$PREFIX/lib" >"$log" 2>&1; then
        errors="$(grep -c 'error' "$log")"
        if [ -n "${KNOWN_BAD[$name]:-}" ] && grep -qF "${KNOWN_BAD_ERROR[$name]}" "$log" \
                && [ "$(grep -c ': error' "$log")" -eq 1 ]; then
            report EXPECTED-FAIL "$name" "($source) ${KNOWN_BAD[$name]}"
        else
            report FAIL "$name" "($source) does not compile ($errors error lines): $(grep -m1 -i error "$log")  log: $log"
            FAILED=$((FAILED + 1))
        fi
        continue
    fi
    if [ -n "${KNOWN_BAD[$name]:-}" ]; then
        report BUILT "$name" "($source) compiles, though listed as not compiling: ${KNOWN_BAD[$name]}"
    elif [ "$RUN" -eq 0 ]; then
        report BUILT "$name" "($source)${note:+ $note}"
        continue
    fi
    [ "$RUN" -eq 1 ] || continue
    if [ "$GPUS" -lt 2 ] && [ "$device" = rank ]; then
        report SKIP "$name" "($source) picks its GPU by PE number (checked cudaSetDevice): 2 PEs need 2 GPUs, this machine has $GPUS"
        continue
    fi
    if [ "$mpi" = mpirun ]; then
        [ -n "$MPIRUN" ] || { report SKIP "$name" "($source) an MPI program: no mpirun (set MPIRUN)"; continue; }
        cmd=("$MPIRUN" -np 2 -x RSHMEM_ALLOW_SHARED_GPU -x RSHMEM_DEBUG_WAIT_TIMEOUT_MS "$bin")
        [ -n "${RSHMEM_ALLOW_SHARED_GPU:-}" ] || cmd=("$MPIRUN" -np 2 -x RSHMEM_DEBUG_WAIT_TIMEOUT_MS "$bin")
    else
        cmd=("$PY" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$(free_port)" --no-python "$bin")
    fi
    started=$SECONDS
    # </dev/null: mpirun forwards its stdin to rank 0, which would eat the rest of programs.tsv
    # (the loop's input) and end the loop after the first MPI program.
    timeout -k 10 "$LIMIT" "${cmd[@]}" </dev/null >"$log" 2>&1
    rc=$?
    took=$((SECONDS - started))
    if [ "$rc" -ne 0 ]; then
        why="exit $rc"; [ "$rc" -eq 124 ] && why="past its ${LIMIT} s deadline"
        report FAIL "$name" "($source) $why after ${took} s: $(said "$log")  log: $log"
        FAILED=$((FAILED + 1))
    elif [ -n "$expect" ] && ! why="$(check_output "$log" "$expect" 2>&1)"; then
        report FAIL "$name" "($source) exit 0 but $why  log: $log"
        FAILED=$((FAILED + 1))
    else
        report RUN-OK "$name" "($source) ${took} s: $(grep -E 'received|complete' "$log" | sed 's/^\[\w*\]://' | sort | tr '\n' ';' | head -c 200)${device:+ [cudaSetDevice by rank, unchecked]}"
    fi
done < "$OUTDIR/programs.tsv"
echo "seeds.sh: $FAILED unexpected failure(s); programs and logs in $OUTDIR"
exit "$FAILED"
