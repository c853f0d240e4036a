"""Triton-distributed's ``dl.wait`` on several flags, ``dl.notify`` from a multi-warp program and
``dl.consume_token`` on TMA descriptors, checked by value on a GPU.

Each PE runs its own kernels; the notify test also signals the next PE. One PE, or 2 PEs
sharing one GPU (RSHMEM_ALLOW_SHARED_GPU=1), or 2 GPUs:
    RSHMEM_BACKEND=cuda python -m pytest -m gpu -q tests/device/test_device_td_gpu.py
    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m pytest -m gpu -q tests/device/test_device_td_gpu.py
A kernel whose programs wait for each other is launched cooperatively, so they are resident at
once; no test waits for another PE's kernel.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
triton = pytest.importorskip("triton", reason="triton is not installed")

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import rshmem  # noqa: E402
import rshmem.torch as rtorch  # noqa: E402
import rshmem.triton as rt  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

import td_style_kernels as K  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    rt.install_load_hook()
    yield
    torch.cuda.synchronize()
    rshmem.barrier_all()


def test_wait_on_several_flags_sees_every_segment():
    # 40 flags: lanes take flags i and i + 32. The producer publishes one segment every 20 us.
    n_flags, seg = 40, 256
    flags = torch.zeros(n_flags, dtype=torch.int32, device="cuda")
    data = torch.empty(n_flags * seg, dtype=torch.int32, device="cuda")
    out = torch.empty_like(data)
    expected_base = torch.arange(n_flags, dtype=torch.int32, device="cuda").repeat_interleave(seg)
    for epoch in (1, 2, 3):  # the flags keep the last epoch: a wait for the next one must wait
        data.fill_(-1)
        out.fill_(-2)
        K.multi_flag_kernel[(2,)](flags, data, out, n_flags, epoch, SEG=seg, DELAY_NS=20_000, num_warps=4,
                                  launch_cooperative_grid=True)
        torch.cuda.synchronize()
        assert torch.equal(out, expected_base + epoch * 1000), f"epoch {epoch}"
        assert torch.equal(flags, torch.full_like(flags, epoch))


@pytest.mark.parametrize("comm_scope", ["gpu", "intra_node", "inter_node"])
def test_notify_add_from_a_multi_warp_program_adds_once_per_program(comm_scope):
    # 12 programs of 4 warps each call dl.notify(add, 1) in every thread: thread 0 of each acts.
    programs = 12
    if comm_scope == "gpu":
        sig = torch.zeros(1, dtype=torch.int64, device="cuda")
        K.notify_kernel[(programs,)](sig, 0, 1, SIG_OP="add", COMM_SCOPE="gpu", num_warps=4)
        torch.cuda.synchronize()
        assert int(sig.item()) == programs
        K.notify_kernel[(programs,)](sig, 0, 7, SIG_OP="set", COMM_SCOPE="gpu", num_warps=4)
        torch.cuda.synchronize()
        assert int(sig.item()) == 7
        return
    me, npes = rshmem.my_pe(), rshmem.n_pes()
    sig = rtorch.create_symmetric_tensor((1,), torch.int64)
    try:
        sig.zero_()
        torch.cuda.synchronize()
        rshmem.barrier_all()
        K.notify_kernel[(programs,)](sig, (me + 1) % npes, 1, SIG_OP="add", COMM_SCOPE=comm_scope, num_warps=4)
        torch.cuda.synchronize()
        rshmem.barrier_all()
        assert int(sig.item()) == programs  # from the previous PE (or this one, alone)
        rshmem.barrier_all()
        K.notify_kernel[(programs,)](sig, (me + 1) % npes, 7, SIG_OP="set", COMM_SCOPE=comm_scope, num_warps=4)
        torch.cuda.synchronize()
        rshmem.barrier_all()
        assert int(sig.item()) == 7
    finally:
        rshmem.barrier_all()
        rtorch.free_tensor(sig)


GEMM = {"NUM_CONSUMERS": 4, "BM": 128, "BN": 64, "BK": 64, "DELAY_NS": 20_000}


def _gemm_inputs(M=1024, N=128, K_=256, seg_m=64):
    gen = torch.Generator(device="cuda").manual_seed(13)
    # Small integers: every product and sum is exact in fp16 inputs and an fp32 accumulator.
    a_src = torch.randint(-2, 3, (M, K_), generator=gen, device="cuda").to(torch.float16)
    b = torch.randint(-2, 3, (N, K_), generator=gen, device="cuda").to(torch.float16)
    a = torch.full((M, K_), float("nan"), dtype=torch.float16, device="cuda")  # stale until produced
    ready = torch.zeros(M // seg_m, dtype=torch.int32, device="cuda")
    c = torch.zeros(M, N, dtype=torch.float32, device="cuda")
    return a_src, a, b, ready, c, seg_m


@pytest.mark.parametrize("wait_at_tile_start", [True, False], ids=["wait-at-tile-start", "wait-every-step"])
@pytest.mark.parametrize("form", ["host", "device"])
def test_consume_token_on_a_descriptor_orders_tma_loads_after_the_wait(form, wait_at_tile_start):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA descriptors need a GPU of compute capability 9.0 or newer")
    a_src, a, b, ready, c, seg_m = _gemm_inputs()
    M, K_ = a.shape
    N = b.shape[0]
    grid = (GEMM["NUM_CONSUMERS"] + 1,)
    common = dict(GEMM, CONSUME=True, WAIT_AT_TILE_START=wait_at_tile_start, num_warps=4, num_stages=3,
                  launch_cooperative_grid=True)
    if form == "host":
        a_desc = TensorDescriptor(a, a.shape, a.stride(), [GEMM["BM"], GEMM["BK"]])
        b_desc = TensorDescriptor(b, b.shape, b.stride(), [GEMM["BN"], GEMM["BK"]])
        K.ag_gemm_host_desc_kernel[grid](a_desc, b_desc, c, a, a_src, ready, M, N, K_, seg_m, 1, **common)
    else:
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        K.ag_gemm_device_desc_kernel[grid](a, b, c, a_src, ready, M, N, K_, seg_m, 1, **common)
    torch.cuda.synchronize()
    assert torch.equal(a, a_src), "the producer did not publish A"
    expected = a_src.float() @ b.float().T
    bad = (c != expected).any(dim=1).nonzero().flatten().tolist()
    assert not bad, f"rows read before their segment was ready (NaN or stale): {bad[:8]}..."


def test_simt_region_bincount_matches_torch():
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randint(0, 70, (10_000,), generator=gen, dtype=torch.int32, device="cuda")
    out = torch.zeros(64, dtype=torch.int32, device="cuda")
    K.bincount_kernel[(4,)](x, out, x.numel(), 64, num_warps=4)  # values >= 64 are skipped
    torch.cuda.synchronize()
    assert torch.equal(out, torch.bincount(x[x < 64], minlength=64).to(torch.int32))


@pytest.mark.parametrize("dtype,vec", [(torch.float16, 8), (torch.float32, 4), (torch.float32, 2)])
def test_vectors_shuffles_and_ballot_per_thread(dtype, vec):
    n = 4 * 128 * vec  # 4 programs of 128 threads
    src = (torch.arange(n, device="cuda") % 1000).to(dtype)
    dst = torch.zeros_like(src)
    K.vector_copy_kernel[(4,)](src, dst, n, VEC=vec, num_warps=4)
    torch.cuda.synchronize()
    lane = (torch.arange(n, device="cuda") // vec) % 32
    assert torch.equal(dst, src + (lane + 1).to(dtype))


# ---------------------------------------------------------------- host helpers on a GPU
def test_warp_barriers_called_from_lane_0_alone_meet_every_pe():
    # As Triton-distributed's test_nvshmem_api calls them (`if thread_idx / 32 == 0:`): lane 0
    # of warp 0 alone. Each PE runs the kernel 3 times; a barrier that waited for 32 lanes hangs,
    # one that did not meet the other PE lets the PEs' counts drift apart.
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    for _ in range(3):
        K.lone_lane_warp_barrier_kernel[(1,)](out, int(rshmem.Team.WORLD), num_warps=4)
    torch.cuda.synchronize()
    assert int(out.item()) == 12
    rshmem.barrier_all()


def test_host_helpers_on_a_gpu():
    from rshmem.compat import triton_dist as td

    assert td.has_tma() == (torch.cuda.get_device_capability()[0] >= 9)
    assert td.get_device_max_shared_memory_size(torch.cuda.current_device()) >= 48 * 1024
    assert td.get_max_gpu_clock_rate_in_khz(torch.cuda.current_device()) > 100_000
    assert isinstance(td.has_fullmesh_nvlink(), bool) and isinstance(td.supports_p2p_native_atomic(), bool)
    out, ms = td.perf_func(lambda: torch.ones(4, device="cuda") * 2, iters=3, warmup_iters=1)
    assert torch.equal(out, torch.full((4,), 2.0, device="cuda")) and ms > 0
    a, b, c = next(td.generate_data([((8, 4), torch.float16, (1, 0)), ((3,), torch.int8, (2, 1)), None]))
    assert a.shape == (8, 4) and a.dtype == torch.float16 and a.abs().max() <= 1
    assert b.dtype == torch.int8 and int(b.min()) >= -1 and int(b.max()) <= 2 and c is None
    td.sleep_async(1)
    torch.cuda.synchronize()


def test_stream_flags_order_work_on_a_stream():
    from rshmem.compat import triton_dist as td

    for dtype in (torch.int32, torch.int64):
        flag = torch.zeros(1, dtype=dtype, device="cuda")
        x = torch.zeros(4, device="cuda")
        side = torch.cuda.Stream()
        # The add's kernel is loaded before the side stream blocks: under CUDA's lazy loading a
        # first launch synchronizes the context, which would wait for the blocked stream.
        with torch.cuda.stream(side):
            x.add_(0)
        side.synchronize()
        td.wait_eq(flag, 1, side)  # side waits for the flag ...
        with torch.cuda.stream(side):
            x.add_(1)
        td.set_signal(flag, 1)  # ... which the current stream raises
        side.synchronize()
        assert torch.equal(x, torch.ones(4, device="cuda")) and int(flag.item()) == 1
    with pytest.raises(rshmem.DTypeError, match="int32 or int64"):
        td.set_signal(torch.zeros(1, dtype=torch.float32, device="cuda"), 1)


def test_nvshmem_bindings_putmem_signal_on_stream():
    import rshmem.compat.nvshmem as nvshmem
    import rshmem.compat.nvshmem.bindings.nvshmem as pynvshmem

    me, npes = rshmem.my_pe(), rshmem.n_pes()
    data = rtorch.create_symmetric_tensor((256,), torch.float32)
    sig = rtorch.create_symmetric_tensor((1,), torch.int64)
    try:
        data.fill_(-1)
        sig.zero_()
        src = torch.arange(256, dtype=torch.float32, device="cuda") + 1000 * me
        torch.cuda.synchronize()
        rshmem.barrier_all()
        pynvshmem.putmem_signal_on_stream(data.data_ptr(), src.data_ptr(), 1024, sig.data_ptr(), 1,
                                          nvshmem.core.SignalOp.SIGNAL_SET, (me + 1) % npes, 0)
        torch.cuda.synchronize()
        rshmem.barrier_all()
        left = (me - 1) % npes
        assert int(sig.item()) == 1
        assert torch.equal(data, torch.arange(256, dtype=torch.float32, device="cuda") + 1000 * left)
    finally:
        rshmem.barrier_all()
        rtorch.free_tensor(sig)
        rtorch.free_tensor(data)
