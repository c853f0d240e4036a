"""Two PTX registers read from Triton, shared by the rshmem and the NVSHMEM kernels so both are
timed and guarded the same way (and so the NVSHMEM kernels need nothing from rshmem)."""
import triton
import triton.language as tl


@triton.jit
def globaltimer():
    """The GPU's nanosecond clock (%globaltimer), int64; not reordered with the memory operations
    around it (is_pure=False)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def thread_id():
    """%tid.x: this thread's index in the CTA, int32."""
    return tl.inline_asm_elementwise("mov.u32 $0, %tid.x;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)
