//! [`SymAddr`]: an address in the symmetric heap, a type of its own so that the runtime's
//! functions say which of their addresses must be symmetric (the same offset on every PE) and
//! which are the caller's local memory; passing one for the other does not compile.

use std::fmt;

/// This PE's address of a byte in the symmetric heap (what [`crate::Runtime::malloc`] returns).
///
/// The same offset names the same allocation on every PE, which is what lets a put or a get name
/// a peer's copy. On this PE it is also an ordinary address of mapped memory ([`SymAddr::get`],
/// [`SymAddr::as_ptr`]); the converse needs a claim: [`SymAddr::new`] wraps an integer that
/// came from outside (Python, C), and every runtime call still checks that it lies inside one
/// live allocation before it touches anything.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct SymAddr(usize);

impl SymAddr {
    /// Claims that `addr` is an address in this PE's symmetric heap (the layers that receive
    /// plain integers, Python and C, convert here; the runtime checks the claim where it is used).
    pub const fn new(addr: usize) -> SymAddr {
        SymAddr(addr)
    }

    /// The address as an integer (on this PE, the address of mapped memory).
    pub const fn get(self) -> usize {
        self.0
    }

    /// This PE's copy as a raw pointer (load/store in this process; for a peer's copy see
    /// [`crate::Runtime::ptr`]).
    pub const fn as_ptr<T>(self) -> *mut T {
        self.0 as *mut T
    }

    /// The address `bytes` further on, `None` past the end of the address space.
    pub const fn checked_add(self, bytes: usize) -> Option<SymAddr> {
        match self.0.checked_add(bytes) {
            Some(a) => Some(SymAddr(a)),
            None => None,
        }
    }
}

/// `addr + bytes`: a symmetric address stays symmetric when both sides move by the same amount
/// (an element of an array, a field of a struct). Overflow panics as integer overflow does.
impl std::ops::Add<usize> for SymAddr {
    type Output = SymAddr;
    fn add(self, bytes: usize) -> SymAddr {
        SymAddr(self.0 + bytes)
    }
}

impl std::ops::AddAssign<usize> for SymAddr {
    fn add_assign(&mut self, bytes: usize) {
        self.0 += bytes;
    }
}

/// `addr - bytes`, the address `bytes` before (the last word of a range, say).
impl std::ops::Sub<usize> for SymAddr {
    type Output = SymAddr;
    fn sub(self, bytes: usize) -> SymAddr {
        SymAddr(self.0 - bytes)
    }
}

/// The distance in bytes between two symmetric addresses.
impl std::ops::Sub for SymAddr {
    type Output = usize;
    fn sub(self, other: SymAddr) -> usize {
        self.0 - other.0
    }
}

impl fmt::Debug for SymAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SymAddr({:#x})", self.0)
    }
}

impl fmt::LowerHex for SymAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::SymAddr;

    #[test]
    fn arithmetic_keeps_the_type() {
        let a = SymAddr::new(0x1000);
        assert_eq!((a + 8).get(), 0x1008);
        assert_eq!((a + 24) - a, 24);
        assert_eq!((a + 24 - 8).get(), 0x1010);
        assert_eq!(a.checked_add(usize::MAX), None);
        assert_eq!(format!("{a:?} {a:#x}"), "SymAddr(0x1000) 0x1000");
    }
}
