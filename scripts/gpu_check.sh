#!/usr/bin/env bash
# The GPU suite, on the GPU machine (2 GPUs; Python with torch and triton; no Rust, no internet),
# from the bundle that scripts/build_gpu_bundle.sh made here (.gpu/, carried as an ignored path):
#
#   bash scripts/gpu_check.sh [STEP...]      default: every step, in this order
#
#   env        versions, GPUs, topology (always runs first)
#   pytest2    torchrun --nproc-per-node 2 -m pytest -m gpu -x tests   (the 2-PE GPU tests)
#   pytest1    pytest -m gpu -x tests   (one process: the GPU tests that start their own jobs)
#   rust       every .gpu/bin/cuda* test binary with --ignored --test-threads=1
#   tutorials  every tutorials/NN_*.py under torchrun --nproc-per-node 2
#   c          (not in the default list) capi/tests/gpu_c.sh: examples/ built with this machine's
#              nvcc against .gpu/c and run as 2 PEs, the Rust examples, the NVSHMEM guides' programs
#   net        PEs on other hosts: 2 PEs in 2 virtual hosts on the GPU(s), UCX from
#              .gpu/ucx: tests/device/test_device_proxy.py (every device operation through the
#              proxy), test_device_proxy_collectives.py (device collectives so), tutorial 02 in that mode, benchmarks.net_vs_ucx (beside ucx_perftest)
#
# On a machine with fewer GPUs than PEs (one GPU), every step runs with RSHMEM_ALLOW_SHARED_GPU=1:
# the 2 PEs share the GPU, tests that need distinct GPUs skip with their reason. A pytest or Rust
# step that ran no test at all fails (a step where everything skipped proved nothing), and the
# summary prints each step's counts.
#
# The wheel is installed with `pip install --no-deps --target /tmp/site` and found through
# PYTHONPATH (again only when the wheel changed). Logs go under $OUT/gpu-check (or
# /tmp/rshmem-gpu-check): one file per step and summary.txt. Each step has a deadline
# (GPU_CHECK_TIMEOUT seconds, default 480 per step and 300 per binary / tutorial), so a hang
# fails its step instead of the whole call; the exit status is the number of failed steps.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LOGS="${OUT:-/tmp/rshmem-gpu-check}/gpu-check"
SITE="${RSHMEM_SITE:-/tmp/site}"
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"
: > "$SUMMARY"

if [ -z "${PYTHON:-}" ]; then
    for cand in /opt/torch/.venv/bin/python python3 python; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch, triton" 2>/dev/null; then
            PYTHON="$(command -v "$cand")"
            break
        fi
    done
fi
[ -n "${PYTHON:-}" ] || { echo "no Python with torch and triton found; set PYTHON" | tee -a "$SUMMARY"; exit 1; }

# Multicast objects are off on this machine (NVLS): NCCL, NVSHMEM and torch must not try them.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONFAULTHANDLER=1 RSHMEM_TEST_DURATIONS=1
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/rshmem-triton-cache}"
FAILED=0

# counts KIND LOG: "N passed, N failed, N skipped" from a pytest (per rank under torchrun) or
# Rust test log; empty when the log holds no result line.
counts() {
    "$PYTHON" - "$1" "$2" <<'PYCOUNT'
import re, sys
kind, text = sys.argv[1], open(sys.argv[2], errors="replace").read()
if kind == "rust":
    got = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text)
    if got:
        p, f, i = (sum(int(g[k]) for g in got) for k in range(3))
        print(f"{p} passed, {f} failed, {i} ignored")
    sys.exit()
# pytest: the last summary line of each rank ("[default0]:== 3 passed, 2 skipped in 1.2s ==").
last = {}
for line in text.splitlines():
    m = re.match(r"^(\[\w+\]:)?\s*=*\s*((\d+ \w+,? ?)+)(in [0-9.]+s)", line)
    if m and re.search(r"\d+ (passed|failed|skipped|error)", m.group(2)):
        last[m.group(1) or ""] = m.group(2).strip().rstrip(",")
print("; ".join(f"{k.strip('[]:') or 'pytest'}: {v}" for k, v in sorted(last.items())))
PYCOUNT
}

# run_step NAME TIMEOUT KIND CMD...: runs CMD with a deadline, output to the console and NAME.log.
# KIND (pytest, rust or plain) says how to count what ran: a pytest or Rust step that ran no
# test fails.
run_step() {
    local name="$1" limit="$2" kind="$3"
    shift 3
    local started=$SECONDS code
    printf '\n==== %s: %s\n' "$name" "$*" | tee -a "$LOGS/$name.log"
    timeout -k 15 "$limit" "$@" 2>&1 | tee -a "$LOGS/$name.log"
    code=${PIPESTATUS[0]}
    local took=$((SECONDS - started)) got=""
    if [ "$kind" != plain ]; then
        got="$(counts "$kind" "$LOGS/$name.log")"
        if [ "$code" -eq 0 ] && ! echo "$got" | grep -qE '(^|[ :])[1-9][0-9]* passed'; then
            echo "      $name ran no test (${got:-no result line}): a step where nothing ran proves nothing" \
                | tee -a "$SUMMARY"
            code=99
        fi
    fi
    if [ "$code" -eq 0 ]; then
        echo "PASS  $name  (${took} s)${got:+  [$got]}" | tee -a "$SUMMARY"
    else
        [ "$code" -eq 124 ] && echo "      $name ran past its ${limit} s deadline" | tee -a "$SUMMARY"
        echo "FAIL  $name  (exit $code, ${took} s)${got:+  [$got]}  log: $LOGS/$name.log" | tee -a "$SUMMARY"
        FAILED=$((FAILED + 1))
    fi
    return 0
}

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# torchrun with 2 processes on a free port (an array: `timeout` cannot run a shell function).
torchrun2() { TORCHRUN2=("$PYTHON" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$(free_port)"); }

install_wheel() {
    local wheel
    wheel="$(ls "$ROOT"/.gpu/rshmem-*.whl 2>/dev/null | head -n 1)"
    if [ -z "$wheel" ]; then
        echo "FAIL  install  (no .gpu/rshmem-*.whl: run scripts/build_gpu_bundle.sh on the build machine and carry .gpu)" \
            | tee -a "$SUMMARY"
        exit 1
    fi
    local sum
    sum="$(sha256sum "$wheel" | cut -d' ' -f1)"
    if [ "$(cat "$SITE/.rshmem-wheel-sha256" 2>/dev/null)" != "$sum" ]; then
        rm -rf "$SITE"
        "$PYTHON" -m pip install --quiet --no-deps --no-index --target "$SITE" "$wheel" >"$LOGS/install.log" 2>&1 \
            || { cat "$LOGS/install.log"; echo "FAIL  install  (pip)" | tee -a "$SUMMARY"; exit 1; }
        echo "$sum" > "$SITE/.rshmem-wheel-sha256"
    fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    echo "rshmem from $wheel ($(cat "$ROOT/.gpu/MANIFEST" 2>/dev/null | head -n 1))" | tee -a "$SUMMARY"
}

step_env() {
    {
        echo "python: $PYTHON"
        "$PYTHON" -c 'import sys, torch, triton, importlib.util as u
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)
print("gpus", torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
print("numpy", "present" if u.find_spec("numpy") else "absent (rshmem._cuda uses its DLPack path)")
import rshmem; print("rshmem", rshmem.__version__, "from", rshmem.__file__)
import rshmem.triton as rt; print("device bitcode", rt.bitcode_path())'
        nvidia-smi -L
        nvidia-smi topo -m
    } 2>&1 | tee "$LOGS/env.log"
}

step_pytest2() {
    local t="${GPU_CHECK_TIMEOUT:-480}"
    torchrun2
    run_step pytest-2pe "$t" pytest "${TORCHRUN2[@]}" --log-dir "$LOGS/pytest-2pe-ranks" --tee 3 \
        -m pytest -m gpu ${GPU_CHECK_X--x} -q -rs -p no:cacheprovider -o faulthandler_timeout=240 --durations=15 tests
}

step_pytest1() {
    local t="${GPU_CHECK_TIMEOUT:-480}"
    run_step pytest-1pe "$t" pytest "$PYTHON" -m pytest -m gpu ${GPU_CHECK_X--x} -q -rs -p no:cacheprovider -o faulthandler_timeout=240 --durations=15 tests
}

step_rust() {
    local t="${GPU_CHECK_TIMEOUT:-300}" found=0 b
    for b in "$ROOT"/.gpu/bin/cuda*; do
        [ -x "$b" ] || continue
        found=1
        run_step "rust-$(basename "$b")" "$t" rust "$b" --ignored --test-threads=1
    done
    if [ "$found" -eq 0 ]; then
        echo "FAIL  rust  (no test binary in .gpu/bin)" | tee -a "$SUMMARY"
        FAILED=$((FAILED + 1))
    fi
}

step_c() {
    local t="${GPU_CHECK_TIMEOUT:-900}"
    run_step c "$t" plain env PYTHON="$PYTHON" LOGDIR="$LOGS/c" bash "$ROOT/capi/tests/gpu_c.sh"
}

step_net() {
    local t="${GPU_CHECK_TIMEOUT:-300}"
    if [ ! -f "$ROOT/.gpu/ucx/libucx/lib/libucp.so.0" ]; then
        echo "FAIL  net  (no .gpu/ucx: build the bundle in a venv with the libucx-cu12 wheel)" | tee -a "$SUMMARY"
        FAILED=$((FAILED + 1))
        return
    fi
    export RSHMEM_UCX_DIR="$ROOT/.gpu/ucx/libucx/lib"
    torchrun2
    run_step net-proxy "$t" pytest env RSHMEM_VIRTUAL_HOSTS=2 RSHMEM_DEBUG_WAIT_TIMEOUT_MS=20000 "${TORCHRUN2[@]}" \
        -m pytest -m gpu -q -rs -p no:cacheprovider tests/device/test_device_proxy.py
    torchrun2
    run_step net-collectives "$t" pytest env RSHMEM_VIRTUAL_HOSTS=2 RSHMEM_DEBUG_WAIT_TIMEOUT_MS=20000 "${TORCHRUN2[@]}" \
        -m pytest -m gpu -q -rs -p no:cacheprovider tests/device/test_device_proxy_collectives.py
    torchrun2
    # A size one time-sliced GPU gets through: at the default 96 MiB per rank the push variant
    # crawls when both PEs share the GPU (every proxied copy waits for a time slice).
    run_step net-tutorial-02 "$t" plain env RSHMEM_VIRTUAL_HOSTS=2 "${TORCHRUN2[@]}" tutorials/02_intra_node_allgather.py \
        --M 1024 --N 1024 --iters 3 --warmup 1 --push-ctas 4
    # No Rust here: the bundle's prebuilt net_bench.
    run_step net-bench "$t" plain "$PYTHON" -m benchmarks.net_vs_ucx \
        --ucx "$ROOT/.gpu/ucx/libucx" --bench "$ROOT/.gpu/bin/net_bench" --out "$LOGS/net_vs_ucx.json"
}

step_tutorials() {
    local t="${GPU_CHECK_TIMEOUT:-300}" f found=0
    for f in "$ROOT"/tutorials/[0-9]*.py; do
        [ -f "$f" ] || continue
        found=1
        torchrun2
        # Without the run's opt-in: a tutorial opts in to a shared GPU by itself, and says so.
        run_step "tutorial-$(basename "$f" .py)" "$t" plain env -u RSHMEM_ALLOW_SHARED_GPU "${TORCHRUN2[@]}" "$f"
    done
    [ "$found" -eq 1 ] || echo "(no tutorials)" | tee -a "$SUMMARY"
}

GPUS="$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)"
if [ "$GPUS" -lt 2 ] && [ -z "${RSHMEM_ALLOW_SHARED_GPU:-}" ]; then
    # One GPU: the 2-PE steps share it. Tutorials opt in by themselves (and say so); the tests
    # and the Rust binaries read this.
    export RSHMEM_ALLOW_SHARED_GPU=1
    echo "$GPUS GPU(s): 2 PEs share one (RSHMEM_ALLOW_SHARED_GPU=1); tests that need distinct GPUs skip" \
        | tee -a "$SUMMARY"
fi

STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(pytest2 pytest1 rust tutorials)
install_wheel
step_env
for s in "${STEPS[@]}"; do
    case "$s" in
        env) ;;
        pytest2 | pytest1 | rust | tutorials | c | net) "step_$s" ;;
        *) echo "unknown step '$s' (steps: env pytest2 pytest1 rust tutorials c net)" | tee -a "$SUMMARY"; FAILED=$((FAILED + 1)) ;;
    esac
done
printf '\n==== summary (%s)\n' "$SUMMARY"
cat "$SUMMARY"
exit "$FAILED"
