//! Typed arrays of symmetric allocations (feature `ndarray`): the `ndarray` types Rust numeric
//! code uses, over the untyped addresses of the host API.
//!
//! - [`Runtime::get_array`] / [`Runtime::put_array`]: an owned array copied from or to any PE's
//!   copy of a symmetric allocation, on either backend (`getmem` / `putmem` with the shape's
//!   element count checked against the allocation).
//! - [`Runtime::array_view`] / [`Runtime::array_view_mut`]: views straight into a PE's copy
//!   where this process maps it as host memory (the host backend; the cuda backend's heap is
//!   GPU memory, which a Rust reference cannot point into).
//!
//! # Safety
//! Every range is checked by `Runtime::user_remote` (inside one live allocation of the
//! program's, mapped in this process for its whole length) before it is read, written or
//! viewed. The views are `unsafe fn`s: other PEs and `free` can change or unmap the memory
//! behind a Rust reference, which only the caller can rule out.
#![allow(unsafe_code)]

use super::Runtime;
use crate::backend::BackendKind;
use crate::dtype::Element;
use crate::heap::SymAddr;
use crate::error::{Error, Result};
use ndarray::{Array, ArrayBase, ArrayView, ArrayViewMut, Data, Dimension, ShapeBuilder};

impl Runtime {
    /// Copies the elements at symmetric `src` on PE `pe` into a new array of `shape`
    /// (row-major unless the shape says `.f()`), as `nvshmem_getmem` of the shape's bytes.
    ///
    /// # Errors
    /// As [`Runtime::getmem`] ([`Error::NotAllocated`] when the shape holds more elements than
    /// the allocation from `src` on); [`Error::InvalidArgument`] when the size overflows.
    pub fn get_array<T: Element, Sh: ShapeBuilder>(
        &self,
        src: SymAddr,
        shape: Sh,
        pe: usize,
    ) -> Result<Array<T, Sh::Dim>> {
        let shape = shape.into_shape_with_order();
        let count = shape.raw_dim().size();
        let nbytes = bytes_of::<T>(count)?;
        self.check_pe(pe)?;
        let mut data: Vec<T> = Vec::with_capacity(count);
        if nbytes > 0 {
            // SAFETY: the Vec's spare capacity holds `count` elements and is ours alone (getmem
            // checks `src` on `pe`, mapped or through the transport); every bit pattern is a valid
            // `Element` (integers, floats, f16/bf16), so the bytes copied make `count` values.
            unsafe {
                self.getmem(data.as_mut_ptr() as usize, src, nbytes, pe)?;
                data.set_len(count);
            }
        }
        Array::from_shape_vec(shape, data)
            .map_err(|e| Error::InvalidArgument(format!("get_array: {e}")))
    }

    /// Copies `a` (any layout; it is made row-major first when it is not) to symmetric `dst`
    /// on PE `pe`, as `nvshmem_putmem` of its bytes.
    ///
    /// # Errors
    /// As [`Runtime::putmem`].
    pub fn put_array<T: Element, S: Data<Elem = T>, D: Dimension>(
        &self,
        dst: SymAddr,
        a: &ArrayBase<S, D>,
        pe: usize,
    ) -> Result<()> {
        let standard = a.as_standard_layout();
        let elems = standard.as_slice().ok_or_else(|| {
            Error::InvalidArgument("put_array: the array has no contiguous layout".into())
        })?;
        let nbytes = std::mem::size_of_val(elems);
        if nbytes == 0 {
            return self.check_pe(pe);
        }
        // SAFETY: `elems` is a live Rust slice of `nbytes`; putmem checks `dst` on `pe` (mapped
        // or through the transport).
        unsafe { self.putmem(dst, elems.as_ptr() as usize, nbytes, pe) }
    }

    /// A view of `shape` (row-major, or column-major with `.f()`) at symmetric `addr` of PE
    /// `pe`, this PE's own copy or a peer's on the same host, without copying: `nvshmem_ptr`
    /// with a type and a shape. Other strides: slice the view.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on the cuda backend (the heap is GPU memory: use
    /// [`Runtime::get_array`]); as [`Runtime::getmem`] for the range; [`Error::InvalidArgument`]
    /// for an `addr` misaligned for `T`.
    ///
    /// # Safety
    /// While the view lives, nobody (no PE, no kernel, no other view) may write the elements
    /// it covers, and the allocation may not be freed nor the runtime finalized; a barrier
    /// before making it and another after its last use is the usual way.
    pub unsafe fn array_view<T: Element, Sh: ShapeBuilder>(
        &self,
        addr: SymAddr,
        shape: Sh,
        pe: usize,
    ) -> Result<ArrayView<'_, T, Sh::Dim>> {
        let shape = shape.into_shape_with_order();
        let p = self.host_view::<T>(addr, shape.raw_dim().size(), pe, "array_view")?;
        // SAFETY: `p` is aligned and mapped for every element of the contiguous shape
        // (host_view); the caller rules out writes and unmapping while the view lives.
        unsafe { Ok(ArrayView::from_shape_ptr(shape, p as *const T)) }
    }

    /// A mutable view of `shape` at symmetric `addr` of PE `pe`: [`Runtime::array_view`] for
    /// writing.
    ///
    /// # Errors
    /// As [`Runtime::array_view`].
    ///
    /// # Safety
    /// While the view lives, nobody else (no PE, no kernel, no other view) may read or write
    /// the elements it covers, and the allocation may not be freed nor the runtime finalized.
    pub unsafe fn array_view_mut<T: Element, Sh: ShapeBuilder>(
        &self,
        addr: SymAddr,
        shape: Sh,
        pe: usize,
    ) -> Result<ArrayViewMut<'_, T, Sh::Dim>> {
        let shape = shape.into_shape_with_order();
        let p = self.host_view::<T>(addr, shape.raw_dim().size(), pe, "array_view_mut")?;
        // SAFETY: as in array_view; the caller also rules out every other access.
        unsafe { Ok(ArrayViewMut::from_shape_ptr(shape, p as *mut T)) }
    }

    /// Where `count` contiguous `T`s at symmetric `addr` of PE `pe` are mapped in this process,
    /// after checking that they are host memory, aligned, and inside one live allocation.
    fn host_view<T: Element>(
        &self,
        addr: SymAddr,
        count: usize,
        pe: usize,
        what: &str,
    ) -> Result<usize> {
        if self.backend_kind() != BackendKind::Host {
            return Err(Error::Unsupported(format!(
                "{what}: the {} backend's symmetric heap is GPU memory, which a host view cannot \
                 point into; copy with get_array / put_array",
                self.backend_kind().name()
            )));
        }
        let align = std::mem::align_of::<T>();
        if addr.get() % align != 0 {
            return Err(Error::InvalidArgument(format!(
                "{what}: address {addr:#x} is not aligned for {:?} elements ({align} bytes)",
                T::DTYPE
            )));
        }
        // An empty view still names a live allocation: one byte of it is checked.
        let nbytes = bytes_of::<T>(count)?.max(1);
        // A view needs the bytes mapped here: a PE on another host has none.
        self.user_remote(addr, nbytes, pe, what)?.mapped()
    }
}

/// Bytes of `count` elements of `T`.
fn bytes_of<T>(count: usize) -> Result<usize> {
    count
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::InvalidArgument(format!("{count} elements overflow a byte count")))
}
