//! One thin function per virtual-memory-management call (`cuMem*`).
//!
//! Reference for all of them:
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html>
//!
//! # Safety
//! One thin function per virtual-memory-management call (`cuMem*`). They take and return plain
//! integers (addresses, sizes, allocation handles); which of them are live is tracked by the
//! RAII types of `backend::cuda` (`VaRange`, `PhysChunk`, `Mapping`), which call these in the
//! documented order. Every out-parameter is a live local. The caller binds its context first.
#![allow(unsafe_code)]

use super::context::Device;
use super::{check, sys};
use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A raw allocation handle (`CUmemGenericAllocationHandle`).
pub type AllocHandle = sys::CUmemGenericAllocationHandle;

/// The properties of every chunk rshmem makes: pinned device memory on `device`, exportable as
/// a POSIX file descriptor.
fn chunk_prop(device: Device) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device.raw(),
        },
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

/// `cuMemGetAllocationGranularity` for chunks on `device`: the recommended granularity when
/// `recommended`, else the minimum. Chunk sizes and mapping addresses are multiples of it.
///
/// # Errors
/// [`Error::Driver`].
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemGetAllocationGranularity`)
pub fn granularity(device: Device, recommended: bool) -> Result<usize> {
    let prop = chunk_prop(device);
    let option = if recommended {
        sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
    } else {
        sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM
    };
    let mut g: usize = 0;
    // SAFETY: "Calculates either the minimal or recommended granularity for allocation
    // properties"; `prop` and `g` are live locals.
    check("cuMemGetAllocationGranularity", unsafe {
        sys::cuMemGetAllocationGranularity(&mut g, &prop, option)
    })?;
    Ok(g)
}

/// `cuMemAddressReserve`: reserves `len` bytes of device virtual addresses aligned to `align`
/// (0: the driver's default). Nothing is mapped there yet.
///
/// # Errors
/// [`Error::Driver`] (e.g. `CUDA_ERROR_OUT_OF_MEMORY` when the address space is exhausted).
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemAddressReserve`)
pub fn address_reserve(len: usize, align: usize) -> Result<usize> {
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: "Allocate an address range reservation"; `ptr` is a live local; addr = 0 lets
    // the driver choose, flags must be 0.
    check("cuMemAddressReserve", unsafe { sys::cuMemAddressReserve(&mut ptr, len, align, 0, 0) })?;
    Ok(ptr as usize)
}

/// `cuMemAddressFree`: gives back a range from [`address_reserve`]. Every mapping inside it
/// must be unmapped first.
///
/// # Errors
/// [`Error::Driver`].
///
/// # Safety
/// `[ptr, ptr+len)` must be exactly a live reservation with nothing mapped in it, and nothing
/// may use its addresses afterwards.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemAddressFree`)
pub unsafe fn address_free(ptr: usize, len: usize) -> Result<()> {
    // SAFETY: "Free an address range reservation"; the caller's contract above.
    check("cuMemAddressFree", unsafe { sys::cuMemAddressFree(ptr as sys::CUdeviceptr, len) })
}

/// `cuMemCreate`: `len` bytes of pinned memory on `device`, exportable as a POSIX fd.
/// Returns the allocation handle; [`release`] gives it back.
///
/// # Errors
/// [`Error::Driver`] (`CUDA_ERROR_OUT_OF_MEMORY` when the GPU is full, `INVALID_VALUE` when
/// `len` is not a multiple of [`granularity`]).
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemCreate`)
pub fn create(device: Device, len: usize) -> Result<AllocHandle> {
    let prop = chunk_prop(device);
    let mut handle: AllocHandle = 0;
    // SAFETY: "Create a CUDA memory handle representing a memory allocation of a given size
    // described by the given properties"; `prop` and `handle` are live locals, flags must be 0.
    check("cuMemCreate", unsafe { sys::cuMemCreate(&mut handle, len, &prop, 0) })?;
    Ok(handle)
}

/// `cuMemRetainAllocationHandle`: a new handle of the allocation mapped at `addr` (a program's
/// own `cuMemMap`), to be given back with [`release`].
///
/// # Errors
/// [`Error::Driver`] (`CUDA_ERROR_INVALID_VALUE` when nothing is mapped at `addr` through the
/// virtual memory management API, e.g. memory from `cudaMalloc`).
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemRetainAllocationHandle`)
pub fn retain(addr: usize) -> Result<AllocHandle> {
    let mut handle: AllocHandle = 0;
    // SAFETY: "Given an address addr, returns the allocation handle of the backing memory
    // allocation"; `handle` is a live local, and the driver only reads its table of mappings
    // for `addr` (an address it does not know is an error, never a dereference).
    check("cuMemRetainAllocationHandle", unsafe { sys::cuMemRetainAllocationHandle(&mut handle, addr as *mut std::ffi::c_void) })?;
    Ok(handle)
}

/// What [`properties`] tells of an allocation: its device (`None`: not device memory) and
/// whether node-local peers can import it by file descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocInfo {
    /// The device the memory is on, as `CUdevice` ordinal; `None` for host or other locations.
    pub device: Option<i32>,
    /// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` was requested at `cuMemCreate`.
    pub exportable_fd: bool,
}

/// `cuMemGetAllocationPropertiesFromHandle`, reduced to what adopting a program's allocation
/// needs.
///
/// # Errors
/// [`Error::Driver`].
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemGetAllocationPropertiesFromHandle`)
pub fn properties(handle: AllocHandle) -> Result<AllocInfo> {
    use std::mem::{offset_of, MaybeUninit};
    type Prop = sys::CUmemAllocationProp;
    let mut prop = MaybeUninit::<Prop>::zeroed();
    // SAFETY: "Retrieve the contents of the property structure defining properties for this
    // handle" into `prop`, live local storage of that type.
    check("cuMemGetAllocationPropertiesFromHandle", unsafe {
        sys::cuMemGetAllocationPropertiesFromHandle(prop.as_mut_ptr(), handle)
    })?;
    // The location type may be newer than these bindings, and the handle types a mask of several:
    // read both as the plain integers they are, not as Rust enums (a value outside an enum's
    // variants would be undefined behaviour).
    let raw = |at: usize| -> u32 {
        // SAFETY: `at` is the offset of a 4-byte C enum field inside the zero-initialised,
        // driver-filled struct; unaligned reads of plain integers are always valid.
        unsafe { prop.as_ptr().cast::<u8>().add(at).cast::<u32>().read_unaligned() }
    };
    let handle_types = raw(offset_of!(Prop, requestedHandleTypes));
    let location = offset_of!(Prop, location);
    let on_device = raw(location + offset_of!(sys::CUmemLocation, type_))
        == sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE as u32;
    let id = raw(location + offset_of!(sys::CUmemLocation, id)) as i32;
    let fd = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.0;
    Ok(AllocInfo { device: on_device.then_some(id), exportable_fd: handle_types & fd != 0 })
}

/// `cuMemRelease`: drops this process's handle. The memory itself is freed once every
/// mapping of it, in every process, is gone too.
///
/// # Errors
/// [`Error::Driver`].
///
/// # Safety
/// `handle` must be live and not used afterwards.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemRelease`)
pub unsafe fn release(handle: AllocHandle) -> Result<()> {
    // SAFETY: "Release a memory handle representing a memory allocation which was previously
    // allocated through cuMemCreate"; the caller's contract above.
    check("cuMemRelease", unsafe { sys::cuMemRelease(handle) })
}

/// A POSIX file descriptor that stands for a CUDA allocation (from
/// `cuMemExportToShareableHandle`).
///
/// Owns the descriptor, nothing else: closing it does not free the memory, and a peer that
/// imports it gets its own handle. It is sent to node-local peers over a Unix socket.
#[derive(Debug)]
pub struct ExportedFd(pub OwnedFd);

/// `cuMemExportToShareableHandle` as a POSIX file descriptor.
///
/// # Errors
/// [`Error::Driver`] (`CUDA_ERROR_NOT_PERMITTED` when the allocation was not created
/// exportable).
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemExportToShareableHandle`)
pub fn export_fd(handle: AllocHandle) -> Result<ExportedFd> {
    let mut fd: std::ffi::c_int = -1;
    // SAFETY: "Exports an allocation to a requested shareable handle type" into
    // `shareableHandle`, "Pointer to the location in which to store the requested handle
    // type"; for CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR that type is "(int)" (cuda.h), and
    // the pointer is the live local int `fd`.
    check("cuMemExportToShareableHandle", unsafe {
        sys::cuMemExportToShareableHandle(
            (&mut fd as *mut std::ffi::c_int).cast(),
            handle,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            0,
        )
    })?;
    if fd < 0 {
        return Err(Error::Unsupported(format!(
            "cuMemExportToShareableHandle succeeded but returned file descriptor {fd}"
        )));
    }
    // SAFETY: the driver just created this descriptor for us and nothing else owns it.
    Ok(ExportedFd(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// `cuMemImportFromShareableHandle` of a POSIX file descriptor a peer exported. The descriptor
/// stays open (the caller closes it); the returned handle needs [`release`].
///
/// # Errors
/// [`Error::Driver`] (`CUDA_ERROR_INVALID_VALUE` or `INVALID_HANDLE` for a descriptor that is
/// not a CUDA allocation).
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemImportFromShareableHandle`)
pub fn import_fd(fd: BorrowedFd<'_>) -> Result<AllocHandle> {
    let mut handle: AllocHandle = 0;
    // SAFETY: "Imports an allocation from a requested shareable handle type". The handle of
    // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR is an "(int)" (cuda.h), which the C API passes
    // by value in the `void*` osHandle, as NVIDIA's memMapIPCDrv sample does. `fd` stays open
    // for the duration of the call.
    check("cuMemImportFromShareableHandle", unsafe {
        sys::cuMemImportFromShareableHandle(
            &mut handle,
            fd.as_raw_fd() as usize as *mut std::ffi::c_void,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        )
    })?;
    Ok(handle)
}

/// `cuMemMap`: maps all `len` bytes of allocation `handle` at `ptr`, inside a reservation.
/// The mapping is not accessible until [`set_access`].
///
/// # Errors
/// [`Error::Driver`].
///
/// # Safety
/// `[ptr, ptr+len)` must lie inside a live reservation and be unmapped; `handle` must be live
/// and at least `len` bytes long.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemMap`)
pub unsafe fn map(ptr: usize, len: usize, handle: AllocHandle) -> Result<()> {
    // SAFETY: "Maps an allocation handle to a reserved virtual address range"; offset and
    // flags must be 0; the caller's contract above.
    check("cuMemMap", unsafe { sys::cuMemMap(ptr as sys::CUdeviceptr, len, 0, handle, 0) })
}

/// `cuMemUnmap`: unmaps `[ptr, ptr+len)`; the addresses stay reserved.
///
/// # Errors
/// [`Error::Driver`].
///
/// # Safety
/// The range must be exactly one earlier [`map`], and no work that uses it may still run.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemUnmap`)
pub unsafe fn unmap(ptr: usize, len: usize) -> Result<()> {
    // SAFETY: "Unmap the backing memory of a given address range"; the caller's contract.
    check("cuMemUnmap", unsafe { sys::cuMemUnmap(ptr as sys::CUdeviceptr, len) })
}

/// `cuMemSetAccess`: makes `[ptr, ptr+len)` readable and writable from every device in
/// `devices` (this PE's GPU and every node-local GPU that reaches it by load/store).
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty list; [`Error::Driver`] (e.g. a device without peer access
/// to the memory's GPU).
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html> (`cuMemSetAccess`)
pub fn set_access(ptr: usize, len: usize, devices: &[Device]) -> Result<()> {
    if devices.is_empty() {
        return Err(Error::InvalidArgument("set_access needs at least one device".into()));
    }
    let descs: Vec<sys::CUmemAccessDesc> = devices
        .iter()
        .map(|d| sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: d.raw(),
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        })
        .collect();
    // SAFETY: "Set the access flags for each location specified in desc for the given virtual
    // address range"; `descs` is a live array of `count` descriptors. Setting access on a
    // mapped range of ours changes no memory that Rust owns.
    check("cuMemSetAccess", unsafe {
        sys::cuMemSetAccess(ptr as sys::CUdeviceptr, len, descs.as_ptr(), descs.len())
    })
}
