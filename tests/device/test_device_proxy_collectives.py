"""Device-initiated collectives with members on another host, through the proxy.

Two PEs in two virtual hosts share one GPU, so neither maps the other's heap: a broadcast,
fcollect or alltoall pushes to the other member with put descriptors (posted without waiting, and
completed by the collective's closing barrier), and a reduction or reduce-scatter fetches the
other member's staged chunk with get descriptors (triton-lib/src/collective_device.h). The
barriers inside them add to the far member's counter through the proxy too. Each collective is
called by a block, a warp and one thread; the reduction's size spans several workspace chunks.

Run on one GPU (the libucx-cu12 wheel installed in the venv):
    RSHMEM_VIRTUAL_HOSTS=2 RSHMEM_ALLOW_SHARED_GPU=1 RSHMEM_DEBUG_WAIT_TIMEOUT_MS=20000 \\
    torchrun --nproc-per-node 2 -m pytest -m gpu -q tests/device/test_device_proxy_collectives.py
The kernels wait for the other PE's kernel in barriers; on one shared GPU that progresses by
time-slicing, bounded by RSHMEM_DEBUG_WAIT_TIMEOUT_MS. Skipped without a GPU or without 2 PEs; the
`across_hosts` tests skip when the other PE is reachable by load/store, the `on_one_host` ones (the
same kernels on the mapped paths, run without RSHMEM_VIRTUAL_HOSTS) when it is not. The kernels
also compile for sm_90 without a GPU.
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
# Elements per PE of the broadcast, fcollect, alltoall and reduce-scatter blocks.
N = 3000
# Elements of the reduction: more than one chunk of the 128 KiB team workspace, which holds
# 128 KiB / 4 / (1 + 2) = 10922 fp32 elements per round with a far member.
NRED = 25000


# ---------------------------------------------------------------- kernels
@rt.jit
def collectives_block_kernel(src, a_src, b_dst, f_dst, a_dst, red_src, red_dst, rs_dst, n, nred, root):
    shm.broadcast_block(shm.TEAM_WORLD, b_dst, src, n, root)
    shm.fcollect_block(shm.TEAM_WORLD, f_dst, src, n)
    shm.alltoall_block(shm.TEAM_WORLD, a_dst, a_src, n)
    shm.sum_reduce_block(shm.TEAM_WORLD, red_dst, red_src, nred)
    shm.sum_reducescatter_block(shm.TEAM_WORLD, rs_dst, a_src, n)


@rt.jit
def collectives_warp_kernel(src, a_src, b_dst, f_dst, a_dst, red_src, red_dst, rs_dst, n, nred, root):
    shm.broadcast_warp(shm.TEAM_WORLD, b_dst, src, n, root)
    shm.fcollect_warp(shm.TEAM_WORLD, f_dst, src, n)
    shm.alltoall_warp(shm.TEAM_WORLD, a_dst, a_src, n)
    shm.max_reduce_warp(shm.TEAM_WORLD, red_dst, red_src, nred)
    shm.sum_reducescatter_warp(shm.TEAM_WORLD, rs_dst, a_src, n)


@rt.jit
def collectives_thread_kernel(src, a_src, b_dst, f_dst, a_dst, red_src, red_dst, rs_dst, n, nred, root):
    # Thread-scope functions act once per calling thread (docs/device-api.md): one thread.
    if L.tid(0) == 0:
        shm.broadcast(shm.TEAM_WORLD, b_dst, src, n, root)
        shm.fcollect(shm.TEAM_WORLD, f_dst, src, n)
        shm.alltoall(shm.TEAM_WORLD, a_dst, a_src, n)
        shm.sum_reduce(shm.TEAM_WORLD, red_dst, red_src, nred)
        shm.sum_reducescatter(shm.TEAM_WORLD, rs_dst, a_src, n)


@rt.jit
def reduce_in_place_kernel(buf, nred):
    # dest == source: the staging keeps every member's input until all have read it.
    shm.sum_reduce_block(shm.TEAM_WORLD, buf, buf, nred)
    if L.tid(0) == 0:
        shm.barrier_all()


KERNELS = {"block": collectives_block_kernel, "warp": collectives_warp_kernel, "thread": collectives_thread_kernel}
COLLECTIVE_SIG = {"src": "*fp32", "a_src": "*fp32", "b_dst": "*fp32", "f_dst": "*fp32", "a_dst": "*fp32",
                  "red_src": "*fp32", "red_dst": "*fp32", "rs_dst": "*fp32", "n": "i64", "nred": "i64", "root": "i32"}
SIGNATURES = {
    collectives_block_kernel: COLLECTIVE_SIG,
    collectives_warp_kernel: COLLECTIVE_SIG,
    collectives_thread_kernel: COLLECTIVE_SIG,
    reduce_in_place_kernel: {"buf": "*fp32", "nred": "i64"},
}


@pytest.mark.single
@pytest.mark.parametrize("fn", [collectives_block_kernel, collectives_thread_kernel], ids=lambda f: f.fn.__name__)
def test_proxy_collective_kernels_compile(fn, monkeypatch):
    """The block- and thread-scope kernels compile for sm_90 with the library (mapped,
    push-through-proxy and fetch-through-proxy paths) inlined. Two of the four, as each compile
    takes half a minute on the CI machine; the warp kernel calls the same rows at warp scope, and
    test_device_compile.py compiles every row of the library."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)
    src = ASTSource(fn=fn, signature=SIGNATURES[fn], constexprs={})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"extern_libs": (("libshmem_device", str(rt.bitcode_path())),)})
    assert k.asm["cubin"]
    ptx = k.asm["ptx"]
    assert not foreign_calls(ptx), "a library call was not inlined"
    # The proxy path is there: descriptors are published with a release store of `seq` (.u64,
    # proxy_device.h), which no mapped path emits.
    assert "st.release.sys.u64" in ptx, "no proxy post in the kernel"


# ---------------------------------------------------------------- on the GPU
gpu = pytest.mark.gpu


def _other_pe(across_hosts):
    """The other PE of 2, after checking that it is (across_hosts) or is not mapped here."""
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
    other = 1 - rshmem.my_pe()
    probe = rtorch.create_symmetric_tensor((1,), torch.int64)
    mapped = rshmem.ptr(probe.data_ptr(), other) is not None
    if across_hosts and mapped:
        pytest.skip("needs 2 PEs on different (virtual) hosts: the other PE is reachable by load/store; set RSHMEM_VIRTUAL_HOSTS=2")
    if not across_hosts and not mapped:
        pytest.skip("the same kernels on one host: run without RSHMEM_VIRTUAL_HOSTS")
    return other


@pytest.fixture(scope="module")
def far():
    yield _other_pe(across_hosts=True)
    import rshmem

    rshmem.barrier_all()


@pytest.fixture(scope="module")
def near():
    yield _other_pe(across_hosts=False)
    import rshmem

    rshmem.barrier_all()


def synchronize_or_record():
    """torch.cuda.synchronize(), or, when a kernel of this PE stopped, the error that kernel
    recorded (which check failed, the address, the PE) raised from the bare CUDA error: torch
    only says "unspecified launch failure" for a kernel that stopped on purpose."""
    import rshmem

    try:
        torch.cuda.synchronize()
    except Exception as launch:
        try:
            rshmem._native.check_device_error()
        except rshmem.RshmemError as recorded:
            raise recorded from launch
        raise


def symmetric(values):
    import rshmem.torch as rtorch

    t = rtorch.create_symmetric_tensor(tuple(values.shape), values.dtype)
    t.copy_(values)
    return t


def block_of(pe, j, n):
    """PE `pe`'s alltoall block `j` (exact in fp32)."""
    return torch.arange(n, device="cuda", dtype=torch.float32) + pe * 1000 + j * 100


@gpu
@pytest.mark.parametrize("scope", list(KERNELS))
def test_device_collectives_across_hosts(far, scope):
    check_collectives(scope)


@gpu
@pytest.mark.parametrize("scope", list(KERNELS))
def test_device_collectives_on_one_host(near, scope):
    """The same kernels where the other PE is mapped: the load/store paths of the same code."""
    check_collectives(scope)


def check_collectives(scope):
    import rshmem

    me = rshmem.my_pe()
    pes = (0, 1)
    mine = torch.arange(N, device="cuda", dtype=torch.float32) + me * 1000
    src = symmetric(mine)
    a_src = symmetric(torch.cat([block_of(me, j, N) for j in pes]))
    red_in = lambda pe: torch.arange(NRED, device="cuda", dtype=torch.float32) * (pe + 1)  # noqa: E731
    red_src = symmetric(red_in(me))
    b_dst, f_dst, a_dst = (symmetric(torch.full((k * N,), -1.0, device="cuda")) for k in (1, 2, 2))
    red_dst = symmetric(torch.full((NRED,), -1.0, device="cuda"))
    rs_dst = symmetric(torch.full((N,), -1.0, device="cuda"))
    torch.cuda.synchronize()
    rshmem.barrier_all()
    root = 1
    KERNELS[scope][(1,)](src, a_src, b_dst, f_dst, a_dst, red_src, red_dst, rs_dst, N, NRED, root,
                         num_warps=4 if scope == "block" else 1)
    synchronize_or_record()
    other = lambda pe: torch.arange(N, device="cuda", dtype=torch.float32) + pe * 1000  # noqa: E731
    assert torch.equal(b_dst, other(root)), "broadcast from the far root"
    assert torch.equal(f_dst, torch.cat([other(pe) for pe in pes])), "fcollect"
    assert torch.equal(a_dst, torch.cat([block_of(pe, me, N) for pe in pes])), "alltoall"
    if scope == "warp":
        expect = torch.maximum(red_in(0), red_in(1))
    else:
        expect = red_in(0) + red_in(1)
    assert torch.equal(red_dst, expect), "reduction over several chunks"
    assert torch.equal(rs_dst, block_of(0, me, N) + block_of(1, me, N)), "reduce-scatter"
    rshmem.barrier_all()


@gpu
def test_device_reduction_in_place_across_hosts(far):
    check_reduction_in_place()


@gpu
def test_device_reduction_in_place_on_one_host(near):
    check_reduction_in_place()


def check_reduction_in_place():
    import rshmem

    me = rshmem.my_pe()
    buf = symmetric(torch.arange(NRED, device="cuda", dtype=torch.float32) + me)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    reduce_in_place_kernel[(1,)](buf, NRED, num_warps=4)
    synchronize_or_record()
    assert torch.equal(buf, torch.arange(NRED, device="cuda", dtype=torch.float32) * 2 + 1)
    rshmem.barrier_all()
