//! Checking that every PE makes the same collective heap call with the same arguments.
//!
//! Each collective call allgathers a record (operation, call number, two arguments, and the
//! caller's description of what it allocates, such as a tensor's shape and dtype) and compares
//! every PE's record with this PE's. Every PE sees the same records, so when they differ every
//! PE fails, each naming the first PE that differs from it and both values. A description is
//! compared before the byte counts, so two PEs asking for tensors of different shapes or dtypes
//! hear about shapes and dtypes (even where the byte counts agree), not about bytes.

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
    /// `nvshmemx_buffer_register_symmetric`: `a` = size, `b` = 0.
    Register = 5,
    /// `nvshmemx_buffer_unregister_symmetric`: `a` = heap offset (as `Free`), `b` = size.
    Unregister = 6,
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
            Op::Register => "buffer registration",
            Op::Unregister => "buffer unregistration",
        }
    }

    fn from_byte(b: u8) -> Option<Op> {
        [Op::Init, Op::Malloc, Op::Calloc, Op::Free, Op::Register, Op::Unregister].into_iter().find(|op| *op as u8 == b)
    }

    /// What the two arguments are called in a `Mismatch` error.
    fn arg_names(self) -> [&'static str; 2] {
        match self {
            Op::Init => ["symmetric heap bound (RSHMEM_SYMMETRIC_SIZE, rounded)", "heap growth step (RSHMEM_HEAP_GROWTH, rounded)"],
            Op::Malloc => ["malloc size", "malloc alignment"],
            Op::Calloc => ["calloc element count", "calloc element size"],
            Op::Free => ["freed address", "freed address"],
            Op::Register => ["registered size", "registered size"],
            Op::Unregister => ["unregistered address", "unregistered size"],
        }
    }

    /// Argument `nth` (0: `a`, 1: `b`) in words.
    fn show(self, nth: usize, arg: u64) -> String {
        if (self, nth) == (Op::Unregister, 1) {
            return format!("{arg} bytes");
        }
        match (self, arg) {
            (Op::Free | Op::Unregister, NOT_IN_HEAP) => "an address outside the symmetric heap".into(),
            (Op::Free | Op::Unregister, NULL) => "a null pointer".into(),
            (Op::Free | Op::Unregister, off) => format!("heap offset {off}"),
            (Op::Init | Op::Register, v) => format!("{v} bytes"),
            (Op::Malloc, v) | (Op::Calloc, v) => v.to_string(),
        }
    }
}

/// One PE's view of a collective call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The operation.
    pub op: Op,
    /// How many collective heap calls this PE has made, this one included.
    pub seq: u64,
    /// First argument.
    pub a: u64,
    /// Second argument.
    pub b: u64,
    /// What the caller allocates, in its words (`"a tensor of shape (4, 8) and dtype
    /// torch.float32"`); empty for a plain call.
    pub what: String,
}

impl Call {
    /// The fixed part of a record; the description follows it.
    const LEN: usize = 25;

    /// A call without a description.
    pub fn plain(op: Op, seq: u64, a: u64, b: u64) -> Call {
        Call { op, seq, a, b, what: String::new() }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; Self::LEN];
        out[0] = self.op as u8;
        out[1..9].copy_from_slice(&self.seq.to_le_bytes());
        out[9..17].copy_from_slice(&self.a.to_le_bytes());
        out[17..25].copy_from_slice(&self.b.to_le_bytes());
        out.extend_from_slice(self.what.as_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Call> {
        if bytes.len() < Self::LEN {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        let what = String::from_utf8(bytes[Self::LEN..].to_vec()).ok()?;
        Some(Call { op: Op::from_byte(bytes[0])?, seq: word(1), a: word(9), b: word(17), what })
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
        if self.what != theirs.what {
            let said = |c: &Call| if c.what.is_empty() { format!("{} of {} and {}", c.op.name(), c.a, c.b) } else { c.what.clone() };
            return mismatch("what a collective allocation asks for", said(self), said(theirs));
        }
        let [na, nb] = self.op.arg_names();
        if self.a != theirs.a {
            return mismatch(na, self.op.show(0, self.a), self.op.show(0, theirs.a));
        }
        if self.b != theirs.b {
            return mismatch(nb, self.op.show(1, self.b), self.op.show(1, theirs.b));
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
        let c = Call::plain(Op::Malloc, 7, 1 << 20, 256);
        assert_eq!(Call::decode(&c.encode()), Some(c.clone()));
        assert_eq!(Call::decode(&[9u8; Call::LEN]), None);
        assert!(c.diff(0, 1, &c).is_none());
        let e = c.diff(0, 1, &Call { a: 2 << 20, ..c.clone() }).unwrap().to_string();
        assert!(e.contains("malloc size") && e.contains("PE 0 (this PE) passed 1048576") && e.contains("PE 1 passed 2097152"), "{e}");
        let e = c.diff(2, 3, &Call::plain(Op::Free, 8, NOT_IN_HEAP, 0)).unwrap().to_string();
        assert!(e.contains("collective heap call") && e.contains("passed malloc") && e.contains("PE 3 passed free"), "{e}");
        let f = Call::plain(Op::Free, 1, 512, 0);
        let e = f.diff(0, 1, &Call { a: NOT_IN_HEAP, ..f.clone() }).unwrap().to_string();
        assert!(e.contains("heap offset 512") && e.contains("outside the symmetric heap"), "{e}");
    }

    #[test]
    fn descriptions_are_compared_before_bytes() {
        let f32s = Call { what: "a tensor of shape (4,) and dtype torch.float32".into(), ..Call::plain(Op::Calloc, 3, 1, 16) };
        assert_eq!(Call::decode(&f32s.encode()), Some(f32s.clone()));
        // Equal sizes, different dtypes: refused, in the caller's words.
        let i32s = Call { what: "a tensor of shape (4,) and dtype torch.int32".into(), ..f32s.clone() };
        let e = f32s.diff(0, 1, &i32s).unwrap().to_string();
        assert!(e.contains("passed a tensor of shape (4,) and dtype torch.float32") && e.contains("PE 1 passed a tensor of shape (4,) and dtype torch.int32"), "{e}");
        // Different shapes: the shapes are named, not the byte counts.
        let five = Call { what: "a tensor of shape (5,) and dtype torch.float32".into(), b: 20, ..f32s.clone() };
        let e = f32s.diff(0, 1, &five).unwrap().to_string();
        assert!(e.contains("shape (5,)") && !e.contains("element size"), "{e}");
        // A described call beside a plain one.
        let e = f32s.diff(0, 1, &Call::plain(Op::Calloc, 3, 1, 16)).unwrap().to_string();
        assert!(e.contains("PE 1 passed calloc of 1 and 16"), "{e}");
    }
}
