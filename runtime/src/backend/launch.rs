//! Launches of the runtime's collective kernels (`triton-lib/src/runtime_kernels.cu`) as the
//! runtime writes them, the stream workspace they share and the agreement they carry.
//!
//! An on-stream collective writes its kernel's parameter list once, where it plans the call
//! (`runtime/stream_collective.rs`), as a [`Launch`]; a backend with streams runs any launch
//! through the one method [`crate::backend::Streams::launch`], which checks the parameters
//! against the types the kernel declares before it passes them. So a new collective kernel adds
//! a [`Kernel`] name and its launch, not a method per kernel on every layer between.

use crate::consts::MAX_TEAMS;
use crate::error::{Error, Result};

/// What the members of one on-stream collective agree on, on the device
/// (`runtime/src/runtime/agree.rs`): this PE's packed call and its call number on the team, which
/// the collective's first barrier (or, staged, its flags) compares with every member's, through
/// the agreement slots of the stream workspace at `ws`, laid out for `n_pes` PEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    /// Symmetric address of the backend's stream workspace.
    pub ws: usize,
    /// PEs of the job (the workspace layout depends on it).
    pub n_pes: usize,
    /// This PE's call, packed (`agree::Signature::pack`).
    pub desc: u64,
    /// This PE's on-stream collective calls of the team so far, this one included.
    pub seq: u64,
}

/// A runtime kernel that a collective launches with its own parameters (the barrier kernels,
/// shared by every collective, are [`crate::backend::Streams`] methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `rshmemi_rt_fcollect`: an fcollect pushed between two team barriers.
    Fcollect,
    /// `rshmemi_rt_fcollect_staged`: a world fcollect through the staging slots, no barrier.
    FcollectStaged,
    /// `rshmemi_rt_reduce`: a reduction or reduce-scatter staged through the collective workspace.
    Reduce,
}

impl Kernel {
    /// Every launchable kernel.
    pub const ALL: [Kernel; 3] = [Kernel::Fcollect, Kernel::FcollectStaged, Kernel::Reduce];

    /// The kernel's entry name in its module.
    pub fn entry(self) -> &'static str {
        match self {
            Kernel::Fcollect => "rshmemi_rt_fcollect",
            Kernel::FcollectStaged => "rshmemi_rt_fcollect_staged",
            Kernel::Reduce => "rshmemi_rt_reduce",
        }
    }
}

/// One kernel parameter, as the kernel declares it: `int32_t` is `.u32` in PTX, `uint64_t` and
/// pointers are `.u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// An `int32_t`.
    I32(i32),
    /// A `uint64_t` or a device pointer.
    U64(u64),
}

impl Param {
    /// The PTX type of the parameter.
    pub fn ptx_type(self) -> &'static str {
        match self {
            Param::I32(_) => ".u32",
            Param::U64(_) => ".u64",
        }
    }

    /// An address or byte count as the `uint64_t` the kernels take.
    pub fn addr(a: usize) -> Param {
        Param::U64(a as u64)
    }
}

/// One launch of a runtime kernel on a caller's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Which kernel.
    pub kernel: Kernel,
    /// Blocks of the grid; the block size is the kernel's own (its launch bounds).
    pub blocks: u32,
    /// The team slot whose barriers the kernel runs, if any: host barriers of that team wait
    /// until it has finished.
    pub barriers_of: Option<i32>,
    /// The kernel's parameters, in its order.
    pub params: Vec<Param>,
}

impl Launch {
    /// Checks the parameters against `declared`, the kernel's PTX parameter types in order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the kernel and both lists when they differ (a launch
    /// written against another version of the kernel).
    pub fn check(&self, declared: &[&str]) -> Result<()> {
        let given: Vec<&str> = self.params.iter().map(|p| p.ptx_type()).collect();
        if given == declared {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "launch of {}: parameters {given:?} do not match the kernel's {declared:?}; the runtime \
             and its kernels were built from different sources",
            self.kernel.entry()
        )))
    }
}

/// The parameter types of `.entry name( ... )` in `ptx`, in order; `None` when `ptx` has no such
/// entry.
pub fn ptx_params<'a>(ptx: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let close = rest.find(')')?;
    Some(rest[..close].lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)).collect())
}

/// The stream workspace, a symmetric allocation the runtime makes at init (zeroed) when the
/// backend asks for one: the staged fcollect's words (`rshmemi_rt_fcollect_staged` in
/// runtime_kernels.cu): `[u64; BLOCKS]` epochs, `[u64; n_pes * BLOCKS]` flags,
/// `[[u64; 2]; 2 * n_pes * BLOCKS]` argument words; then the agreement slots of the other
/// on-stream collectives (`rshmemi_agree_t` in barrier_device.h), `[[u64; 2]; n_pes]` per team
/// slot; then two parities of `n_pes` staging slots of `SLOT_BYTES`.
pub mod workspace {
    use super::MAX_TEAMS;
    /// Blocks of every staged fcollect launch (the kernel needs the same count in every call).
    pub const BLOCKS: usize = 8;
    /// Largest fcollect per PE that goes through the staging slots.
    pub const SLOT_BYTES: usize = 256 << 10;
    /// Offset of the flags.
    pub const FLAGS: usize = BLOCKS * 8;
    /// Offset of the staged fcollect's argument words.
    pub const fn descs(n_pes: usize) -> usize {
        FLAGS + n_pes * BLOCKS * 8
    }
    /// Offset of team slot `team`'s agreement slots.
    pub const fn agree(n_pes: usize, team: usize) -> usize {
        descs(n_pes) + 2 * n_pes * BLOCKS * 16 + team * n_pes * 16
    }
    /// Offset of the staging slots for `n_pes` PEs (256-byte aligned).
    pub const fn staging(n_pes: usize) -> usize {
        agree(n_pes, MAX_TEAMS).next_multiple_of(256)
    }
    /// Total size for `n_pes` PEs.
    pub const fn bytes(n_pes: usize) -> usize {
        staging(n_pes) + 2 * n_pes * SLOT_BYTES
    }
}

impl Agreement {
    /// Address of this PE's agreement slots of team slot `team` (`[[u64; 2]; n_pes]`, indexed
    /// by member) in the stream workspace.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a team slot out of range or without a workspace.
    pub fn slots(&self, team: i32) -> Result<u64> {
        match usize::try_from(team) {
            Ok(t) if t < MAX_TEAMS && self.ws != 0 => Ok((self.ws + workspace::agree(self.n_pes, t)) as u64),
            _ => Err(Error::InvalidArgument(format!(
                "team slot {team} has no agreement slots (stream workspace {:#x})",
                self.ws
            ))),
        }
    }

    /// The three parameters every agreed kernel ends with: this PE's slots of team slot
    /// `team`, the packed call and its number.
    ///
    /// # Errors
    /// As [`Agreement::slots`].
    pub fn params(&self, team: i32) -> Result<[Param; 3]> {
        Ok([Param::U64(self.slots(team)?), Param::U64(self.desc), Param::U64(self.seq)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_are_checked_against_the_declared_types() {
        let launch = Launch { kernel: Kernel::Reduce, blocks: 1, barriers_of: Some(0), params: vec![Param::I32(1), Param::addr(8)] };
        assert!(launch.check(&[".u32", ".u64"]).is_ok());
        let e = launch.check(&[".u64", ".u64"]).unwrap_err().to_string();
        assert!(e.contains("rshmemi_rt_reduce") && e.contains(".u32"), "{e}");
        let ptx = ".visible .entry k(\n\t.param .u32 k_param_0,\n\t.param .u64 k_param_1\n)\n{";
        assert_eq!(ptx_params(ptx, "k"), Some(vec![".u32", ".u64"]));
        assert_eq!(ptx_params(ptx, "j"), None);
    }

    #[test]
    fn agreement_slots_follow_the_layout() {
        let a = Agreement { ws: 0x1000, n_pes: 4, desc: 7, seq: 2 };
        assert_eq!(a.slots(1).unwrap(), (0x1000 + workspace::agree(4, 1)) as u64);
        assert_eq!(a.params(0).unwrap()[1..], [Param::U64(7), Param::U64(2)]);
        assert!(a.slots(MAX_TEAMS as i32).is_err() && a.slots(-1).is_err());
        assert!(Agreement { ws: 0, ..a }.slots(0).is_err());
        assert_eq!(workspace::staging(4) % 256, 0);
    }
}
