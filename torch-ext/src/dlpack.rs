//! Tensors over heap memory: DLPack capsules that torch (or any DLPack consumer) turns into a
//! view of symmetric memory without a copy, on the device the memory lives on (the CPU on the
//! host backend, this PE's GPU on the cuda backend), and the count of the live tensors that
//! `rshmem.torch.create_symmetric_tensor` returned, which `finalize` reports.
//!
//! Each capsule owns a boxed `DLManagedTensor` whose context holds a pin of the heap, so the
//! memory stays mapped while any tensor over it lives, past `finalize` too. The consumer calls
//! the tensor's deleter when its storage dies; a capsule never consumed is released by its own
//! destructor. The structs follow `dlpack.h` (v0.8 ABI, the one `torch.from_dlpack` reads from a
//! capsule named `"dltensor"`).
//!
//! # Safety
//! The capsule's pointer is a `Box<Managed>` leaked here and freed exactly once: by the
//! consumer through `deleter` (after it renamed the capsule `"used_dltensor"`), or by the
//! capsule destructor while the capsule still has its original name. The data pointer covers a
//! range `heap_view` checked to lie inside one live allocation of the heap, mapped while the pin
//! lives.
#![allow(unsafe_code)]

use crate::error::{new_err, Name};
use crate::init::runtime;
use pyo3::prelude::*;
use rshmem::heap::HeapPin;
use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

const KDL_CPU: i32 = 1;
const KDL_CUDA: i32 = 2;
const KDL_UINT: u8 = 1;
const NAME: &CStr = c"dltensor";

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// The managed tensor and what it keeps alive, in one allocation (`dl` first, so a pointer to
/// the whole is a pointer to the `DLManagedTensor`).
#[repr(C)]
struct Managed {
    dl: DlManagedTensor,
    shape: [i64; 1],
    _pin: HeapPin,
    /// `(allocation base, id)` of a tensor `create_symmetric_tensor` returned, counted in [`LIVE`].
    primary: Option<(usize, u64, usize)>,
}

/// Live primary views: allocation id -> (base, bytes, count).
static LIVE: Mutex<Option<HashMap<u64, (usize, usize, usize)>>> = Mutex::new(None);

fn live() -> std::sync::MutexGuard<'static, Option<HashMap<u64, (usize, usize, usize)>>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

unsafe extern "C" fn deleter(managed: *mut DlManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` is the leaked `Box<Managed>` (see the file header), freed only here.
    let owned = unsafe { Box::from_raw(managed.cast::<Managed>()) };
    if let Some((_, id, _)) = owned.primary {
        let mut map = live();
        if let Some(entry) = map.as_mut().and_then(|m| m.get_mut(&id)) {
            entry.2 -= 1;
            if entry.2 == 0 {
                map.as_mut().map(|m| m.remove(&id));
            }
        }
    }
}

unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: CPython calls this with the capsule being destroyed. A capsule still named
    // "dltensor" was never consumed: its managed tensor is ours to free.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let p = pyo3::ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr());
            deleter(p.cast());
        }
        // Otherwise the consumer renamed it "used_dltensor" and calls the deleter itself.
    }
}

/// A DLPack capsule of `nbytes` (at least 1) bytes of heap memory at `addr` as a flat uint8
/// tensor on the memory's device, and the id of the allocation holding it. `primary` marks the
/// tensor `create_symmetric_tensor` returns (counted by `live_tensors`). The range must lie
/// inside one live allocation (this PE's copy or a node-local peer's): `NotSymmetricError`
/// otherwise.
#[pyfunction]
#[pyo3(signature = (addr, nbytes, primary=false))]
fn heap_view(py: Python<'_>, addr: usize, nbytes: usize, primary: bool) -> PyResult<(Py<PyAny>, u64)> {
    let rt = runtime("rshmem.torch tensors")?;
    let heap = rt.heap();
    let len = nbytes.max(1);
    let Some(a) = heap.allocation_of(addr).filter(|a| addr + len <= a.base + a.len.max(1)) else {
        return Err(new_err(
            Name::NotSymmetricError,
            format!(
                "{addr:#x} +{len} bytes is not inside a live allocation of the symmetric heap ({}): \
                 freed already, or not symmetric memory",
                heap.describe(addr)
            ),
        ));
    };
    let device = match rt.device() {
        Some(ordinal) => DlDevice { device_type: KDL_CUDA, device_id: ordinal },
        None => DlDevice { device_type: KDL_CPU, device_id: 0 },
    };
    let primary = primary.then_some((a.base, a.id, a.len.max(1)));
    let mut managed = Box::new(Managed {
        dl: DlManagedTensor {
            dl_tensor: DlTensor {
                data: addr as *mut c_void,
                device,
                ndim: 1,
                dtype: DlDataType { code: KDL_UINT, bits: 8, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
        },
        shape: [len as i64],
        _pin: heap.pin(),
        primary,
    });
    managed.dl.dl_tensor.shape = managed.shape.as_mut_ptr();
    if let Some((base, id, bytes)) = primary {
        live().get_or_insert_with(HashMap::new).entry(id).or_insert((base, bytes, 0)).2 += 1;
    }
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` is a valid pointer to a `Managed`, whose first field is the
    // `DLManagedTensor`; the name is a static C string; the destructor frees it unless consumed.
    let capsule = unsafe { pyo3::ffi::PyCapsule_New(raw.cast(), NAME.as_ptr(), Some(capsule_destructor)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so nothing else owns `raw`.
        unsafe { deleter(raw.cast()) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: PyCapsule_New returned a new reference.
    let obj = unsafe { Py::<PyAny>::from_owned_ptr(py, capsule) };
    Ok((obj, a.id))
}

/// `(count, bytes)` of the tensors `create_symmetric_tensor` returned that are still alive and
/// whose allocation is not freed (`finalize` warns about them).
#[pyfunction]
fn live_tensors() -> PyResult<(usize, usize)> {
    let rt = runtime("rshmem.finalize()")?;
    let map = live();
    let Some(m) = map.as_ref() else { return Ok((0, 0)) };
    let heap = rt.heap();
    Ok(m.iter()
        .filter(|(id, (base, _, _))| heap.allocation_of(*base).is_some_and(|a| a.id == **id))
        .fold((0, 0), |(n, b), (_, (_, bytes, _))| (n + 1, b + bytes)))
}

/// Adds this file's functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(heap_view, m)?)?;
    m.add_function(wrap_pyfunction!(live_tensors, m)?)?;
    Ok(())
}
