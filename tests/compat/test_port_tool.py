"""tools/port_triton_dist.py and tools/td_kernels.py on sources written here: the
import rewrite keeps every other line and each line number, the placeholders of
rshmem.compat.missing say why, and the signature inference finds pointers, descriptors and
unit strides. The run on Triton-distributed's own checkout is in the issue's closing note."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "device"))  # td_style_kernels, the Triton-distributed-style kernels
triton = pytest.importorskip("triton", reason="triton is not installed")

import port_triton_dist as port  # noqa: E402
import td_kernels  # noqa: E402

pytestmark = pytest.mark.single

SOURCE = '''import os
import triton_dist
import triton_dist.tune
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device
from triton_dist.language.extra.cuda import libnvshmem_device
from triton_dist.language.extra.cuda.language_extra import (__syncthreads, tid,
                                                             ld_acquire)  # a comment
from triton_dist.utils import (initialize_distributed, has_tma,
                               not_a_helper_anywhere)
from triton_dist.kernels.nvidia.common_ops import barrier_on_this_grid
import nvshmem.core
import nvshmem.bindings.nvshmem as pynvshmem
from cuda import cuda, cudart
from .sibling import thing


def f():
    from triton_dist.tools.profiler import Profiler
    return os.sep
'''


def test_rewrite_maps_every_import_and_keeps_lines():
    out, notes = port.rewrite_imports(SOURCE)
    lines = out.splitlines()
    assert len(lines) == len(SOURCE.splitlines())
    expected = {
        1: "import os",
        2: "import rshmem.compat.triton_dist as triton_dist",
        3: "import rshmem.compat.triton_dist as triton_dist",
        4: "import rshmem.triton.language as dl",
        5: "from rshmem.triton import libshmem_device",
        6: "from rshmem.triton import libshmem_device as libnvshmem_device",
        7: "from rshmem.triton.language import __syncthreads, tid, ld_acquire  # a comment",
        8: "",
        9: "from rshmem.compat.triton_dist import initialize_distributed, has_tma; "
           "from rshmem.compat.missing import not_a_helper_anywhere",
        11: "from td_port.kernels.nvidia.common_ops import barrier_on_this_grid",
        12: "import rshmem.compat.nvshmem as nvshmem",
        13: "import rshmem.compat.nvshmem.bindings.nvshmem as pynvshmem",
        14: "from cuda.bindings import driver as cuda, runtime as cudart",
        15: "from .sibling import thing",
        19: "    from rshmem.compat.td_profiler import Profiler",
    }
    for n, text in expected.items():
        assert lines[n - 1] == text, (n, lines[n - 1])
    assert notes == ["triton_dist.utils.not_a_helper_anywhere -> rshmem.compat.missing"]


def test_rewritten_rshmem_imports_load():
    out, _ = port.rewrite_imports(SOURCE)
    header = "\n".join(ln for ln in out.splitlines()[:14] if ln and "td_port" not in ln)
    scope: dict = {}
    exec(compile(header, "<ported>", "exec"), scope)  # noqa: S102 (our own rewrite)
    assert scope["libnvshmem_device"] is scope["libshmem_device"]
    assert scope["triton_dist"].jit is scope["dl"].__dict__.get("jit", scope["triton_dist"].jit)
    assert scope["nvshmem"].core.Teams.TEAM_NODE == 2


def test_missing_names_say_why():
    from rshmem.compat.missing import Profiler, allocate_smem, whatever

    with pytest.raises(NotImplementedError, match=r"allocate_smem \(from triton_dist.language.smem_ops\) is not "
                                                  r"provided by rshmem: explicit shared-memory allocation"):
        allocate_smem(1)
    with pytest.raises(NotImplementedError, match=r"whatever is not provided by rshmem: rshmem has no counterpart"):
        whatever()
    with pytest.raises(NotImplementedError, match=r"Profiler.create is not provided"):
        Profiler.create(1)


def test_unit_strides_and_descriptor_types():
    names = ["a", "stride_am", "stride_ak", "stride_bn", "stride_bk", "stride_cm", "stride_cn", "stride_reduce",
             "stride_m", "stride_n", "stride_q_bs", "stride_q_h"]
    assert td_kernels._unit_strides(names) == {"stride_ak", "stride_bk", "stride_cn", "stride_n", "stride_q_h"}
    consts = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "EPILOGUE_SUBTILE": True}
    assert td_kernels._descriptor_type("a_desc", consts) == "tensordesc<fp16[128, 64]>"
    assert td_kernels._descriptor_type("b_desc", consts) == "tensordesc<fp16[256, 64]>"
    assert td_kernels._descriptor_type("c_desc", consts) == "tensordesc<fp16[128, 128]>"


def test_pointer_inference_follows_arithmetic_and_callees():
    import td_style_kernels as K

    a = td_kernels.Analysis()
    got = a.pointers(K.multi_flag_kernel)
    # flags reach dl.wait (int32 flags), data and out reach loads and stores; n_flags/epoch do not
    assert got == {"flags": "i32", "data": None, "out": None}
    got = a.pointers(K.ag_gemm_host_desc_kernel)  # descriptors are loaded in a callee
    assert got["a_desc"] == got["b_desc"] == "desc" and got["ready"] == "i32"
    assert {"c_ptr", "a_ptr", "a_src"} <= set(got) and "M" not in got and "epoch" not in got
