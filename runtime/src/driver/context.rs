//! Driver initialisation, device queries and the primary context.
//!
//! # Safety
//! Driver initialisation, device queries and the primary context. Every call passes pointers to
//! live locals as out-parameters; the library is probed for before the first call (see
//! [`init`]), so cudarc never panics on a missing library.
#![allow(unsafe_code)]

use super::{check, sys};
use crate::error::{Error, Result};
use std::ffi::c_int;
use std::sync::{Arc, OnceLock};

/// Oldest driver this build supports, as `cuDriverGetVersion` reports it (1000 × major +
/// 10 × minor): CUDA 12.0. Two things set it. The runtime's kernels are PTX ISA 8.0
/// (`runtime/build.rs`: the copy loops use cache-eviction qualifiers), which a driver older than
/// 12.0 refuses to load (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`) wherever no cubin fits the GPU.
/// And the driver symbols come from cudarc's `cuda-11070` bindings, the first release with the
/// `_v2` stream memory operations (`cuStreamWaitValue64_v2`, `cuStreamWriteValue64_v2`); every
/// 12.x driver has them. Checking 12.0 here turns both into one clear error at init.
pub const MIN_DRIVER_VERSION: i32 = 12000;

/// The file name the driver library is loaded as on Linux.
pub const LIBRARY: &str = "libcuda.so.1";

/// What [`init`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverInfo {
    /// `cuDriverGetVersion`: 1000 × major + 10 × minor (12020 is CUDA 12.2).
    pub version: i32,
}

impl DriverInfo {
    /// The CUDA version the driver supports, as `(major, minor)`.
    pub fn cuda_version(self) -> (i32, i32) {
        (self.version / 1000, (self.version % 1000) / 10)
    }
}

/// Why [`init`] failed, kept so every later call fails the same way.
#[derive(Debug, Clone)]
enum InitFailure {
    NoLibrary,
    TooOld(i32),
    Panicked(String),
    Driver { call: &'static str, code: u32, name: String },
}

impl InitFailure {
    fn to_error(&self) -> Error {
        match self {
            InitFailure::NoLibrary => Error::Unsupported(format!(
                "the CUDA driver library ({LIBRARY}) was not found: no NVIDIA driver is installed \
                 or it is not on the loader path; install the driver, add its directory to \
                 LD_LIBRARY_PATH, or use RSHMEM_BACKEND=host"
            )),
            InitFailure::TooOld(v) => Error::Unsupported(format!(
                "the CUDA driver supports CUDA {}.{}, rshmem needs {}.{} or newer; update the \
                 NVIDIA driver or use RSHMEM_BACKEND=host",
                v / 1000,
                (v % 1000) / 10,
                MIN_DRIVER_VERSION / 1000,
                (MIN_DRIVER_VERSION % 1000) / 10
            )),
            InitFailure::Panicked(msg) => Error::Unsupported(format!(
                "loading the CUDA driver library ({LIBRARY}) failed: {msg}"
            )),
            InitFailure::Driver { call, code, name } => {
                Error::Driver { call, code: *code, name: name.clone() }
            }
        }
    }
}

/// Loads the driver library, checks its version and calls `cuInit(0)`; runs once per process.
///
/// Call this before anything else in [`crate::driver`]: it is what makes the other calls safe
/// from cudarc's panics on a missing library or symbol.
///
/// # Errors
/// [`Error::Unsupported`] when `libcuda.so.1` cannot be loaded or the driver is older than
/// [`MIN_DRIVER_VERSION`]; [`Error::Driver`] when `cuInit` fails (e.g. no device visible).
/// The same error is returned on every call.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__INITIALIZE.html>,
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VERSION.html>
pub fn init() -> Result<DriverInfo> {
    static ONCE: OnceLock<std::result::Result<DriverInfo, InitFailure>> = OnceLock::new();
    ONCE.get_or_init(init_once).clone().map_err(|f| f.to_error())
}

fn init_once() -> std::result::Result<DriverInfo, InitFailure> {
    // cudarc panics when the library or a symbol is missing. The probe below avoids the first
    // case; catch_unwind turns any other panic from the loader (an odd stub library without
    // cuDriverGetVersion, say) into an error instead of taking the process down.
    let probed = std::panic::catch_unwind(|| {
        // SAFETY: `is_culib_present` only tries `dlopen` on cudarc's candidate names
        // (libcuda.so, ..., libcuda.so.1) and closes what it opened.
        if !unsafe { sys::is_culib_present() } {
            return Err(InitFailure::NoLibrary);
        }
        let mut version: c_int = 0;
        // SAFETY: cuDriverGetVersion "Returns in *driverVersion the version of CUDA supported
        // by the driver" and may be called before cuInit. `version` is a live local.
        // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VERSION.html
        let r = unsafe { sys::cuDriverGetVersion(&mut version) };
        check("cuDriverGetVersion", r).map_err(into_failure)?;
        Ok(version)
    });
    let version = match probed {
        Ok(v) => v?,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the loader panicked".into());
            return Err(InitFailure::Panicked(msg));
        }
    };
    if version < MIN_DRIVER_VERSION {
        return Err(InitFailure::TooOld(version));
    }
    // SAFETY: cuInit "Initializes the driver API and must be called before any other function
    // from the driver API"; flags must be 0. Symbols exist: the version check passed.
    // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__INITIALIZE.html
    let r = unsafe { sys::cuInit(0) };
    check("cuInit", r).map_err(into_failure)?;
    tracing::debug!(version, "CUDA driver initialised");
    Ok(DriverInfo { version })
}

fn into_failure(e: Error) -> InitFailure {
    match e {
        Error::Driver { call, code, name } => InitFailure::Driver { call, code, name },
        other => InitFailure::Panicked(other.to_string()),
    }
}

/// How many CUDA devices this process sees (after `CUDA_VISIBLE_DEVICES`).
///
/// # Errors
/// As [`init`], or [`Error::Driver`] from `cuDeviceGetCount`.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html>
pub fn device_count() -> Result<usize> {
    init()?;
    let mut n: c_int = 0;
    // SAFETY: cuDeviceGetCount "Returns in *count the number of devices with compute capability
    // greater than or equal to 2.0"; `n` is a live local; init succeeded.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// One CUDA device of this process, by ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    ordinal: usize,
    raw: sys::CUdevice,
}

/// What two devices can do to each other's memory (`cuDeviceGetP2PAttribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerAccess {
    /// Loads and stores reach the peer's memory (`CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED`).
    pub access: bool,
    /// Atomics on the peer's memory are native over the link
    /// (`CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED`).
    pub native_atomics: bool,
}

impl Device {
    /// The device with this ordinal.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `ordinal` is not below [`device_count`], or a driver
    /// error.
    pub fn get(ordinal: usize) -> Result<Device> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::InvalidArgument(format!(
                "CUDA device {ordinal} does not exist: this process sees {count} device(s) \
                 (check CUDA_VISIBLE_DEVICES and LOCAL_RANK)"
            )));
        }
        let mut raw: sys::CUdevice = 0;
        // SAFETY: cuDeviceGet "Returns in *device a device handle given an ordinal in the range
        // [0, cuDeviceGetCount()-1]"; the range was checked above.
        // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html
        check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut raw, ordinal as c_int) })?;
        Ok(Device { ordinal, raw })
    }

    /// The ordinal in this process.
    pub fn ordinal(self) -> usize {
        self.ordinal
    }

    pub(crate) fn raw(self) -> sys::CUdevice {
        self.raw
    }

    /// The device's UUID: the same physical GPU has the same UUID in every process, whatever
    /// `CUDA_VISIBLE_DEVICES` says.
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDeviceGetUuid_v2`.
    pub fn uuid(self) -> Result<[u8; 16]> {
        let mut uuid = sys::CUuuid_st { bytes: [0; 16] };
        // SAFETY: cuDeviceGetUuid_v2 "Returns 16-octets identifying the device dev in the
        // structure pointed by the uuid"; `uuid` is a live local.
        // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html
        check("cuDeviceGetUuid_v2", unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, self.raw) })?;
        Ok(uuid.bytes.map(|b| b as u8))
    }

    /// The device's name ("NVIDIA H200").
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDeviceGetName`.
    pub fn name(self) -> Result<String> {
        let mut buf = [0 as std::ffi::c_char; 256];
        // SAFETY: cuDeviceGetName writes "an ASCII string identifying the device" of at most
        // `len` bytes, NUL-terminated, into `name`; `buf` is a live local of that length.
        // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html
        check("cuDeviceGetName", unsafe {
            sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, self.raw)
        })?;
        Ok(c_buf_to_string(&buf))
    }

    /// The PCI bus id ("0000:3b:00.0").
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDeviceGetPCIBusId`.
    pub fn pci_bus_id(self) -> Result<String> {
        let mut buf = [0 as std::ffi::c_char; 32];
        // SAFETY: cuDeviceGetPCIBusId writes a NUL-terminated string of at most `len` bytes;
        // "13 characters will be sufficient"; `buf` is a live local of 32.
        // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html
        check("cuDeviceGetPCIBusId", unsafe {
            sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as c_int, self.raw)
        })?;
        Ok(c_buf_to_string(&buf))
    }

    fn attribute(self, attr: sys::CUdevice_attribute, call: &'static str) -> Result<i32> {
        let mut v: c_int = 0;
        // SAFETY: cuDeviceGetAttribute "Returns in *pi the integer value of the attribute
        // attrib on device dev"; `v` is a live local.
        // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html
        check(call, unsafe { sys::cuDeviceGetAttribute(&mut v, attr, self.raw) })?;
        Ok(v)
    }

    /// Whether the device can create memory exportable as a POSIX file descriptor through the
    /// virtual memory management API (what the `cuda` backend needs).
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDeviceGetAttribute`.
    pub fn supports_vmm_fd(self) -> Result<bool> {
        use sys::CUdevice_attribute::*;
        let vmm = self.attribute(
            CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
            "cuDeviceGetAttribute(VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED)",
        )?;
        let fd = self.attribute(
            CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
            "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)",
        )?;
        Ok(vmm != 0 && fd != 0)
    }

    /// The compute capability `(major, minor)`: `(9, 0)` for sm_90 (H100, H200).
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDeviceGetAttribute`.
    pub fn compute_capability(self) -> Result<(i32, i32)> {
        use sys::CUdevice_attribute::*;
        let major = self.attribute(
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)",
        )?;
        let minor = self.attribute(
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)",
        )?;
        Ok((major, minor))
    }

    /// Whether `cuStreamWaitValue64` / `cuStreamWriteValue64` work on this device.
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDeviceGetAttribute`.
    pub fn supports_stream_mem_ops_64(self) -> Result<bool> {
        use sys::CUdevice_attribute::*;
        // With the CUDA 11.7 bindings attribute 122 is spelt `_V2`; it is the one that goes
        // with the `_v2` functions (CUDA 12 renamed it to the plain name, same value).
        let v = self.attribute(
            CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V2,
            "cuDeviceGetAttribute(CAN_USE_64_BIT_STREAM_MEM_OPS)",
        )?;
        Ok(v != 0)
    }

    /// Whether this device can map `peer`'s memory (`cuDeviceCanAccessPeer`) and what the link
    /// offers. A device "reaches" itself.
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDeviceCanAccessPeer` or `cuDeviceGetP2PAttribute`.
    ///
    /// # References
    /// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html>
    pub fn peer_access(self, peer: Device) -> Result<PeerAccess> {
        if peer.raw == self.raw {
            return Ok(PeerAccess { access: true, native_atomics: true });
        }
        let mut can: c_int = 0;
        // SAFETY: cuDeviceCanAccessPeer "Returns in *canAccessPeer a value of 1 if contexts on
        // dev are capable of directly accessing memory from contexts on peerDev"; live local.
        check("cuDeviceCanAccessPeer", unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, self.raw, peer.raw)
        })?;
        let p2p = |attr: sys::CUdevice_P2PAttribute, call: &'static str| -> Result<bool> {
            let mut v: c_int = 0;
            // SAFETY: cuDeviceGetP2PAttribute "Returns in *value the value of the requested
            // attribute attrib of the link between srcDevice and dstDevice"; live local.
            check(call, unsafe { sys::cuDeviceGetP2PAttribute(&mut v, attr, self.raw, peer.raw) })?;
            Ok(v != 0)
        };
        use sys::CUdevice_P2PAttribute::*;
        let access = can != 0
            && p2p(CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, "cuDeviceGetP2PAttribute(ACCESS_SUPPORTED)")?;
        let native_atomics = access
            && p2p(
                CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                "cuDeviceGetP2PAttribute(NATIVE_ATOMIC_SUPPORTED)",
            )?;
        Ok(PeerAccess { access, native_atomics })
    }
}

fn c_buf_to_string(buf: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A retained primary context of one device.
///
/// Owns one reference to the device's primary context (the one the CUDA runtime, PyTorch and
/// Triton also use, so memory and modules are shared with them). Dropping it releases the
/// reference; everything made in the context (streams, modules, mappings) holds an
/// `Arc<PrimaryContext>` and is released first.
#[derive(Debug)]
pub struct PrimaryContext {
    device: Device,
    raw: sys::CUcontext,
}

// SAFETY: a CUcontext is a handle that the driver lets any thread make current
// (cuCtxSetCurrent); the driver API is thread-safe. The handle is never dereferenced here.
unsafe impl Send for PrimaryContext {}
// SAFETY: as above; shared use only passes the handle to thread-safe driver calls.
unsafe impl Sync for PrimaryContext {}

impl PrimaryContext {
    /// Retains `device`'s primary context and makes it current on this thread.
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuDevicePrimaryCtxRetain` or `cuCtxSetCurrent`.
    ///
    /// # References
    /// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html>
    pub fn retain(device: Device) -> Result<Arc<PrimaryContext>> {
        let mut raw: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: cuDevicePrimaryCtxRetain "Retains the primary context on the device" and
        // returns it in *pctx; `raw` is a live local, `device` came from cuDeviceGet.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut raw, device.raw)
        })?;
        let ctx = Arc::new(PrimaryContext { device, raw });
        ctx.bind()?;
        Ok(ctx)
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    pub(crate) fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// Makes the context current on the calling thread; every driver call that needs a
    /// context does this first, since the caller's thread may have another one current.
    ///
    /// # Errors
    /// [`Error::Driver`] from `cuCtxSetCurrent`.
    pub fn bind(&self) -> Result<()> {
        // SAFETY: cuCtxSetCurrent "Binds the specified CUDA context to the calling CPU thread";
        // `raw` is retained for as long as `self` lives.
        // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.raw) })
    }
}

/// `cuCtxSynchronize`: waits until every stream of the current context is idle.
///
/// # Errors
/// [`Error::Driver`], including errors of earlier asynchronous work.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html>
pub fn synchronize(ctx: &PrimaryContext) -> Result<()> {
    ctx.bind()?;
    // SAFETY: "Blocks until the device has completed all preceding requested tasks"; the
    // context is current and retained by the reference.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `retain`; cuDevicePrimaryCtxRelease_v2 "Releases the
        // primary context interop on the device". Everything made in it is gone (they hold Arcs).
        let r = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device.raw) };
        if let Err(e) = check("cuDevicePrimaryCtxRelease_v2", r) {
            super::deferred::record("the primary context", e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_fails_cleanly_without_a_driver_or_succeeds_with_one() {
        // SAFETY: see `init_once`.
        let present = unsafe { sys::is_culib_present() };
        match init() {
            Ok(info) => {
                assert!(present, "init succeeded although no libcuda was found");
                assert!(info.version >= MIN_DRIVER_VERSION, "{info:?}");
            }
            Err(e) => {
                let msg = e.to_string();
                if !present {
                    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
                    assert!(msg.contains(LIBRARY) && msg.contains("RSHMEM_BACKEND=host"), "{msg}");
                }
                // Same error again, no panic on the second call either.
                assert_eq!(init().unwrap_err().to_string(), msg);
                assert_eq!(device_count().unwrap_err().to_string(), msg);
                assert!(Device::get(0).is_err());
            }
        }
    }

    #[test]
    fn too_old_driver_message_names_both_versions() {
        let msg = InitFailure::TooOld(11070).to_error().to_string();
        assert!(msg.contains("CUDA 11.7") && msg.contains("needs 12.0"), "{msg}");
        assert_eq!(DriverInfo { version: 13000 }.cuda_version(), (13, 0));
        assert_eq!(DriverInfo { version: 12020 }.cuda_version(), (12, 2));
    }
}
