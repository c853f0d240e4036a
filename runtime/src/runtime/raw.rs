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

use super::Runtime;
use crate::error::{Error, Result};

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
        let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| Error::os("read /proc/self/maps", e))?;
        check_in_maps(&maps, addr, len, access)
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
