//! Remote memory access: `putmem`, `putmem_nbi`, `getmem`, `p`, `g`.
//!
//! On the host backend every node-local peer's heap is mapped in this process, so a put or a
//! get is one copy between the caller's memory and the peer's mapped copy; a PE on another host
//! is reached through the network transport (`transport/`). Blocking: when the
//! call returns, the data is in place (a put is also visible to the target after the target
//! synchronizes with this PE, e.g. through a barrier or a signal).
//!
//! # Safety
//! `putmem` / `getmem` take the caller's local buffer as a raw address (the Python layer hands
//! tensor data pointers); the caller promises it is valid for `nbytes`. The symmetric side is
//! range-checked through the heap. `p` / `g` use Rust values and are safe.
#![allow(unsafe_code)]

use super::mem::{check_disjoint, Place};
use super::Runtime;
use crate::dtype::Element;
use crate::error::Result;
use crate::heap::SymAddr;

impl Runtime {
    /// Copies `nbytes` from local memory `source` to symmetric `dest` on PE `pe`.
    ///
    /// # Errors
    /// [`crate::Error::PeOutOfRange`], [`crate::Error::NotSymmetric`] when `dest..dest+nbytes`
    /// is not inside the heap, [`crate::Error::NotAllocated`] when it is not inside one live
    /// allocation of the program's, [`crate::Error::PeerDied`] once a peer is known dead,
    /// [`crate::Error::InvalidArgument`] when the ranges overlap.
    ///
    /// # Safety
    /// `source` must be readable for `nbytes` bytes for the duration of the call.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/rma.html>
    #[doc(alias = "nvshmem_putmem")]
    pub unsafe fn putmem(&self, dest: SymAddr, source: usize, nbytes: usize, pe: usize) -> Result<()> {
        if nbytes == 0 {
            return self.check_pe(pe);
        }
        match self.user_remote(dest, nbytes, pe, "putmem")? {
            Place::Mapped(d) => {
                check_disjoint(d, source, nbytes)?;
                // SAFETY: `d` is mapped for `nbytes` (translate); the caller vouches for
                // `source`; the ranges are disjoint (checked).
                unsafe { self.mem.copy(d, source, nbytes) }
            }
            // SAFETY: the caller vouches for `source`.
            Place::Net { pe, offset } => unsafe { self.net()?.put(pe, offset, source, nbytes) },
        }
    }

    /// Starts copying `nbytes` from local memory `source` to symmetric `dest` on PE `pe`, and
    /// returns without waiting: the copy is complete at `pe` once this PE's next
    /// [`Runtime::quiet`] (or barrier) returns. To a PE on another host the put is handed to
    /// the network transport and `source` is read until then; a node-local peer's copy is done
    /// before the call returns.
    ///
    /// # Errors
    /// As [`Runtime::putmem`]; an earlier non-blocking put that failed may report its error
    /// here or at the next `quiet`.
    ///
    /// # Safety
    /// `source` must be readable for `nbytes` bytes, and not written, until this PE's next
    /// `quiet` (or barrier) returns.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/rma.html>
    #[doc(alias = "nvshmem_putmem_nbi")]
    pub unsafe fn putmem_nbi(&self, dest: SymAddr, source: usize, nbytes: usize, pe: usize) -> Result<()> {
        if nbytes == 0 {
            return self.check_pe(pe);
        }
        match self.user_remote(dest, nbytes, pe, "putmem_nbi")? {
            Place::Mapped(d) => {
                check_disjoint(d, source, nbytes)?;
                // SAFETY: as in `putmem`.
                unsafe { self.mem.copy(d, source, nbytes) }
            }
            // SAFETY: the caller keeps `source` readable and unchanged until the next quiet.
            Place::Net { pe, offset } => unsafe { self.net()?.put_nbi(pe, offset, source, nbytes) },
        }
    }

    /// Copies `nbytes` from symmetric `source` on PE `pe` to local memory `dest`.
    ///
    /// # Errors
    /// As [`Runtime::putmem`], for `source`.
    ///
    /// # Safety
    /// `dest` must be writable for `nbytes` bytes and not otherwise accessed during the call.
    #[doc(alias = "nvshmem_getmem")]
    pub unsafe fn getmem(&self, dest: usize, source: SymAddr, nbytes: usize, pe: usize) -> Result<()> {
        if nbytes == 0 {
            return self.check_pe(pe);
        }
        match self.user_remote(source, nbytes, pe, "getmem")? {
            Place::Mapped(s) => {
                check_disjoint(dest, s, nbytes)?;
                // SAFETY: `s` is mapped for `nbytes` (translate); the caller vouches for `dest`;
                // the ranges are disjoint (checked).
                unsafe { self.mem.copy(dest, s, nbytes) }
            }
            // SAFETY: the caller vouches for `dest`.
            Place::Net { pe, offset } => unsafe { self.net()?.get(pe, offset, dest, nbytes) },
        }
    }

    /// Writes one element to symmetric `dest` on PE `pe`.
    ///
    /// # Errors
    /// As [`Runtime::putmem`].
    #[doc(alias = "nvshmem_p")]
    pub fn p<T: Element>(&self, dest: SymAddr, value: T, pe: usize) -> Result<()> {
        let mut bytes = [0u8; 8];
        let n = T::DTYPE.size();
        value.write_ne(&mut bytes[..n]);
        self.user_remote(dest, n, pe, "p")?;
        self.write_heap(dest.get(), pe, &bytes[..n])
    }

    /// Reads one element from symmetric `source` on PE `pe`.
    ///
    /// # Errors
    /// As [`Runtime::getmem`].
    #[doc(alias = "nvshmem_g")]
    pub fn g<T: Element>(&self, source: SymAddr, pe: usize) -> Result<T> {
        let mut bytes = [0u8; 8];
        let n = T::DTYPE.size();
        self.user_remote(source, n, pe, "g")?;
        self.read_heap(source.get(), pe, &mut bytes[..n])?;
        Ok(T::read_ne(&bytes[..n]))
    }
}
