"""Device-side address checks in check mode (RSHMEM_CHECK=1).

`triton-lib/build.py` builds the device library twice: `libshmem_device.bc` and, with
-DRSHMEM_CHECK=1, `libshmem_device.check.bc`, whose puts, gets, signals and atomics stop the
kernel with an error record naming the address, the target PE and the operation when the range is
not program memory: below `DeviceState::user_base` (the runtime's barrier words, team table and
workspaces) or past the heap bound (triton-lib/src/peer_device.h, "Check mode"). `rshmem.triton`
links the check variant under RSHMEM_CHECK=1.

Without a GPU (compiled for sm_90): the default library's kernels never read `user_base` (the
fast path has no check), the check variant's do and gain a stopping path. With a GPU (marker
`gpu`, one process starting a job of two PEs, marker `single`): a signal into the peer's barrier
words stops the kernel with that error instead of corrupting the peer's barriers, after a signal
into program memory worked.

    pytest tests/device/test_device_check_mode.py                      # compile checks
    RSHMEM_ALLOW_SHARED_GPU=1 pytest -m gpu tests/device/test_device_check_mode.py
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "python" / "rshmem" / "triton" / "lib"


def test_rshmem_check_picks_the_check_variant(monkeypatch):
    import rshmem.triton as rt

    monkeypatch.delenv("RSHMEM_DEVICE_BC", raising=False)
    for value, name in (("", "libshmem_device.bc"), ("0", "libshmem_device.bc"), ("off", "libshmem_device.bc"),
                        ("1", "libshmem_device.check.bc"), ("True", "libshmem_device.check.bc")):
        monkeypatch.setenv("RSHMEM_CHECK", value)
        assert rt.check_mode() is (name == "libshmem_device.check.bc")
        assert rt._BUNDLED.name == "libshmem_device.bc"
        want = rt._BUNDLED_CHECK if rt.check_mode() else rt._BUNDLED
        assert want.name == name
        if want.is_file():
            assert rt.bitcode_path() == want
    monkeypatch.setenv("RSHMEM_CHECK", "maybe")
    with pytest.raises(ValueError, match="RSHMEM_CHECK='maybe'") as info:
        rt.check_mode()
    import rshmem

    assert isinstance(info.value, rshmem.ConfigError)


def _user_base_offset() -> int:
    """Byte offset of `user_base` in rshmemi_device_state_t, from the generated header."""
    header = (ROOT / "triton-lib" / "include" / "rshmem" / "device_state.h").read_text()
    end = header.index("} rshmemi_device_state_t;")
    body = header[header.rindex("typedef struct {", 0, end):end]
    off = 0
    for ty, name in re.findall(r"^\s+(u?int(?:32|64)_t) (\w+);", body, re.M):
        if name == "user_base":
            return off
        off += 8 if "64" in ty else 4
    raise AssertionError("no user_base in rshmemi_device_state_t")


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """(default, check) bitcode paths: the packaged pair when up to date, else a fresh build."""
    pytest.importorskip("triton", reason="triton is not installed")
    sys.path.insert(0, str(Path(__file__).parent))
    from test_device_compile import _sources_newer_than

    default, check = LIB / "libshmem_device.bc", LIB / "libshmem_device.check.bc"
    if not (default.is_file() and check.is_file()) or _sources_newer_than(check):
        if shutil.which("clang-19") is None:
            pytest.skip("clang-19 is not installed (needed to build the device library)")
        out = tmp_path_factory.mktemp("device-lib")
        subprocess.run([sys.executable, str(ROOT / "triton-lib" / "build.py"), "--out-dir", str(out),
                        "--python-out", str(out / "py" / "libshmem_device.bc"), "--ltoir-out", ""], check=True)
        default, check = out / "py" / "libshmem_device.bc", out / "py" / "libshmem_device.check.bc"
    return str(default), str(check)


@pytest.mark.parametrize("row", ["putmem_block", "signal_op", "atomic_fetch_add"])
def test_check_mode_adds_the_check_and_the_default_library_has_none(variants, row):
    from test_device_compile import compile_row

    default, check = (compile_row(row, bc).asm["ptx"] for bc in variants)
    user_base = re.compile(rf"\+{_user_base_offset()}\]")
    # The kernel's own body: the out-of-line rare paths are other PTX functions, and the proxy
    # post's reads of its descriptor can fall at the same offset.
    entry = default[default.index(".entry"):]
    entry = entry[:entry.index("\n}")]
    assert not user_base.search(entry), f"{row}: the default library reads user_base (a check on the fast path)"
    assert user_base.search(check), f"{row}: the check variant does not read user_base"
    assert check.count("trap;") > default.count("trap;"), f"{row}: the check variant has no stopping path of its own"


JOB = textwrap.dedent(
    """
    import os
    import torch
    import triton
    import rshmem
    import rshmem.torch as rtorch
    import rshmem.triton as rt
    from rshmem.triton import language as L
    from rshmem.triton import libshmem_device as shm

    rshmem.init(backend="cuda")
    rt.install_load_hook()
    assert rt.check_mode() and rt.bitcode_path().name == "libshmem_device.check.bc", rt.bitcode_path()
    me, n = rshmem.my_pe(), rshmem.n_pes()
    peer = (me + 1) % n

    @rt.jit
    def poke_once(dest, pe):
        # signal_op is thread scope: one thread signals once.
        if L.tid(0) == 0:
            shm.signal_op(dest, 1, shm.SIGNAL_ADD, pe)

    @rt.jit
    def poke_all(dest, pe):
        # Every thread of the program (128): all of them fail at once, and the record must
        # still be complete when the kernel stops (poll_device.h, rshmemi_fail).
        shm.signal_op(dest, 1, shm.SIGNAL_ADD, pe)

    class Raw:
        # A raw symmetric address as a Triton pointer argument (what a stray pointer would be).
        dtype = torch.int64

        def __init__(self, addr):
            self.addr = addr

        def data_ptr(self):
            return self.addr

    sig = rtorch.create_symmetric_tensor((4,), torch.int64)
    sig.zero_()
    torch.cuda.synchronize()
    rshmem.barrier_all()
    poke_once[(1,)](sig, peer)  # program memory: allowed
    torch.cuda.synchronize()
    rshmem.barrier_all()
    print(f"CONTROL {int(sig[0].item())}", flush=True)
    # The first byte of the heap slot: the runtime's barrier words (`arrive` of TEAM_WORLD).
    base = sig.data_ptr() - rshmem._native.allocation_of(sig.data_ptr())["offset"]
    try:
        poke_all[(1,)](Raw(base), peer)
        torch.cuda.synchronize()
        rshmem._native.check_device_error()
        print("NO_ERROR", flush=True)
    except RuntimeError as stopped:  # the kernel stopped: the runtime's record says why
        try:
            rshmem._native.check_device_error()
            print(f"NO_RECORD ({stopped})", flush=True)
        except rshmem.RshmemError as e:
            print(f"RAISED {type(e).__name__}: {e}", flush=True)
    except rshmem.RshmemError as e:
        print(f"RAISED {type(e).__name__}: {e}", flush=True)
    os._exit(0)
    """
)


@pytest.mark.gpu
@pytest.mark.single
def test_check_mode_stops_a_signal_into_the_runtimes_barrier_words(tmp_path):
    torch = pytest.importorskip("torch")
    from conftest import shared_gpu_allowed
    from cuda_util import Job

    shared = torch.cuda.device_count() < 2
    if shared and not shared_gpu_allowed():
        pytest.skip("needs 2 GPUs, or 1 with RSHMEM_ALLOW_SHARED_GPU=1")
    script = tmp_path / "check_job.py"
    script.write_text(JOB)
    job = Job(script, CUDA_VISIBLE_DEVICES="0" if shared else "0,1", RSHMEM_CHECK="1",
              RSHMEM_DEBUG_WAIT_TIMEOUT_MS="20000", TRITON_CACHE_DIR=str(tmp_path / "triton-cache"))
    try:
        for rank in (0, 1):
            code, out = job.wait(rank, timeout=180)
            assert code == 0, f"PE {rank} exited with {code} (None: hung past 180 s):\n{out}"
            assert "CONTROL 1\n" in out, f"PE {rank}: the allowed signal did not arrive once:\n{out}"
            assert "RAISED InvalidArgumentError" in out, f"PE {rank}:\n{out}"
            for piece in ("check mode", "signal operation of 8 bytes", f"on PE {1 - rank}", "heap offset 0, +0"):
                assert piece in out, f"PE {rank} should say {piece!r}:\n{out}"
    finally:
        job.close()
