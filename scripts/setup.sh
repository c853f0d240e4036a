#!/usr/bin/env bash
# One-time setup of a fresh Debian machine for rshmem, shared by the README's commands and CI:
#   - clang-19 / llvm-19 (the device library's compiler), from apt when missing;
#   - a virtual environment (.venv, or $RSHMEM_VENV) with torch, triton, numpy, pytest, maturin;
#   - the rshmem wheel built with maturin and installed into it.
# Rust (cargo) must already be installed. Re-running is cheap: present pieces are kept.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RSHMEM_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
PINS=(torch==2.11.0 triton==3.6.0 numpy pytest maturin)

log() { printf '\n== %s\n' "$*"; }

if ! command -v clang-19 >/dev/null || ! command -v llvm-link-19 >/dev/null; then
    log "installing clang-19 and llvm-19 (apt)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-19 llvm-19 >/dev/null
fi

command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating the virtual environment $VENV"
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" - <<'PYCHECK' 2>/dev/null
import importlib.metadata as md
want = {"torch": "2.11.0", "triton": "3.6.0"}
assert all(md.version(k) == v for k, v in want.items())
for name in ("numpy", "pytest", "maturin"):
    md.version(name)
PYCHECK
then
    log "installing ${PINS[*]} into $VENV (torch is large: this takes a while the first time)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q "${PINS[@]}"
fi

log "building and installing the rshmem wheel"
rm -rf "$ROOT/dist"
(cd "$ROOT" && "$VENV/bin/maturin" build --release --quiet --out dist --interpreter "$VENV/bin/python")
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$ROOT"/dist/rshmem-*.whl
"$VENV/bin/python" -c "import rshmem; print('rshmem', rshmem.__version__, 'installed in $VENV')"
