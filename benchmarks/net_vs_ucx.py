"""rshmem's network transport beside UCX's own ucx_perftest, on the same transport, in one run.

    python -m benchmarks.net_vs_ucx [--sizes 65536,1048576,4194304] [--rounds 3] [--out bench-out/net_vs_ucx.json]
    python -m benchmarks.net_vs_ucx --ucx .gpu/ucx --bench .gpu/bin/net_bench   # GPU machine (no Rust)

Both sides are 2 processes on this machine; rshmem's PEs sit in 2 virtual hosts, so everything
between them goes through UCX (runtime/examples/net_bench.rs). The transport is UCX's choice
under the caller's UCX_* variables; without any, `UCX_TLS=tcp,self UCX_NET_DEVICES=lo` (loopback
TCP, what CI has). UCX comes from the `libucx-cu12` wheel (its ucx_perftest too). The two sides
run alternately, `--rounds` times; every figure printed is the median over the rounds.

Rows:
- put bandwidth, host memory, PE 0 -> PE 1, `iters` puts then quiet, against
  `ucx_perftest -t ucp_put_bw` (`iters` puts then a flush), paired by completion semantics:
  - blocking `putmem` (each returns once its source may be reused) against `ucp_put_bw -O 1`
    (each put's request completes before the next starts: UCX's own blocking put);
  - `putmem_nbi` (at most 32 in flight) against `ucp_put_bw -O 32` (its default window: at
    most 32 requests in flight);
  - and blocking `putmem` against the window of 32 too, the pairing first measured
    (its goal: >= 0.9x from 64 KiB up).
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
import statistics
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


# ucx_perftest's windows (`-O`, requests in flight at most) paired with rshmem's puts: 1 for the
# blocking putmem, 32 (ucp_put_bw's default, and runtime/src/transport/staging.rs's
# MAX_IN_FLIGHT) for putmem_nbi.
BLOCKING_WINDOW = 1
NBI_WINDOW = 32


def warmup(iters: int) -> int:
    """Untimed iterations before a series, the same on both sides."""
    return max(iters // 10, 10)


def perftest(bin_dir: Path, env: dict, test: str, size: int, iters: int, window: int | None = None) -> list[float]:
    """One ucx_perftest run (server and client on loopback), with at most `window` requests in
    flight (`-O`; its default when None); the numbers of its `Final:` line: iterations, latency
    50%ile / average / overall (us), bandwidth average / overall (MiB/s), message rate average /
    overall."""
    exe = str(bin_dir / "ucx_perftest")
    port = free_port()
    server = subprocess.Popen([exe, "-p", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    extra = [] if window is None else ["-O", str(window)]
    try:
        deadline = time.time() + 30
        while True:
            client = subprocess.run([exe, "127.0.0.1", "-p", str(port), "-t", test, "-s", str(size), "-n", str(iters),
                                     "-w", str(warmup(iters)), *extra], env=env, capture_output=True, text=True, timeout=300)
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
    out = subprocess.run([str(exe), "--sizes", ",".join(map(str, sizes)), "--iters", str(iters), "--warmup", str(warmup(iters)),
                          "--lat-iters", str(lat_iters)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"net_bench failed:\n{out.stdout}\n{out.stderr}")
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="65536,262144,1048576,4194304")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--lat-iters", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of both sides; medians are printed")
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

    # ours[(test, size)] and theirs[(test, size, window)]: one figure per round.
    ours: dict[tuple, list[float]] = {}
    theirs: dict[tuple, list[float]] = {}
    for rnd in range(max(args.rounds, 1)):
        for r in net_bench(env, sizes, args.iters, args.lat_iters, args.bench):
            ours.setdefault((r["test"], r["size"]), []).append(r["MB_s"] if "MB_s" in r else r["us"])
        for size in sizes:
            for window in (BLOCKING_WINDOW, NBI_WINDOW):
                mib_s = perftest(bin_dir, env, "ucp_put_bw", size, args.iters, window)[5]
                theirs.setdefault(("put_bw", size, window), []).append(mib_s * MIB / 1e6)  # MiB/s -> MB/s
        theirs.setdefault(("put_lat", 8, 1), []).append(perftest(bin_dir, env, "ucp_put_lat", 8, args.lat_iters)[2])
        print(f"round {rnd + 1} of {args.rounds} done", file=sys.stderr, flush=True)

    rows = []
    print(f"rshmem vs ucx_perftest, 2 processes on this machine, {transport}; medians of {args.rounds} alternating rounds")
    print(f"| size | putmem MB/s | ucp_put_bw -O {BLOCKING_WINDOW} MB/s | ratio | putmem_nbi MB/s | ucp_put_bw -O {NBI_WINDOW} MB/s"
          f" | ratio | putmem / -O {NBI_WINDOW} |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        blocking = median(ours[("put_bw", size)])
        nbi = median(ours[("put_nbi_bw", size)]) if ("put_nbi_bw", size) in ours else float("nan")
        ucx_blocking = median(theirs[("put_bw", size, BLOCKING_WINDOW)])
        ucx_window = median(theirs[("put_bw", size, NBI_WINDOW)])
        rows.append({"test": "put_bw", "size": size, "rshmem_putmem_MB_s": blocking, "rshmem_putmem_nbi_MB_s": nbi,
                     f"ucx_O{BLOCKING_WINDOW}_MB_s": ucx_blocking, f"ucx_O{NBI_WINDOW}_MB_s": ucx_window,
                     "ratio_blocking": blocking / ucx_blocking, "ratio_nbi": nbi / ucx_window,
                     "ratio_putmem_vs_window": blocking / ucx_window,
                     "rounds": {"putmem": ours[("put_bw", size)], "putmem_nbi": ours.get(("put_nbi_bw", size), []),
                                f"ucx_O{BLOCKING_WINDOW}": theirs[("put_bw", size, BLOCKING_WINDOW)],
                                f"ucx_O{NBI_WINDOW}": theirs[("put_bw", size, NBI_WINDOW)]}})
        print(f"| {size >> 10} KiB | {blocking:.0f} | {ucx_blocking:.0f} | {blocking / ucx_blocking:.2f} | {nbi:.0f} | {ucx_window:.0f}"
              f" | {nbi / ucx_window:.2f} | {blocking / ucx_window:.2f} |")
    ucx_lat = median(theirs[("put_lat", 8, 1)])
    print(f"\n8-byte latency, half a round trip, mean (ucx_perftest ucp_put_lat: {ucx_lat:.2f} us)")
    print("| rshmem operation | us | x UCX |")
    print("|---|---:|---:|")
    for (test, size), got in ours.items():
        if test.endswith("_lat"):
            us = median(got)
            rows.append({"test": test, "size": 8, "rshmem_us": us, "ucx_us": ucx_lat, "ratio": us / ucx_lat,
                         "rounds": {"rshmem": got, "ucx": theirs[("put_lat", 8, 1)]}})
            print(f"| {test} | {us:.2f} | {us / ucx_lat:.2f} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"transport": transport, "rounds": args.rounds, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
