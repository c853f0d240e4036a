"""torch's Triton NVSHMEM extension on the RSHMEM backend, 2 PEs: kernels written as torch's own
tests write them (`@requires_nvshmem @triton.jit`, `nvshmem.put` / `get` / `putmem_signal_block` /
`signal_op` / `signal_wait_until` / `wait_until` / `fence` / `quiet` / `barrier_all` / `sync_all` /
`alltoall` / `broadcast` / `reduce`), decorated before rshmem is imported, launched on symm_mem
tensors of the RSHMEM backend. Each case checks its result and prints `ok <case>`; the first
failure raises. Started by test_nvshmem_triton_gpu.py:
`python -m torch.distributed.run --nproc-per-node 2 nvshmem_triton_gpu_program.py`."""
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import torch.distributed._symmetric_memory._nvshmem_triton as nvshmem
import triton
import triton.language as tl
from torch.distributed._symmetric_memory._nvshmem_triton import requires_nvshmem

SIGNAL_SET, SIGNAL_ADD = 0, 5  # NVSHMEM's numbers, as torch's tests pass them
CMP_EQ, CMP_GE = 0, 5


@requires_nvshmem
@triton.jit
def put_kernel(dst, src, nelems, pe):
    nvshmem.put(dst, src, nelems, pe)


@requires_nvshmem
@triton.jit
def get_kernel(dst, src, nelems, pe, NBI: tl.constexpr):
    if NBI:
        nvshmem.get_nbi(dst, src, nelems, pe)
        nvshmem.quiet()
    else:
        nvshmem.get(dst, src, nelems, pe)


@requires_nvshmem
@triton.jit
def put_signal_kernel(dst, src, nbytes, sig, value, op, pe):
    nvshmem.putmem_signal_block(dst, src, nbytes, sig, value, op, pe)


@requires_nvshmem
@triton.jit
def signal_wait_kernel(sig, cmp, value):
    nvshmem.signal_wait_until(sig, cmp, value)


@requires_nvshmem
@triton.jit
def signal_op_kernel(sig, value, op, pe):
    nvshmem.signal_op(sig.to(tl.int64), value.to(tl.int64), op, pe)  # torch types both as int64


@requires_nvshmem
@triton.jit
def wait_until_kernel(ivar, cmp, value):
    nvshmem.wait_until(ivar, cmp, value)


@requires_nvshmem
@triton.jit
def ordered_puts_kernel(dst1, src1, dst2, src2, flag_dst, flag_src, nelems, pe, QUIET: tl.constexpr):
    nvshmem.put(dst1, src1, nelems, pe)
    if QUIET:
        nvshmem.quiet()
    else:
        nvshmem.fence()
    nvshmem.put(dst2, src2, nelems, pe)
    nvshmem.fence()
    nvshmem.put(flag_dst, flag_src, 1, pe)


@requires_nvshmem
@triton.jit
def barrier_kernel(dst, src, nelems):
    me = nvshmem.my_pe()
    if me == 0:
        tl.store(src.to(tl.pointer_type(tl.int32)), 42)
        i = 1
        while i < nvshmem.n_pes():
            nvshmem.put(dst, src, nelems, i)
            i += 1
    nvshmem.barrier_all()
    if me != 0:
        p = dst.to(tl.pointer_type(tl.int32))
        tl.store(p, tl.load(p) + 1)


@requires_nvshmem
@triton.jit
def sync_kernel(local, remote, nelems):
    me = nvshmem.my_pe()
    tl.store(local.to(tl.pointer_type(tl.int32)), me + 100)
    nvshmem.sync_all()
    nvshmem.get(remote, local, nelems, (me + 1) % nvshmem.n_pes())


@requires_nvshmem
@triton.jit
def alltoall_kernel(team, dst, src, nelems_per_pe):
    nvshmem.alltoall(team, dst, src, nelems_per_pe)


@requires_nvshmem
@triton.jit
def broadcast_kernel(team, dst, src, nelems, root):
    nvshmem.broadcast(team, dst, src, nelems, root)


@requires_nvshmem
@triton.jit
def reduce_kernel(team, dst, src, nreduce, OP: tl.constexpr):
    nvshmem.reduce(team, dst, src, nreduce, OP)


import rshmem  # noqa: E402 - after the kernels: torch's decorator ran before rshmem's patch
import rshmem.torch as rtorch  # noqa: E402

torch.cuda.set_device(rtorch.device())
dist.init_process_group("gloo")
rshmem.init(dist.group.WORLD)
import rshmem.torch_symm_mem  # noqa: E402,F401

symm_mem.set_backend("RSHMEM")
me, n = dist.get_rank(), dist.get_world_size()
peer = 1 - me
dev = torch.device("cuda", torch.cuda.current_device())
group = dist.group.WORLD.group_name


def sym(numel, dtype, fill):
    t = symm_mem.empty(numel, dtype=dtype, device=dev).fill_(fill)
    symm_mem.rendezvous(t, group=group)
    return t


def sync():
    torch.cuda.synchronize()
    dist.barrier()


def ok(name):
    sync()
    print(f"ok {name} (PE {me})", flush=True)


# put: PE 0 writes its 5 int64 into PE 1's dst
src = sym(5, torch.int64, 0)
src.copy_(torch.arange(5, device=dev) + 10 * (me + 42))
dst = sym(5, torch.int64, -999)
sync()
if me == 0:
    put_kernel[(1,)](dst, src, 5, peer)
sync()
if me == 1:
    torch.testing.assert_close(dst, torch.arange(5, device=dev) + 420)
ok("put")

for nbi in (False, True):
    inp = sym(8, torch.int8, 7 if me == 0 else -1)
    out = sym(8, torch.int8, -1)
    sync()
    if me == 1:
        get_kernel[(1,)](out, inp, 8, peer, NBI=nbi)
        torch.testing.assert_close(out, torch.full((8,), 7, dtype=torch.int8, device=dev))
    ok(f"get nbi={nbi}")

inp = sym(8, torch.int8, me)
out = sym(8, torch.int8, -1)
sync()
get_kernel[(1,)](out, inp, 8, (me - 1) % n, NBI=False)
torch.testing.assert_close(out, torch.full((8,), (me - 1) % n, dtype=torch.int8, device=dev))
ok("get ring")

for op, value in ((SIGNAL_SET, 1), (SIGNAL_ADD, 16)):
    inp = sym(8, torch.int8, 11)
    out = symm_mem.empty(8, dtype=torch.int8, device=dev).fill_(-1)
    hdl = symm_mem.rendezvous(out, group=group)
    flag = hdl.get_signal_pad(me, (1,), dtype=torch.int64).fill_(0)
    sync()
    if me == 0:
        put_signal_kernel[(1, 1, 1)](out, inp, 8, flag, value, op, peer)
    else:
        signal_wait_kernel[(1,)](flag, CMP_EQ, value)
        torch.testing.assert_close(out, torch.full((8,), 11, dtype=torch.int8, device=dev))
        torch.testing.assert_close(flag, torch.tensor([value], dtype=torch.int64, device=dev))
    sync()
    flag.fill_(0)  # torch's contract: the pad is zero when no signal is in flight
    ok(f"putmem_signal_block op={op}")

flag = sym(1, torch.int32, 0)
forty_two = sym(1, torch.int32, 42)
sync()
if me == 0:
    wait_until_kernel[(1,)](flag, CMP_EQ, 42)
    torch.testing.assert_close(flag, torch.tensor([42], dtype=torch.int32, device=dev))
else:
    put_kernel[(1,)](flag, forty_two, 1, peer)
ok("wait_until")

sig = sym(1, torch.int64, 0)
sync()
if me == 1:
    signal_op_kernel[(1,)](sig, 7, SIGNAL_SET, peer)
else:
    signal_wait_kernel[(1,)](sig, CMP_GE, 7)
    torch.testing.assert_close(sig, torch.tensor([7], dtype=torch.int64, device=dev))
ok("signal_op + signal_wait_until")

for quiet in (False, True):
    d1, d2 = sym(64, torch.int64, 0), sym(64, torch.int64, 0)
    s1, s2 = sym(64, torch.int64, 11), sym(64, torch.int64, 22)
    flag_dst, flag_src = sym(1, torch.int64, 0), sym(1, torch.int64, 1)
    sync()
    if me == 0:
        ordered_puts_kernel[(1,)](d1, s1, d2, s2, flag_dst, flag_src, 64, peer, QUIET=quiet)
    else:
        signal_wait_kernel[(1,)](flag_dst, CMP_EQ, 1)
        torch.testing.assert_close(d1, torch.full((64,), 11, dtype=torch.int64, device=dev))
        torch.testing.assert_close(d2, torch.full((64,), 22, dtype=torch.int64, device=dev))
    ok("puts ordered by " + ("quiet" if quiet else "fence"))

src, dst = sym(1, torch.int32, 0), sym(1, torch.int32, 0)
sync()
barrier_kernel[(1,)](dst, src, 1, launch_cooperative_grid=True)
sync()
if me == 0:
    torch.testing.assert_close(src, torch.tensor([42], dtype=torch.int32, device=dev))
else:
    torch.testing.assert_close(dst, torch.tensor([43], dtype=torch.int32, device=dev))
ok("barrier_all")

local, remote = sym(1, torch.int32, 0), sym(1, torch.int32, -1)
sync()
sync_kernel[(1,)](local, remote, 1)
torch.testing.assert_close(remote, torch.tensor([(me + 1) % n + 100], dtype=torch.int32, device=dev))
ok("sync_all")

k = 10
src = sym(k * n, torch.int64, 0)
src.copy_(torch.arange(k * n, device=dev) + 1000 * me)
dst = sym(k * n, torch.int64, -1)
sync()
alltoall_kernel[(1,)](0, dst, src, k)
want = torch.cat([torch.arange(me * k, (me + 1) * k, device=dev) + 1000 * p for p in range(n)])
torch.testing.assert_close(dst, want)
ok("alltoall")

src = sym(100, torch.float32, float(me + 1))
dst = sym(100, torch.float32, -1.0)
sync()
broadcast_kernel[(1,)](0, dst, src, 100, 0)
torch.testing.assert_close(dst, torch.full((100,), 1.0, device=dev))
ok("broadcast")

for dtype in (torch.int32, torch.int64, torch.float32, torch.bfloat16):
    for op in ("sum", "max", "min", "prod"):
        vals = [torch.arange(16, device=dev).to(torch.float32) % 5 + 1 + p for p in range(n)]
        src = sym(16, dtype, 0)
        src.copy_(vals[me].to(dtype))
        dst = sym(16, dtype, 0)
        sync()
        reduce_kernel[(1,)](0, dst, src, 16, OP=op)
        stack = torch.stack([v.to(dtype).to(torch.float64) for v in vals])
        want = {"sum": stack.sum(0), "max": stack.max(0).values, "min": stack.min(0).values,
                "prod": stack.prod(0)}[op].to(dtype)
        torch.testing.assert_close(dst, want)
        ok(f"reduce {op} {dtype}")

print(f"all cases passed (PE {me})", flush=True)
rshmem.finalize()
dist.destroy_process_group()
