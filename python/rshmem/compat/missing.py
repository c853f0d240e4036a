"""Names that Triton-distributed has and rshmem does not, importable so that a ported module
loads; using one (calling it, also inside a kernel) raises NotImplementedError with the reason.

tools/port_triton_dist.py routes ``from triton_dist.X import name`` here for every name that
rshmem's counterpart of ``triton_dist.X`` lacks, so one missing helper does not stop a whole
package (Triton-distributed's ``kernels/nvidia/__init__.py`` imports every kernel module) from
importing. ``from rshmem.compat.missing import Profiler`` gives a placeholder named Profiler.
"""
from __future__ import annotations

# Why each known name is missing, by the Triton-distributed module it comes from.
_REASONS = {
    "triton_dist.language.smem_ops": "explicit shared-memory allocation needs Triton-distributed's compiler "
                                     "(stock Triton allocates shared memory itself)",
    "triton_dist.language.tma": "Triton-distributed's hand-written TMA pipelines need its compiler; stock Triton "
                                "pipelines tl.make_tensor_descriptor loads itself",
    "triton_dist.language.extra.cuda.tma_language": "Triton-distributed's hand-written TMA pipelines need its "
                                                    "compiler",
    "triton._C.libtriton_distributed": "Triton-distributed's library of ahead-of-time compiled kernels is part of "
                                       "its build; rshmem compiles just in time",
    "triton_dist.language.extra.hip": "AMD GPUs: rshmem runs on NVIDIA GPUs",
    "pyrocshmem": "AMD GPUs: rshmem runs on NVIDIA GPUs",
}
_ORIGIN = {
    "allocate_smem": "triton_dist.language.smem_ops",
    "TmaPipeline": "triton_dist.language.tma", "PipelineState": "triton_dist.language.tma",
    "create_tmap_2d": "triton_dist.language.tma", "ELEM_BF16": "triton_dist.language.tma",
    "SWIZZLE_NONE": "triton_dist.language.tma", "distributed": "triton._C.libtriton_distributed",
    "pyrocshmem": "pyrocshmem",
}


class Missing:
    """A placeholder for ``name``: attribute access gives another placeholder, calling raises."""
    __triton_builtin__ = True  # so that a kernel calling it reaches __call__ and its message

    def __init__(self, name: str, origin: str | None = None):
        self._name = name
        self._origin = origin or _ORIGIN.get(name.split(".")[0])

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}", self._origin)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self.reason())

    def reason(self) -> str:
        where = f" (from {self._origin})" if self._origin else ""
        why = _REASONS.get(self._origin, "rshmem has no counterpart yet")
        return (f"{self._name}{where} is not provided by rshmem: {why}. See docs/porting-from-triton-distributed.md")

    def __repr__(self):
        return f"<missing {self._name}>"


def __getattr__(name: str) -> Missing:
    if name.startswith("__"):
        raise AttributeError(name)
    return Missing(name)
