//! Checks on raw local addresses: the local side of a put or a get that a front end received as
//! a plain integer (Python's `rshmem.putmem(dest, 0x1000, 8, pe)`), which the runtime would
//! otherwise dereference on the caller's word.
//!
//! GPU memory is left to the driver, whose copies refuse a bad device address with an error.
//! Host memory is looked up in the kernel's list of this process's mappings
//! (`/proc/self/maps`): the range must be covered, without a gap, by mappings readable (source)
//! or writable (destination). That read costs tens of microseconds, so front ends ask only for
//! addresses they did not take from a live object of their own (a tensor's `data_ptr()`).
//! Memory unmapped by another thread between the check and the copy is not caught; that is the
//! caller racing with itself.
//!
//! A destination the front end did take from a live object is still checked for writability
//! ([`Runtime::check_writable`]): a tensor over a read-only file mapping (a `numpy.memmap` opened
//! with `mode="r"`, seen through `torch.from_numpy`) has a valid `data_ptr()` that faults when
//! written. That check asks the kernel to copy one byte of every page of the range onto itself
//! (`process_vm_writev` on this process), which fails with `EFAULT` unless every page may be
//! written: one system call per 1024 pages, about a microsecond for a small range, and the bytes
//! are unchanged (the caller is about to overwrite them anyway). Where that call is not allowed
//! (a seccomp filter), the answer is remembered for the process and the maps are read instead.
#![allow(unsafe_code)]

use super::Runtime;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU8, Ordering};

/// What the runtime will do with a local range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read it (the source of a put).
    Read,
    /// Write it (the destination of a get).
    Write,
}

impl Runtime {
    /// Checks that `[addr, addr+len)` is local memory of this process that the runtime may
    /// `access`, before a put or get with that raw address.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the address, the length and what is missing (unmapped,
    /// or mapped without the permission).
    pub fn check_local_buffer(&self, addr: usize, len: usize, access: Access) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        if self.mem.checks_itself(addr)? {
            return Ok(());
        }
        if access == Access::Write && probe_writable(addr, len) == Some(true) {
            return Ok(());
        }
        let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| Error::os("read /proc/self/maps", e))?;
        check_in_maps(&maps, addr, len, access)
    }

    /// Checks that `[addr, addr+len)`, taken from a live tensor or array, may be written: the
    /// cheap probe of the module docs, and the maps only to explain a refusal (or where the probe
    /// is not allowed).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the address, the length and the mapping's permissions.
    pub fn check_writable(&self, addr: usize, len: usize) -> Result<()> {
        if len == 0 || self.mem.checks_itself(addr)? || probe_writable(addr, len) == Some(true) {
            return Ok(());
        }
        let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| Error::os("read /proc/self/maps", e))?;
        check_in_maps(&maps, addr, len, Access::Write).and_then(|()| match probe_writable(addr, len) {
            // Mapped writable, yet the kernel refused a write (e.g. a memory protection key).
            Some(false) => Err(Error::InvalidArgument(format!(
                "local address {addr:#x} (+{len} bytes) is mapped writable but the kernel refuses writes to it \
                 (a protection key or a sealed mapping?); pass writable memory"
            ))),
            _ => Ok(()),
        })
    }
}

/// Whether the probe of the module docs is allowed here: 0 not tried yet, 1 yes, 2 no.
static PROBE: AtomicU8 = AtomicU8::new(0);

#[repr(C)]
struct IoVec {
    base: *mut std::ffi::c_void,
    len: usize,
}

extern "C" {
    fn process_vm_writev(
        pid: i32,
        local: *const IoVec,
        liovcnt: std::ffi::c_ulong,
        remote: *const IoVec,
        riovcnt: std::ffi::c_ulong,
        flags: std::ffi::c_ulong,
    ) -> isize;
}

/// Most iovecs one call takes (`UIO_MAXIOV`).
const MAX_IOV: usize = 1024;

/// Whether every page of `[addr, addr+len)` may be written by this process: `Some(true)` yes,
/// `Some(false)` no (a page is unmapped, read-only or inaccessible), `None` when the kernel does
/// not let this process ask (the caller reads the maps instead). `len` > 0.
fn probe_writable(addr: usize, len: usize) -> Option<bool> {
    if PROBE.load(Ordering::Relaxed) == 2 {
        return None;
    }
    let page = rustix::param::page_size();
    let Some(last) = addr.checked_add(len - 1) else { return Some(false) };
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    // One byte at `addr`, then one at the start of every later page up to `last`.
    let mut at = addr;
    let mut iov: Vec<IoVec> = Vec::with_capacity(MAX_IOV.min(len / page + 2));
    loop {
        iov.clear();
        while iov.len() < MAX_IOV {
            iov.push(IoVec { base: at as *mut std::ffi::c_void, len: 1 });
            match (at / page + 1).checked_mul(page) {
                Some(next) if next <= last => at = next,
                _ => {
                    at = usize::MAX;
                    break;
                }
            }
        }
        // SAFETY: the kernel reads and writes the listed bytes of this process itself, checking
        // every access (a bad one is EFAULT or a short count, never a fault here); each byte is
        // copied onto itself, so memory that may be written keeps its contents.
        let done = unsafe { process_vm_writev(pid, iov.as_ptr(), iov.len() as _, iov.as_ptr(), iov.len() as _, 0) };
        if done < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(code) if code == rustix::io::Errno::FAULT.raw_os_error() => Some(false),
                _ => {
                    tracing::debug!("process_vm_writev on this process is not allowed ({e}); checking writability by /proc/self/maps");
                    PROBE.store(2, Ordering::Relaxed);
                    None
                }
            };
        }
        PROBE.store(1, Ordering::Relaxed);
        if done as usize != iov.len() {
            return Some(false);
        }
        if at == usize::MAX {
            return Some(true);
        }
    }
}

/// The check of [`Runtime::check_local_buffer`] against the text of `/proc/self/maps`.
fn check_in_maps(maps: &str, addr: usize, len: usize, access: Access) -> Result<()> {
    let (want, what) = match access {
        Access::Read => ('r', "readable"),
        Access::Write => ('w', "writable"),
    };
    let bad = |why: String| {
        Error::InvalidArgument(format!(
            "local address {addr:#x} (+{len} bytes) is not {what} memory of this process: {why}; pass a \
             tensor or array (or the address of live memory you own)"
        ))
    };
    let end = addr.checked_add(len).ok_or_else(|| bad("the range wraps around the address space".into()))?;
    let mut at = addr;
    // Lines are "start-end perms offset dev inode path", sorted by address.
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        let Some((lo, hi)) = range.split_once('-') else { continue };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) else { continue };
        if hi <= at {
            continue;
        }
        if lo > at {
            return Err(bad(format!("{at:#x} is not mapped")));
        }
        if !perms.contains(want) {
            return Err(bad(format!("{at:#x} lies in a mapping with permissions {perms}")));
        }
        at = hi;
        if at >= end {
            return Ok(());
        }
    }
    Err(bad(format!("{at:#x} is not mapped")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
1000-3000 r--p 00000000 00:00 0
3000-5000 rw-p 00000000 00:00 0
6000-7000 ---p 00000000 00:00 0
7000-8000 rw-p 00000000 00:00 0 [heap]
";

    #[test]
    fn ranges_against_the_maps() {
        check_in_maps(MAPS, 0x1000, 0x4000, Access::Read).unwrap();
        check_in_maps(MAPS, 0x3000, 0x2000, Access::Write).unwrap();
        let e = |addr, len, a| check_in_maps(MAPS, addr, len, a).unwrap_err().to_string();
        assert!(e(0x2000, 0x10, Access::Write).contains("permissions r--p"));
        assert!(e(0x4ff0, 0x20, Access::Read).contains("0x5000 is not mapped"));
        assert!(e(0x6000, 8, Access::Read).contains("permissions ---p"));
        assert!(e(0x800, 8, Access::Read).contains("0x800 is not mapped"));
        assert!(e(0x7ff8, 16, Access::Read).contains("0x8000 is not mapped"));
        assert!(e(usize::MAX - 2, 8, Access::Read).contains("wraps"));
    }

    #[test]
    fn the_probe_tells_writable_pages_and_keeps_their_bytes() {
        let v: Vec<u8> = (0..3 * 4096 + 5).map(|i| i as u8).collect();
        assert_eq!(probe_writable(v.as_ptr() as usize + 3, v.len() - 3), Some(true));
        assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8), "the probe changed bytes");
        static RO: [u8; 4] = [1, 2, 3, 4];
        assert_eq!(probe_writable(RO.as_ptr() as usize, 4), Some(false));
        assert_eq!(probe_writable(0x1000, 8), Some(false));
        assert_eq!(probe_writable(usize::MAX - 2, 8), Some(false));
        // A writable page followed by a read-only one: the second page is found.
        let page = rustix::param::page_size();
        // SAFETY: a fresh anonymous mapping of two pages, unmapped below.
        let p = unsafe {
            rustix::mm::mmap_anonymous(std::ptr::null_mut(), 2 * page, rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE, rustix::mm::MapFlags::PRIVATE)
        }
        .unwrap();
        // SAFETY: the second page of the mapping above.
        unsafe { rustix::mm::mprotect(p.cast::<u8>().add(page).cast(), page, rustix::mm::MprotectFlags::READ) }.unwrap();
        assert_eq!(probe_writable(p as usize, page), Some(true));
        assert_eq!(probe_writable(p as usize + page - 1, 2), Some(false));
        // SAFETY: the mapping above, no longer used.
        unsafe { rustix::mm::munmap(p, 2 * page) }.unwrap();
    }

    #[test]
    fn this_process_memory() {
        let v = vec![1u8; 4096];
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        check_in_maps(&maps, v.as_ptr() as usize, v.len(), Access::Write).unwrap();
        check_in_maps(&maps, 0x1000, 8, Access::Read).unwrap_err();
        static RO: [u8; 4] = [1, 2, 3, 4];
        check_in_maps(&maps, RO.as_ptr() as usize, 4, Access::Read).unwrap();
        check_in_maps(&maps, RO.as_ptr() as usize, 4, Access::Write).unwrap_err();
    }
}
