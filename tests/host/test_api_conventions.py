"""One consistent Python API, on the host backend (1 and 2 PEs).

1. stream semantics: the decision a host call makes when given a CUDA tensor (wait for torch's
   current stream, refuse CUDA graph capture), checked with a stand-in tensor; the GPU test is
   tests/tensors/test_cuda_stream_order.py;
2. one argument order and names for the host and on-stream forms (the reference page lists them),
   ops as names, rshmem constants and torch.distributed.ReduceOp, `wait_until` returning the value;
3. `RSHMEM_LOG` / `RSHMEM_DEBUG` print rank-prefixed logs;
4. messages: the PE range of a 1-PE job, symmetric tensors that differ in shape or dtype (equal
   sizes included) between PEs;
6. `help(rshmem)` opens with the functions users call and the bootstrap options.
"""

from __future__ import annotations

import inspect
import pydoc
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import rshmem
import rshmem.torch as rtorch
from rshmem import _atomics, _collectives, _on_stream, _rma, _signals

ROOT = Path(__file__).resolve().parents[2]
# (module users import, function) of every public function that takes tensors
PUBLIC = [("rshmem", n) for m in (_rma, _atomics, _signals, _collectives) for n in m.__all__] + \
    [("rshmem.torch", n) for n in _on_stream.__all__]


def _function(module, name):
    return getattr(rshmem if module == "rshmem" else rtorch, name)


def _reference_signatures() -> dict:
    """name -> the parameters docs/python-api.md lists for it, as (name, kind, default source)."""
    import ast
    import re

    out = {}
    public = (ROOT / "docs" / "python-api.md").read_text().split("# The extension layer")[0]
    for line in public.splitlines():
        m = re.match(r"\| `(\w+)(\([^`]*?\))(?: -> [^`]*)?` \|", line)
        if m and m.group(1) not in out:
            a = ast.parse(f"def f{m.group(2)}: pass").body[0].args
            defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
            out[m.group(1)] = [(x.arg, "POSITIONAL_OR_KEYWORD", d and ast.unparse(d)) for x, d in zip(a.args, defaults)] + \
                [(x.arg, "KEYWORD_ONLY", d and ast.unparse(d)) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    return out


# ---------------------------------------------------------------- 2: one order, one set of names


@pytest.mark.parametrize("module,name", PUBLIC, ids=lambda x: x)
def test_every_public_function_has_its_reference_signature(module, name):
    """The signature users see (help(), inspect) is the one the reference page
    (docs/python-api.md, generated from the source: `tools/gen_host_api.py --check`) lists."""
    fn = _function(module, name)
    want = _reference_signatures()[name]
    have = inspect.signature(fn).parameters.values()
    assert [(p.name, p.kind.name) for p in have] == [(n, k) for n, k, _ in want]
    for p, (_, _, default) in zip(have, want):
        expect = inspect.Parameter.empty if default is None else eval(default, {"Team": rshmem.Team})  # noqa: S307
        assert p.default == expect and type(p.default) is type(expect), (name, p.name)
    assert fn.__doc__, f"{name} has no docstring"


def test_host_and_on_stream_forms_share_their_arguments():
    """Every on-stream form takes its host form's arguments in the same order with the same
    names, then `stream`; sizes and dtypes are keyword-only in both."""
    pairs = 0
    for module, name in PUBLIC:
        if module != "rshmem.torch" or not name.endswith("_on_stream"):
            continue
        host = getattr(rshmem, name[: -len("_on_stream")], None)
        assert host is not None, f"{name} has no host form"
        pairs += 1
        h = [p for p in inspect.signature(host).parameters.values() if p.kind != p.KEYWORD_ONLY]
        s = [p for p in inspect.signature(_function(module, name)).parameters.values() if p.kind != p.KEYWORD_ONLY]
        assert [p.name for p in s[: len(h)]] == [p.name for p in h], name
        assert [p.name for p in s[len(h):]] == ["stream"], name
    assert pairs == 13


def test_reduce_on_stream_takes_the_op_after_the_tensors(sym, me, npes):
    src, dst = sym((4,), torch.float32), sym((4,), torch.float32)
    src.fill_(me + 1)
    rshmem.barrier_all()
    rtorch.reduce_on_stream(dst, src, "max")
    assert torch.equal(dst, torch.full((4,), float(npes)))


def test_waits_take_nelems_and_dtype_by_keyword(sym):
    flags = sym((4,), torch.int32)
    flags.fill_(3)
    assert rshmem.test_all(flags, rshmem.CMP_EQ, 3, None, nelems=2) is True


@pytest.mark.parametrize("op,want", [
    ("sum", "sum"), ("SUM", "sum"), (rshmem.ReduceOp.MAX, "max"), (dist.ReduceOp.MIN, "min"),
    (dist.ReduceOp.PRODUCT, "prod"), (dist.ReduceOp(dist.ReduceOp.BXOR), "xor"), (dist.ReduceOp.BAND, "and"),
])
def test_reduce_ops_by_name_constant_or_torch(sym, me, npes, op, want):
    src, dst = sym((3,), torch.int32), sym((3,), torch.int32)
    src.copy_(torch.tensor([me + 1, 6, 5 + me], dtype=torch.int32))
    rshmem.barrier_all()
    rshmem.reduce(dst, src, op)
    every = [torch.tensor([p + 1, 6, 5 + p], dtype=torch.int32) for p in range(npes)]
    ref = {"sum": lambda: sum(every), "max": lambda: torch.stack(every).amax(0), "min": lambda: torch.stack(every).amin(0),
           "prod": lambda: torch.stack(every).prod(0).to(torch.int32), "and": lambda: _fold(every, torch.bitwise_and),
           "xor": lambda: _fold(every, torch.bitwise_xor)}[want]()
    assert torch.equal(dst, ref.to(torch.int32))
    rtorch.reduce_on_stream(dst, src, op)  # the on-stream form takes the same ops
    assert torch.equal(dst, ref.to(torch.int32))


def _fold(ts, f):
    out = ts[0]
    for t in ts[1:]:
        out = f(out, t)
    return out


def test_ops_that_have_no_reduction_are_refused(sym):
    t = sym((2,), torch.float32)
    with pytest.raises(rshmem.InvalidArgumentError, match=r"ReduceOp.AVG has no SHMEM reduction.*SUM, then divide"):
        rshmem.reduce(t, t, dist.ReduceOp.AVG)
    with pytest.raises(rshmem.InvalidArgumentError, match="unknown reduction 'mean'"):
        rtorch.reduce_on_stream(t, t, "mean")
    with pytest.raises(rshmem.ArgumentTypeError, match="reduce op must be a name"):
        rshmem.reduce(t, t, 1.5)
    with pytest.raises(rshmem.InvalidArgumentError, match="signal op 'or' is not one of set, add"):
        rshmem.signal_op(t.view(torch.int64)[0], 1, "or", 0)
    with pytest.raises(rshmem.InvalidArgumentError, match="comparison 'about' is not one of"):
        rshmem.test(t.view(torch.int32)[0], "about", 0)
    rshmem.barrier_all()


def test_signal_ops_and_comparisons_by_name(sym, me, peer):
    sig = sym((1,), torch.int64)
    rshmem.barrier_all()
    rshmem.signal_op(sig[0], 2, "add", peer)
    rshmem.signal_op(sig[0], 3, rshmem.SIGNAL_ADD, peer)
    assert rshmem.signal_wait_until(sig[0], ">=", 5) == 5
    assert rshmem.wait_until(sig[0], "ge", 5) == 5  # the host wait returns the value, as on the device
    assert rshmem.test(sig[0], rshmem.CMP_EQ, 5)
    rshmem.barrier_all()


# --------------------------------------------------------------- 1: what a host call does with CUDA


class _CudaStandIn:
    """Looks like a CUDA tensor to the calling convention (which only asks `is_cuda` and
    `get_device()`); the body of the call then refuses it as not a tensor of this backend."""

    is_cuda = True

    def get_device(self):
        return 0


def test_host_calls_on_cuda_tensors_wait_for_the_current_stream(monkeypatch):
    seen = []

    class Stream:
        def synchronize(self):
            seen.append("synchronize")

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: seen.append(f"stream of {device}") or Stream())
    fake = _CudaStandIn()
    for call in (lambda: rshmem.putmem(fake, fake, 0), lambda: rshmem.get(fake, fake, 0),
                 lambda: rshmem.atomic_fetch_add(fake, 1, 0), lambda: rshmem.reduce(fake, fake, "sum"),
                 lambda: rshmem.putmem_signal(fake, fake, fake, 1, "set", 0)):
        seen.clear()
        with pytest.raises(rshmem.RshmemError):
            call()
        assert seen == ["stream of 0", "synchronize"], seen
    # waits read what peers write: not ordered with the stream (a kernel there may wait for us)
    seen.clear()
    with pytest.raises(rshmem.RshmemError):
        rshmem.wait_until(fake, "eq", 1)
    assert seen == []


def test_host_calls_inside_cuda_graph_capture_are_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    fake = _CudaStandIn()
    for call in (lambda: rshmem.putmem(fake, fake, 0), lambda: rshmem.signal_wait_until(fake, "eq", 1)):
        with pytest.raises(rshmem.UnsupportedError, match="CUDA graph capture.*on-stream form"):
            call()


def test_host_calls_on_cpu_tensors_leave_cuda_alone(sym, peer, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a CPU-tensor call touched torch.cuda")

    monkeypatch.setattr(torch.cuda, "current_stream", boom)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", boom)
    dst = sym((4,), torch.float32)
    rshmem.putmem(dst, torch.ones(4), peer)
    rshmem.barrier_all()


# -------------------------------------------------------------------------------- 4: messages


def test_pe_range_in_words(sym, npes):
    t = sym((1,), torch.int64)
    want = "the only valid PE is 0" if npes == 1 else f"valid PEs are 0 to {npes - 1}"
    with pytest.raises(rshmem.PeOutOfRangeError, match=f"has {npes} PEs?, {want}$"):
        rshmem.p(t[0], 1, npes)
    rshmem.barrier_all()


@pytest.mark.multi
def test_symmetric_tensors_that_differ_between_pes_are_named(me):
    start = rshmem.heap_in_use()
    with pytest.raises(rshmem.MismatchError, match=r"shape \((4|5),\) and dtype torch.float32, PE \d passed a tensor of shape \((5|4),\)"):
        rtorch.create_symmetric_tensor((4 + me,), torch.float32)
    # equal sizes, different dtypes: refused too
    with pytest.raises(rshmem.MismatchError, match=r"torch.float32.*torch.int32|torch.int32.*torch.float32"):
        rtorch.create_symmetric_tensor((4,), torch.float32 if me == 0 else torch.int32)
    # equal bytes, different shapes
    with pytest.raises(rshmem.MismatchError, match=r"shape \(2, 4\).*shape \(8,\)|shape \(8,\).*shape \(2, 4\)"):
        rtorch.create_symmetric_tensor((2, 4) if me == 0 else (8,), torch.float32)
    assert rshmem.heap_in_use() == start
    rshmem.barrier_all()


# ------------------------------------------------------------------------------ 6: help(rshmem)


def test_help_opens_with_the_functions_users_call():
    text = pydoc.render_doc(rshmem, renderer=pydoc.plaintext)
    head = "\n".join(text.splitlines()[:80])
    for needle in ("rshmem.init()", "create_symmetric_tensor", "putmem(dst, src, pe)", "barrier_all",
                   "reduce(dst, src, op=\"sum\")", "putmem_on_stream", "rshmem.triton"):
        assert needle in head, f"{needle!r} not in the first 80 lines of help(rshmem)"
    doc = rshmem.__doc__
    for option in ("uid=", "torch.distributed", "mpi_comm", "MASTER_PORT + 1", "RSHMEM_BOOTSTRAP_SECRET", "one PE"):
        assert option in doc, f"the bootstrap option {option!r} is not in rshmem's docstring"


# ------------------------------------------------------------------------- 3: debugging output

_JOB = "import rshmem\nrshmem.init()\nrshmem.barrier_all()\nrshmem.finalize()\nprint('OK')\n"


@pytest.mark.single
@pytest.mark.parametrize("env", [{"RSHMEM_LOG": "debug"}, {"RSHMEM_DEBUG": "1"}, {"RSHMEM_LOG": "rshmem=trace"}])
def test_debug_logs_are_rank_prefixed_on_stderr(env):
    from conftest import run_pes

    pes = run_pes(_JOB, 2, env=env)
    for rank, pe in enumerate(pes):
        assert pe.returncode == 0 and pe.stdout.strip() == "OK", pe.stdout + pe.stderr
        lines = [line for line in pe.stderr.splitlines() if line.startswith("[rshmem pe")]
        assert any(line.startswith(f"[rshmem pe {rank}/2]") and "rshmem initialized" in line for line in lines), pe.stderr
        assert all(line.startswith((f"[rshmem pe {rank}/2]", "[rshmem pe ?]")) for line in lines), pe.stderr


@pytest.mark.single
def test_no_logs_unless_asked_and_a_bad_level_is_named():
    from conftest import run_pes

    (quiet,) = run_pes(_JOB, 1)
    assert quiet.returncode == 0 and "[rshmem pe" not in quiet.stderr, quiet.stderr
    (bad,) = run_pes("import rshmem\ntry:\n    rshmem.init()\nexcept rshmem.ConfigError as e:\n    print(e)\n", 1,
                     env={"RSHMEM_LOG": "rshmem=loud"})
    assert "RSHMEM_LOG" in bad.stdout and "debug" in bad.stdout, bad.stdout + bad.stderr
