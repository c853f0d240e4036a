//! Constants shared with device code and Python.
//!
//! The values are those of NVSHMEM / Triton-distributed's `libshmem_device`, so that ported
//! kernels keep working: comparisons follow `nvshmem_cmp_type` (`NVSHMEM_CMP_EQ = 0` ...),
//! signal operations follow `NVSHMEM_SIGNAL_SET = 9`, `NVSHMEM_SIGNAL_ADD = 10`, and the
//! predefined teams follow `nvshmem_team_id_t`. This file is the only place they are written:
//! cbindgen copies them into the generated C header, and the Python bindings read that header.

/// `wait_until(ptr, CMP_EQ, v)`: wait until `*ptr == v`.
pub const CMP_EQ: i32 = 0;
/// `*ptr != v`.
pub const CMP_NE: i32 = 1;
/// `*ptr > v`.
pub const CMP_GT: i32 = 2;
/// `*ptr <= v`.
pub const CMP_LE: i32 = 3;
/// `*ptr < v`.
pub const CMP_LT: i32 = 4;
/// `*ptr >= v`.
pub const CMP_GE: i32 = 5;

/// Signal operation: store the value.
pub const SIGNAL_SET: i32 = 9;
/// Signal operation: add the value.
pub const SIGNAL_ADD: i32 = 10;

/// No team.
pub const TEAM_INVALID: i32 = -1;
/// Every PE.
pub const TEAM_WORLD: i32 = 0;
/// PEs whose memory this PE reaches by load/store.
pub const TEAM_SHARED: i32 = 1;
/// PEs on this host.
pub const TEAM_NODE: i32 = 2;
/// PEs with this PE's local rank, one per host.
pub const TEAM_SAME_MYPE_NODE: i32 = 3;

/// How many teams may exist at once (predefined ones included).
pub const MAX_TEAMS: usize = 32;

/// A comparison of `wait_until` / `test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `<`
    Lt,
    /// `>=`
    Ge,
}

impl Cmp {
    /// From the SHMEM constant.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] listing the allowed values.
    pub fn from_raw(raw: i32) -> crate::Result<Cmp> {
        Ok(match raw {
            CMP_EQ => Cmp::Eq,
            CMP_NE => Cmp::Ne,
            CMP_GT => Cmp::Gt,
            CMP_LE => Cmp::Le,
            CMP_LT => Cmp::Lt,
            CMP_GE => Cmp::Ge,
            _ => {
                return Err(crate::Error::InvalidArgument(format!(
                    "comparison {raw} is not one of CMP_EQ=0, CMP_NE=1, CMP_GT=2, CMP_LE=3, CMP_LT=4, CMP_GE=5"
                )))
            }
        })
    }

    /// The SHMEM constant (`CMP_*`), as device code takes it.
    pub fn raw(self) -> i32 {
        match self {
            Cmp::Eq => CMP_EQ,
            Cmp::Ne => CMP_NE,
            Cmp::Gt => CMP_GT,
            Cmp::Le => CMP_LE,
            Cmp::Lt => CMP_LT,
            Cmp::Ge => CMP_GE,
        }
    }

    /// Whether `value <op> target` holds.
    pub fn holds<T: PartialOrd>(self, value: T, target: T) -> bool {
        match self {
            Cmp::Eq => value == target,
            Cmp::Ne => value != target,
            Cmp::Gt => value > target,
            Cmp::Le => value <= target,
            Cmp::Lt => value < target,
            Cmp::Ge => value >= target,
        }
    }

    /// The operator as text, for messages.
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Gt => ">",
            Cmp::Le => "<=",
            Cmp::Lt => "<",
            Cmp::Ge => ">=",
        }
    }
}

/// A signal operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalOp {
    /// Store.
    Set,
    /// Add.
    Add,
}

impl SignalOp {
    /// From the SHMEM constant.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] listing the allowed values.
    pub fn from_raw(raw: i32) -> crate::Result<SignalOp> {
        match raw {
            SIGNAL_SET => Ok(SignalOp::Set),
            SIGNAL_ADD => Ok(SignalOp::Add),
            _ => Err(crate::Error::InvalidArgument(format!(
                "signal operation {raw} is not SIGNAL_SET=9 or SIGNAL_ADD=10"
            ))),
        }
    }
}
