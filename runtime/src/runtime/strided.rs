//! Strided remote memory access: `iput` / `iget` (OpenSHMEM's and NVSHMEM's `nvshmem_<T>_iput`,
//! `nvshmem_iput32`, ...).
//!
//! Element `i` goes between `dest + i * dst_stride` and `source + i * src_stride` (strides in
//! elements). Both sides are checked as whole spans before the first element moves, so a bad
//! call copies nothing; then each element is one [`Runtime::putmem`] / [`Runtime::getmem`].
#![allow(unsafe_code)]

use super::raw::Access;
use super::Runtime;
use crate::error::{Error, Result};
use crate::heap::SymAddr;

/// The element sizes of the strided calls (NVSHMEM's `iput8` ... `iput128`).
const ELEM_SIZES: [usize; 5] = [1, 2, 4, 8, 16];

/// The addresses of element `i` of a strided side: `base + i * stride * elem`.
#[derive(Debug, Clone, Copy)]
struct Side {
    base: usize,
    step: i128,
}

impl Side {
    fn new(what: &str, name: &str, base: usize, stride: i64, elem: usize) -> Result<Side> {
        let step = i128::from(stride) * elem as i128;
        if stride == 0 && name == "destination" {
            return Err(Error::InvalidArgument(format!(
                "{what}: the destination stride is 0, so every element would land on one; pass a \
                 stride of at least 1"
            )));
        }
        Ok(Side { base, step })
    }

    fn at(self, i: usize) -> usize {
        (self.base as i128 + i as i128 * self.step) as usize
    }

    /// The lowest address and the byte length covering elements `0..n` of `elem` bytes.
    fn span(self, what: &str, n: usize, elem: usize) -> Result<(usize, usize)> {
        let last = self.base as i128 + (n as i128 - 1) * self.step;
        let (lo, hi) = if self.step < 0 { (last, self.base as i128) } else { (self.base as i128, last) };
        if lo < 0 || hi + elem as i128 > usize::MAX as i128 {
            return Err(Error::InvalidArgument(format!(
                "{what}: {n} elements at stride {} bytes from {:#x} leave the address space",
                self.step, self.base
            )));
        }
        Ok((lo as usize, (hi - lo) as usize + elem))
    }
}

impl Runtime {
    fn strided_sides(
        &self,
        what: &str,
        elem: usize,
        (dest, dst_stride): (usize, i64),
        (source, src_stride): (usize, i64),
    ) -> Result<(Side, Side)> {
        if !ELEM_SIZES.contains(&elem) {
            return Err(Error::InvalidArgument(format!(
                "{what}: element size {elem} bytes is not one of {ELEM_SIZES:?}"
            )));
        }
        Ok((Side::new(what, "destination", dest, dst_stride, elem)?, Side::new(what, "source", source, src_stride, elem)?))
    }

    /// Copies `nelems` elements of `elem` bytes from local `source` (every `src_stride`-th
    /// element) to symmetric `dest` on `pe` (every `dst_stride`-th element). Strides count
    /// elements; the source stride may be 0 (one value copied to every place).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an element size other than 1, 2, 4, 8 or 16, a zero
    /// destination stride, or a local span that is not readable memory of this process; as
    /// [`Runtime::putmem`] for the symmetric span (checked whole before anything is copied).
    ///
    /// # Safety
    /// Every source element must be readable for the duration of the call.
    #[allow(clippy::too_many_arguments)]
    #[doc(alias = "nvshmem_iput")]
    pub unsafe fn iput(
        &self,
        dest: SymAddr,
        source: usize,
        dst_stride: i64,
        src_stride: i64,
        nelems: usize,
        elem: usize,
        pe: usize,
    ) -> Result<()> {
        let what = "iput";
        let (d, s) = self.strided_sides(what, elem, (dest.get(), dst_stride), (source, src_stride))?;
        if nelems == 0 {
            return self.check_pe(pe);
        }
        let (lo, len) = d.span(what, nelems, elem)?;
        self.user_remote(SymAddr::new(lo), len, pe, what)?;
        let (slo, slen) = s.span(what, nelems, elem)?;
        self.check_local_buffer(slo, slen, Access::Read)?;
        for i in 0..nelems {
            // SAFETY: element i lies in the source span checked readable above.
            unsafe { self.putmem(SymAddr::new(d.at(i)), s.at(i), elem, pe)? };
        }
        Ok(())
    }

    /// Copies `nelems` elements of `elem` bytes from symmetric `source` on `pe` (every
    /// `src_stride`-th element) to local `dest` (every `dst_stride`-th element).
    ///
    /// # Errors
    /// As [`Runtime::iput`], with the local span checked writable.
    ///
    /// # Safety
    /// Every destination element must be writable and not otherwise accessed during the call.
    #[allow(clippy::too_many_arguments)]
    #[doc(alias = "nvshmem_iget")]
    pub unsafe fn iget(
        &self,
        dest: usize,
        source: SymAddr,
        dst_stride: i64,
        src_stride: i64,
        nelems: usize,
        elem: usize,
        pe: usize,
    ) -> Result<()> {
        let what = "iget";
        let (d, s) = self.strided_sides(what, elem, (dest, dst_stride), (source.get(), src_stride))?;
        if nelems == 0 {
            return self.check_pe(pe);
        }
        let (lo, len) = s.span(what, nelems, elem)?;
        self.user_remote(SymAddr::new(lo), len, pe, what)?;
        let (dlo, dlen) = d.span(what, nelems, elem)?;
        self.check_local_buffer(dlo, dlen, Access::Write)?;
        for i in 0..nelems {
            // SAFETY: element i lies in the destination span checked writable above.
            unsafe { self.getmem(d.at(i), SymAddr::new(s.at(i)), elem, pe)? };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Side;

    #[test]
    fn spans_cover_every_element_either_way() {
        let up = Side::new("t", "destination", 0x1000, 3, 4).unwrap();
        assert_eq!(up.at(2), 0x1000 + 24);
        assert_eq!(up.span("t", 3, 4).unwrap(), (0x1000, 28));
        let down = Side::new("t", "source", 0x1000, -2, 8).unwrap();
        assert_eq!(down.at(1), 0x1000 - 16);
        assert_eq!(down.span("t", 3, 8).unwrap(), (0x1000 - 32, 40));
        let still = Side::new("t", "source", 0x1000, 0, 8).unwrap();
        assert_eq!(still.span("t", 5, 8).unwrap(), (0x1000, 8));
    }

    #[test]
    fn bad_strides_and_spans_are_refused() {
        assert!(Side::new("t", "destination", 0x1000, 0, 4).is_err());
        let down = Side::new("t", "source", 0x10, -4, 8).unwrap();
        assert!(down.span("t", 3, 8).is_err());
    }
}
