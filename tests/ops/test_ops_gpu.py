"""rshmem.ops on GPUs (the cuda backend): every op against torch's unfused result, in fp16 and
bf16 (AllGather+GEMM also in fp8 e4m3), at the fused-ops issue's shapes and at ragged ones
(multiples of 8 that are not multiples of the tiles: TMA), and at shapes TMA cannot describe (the
pointer form); both producers of AllGather+GEMM; back to back on one stream and replayed from a
CUDA graph; first calls captured after `rshmem.ops.prepare`; groups of some PEs; misuse.

2 PEs on 2 GPUs, or sharing one (`RSHMEM_ALLOW_SHARED_GPU=1`; waits then progress by the GPU's
time-slicing between the processes, and the timings mean nothing):

    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m pytest -m gpu -q tests/ops/test_ops_gpu.py

By default a quick selection runs (bf16 at the issue's smaller shapes, fp16 at the ragged ones,
every path once); `RSHMEM_OPS_GPU_FULL=1` runs every shape in both dtypes. GEMM tuning is off
(the first candidate) except in the one test of the tuner. Every PE builds the global inputs
from seeds on its GPU and checks the whole result itself.
"""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
pytest.importorskip("triton", reason="triton is not installed")

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import rshmem  # noqa: E402
import rshmem.ops as ops  # noqa: E402

FULL = os.environ.get("RSHMEM_OPS_GPU_FULL") == "1"
BF16, FP16 = torch.bfloat16, torch.float16

# (M = rows of C, K, N): the issue's AllGather+GEMM shapes, then ragged and pointer-form ones.
AG_ISSUE = [(4096, 8192, 5120), (4096, 8192, 28672), (8192, 8192, 5120), (8192, 8192, 28672)]
AG_RAGGED = [(2 * 1000, 1000, 1208), (2 * 136, 8, 264)]
AG_POINTER = [(2 * 77, 100, 60)]
# (M, K = the whole inner dimension, N): GEMM+ReduceScatter.
RS_ISSUE = [(8192, 8192, 8192), (8192, 28672, 8192)]
RS_RAGGED = [(2 * 1000, 2 * 1000, 1208)]
RS_POINTER = [(2 * 77, 2 * 100, 60)]


def _cases(issue, ragged, pointer):
    quick_issue = issue[:1] if not FULL else issue
    out = [pytest.param(s, BF16, id=f"{s}-bf16") for s in quick_issue]
    if FULL:
        out += [pytest.param(s, FP16, id=f"{s}-fp16") for s in issue]
    out += [pytest.param(s, dt, id=f"{s}-{str(dt)[6:]}") for s in ragged + pointer for dt in (FP16, BF16)
            if FULL or dt == FP16]
    return out


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    old, small = ops.config.autotune, ops.config.gemm_small_rows
    ops.config.autotune = False
    ops.config.gemm_small_rows = 0  # the fused kernels at every size (test_small_rows_* sets it)
    yield
    ops.config.autotune = old
    ops.config.gemm_small_rows = small
    torch.cuda.synchronize()
    rshmem.barrier_all()


def _dev():
    from rshmem.ops import _group

    return _group.device()


def _rand(shape, dtype, seed, scale=1.0):
    g = torch.Generator(device=_dev()).manual_seed(seed)
    return (torch.randn(shape, generator=g, device=_dev(), dtype=torch.float32) * scale).to(dtype)


def _check(got, want, what):
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, want {tuple(want.shape)}"
    tol = 2e-2 if got.dtype == BF16 else 4e-3
    err = (got.float() - want.float()).abs().max().item()
    scale = max(want.float().abs().max().item(), 1.0)
    assert err <= tol * scale, f"{what}: max error {err} against a largest value {scale}"


def _ag_inputs(shape, dtype, seed):
    M, K, N = shape
    W, me = rshmem.n_pes(), rshmem.my_pe()
    m = M // W
    A = _rand((M, K), dtype, seed)
    B = _rand((K, N), dtype, seed + 1, 1.0 / K ** 0.5)
    return A, B, A[me * m:(me + 1) * m].contiguous()


@pytest.mark.parametrize("producer", ["copy_engine", "sm"])
@pytest.mark.parametrize("shape,dtype", _cases(AG_ISSUE, AG_RAGGED, AG_POINTER))
def test_all_gather_matmul(shape, dtype, producer):
    A, B, shard = _ag_inputs(shape, dtype, 100)
    old = ops.config.ag_producer
    ops.config.ag_producer = producer
    try:
        c = ops.all_gather_matmul(shard, B)
        _check(c, A @ B, f"C, {producer}")
        # The weight as nn.Linear keeps it ([N, K], used transposed), and the gathered A back.
        c2, full = ops.all_gather_matmul(shard, B.t().contiguous().t(), return_a=True)
    finally:
        ops.config.ag_producer = old
    _check(c2, A @ B, "C with b = weight.t()")
    assert torch.equal(full, A), "the gathered A differs from the PEs' shards"


@pytest.mark.parametrize("shape,dtype", _cases(RS_ISSUE, RS_RAGGED, RS_POINTER))
def test_matmul_reduce_scatter(shape, dtype):
    M, K, N = shape
    W, me = rshmem.n_pes(), rshmem.my_pe()
    k, m = K // W, M // W
    A = _rand((M, K), dtype, 200)
    B = _rand((K, N), dtype, 201, 1.0 / K ** 0.5)
    a, b = A[:, me * k:(me + 1) * k].contiguous(), B[me * k:(me + 1) * k]
    c = ops.matmul_reduce_scatter(a, b)
    _check(c, (A @ B)[me * m:(me + 1) * m], "C_shard")
    c2 = ops.matmul_reduce_scatter(a, b.t().contiguous().t())
    _check(c2, (A @ B)[me * m:(me + 1) * m], "C_shard with b = weight.t()")


@pytest.mark.parametrize("shape,b_t", [((4096, 8192, 5120), True), ((2 * 1000, 1008, 1216), False),
                                       ((2 * 77, 100, 60), True)], ids=["issue-w.t()", "ragged-b", "pointer-w.t()"])
def test_fp8_all_gather_matmul(shape, b_t):
    """fp8 (e4m3) A and B, C in bf16: against torch's fp32 product of the same fp8 values."""
    M, K, N = shape
    W, me = rshmem.n_pes(), rshmem.my_pe()
    m = M // W
    fp8 = torch.float8_e4m3fn
    A = _rand((M, K), torch.float32, 1500).to(fp8)
    B = (_rand((N, K), torch.float32, 1501, 4.0 / K ** 0.5).to(fp8).t() if b_t else
         _rand((K, N), torch.float32, 1501, 4.0 / K ** 0.5).to(fp8))
    c, full = ops.all_gather_matmul(A[me * m:(me + 1) * m].contiguous(), B, return_a=True)
    assert c.dtype == BF16
    _check(c, (A.float() @ B.float()).to(BF16), "fp8 C")
    assert torch.equal(full.view(torch.uint8), A.view(torch.uint8)), "the gathered fp8 A differs"


def test_misaligned_inputs_on_one_pe_take_the_pointer_form_with_the_agreed_tiling():
    """PE 1's inputs start 8 bytes past a 16-byte boundary, which TMA cannot take: it runs the
    pointer form of the kernels, tiled as every PE agreed (GEMM+ReduceScatter numbers its flags
    by tile), and every result is still right."""
    M, K, N = 2 * 640, 512, 384
    W, me = rshmem.n_pes(), rshmem.my_pe()
    m, k = M // W, K // W

    def placed(t):
        if me != 1:
            return t
        raw = torch.empty(t.numel() + 4, dtype=t.dtype, device=t.device)[4:]
        return raw.view(t.shape).copy_(t)

    A, B, shard = _ag_inputs((M, K, N), BF16, 900)
    _check(ops.all_gather_matmul(placed(shard), B), A @ B, "all_gather_matmul")
    a = placed(A[:, me * k:(me + 1) * k].contiguous())
    _check(ops.matmul_reduce_scatter(a, B[me * k:(me + 1) * k]), (A @ B)[me * m:(me + 1) * m], "matmul_reduce_scatter")


def _ar_reference(xs, op):
    acc = xs[0].float()
    for x in xs[1:]:
        acc = {"sum": torch.add, "avg": torch.add, "max": torch.maximum, "min": torch.minimum}[op](acc, x.float())
    if op == "avg":
        acc = acc / len(xs)
    return acc.to(xs[0].dtype)


AR_KINDS = [(torch.float32, "sum"), (BF16, "sum"), (FP16, "avg"), (BF16, "max")]
AR_SIZES = [1024, 256 << 10, 4 << 20] + ([64 << 20, 3 * 1000 * 1000 + 6] if FULL else [])
# quick: bf16 sums at every size, the other kinds at 1 KiB
AR_CASES = [pytest.param(n, dt, op, id=f"{n}B-{str(dt)[6:]}-{op}") for n in AR_SIZES for dt, op in AR_KINDS
            if FULL or (dt, op) == (BF16, "sum") or n == 1024]


@pytest.mark.parametrize("form", ["one_shot", "two_shot"])
@pytest.mark.parametrize("nbytes,dtype,op", AR_CASES)
def test_all_reduce_is_bit_exact(nbytes, dtype, op, form):
    W, me = rshmem.n_pes(), rshmem.my_pe()
    n = nbytes // dtype.itemsize
    xs = [_rand((n,), dtype, 300 + p) for p in range(W)]
    old = ops.config.allreduce_form
    ops.config.allreduce_form = form
    try:
        got = ops.all_reduce(xs[me], op=op)
    finally:
        ops.config.allreduce_form = old
    # Summed in fp32 in PE order 0..W-1 on every PE, as here: the same bits.
    assert torch.equal(got, _ar_reference(xs, op))


@pytest.mark.parametrize("nbytes,dtype,op", AR_CASES)
def test_in_place_all_reduce_is_bit_exact(nbytes, dtype, op):
    # The plan's kernel writes over its input (out = x): the same bits as the out-of-place call,
    # aligned or not (an unaligned x takes the copy back), on the second call (the plan) too.
    W, me = rshmem.n_pes(), rshmem.my_pe()
    n = nbytes // dtype.itemsize
    xs = [_rand((n,), dtype, 300 + p) for p in range(W)]
    want = _ar_reference(xs, op)
    buf = torch.zeros(n + 1, dtype=dtype, device=_dev())
    for x in (xs[me].clone(), xs[me].clone(), buf[1:], buf[1:]):
        x.copy_(xs[me])
        assert ops.all_reduce_(x, op=op) is x
        assert torch.equal(x, want)
    assert buf[0].item() == 0


def test_planned_all_reduce_launches_through_the_packed_launch():
    # After the first call of a key, the plan's kernel goes through rshmem's packed launch (one
    # call into the extension, `cuLaunchKernel` with the words packed once), not Triton's
    # launcher; calls with other tensors of the same key (new pointers) stay exact.
    from rshmem.ops import _library

    W, me = rshmem.n_pes(), rshmem.my_pe()
    n = 3000
    xs = [_rand((n,), torch.bfloat16, 700 + p) for p in range(W)]
    want = _ar_reference(xs, "sum")
    ops.all_reduce(xs[me])
    plans = [p for k, p in _library._plans.items() if k[0] == "all_reduce" and k[4] == (n,)]
    assert plans and all(p.kernel._native is not None for p in plans), plans
    outs = [ops.all_reduce(xs[me].clone()) for _ in range(8)]
    y = xs[me].clone()
    ops.all_reduce_(y)
    torch.cuda.synchronize()
    for out in outs + [y]:
        assert torch.equal(out, want)
    assert all(p.kernel._native is not None for p in plans)  # no launch fell back
    # launcher="triton" (a config change drops the plans): Triton's C launcher, the same bits.
    ops.config.launcher = "triton"
    try:
        out = ops.all_reduce(xs[me])
        out2 = ops.all_reduce(xs[me])
        plans = [p for k, p in _library._plans.items() if k[0] == "all_reduce" and k[4] == (n,)]
        assert plans and all(p.kernel._native is None for p in plans)
    finally:
        ops.config.launcher = "rshmem"
    assert torch.equal(out, want) and torch.equal(out2, want)


@pytest.mark.parametrize("rows", [16, 1024])
def test_planned_gemm_ops_launch_through_the_packed_launch(rows):
    # The GEMM kernels take TMA descriptors: the packed launch encodes them from the tensors'
    # addresses (the same bytes as Triton's encoder). Calls after the plan with new inputs and outputs (new
    # descriptors) stay exact, and every kernel of both plans went through the packed launch.
    from rshmem import _native
    from rshmem.ops import _launch, _library

    W, me = rshmem.n_pes(), rshmem.my_pe()
    M, K, N = rows * W, 512, 768
    k = K // W
    _library.forget_plans()
    for it in range(3):
        A, B, shard = _ag_inputs((M, K, N), BF16, 800 + it)
        _check(ops.all_gather_matmul(shard, B), A @ B, f"AG+GEMM call {it}")
        a, b = A[:, me * k:(me + 1) * k].contiguous(), B[me * k:(me + 1) * k]
        _check(ops.matmul_reduce_scatter(a, b), (A @ B)[me * rows:(me + 1) * rows], f"GEMM+RS call {it}")
    bounds = [v for p in _library._plans.values() for v in vars(p).values() if isinstance(v, _launch.Bound)]
    # A packed launch encodes every varying descriptor from an address (else Triton's launcher
    # takes the kernel): to the bytes Triton's own encoder gives for the same view.
    assert bounds and all(b._native is not None for b in bounds), [(getattr(b._ck, "name", b._ck), b._native) for b in bounds]
    from triton.backends.nvidia.driver import make_tensordesc_arg

    maps = [(b, s) for b in bounds for s in b._slots if s[1] is not None]
    assert rows < 1024 or maps, "the fused GEMM kernels take descriptors"
    t = torch.empty(1 << 22, dtype=torch.uint8, device=_dev())
    for _, (_, like, meta, _) in maps:
        like.base = t
        try:
            want = _launch._map_bytes(make_tensordesc_arg(like, meta)[0])
        finally:
            like.base = None
        assert _native.tensor_map_bytes(t.data_ptr(), _launch._map_args(like, meta)) == want, (like.shape, meta)


def test_back_to_back_calls_on_one_stream():
    """Three calls of each op queued with no synchronization between them, each with other data:
    a fast PE must never overwrite a slot its peer has not consumed yet."""
    M, K, N = 2 * 512, 1024, 768
    W, me = rshmem.n_pes(), rshmem.my_pe()
    m, k = M // W, K // W
    results = []
    for it in range(3):
        A, B, shard = _ag_inputs((M, K, N), BF16, 400 + it)
        xs = [_rand((5000,), torch.float32, 500 + 10 * it + p) for p in range(W)]
        results.append((ops.all_gather_matmul(shard, B), A @ B,
                        ops.all_reduce(xs[me]), _ar_reference(xs, "sum"),
                        ops.matmul_reduce_scatter(A[:, me * k:(me + 1) * k].contiguous(), B[me * k:(me + 1) * k]),
                        (A @ B)[me * m:(me + 1) * m]))
    torch.cuda.synchronize()
    for it, (c, want_c, r, want_r, s, want_s) in enumerate(results):
        _check(c, want_c, f"all_gather_matmul, call {it}")
        assert torch.equal(r, want_r), f"all_reduce, call {it}"
        _check(s, want_s, f"matmul_reduce_scatter, call {it}")


def test_cuda_graph_replays():
    """Each op captured in one CUDA graph (after an eager warm-up call), replayed with new data
    in the captured inputs: the protocol needs nothing reset by the host between replays."""
    M, K, N = 2 * 384, 512, 640
    W, me = rshmem.n_pes(), rshmem.my_pe()
    m, k = M // W, K // W
    shard = torch.empty((m, K), dtype=BF16, device=_dev())
    B = torch.empty((K, N), dtype=BF16, device=_dev())
    a_rs = torch.empty((M, k), dtype=BF16, device=_dev())
    x = torch.empty(70000, dtype=torch.float32, device=_dev())

    def fill(seed):
        A, Bv, sh = _ag_inputs((M, K, N), BF16, seed)
        shard.copy_(sh)
        B.copy_(Bv)
        a_rs.copy_(A[:, me * k:(me + 1) * k])
        xs = [_rand((x.numel(),), torch.float32, seed + 50 + p) for p in range(W)]
        x.copy_(xs[me])
        return A @ Bv, (A @ Bv)[me * m:(me + 1) * m], _ar_reference(xs, "sum")

    def step():
        return (ops.all_gather_matmul(shard, B), ops.matmul_reduce_scatter(a_rs, B[me * k:(me + 1) * k]),
                ops.all_reduce(x))

    fill(600)
    step()  # the first call of each shape agrees, allocates and compiles: not capturable
    torch.cuda.synchronize()
    rshmem.barrier_all()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = step()
        outs2 = step()  # two calls in one graph: back to back inside a replay too
    for it in range(3):
        want = fill(700 + it)
        graph.replay()
        torch.cuda.synchronize()
        for got in (outs, outs2):
            _check(got[0], want[0], f"all_gather_matmul, replay {it}")
            _check(got[1], want[1], f"matmul_reduce_scatter, replay {it}")
            assert torch.equal(got[2], want[2]), f"all_reduce, replay {it}"
    del graph
    torch.cuda.synchronize()
    rshmem.barrier_all()


def test_autotuned_choice_is_agreed_and_correct():
    from rshmem.ops import _tuning

    A, B, shard = _ag_inputs((2 * 512, 1024, 1024), BF16, 800)
    ops.config.autotune = True
    try:
        c = ops.all_gather_matmul(shard, B)
    finally:
        ops.config.autotune = False
    _check(c, A @ B, "C with the tuned configuration")
    chosen = [v for k, v in _tuning.chosen().items() if k[0] == "all_gather_matmul" and k[-1] == 1024]
    assert chosen and chosen[-1] in _tuning.AG_CANDIDATES


def test_misuse_on_the_cuda_backend():
    with pytest.raises(rshmem.InvalidArgumentError, match="this PE computes on cuda"):
        ops.all_reduce(torch.ones(4))
    fresh = torch.ones(1234 + 8, dtype=torch.float32, device=_dev())  # a size no test used before
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(rshmem.RshmemError, match=r"call rshmem.ops.prepare\(rshmem.ops.all_reduce, \*args"):
        with torch.cuda.graph(graph):
            ops.all_reduce(fresh)
    del graph
    torch.cuda.synchronize()
    rshmem.barrier_all()


def test_first_calls_captured_after_prepare():
    """Shapes no other test uses, prepared (agreed, allocated, tuned, compiled; nothing computed),
    then called for the first time inside CUDA graph capture, and replayed with new data."""
    M, K, N = 2 * 320, 448, 576
    W, me = rshmem.n_pes(), rshmem.my_pe()
    m, k = M // W, K // W
    shard = torch.empty((m, K), dtype=FP16, device=_dev())
    B = torch.empty((K, N), dtype=FP16, device=_dev())
    a_rs = torch.empty((M, k), dtype=FP16, device=_dev())
    x = torch.empty(3 * 4099, dtype=BF16, device=_dev())
    b_rs = B[me * k:(me + 1) * k]
    ops.prepare(ops.all_gather_matmul, shard, B)
    ops.prepare(ops.matmul_reduce_scatter, a_rs, b_rs)
    ops.prepare(ops.all_reduce, x)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = (ops.all_gather_matmul(shard, B), ops.matmul_reduce_scatter(a_rs, b_rs), ops.all_reduce(x))
    for it in range(2):
        A, Bv, sh = _ag_inputs((M, K, N), FP16, 1000 + it)
        shard.copy_(sh)
        B.copy_(Bv)
        a_rs.copy_(A[:, me * k:(me + 1) * k])
        xs = [_rand((x.numel(),), BF16, 1100 + 10 * it + p) for p in range(W)]
        x.copy_(xs[me])
        graph.replay()
        torch.cuda.synchronize()
        _check(outs[0], A @ Bv, f"all_gather_matmul, replay {it}")
        _check(outs[1], (A @ Bv)[me * m:(me + 1) * m], f"matmul_reduce_scatter, replay {it}")
        assert torch.equal(outs[2], _ar_reference(xs, "sum")), f"all_reduce, replay {it}"
    del graph
    torch.cuda.synchronize()
    rshmem.barrier_all()


def test_a_kernel_not_compiled_for_a_captured_call_raises_clearly():
    """A shape called before, but with an input 8 bytes off a 16-byte boundary: agreed and
    allocated, but the kernel is specialized on alignment and was never compiled for it, which
    cannot happen during capture."""
    n = 6000
    x = _rand((n,), torch.float32, 1200)
    ops.all_reduce(x)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    off = torch.empty(n + 2, dtype=torch.float32, device=_dev())[2:]
    off.copy_(x)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(rshmem.RshmemError, match="needs its kernel one_shot_kernel compiled for new arguments"):
        with torch.cuda.graph(graph):
            ops.all_reduce(off)
    del graph
    torch.cuda.synchronize()
    rshmem.barrier_all()
    # prepared with that tensor, the same call captures
    ops.prepare(ops.all_reduce, off)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.all_reduce(off)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ops.all_reduce(x))
    del graph
    torch.cuda.synchronize()
    rshmem.barrier_all()


def test_ops_over_registered_groups():
    """The PEs as two halves (single PEs with 2 PEs; [0, 1] and [2, 3] with 4), each half
    registered and running every op over itself on its own data, the workspaces carved from the
    group's arena on the GPU."""
    import torch.distributed as dist

    W, me = rshmem.n_pes(), rshmem.my_pe()
    if W % 2:
        pytest.skip("needs an even number of PEs")
    halves = [list(range(W // 2)), list(range(W // 2, W))]
    made = [dist.new_group(h) for h in halves]
    pes = halves[me // (W // 2)]
    pg = made[me // (W // 2)]
    team = ops.register_group(pg, workspace_bytes=64 << 20)
    assert rshmem.team_n_pes(team) == len(pes)
    G, r = len(pes), pes.index(me)
    M, K, N = G * 256, 512, 384
    m, k = M // G, K // G
    seed = 1300 + 50 * pes[0]
    A = _rand((M, K), BF16, seed)
    B = _rand((K, N), BF16, seed + 1, 1.0 / K ** 0.5)
    _check(ops.all_gather_matmul(A[r * m:(r + 1) * m].contiguous(), B, group=pg), A @ B, "all_gather_matmul")
    _check(ops.matmul_reduce_scatter(A[:, r * k:(r + 1) * k].contiguous(), B[r * k:(r + 1) * k], group=pg),
           (A @ B)[r * m:(r + 1) * m], "matmul_reduce_scatter")
    xs = [_rand((10000,), torch.float32, seed + 10 + p) for p in range(G)]
    assert torch.equal(ops.all_reduce(xs[r], group=pg), _ar_reference(xs, "sum"))
    torch.cuda.synchronize()
    rshmem.barrier_all()


@pytest.mark.distinct_gpus(n=2)
def test_large_all_reduces_over_an_nccl_group_are_nccls():
    """From config.allreduce_nccl_min_bytes (8 MiB) up, over a group with the NCCL backend, the
    all-reduce is torch.distributed's (NCCL refuses two ranks on one GPU: distinct GPUs only)."""
    import torch.distributed as dist

    W, me = rshmem.n_pes(), rshmem.my_pe()
    pg = dist.new_group(list(range(W)), backend="nccl")
    n = (16 << 20) // 4
    xs = [_rand((n,), torch.float32, 1400 + p) for p in range(W)]
    calls = []
    real = dist.all_reduce

    def counting(t, *args, **kwargs):
        calls.append(t.numel())
        return real(t, *args, **kwargs)

    dist.all_reduce = counting
    try:
        got = ops.all_reduce(xs[me], group=pg)
        small = ops.all_reduce(xs[me][:1000], group=pg)
    finally:
        dist.all_reduce = real
    assert calls == [n], f"NCCL calls {calls}: the 16 MiB call only"
    want = _ar_reference(xs, "sum")
    _check(got, want, "NCCL's sum")
    assert torch.equal(small, _ar_reference([x[:1000] for x in xs], "sum")), "rshmem's kernel below the threshold"
    torch.cuda.synchronize()
    rshmem.barrier_all()


def test_reduce_overhead_compile_records_prepared_shapes():
    """torch.compile(mode="reduce-overhead") with a dynamic token count: CUDA graph trees warm a
    function up eagerly once, then record every new shape straight into a graph, so each shape's
    first op call is captured. Prepared shapes record and replay correctly."""
    W, me = rshmem.n_pes(), rshmem.my_pe()
    K, N = 256, 384
    w = _rand((N, K), BF16, 1600, 1.0 / K ** 0.5)  # as nn.Linear keeps it

    def up(x):
        return ops.all_gather_matmul(x, w.t())

    compiled = torch.compile(up, mode="reduce-overhead", dynamic=True)
    rows = (128, 192, 320)
    for m in rows:
        ops.prepare(ops.all_gather_matmul, torch.empty((m, K), dtype=BF16, device=_dev()), w.t())
    torch.cuda.synchronize()
    rshmem.barrier_all()
    for it in range(2):
        for m in rows:
            A = _rand((W * m, K), BF16, 1700 + 10 * it + m)
            got = compiled(A[me * m:(me + 1) * m].contiguous()).clone()
            torch.cuda.synchronize()
            _check(got, A @ w.t(), f"compiled all_gather_matmul, {m} rows, round {it}")
    torch.cuda.synchronize()
    rshmem.barrier_all()


@pytest.mark.parametrize("producer", ["sm", "copy_engine"])
@pytest.mark.parametrize("rows", [1, 16, 128, 512])
def test_small_rows_run_as_the_gathered_a_and_cublas(rows, producer):
    """Decode-sized calls (`config.gemm_small_rows`): AllGather+GEMM gathers A into the workspace
    and multiplies with cuBLAS, every step on the caller's stream; back to back, both layouts,
    the gathered A, and a CUDA graph, with either producer (the SM one also copies this PE's rows)."""
    W, me = rshmem.n_pes(), rshmem.my_pe()
    m = max(1, rows // W)
    M, K, N = W * m, 512, 768
    ops.config.gemm_small_rows = 512
    old_producer, ops.config.ag_producer = ops.config.ag_producer, producer
    try:
        got = []
        for it in range(3):
            A, B, shard = _ag_inputs((M, K, N), BF16, 900 + it)
            weight = B.t().contiguous()
            got.append((ops.all_gather_matmul(shard, B), ops.all_gather_matmul(shard, weight.t(), return_a=True),
                        A @ B, A))
        torch.cuda.synchronize()
        for it, (c, (c2, full), want, A) in enumerate(got):
            _check(c, want, f"C, call {it}")
            _check(c2, want, f"C with weight.t(), call {it}")
            assert torch.equal(full, A), f"gathered A, call {it}"
        A, B, shard = _ag_inputs((M, K, N), BF16, 950)
        static = shard.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = ops.all_gather_matmul(static, B)
        for it in range(2):
            A, _, sh = _ag_inputs((M, K, N), BF16, 960 + it)
            static.copy_(sh)
            graph.replay()
            torch.cuda.synchronize()
            _check(out, A @ B, f"replay {it}")
        del graph
        if W == 1:
            a = _rand((M, K), BF16, 970)
            _check(ops.matmul_reduce_scatter(a, B), a @ B, "GEMM+ReduceScatter on one PE")
    finally:
        ops.config.gemm_small_rows = 0
        ops.config.ag_producer = old_producer
    torch.cuda.synchronize()
    rshmem.barrier_all()


@pytest.mark.parametrize("b_t", [False, True], ids=["b", "w.t()"])
def test_float32_multiplies_as_tf32(b_t):
    W, me = rshmem.n_pes(), rshmem.my_pe()
    M, K, N = 2 * 256, 512, 768
    A, B, shard = _ag_inputs((M, K, N), torch.float32, 1000)
    b = B.t().contiguous().t() if b_t else B
    c, full = ops.all_gather_matmul(shard, b, return_a=True)
    _check(c, A.double() @ B.double(), "fp32 C")
    assert c.dtype == torch.float32 and torch.equal(full, A)
    k, m = K // W, M // W
    s = ops.matmul_reduce_scatter(A[:, me * k:(me + 1) * k].contiguous(), b[me * k:(me + 1) * k])
    _check(s, (A.double() @ B.double())[me * m:(me + 1) * m], "fp32 C_shard")
    torch.cuda.synchronize()
    rshmem.barrier_all()


def test_a_steady_call_allocates_only_its_outputs():
    """After the first call of a key, a call allocates its outputs and nothing else."""
    W, me = rshmem.n_pes(), rshmem.my_pe()
    M, K, N = 2 * 256, 256, 384
    A, B, shard = _ag_inputs((M, K, N), BF16, 1100)
    a_rs = A[:, :K // W].contiguous()
    x = _rand((3000,), torch.float32, 1101)
    calls = {"all_gather_matmul": (lambda: ops.all_gather_matmul(shard, B.t().contiguous().t()), 2),
             "matmul_reduce_scatter": (lambda: ops.matmul_reduce_scatter(a_rs, B[:K // W]), 1),
             "all_reduce": (lambda: ops.all_reduce(x), 1)}
    for name, (call, outputs) in calls.items():
        call()
        call()
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats(_dev())["allocation.all.allocated"]
        keep = call()
        after = torch.cuda.memory_stats(_dev())["allocation.all.allocated"]
        assert after - before <= outputs, f"{name}: {after - before} allocations for {outputs} outputs"
        del keep
    torch.cuda.synchronize()
    rshmem.barrier_all()


@pytest.mark.parametrize("rows", [16, 512])
def test_a_training_step_gives_the_custom_ops_gradients_on_the_gpu(rows):
    """Eager calls whose weight needs a gradient run the op in a torch.autograd.Function (not
    the custom op's dispatcher): forward and backward (a GEMM+RS for AllGather+GEMM's input, an
    AllGather+GEMM for GEMM+RS's) on the GPU equal the custom op's, call by call, and the
    unsharded product's gradients."""
    W, me = rshmem.n_pes(), rshmem.my_pe()
    M, K, N = rows * W, 256, 384
    k = K // W
    A, B, shard = _ag_inputs((M, K, N), BF16, 1200)
    results = []
    for eager in (True, False):
        s, b = shard.clone().requires_grad_(), B.t().contiguous().t().requires_grad_()  # b as w.t()
        a2, b2 = A[:, me * k:(me + 1) * k].contiguous().requires_grad_(), B[me * k:(me + 1) * k].clone().requires_grad_()
        if eager:
            c, r = ops.all_gather_matmul(s, b), ops.matmul_reduce_scatter(a2, b2)
        else:
            c = torch.ops.rshmem.all_gather_matmul(s, b, 0, True)[0]
            r = torch.ops.rshmem.matmul_reduce_scatter(a2, b2, 0)
        assert ("AllGatherMatmul" in type(c.grad_fn).__name__) == eager, type(c.grad_fn).__name__
        (c.float().square().sum() + r.float().square().sum()).backward()
        results.append([t.detach() for t in (c, r, s.grad, b.grad, a2.grad, b2.grad)])
    torch.cuda.synchronize()
    for what, got, want in zip(("C", "C_shard", "dA_shard", "dB", "dA (RS)", "dB (RS)"), *results):
        _check(got, want, f"eager against the custom op: {what}")
    Af, Bf = A.float(), B.float()
    C = Af @ Bf
    _check(results[0][0], C, "C against the unsharded product")
    _check(results[0][3], (Af.t() @ (2 * C)), "dB against the unsharded product")
    rshmem.barrier_all()
