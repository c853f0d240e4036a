//! The C functions of the rows of `api/host.toml` marked `c = "hand"`: those that need more than
//! argument conversion (init and its attributes, finalize, queries that work without a runtime,
//! allocation returning pointers, puts and gets that check their local buffer, atomics by
//! operation code, modules). `generated.rs` checks that each has the type the header declares.
//!
//! # Safety
//! As in `generated.rs`: symmetric addresses are checked by the runtime, raw local buffers
//! against this process's mappings, out-pointers for NULL; a module handle must be a live
//! `CUmodule` of this PE's device's primary context, kept loaded until
//! `rshmem_host_device_forget_module`.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use crate::error;
use crate::ffi::{self, check_out, Failure, InitAttr, UniqueIdBytes, RUNTIME};
use rshmem::backend::cuda::registry;
use rshmem::backend::{AmoOp, BackendKind, Width};
use rshmem::bootstrap::UniqueId;
use rshmem::device_state::{AMO_ADD, AMO_AND, AMO_COMPARE_SWAP, AMO_FETCH, AMO_OR, AMO_SET, AMO_SWAP, AMO_XOR};
use rshmem::driver::module::ModuleHandle;
use rshmem::runtime::{Access, InitOptions, Runtime};
use rshmem::{Error, SymAddr};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Arc;

/// Collective: starts the runtime on every PE (`nvshmem_init`, `nvshmemx_init_attr`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_init(attr: *const InitAttr) -> c_int {
    const NAME: &str = "rshmem_host_init()";
    ffi::call(NAME, || {
        // SAFETY: NULL or a pointer to the caller's attributes, whose `size` is checked before
        // any other field is read.
        let opts = if attr.is_null() { InitOptions::default() } else { unsafe { options(&*attr)? } };
        rshmem::fork::check("rshmem_host_init()")?;
        let mut slot = RUNTIME.write().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Err(Error::AlreadyInitialized.into());
        }
        let rt = Runtime::init(opts)?;
        // From now on a forked child is told apart (pthread_atfork) and refused.
        rshmem::fork::arm(rt.my_pe());
        *slot = Some(Arc::new(rt));
        Ok(())
    })
}

/// The init options of C attributes.
///
/// # Safety
/// `attr` is the caller's `rshmem_init_attr_t`; `uid` and `backend` are NULL or point to an
/// id / a NUL-terminated string.
unsafe fn options(attr: &InitAttr) -> Result<InitOptions, Failure> {
    let expected = std::mem::size_of::<InitAttr>();
    if attr.size != expected {
        return Err(Error::InvalidArgument(format!(
            "rshmem_init_attr_t.size is {} but this librshmem's attributes are {expected} bytes: set it to \
             sizeof(rshmem_init_attr_t) (RSHMEM_INIT_ATTR_INITIALIZER does), and build against the rshmem.h \
             of this library",
            attr.size
        ))
        .into());
    }
    let count = |v: c_int, what: &str| -> Result<Option<usize>, Error> {
        match v {
            -1 => Ok(None),
            v => usize::try_from(v)
                .map(Some)
                .map_err(|_| Error::InvalidArgument(format!("rshmem_init_attr_t.{what} is {v}; give -1 or a count"))),
        }
    };
    // SAFETY: see the function's contract.
    let uid = if attr.uid.is_null() { None } else { Some(unsafe { &*attr.uid }.decode()?) };
    let backend = if attr.backend.is_null() {
        None
    } else {
        // SAFETY: see the function's contract.
        let text = unsafe { CStr::from_ptr(attr.backend) };
        let text = text.to_str().map_err(|_| Error::InvalidArgument("rshmem_init_attr_t.backend is not UTF-8".into()))?;
        Some(BackendKind::parse(text)?)
    };
    let device = match attr.device {
        -1 => None,
        d if d >= 0 => Some(d),
        d => return Err(Error::InvalidArgument(format!("rshmem_init_attr_t.device is {d}; give -1 or an ordinal")).into()),
    };
    Ok(InitOptions { uid, rank: count(attr.rank, "rank")?, nranks: count(attr.nranks, "nranks")?, backend, device })
}

/// Makes a unique id on this PE: the address of a listener plus a random secret
/// (`nvshmemx_get_uniqueid`). Hand its bytes to every PE and pass them in `rshmem_init_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_get_unique_id(out: *mut UniqueIdBytes) -> c_int {
    const NAME: &str = "rshmem_host_get_unique_id()";
    ffi::call(NAME, || {
        check_out(out, "out", NAME)?;
        let encoded = UniqueId::new()?.to_bytes();
        let mut bytes = [0u8; 128];
        bytes[..encoded.len()].copy_from_slice(&encoded);
        // SAFETY: non-null; the header asks for a writable rshmem_uniqueid_t.
        unsafe { out.write(UniqueIdBytes { bytes }) };
        Ok(())
    })
}

/// Collective: frees everything and stops the runtime (`nvshmem_finalize`); nothing when it is
/// not running.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_finalize() -> c_int {
    const NAME: &str = "rshmem_host_finalize()";
    ffi::call(NAME, || {
        // A forked child holds a copy of its parent's runtime: finalizing it would end the parent's job.
        rshmem::fork::check(NAME)?;
        let taken = {
            let mut slot = RUNTIME.write().unwrap_or_else(|e| e.into_inner());
            match slot.take() {
                None => return Ok(()),
                Some(rt) => match Arc::try_unwrap(rt) {
                    Ok(rt) => rt,
                    Err(shared) => {
                        *slot = Some(shared);
                        return Err(Failure::Status(
                            crate::status::BUSY,
                            "another thread is inside an rshmem call; wait for it to return, then finalize".into(),
                        ));
                    }
                },
            }
        };
        rshmem::fork::disarm();
        Ok(taken.finalize_as(NAME)?)
    })
}

/// Whether init has run and finalize has not.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_is_initialized(out: *mut c_int) -> c_int {
    const NAME: &str = "rshmem_host_is_initialized()";
    ffi::call(NAME, || {
        check_out(out, "out", NAME)?;
        let up = !rshmem::fork::forked_child() && RUNTIME.read().unwrap_or_else(|e| e.into_inner()).is_some();
        // SAFETY: non-null; the header asks for a writable int.
        unsafe { out.write(c_int::from(up)) };
        Ok(())
    })
}

/// Writes `value` to the out-pointer `out` of `name` after checking it, for queries of the runtime.
fn query<T>(name: &'static str, out: *mut T, get: impl FnOnce(&Runtime) -> Result<T, Error>) -> c_int {
    ffi::call(name, || {
        check_out(out, "out", name)?;
        let rt = ffi::runtime(name)?;
        let value = get(&rt)?;
        // SAFETY: non-null; the header asks for a writable value of this type.
        unsafe { out.write(value) };
        Ok(())
    })
}

/// A count or number as a C int (PE counts are far below `INT_MAX`).
fn int(v: usize) -> c_int {
    c_int::try_from(v).unwrap_or(c_int::MAX)
}

/// This PE's number in the job (`nvshmem_my_pe`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_my_pe(out: *mut c_int) -> c_int {
    query("rshmem_host_my_pe()", out, |rt| Ok(int(rt.my_pe())))
}

/// How many PEs the job has (`nvshmem_n_pes`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_n_pes(out: *mut c_int) -> c_int {
    query("rshmem_host_n_pes()", out, |rt| Ok(int(rt.n_pes())))
}

/// The memory backend in use, `"host"` or `"cuda"` (a static string).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_backend(out: *mut *const c_char) -> c_int {
    query("rshmem_host_backend()", out, |rt| {
        Ok(match rt.backend_kind() {
            BackendKind::Host => c"host".as_ptr(),
            _ => c"cuda".as_ptr(),
        })
    })
}

/// The GPU ordinal of this PE, -1 on the host backend.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_device_ordinal(out: *mut c_int) -> c_int {
    query("rshmem_host_device_ordinal()", out, |rt| Ok(rt.device().unwrap_or(-1)))
}

/// How many PEs of this host use this PE's GPU (0 on the host backend).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_gpu_sharers(out: *mut c_int) -> c_int {
    query("rshmem_host_gpu_sharers()", out, |rt| Ok(int(rt.gpu_sharers())))
}

/// Collective: `size` bytes of symmetric memory (`nvshmem_malloc`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_malloc(size: usize, out: *mut *mut c_void) -> c_int {
    query("rshmem_host_malloc()", out, |rt| Ok(rt.malloc(size)?.as_ptr()))
}

/// Collective: `count * size` zeroed bytes (`nvshmem_calloc`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_calloc(count: usize, size: usize, out: *mut *mut c_void) -> c_int {
    query("rshmem_host_calloc()", out, |rt| Ok(rt.calloc(count, size)?.as_ptr()))
}

/// Collective: `size` bytes aligned to `alignment` (`nvshmem_align`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_align(alignment: usize, size: usize, out: *mut *mut c_void) -> c_int {
    query("rshmem_host_align()", out, |rt| Ok(rt.align(alignment, size)?.as_ptr()))
}

/// Collective: frees an allocation (`nvshmem_free`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_free(addr: *mut c_void) -> c_int {
    const NAME: &str = "rshmem_host_free()";
    ffi::call(NAME, || Ok(ffi::runtime(NAME)?.free(SymAddr::new(addr as usize))?))
}

/// Collective: makes the program's own `cuMemCreate` buffer symmetric
/// (`nvshmemx_buffer_register_symmetric`); writes its symmetric address to `*out`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_buffer_register_symmetric(addr: *mut c_void, size: usize, out: *mut *mut c_void) -> c_int {
    query("rshmem_host_buffer_register_symmetric()", out, |rt| Ok(rt.register_symmetric(addr as usize, size)?.as_ptr()))
}

/// Collective: ends a registration (`nvshmemx_buffer_unregister_symmetric`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_buffer_unregister_symmetric(addr: *mut c_void, size: usize) -> c_int {
    const NAME: &str = "rshmem_host_buffer_unregister_symmetric()";
    ffi::call(NAME, || Ok(ffi::runtime(NAME)?.unregister_symmetric(SymAddr::new(addr as usize), size)?))
}

/// The address of symmetric `addr` on `pe` if this PE reaches it by load/store, else NULL
/// (`nvshmem_ptr`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_ptr(addr: *const c_void, pe: c_int, out: *mut *mut c_void) -> c_int {
    query("rshmem_host_ptr()", out, |rt| {
        let pe = ffi::pe(rt, pe)?;
        Ok(rt.ptr(SymAddr::new(addr as usize), pe)?.map_or(std::ptr::null_mut(), |a| a as *mut c_void))
    })
}

/// Bytes of this PE's heap handed out and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_heap_in_use(out: *mut usize) -> c_int {
    query("rshmem_host_heap_in_use()", out, |rt| Ok(rt.heap().in_use()))
}

/// Bytes of this PE's heap backed by physical memory.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_heap_mapped(out: *mut usize) -> c_int {
    query("rshmem_host_heap_mapped()", out, |rt| Ok(rt.heap().mapped()))
}

/// Copies `nbytes` from local `src` to symmetric `dst` on `pe` (`nvshmem_putmem`); `src`
/// is checked to be readable memory of this process first.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_putmem(dst: *mut c_void, src: *const c_void, nbytes: usize, pe: c_int) -> c_int {
    const NAME: &str = "rshmem_host_putmem()";
    ffi::call(NAME, || {
        let rt = ffi::runtime(NAME)?;
        let pe = ffi::pe(&rt, pe)?;
        rt.check_local_buffer(src as usize, nbytes, Access::Read)?;
        // SAFETY: `src..+nbytes` was checked just above; the runtime checks `dst`.
        Ok(unsafe { rt.putmem(SymAddr::new(dst as usize), src as usize, nbytes, pe) }?)
    })
}

/// Copies `nbytes` from symmetric `src` on `pe` to local `dst` (`nvshmem_getmem`); `dst` is
/// checked to be writable memory of this process first.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_getmem(dst: *mut c_void, src: *const c_void, nbytes: usize, pe: c_int) -> c_int {
    const NAME: &str = "rshmem_host_getmem()";
    ffi::call(NAME, || {
        let rt = ffi::runtime(NAME)?;
        let pe = ffi::pe(&rt, pe)?;
        rt.check_local_buffer(dst as usize, nbytes, Access::Write)?;
        // SAFETY: `dst..+nbytes` was checked just above; the runtime checks `src`.
        Ok(unsafe { rt.getmem(dst as usize, SymAddr::new(src as usize), nbytes, pe) }?)
    })
}

/// Applies atomic `op` (`rshmem_amo_t`) to the `width`-byte (4 or 8) word at symmetric `addr` on
/// `pe` and returns the old bits; `compare_swap` takes `a` = expected and `b` = new, the others
/// use `a`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_atomic(
    addr: *mut c_void,
    width: usize,
    op: c_int,
    pe: c_int,
    a: u64,
    b: u64,
    out: *mut u64,
) -> c_int {
    query("rshmem_host_atomic()", out, |rt| {
        let pe = ffi::pe(rt, pe)?;
        let width = match width {
            4 => Width::W32,
            8 => Width::W64,
            w => return Err(Error::InvalidArgument(format!("atomics act on 4- or 8-byte words, not {w}-byte ones"))),
        };
        let op = match u32::try_from(op).unwrap_or(u32::MAX) {
            AMO_FETCH => AmoOp::Fetch,
            AMO_SET => AmoOp::Set(a),
            AMO_SWAP => AmoOp::Swap(a),
            AMO_COMPARE_SWAP => AmoOp::CompareSwap { cond: a, value: b },
            AMO_ADD => AmoOp::Add(a),
            AMO_AND => AmoOp::And(a),
            AMO_OR => AmoOp::Or(a),
            AMO_XOR => AmoOp::Xor(a),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{op} is not an rshmem_amo_t (RSHMEM_AMO_FETCH = 0 .. RSHMEM_AMO_XOR = 7)"
                )))
            }
        };
        rt.atomic(SymAddr::new(addr as usize), width, op, pe)
    })
}

/// Writes the device state into the CUDA module `module` (`nvshmemx_cumodule_init`): 1 when the
/// module links the device library and was initialized, 0 for other modules and on the host
/// backend. Before init the module is kept and initialized by init.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_device_init_module(module: *mut c_void, out: *mut c_int) -> c_int {
    const NAME: &str = "rshmem_host_device_init_module()";
    ffi::call(NAME, || {
        check_out(out, "out", NAME)?;
        if module.is_null() {
            return Err(Error::InvalidArgument(format!("{NAME}: the module is NULL")).into());
        }
        let done = match ffi::runtime(NAME) {
            // SAFETY: the file header's contract on module handles.
            Err(_) => {
                registry::defer(ModuleHandle(module as usize));
                false
            }
            // SAFETY: as above.
            Ok(rt) => unsafe { rt.publish_module(module as usize)? },
        };
        // SAFETY: non-null; the header asks for a writable int.
        unsafe { out.write(c_int::from(done)) };
        Ok(())
    })
}

/// Forgets a module given to `rshmem_host_device_init_module`, before it is unloaded
/// (`nvshmemx_cumodule_finalize`); 1 when it was remembered.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_device_forget_module(module: *mut c_void, out: *mut c_int) -> c_int {
    const NAME: &str = "rshmem_host_device_forget_module()";
    ffi::call(NAME, || {
        check_out(out, "out", NAME)?;
        let known = registry::forget(ModuleHandle(module as usize));
        // SAFETY: non-null; the header asks for a writable int.
        unsafe { out.write(c_int::from(known)) };
        Ok(())
    })
}

/// Reports an error a kernel of this PE recorded before it stopped.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_check_device_error() -> c_int {
    const NAME: &str = "rshmem_host_check_device_error()";
    ffi::call(NAME, || Ok(ffi::runtime(NAME)?.check_device_error()?))
}

/// Copies this PE's device state (`rshmemi_device_state_t`, `size` bytes) to `out`, for a CUDA
/// program that writes it into its own module (`cudaMemcpyToSymbol`, see `rshmem_cuda.h`).
/// `RSHMEM_ERROR_UNSUPPORTED` on the host backend.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_device_state(out: *mut c_void, size: usize) -> c_int {
    const NAME: &str = "rshmem_host_device_state()";
    ffi::call(NAME, || {
        check_out(out, "out", NAME)?;
        let rt = ffi::runtime(NAME)?;
        let Some(state) = rt.device_state() else {
            return Err(Error::Unsupported("the host backend has no device state; init with the cuda backend".into()).into());
        };
        let expected = std::mem::size_of_val(state);
        if size != expected {
            return Err(Error::InvalidArgument(format!(
                "size {size} is not sizeof(rshmemi_device_state_t) = {expected}: the program was built against \
                 another rshmem/device_state.h"
            ))
            .into());
        }
        rt.check_local_buffer(out as usize, size, Access::Write)?;
        // SAFETY: `out..+size` was checked writable; the state is plain data of that size.
        unsafe { std::ptr::copy_nonoverlapping((state as *const _) as *const u8, out as *mut u8, size) };
        Ok(())
    })
}

/// The message of this thread's last failed call (`""` when none has failed).
#[no_mangle]
pub extern "C" fn rshmem_host_last_error() -> *const c_char {
    error::last()
}

/// The C name of a status code (`"unknown"` for other values).
#[no_mangle]
pub extern "C" fn rshmem_host_status_name(status: c_int) -> *const c_char {
    error::name_of(status)
}

/// The name of the `index`-th variant of the runtime's error, NULL past the last.
#[no_mangle]
pub extern "C" fn rshmem_host_error_variant(index: c_int) -> *const c_char {
    usize::try_from(index).ok().and_then(error::kind_name).map_or(std::ptr::null(), CStr::as_ptr)
}

/// The status code every function returns for a runtime error of variant `variant`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_error_status(variant: *const c_char, out: *mut c_int) -> c_int {
    const NAME: &str = "rshmem_host_error_status()";
    ffi::call(NAME, || {
        check_out(out, "out", NAME)?;
        if variant.is_null() {
            return Err(Error::InvalidArgument("the variant name is NULL".into()).into());
        }
        // SAFETY: non-null; the header asks for a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(variant) }.to_string_lossy();
        let kind = error::kind_named(&name).ok_or_else(|| {
            let known: Vec<&str> = rshmem::ErrorKind::ALL.iter().map(|k| k.name()).collect();
            Error::InvalidArgument(format!("{name:?} is no variant of the runtime's error; they are {}", known.join(", ")))
        })?;
        // SAFETY: non-null; the header asks for a writable rshmem_status_t.
        unsafe { out.write(crate::status::of(kind)) };
        Ok(())
    })
}
