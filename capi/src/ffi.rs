//! What every C function shares: the process's one runtime, the call wrapper that turns errors
//! and panics into status codes, and the checks that turn C arguments into runtime values.
//!
//! # Safety
//! `status`, `write_indices` and the out-pointer writes dereference pointers from C. Arrays are
//! checked against this process's mappings first (`Runtime::check_local_buffer`); a single
//! out-pointer is checked to be non-null only (reading `/proc/self/maps` for every `my_pe` would
//! cost tens of microseconds), and must point to writable memory of its type, as in any C API.
#![allow(unsafe_code)]

use crate::error;
use rshmem::bootstrap::UniqueId;
use rshmem::dtype::{DType, ReduceOp, ALL_DTYPES, SYNC_DTYPES};
use rshmem::runtime::{Access, Runtime};
use rshmem::{Error, Result};
use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

/// The process's runtime, `None` before `rshmem_host_init` and after `rshmem_host_finalize`.
///
/// Every call clones the `Arc` under a short read lock and works on its clone, so calls from
/// several threads run at once and none holds the lock while it blocks; finalize takes the
/// runtime out under the write lock once no other call holds a clone.
pub static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

/// The runtime, or [`Error::NotInitialized`] naming `call`.
pub fn runtime(call: &'static str) -> Result<Arc<Runtime>> {
    rshmem::fork::check(call)?;
    let guard = RUNTIME.read().unwrap_or_else(|e| e.into_inner());
    guard.clone().ok_or(Error::NotInitialized { call })
}

/// Why a call failed before reaching the runtime: a runtime error, or a status of its own.
pub enum Failure {
    /// A runtime error: its code and message.
    Runtime(Error),
    /// A status of the C layer (e.g. `RSHMEM_ERROR_BUSY`) and its message.
    Status(c_int, String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Runtime(e)
    }
}

/// Runs the body of C function `name`: `RSHMEM_SUCCESS`, or the error's code with its message
/// recorded for `rshmem_host_last_error`. A panic is caught here (unwinding into C is undefined
/// behaviour) and becomes `RSHMEM_ERROR_INTERNAL`.
pub fn call<F>(name: &str, body: F) -> c_int
where
    F: FnOnce() -> std::result::Result<(), Failure>,
{
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(Failure::Runtime(e))) => error::fail(error::code_of(&e), &format!("{name}: {}", error::in_c_terms(&e))),
        Ok(Err(Failure::Status(code, message))) => error::fail(code, &format!("{name}: {message}")),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let message = format!("{name}: internal error ({what}); this is a bug in rshmem, please report it");
            error::fail(crate::status::INTERNAL, &message)
        }
    }
}

/// An out-pointer must not be NULL.
pub fn check_out<T>(out: *mut T, what: &str, call: &str) -> Result<()> {
    if out.is_null() {
        return Err(Error::InvalidArgument(format!("{call}: the out-pointer `{what}` is NULL")));
    }
    Ok(())
}

/// A PE number from C: negative ones are out of range, as are those past the job.
pub fn pe(rt: &Runtime, pe: c_int) -> Result<usize> {
    usize::try_from(pe).map_err(|_| Error::PeOutOfRange { pe: pe.into(), n_pes: rt.n_pes(), scope: "the job".into() })
}

/// The dtype of a C `rshmem_dtype_t` (its value is the dtype's code in `api/dtypes.toml`).
pub fn dtype(code: c_int) -> Result<DType> {
    ALL_DTYPES.into_iter().find(|d| d.kernel_code() == code).ok_or_else(|| {
        let known: Vec<String> = ALL_DTYPES.iter().map(|d| format!("{} = {}", d.name(), d.kernel_code())).collect();
        Error::InvalidArgument(format!("{code} is not an rshmem_dtype_t; the dtypes are {}", known.join(", ")))
    })
}

/// The dtype of a point-to-point wait or test: one of the runtime's `SYNC_DTYPES`.
pub fn sync_dtype(code: c_int, call: &str) -> Result<DType> {
    let dt = dtype(code)?;
    dt.expect_one_of(call, &SYNC_DTYPES)?;
    Ok(dt)
}

/// The reduction of a C `rshmem_reduce_op_t` (in the order of the header's enum) and the dtype,
/// checked together (a bitwise reduction of floats is refused).
pub fn reduce_args(op: c_int, dtype_code: c_int) -> Result<(ReduceOp, DType)> {
    const OPS: [ReduceOp; 7] =
        [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::And, ReduceOp::Or, ReduceOp::Xor];
    let op = usize::try_from(op).ok().and_then(|i| OPS.get(i).copied()).ok_or_else(|| {
        Error::InvalidArgument(format!("{op} is not an rshmem_reduce_op_t (RSHMEM_REDUCE_SUM = 0 .. RSHMEM_REDUCE_XOR = 6)"))
    })?;
    let dt = dtype(dtype_code)?;
    op.check(dt)?;
    Ok((op, dt))
}

/// A comparison value from C (`int64_t`) as the runtime's `i128`: the value itself, except that
/// a negative one for `uint64` means its two's-complement bits (C has one 64-bit argument for
/// both signednesses). Out-of-range values for smaller types are refused by the runtime.
pub fn value(v: i64, dt: DType) -> i128 {
    if dt == DType::U64 && v < 0 {
        i128::from(v as u64)
    } else {
        i128::from(v)
    }
}

/// A value the runtime returns as `i128` (what satisfied a wait) as C's `int64_t`: the value,
/// or for a `uint64` above `INT64_MAX` its bits (as [`value`] reads them).
pub fn value_out(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(v as u64 as i64)
}

/// The optional status mask of the `*_all/any/some` waits: `nelems` ints at `status`, or none
/// for NULL.
///
/// # Safety
/// `status` is NULL or checked here to be `nelems` readable ints of this process.
pub unsafe fn status<'a>(rt: &Runtime, status: *const i32, nelems: usize) -> Result<Option<Vec<i32>>> {
    if status.is_null() {
        return Ok(None);
    }
    let bytes = nelems
        .checked_mul(std::mem::size_of::<i32>())
        .ok_or_else(|| Error::InvalidArgument(format!("nelems {nelems} is too large")))?;
    rt.check_local_buffer(status as usize, bytes, Access::Read)?;
    // SAFETY: the range was just checked to be readable memory of this process (see the file
    // header); it is copied so no reference into C memory outlives this call.
    Ok(Some(unsafe { std::slice::from_raw_parts(status, nelems) }.to_vec()))
}

/// Writes the indices a `*_some` wait found to `indices` and their number to `count`.
///
/// # Safety
/// `count` is checked non-null by the caller; `indices` is checked here to be writable for
/// `found.len()` entries.
pub unsafe fn write_indices(rt: &Runtime, indices: *mut usize, count: *mut usize, found: &[usize]) -> Result<()> {
    if !found.is_empty() {
        rt.check_local_buffer(indices as usize, std::mem::size_of_val(found), Access::Write)?;
        // SAFETY: checked writable just above.
        unsafe { std::ptr::copy_nonoverlapping(found.as_ptr(), indices, found.len()) };
    }
    // SAFETY: non-null (checked by the caller); the header asks for a writable size_t.
    unsafe { count.write(found.len()) };
    Ok(())
}

/// A unique id as C holds it: [`UniqueId::ENCODED_LEN`] bytes of encoding, zero-padded.
#[repr(C)]
pub struct UniqueIdBytes {
    /// The encoding, then zeros.
    pub bytes: [u8; 128],
}

impl UniqueIdBytes {
    /// The id these bytes hold.
    pub fn decode(&self) -> Result<UniqueId> {
        UniqueId::from_bytes(&self.bytes[..UniqueId::ENCODED_LEN])
    }
}

/// `rshmem_init_attr_t`.
#[repr(C)]
pub struct InitAttr {
    /// `sizeof(rshmem_init_attr_t)` as the program was built.
    pub size: usize,
    /// The job's id, or NULL.
    pub uid: *const UniqueIdBytes,
    /// This PE's rank (with `uid`), else -1.
    pub rank: c_int,
    /// The number of PEs (with `uid`), else -1.
    pub nranks: c_int,
    /// "host" / "cuda", or NULL.
    pub backend: *const c_char,
    /// A GPU ordinal, or -1.
    pub device: c_int,
}
