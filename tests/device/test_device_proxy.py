"""Device-initiated operations towards a PE on another host, carried out by the proxy.

Two PEs in two virtual hosts share one GPU: each reaches the other only through UCX, so every
put, get, p, g, atomic, signal, quiet and barrier below goes from the kernel into this PE's proxy
ring and through the network transport (runtime/src/transport/proxy.rs). No kernel waits for
the other PE's kernel except in the last two tests, whose waits are bounded
(RSHMEM_DEBUG_WAIT_TIMEOUT_MS) and progress by time-slicing.

Run on one GPU (the libucx-cu12 wheel installed in the venv):
    RSHMEM_VIRTUAL_HOSTS=2 RSHMEM_ALLOW_SHARED_GPU=1 RSHMEM_DEBUG_WAIT_TIMEOUT_MS=20000 \\
    torchrun --nproc-per-node 2 -m pytest -m gpu -q tests/device/test_device_proxy.py
Skipped without a GPU, without 2 PEs, or when the other PE is reachable by load/store (no
virtual hosts). The kernels also compile for sm_90 without a GPU (test_proxy_kernels_compile).

History: on one H100 these tests once died of SIGSEGV in the first host barrier: the GPU heap was
registered with UCX as host memory and UCX's software atomics wrote it with the CPU. Buffers now
go to UCX with their memory type, and atomics and signals on a GPU heap are run by the target's
runtime (docs/network.md); test_host_api_on_gpu_heaps_across_hosts checks the host API first.
"""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
triton = pytest.importorskip("triton", reason="triton is not installed")
import triton.language as tl  # noqa: E402

import rshmem.triton as rt  # noqa: E402
from rshmem.triton import language as L  # noqa: E402
from rshmem.triton import libshmem_device as shm  # noqa: E402
from ptx_calls import foreign_calls  # noqa: E402 - tests/ptx_calls.py

WORLD = int(os.environ.get("WORLD_SIZE", "1"))


# ---------------------------------------------------------------- kernels
@rt.jit
def rma_to_far_kernel(src, recv, words, sig, old, nbytes, far):
    # One thread (thread-scope functions act once per calling thread, docs/device-api.md): every
    # operation kind towards `far`, then quiet (everything landed there).
    if L.tid(0) == 0:
        shm.putmem(recv, src, nbytes, far)
        shm.p(words + 1, 0x1234_5678 + shm.my_pe(), far)
        x = shm.atomic_fetch_add(words + 2, shm.my_pe() + 1, far)
        y = shm.atomic_compare_swap(words + 3, 0, shm.my_pe() + 10, far)
        shm.atomic_add(words + 4, 5, far)
        shm.signal_op(sig, 1, shm.SIGNAL_ADD, far)
        shm.quiet()
        tl.store(old, x)
        tl.store(old + 1, y)


@rt.jit
def get_from_far_kernel(recv, words, out, got, nbytes, far):
    shm.getmem(out, recv, nbytes, far)
    tl.store(got, shm.g(words + 1, far))
    tl.store(got + 1, shm.atomic_fetch(words + 2, far))


@rt.jit
def put_signal_block_kernel(src, recv, sig, nbytes, far, round):
    # The block's data goes as one descriptor; the far PE sees it once it sees the signal.
    shm.putmem_signal_block(recv, src, nbytes, sig, round, shm.SIGNAL_SET, far)
    if L.tid(0) == 0:
        shm.signal_wait_until(sig, shm.CMP_EQ, round)


@rt.jit
def barrier_kernel(words, far, rounds):
    # Device barriers across hosts, by one thread: each round adds to the far PE's counter, then
    # a barrier, so after round r the local counter holds r + 1.
    if L.tid(0) == 0:
        for r in range(rounds):
            shm.atomic_add(words + 5, 1, far)
            shm.barrier_all()
            tl.store(words + 6, shm.atomic_fetch(words + 5, shm.my_pe()))


SIGNATURES = {
    rma_to_far_kernel: {"src": "*i8", "recv": "*i8", "words": "*i64", "sig": "*u64", "old": "*i64", "nbytes": "i64",
                        "far": "i32"},
    get_from_far_kernel: {"recv": "*i8", "words": "*i64", "out": "*i8", "got": "*i64", "nbytes": "i64", "far": "i32"},
    put_signal_block_kernel: {"src": "*i8", "recv": "*i8", "sig": "*u64", "nbytes": "i64", "far": "i32",
                              "round": "u64"},
    barrier_kernel: {"words": "*i64", "far": "i32", "rounds": "i32"},
}


@pytest.mark.single
@pytest.mark.parametrize("fn", list(SIGNATURES), ids=lambda f: f.fn.__name__)
def test_proxy_kernels_compile(fn, monkeypatch):
    """Each kernel compiles for sm_90 with the library (mapped and proxy paths) inlined."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)
    src = ASTSource(fn=fn, signature=SIGNATURES[fn], constexprs={})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"extern_libs": (("libshmem_device", str(rt.bitcode_path())),)})
    assert k.asm["cubin"]
    assert not foreign_calls(k.asm["ptx"]), "a library call was not inlined"


# ---------------------------------------------------------------- on the GPU
gpu = pytest.mark.gpu


@pytest.fixture(scope="module")
def far():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if WORLD != 2:
        pytest.skip("needs 2 PEs: run under torchrun --nproc-per-node 2")
    import rshmem
    import rshmem.torch as rtorch

    torch.cuda.set_device(rtorch.device())
    if not rshmem.is_initialized():
        rshmem.init(backend="cuda")
    rt.install_load_hook()
    me = rshmem.my_pe()
    other = 1 - me
    probe = rtorch.create_symmetric_tensor((1,), torch.int64)
    if rshmem.ptr(probe.data_ptr(), other) is not None:
        pytest.skip("needs 2 PEs on different (virtual) hosts: the other PE is reachable by load/store; set RSHMEM_VIRTUAL_HOSTS=2")
    yield other
    rshmem.barrier_all()


def symmetric(shape, dtype, fill=0):
    import rshmem
    import rshmem.torch as rtorch

    t = rtorch.create_symmetric_tensor(shape, dtype)
    t.fill_(fill)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    return t


@gpu
def test_host_api_on_gpu_heaps_across_hosts(far):
    """The host API between GPU heaps on two hosts: RMA from and to GPU and CPU tensors, p/g,
    atomics and signals (run by the target's runtime), puts-with-signal small (one message) and
    large (put, flush, atomic), an fcollect and barriers."""
    import rshmem

    me = rshmem.my_pe()
    n = 1 << 20
    pattern = lambda pe: (torch.arange(n, device="cuda") * 5 + pe * 17).to(torch.uint8)  # noqa: E731
    buf = symmetric((n,), torch.uint8)
    mine = pattern(me)
    rshmem.putmem(buf, mine, far)
    rshmem.barrier_all()
    assert torch.equal(buf, pattern(far)), "a 1 MiB put from a GPU tensor"
    back = torch.zeros(n, dtype=torch.uint8, device="cuda")
    rshmem.getmem(back, buf, far)
    assert torch.equal(back, mine), "a get into a GPU tensor"
    host = torch.zeros(4096, dtype=torch.uint8)
    rshmem.getmem(host, buf[:4096], far)
    assert torch.equal(host, mine[:4096].cpu()), "a get into a CPU tensor"
    rshmem.putmem(buf[:4096], host, far)
    words = symmetric((8,), torch.int64)
    rshmem.p(words[0:1], 1000 + me, far)
    rshmem.quiet()
    assert rshmem.g(words[0:1], far) == 1000 + me
    for _ in range(3):
        rshmem.atomic_fetch_add(words[1:2], me + 1, far)
    assert rshmem.atomic_compare_swap(words[2:3], 0, 7 + me, far) == 0
    assert rshmem.atomic_compare_swap(words[2:3], 0, 99, far) == 7 + me
    rshmem.barrier_all()
    assert words[0].item() == 1000 + far and words[1].item() == 3 * (far + 1) and words[2].item() == 7 + far
    sig = symmetric((1,), torch.int64)
    for round, size in ((1, 4096), (2, n)):
        rshmem.putmem_signal(buf[:size], pattern(me + round)[:size], sig, 1, rshmem.SIGNAL_ADD, far)
        assert rshmem.signal_wait_until(sig, rshmem.CMP_GE, round) == round
        assert torch.equal(buf[:size], pattern(far + round)[:size]), f"put-with-signal of {size} bytes"
        rshmem.barrier_all()
    src = symmetric((4,), torch.int32, fill=me + 1)
    dst = symmetric((8,), torch.int32)
    rshmem.fcollect(dst, src)
    assert dst.tolist() == [1] * 4 + [2] * 4, "fcollect across hosts"
    rshmem.barrier_all()


@gpu
def test_every_kind_reaches_the_other_host_and_gets_come_back(far):
    import rshmem

    me = rshmem.my_pe()
    n = 1 << 16
    src = symmetric((n,), torch.uint8)
    src.copy_((torch.arange(n, device="cuda") * 7 + me * 31).to(torch.uint8))
    recv = symmetric((n,), torch.uint8)
    words = symmetric((8,), torch.int64)
    sig = symmetric((1,), torch.int64)
    old = torch.full((2,), -1, dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    rshmem.barrier_all()
    rma_to_far_kernel[(1,)](src, recv, words, sig, old, n, far, num_warps=1)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    assert old.tolist() == [0, 0], "the first fetch-add and compare-swap on the far PE's zeroed words"
    expect = (torch.arange(n, device="cuda") * 7 + far * 31).to(torch.uint8)
    assert torch.equal(recv, expect), "the data the far PE put"
    w = words.tolist()
    assert (w[1], w[2], w[3], w[4]) == (0x1234_5678 + far, far + 1, far + 10, 5)
    assert sig.item() == 1
    out = torch.zeros(n, dtype=torch.uint8, device="cuda")
    got = torch.zeros(2, dtype=torch.int64, device="cuda")
    get_from_far_kernel[(1,)](recv, words, out, got, n, far, num_warps=1)
    torch.cuda.synchronize()
    assert torch.equal(out, (torch.arange(n, device="cuda") * 7 + me * 31).to(torch.uint8)), "getmem of what I put"
    assert got.tolist() == [0x1234_5678 + me, me + 1]
    rshmem.barrier_all()


@gpu
@pytest.mark.parametrize("nbytes", [8, 4096, 1 << 20])
def test_put_signal_block_to_the_other_host(far, nbytes):
    import rshmem

    me = rshmem.my_pe()
    src = symmetric((nbytes,), torch.uint8)
    src.copy_((torch.arange(nbytes, device="cuda") + me * 3).to(torch.uint8))
    recv = symmetric((nbytes,), torch.uint8)
    sig = symmetric((1,), torch.int64)
    for round in (1, 2):
        put_signal_block_kernel[(1,)](src, recv, sig, nbytes, far, round, num_warps=4)
        torch.cuda.synchronize()
        assert torch.equal(recv, (torch.arange(nbytes, device="cuda") + far * 3).to(torch.uint8))
    rshmem.barrier_all()


@gpu
def test_device_barriers_across_hosts(far):
    import rshmem

    words = symmetric((8,), torch.int64)
    barrier_kernel[(1,)](words, far, 20, num_warps=1)
    torch.cuda.synchronize()
    assert words[6].item() == 20 and words[5].item() == 20
    rshmem.barrier_all()
