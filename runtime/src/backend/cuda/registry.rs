//! Writing the [`DeviceState`] into every loaded CUDA module that links the device library, and
//! remembering those modules.
//!
//! Every module that links the device library has a global `rshmemi_device_state_d` of type
//! `DeviceState`. [`publish`] looks it up (`cuModuleGetGlobal`), checks its size, copies the
//! state in, and remembers the module, so that a later init can write the new state into every
//! module loaded so far ([`republish_all`]) and finalize can clear them ([`unpublish_all`]).
//! Modules without the global (Triton kernels that do not use rshmem) are skipped quietly.
//!
//! Modules loaded before init (Triton's load hook runs for every kernel, also before
//! `rshmem.init()`) are kept with [`defer`] and written by [`publish_pending`] at init.
//!
//! # Safety
//! Writes the [`DeviceState`] into CUDA modules. The state is viewed as bytes for the copy,
//! which is sound because it is `#[repr(C)]`, made only of integers, and has no padding
//! (`device_state.rs` asserts its size equals the sum of its fields).
#![allow(unsafe_code)]

use crate::device_state::DeviceState;
use crate::driver::context::PrimaryContext;
use crate::driver::module::{self, ModuleHandle};
use crate::driver::stream;
use crate::error::{Error, Result};
use std::ffi::CStr;
use std::sync::Mutex;

/// The global that holds the device state in every module linking the device library.
pub const STATE_SYMBOL: &CStr = c"rshmemi_device_state_d";

/// The modules the state was written into, in load order, each once.
#[derive(Debug, Default)]
struct Registry {
    modules: Mutex<Vec<ModuleHandle>>,
}

impl Registry {
    const fn new() -> Registry {
        Registry { modules: Mutex::new(Vec::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ModuleHandle>> {
        self.modules.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, m: ModuleHandle) {
        let mut v = self.lock();
        if !v.contains(&m) {
            v.push(m);
        }
    }

    fn forget(&self, m: ModuleHandle) -> bool {
        let mut v = self.lock();
        let before = v.len();
        v.retain(|&x| x != m);
        v.len() != before
    }

    fn snapshot(&self) -> Vec<ModuleHandle> {
        self.lock().clone()
    }
}

static REGISTRY: Registry = Registry::new();

/// Modules handed over before init, not yet looked at.
static PENDING: Registry = Registry::new();

fn state_bytes(state: &DeviceState) -> &[u8] {
    // SAFETY: DeviceState is #[repr(C)], contains only integers and integer arrays, and has no
    // padding (asserted in device_state.rs), so all its bytes are initialised; the slice
    // borrows `state` and has exactly its size.
    unsafe {
        std::slice::from_raw_parts((state as *const DeviceState).cast::<u8>(), std::mem::size_of::<DeviceState>())
    }
}

/// Checks the size the module declares for the global against this runtime's struct.
fn check_size(module: ModuleHandle, found: usize) -> Result<()> {
    let expected = std::mem::size_of::<DeviceState>();
    if found == expected {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "module {:#x} declares {} as {found} bytes, but this runtime's DeviceState is {expected} \
         bytes: the device library linked into the kernel and the rshmem runtime come from \
         different versions; rebuild the kernel against the installed rshmem (clear Triton's \
         cache, ~/.triton/cache)",
        module.0,
        STATE_SYMBOL.to_string_lossy()
    )))
}

/// Writes `bytes` into the module's state global; `Ok(false)` when it has none.
fn write(ctx: &PrimaryContext, module: ModuleHandle, bytes: &[u8]) -> Result<bool> {
    ctx.bind()?;
    // SAFETY: the caller of `publish` vouches that `module` is a live module of `ctx`, which
    // is now current.
    let Some(global) = (unsafe { module::get_global(module, STATE_SYMBOL)? }) else {
        return Ok(false);
    };
    check_size(module, global.size)?;
    // SAFETY: `global` is the module's device variable of exactly `bytes.len()` bytes (checked
    // above), in `ctx`.
    unsafe { stream::copy_to_device_sync(ctx, global.addr, bytes)? };
    Ok(true)
}

/// Writes `state` into `module` and remembers the module. Returns `Ok(false)`, quietly and
/// without remembering it, when the module does not link the device library.
///
/// Call it for every module loaded after init (Triton's `kernel_load_end_hook` hands over each
/// one) and for the runtime's own modules.
///
/// # Errors
/// [`Error::InvalidArgument`] when the module's global has another size than [`DeviceState`]
/// (device library and runtime of different versions); [`Error::Driver`].
///
/// # Safety
/// `module` must be a live module loaded in `ctx` (the primary context that PyTorch and Triton
/// use), and stay loaded until [`forget`] is called for it.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html> (`cuModuleGetGlobal`);
/// NVSHMEM does the same in `nvshmemx_cumodule_init`.
#[doc(alias = "nvshmemx_cumodule_init")]
pub unsafe fn publish(ctx: &PrimaryContext, module: ModuleHandle, state: &DeviceState) -> Result<bool> {
    let written = write(ctx, module, state_bytes(state))?;
    if written {
        REGISTRY.remember(module);
        tracing::debug!(module = module.0, "published the device state");
    }
    Ok(written)
}

/// Writes `state` into every remembered module (after a new init) and returns how many.
///
/// A module that fails is forgotten and the first error is returned after all others were
/// written.
///
/// # Errors
/// As [`publish`].
///
/// # Safety
/// Every remembered module must still be loaded in `ctx` (loaders call [`forget`] before
/// unloading).
pub unsafe fn republish_all(ctx: &PrimaryContext, state: &DeviceState) -> Result<usize> {
    // SAFETY: forwarded contract.
    unsafe { write_all(ctx, state_bytes(state)) }
}

/// Clears the state in every remembered module (at finalize), so a kernel launched after
/// finalize sees `magic == 0` instead of addresses that are no longer mapped. The modules stay
/// remembered for the next init.
///
/// # Errors
/// As [`republish_all`].
///
/// # Safety
/// As [`republish_all`].
pub unsafe fn unpublish_all(ctx: &PrimaryContext) -> Result<usize> {
    let zeros = vec![0u8; std::mem::size_of::<DeviceState>()];
    // SAFETY: forwarded contract.
    unsafe { write_all(ctx, &zeros) }
}

unsafe fn write_all(ctx: &PrimaryContext, bytes: &[u8]) -> Result<usize> {
    let mut first_err = None;
    let mut n = 0;
    for m in REGISTRY.snapshot() {
        match write(ctx, m, bytes) {
            Ok(true) => n += 1,
            Ok(false) => {
                REGISTRY.forget(m);
            }
            Err(e) => {
                tracing::warn!(module = m.0, "writing the device state failed, forgetting the module: {e}");
                REGISTRY.forget(m);
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(n),
    }
}

/// Keeps `module`, loaded while no runtime is initialized, for [`publish_pending`] at the next
/// init. Nothing is checked now: there is no context to check it in.
pub fn defer(module: ModuleHandle) {
    PENDING.remember(module);
    tracing::debug!(module = module.0, "module loaded before init; the device state is written at init");
}

/// Writes `state` into every module kept by [`defer`] and remembers those that link the device
/// library, then empties the pending list. Returns how many were written.
///
/// A module the driver refuses (one loaded in another device's context, say) is skipped with
/// a warning: it cannot run this PE's device code anyway.
///
/// # Errors
/// [`Error::InvalidArgument`] for a module whose state global has the wrong size (device
/// library and runtime of different versions), after all others were handled.
///
/// # Safety
/// Every pending module must still be loaded (loaders call [`forget`] before unloading).
pub unsafe fn publish_pending(ctx: &PrimaryContext, state: &DeviceState) -> Result<usize> {
    let pending = std::mem::take(&mut *PENDING.lock());
    let mut first_err = None;
    let mut n = 0;
    for m in pending {
        match write(ctx, m, state_bytes(state)) {
            Ok(true) => {
                REGISTRY.remember(m);
                n += 1;
            }
            Ok(false) => {}
            Err(e @ Error::Driver { .. }) => {
                tracing::warn!(module = m.0, "a module loaded before init was refused by the driver, skipped: {e}");
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(n),
    }
}

/// Forgets `module` (its loader is about to unload it). Returns whether it was remembered
/// (published, or pending).
pub fn forget(module: ModuleHandle) -> bool {
    let pending = PENDING.forget(module);
    REGISTRY.forget(module) || pending
}

/// Forgets every module, pending ones included.
pub fn forget_all() {
    REGISTRY.lock().clear();
    PENDING.lock().clear();
}

/// The modules kept by [`defer`] and not yet published.
pub fn pending() -> Vec<ModuleHandle> {
    PENDING.snapshot()
}

/// The remembered modules, in the order they were first published.
pub fn modules() -> Vec<ModuleHandle> {
    REGISTRY.snapshot()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_remembers_each_module_once_in_order() {
        let r = Registry::new();
        r.remember(ModuleHandle(3));
        r.remember(ModuleHandle(1));
        r.remember(ModuleHandle(3));
        assert_eq!(r.snapshot(), [ModuleHandle(3), ModuleHandle(1)]);
        assert!(r.forget(ModuleHandle(3)));
        assert!(!r.forget(ModuleHandle(3)));
        assert_eq!(r.snapshot(), [ModuleHandle(1)]);
    }

    #[test]
    fn modules_loaded_before_init_wait_until_forgotten_or_published() {
        // No other test of this binary defers modules.
        defer(ModuleHandle(0x7701));
        defer(ModuleHandle(0x7702));
        defer(ModuleHandle(0x7701));
        assert_eq!(pending(), [ModuleHandle(0x7701), ModuleHandle(0x7702)]);
        assert!(forget(ModuleHandle(0x7701)));
        assert!(!forget(ModuleHandle(0x7701)));
        assert_eq!(pending(), [ModuleHandle(0x7702)]);
        assert!(forget(ModuleHandle(0x7702)));
        assert!(pending().is_empty());
    }

    #[test]
    fn size_mismatch_names_both_sizes() {
        let n = std::mem::size_of::<DeviceState>();
        assert!(check_size(ModuleHandle(0x10), n).is_ok());
        let e = check_size(ModuleHandle(0x10), n - 8).unwrap_err().to_string();
        assert!(e.contains(&format!("{} bytes", n - 8)) && e.contains(&format!("{n} bytes")), "{e}");
        assert!(e.contains("rshmemi_device_state_d") && e.contains("0x10"), "{e}");
    }

    #[test]
    fn state_bytes_cover_the_whole_struct() {
        let s = DeviceState::new(3, 8);
        let b = state_bytes(&s);
        assert_eq!(b.len(), std::mem::size_of::<DeviceState>());
        // magic is the first field, little-endian.
        assert_eq!(&b[..4], &crate::device_state::DEVICE_STATE_MAGIC.to_le_bytes());
        assert_eq!(&b[8..12], &3i32.to_le_bytes());
    }
}
