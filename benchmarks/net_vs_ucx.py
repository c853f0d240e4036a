"""rshmem's network transport beside UCX's own ucx_perftest, on the same transport, in one run.

    python -m benchmarks.net_vs_ucx [--sizes 65536,1048576,4194304] [--out bench-out/net_vs_ucx.json]
    python -m benchmarks.net_vs_ucx --ucx .gpu/ucx --bench .gpu/bin/net_bench   # GPU machine (no Rust)

Both sides are 2 processes on this machine; rshmem's PEs sit in 2 virtual hosts, so everything
between them goes through UCX (runtime/examples/net_bench.rs). The transport is UCX's choice
under the caller's UCX_* variables; without any, `UCX_TLS=tcp,self UCX_NET_DEVICES=lo` (loopback
TCP, what CI has). UCX comes from the `libucx-cu12` wheel (its ucx_perftest too).

Rows:
- put bandwidth, host memory, PE 0 -> PE 1, `iters` puts then quiet, against
  `ucx_perftest -t ucp_put_bw` (puts then a flush). Issue 19's goal: >= 0.9x from 64 KiB up.
- 8-byte latency (half a ping-pong round trip, mean): rshmem `p` + wait, `putmem_signal` + wait,
  and the same put-with-signal posted into the proxy's ring from a host thread (what a GPU
  thread's post costs, minus PCIe), against `ucx_perftest -t ucp_put_lat` (puts and polling).
  Goal: the proxy's put-with-signal within 2x of UCX's own.

On a machine with fewer cores than busy threads (the CI machine: 2 cores; each side runs a
progress thread per process, rshmem also a proxy thread) the latencies mostly measure scheduling.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def ucx_dirs(given: Path | None) -> tuple[Path, Path]:
    """The lib and bin directories of UCX: `given` (a directory holding both), else the
    libucx wheel's."""
    if given is not None:
        return given / "lib", given / "bin"
    spec = importlib.util.find_spec("libucx")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("net_vs_ucx: the libucx-cu12 wheel is not installed (pip install libucx-cu12)")
    base = Path(list(spec.submodule_search_locations)[0])
    return base / "lib", base / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def perftest(bin_dir: Path, env: dict, test: str, size: int, iters: int) -> list[float]:
    """One ucx_perftest run (server and client on loopback); the numbers of its `Final:` line:
    iterations, latency 50%ile / average / overall (us), bandwidth average / overall (MiB/s),
    message rate average / overall."""
    exe = str(bin_dir / "ucx_perftest")
    port = free_port()
    server = subprocess.Popen([exe, "-p", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:
            client = subprocess.run([exe, "127.0.0.1", "-p", str(port), "-t", test, "-s", str(size), "-n", str(iters),
                                     "-w", str(max(iters // 10, 10))], env=env, capture_output=True, text=True, timeout=300)
            if client.returncode == 0 or time.time() > deadline:
                break
            time.sleep(0.3)  # the server was not listening yet
    finally:
        try:
            server.wait(timeout=10)  # it exits after serving one client
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    final = [l for l in client.stdout.splitlines() if l.startswith("Final:")]
    if client.returncode != 0 or not final:
        sys.exit(f"ucx_perftest -t {test} -s {size} failed:\n{client.stdout}\n{client.stderr}")
    return [float(x) for x in final[-1].split()[1:]]


def net_bench(env: dict, sizes: list[int], iters: int, lat_iters: int, exe: Path | None) -> list[dict]:
    if exe is None:
        subprocess.run(["cargo", "build", "-q", "--release", "-p", "rshmem", "--example", "net_bench"], cwd=ROOT, check=True)
        target = os.environ.get("CARGO_TARGET_DIR")
        exe = (Path(target) if target else ROOT / "target") / "release" / "examples" / "net_bench"
    out = subprocess.run([str(exe), "--sizes", ",".join(map(str, sizes)), "--iters", str(iters), "--lat-iters", str(lat_iters)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"net_bench failed:\n{out.stdout}\n{out.stderr}")
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="65536,262144,1048576,4194304")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--lat-iters", type=int, default=5000)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--ucx", type=Path, help="a directory with UCX's lib/ and bin/ (default: the libucx wheel's)")
    ap.add_argument("--bench", type=Path, help="a built net_bench (default: cargo build --release --example net_bench)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lib, bin_dir = ucx_dirs(args.ucx)
    env = dict(os.environ)
    if not any(k.startswith("UCX_TLS") or k == "UCX_NET_DEVICES" for k in env):
        env.update(UCX_TLS="tcp,self", UCX_NET_DEVICES="lo")
    env["UCX_WARN_UNUSED_ENV_VARS"] = "n"
    env["RSHMEM_UCX_DIR"] = str(lib)
    env["LD_LIBRARY_PATH"] = f"{lib}:{env.get('LD_LIBRARY_PATH', '')}"
    transport = f"UCX_TLS={env.get('UCX_TLS', '(UCX default)')} UCX_NET_DEVICES={env.get('UCX_NET_DEVICES', '(all)')}"

    ours = net_bench(env, sizes, args.iters, args.lat_iters, args.bench)
    rows = []
    print(f"rshmem vs ucx_perftest, 2 processes on this machine, {transport}")
    print("| size | rshmem putmem MB/s | ucx_perftest ucp_put_bw MB/s | ratio |")
    print("|---:|---:|---:|---:|")
    for size in sizes:
        mine = next(r["MB_s"] for r in ours if r["test"] == "put_bw" and r["size"] == size)
        theirs = perftest(bin_dir, env, "ucp_put_bw", size, args.iters)[5] * MIB / 1e6  # MiB/s -> MB/s
        rows.append({"test": "put_bw", "size": size, "rshmem_MB_s": mine, "ucx_MB_s": theirs, "ratio": mine / theirs})
        print(f"| {size >> 10} KiB | {mine:.0f} | {theirs:.0f} | {mine / theirs:.2f} |")
    ucx_lat = perftest(bin_dir, env, "ucp_put_lat", 8, args.lat_iters)[2]
    print(f"\n8-byte latency, half a round trip, mean (ucx_perftest ucp_put_lat: {ucx_lat:.2f} us)")
    print("| rshmem operation | us | x UCX |")
    print("|---|---:|---:|")
    for r in ours:
        if r["test"].endswith("_lat"):
            rows.append({"test": r["test"], "size": 8, "rshmem_us": r["us"], "ucx_us": ucx_lat, "ratio": r["us"] / ucx_lat})
            print(f"| {r['test']} | {r['us']:.2f} | {r['us'] / ucx_lat:.2f} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"transport": transport, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
