//! Collective argument agreement: every member of a host collective checks that all members
//! called the same collective with the same operator, dtype, element count and root, on the same
//! symmetric buffers, as part of the barrier the collective makes anyway. The buffers are the heap
//! offsets of `source`, which every member reads at its own offset on its peers, and of `dest`
//! where a peer reads or writes it too (all but the reduce-scatter, whose `dest` only this member
//! writes: its in-place form passes each member's own block of `source`).
//!
//! Before that first barrier each member writes its [`Signature`] and its [`Buffers`] (five
//! words) into its own
//! slot of the runtime workspace for the team; after it, each reads every member's slot
//! (mapped in this process, as the data will be) and compares. Every member sees the same
//! slots, so a difference is found by all of them: each makes the collective's second barrier,
//! moves no data, and fails with [`Error::Mismatch`] naming the first member that differs and
//! both calls (for buffers: which one, at which heap offset, in which allocation). A member whose
//! own arguments were refused (a bad pointer, a root outside the team) still takes part, marked
//! as refused, so that the others fail too instead of waiting for it. The cost is one small write,
//! one small read per member, and a comparison (see `examples/host_latency.rs`); no message is
//! added. The on-stream collectives below agree on the signature alone.
//!
//! The slot is never read by a member of another collective: the second barrier keeps every
//! member from writing its next signature before all have read this one.
//!
//! On-stream collectives (cuda) agree on the device, without a host synchronisation: the host
//! packs the signature into one word ([`Signature::pack`]) and numbers the call (the team's
//! on-stream collectives so far), and the collective's first barrier kernel (or the staged
//! fcollect's flags) carries both words to every member beside its arrival; after the barrier
//! each member compares (`rshmemi_team_barrier_agreed` in `triton-lib/src/barrier_device.h`).
//! A difference stops the kernel of every member with an error record that the next host call
//! reports as [`Error::Mismatch`] naming both calls ([`stream_mismatch`]); the CUDA context is
//! unusable after that stop, as after any kernel error. The call number catches a member that
//! queued another collective, or none, in this place. A member that refused its own arguments
//! queues only the agreement, marked refused, so that the others stop instead of waiting. The
//! cost on the GPU: two 8-byte stores per member beside each arrival (before the fence the
//! arrival makes anyway) and two local loads per member after the barrier; no added round trip.
//! A world fcollect small enough for staging on one member against a collective that starts
//! with an agreed barrier on another: the staged kernel waits on flags, not on the barrier, so
//! it also watches the peer's agreement slot and, finding this call's number there, completes the
//! peer's barrier with its own words and stops (`rshmemi_rt_staged_wait`); both fail. Not caught:
//! a plain `barrier_on_stream` against a staged fcollect (neither writes an agreement the other
//! reads); that waits like any collective entered by one PE only (`RSHMEM_DEBUG_WAIT_TIMEOUT_MS`
//! ends it).

use super::team_table::TeamInfo;
use super::workspace::AGREE_WORDS as WORDS;
use super::{workspace, Runtime, Team};
use crate::heap::SymAddr;
use crate::dtype::{DType, ReduceOp, ALL_DTYPES, ALL_REDUCE_OPS};
use crate::error::{Error, Result};

/// Which collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Broadcast = 1,
    Fcollect = 2,
    Alltoall = 3,
    Reduce = 4,
    ReduceScatter = 5,
}

impl Kind {
    const ALL: [Kind; 5] = [Kind::Broadcast, Kind::Fcollect, Kind::Alltoall, Kind::Reduce, Kind::ReduceScatter];

    fn name(self) -> &'static str {
        match self {
            Kind::Broadcast => "broadcast",
            Kind::Fcollect => "fcollect",
            Kind::Alltoall => "alltoall",
            Kind::Reduce => "reduce",
            Kind::ReduceScatter => "reducescatter",
        }
    }
}

/// What every member of one collective call must agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Signature {
    pub kind: Kind,
    pub dtype: DType,
    pub op: Option<ReduceOp>,
    /// Team PE of the root (broadcast), else 0.
    pub root: i32,
    pub nelems: u64,
    /// This member refused its own arguments (it fails with its own error).
    pub refused: bool,
}

/// Where a member's `dest` and `source` lie: their offsets from the start of its own heap slot,
/// the same numbers on every member that passes the same symmetric buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Buffers {
    pub dest: u64,
    pub source: u64,
}

/// Marks a written slot (a zeroed one reads as "no collective").
const TAG: u64 = 0x5253_4147 << 32;

impl Signature {
    fn encode(&self, bufs: Buffers) -> [u8; WORDS * 8] {
        let op = self.op.map_or(0, |o| ALL_REDUCE_OPS.iter().position(|x| *x == o).unwrap_or(0) as u64 + 1);
        let dtype = ALL_DTYPES.iter().position(|d| *d == self.dtype).unwrap_or(0) as u64;
        let w0 = TAG | (self.kind as u64) << 24 | dtype << 16 | op << 8 | u64::from(self.refused);
        let mut out = [0u8; WORDS * 8];
        out[..8].copy_from_slice(&w0.to_le_bytes());
        out[8..16].copy_from_slice(&(self.root as i64 as u64).to_le_bytes());
        out[16..24].copy_from_slice(&self.nelems.to_le_bytes());
        out[24..32].copy_from_slice(&bufs.dest.to_le_bytes());
        out[32..].copy_from_slice(&bufs.source.to_le_bytes());
        out
    }

    /// The buffers of a slot that [`Signature::decode`] read.
    fn decode_buffers(b: &[u8; WORDS * 8]) -> Buffers {
        let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        Buffers { dest: word(3), source: word(4) }
    }

    /// `None` for a slot that holds no signature (never written, or another runtime's).
    fn decode(b: &[u8; WORDS * 8]) -> Option<Signature> {
        let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        let w0 = word(0);
        if w0 & (0xffff_ffff << 32) != TAG {
            return None;
        }
        let kind = Kind::ALL
            .into_iter()
            .find(|k| *k as u64 == (w0 >> 24) & 0xff)?;
        let dtype = *ALL_DTYPES.get(((w0 >> 16) & 0xff) as usize)?;
        let op = match (w0 >> 8) & 0xff {
            0 => None,
            i => Some(*ALL_REDUCE_OPS.get(i as usize - 1)?),
        };
        Some(Signature { kind, dtype, op, root: word(1) as i64 as i32, nelems: word(2), refused: w0 & 1 == 1 })
    }

    /// The call as a message shows it: "reduce sum of 8 x int64".
    fn show(&self) -> String {
        let what = match self.op {
            Some(op) => format!("{} {}", self.kind.name(), op.name()),
            None => self.kind.name().to_string(),
        };
        let root = if self.kind == Kind::Broadcast { format!(" from root {}", self.root) } else { String::new() };
        format!("{what} of {} x {}{root}", self.nelems, self.dtype.name())
    }
}

/// Bits of a packed signature (most significant first): 1 written, 1 refused (device code
/// tests it: `RSHMEMI_AGREE_REFUSED`), 3 kind, 3 operator (0 none), 5 dtype, 10 root, 41 count.
const PACK_WRITTEN: u64 = 1 << 63;
const PACK_REFUSED: u64 = 1 << 62;
const PACK_NELEMS_BITS: u32 = 41;
const PACK_ROOT_BITS: u32 = 10;

impl Signature {
    /// The signature as the one word device code compares. The count keeps 41 bits: no call
    /// that passed its own checks can name more elements than a heap slot holds (2^41 bytes is
    /// 2 TiB); a refused call's root and count are cut to their fields.
    pub(super) fn pack(&self) -> u64 {
        let op = self.op.map_or(0, |o| ALL_REDUCE_OPS.iter().position(|x| *x == o).unwrap_or(0) as u64 + 1);
        let dtype = ALL_DTYPES.iter().position(|d| *d == self.dtype).unwrap_or(0) as u64;
        let root = (self.root as u32 as u64) & ((1 << PACK_ROOT_BITS) - 1);
        let nelems = self.nelems.min((1 << PACK_NELEMS_BITS) - 1);
        PACK_WRITTEN
            | if self.refused { PACK_REFUSED } else { 0 }
            | (self.kind as u64) << 59
            | op << 56
            | dtype << 51
            | root << PACK_NELEMS_BITS
            | nelems
    }

    /// `None` for a word that holds no signature (never written).
    fn unpack(w: u64) -> Option<Signature> {
        if w & PACK_WRITTEN == 0 {
            return None;
        }
        let kind = Kind::ALL
            .into_iter()
            .find(|k| *k as u64 == (w >> 59) & 7)?;
        let op = match (w >> 56) & 7 {
            0 => None,
            i => Some(*ALL_REDUCE_OPS.get(i as usize - 1)?),
        };
        Some(Signature {
            kind,
            dtype: *ALL_DTYPES.get(((w >> 51) & 31) as usize)?,
            op,
            root: ((w >> PACK_NELEMS_BITS) & ((1 << PACK_ROOT_BITS) - 1)) as i32,
            nelems: w & ((1 << PACK_NELEMS_BITS) - 1),
            refused: w & PACK_REFUSED != 0,
        })
    }
}

/// The error of an on-stream collective that found a member with other arguments: the fields
/// of its `ERROR_FLAG_MISMATCH` record (`device_state.rs` says what each holds).
pub(crate) fn stream_mismatch(me: usize, calls: u64, who: u64, mine: u64, theirs: u64) -> Error {
    let (team, pe) = (who >> 32, (who & 0xffff_ffff) as usize);
    let (my_call, their_call) = (calls >> 32, calls & 0xffff_ffff);
    const STOPPED: &str = "the kernels of both PEs stopped, and the CUDA context is unusable now: restart the job";
    let show = |w: u64, call: u64| match Signature::unpack(w) {
        Some(s) => format!("{} as its on-stream collective #{call} of team {team}", s.show()),
        None => format!("no on-stream collective of team {team} yet"),
    };
    let mut theirs_shown = show(theirs, their_call);
    if my_call != their_call {
        theirs_shown.push_str(
            " (the PEs are at different places in the team's sequence of on-stream collectives: one \
             queued a call, e.g. a barrier or another collective, that the other did not)",
        );
    }
    match (Signature::unpack(mine), Signature::unpack(theirs)) {
        (Some(m), Some(t)) if t.refused && Signature { refused: false, ..t } == m => Error::InvalidArgument(format!(
            "{} on team {team} on stream: PE {pe} refused its arguments (see its error), so no PE moved any data; \
             {STOPPED}",
            m.show()
        )),
        _ => Error::Mismatch {
            what: "on-stream collective call (found on the GPU; the CUDA context is unusable now, restart the job)",
            me,
            pe,
            mine: show(mine, my_call),
            theirs: theirs_shown,
        },
    }
}

impl Runtime {
    /// Symmetric address of this team slot's signature words.
    fn agree_words(&self, team: Team) -> usize {
        self.workspace + workspace::AGREE + team.0 as usize * WORDS * 8
    }

    /// The first barrier of a collective, with the agreement described in the module docs.
    /// `local` is this PE's own check of its arguments; its error is returned after the others
    /// have heard of it.
    ///
    /// # Errors
    /// This PE's own `local` error; [`Error::Mismatch`] when a member called with other
    /// arguments; [`Error::InvalidArgument`] when a member refused its own; barrier errors.
    pub(super) fn agreed_barrier(
        &self,
        team: Team,
        info: &TeamInfo,
        mut sig: Signature,
        dest: Option<SymAddr>,
        source: SymAddr,
        local: Result<()>,
    ) -> Result<()> {
        sig.refused = local.is_err();
        let words = self.agree_words(team);
        let me = self.my_pe();
        let base = self.heap().my_base();
        let offset = |a: SymAddr| a.get().wrapping_sub(base) as u64;
        let bufs = Buffers { dest: dest.map_or(u64::MAX, offset), source: offset(source) };
        self.write_heap(words, me, &sig.encode(bufs))?;
        self.barrier(team)?;
        let mut problem = None;
        let mut buf = [0u8; WORDS * 8];
        for &pe in &info.members {
            if pe == me {
                continue;
            }
            self.read_heap(words, pe, &mut buf)?;
            let theirs = Signature::decode(&buf);
            if theirs == Some(sig) {
                let their_bufs = Signature::decode_buffers(&buf);
                if sig.refused || their_bufs == bufs {
                    continue;
                }
                problem = Some(self.buffers_differ(&sig, info, me, pe, bufs, their_bufs));
                break;
            }
            problem = Some(match theirs {
                Some(t) if t.refused && Signature { refused: false, ..t } == Signature { refused: false, ..sig } => {
                    Error::InvalidArgument(format!(
                        "{} on {}: PE {pe} refused its arguments (see its error), so no PE moved any data",
                        sig.show(),
                        info.name
                    ))
                }
                t => Error::Mismatch {
                    what: "collective call",
                    me,
                    pe,
                    mine: format!("{} on {}", sig.show(), info.name),
                    theirs: t.map_or_else(|| "no collective (it is in another call)".to_string(), |t| t.show()),
                },
            });
            break;
        }
        if local.is_err() || problem.is_some() {
            // Every member found the same difference: all leave through the second barrier,
            // so that the team's barriers stay in step for the next call.
            self.barrier(team)?;
            local?;
            return Err(problem.unwrap_or_else(|| Error::InvalidArgument("collective refused".into())));
        }
        Ok(())
    }

    /// The mismatch of a member that made the same call on other buffers: which buffer, at
    /// which heap offsets, in which of this PE's allocations (the same on every PE).
    fn buffers_differ(&self, sig: &Signature, info: &TeamInfo, me: usize, pe: usize, mine: Buffers, theirs: Buffers) -> Error {
        let (name, a, b) = if mine.dest != theirs.dest { ("dest", mine.dest, theirs.dest) } else { ("source", mine.source, theirs.source) };
        let what = if name == "dest" { "collective's dest buffer" } else { "collective's source buffer" };
        Error::Mismatch {
            what,
            me,
            pe,
            mine: format!("{} on {} with {name} at {}", sig.show(), info.name, self.show_offset(a)),
            theirs: format!("{name} at {}", self.show_offset(b)),
        }
    }

    /// A heap offset as a message shows it, with the allocation that holds it.
    fn show_offset(&self, off: u64) -> String {
        let addr = self.heap().my_base().wrapping_add(off as usize);
        match self.heap().allocation_of(addr) {
            Some(a) => format!(
                "heap offset {off:#x} (byte {} of the {}-byte allocation at heap offset {:#x})",
                addr - a.base,
                a.len,
                a.offset
            ),
            None => format!("heap offset {off:#x} (in no live allocation)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_round_trip_and_show_their_values() {
        for dtype in ALL_DTYPES {
            for op in [None, Some(ReduceOp::Max), Some(ReduceOp::Xor)] {
                let s = Signature { kind: Kind::Reduce, dtype, op, root: -3, nelems: 1 << 40, refused: op.is_none() };
                let bufs = Buffers { dest: 0x40, source: u64::MAX - 7 };
                assert_eq!(Signature::decode(&s.encode(bufs)), Some(s));
                assert_eq!(Signature::decode_buffers(&s.encode(bufs)), bufs);
            }
        }
        assert_eq!(Signature::decode(&[0; WORDS * 8]), None);
        for kind in Kind::ALL {
            for (i, dtype) in ALL_DTYPES.into_iter().enumerate() {
                let op = ALL_REDUCE_OPS.get(i % 8).copied();
                let s = Signature { kind, dtype, op, root: 1023, nelems: (1 << 41) - 1, refused: i % 2 == 1 };
                assert_eq!(Signature::unpack(s.pack()), Some(s), "{s:?}");
            }
        }
        assert_eq!(Signature::unpack(0), None);
        let b = Signature { kind: Kind::Broadcast, dtype: DType::I64, op: None, root: 1, nelems: 8, refused: false };
        assert_eq!(b.show(), "broadcast of 8 x int64 from root 1");
        let r = Signature { kind: Kind::Reduce, dtype: DType::F32, op: Some(ReduceOp::Sum), root: 0, nelems: 4, refused: false };
        assert_eq!(r.show(), "reduce sum of 4 x float32");
        let rs = Signature { kind: Kind::ReduceScatter, ..r };
        assert_eq!(rs.show(), "reducescatter sum of 4 x float32");
        assert_ne!(rs.pack(), r.pack(), "a reduce-scatter never agrees with a reduce of the same count");
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    fn sig(op: ReduceOp, nelems: u64) -> Signature {
        Signature { kind: Kind::Reduce, dtype: DType::F32, op: Some(op), root: 0, nelems, refused: false }
    }

    #[test]
    fn stream_mismatch_names_both_calls_pes_and_call_numbers() {
        let e = stream_mismatch(0, 3 << 32 | 3, 2 << 32 | 1, sig(ReduceOp::Sum, 8).pack(), sig(ReduceOp::Max, 8).pack());
        let msg = e.to_string();
        assert!(matches!(e, Error::Mismatch { me: 0, pe: 1, .. }), "{e:?}");
        assert!(msg.contains("reduce sum of 8 x float32 as its on-stream collective #3 of team 2"), "{msg}");
        assert!(msg.contains("reduce max of 8 x float32") && msg.contains("CUDA context"), "{msg}");
        assert!(!msg.contains("different places"), "{msg}");
        // The same call at another place in the sequence: the call numbers differ.
        let e = stream_mismatch(1, 5 << 32 | 4, 1, sig(ReduceOp::Sum, 8).pack(), sig(ReduceOp::Sum, 8).pack()).to_string();
        assert!(e.contains("#5") && e.contains("#4") && e.contains("different places"), "{e}");
        let e = stream_mismatch(1, 5 << 32, 1, sig(ReduceOp::Sum, 8).pack(), 0).to_string();
        assert!(e.contains("no on-stream collective of team 0 yet"), "{e}");
        let refused = Signature { refused: true, ..sig(ReduceOp::Sum, 8) };
        let e = stream_mismatch(0, 1 << 32 | 1, 1, sig(ReduceOp::Sum, 8).pack(), refused.pack());
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("PE 1 refused") && !m.contains("  ")), "{e:?}");
    }

    #[test]
    fn the_refused_bit_is_the_one_device_code_tests() {
        let header = include_str!("../../../triton-lib/src/barrier_device.h");
        assert!(header.contains("#define RSHMEMI_AGREE_REFUSED (1ull << 62)"));
        assert_eq!(PACK_REFUSED, 1 << 62);
    }
}
