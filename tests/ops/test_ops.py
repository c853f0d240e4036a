"""rshmem.ops and rshmem.nn on the session's backend (the host backend in CI: CPU tensors, the
unfused implementations), 1 or 2 PEs: every op against torch's unfused result, autograd against
the unparallel model, torch.compile of a module using them, and every misuse.

Every PE builds the whole (global) inputs from one seed and takes its part, so each can check the
whole result locally. GPU runs of the same ops are in test_ops_gpu.py.
"""
from __future__ import annotations

import pytest
import torch

import rshmem
import rshmem.nn as rnn
import rshmem.ops as ops

DTYPES = [torch.float16, torch.bfloat16]
FLOATS = DTYPES + [torch.float32]  # every dtype the GEMM ops train in


def _global(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def _close(got, want, dtype, what):
    tol = {torch.bfloat16: 2e-2, torch.float16: 3e-3}.get(dtype, 1e-5)
    err = (got.float() - want.float()).abs().max().item()
    scale = max(want.float().abs().max().item(), 1.0)
    assert err <= tol * scale, f"{what}: max error {err} against a largest value {scale}"


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("m,K,N", [(8, 16, 24), (5, 24, 7), (1, 8, 3)])
@pytest.mark.parametrize("b_t", [False, True], ids=["b", "w.t()"])
def test_all_gather_matmul_matches_torch(me, npes, dtype, m, K, N, b_t):
    A = _global((npes * m, K), dtype, 1)
    B = _global((N, K), dtype, 2).t() if b_t else _global((K, N), dtype, 2)
    shard = A[me * m:(me + 1) * m].contiguous()
    c = ops.all_gather_matmul(shard, B)
    assert c.shape == (npes * m, N) and c.dtype == dtype
    _close(c, A.float() @ B.float(), dtype, "C")
    c2, full = ops.all_gather_matmul(shard, B, return_a=True)
    assert torch.equal(full, A) and torch.equal(c2, c)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("rows,K,N", [(8, 16, 24), (3, 40, 5)])
@pytest.mark.parametrize("b_t", [False, True], ids=["b", "w.t()"])
def test_matmul_reduce_scatter_matches_torch(me, npes, dtype, rows, K, N, b_t):
    M = rows * npes
    A = _global((M, npes * K), dtype, 3)
    B = _global((N, npes * K), dtype, 4).t() if b_t else _global((npes * K, N), dtype, 4)
    a = A[:, me * K:(me + 1) * K].contiguous()
    b = B[me * K:(me + 1) * K]
    c = ops.matmul_reduce_scatter(a, b)
    assert c.shape == (rows, N) and c.dtype == dtype
    _close(c, (A.float() @ B.float())[me * rows:(me + 1) * rows], dtype, "C_shard")


@pytest.mark.parametrize("dtype", DTYPES + [torch.float32], ids=str)
@pytest.mark.parametrize("op", ["sum", "avg", "max", "min"])
def test_all_reduce_matches_torch(me, npes, dtype, op):
    xs = [_global((3, 37), dtype, 10 + p) for p in range(npes)]
    stacked = torch.stack([x.float() for x in xs])
    want = {"sum": stacked.sum(0), "avg": stacked.mean(0), "max": stacked.amax(0), "min": stacked.amin(0)}[op]
    got = ops.all_reduce(xs[me], op=op)
    assert got.shape == (3, 37) and got.dtype == dtype
    _close(got, want, dtype, op)
    assert torch.equal(xs[me], _global((3, 37), dtype, 10 + me)), "the input was changed"


@pytest.mark.parametrize("dtype", DTYPES + [torch.float32], ids=str)
@pytest.mark.parametrize("op", ["sum", "avg", "max", "min"])
def test_in_place_all_reduce_matches_all_reduce(me, npes, dtype, op):
    for shape in ((3, 37), (5,)):
        xs = [_global(shape, dtype, 10 + p) for p in range(npes)]
        want = ops.all_reduce(xs[me], op=op)
        for _ in range(2):  # the first call of a key makes its plan, the second runs it
            x = xs[me].clone()
            assert ops.all_reduce_(x, op=op) is x
            assert torch.equal(x, want), (shape, op)
    with torch.no_grad():
        x = _global((4,), torch.float32, 3).requires_grad_()
        ops.all_reduce_(x)
    with pytest.raises(rshmem.InvalidArgumentError, match="all_reduce_: x requires grad"):
        ops.all_reduce_(torch.ones(3, requires_grad=True))
    with pytest.raises(rshmem.DTypeError, match="this op takes float16, bfloat16, float32"):
        ops.all_reduce_(torch.ones(3, dtype=torch.int32))
    with pytest.raises(rshmem.InvalidArgumentError, match="contiguous"):
        ops.all_reduce_(torch.ones((4, 4))[:, 1])
    compiled = torch.compile(lambda t: ops.all_reduce_(t.mul_(2)), backend="aot_eager", fullgraph=True)
    x = torch.full((6,), float(me + 1))
    compiled(x)
    assert torch.equal(x, torch.full((6,), float(sum(2 * (p + 1) for p in range(npes)))))


def test_ops_are_torch_custom_ops_with_fake_shapes(npes):
    a = torch.empty((4, 8), dtype=torch.bfloat16, device="meta")
    b = torch.empty((8, 6), dtype=torch.bfloat16, device="meta")
    c, full = torch.ops.rshmem.all_gather_matmul(a, b, 0, True)
    assert c.shape == (4 * npes, 6) and full.shape == (4 * npes, 8)
    assert torch.ops.rshmem.matmul_reduce_scatter(torch.empty((2 * npes, 8), device="meta"),
                                                  torch.empty((8, 3), device="meta"), 0).shape == (2, 3)
    assert torch.ops.rshmem.all_reduce(torch.empty(5, device="meta"), "sum", 0).shape == (5,)


class _ParallelMlp(torch.nn.Module):
    """A transformer MLP block with sequence parallelism: LayerNorm, column-parallel up
    projection, GELU, row-parallel down projection, residual."""

    def __init__(self, ref: "_Mlp", group=None):
        super().__init__()
        self.norm = torch.nn.LayerNorm(ref.norm.normalized_shape, dtype=ref.norm.weight.dtype)
        self.norm.load_state_dict(ref.norm.state_dict())
        for p in self.norm.parameters():
            p.sequence_parallel = True
        self.up = rnn.ColumnParallelLinear.from_linear(ref.up, group=group)
        self.down = rnn.RowParallelLinear.from_linear(ref.down, group=group)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class _Mlp(torch.nn.Module):
    def __init__(self, hidden, ffn, dtype):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden, dtype=dtype)
        self.up = torch.nn.Linear(hidden, ffn, dtype=dtype)
        self.down = torch.nn.Linear(ffn, hidden, dtype=dtype)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _twins(hidden, ffn, seed, dtype=torch.bfloat16):
    """An unparallel block in fp32 whose weights are `dtype` values, and its parallel `dtype` twin."""
    import copy

    torch.manual_seed(seed)  # the same reference block on every PE
    ref = _Mlp(hidden, ffn, torch.float32)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(p.to(dtype).float())
    return ref, _ParallelMlp(copy.deepcopy(ref).to(dtype))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_parallel_mlp_forward_and_gradients_match_the_unparallel_block(me, npes, dtype):
    hidden, ffn, tokens = 16, 32, 4 * npes
    ref, par = _twins(hidden, ffn, 5, dtype)
    x = _global((tokens, 2, hidden), dtype, 6).float().requires_grad_()
    rows = slice(me * tokens // npes, (me + 1) * tokens // npes)
    x_shard = x.detach()[rows].to(dtype).requires_grad_()
    y = par(x_shard)
    want = ref(x)
    assert y.shape == (tokens // npes, 2, hidden) and y.dtype == dtype
    _close(y, want[rows], dtype, "block output")
    y.float().pow(2).sum().backward()
    # The loss of the whole batch is the sum of every PE's: the reference takes all of it.
    want.pow(2).sum().backward()
    rnn.allreduce_sequence_parallel_grads(par)
    bf = dtype
    _close(x_shard.grad, x.grad[rows], bf, "input gradient")
    part = slice(me * ffn // npes, (me + 1) * ffn // npes)
    _close(par.up.weight.grad, ref.up.weight.grad[part], bf, "up weight gradient")
    _close(par.up.bias.grad, ref.up.bias.grad[part], bf, "up bias gradient")
    _close(par.down.weight.grad, ref.down.weight.grad[:, part], bf, "down weight gradient")
    _close(par.down.bias.grad, ref.down.bias.grad, bf, "down bias gradient (summed over PEs)")
    _close(par.norm.weight.grad, ref.norm.weight.grad, bf, "LayerNorm gradient (summed over PEs)")


def test_all_reduce_gradient_is_the_all_reduce_of_the_gradient(me, npes):
    x = _global((6,), torch.float32, 20 + me).requires_grad_()
    y = ops.all_reduce(x, op="avg")
    (y * (me + 1)).sum().backward()
    # d/dx_me of sum_p (p + 1) * avg(x) = avg over p of (p + 1)
    want = sum(p + 1 for p in range(npes)) / npes
    assert torch.allclose(x.grad, torch.full((6,), want))
    z = ops.all_reduce(x.detach().clone().requires_grad_(), op="max")
    with pytest.raises(rshmem.UnsupportedError, match="no gradient"):
        z.sum().backward()


def test_eager_calls_needing_a_gradient_skip_the_dispatcher_with_the_custom_ops_gradients(me, npes):
    """An eager call whose tensors need a gradient runs the op in a `torch.autograd.Function`
    (`_library.AllGatherMatmul`, ...) instead of the custom op's dispatcher and autograd layer;
    its outputs and gradients are the custom op's, and the custom op stays the path wherever
    something would want to see it (torch.func transforms, tensor subclasses)."""
    from rshmem.ops import _library

    path = _library._path
    plain, w = torch.ones(2, 3), torch.nn.Parameter(torch.ones(3, 4))
    assert path(plain, w.detach()) == _library.DIRECT and path(plain, w) == _library.AUTOGRAD
    with torch.no_grad():
        assert path(plain, w) == _library.DIRECT

    class Sub(torch.Tensor):
        pass

    assert path(plain.as_subclass(Sub), w) == _library.DISPATCH
    seen = []
    torch.func.grad(lambda x: (seen.append(path(x)) or x).sum())(torch.ones(3))
    assert seen == [_library.DISPATCH]

    K, N, m = 8, 6, 3
    a = _global((npes * m, K), torch.float32, 30)[me * m:(me + 1) * m].contiguous()
    b = _global((K, N), torch.float32, 31)
    a2 = _global((npes * 2, K), torch.float32, 32 + me)
    x = _global((5,), torch.float32, 40 + me)
    grads = []
    for eager in (True, False):
        ai, a2i, bi, xi = (t.clone().requires_grad_() for t in (a, a2, b, x))
        if eager:
            c, r, y = ops.all_gather_matmul(ai, bi), ops.matmul_reduce_scatter(a2i, bi), ops.all_reduce(xi)
        else:
            c = torch.ops.rshmem.all_gather_matmul(ai, bi, 0, True)[0]
            r = torch.ops.rshmem.matmul_reduce_scatter(a2i, bi, 0)
            y = torch.ops.rshmem.all_reduce(xi, "sum", 0)
        names = [type(t.grad_fn).__name__ for t in (c, r, y)]
        assert all(("AllGatherMatmul" in n or "MatmulReduceScatter" in n or "AllReduce" in n) == eager
                   for n in names), names
        (c.square().sum() + r.square().sum() + (y * (me + 1)).sum()).backward()
        grads.append((c.detach(), r.detach(), y.detach(), ai.grad, a2i.grad, bi.grad, xi.grad))
    for got, want in zip(*grads):
        assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_torch_compile_of_a_module_using_the_ops(me, npes, dtype):
    _, par = _twins(8, 16, 7, dtype)
    compiled = torch.compile(par)
    x = _global((2 * npes, 8), dtype, 8)
    shard = x[me * 2:(me + 1) * 2].clone().requires_grad_()
    y = compiled(shard)
    _close(y, par(shard), dtype, "compiled output")
    y.float().sum().backward()
    assert shard.grad is not None and par.up.weight.grad is not None


# ---------------------------------------------------------------------------------- misuse


def test_bad_dtypes_raise():
    a = torch.ones((2, 4), dtype=torch.bfloat16)
    with pytest.raises(rshmem.DTypeError, match="a_shard is float64; this op takes float16, bfloat16, float32"):
        ops.all_gather_matmul(a.double(), torch.ones((4, 2), dtype=torch.float64))
    with pytest.raises(rshmem.DTypeError, match="a is int32; this op takes float16, bfloat16, float32$"):
        ops.matmul_reduce_scatter(torch.ones((2 * rshmem.n_pes(), 4), dtype=torch.int32),
                                  torch.ones((4, 2), dtype=torch.int32))
    with pytest.raises(rshmem.DTypeError, match="a is torch.bfloat16 but b is torch.float16"):
        ops.all_gather_matmul(a, torch.ones((4, 2), dtype=torch.float16))
    with pytest.raises(rshmem.DTypeError, match="x is int32"):
        ops.all_reduce(torch.ones(3, dtype=torch.int32))
    with pytest.raises(rshmem.InvalidArgumentError, match="must be a torch.Tensor"):
        ops.all_reduce([1.0, 2.0])


def test_bad_layouts_and_shapes_raise(npes):
    a = torch.ones((2 * npes, 4), dtype=torch.float16)
    b = torch.ones((4, 6), dtype=torch.float16)
    with pytest.raises(rshmem.InvalidArgumentError, match="a_shard must be contiguous"):
        ops.all_gather_matmul(torch.ones((4, 2 * npes), dtype=torch.float16).t(), b)
    with pytest.raises(rshmem.InvalidArgumentError, match="b must be row-major or column-major"):
        ops.all_gather_matmul(a, torch.ones((4, 12), dtype=torch.float16)[:, ::2])
    with pytest.raises(rshmem.InvalidArgumentError, match="b must have 4 rows"):
        ops.matmul_reduce_scatter(a, torch.ones((5, 6), dtype=torch.float16))
    with pytest.raises(rshmem.InvalidArgumentError, match="must be a matrix"):
        ops.all_gather_matmul(a.view(-1), b)
    with pytest.raises(rshmem.InvalidArgumentError, match="x must be contiguous"):
        ops.all_reduce(torch.ones((4, 4))[:, 1])
    with pytest.raises(rshmem.InvalidArgumentError, match="op='prod'"):
        ops.all_reduce(torch.ones(3), op="prod")


@pytest.mark.multi
def test_rows_not_divisible_by_the_pe_count_raise(npes):
    with pytest.raises(rshmem.InvalidArgumentError, match=f"must be a multiple of {npes}"):
        ops.matmul_reduce_scatter(torch.ones((npes + 1, 4), dtype=torch.float16), torch.ones((4, 2), dtype=torch.float16))


@pytest.mark.multi
def test_mismatched_shapes_between_pes_raise_on_every_pe(me):
    # PE 1 passes one more column than PE 0; the first call of the key finds it on both.
    b = torch.ones((4, 3 + (me == 1)), dtype=torch.bfloat16)
    with pytest.raises(rshmem.MismatchError, match="other shapes or dtype than this PE"):
        ops.all_gather_matmul(torch.ones((2, 4), dtype=torch.bfloat16), b)
    x = torch.ones(7 + me)
    with pytest.raises(rshmem.MismatchError, match="every PE must pass the same shapes"):
        ops.all_reduce(x)
    # and the ops still work afterwards
    assert torch.equal(ops.all_reduce(torch.ones(5)), torch.full((5,), float(rshmem.n_pes())))


def test_group_forms_that_name_every_pe_are_accepted(npes):
    import torch.distributed as dist

    x = torch.ones(4)
    want = torch.full((4,), float(npes))
    assert torch.equal(ops.all_reduce(x, group=rshmem.Team.WORLD), want)
    if dist.is_initialized():
        assert torch.equal(ops.all_reduce(x, group=dist.group.WORLD), want)


def test_calls_before_init_raise_and_ops_work_after_reinit():
    from conftest import start

    rshmem.finalize()
    try:
        with pytest.raises(rshmem.NotInitializedError, match="call rshmem.init"):
            ops.all_reduce(torch.ones(3))
    finally:
        start()
    assert torch.equal(ops.all_reduce(torch.ones(3)), torch.full((3,), float(rshmem.n_pes())))


@pytest.mark.parametrize("field,bad", [("allreduce_form", "three_shot"), ("launcher", "cupy")])
def test_config_rejects_unknown_choices(field, bad):
    old = getattr(ops.config, field)
    setattr(ops.config, field, bad)
    try:
        with pytest.raises(rshmem.ConfigError, match=f"{field}='{bad}'"):
            ops.config.check()
    finally:
        setattr(ops.config, field, old)


def test_prepare_does_the_first_call_work_of_each_op(me, npes):
    # Shapes no other test uses, so that prepare makes the first call of each.
    a = torch.empty((3, 40), dtype=torch.bfloat16)
    b = torch.empty((40, 11), dtype=torch.bfloat16)
    ops.prepare(ops.all_gather_matmul, a, b, return_a=True)
    ops.prepare("matmul_reduce_scatter", torch.empty((2 * npes, 40), dtype=torch.bfloat16), b)
    ops.prepare(ops.all_reduce, torch.empty(97), op="max")
    from rshmem.ops import _checks

    agreed = {k[1] for k in _checks._agreed if 40 in k or 97 in k}
    assert agreed == {"all_gather_matmul", "matmul_reduce_scatter", "all_reduce"}
    A = _global((3 * npes, 40), torch.bfloat16, 30)
    B = _global((40, 11), torch.bfloat16, 31)
    _close(ops.all_gather_matmul(A[3 * me:3 * me + 3].contiguous(), B), A.float() @ B.float(), torch.bfloat16, "C")


def test_prepare_and_register_group_refuse_capture(monkeypatch):
    from rshmem.ops import _checks

    monkeypatch.setattr(_checks, "capturing", lambda: True)
    with pytest.raises(rshmem.RshmemError, match="during CUDA graph capture"):
        ops.prepare(ops.all_reduce, torch.empty(5))
    with pytest.raises(rshmem.RshmemError, match="during CUDA graph capture"):
        ops.register_group(None)


def test_prepare_misuse_raises(me, npes):
    with pytest.raises(rshmem.InvalidArgumentError, match="op='all_to_all'; pass one of rshmem.ops.all_gather_matmul"):
        ops.prepare("all_to_all", torch.ones(3))
    with pytest.raises(rshmem.InvalidArgumentError, match="do not fit rshmem.ops.all_reduce"):
        ops.prepare(ops.all_reduce, torch.ones(3), torch.ones(3))
    with pytest.raises(rshmem.DTypeError, match="x is int32"):
        ops.prepare(ops.all_reduce, torch.ones(3, dtype=torch.int32))
    if npes > 1:
        with pytest.raises(rshmem.MismatchError, match="every PE must pass the same shapes"):
            ops.prepare(ops.all_reduce, torch.empty(13 + me))


def test_large_all_reduces_go_to_nccl_only_over_nccl_groups(monkeypatch):
    """The decision alone (NCCL needs GPUs; the GPU test is test_ops_gpu's): from the threshold
    up, on the cuda backend, over a group whose torch.distributed backend has NCCL."""
    import torch.distributed as dist

    from rshmem.ops import _allreduce, _group

    nccl_group = object()
    cuda = _group.TeamInfo(0, 2, 0, (0, 1), "cuda", 0)
    big = ops.config.allreduce_nccl_min_bytes
    assert big == 8 << 20
    monkeypatch.setattr(_group, "process_group", lambda team: nccl_group)
    for backend, want in [("nccl", nccl_group), ("cpu:gloo,cuda:nccl", nccl_group), ("gloo", None)]:
        monkeypatch.setattr(dist, "get_backend", lambda g, backend=backend: backend)
        assert _allreduce.nccl_group(cuda, big) is want, backend
    assert _allreduce.nccl_group(cuda, big - 1) is None
    assert _allreduce.nccl_group(_group.TeamInfo(0, 2, 0, (0, 1), "host", -1), big) is None
    assert _allreduce.nccl_group(_group.TeamInfo(0, 1, 0, (0,), "cuda", 0), big) is None
    monkeypatch.setattr(ops.config, "allreduce_nccl_min_bytes", 0)
    assert _allreduce.nccl_group(cuda, 1 << 40) is None
    monkeypatch.setattr(_group, "process_group", lambda team: None)  # an rshmem team: no torch group
    monkeypatch.setattr(ops.config, "allreduce_nccl_min_bytes", 1)
    assert _allreduce.nccl_group(cuda, big) is None


def test_the_torch_group_of_a_team_is_the_one_the_ops_were_given(npes):
    import torch.distributed as dist

    from rshmem.ops import _group

    if not dist.is_initialized():
        assert _group.process_group(0) is None
        return
    assert _group.process_group(0) is dist.group.WORLD
    same = dist.new_group(list(range(npes)))
    ops.all_reduce(torch.ones(2), group=same)
    assert _group.process_group(0) is same


@pytest.mark.parametrize("b_t", [False, True], ids=["b", "w.t()"])
def test_fp8_all_gather_matmul_gives_a_bf16_c(me, npes, b_t):
    fp8 = torch.float8_e4m3fn
    m, K, N = 4, 32, 16
    A = _global((npes * m, K), torch.float32, 40).to(fp8)
    B = (_global((N, K), torch.float32, 41).to(fp8).t() if b_t else _global((K, N), torch.float32, 41).to(fp8))
    c, full = ops.all_gather_matmul(A[me * m:(me + 1) * m].contiguous(), B, return_a=True)
    assert c.dtype == torch.bfloat16 and c.shape == (npes * m, N)
    _close(c, A.float() @ B.float(), torch.bfloat16, "fp8 C")
    assert full.dtype == fp8 and torch.equal(full.view(torch.uint8), A.view(torch.uint8))
    fake = torch.ops.rshmem.all_gather_matmul(torch.empty((m, K), dtype=fp8, device="meta"),
                                              torch.empty((K, N), dtype=fp8, device="meta"), 0, False)[0]
    assert fake.dtype == torch.bfloat16


def test_fp8_misuse_raises():
    fp8 = torch.float8_e4m3fn
    a = torch.zeros((2, 16), dtype=fp8)
    with pytest.raises(rshmem.DTypeError, match="takes float16, bfloat16, float32$"):
        ops.matmul_reduce_scatter(torch.zeros((2 * rshmem.n_pes(), 16), dtype=fp8), torch.zeros((16, 8), dtype=fp8))
    with pytest.raises(rshmem.DTypeError, match="a is torch.float8_e4m3fn but b is torch.bfloat16"):
        ops.all_gather_matmul(a, torch.zeros((16, 8), dtype=torch.bfloat16))
    b = torch.zeros((16, 8), dtype=fp8, requires_grad=True)
    c = ops.all_gather_matmul(a, b)
    with pytest.raises(rshmem.UnsupportedError, match="fp8 .e4m3. inputs have no gradient"):
        c.float().sum().backward()


def test_a_kernel_not_compiled_raises_during_capture_instead_of_compiling(monkeypatch):
    """What a captured call meets when its kernel specialization is new (the GPU test of the same
    is test_ops_gpu's): the message names rshmem.ops.prepare, and nothing is compiled."""
    from rshmem.ops import _checks, _kernels_ar, _launch

    kernel = _launch.Kernel(_kernels_ar.one_shot_kernel, "all_reduce")
    x = torch.zeros(64)
    flags = torch.zeros(4, dtype=torch.int64)
    args = (x, x, x, flags, flags, torch.zeros(2, dtype=torch.int32), 0, 2, 64, 64, 64)
    monkeypatch.setattr(_checks, "capturing", lambda: True)
    for call in (lambda: kernel((1,), args, (4, 0, 2048), num_warps=8),
                 lambda: kernel((1,), args, (4, 0, 2048), prepare=True, num_warps=8)):
        with pytest.raises(rshmem.RshmemError, match=r"call rshmem.ops.prepare\(rshmem.ops.all_reduce, \*args"):
            call()
    assert not kernel._compiled


def test_packed_launch_words_are_what_tritons_launcher_passes():
    """The packed launch (`_launch._word`) puts each parameter in the low bytes of a word as
    Triton's C launcher passes it: integers wrapped to their width, floats as their bits (bf16
    the top half of the float32), a null pointer as 0; a type it cannot pack is a KeyError, so
    the kernel keeps Triton's launcher."""
    import struct

    from rshmem.ops._launch import _word

    assert _word("*bf16", 0x7F0000001000) == 0x7F0000001000 and _word("*i32", None) == 0
    assert _word("i32", -1) == 0xFFFF_FFFF and _word("i32", 7) == 7 and _word("i64", -2) == (1 << 64) - 2
    assert _word("i1", True) == 1 and _word("u8", 255) == 255 and _word("i16", -1) == 0xFFFF
    assert _word("fp32", 1.5) == struct.unpack("<I", struct.pack("<f", 1.5))[0]
    assert _word("fp64", -0.25) == struct.unpack("<Q", struct.pack("<d", -0.25))[0]
    assert _word("fp16", 1.0) == 0x3C00 and _word("bf16", 1.0) == 0x3F80
    with pytest.raises(KeyError):
        _word("nvTmaDesc", object())
    with pytest.raises(rshmem.RshmemError):
        # On the host backend (or before init) there is no kernel to pack: a clear refusal.
        rshmem._native.PackedLaunch(0, (1, 1, 1), 32, 0, [0, 0, 0], [])


def test_descriptor_views_are_checked_before_the_driver_is_asked():
    """`_native.tensor_map_bytes` (the encoder the packed launch uses for descriptors that change
    with the call) refuses a malformed view with a clear error, here without a driver too; with
    no driver that can encode, it says so."""
    from rshmem._native import tensor_map_bytes

    bf16 = 10  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    with pytest.raises(rshmem.InvalidArgumentError, match="innermost stride is 1, not 64"):
        tensor_map_bytes(0x1000, (bf16, 2, [64, 256], [1, 64], [128, 64], 3, False))
    with pytest.raises(rshmem.InvalidArgumentError, match="1 to 5 dimensions"):
        tensor_map_bytes(0x1000, (bf16, 2, [64, 256], [256, 1], [128], 3, False))
    with pytest.raises(rshmem.InvalidArgumentError, match="1 to 5 dimensions"):
        tensor_map_bytes(0x1000, (bf16, 2, [1] * 6, [1] * 6, [1] * 6, 3, False))
    try:
        tensor_map_bytes(0x1000, (bf16, 2, [64, 256], [256, 1], [128, 64], 3, False))
    except rshmem.UnsupportedError as e:
        assert "cuTensorMapEncodeTiled" in str(e)


# ------------------------------------------------------------------ the cached steady state


def _message(call) -> tuple:
    try:
        call()
    except rshmem.RshmemError as e:
        return type(e), str(e)
    raise AssertionError("the call did not raise")


def test_cached_calls_refuse_a_changed_shape_dtype_layout_or_group_as_a_first_call_does(npes):
    """After a call has made the plan of its key, calls that differ from it in shape, dtype,
    layout, device or group get the full checks, with the same errors as before any call."""
    m, K, N = 3, 24, 8
    a = torch.ones((m, K), dtype=torch.bfloat16)
    b = torch.ones((K, N), dtype=torch.bfloat16)
    bad = {
        "dtype": lambda: ops.all_gather_matmul(a, b.half()),
        "dtype of both": lambda: ops.all_gather_matmul(a.double(), b.double()),
        "shape": lambda: ops.all_gather_matmul(a, torch.ones((K + 1, N), dtype=torch.bfloat16)),
        "layout of a": lambda: ops.all_gather_matmul(torch.ones((K, m), dtype=torch.bfloat16).t(), b),
        "layout of b": lambda: ops.all_gather_matmul(a, torch.ones((K, 2 * N), dtype=torch.bfloat16)[:, ::2]),
        "matrix": lambda: ops.all_gather_matmul(a.view(-1), b),
        "group": lambda: ops.all_gather_matmul(a, b, group=True),
        "rs dtype": lambda: ops.matmul_reduce_scatter(torch.ones((npes * m, K), dtype=torch.int32), b),
        "rs layout": lambda: ops.matmul_reduce_scatter(torch.ones((K, npes * m), dtype=torch.bfloat16).t(), b),
        "rs rows": lambda: ops.matmul_reduce_scatter(torch.ones((npes * m, K + 2), dtype=torch.bfloat16), b),
        "ar dtype": lambda: ops.all_reduce(torch.ones(5, dtype=torch.int64)),
        "ar layout": lambda: ops.all_reduce(torch.ones((5, 4))[:, 1]),
        "ar op": lambda: ops.all_reduce(torch.ones(5), op="prod"),
        "ar group": lambda: ops.all_reduce(torch.ones(5), group="tp"),
    }
    first = {name: _message(call) for name, call in bad.items()}
    for _ in range(3):  # the first call makes the plans, the others use them
        ops.all_gather_matmul(a, b)
        ops.all_gather_matmul(a, b.t().contiguous().t())
        ops.matmul_reduce_scatter(torch.ones((npes * m, K), dtype=torch.bfloat16), b)
        ops.all_reduce(torch.ones(5))
    for name, call in bad.items():
        assert _message(call) == first[name], name


def test_a_cached_call_does_no_first_call_work(monkeypatch, me, npes):
    """Once its key has a plan, a call neither checks nor agrees again (a changed key still
    does), and a change of rshmem.ops.config drops every plan."""
    from rshmem.ops import _checks, _library

    a = _global((2, 12), torch.float32, 30 + me)
    b = _global((12, 5), torch.float32, 31)
    want = ops.all_gather_matmul(a, b)

    def refuse(*args, **kwargs):
        raise AssertionError("a cached call reached the first-call checks")

    monkeypatch.setattr(_checks, "agree", refuse)
    monkeypatch.setattr(_checks, "tensor", refuse)
    assert torch.equal(ops.all_gather_matmul(a, b), want)
    with pytest.raises(AssertionError, match="first-call checks"):
        ops.all_gather_matmul(a, b[:, :4])
    monkeypatch.undo()
    assert _library._plans
    old = ops.config.gemm_small_rows
    ops.config.gemm_small_rows = old + 1
    try:
        assert not _library._plans
    finally:
        ops.config.gemm_small_rows = old


# ------------------------------------------------- Megatron's tensor-parallel form (replicated input)


class _Pair(torch.nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.up = torch.nn.Linear(hidden, ffn)
        self.down = torch.nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


class _TensorParallelPair(torch.nn.Module):
    def __init__(self, ref: _Pair, gathered: bool):
        super().__init__()
        # gathered: the column layer gathers its output and the row layer takes its slice back
        # (Megatron's gather_output / input_is_parallel=False), the same values by another road.
        self.up = rnn.ColumnParallelLinear.from_linear(ref.up, sequence_parallel=False, gather_output=gathered)
        self.down = rnn.RowParallelLinear.from_linear(ref.down, sequence_parallel=False,
                                                      input_is_parallel=not gathered)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


@pytest.mark.parametrize("gathered", [False, True], ids=["parallel", "gathered"])
def test_megatron_layers_give_the_unparallel_gradients_for_a_replicated_loss(me, npes, gathered):
    import copy

    hidden, ffn = 12, 8 * npes
    torch.manual_seed(40)  # the same model on every PE
    ref = _Pair(hidden, ffn)
    par = _TensorParallelPair(copy.deepcopy(ref), gathered)
    part = slice(me * ffn // npes, (me + 1) * ffn // npes)
    x = _global((5, 3, hidden), torch.float32, 41).requires_grad_()  # every PE holds every token
    xp = x.detach().clone().requires_grad_()
    for step in range(2):  # a training step, then the next forward from the updated weights
        want = ref(x)
        y = par(xp)
        assert y.shape == want.shape
        _close(y, want, torch.float32, f"step {step} output")
        want.pow(2).mean().backward()
        y.pow(2).mean().backward()  # the same loss on every PE
        _close(xp.grad, x.grad, torch.float32, "input gradient")
        _close(par.up.weight.grad, ref.up.weight.grad[part], torch.float32, "column weight gradient")
        _close(par.up.bias.grad, ref.up.bias.grad[part], torch.float32, "column bias gradient")
        _close(par.down.weight.grad, ref.down.weight.grad[:, part], torch.float32, "row weight gradient")
        _close(par.down.bias.grad, ref.down.bias.grad, torch.float32, "row bias gradient")
        with torch.no_grad():
            for model in (ref, par):
                for p in model.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
            x.grad = xp.grad = None
    assert not getattr(par.down.bias, "sequence_parallel", False)


def test_megatron_region_functions_and_options(me, npes):
    x = _global((2, 4 * npes), torch.float32, 50).requires_grad_()
    mine = rnn.scatter_to_region(x)
    assert torch.equal(mine, x.detach()[:, me * 4:(me + 1) * 4])
    assert torch.equal(rnn.gather_from_region(mine), x.detach())
    y = rnn.reduce_from_region(x * (me + 1))
    assert torch.allclose(y, x.detach() * sum(range(1, npes + 1)))
    y.sum().backward()  # identity backward: d/dx of (me + 1) * x
    assert torch.allclose(x.grad, torch.full_like(x, float(me + 1)))
    z = x.detach().clone().requires_grad_()
    rnn.copy_to_region(z).sum().backward()  # all-reduce backward
    assert torch.allclose(z.grad, torch.full_like(z, float(npes)))
    with pytest.raises(rshmem.InvalidArgumentError, match="gather_output=True needs sequence_parallel=False"):
        rnn.ColumnParallelLinear(4, 2 * npes, gather_output=True)
    with pytest.raises(rshmem.InvalidArgumentError, match="input_is_parallel=False needs sequence_parallel=False"):
        rnn.RowParallelLinear(2 * npes, 4, input_is_parallel=False)
    if npes > 1:
        with pytest.raises(rshmem.InvalidArgumentError, match="cannot be split evenly"):
            rnn.scatter_to_region(torch.ones(2, npes + 1))
