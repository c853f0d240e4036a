"""Runs Triton-distributed's own test scripts, ported by tools/port_triton_dist.py (imports only),
each with 2 PEs under torchrun, and prints one line per run: result, script, flags, seconds, and
the kernels it launched (distinct names, and how many of them have rshmem's device library
linked in), counted by the runner's launch hook.

The runs are the NVIDIA scripts that Triton-distributed's docs/testing.md lists, minus those that
need a model checkpoint (`--model <path>`) or its ahead-of-time kernel library, with sizes made
small through the scripts' own flags; plus the scripts whose fixes are documented in
docs/porting-from-triton-distributed.md. `mcast` runs need NVLink multicast and are listed, not
run.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# (script, flags, why it is not run or None). Sizes come from the scripts' own flags.
RUNS = [
    ("test_language_extra.py", [], None),
    ("test_distributed_wait.py", ["--case", "correctness"], None),
    ("test_distributed_wait.py", ["--case", "correctness_tma"], None),
    ("test_ag_gemm.py", ["--case", "check", "-M", "1024", "--shape_id", "LLaMA-3.1-8B"], None),
    ("test_gemm_rs.py", ["-M", "1024", "-N", "1024", "-K", "2048", "--check", "--verify-iters", "2", "--iters", "2",
                         "--warmup", "1"], None),
    ("test_gemm_rs.py", ["-M", "1024", "-N", "1024", "-K", "2048", "--fuse_scatter", "--check", "--verify-iters", "2",
                         "--iters", "2", "--warmup", "1"], None),
    ("test_ag_small_msg.py", [], None),
    ("test_all_gather.py", [], None),
    ("test_fast_allgather.py", ["--iters", "10", "--warmup_iters", "20", "--mode", "push_2d_ll", "--minbytes", "4096",
                                "--maxbytes", "8192"], None),
    ("test_allreduce.py", ["--method", "double_tree", "--stress", "--iters", "2", "--verify_hang", "50"], None),
    ("test_allreduce.py", ["--method", "one_shot", "--stress", "--iters", "2", "--verify_hang", "50"], None),
    ("test_allreduce.py", ["--method", "two_shot", "--stress", "--iters", "2", "--verify_hang", "50"], None),
    ("test_allreduce.py", ["--method", "one_shot_multimem", "--stress", "--iters", "2", "--verify_hang", "50"],
     "mcast"),
    ("test_ep_a2a.py", ["-M", "256", "-N", "1024", "--topk", "2", "-G", "16", "--check"], None),
    ("test_ep_ll_a2a.py", ["-M", "32", "-N", "1024", "-G", "16", "--topk", "2", "--iters", "2", "--verify-iters", "2",
                           "--bench_iters", "2", "--check"], None),
    ("test_sp_decode_attn.py", ["--case", "correctness"], None),
    ("test_gemm_ar.py", ["32", "1024", "2048", "--check", "--low-latency", "--verify-iters", "2", "--iters", "2",
                         "--warmup", "1"], None),
    ("test_gemm_ar.py", ["256", "1024", "2048", "--check", "--num_comm_sms", "4", "--verify-iters", "2", "--iters",
                         "2", "--warmup", "1"], None),
    ("test_ag_moe.py", ["--M", "256", "--iters", "2", "--warmup_iters", "1"], None),
    ("test_moe_reduce_rs.py", ["256", "512", "256", "8", "2", "--iters", "2", "--warmup", "1"], None),
    ("test_moe_reduce_ar.py", ["256", "512", "256", "8", "2", "--iters", "2", "--warmup", "1"], None),
    ("test_sp_ag_attention_intra_node.py", ["--batch_size", "1", "--q_head", "8", "--kv_head", "8", "--max_seqlen_q",
                                            "512", "--max_seqlen_k", "512", "--head_dim", "128", "--seqlens_q", "512",
                                            "--seqlens_k", "512", "--iters", "2", "--warmup", "1", "--check"], None),
    ("test_ulysses_sp_dispatch.py", ["1", "512", "8", "128", "--gqa", "2", "--check", "--iters", "2", "--warmup", "1",
                                     "--verify-iters", "2"], None),
    ("test_nvshmem_api.py", [], None),
    ("test_ring_put.py", [], None),
    ("test_nvshmem_init.py", [], None),
    # Not in docs/testing.md; named by the porting notes.
    ("test_notify.py", [], None),
    ("test_common_ops.py", [], None),
    ("test_reduce_scatter.py", ["--M", "512", "--N", "1024", "--iters", "2", "--warmup", "1"], None),
    ("test_all_to_all.py", ["-M", "8", "-N", "1024", "-G", "16", "--topk", "2"], None),
    ("test_pp.py", ["--max_tokens", "256", "--hidden_size", "1024", "--num_pp_groups", "1", "--iters", "2",
                     "--warmup_iters", "1"], None),
]

SCRIPTS = sorted({r[0] for r in RUNS} | {"ep_a2a_utils.py"})
_FAILURE = re.compile(r"(\w+(Error|Exception|Failure)\b.*|❌.*|Killed.*|Segmentation fault.*|CUDA error.*)")


def _reason(log: str) -> str:
    """The most telling line of a failed run's log: its last error line, else its last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [m.group(0) for ln in lines if (m := _FAILURE.search(ln)) and "ChildFailedError" not in ln
              and "torch.distributed.elastic" not in ln]
    text = errors[-1] if errors else (lines[-1] if lines else "no output")
    return text[:200]


def _counts(folder: Path) -> tuple[int, int]:
    launched, linked = set(), set()
    for f in folder.glob("rank*.json"):
        data = json.loads(f.read_text())
        launched |= set(data["launched"])
        linked |= set(data["linked"])
    return len(launched), len(linked)


def run_one(out: Path, index: int, script: str, flags: list, port: int, timeout: int, nproc: int) -> dict:
    folder = out / "runs" / f"{index:02d}-{Path(script).stem}"
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, RSHMEM_ALLOW_SHARED_GPU=os.environ.get("RSHMEM_ALLOW_SHARED_GPU", "1"),
               RSHMEM_PORT_LAUNCHES=str(folder), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(port),
           str(out / "run_tutorial.py"), str(out / "tests" / script), *flags]
    start = time.monotonic()
    with open(folder / "log.txt", "w") as log:
        try:
            rc = subprocess.run(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                                start_new_session=True).returncode
        except subprocess.TimeoutExpired:
            rc = None
    text = (folder / "log.txt").read_text(errors="replace")
    secs = time.monotonic() - start
    launched, linked = _counts(folder)
    if rc is None:
        result, why = "TIMEOUT", f"no exit within {timeout} s"
    elif rc == 0 and "❌" not in text:
        result, why = "PASS", ""
    else:
        result, why = "FAIL", _reason(text)
    return {"script": script, "flags": " ".join(flags), "result": result, "seconds": round(secs), "launched": launched,
            "linked": linked, "reason": why, "log": str(folder / "log.txt")}


def run_all(out: Path, only: str = "", jobs: int = 1, base_port: int = 36000, timeout: int = 300,
            nproc: int = 2) -> int:
    """Runs every selected test; prints a line per test as it ends and a summary; writes
    OUT/tests.json. Exit status 0 when every run passed or was not run for multicast."""
    todo = [(i, s, f, why) for i, (s, f, why) in enumerate(RUNS) if only in f"{s} {' '.join(f)}"]
    results, lock = [], threading.Lock()

    def report(r):
        with lock:
            results.append(r)
            counts = f"{r['launched']} kernels launched, {r['linked']} linked with rshmem" if "launched" in r else ""
            print(f"{r['result']:<8} {r['script']} {r['flags']}  ({r.get('seconds', 0)} s{', ' if counts else ''}"
                  f"{counts}){'  ' + r['reason'] if r['reason'] else ''}", flush=True)

    def job(item):
        i, script, flags, why = item
        if why == "mcast":
            report({"index": i, "script": script, "flags": " ".join(flags), "result": "MCAST",
                    "reason": "needs NVLink multicast"})
            return
        report({"index": i, **run_one(out, i, script, flags, base_port + i, timeout, nproc)})

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(job, todo))
    results.sort(key=lambda r: r["index"])
    (out / "tests.json").write_text(json.dumps(results, indent=1))
    tally = {k: sum(r["result"] == k for r in results) for k in ("PASS", "FAIL", "TIMEOUT", "MCAST")}
    print("summary: " + ", ".join(f"{v} {k}" for k, v in tally.items()))
    return 0 if tally["FAIL"] == tally["TIMEOUT"] == 0 else 1
