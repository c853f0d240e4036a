"""Bad input and hostile neighbours: read-only destinations, collectives on other buffers, freed
tensors, jobs sharing an address, squatted socket names, forked children, messages that name the
value, and one dtype rule for typed copies. `docs/security.md` says what is checked where.
"""

import ctypes
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from conftest import free_port, run_pes

# ------------------------------------------------------------- read-only local destinations


def test_get_into_a_read_only_array_or_immutable_bytes_is_refused(sym, peer):
    src = sym((4,), torch.int32)
    src.copy_(torch.arange(4, dtype=torch.int32) + 10 * rshmem.my_pe())
    rshmem.barrier_all()
    frozen = np.zeros(4, dtype=np.int32)
    frozen.flags.writeable = False
    data = bytes(16)
    view = np.frombuffer(data, dtype=np.int32)
    for dst in (frozen, view):
        for call in (lambda: rshmem.get(dst, src, peer), lambda: rshmem.getmem(dst, src, peer)):
            with pytest.raises(rshmem.InvalidArgumentError, match="read-only array"):
                call()
    assert data == bytes(16) and not frozen.any(), "a refused get wrote anyway"
    ok = np.zeros(4, dtype=np.int32)
    rshmem.get(ok, src, peer)
    assert ok.tolist() == [10 * peer + i for i in range(4)]
    rshmem.barrier_all()


READ_ONLY_MAPPINGS = """
import os, sys, warnings, numpy as np, torch, rshmem, rshmem.torch as rt
warnings.simplefilter("ignore")   # torch warns about a tensor over a read-only array
rshmem.init()
me, peer = rshmem.my_pe(), (rshmem.my_pe() + 1) % rshmem.n_pes()
src = rt.create_symmetric_tensor((1024,), torch.float32)
src.fill_(me + 1)
rshmem.barrier_all()
path = os.path.join(os.environ["TMPDIR_RO"], f"ro{me}.bin")
np.zeros(1024, dtype=np.float32).tofile(path)
ro = np.memmap(path, dtype=np.float32, mode="r")
over = torch.from_numpy(ro)           # a tensor over the read-only mapping: no flag says so
cases = {
    "get memmap": lambda: rshmem.get(ro, src, peer),
    "get tensor": lambda: rshmem.get(over, src, peer),
    "getmem tensor": lambda: rshmem.getmem(over, src, peer),
    "getmem raw": lambda: rshmem.getmem(ro.ctypes.data, src, peer, nbytes=4096),
    "getmem_on_stream tensor": lambda: rt.getmem_on_stream(over, src, peer),
}
for name, call in cases.items():
    try:
        call()
        print("WROTE", name)
    except rshmem.InvalidArgumentError as e:
        print("REFUSED", name, "|", e)
print("UNCHANGED", not ro.any())
rshmem.barrier_all()
rt.free_tensor(src)
rshmem.finalize()
"""


@pytest.mark.single
def test_get_into_read_only_mappings_raises_instead_of_crashing(tmp_path):
    pes = run_pes(READ_ONLY_MAPPINGS, 2, env={"TMPDIR_RO": str(tmp_path)}, timeout=60)
    for pe, r in enumerate(pes):
        assert r.returncode == 0, f"PE {pe} exit {r.returncode} (a negative one is a signal)\n{r.stdout}\n{r.stderr}"
        assert "WROTE" not in r.stdout and r.stdout.count("REFUSED") == 5, r.stdout
        assert "UNCHANGED True" in r.stdout, r.stdout
        tensor_line = next(x for x in r.stdout.splitlines() if x.startswith("REFUSED get tensor"))
        assert "not writable" in tensor_line and "r--" in tensor_line, tensor_line


# ------------------------------------------------------- collectives agree on their buffers

OTHER_BUFFERS = """
import rshmem, rshmem.torch as rt, torch
rshmem.init()
me = rshmem.my_pe()
a = rt.create_symmetric_tensor((4,), torch.float32)
b = rt.create_symmetric_tensor((4,), torch.float32)
out = rt.create_symmetric_tensor((8,), torch.float32)
a.fill_(1.0)
b.fill_(10.0)
rshmem.barrier_all()
src = a if me == 0 else b                     # same dtype, count and op; other buffers
for name, call in {"reduce": lambda: rshmem.reduce(out[:4], src, "sum"),
                   "fcollect": lambda: rshmem.fcollect(out, src),
                   "broadcast dst": lambda: rshmem.broadcast(out[:4] if me == 0 else out[4:], a, 0)}.items():
    try:
        call()
        print("AGREED", name, out.tolist())
    except rshmem.MismatchError as e:
        print("MISMATCH", name, "|", e)
rshmem.reduce(out[:4], a, "sum")              # the team is still in step
print("AFTER", out[:4].tolist())
for t in (out, b, a):
    rt.free_tensor(t)
rshmem.finalize()
"""


@pytest.mark.single
def test_a_collective_on_other_symmetric_buffers_fails_on_every_pe():
    pes = run_pes(OTHER_BUFFERS, 2, timeout=60)
    for pe, r in enumerate(pes):
        assert r.returncode == 0, f"PE {pe}: {r.stdout}\n{r.stderr}"
        assert "AGREED" not in r.stdout, r.stdout
        lines = [x for x in r.stdout.splitlines() if x.startswith("MISMATCH")]
        assert len(lines) == 3, r.stdout
        other = 1 - pe
        for line, buf in zip(lines, ("source", "source", "dest")):
            assert f"PE {pe} (this PE)" in line and f"PE {other} passed" in line, line
            assert f"collective's {buf} buffer" in line and "heap offset" in line and "allocation" in line, line
        assert "AFTER [2.0, 2.0, 2.0, 2.0]" in r.stdout, r.stdout


# ------------------------------------------------------------------------ freed tensors


def test_a_freed_tensor_and_its_views_no_longer_alias_the_heap():
    t = rtorch.create_symmetric_tensor((256,), torch.float32)
    view = t[16:32].view(4, 4)
    heap_at = t.data_ptr()
    rtorch.free_tensor(t)
    u = rtorch.create_symmetric_tensor((256,), torch.float32)  # may reuse the block
    for write in (lambda: t.fill_(7.0), lambda: view.fill_(9.0), lambda: t.add_(1), lambda: t.sum()):
        with pytest.raises(RuntimeError, match=r"freed already by rshmem.torch.free_tensor\(\)"):
            write()
    # The heap's bytes where `t` was (mapped still: the heap never shrinks) kept none of it.
    heap = np.frombuffer(ctypes.string_at(heap_at, 1024), dtype=np.float32)
    assert not (heap == 7.0).any() and not (heap == 9.0).any(), "a write through a freed tensor reached the heap"
    assert not u.any()
    for bad in (lambda: rtorch.free_tensor(t), lambda: rtorch.peer_tensor(view, rshmem.my_pe()),
                lambda: rshmem.put(t, torch.zeros(256), rshmem.my_pe()),
                lambda: rshmem.get(torch.zeros(16), view.reshape(16), rshmem.my_pe()),
                lambda: rtorch.putmem_on_stream(t, torch.zeros(256), rshmem.my_pe())):
        with pytest.raises(rshmem.NotSymmetricError, match="free_tensor"):
            bad()
    rshmem.barrier_all()
    rtorch.free_tensor(u)


# -------------------------------------------------------------- jobs sharing an address

JOIN = """
import os, sys, time, rshmem
t0 = time.time()
try:
    rshmem.init()
except rshmem.RshmemError as e:
    print("FAILED", type(e).__name__, round(time.time() - t0), "|", e)
    sys.exit(0)
rshmem.barrier_all()
print("JOINED", rshmem.my_pe(), rshmem.n_pes())
rshmem.finalize()
"""


def _pe(rank: int, env: dict, port: int) -> subprocess.Popen:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "RSHMEM_", "SLURM_", "PMIX_",
                                                                     "OMPI_")) and k not in ("RANK", "WORLD_SIZE")}
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank),
                RSHMEM_BACKEND="host", RSHMEM_BOOTSTRAP_TIMEOUT_S="60")
    base.update(env)
    return subprocess.Popen([sys.executable, "-c", JOIN], env=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _out(p: subprocess.Popen, timeout: float = 90) -> str:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        out += "\nTIMED OUT"
    return out + err


@pytest.mark.single
@pytest.mark.parametrize("case", ["run id", "world size", "secret on PE 0 only", "secret on PE 1 only"])
def test_a_pe_of_another_job_is_refused_at_once_naming_both(case):
    """PE 0 of job A waits; a stray PE 1 (another run id, PE count or secret) fails within seconds
    with a message naming both sides, and A's own PE 1 then joins A."""
    port = free_port()
    a = {"TORCHELASTIC_RUN_ID": "job-a"}
    stray = {"run id": {"TORCHELASTIC_RUN_ID": "job-b"},
             "world size": {**a, "WORLD_SIZE": "3"},
             "secret on PE 0 only": dict(a),
             "secret on PE 1 only": {**a, "RSHMEM_BOOTSTRAP_SECRET": "s3cret"}}[case]
    if case == "secret on PE 0 only":
        a["RSHMEM_BOOTSTRAP_SECRET"] = "s3cret"
    pe0 = _pe(0, a, port)
    t0 = time.monotonic()
    text = _out(_pe(1, stray, port), timeout=45)
    assert time.monotonic() - t0 < 20, f"the stray PE waited: {text}"
    assert "FAILED BootstrapRefusedError" in text, text
    expect = {"run id": ["PE 0 has TORCHELASTIC_RUN_ID=job-a", "PE 1 has TORCHELASTIC_RUN_ID=job-b"],
              "world size": ["started for 2 PEs, PE 1 for 3", "WORLD_SIZE"],
              "secret on PE 0 only": ["PE 0 at", "holds a secret", "PE 1 has none", "RSHMEM_BOOTSTRAP_SECRET"],
              "secret on PE 1 only": ["has no RSHMEM_BOOTSTRAP_SECRET", "PE 1 holds one"]}[case]
    for part in expect:
        assert part in text, text
    own = _out(_pe(1, a, port))
    assert "JOINED 1 2" in own, own
    assert "JOINED 0 2" in _out(pe0)


def _old_secret_socket_name(port: int, run_id: str, world: str) -> bytes:
    """The predictable name of PE 0's secret socket before it was made random (FNV-1a, 128 bits,
    over the launcher's variables): what another user could bind first to keep a job from
    starting."""
    h = 0x6C62272E07BB014262B821756295C58D
    for part in (b"rshmem-job", run_id.encode(), b"127.0.0.1", str(port + 1).encode(), world.encode()):
        for byte in part + b"\xff":
            h ^= byte
            h = (h * 0x0000000001000000000000000000013B) % (1 << 128)
    return f"rshmem-secret-{os.getuid()}-{h.to_bytes(16, 'little').hex()}".encode()


@pytest.mark.single
def test_a_squatted_secret_socket_name_does_not_stop_the_job():
    port = free_port()
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(b"\0" + _old_secret_socket_name(port, "", "2"))
    squatter.listen(1)
    try:
        pes = [_pe(r, {}, port) for r in range(2)]
        outs = [_out(p) for p in pes]
    finally:
        squatter.close()
    for pe, text in enumerate(outs):
        assert f"JOINED {pe} 2" in text, text


# ------------------------------------------------------------------------ forked children

FORK = """
import os, sys, time, rshmem
rshmem.init()
a = rshmem.malloc(8)
pid = os.fork()
if pid == 0:
    print("CHILD initialized", rshmem.is_initialized(), flush=True)
    for name, call in {"my_pe": rshmem.my_pe, "barrier_all": rshmem.barrier_all,
                       "finalize": rshmem.finalize}.items():
        try:
            call()
            print("CHILD RAN", name, flush=True)
        except rshmem.NotInitializedError as e:
            print("CHILD REFUSED", name, "|", e, flush=True)
    sys.exit(0)       # a normal exit: the interpreter's exit handlers run
_, status = os.waitpid(pid, 0)
t0 = time.time()
rshmem.p(a, 7, (rshmem.my_pe() + 1) % 2, dtype="int64")
rshmem.barrier_all()
print("PARENT", rshmem.g(a, rshmem.my_pe(), dtype="int64"), os.waitstatus_to_exitcode(status), flush=True)
rshmem.free(a)
rshmem.finalize()
print("FINALIZED", round(time.time() - t0), flush=True)
"""


@pytest.mark.single
def test_a_forked_child_is_not_a_pe_and_leaves_the_job_alone():
    pes = run_pes(FORK, 2, timeout=60)
    for pe, r in enumerate(pes):
        assert r.returncode == 0, f"PE {pe}: {r.stdout}\n{r.stderr}"
        assert "CHILD initialized False" in r.stdout and "CHILD RAN" not in r.stdout, r.stdout
        refused = [x for x in r.stdout.splitlines() if x.startswith("CHILD REFUSED")]
        assert len(refused) == 3 and all(f"forked from PE {pe}" in x for x in refused), r.stdout
        assert "PARENT 7 0" in r.stdout and "FINALIZED 0" in r.stdout, r.stdout


# -------------------------------------------------------------- messages that name the value


def test_messages_name_the_value_and_what_to_do(sym):
    with pytest.raises(rshmem.ArgumentTypeError, match=r"team_my_pe\(\): team must be a Team .* not 'world'"):
        rshmem.team_my_pe("world")
    with pytest.raises(rshmem.ArgumentRangeError, match=r"team=1099511627776 beyond 32 bits"):
        rshmem.barrier(2**40)
    with pytest.raises(rshmem.ArgumentRangeError, match=r"pe=1180591620717411303424 beyond 64 bits"):
        rshmem.team_translate_pe(rshmem.Team.WORLD, 2**70, rshmem.Team.WORLD)
    with pytest.raises(rshmem.InvalidArgumentError, match=r"alignment 9223372036854775808 for 8 bytes"):
        rshmem.align(2**63, 8)
    t = sym((4, 4), torch.float32)
    local = torch.zeros(4, 4).t()
    with pytest.raises(rshmem.InvalidArgumentError, match=r"shape \(4, 4\) has strides \(1, 4\)"):
        rshmem.putmem(t, local, rshmem.my_pe())
    with pytest.raises(rshmem.InvalidArgumentError, match=r"strides \(4, 16\)"):
        rshmem.putmem(t, np.zeros((4, 4), dtype=np.float32).T, rshmem.my_pe())
    rshmem.barrier_all()


# ----------------------------------------------------------------- one dtype rule for copies


def test_typed_put_and_get_take_one_dtype_putmem_copies_bytes(sym, peer):
    dst = sym((4,), torch.float32)
    ints = torch.arange(4, dtype=torch.int32)
    for call in (lambda: rshmem.put(dst, ints, peer), lambda: rshmem.get(ints, dst, peer)):
        with pytest.raises(rshmem.DTypeError, match=r"dst is .* and src is .*; pass tensors of one dtype"):
            call()
    rshmem.barrier_all()
    rshmem.putmem(dst, ints, peer)  # bytes: allowed, the bits are reinterpreted
    rshmem.put(dst, ints.view(torch.float32), peer)
    rshmem.barrier_all()
    assert dst.view(torch.int32).tolist() == [0, 1, 2, 3]
    rshmem.barrier_all()
