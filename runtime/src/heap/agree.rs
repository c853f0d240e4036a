//! Checking that every PE makes the same collective heap call with the same arguments.
//!
//! Each collective call allgathers a 25-byte record (operation, call number, two arguments)
//! and compares every PE's record with this PE's. Every PE sees the same records, so when they
//! differ every PE fails, each naming the first PE that differs from it and both values.

use super::group::Group;
use crate::error::{Error, Result};

/// A collective heap operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Heap creation: `a` = slot stride (the rounded bound), `b` = growth step.
    Init = 1,
    /// `a` = size, `b` = alignment.
    Malloc = 2,
    /// `a` = element count, `b` = element size.
    Calloc = 3,
    /// `a` = heap offset (or [`NOT_IN_HEAP`], or [`NULL`]), `b` = 0.
    Free = 4,
}

/// `Free` of an address outside this PE's heap slot.
pub const NOT_IN_HEAP: u64 = u64::MAX;
/// `Free` of address 0.
pub const NULL: u64 = u64::MAX - 1;

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Init => "heap creation",
            Op::Malloc => "malloc",
            Op::Calloc => "calloc",
            Op::Free => "free",
        }
    }

    fn from_byte(b: u8) -> Option<Op> {
        [Op::Init, Op::Malloc, Op::Calloc, Op::Free].into_iter().find(|op| *op as u8 == b)
    }

    /// What the two arguments are called in a `Mismatch` error.
    fn arg_names(self) -> [&'static str; 2] {
        match self {
            Op::Init => ["symmetric heap bound (RSHMEM_SYMMETRIC_SIZE, rounded)", "heap growth step (RSHMEM_HEAP_GROWTH, rounded)"],
            Op::Malloc => ["malloc size", "malloc alignment"],
            Op::Calloc => ["calloc element count", "calloc element size"],
            Op::Free => ["freed address", "freed address"],
        }
    }

    fn show(self, arg: u64) -> String {
        match (self, arg) {
            (Op::Free, NOT_IN_HEAP) => "an address outside the symmetric heap".into(),
            (Op::Free, NULL) => "a null pointer".into(),
            (Op::Free, off) => format!("heap offset {off}"),
            (Op::Init, v) => format!("{v} bytes"),
            (Op::Malloc, v) | (Op::Calloc, v) => v.to_string(),
        }
    }
}

/// One PE's view of a collective call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The operation.
    pub op: Op,
    /// How many collective heap calls this PE has made, this one included.
    pub seq: u64,
    /// First argument.
    pub a: u64,
    /// Second argument.
    pub b: u64,
}

impl Call {
    const LEN: usize = 25;

    fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[0] = self.op as u8;
        out[1..9].copy_from_slice(&self.seq.to_le_bytes());
        out[9..17].copy_from_slice(&self.a.to_le_bytes());
        out[17..25].copy_from_slice(&self.b.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Call> {
        if bytes.len() != Self::LEN {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        Some(Call { op: Op::from_byte(bytes[0])?, seq: word(1), a: word(9), b: word(17) })
    }

    /// The first way `theirs` differs from `self`, as a `Mismatch` naming `pe`.
    fn diff(&self, me: usize, pe: usize, theirs: &Call) -> Option<Error> {
        let mismatch = |what: &'static str, mine: String, theirs: String| {
            Some(Error::Mismatch { what, me, pe, mine, theirs })
        };
        if self.op != theirs.op {
            return mismatch("collective heap call", self.op.name().into(), theirs.op.name().into());
        }
        if self.seq != theirs.seq {
            return mismatch(
                "number of collective heap calls so far",
                self.seq.to_string(),
                theirs.seq.to_string(),
            );
        }
        let [na, nb] = self.op.arg_names();
        if self.a != theirs.a {
            return mismatch(na, self.op.show(self.a), self.op.show(theirs.a));
        }
        if self.b != theirs.b {
            return mismatch(nb, self.op.show(self.b), self.op.show(theirs.b));
        }
        None
    }
}

/// Allgathers `call` and fails (on every PE) if any PE's call differs.
///
/// # Errors
/// [`Error::Mismatch`] naming the first differing PE; bootstrap errors.
pub fn agree(group: &dyn Group, call: Call) -> Result<()> {
    let all = group.allgather(&call.encode())?;
    let me = group.rank();
    for (pe, bytes) in all.iter().enumerate() {
        let theirs = Call::decode(bytes).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "PE {pe} sent a malformed heap call record ({} bytes); are all PEs running the same rshmem?",
                bytes.len()
            ))
        })?;
        if let Some(err) = call.diff(me, pe, &theirs) {
            return Err(err);
        }
    }
    Ok(())
}

/// Allgathers this PE's outcome of a step that must succeed everywhere or nowhere; returns
/// the first failing PE's error on every PE.
///
/// # Errors
/// This PE's own error if it failed, else one naming the first PE that did.
pub fn all_ok(group: &dyn Group, mine: Result<()>, during: &str) -> Result<()> {
    let msg = match &mine {
        Ok(()) => Vec::new(),
        Err(e) => {
            let text = e.to_string();
            if text.is_empty() { b"error".to_vec() } else { text.into_bytes() }
        }
    };
    let all = group.allgather(&msg)?;
    mine?;
    match all.iter().position(|m| !m.is_empty()) {
        None => Ok(()),
        Some(pe) => Err(Error::os(
            format!("{during} on PE {pe}"),
            std::io::Error::other(String::from_utf8_lossy(&all[pe]).into_owned()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_diffs_name_the_first_difference() {
        let c = Call { op: Op::Malloc, seq: 7, a: 1 << 20, b: 256 };
        assert_eq!(Call::decode(&c.encode()), Some(c));
        assert_eq!(Call::decode(&[9u8; Call::LEN]), None);
        assert!(c.diff(0, 1, &c).is_none());
        let e = c.diff(0, 1, &Call { a: 2 << 20, ..c }).unwrap().to_string();
        assert!(e.contains("malloc size") && e.contains("PE 0 (this PE) passed 1048576") && e.contains("PE 1 passed 2097152"), "{e}");
        let e = c.diff(2, 3, &Call { op: Op::Free, seq: 8, a: NOT_IN_HEAP, b: 0 }).unwrap().to_string();
        assert!(e.contains("collective heap call") && e.contains("passed malloc") && e.contains("PE 3 passed free"), "{e}");
        let f = Call { op: Op::Free, seq: 1, a: 512, b: 0 };
        let e = f.diff(0, 1, &Call { a: NOT_IN_HEAP, ..f }).unwrap().to_string();
        assert!(e.contains("heap offset 512") && e.contains("outside the symmetric heap"), "{e}");
    }
}
