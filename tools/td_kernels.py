"""Finds the device kernels of ported Triton-distributed modules, works out their argument
types, and compiles each for sm_90 (used by tools/port_triton_dist.py).

A device kernel is a ``@jit`` function some ported file launches (``kernel[grid](...)``) or one
with ahead-of-time compile spaces. Argument types come, in this order, from:

1. the kernel's ``aot_compile_spaces`` (Triton-distributed wrote its signature there), or a
   ``triton.autotune`` config for the constexprs;
2. ``OVERRIDES`` below, for arguments the inference gets wrong;
3. inference from the kernel's source: an argument is a tensor descriptor when it (or a callee's
   parameter it becomes) has ``.load`` / ``.store`` called on it (block shapes as GEMM operands:
   A [BM, BK], B [BN, BK], C [BM, BN]); it is a pointer when it (or arithmetic on it)
   reaches a load, store, atomic, descriptor, ``dl.*`` / ``language_extra`` access,
   ``libshmem_device`` pointer argument, or a pointer parameter of a ``@jit`` function it calls;
   the pointee comes from that use (signal words are int64, flags int32) or from its name
   (indices and counts int32, data fp16). Constexprs take their default, a literal at a launch
   site, or a value their name implies (BLOCK_* 64, booleans False, world sizes 8).

If a compile fails because an argument had the wrong kind, the error names the call, whose
arguments lead back to kernel parameters; the fix is applied and the kernel compiled again
(a few rounds). What still fails is printed with the first line of its reason.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import sys
import types
from pathlib import Path

POINTER_SINKS = {  # callee -> (positions of pointer arguments, pointee hint)
    "load": ((0,), None), "store": ((0,), None), "make_block_ptr": ((0,), None),
    "make_tensor_descriptor": ((0,), None), "atomic_add": ((0,), "i32"), "atomic_cas": ((0,), "i32"),
    "atomic_xchg": ((0,), "i32"), "atomic_max": ((0,), "i32"), "atomic_min": ((0,), "i32"),
    "atomic_and": ((0,), "i32"), "atomic_or": ((0,), "i32"), "atomic_xor": ((0,), "i32"),
    "wait": ((0,), "i32"), "notify": ((0,), "i64"), "symm_at": ((0,), None), "ld": ((0,), "i32"),
    "st": ((0,), "i32"), "ld_acquire": ((0,), "i32"), "st_release": ((0,), "i32"), "ld_b32": ((0,), "i32"),
    "st_b32": ((0,), "i32"), "red_release": ((0,), "i32"), "arrive_inc": ((0,), "i32"),
    "arrive_inc_asm": ((0,), "i32"), "atomic_add_per_warp": ((0,), "i32"), "wait_eq": ((0,), "i32"),
    "ld_vector": ((0,), None), "st_vector": ((0,), None), "load_v4_u32": ((0,), "i32"),
    "load_v4_b32": ((0,), "i32"), "load_v4_s32": ((0,), "i32"), "load_v2_b64": ((0,), "i64"),
    "st_v4_u32": ((0,), "i32"), "st_v4_b32": ((0,), "i32"), "st_v2_u32": ((0,), "i32"),
    "wait_value": ((0,), "i64"), "notify_thread": ((0,), "i64"),
}
DESCRIPTOR_METHODS = {"load", "store", "atomic_add", "atomic_min", "atomic_max", "gather", "scatter"}
PRESERVE = {"multiple_of", "max_contiguous", "max_constancy", "symm_at", "consume_token", "remote_ptr",
            "broadcast_to", "reshape", "expand_dims", "advance"}
INT_NAMES = re.compile(r"barrier|flag|counter|count|sync|ready|idx|index|indic|offset|split|_ids?\b|ids_|num_|"
                       r"cumsum|sorted|tiled|segment|expert|token|M_pad|tile|lock|workspace|len|mask|schedule|"
                       r"table|seqlen|topk|rank|_done|done_|recv_buf_offset|reqs|workspace|gather_index|"
                       r"scatter_index|M_ptr|group", re.I)
SIGNAL_NAMES = re.compile(r"signal|\bsig|_sig", re.I)
FLOAT_SCALARS = re.compile(r"scale|eps|soft_cap|temperature|alpha|beta", re.I)
BOOL_CONSTEXPR = re.compile(r"^(use_|has_|is_|with_|fuse_|enable_|debug|profiling|launch_cooperative_grid|"
                            r"epilogue_subtile|warp_specialize|fp8_fast|fp8_output|online_quant|persistent|"
                            r"input_is|copy_to|save_|store_|skip_|"
                            r"inter_node_with_ll|need_|need|straggler|local_copy|transpose)", re.I)


def _unit_strides(names) -> set:
    """The innermost stride of each tensor: the last of consecutive stride_<t><dim> (or
    stride_<t>_<dim>) parameters of one tensor <t>, e.g. stride_ak of stride_am, stride_ak."""
    groups: dict = {}
    for n in names:
        if n.startswith("stride"):
            rest = n[len("stride"):].lstrip("_")
            groups.setdefault(rest.rsplit("_", 1)[0] if "_" in rest else rest[:-1], []).append(n)
    return {g[-1] for g in groups.values() if len(g) >= 2}

# (file stem, kernel) -> {argument: type, or constexpr value (None included)}: what the inference
# gets wrong, with why.
OVERRIDES: dict = {
    # Its host wrapper passes both scatter-index tensors as None unless asked (defaults).
    ("ep_all2all_fused", "kernel_get_ag_splits_and_recv_offset"): {"full_global_scatter_indices": None,
                                                                  "full_local_scatter_indices": None},
    # Read through a helper the analysis does not follow; the tile constexprs must agree.
    ("sp_ulysess_o_all2all_gemm", "kernel_all2all_push_intra_node_nvl"): {"attn_out_ptr": "*fp16", "local_head": 4,
                                                                        "head_dim": 128, "BLOCK_M": 64,
                                                                        "BLOCK_N": 128},
    ("sp_ulysess_qkv_gemm_all2all", "kernel_all2all_pull_intra_node_nvl"): {"qkv_out_features": 6144,
                                                                          "head_dim": 128, "gqa": 4,
                                                                          "BLOCK_SIZE_N": 128},
}


# ---------------------------------------------------------------- a fake sm_90 device for imports
def fake_sm90() -> None:
    """torch.cuda answers device queries as one H100 (sm_90): the ported modules ask at import
    (config spaces, SM counts), and this machine may have no GPU."""
    import torch

    props = types.SimpleNamespace(major=9, minor=0, name="NVIDIA H100 (compile only)", multi_processor_count=132,
                                  total_memory=80 << 30, max_shared_memory_per_block_optin=227 * 1024,
                                  L2_cache_size=50 << 20, warp_size=32, regs_per_multiprocessor=65536,
                                  shared_memory_per_block_optin=227 * 1024)
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.get_device_capability = lambda *a, **k: (9, 0)
    cuda.get_device_properties = lambda *a, **k: props
    cuda.get_device_name = lambda *a, **k: props.name


# ---------------------------------------------------------------- source analysis
def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def launched_names(files) -> tuple[set, dict]:
    """Names called as ``X[grid](...)`` in ``files``, and the literal arguments (by position
    and keyword) of the first launch site: under (file stem, name) that file's, under name any."""
    names, literals = set(), {}
    for path in files:
        calls = [n for n in ast.walk(ast.parse(Path(path).read_text())) if isinstance(n, ast.Call)]
        for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):  # the first site in the file
            if isinstance(node.func, ast.Subscript):
                v = node.func.value
                name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
                if not name:
                    continue
                names.add(name)
                site = {i: a.value for i, a in enumerate(node.args) if isinstance(a, ast.Constant)}
                site.update({kw.arg: kw.value.value for kw in node.keywords
                             if kw.arg and isinstance(kw.value, ast.Constant)})
                # One launch site's literals together (two sites may pass different, consistent sets).
                literals.setdefault((Path(path).stem, name), site)
                literals.setdefault(name, site)
    return names, literals


def _jit_class():
    from triton.runtime.jit import JITFunction

    return JITFunction


class Analysis:
    """Which parameters of a ``@jit`` function are pointers, with a pointee hint."""

    def __init__(self):
        self.memo: dict = {}

    def pointers(self, jitfn) -> dict:
        key = id(jitfn)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = {}
        fdef = ast.parse(jitfn.src).body[0]
        params = [a.arg for a in fdef.args.args]
        env = {p: {p} for p in params}
        out: dict = {}

        def roots(e) -> set:
            if isinstance(e, ast.Name):
                return set(env.get(e.id, ()))
            if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
                # ptr + offset: the pointer is on the left, as these kernels write it
                left = roots(e.left)
                return left if left or isinstance(e.op, ast.Sub) else roots(e.right)
            if isinstance(e, ast.Subscript):
                return roots(e.value)
            if isinstance(e, ast.IfExp):
                return roots(e.body) | roots(e.orelse)
            if isinstance(e, ast.Call):
                name = _callee(e)
                if name in PRESERVE and e.args:
                    return roots(e.args[0])
                if name == "where" and len(e.args) == 3:
                    return roots(e.args[1]) | roots(e.args[2])
                if name in ("to", "cast") and "pointer_type" in ast.unparse(e):
                    return roots(e.args[0]) if name == "cast" and e.args else roots(e.func.value)
            return set()

        def mark(rs, hint):
            for r in rs:
                if r in params and (r not in out or (out[r] is None and hint) or hint == "desc"):
                    out[r] = hint

        for _ in range(2):  # twice: a name assigned in a loop may be read above its assignment
            for node in ast.walk(fdef):
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            env[t.id] = env.get(t.id, set()) | roots(node.value)
                elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    if not env.get(node.target.id) and isinstance(node.op, ast.Add):  # x += y is x = x + y
                        env[node.target.id] = roots(node.value)
        glb = jitfn.fn.__globals__
        JITFunction = _jit_class()  # noqa: N806
        for node in ast.walk(fdef):
            if isinstance(node, ast.Attribute) and node.attr == "element_ty" and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "dtype":
                mark(roots(node.value.value), None)
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr in DESCRIPTOR_METHODS \
                    and roots(node.func.value):
                mark(roots(node.func.value), "desc")  # desc.load([...]) on a parameter: a tensor descriptor
                continue
            name = _callee(node)
            kwargs = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            for kw in ("pointer", "base", "ptr", "barrier_ptr"):
                if kw in kwargs:
                    mark(roots(kwargs[kw]), None)
            target = glb.get(name) if isinstance(node.func, ast.Name) else self._attr(node.func, glb)
            sub = target if isinstance(target, JITFunction) else getattr(target, "fn", None)
            if isinstance(sub, JITFunction):  # a @jit callee
                inner = self.pointers(sub)
                for i, a in enumerate(node.args):
                    if i < len(sub.arg_names) and sub.arg_names[i] in inner:
                        mark(roots(a), inner[sub.arg_names[i]])
                for k, v in kwargs.items():
                    if k in inner:
                        mark(roots(v), inner[k])
                continue
            shm = self._libshmem(target)
            if shm is not None:
                for i, hint in shm:
                    if i < len(node.args):
                        mark(roots(node.args[i]), hint)
                continue
            if name in POINTER_SINKS:
                positions, hint = POINTER_SINKS[name]
                for i in positions:
                    if i < len(node.args):
                        mark(roots(node.args[i]), hint)
        self.memo[key] = out
        return out

    @staticmethod
    def _attr(f, glb):
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            mod = glb.get(f.value.id)
            return getattr(mod, f.attr, None) if mod is not None else None
        return None

    @staticmethod
    def _libshmem(fn):
        """[(position, pointee hint)] of a libshmem_device binding's pointer arguments."""
        if fn is None or getattr(fn, "__module__", "") != "rshmem.triton.libshmem_device":
            return None
        line = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        m = re.match(r"\w+\((.*)\)", line)
        if not m:
            return None
        out = []
        for i, arg in enumerate(a.strip() for a in m.group(1).split(",") if a.strip()):
            if "pointer" in arg:
                to = re.search(r"pointer to (\w+)", arg)
                out.append((i, {"int64": "i64", "uint64": "i64", "int32": "i32"}.get(to.group(1)) if to else None))
        return out


def _descriptor_type(name: str, consts: dict) -> str:
    """A GEMM operand's descriptor as Triton-distributed's host code builds it: A [BM, BK],
    B [BN, BK], C [BM, BN] (BN / 2 with EPILOGUE_SUBTILE), fp16."""
    bm, bn, bk = (consts.get(f"BLOCK_SIZE_{d}", consts.get(f"BLOCK_{d}", 64)) for d in "MNK")
    shape = {"a": (bm, bk), "b": (bn, bk)}.get(name[0].lower(), (bm, bn // 2 if consts.get("EPILOGUE_SUBTILE") else bn))
    return f"tensordesc<fp16[{shape[0]}, {shape[1]}]>"


def _ptr_type(name: str, hint) -> str:
    if hint:
        return "*" + hint
    if SIGNAL_NAMES.search(name):
        return "*i64"
    if INT_NAMES.search(name):
        return "*i32"
    return "*fp16"


def _constexpr_guess(name: str):
    low = name.lower()
    if BOOL_CONSTEXPR.search(name):
        return False
    if low in ("world_size", "num_ranks", "local_world_size", "nranks", "tp_size", "num_local_ranks", "num_ranks"):
        return 8
    if low in ("rank", "local_rank"):
        return 0
    if low in ("nnodes",):
        return 1
    if low in ("n_numa_nodes", "numa_nodes"):
        return 2  # the NUMA kernels assert two NUMA nodes
    if low in ("sp_size", "tp_world_size", "ep_size"):
        return 8
    if low in ("m", "n", "k", "hidden", "hidden_size", "hidden_dim", "max_m"):
        return 1024
    if low == "head_dim":
        return 64
    if low in ("vec", "vec_size"):
        return 8  # 16 bytes of fp16
    if "comm" in low and "sm" in low:
        return 16  # the SMs kept for communication
    if "num_sms" in low or low.endswith("_sms"):
        return 132
    if low.startswith("group_size"):
        return 8
    if "block" in low or "tile" in low or low in ("bt", "bk", "bv"):
        return 64
    if low in ("topk", "top_k"):
        return 8
    if "element_size" in low:
        return 2
    return 128


def parse_aot_signature(jitfn, space: dict):
    """(signature, constexprs, options) from an aot_compile_spaces entry."""
    info = dict(space["triton_algo_infos"][0])
    opts = {k: info.pop(k) for k in ("num_warps", "num_stages") if k in info}
    sig, consts = {}, {}
    tokens = [t.strip() for t in space["signature"].split(",")]
    for name, tok in zip(jitfn.arg_names, tokens):
        if tok.startswith("%"):
            consts[name] = info[tok[1:]]
        else:
            ty, _, spec = tok.partition(":")
            if spec == "1" and not ty.startswith("*"):
                consts[name] = 1
            else:
                sig[name] = ty
    return sig, consts, opts


class Kernel:
    def __init__(self, stem: str, name: str, jitfn, autotuner=None):
        self.stem, self.name, self.jit, self.autotuner = stem, name, jitfn, autotuner
        self.sig: dict = {}
        self.consts: dict = {}
        self.opts: dict = {"num_warps": 4, "num_stages": 3}
        self.source = "inferred"

    @property
    def label(self) -> str:
        return f"{self.stem}::{self.name}"


def plan(k: Kernel, analysis: Analysis, literals: dict) -> None:
    """Fills k.sig / k.consts / k.opts."""
    spaces = getattr(k.jit, "__aot_compile_spaces__", None) or getattr(k.autotuner, "__aot_compile_spaces__", None)
    if spaces:
        sig, consts, opts = parse_aot_signature(k.jit, next(iter(spaces.values())))
        k.sig, k.consts, k.source = sig, consts, "aot_compile_spaces"
        k.opts.update(opts)
    cfg = {}
    if k.autotuner is not None and getattr(k.autotuner, "configs", None):
        c = k.autotuner.configs[0]
        cfg = dict(c.kwargs)
        k.opts.update(num_warps=c.num_warps, num_stages=c.num_stages)
    ptrs = analysis.pointers(k.jit)
    over = OVERRIDES.get((k.stem, k.name), {})
    site = literals.get((k.stem, k.name), literals.get(k.name, {}))
    for opt in ("num_warps", "num_stages"):  # launch options of that site
        if isinstance(site.get(opt), int):
            k.opts[opt] = site[opt]
    seen = {(k.jit.arg_names[key] if isinstance(key, int) and key < len(k.jit.arg_names) else key): v
            for key, v in site.items()}
    unit = _unit_strides(k.jit.arg_names)
    for p in k.jit.params:  # constexprs first: descriptor block shapes use them
        n = p.name
        if n in k.sig or n in k.consts or not p.is_constexpr:
            continue
        if n in over:
            k.consts[n] = over[n]
        elif n in cfg:
            k.consts[n] = cfg[n]
        elif p.default is not inspect.Parameter.empty:
            k.consts[n] = p.default.value if hasattr(p.default, "value") else p.default
        elif n in seen:
            k.consts[n] = seen[n]
        else:
            k.consts[n] = _constexpr_guess(n)
    for p in k.jit.params:
        n = p.name
        if n in k.sig or n in k.consts:
            continue
        if n in over:
            (k.consts if over[n] is None else k.sig)[n] = over[n]
        elif ptrs.get(n) == "desc":  # host-side TensorDescriptor argument
            k.sig[n] = _descriptor_type(n, {**cfg, **k.consts})
        elif seen.get(n, 0) is None:
            k.consts[n] = None  # a launch passes None: Triton makes it a constexpr
        elif n in unit:
            k.consts[n] = 1  # Triton specializes an argument equal to 1, as an innermost stride is
        elif "tuple" in n.lower():
            k.sig[n] = ("i32",) * 9
        elif n in ptrs:
            k.sig[n] = _ptr_type(n, ptrs[n])
        else:
            k.sig[n] = "fp32" if FLOAT_SCALARS.search(n) else "i32"
    if "num_warps" in k.consts:
        k.opts["num_warps"] = k.consts["num_warps"]


def _params_of_failure(k: Kernel, err) -> set:
    """Kernel parameters that reach the call a CompilationError points at."""
    node = getattr(err, "node", None)
    if node is None:
        return set()
    if isinstance(node, ast.Call) and node.args:
        node = node.args[0]  # loads, stores, atomics and the library take the pointer first
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    fdef = ast.parse(k.jit.src).body[0]
    env = {a.arg: {a.arg} for a in fdef.args.args}
    for _ in range(2):
        for s in ast.walk(fdef):
            if isinstance(s, ast.Assign):
                used = {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        env[t.id] = env.get(t.id, set()).union(*(env.get(u, set()) for u in used))
    return set().union(*(env.get(n, set()) for n in names)) if names else set()


def fix(k: Kernel, err, message: str) -> bool:
    """Adjusts k after a failed compile; whether anything changed."""
    suspects = [p for p in _params_of_failure(k, err) if p in k.sig]
    m = re.search(r"it takes ([\w ,]+)\)", message) or re.search(r"must point to (\w+)", message)
    if m:
        want = {"int64": "*i64", "uint64": "*u64", "int32": "*i32", "uint32": "*u32", "fp16": "*fp16",
                "fp32": "*fp32"}.get(m.group(1).split(",")[0].strip())
        changed = False
        for p in suspects:
            if k.sig[p].startswith("*") and want and k.sig[p] != want:
                k.sig[p] = want
                changed = True
        return changed
    if re.search(r"must be a pointer|Unsupported ptr type|has no attribute 'element_ty'|not a pointer|"
                 r"expected a pointer", message):
        changed = False
        for p in suspects:
            if not k.sig[p].startswith("*"):
                k.sig[p] = _ptr_type(p, None)
                changed = True
        return changed
    if re.search(r"(float|fp16|bf16|fp32).*(pointer|ptr)|(pointer|ptr).*(float|fp16|fp32)|int.*float|"
                 r"floating|Expected dtype", message):
        changed = False
        for p in suspects:
            if k.sig[p] in ("*fp16", "*fp32", "*bf16"):
                k.sig[p] = "*i32"
                changed = True
        return changed
    return False


def compile_one(k: Kernel, bitcode: str):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(fn=k.jit, signature={**k.sig, **{n: "constexpr" for n in k.consts}}, constexprs=k.consts)
    opts = {"extern_libs": (("libshmem_device", bitcode),), **k.opts}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)


def reason(err) -> str:
    """The innermost error's message in one line (Triton's "at L:C: <source>" excerpt dropped)."""
    inner = err
    while (inner.__cause__ or inner.__context__) is not None:
        inner = inner.__cause__ or inner.__context__
    text = str(inner)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#loc")]
    if lines and re.match(r"at \d+:\d+:", lines[0]):
        lines = lines[-1:]  # the excerpt ends with the message
    msg = lines[0] if lines else text
    if "error encountered during parsing" in msg or "PassManager::run failed" in msg:
        mlir = [ln for ln in str(err).splitlines() + text.splitlines() if "error:" in ln]
        msg = mlir[0].split("error:", 1)[1].strip() if mlir else msg
    return f"{type(inner).__name__}: {msg}"[:300]


def _definition(stmt) -> bool:
    """Whether a top-level statement only defines something (no call but tl.constexpr)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        calls = [c for c in ast.walk(stmt.value) if isinstance(c, ast.Call)]
        return all(_callee(c) in ("constexpr", "int", "float", "bool", "str", "get", "getenv") for c in calls)
    return False


def load_definitions(path: Path, modname: str):
    """A tutorial as a module holding its imports, functions, classes and constants only: the
    tutorials run their program at top level, which needs GPUs and peers."""
    tree = ast.parse(path.read_text())
    tree.body = [s for s in tree.body if _definition(s)]
    mod = types.ModuleType(modname)
    mod.__file__ = str(path)
    sys.modules[modname] = mod
    exec(compile(tree, str(path), "exec"), mod.__dict__)  # noqa: S102 (the ported file itself)
    return mod


def compile_all(out: Path, package: str, only: str = "", verbose: bool = False) -> int:
    import triton
    import rshmem.triton as rt

    sys.path.insert(0, str(out.resolve()))
    fake_sm90()
    bitcode = str(rt.bitcode_path())
    kernel_files = sorted((out / package / "kernels").rglob("*.py"))
    tutorial_files = sorted((out / "tutorials").glob("*.py"))
    names, literals = launched_names(kernel_files + tutorial_files)
    analysis = Analysis()
    kernels, import_errors = [], []
    for path in kernel_files + tutorial_files:
        if path.name == "__init__.py":
            continue
        if path.parent.name == "tutorials":
            modname = "tutorial_" + re.sub(r"\W", "_", path.stem)
            loader = (lambda p=path, n=modname: load_definitions(p, n))
        else:
            modname = ".".join(path.relative_to(out).with_suffix("").parts)
            loader = (lambda n=modname: importlib.import_module(n))
        try:
            mod = loader() or sys.modules[modname]
        except BaseException as e:  # noqa: BLE001 (a module that cannot import is a reported failure)
            import_errors.append((path.relative_to(out), f"{type(e).__name__}: {e}".splitlines()[0][:300]))
            continue
        for attr, obj in vars(mod).items():
            jit = obj if isinstance(obj, triton.runtime.jit.JITFunction) else getattr(obj, "fn", None)
            if not isinstance(jit, triton.runtime.jit.JITFunction) or jit.fn.__module__ != mod.__name__:
                continue
            aot = hasattr(jit, "__aot_compile_spaces__") or hasattr(obj, "__aot_compile_spaces__")
            if attr in names or aot:
                kernels.append(Kernel(path.stem, attr, jit, obj if obj is not jit else None))
    for path, why in import_errors:
        print(f"IMPORT-FAIL {path}: {why}")
    ok = multicast = 0
    failed = []
    for k in kernels:
        if only and only not in k.label:
            continue
        try:
            plan(k, analysis, literals)
        except Exception as e:  # noqa: BLE001
            failed.append((k, f"could not work out the signature: {type(e).__name__}: {e}"))
            print(f"FAIL  {k.label}: could not work out the signature: {e}")
            continue
        why = None
        for _ in range(6):
            try:
                compiled = compile_one(k, bitcode)
                calls = re.findall(r"\bcall(?:\.uni)?\s+\S+", compiled.asm["ptx"])
                why = f"a call left in the PTX: {calls[0]}" if calls else None
                break
            except Exception as e:  # noqa: BLE001
                why = reason(e)
                if not fix(k, e, str(e) + " " + why):
                    break
        sig = ", ".join(f"{n}:{t}" for n, t in k.sig.items())
        if why is None:
            ok += 1
            print(f"OK    {k.label} [{k.source}] ({sig})")
        elif "multicast" in why:
            multicast += 1
            print(f"MCAST {k.label}: {why}")
        else:
            failed.append((k, why))
            print(f"FAIL  {k.label}: {why}" + (f"  [{k.source}: {sig}]" if verbose else ""))
    total = ok + multicast + len(failed)
    print(f"\n{total} kernels: {ok} compiled, {multicast} refused for NVLink multicast, {len(failed)} failed; "
          f"{len(import_errors)} modules did not import")
    return 0 if not failed and not import_errors else 1
