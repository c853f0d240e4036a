"""Where the CPU time of one eager on-stream call goes (the eager small all-gather is limited by
it: the all-gather job notes the CPU time per call beside the wall time).

    torchrun --nproc-per-node 2 -m benchmarks.host_profile [--calls 5000] [--bytes 1024]

Rank 0 prints, for `rshmem.torch.fcollect_on_stream` and `barrier_all_on_stream`: the CPU time
per call of back-to-back calls, the same for the pieces of the Python wrapper (the current stream
handle, the tensor checks, the native call with every check done), and cProfile's table of the
wrapper. Not a benchmark of the GPU: nothing here is timed with CUDA events.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time


def per_call_us(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--bytes", type=int, default=1024)
    args = ap.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import torch
    import torch.distributed as dist

    import rshmem
    import rshmem.torch as rtorch
    from rshmem import _cuda, _native, _tensor_args

    torch.cuda.set_device(rtorch.device())
    dist.init_process_group("gloo")
    rshmem.init(dist.group.WORLD, backend="cuda")
    world, n = dist.get_world_size(), args.bytes
    src = rtorch.create_symmetric_tensor((n,), torch.uint8)
    dst = rtorch.create_symmetric_tensor((world * n,), torch.uint8)
    d, s = dst.data_ptr(), src.data_ptr()
    stream = _cuda.stream_handle(None)
    team = int(rshmem.Team.WORLD)
    rows = []

    def step(name, fn, collective):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        us = per_call_us(fn, args.calls)
        torch.cuda.synchronize()
        dist.barrier()
        rows.append((name, us, collective))

    step("fcollect_on_stream (whole call)", lambda: rtorch.fcollect_on_stream(dst, src), True)
    step("_native.fcollect_on_stream (checks done)",
         lambda: _native.fcollect_on_stream(team, d, s, n, "uint8", stream), True)
    step("barrier_all_on_stream (whole call)", rtorch.barrier_all_on_stream, True)
    step("stream_handle(None)", lambda: _cuda.stream_handle(None), False)
    step("_local(tensor) x 2", lambda: (_tensor_args._local(dst, "dst", _native.device_ordinal()), _tensor_args._local(src, "src", _native.device_ordinal())), False)
    step("rshmem.team_n_pes()", lambda: rshmem.team_n_pes(), False)

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        rtorch.fcollect_on_stream(dst, src)
    prof.disable()
    torch.cuda.synchronize()
    dist.barrier()
    if dist.get_rank() == 0:
        print(f"CPU time per call, {args.calls} back-to-back calls, {n} B per rank, {world} PEs "
              f"(GPU {torch.cuda.get_device_name(local)}):")
        for name, us, _ in rows:
            print(f"  {name:45s} {us:8.2f} us")
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
        print("cProfile of fcollect_on_stream (tottime; profiling itself adds to every Python frame):")
        print(out.getvalue())
    rtorch.free_tensor(dst)
    rtorch.free_tensor(src)
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
