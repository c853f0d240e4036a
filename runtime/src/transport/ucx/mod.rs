//! UCX, loaded at run time: thin, checked wrappers over the UCP calls rshmem makes.
//!
//! The same three layers as [`crate::driver`] (STYLE.md 1): [`sys`] is the raw API (types and a
//! table of function pointers); the files here wrap one call per function, turn its
//! `ucs_status_t` into [`Error::Transport`], and give RAII types for what needs releasing. Only
//! this module and the transport around it (`crate::transport`) name `sys::` items.
//!
//! | file | UCP calls |
//! |---|---|
//! | [`context`] | `ucp_config_read`, `ucp_init_version`, `ucp_mem_map`, `ucp_rkey_pack` |
//! | [`worker`] | `ucp_worker_*`: create, address, progress, wake-up, flush, active-message handlers; requests |
//! | [`endpoint`] | `ucp_ep_create` / `close`, `ucp_ep_rkey_unpack`, `ucp_put_nbx`, `ucp_get_nbx`, `ucp_atomic_op_nbx`, `ucp_am_send_nbx` |
//!
//! # Where UCX comes from
//! Nothing links UCX: a job whose PEs all share one host never loads it. [`api`] opens it on
//! first use, from `RSHMEM_UCX_DIR` when set (a directory holding `libucp.so.0`, such as
//! the `libucx-cu12` wheel's `libucx/lib`; the Python package sets it to that wheel's directory
//! when the wheel is installed and the variable is not), else by soname from the loader path
//! (Debian/Ubuntu's `libucx0` package, or an HPC module). A missing library fails with
//! [`Error::Unsupported`] naming both ways to install it.
//!
//! # Safety
//! The libraries are loaded once and never unloaded (a `'static` table), so every function
//! pointer stays valid. Each wrapper's `// SAFETY:` comment names the UCP contract it relies on
//! (<https://openucx.readthedocs.io/en/master/api/file/ucp_8h.html>).
#![allow(unsafe_code)]

pub mod context;
pub mod endpoint;
pub mod sys;
pub mod worker;

pub use context::{Context, MemHandle};
pub use endpoint::{AtomicOp, Endpoint, Rkey};
pub use worker::{Request, Worker};

use crate::error::{Error, Result};
use std::ffi::CStr;
use std::path::{Path, PathBuf};

use std::sync::OnceLock;

/// The environment variable naming the directory UCX is loaded from.
pub const DIR_VAR: &str = "RSHMEM_UCX_DIR";

/// The sonames loaded: `libucs` first (`libucp` needs it; loading it by path first makes the
/// soname lookup of `libucp`'s dependency find the same copy).
const LIBS: [&str; 2] = ["libucs.so.0", "libucp.so.0"];

/// The oldest UCP API version rshmem calls (the field layouts in [`sys`] are this version's).
pub const MIN_VERSION: (u32, u32) = (1, 13);

/// How to get UCX, for error messages.
pub const INSTALL_HINT: &str = "install UCX: `pip install libucx-cu12` (the Python package finds \
     the wheel by itself; Rust programs set RSHMEM_UCX_DIR to its libucx/lib directory) or the \
     system's package (`apt-get install libucx0`, or an HPC module), or set RSHMEM_UCX_DIR to the \
     directory holding libucp.so.0";

/// The loaded UCX: its function table and version.
pub struct Ucx {
    /// Every function rshmem calls.
    pub api: sys::Api,
    /// `ucp_get_version`: (major, minor, release).
    pub version: (u32, u32, u32),
    /// Where it was loaded from (the directory, or "the loader path").
    pub origin: String,
    _libs: Vec<libloading::Library>,
}

impl std::fmt::Debug for Ucx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ucx").field("version", &self.version).field("origin", &self.origin).finish()
    }
}

/// UCX, loaded on the first call (from `RSHMEM_UCX_DIR`, else the loader path); the same
/// answer, success or failure, on every later call.
///
/// # Errors
/// [`Error::Unsupported`] when the libraries are missing, lack a function rshmem calls, or are
/// older than [`MIN_VERSION`]; the message says how to install UCX.
pub fn api() -> Result<&'static Ucx> {
    static UCX: OnceLock<std::result::Result<Ucx, String>> = OnceLock::new();
    UCX.get_or_init(|| {
        let dir = crate::env::env().ok().and_then(|e| e.ucx_dir.clone());
        load(dir.as_deref())
    })
    .as_ref()
    .map_err(|why| Error::Unsupported(why.clone()))
}

/// Whether UCX loads (for tests and messages); loads it when it does.
pub fn available() -> bool {
    api().is_ok()
}

fn load(dir: Option<&Path>) -> std::result::Result<Ucx, String> {
    let mut libs = Vec::new();
    for name in LIBS {
        let target = dir.map_or_else(|| PathBuf::from(name), |d| d.join(name));
        // SAFETY: loading a library runs its initialisers; UCX's set up its global state and
        // memory hooks (libucm), which is what using UCX means.
        let lib = unsafe { libloading::Library::new(&target) }.map_err(|e| {
            let whence = dir.map_or_else(|| "the loader path".to_string(), |d| format!("{DIR_VAR}={}", d.display()));
            format!("UCX ({name}) could not be loaded from {whence}: {e}; {INSTALL_HINT}")
        })?;
        libs.push(lib);
    }
    // SAFETY: both libraries are UCX's (by name) and are kept in the returned value, which
    // lives in a static for the rest of the process.
    let api = unsafe { sys::Api::resolve(&libs[1], &libs[0]) }
        .map_err(|e| format!("the UCX found lacks a function rshmem needs ({e}); {INSTALL_HINT}"))?;
    let (mut major, mut minor, mut release) = (0, 0, 0);
    // SAFETY: three out-parameters pointing at live locals (ucp_get_version's contract).
    unsafe { (api.ucp_get_version)(&mut major, &mut minor, &mut release) };
    if (major, minor) < MIN_VERSION || major != MIN_VERSION.0 {
        return Err(format!(
            "UCX {major}.{minor}.{release} is too old or of another major version: rshmem needs \
             {}.{} or newer 1.x; {INSTALL_HINT}",
            MIN_VERSION.0, MIN_VERSION.1
        ));
    }
    let origin = dir.map_or_else(|| "the loader path".to_string(), |d| d.display().to_string());
    tracing::debug!(major, minor, release, %origin, "UCX loaded");
    Ok(Ucx { api, version: (major, minor, release), origin, _libs: libs })
}

/// The name UCX gives a status (`"Connection reset by remote peer"`, ...).
pub fn status_name(ucx: &Ucx, status: sys::ucs_status_t) -> String {
    // SAFETY: ucs_status_string returns a pointer to a static NUL-terminated string for every
    // status value, known or not ("Unknown error").
    let p = unsafe { (ucx.api.ucs_status_string)(status) };
    if p.is_null() {
        return format!("status {status}");
    }
    // SAFETY: as above, a static C string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Turns a status into `Ok(())` or [`Error::Transport`] naming `call`.
///
/// # Errors
/// [`Error::Transport`] for any status but `UCS_OK`.
pub fn check(ucx: &Ucx, call: &'static str, status: sys::ucs_status_t) -> Result<()> {
    if status == sys::UCS_OK {
        return Ok(());
    }
    Err(error(ucx, call, status, None))
}

/// An [`Error::Transport`] for `call` failing with `status`, towards `pe` when known.
pub fn error(ucx: &Ucx, call: &'static str, status: sys::ucs_status_t, pe: Option<usize>) -> Error {
    Error::Transport { call, status: i32::from(status), name: status_name(ucx, status), pe }
}

/// Where a buffer handed to UCX lives (`ucs_memory_type_t`), always given: see
/// [`Context::map`] for why UCX's own detection is not relied on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemType {
    /// Host memory.
    Host,
    /// CUDA device memory.
    Cuda,
}

impl MemType {
    pub(crate) fn raw(self) -> u32 {
        match self {
            MemType::Host => sys::UCS_MEMORY_TYPE_HOST,
            MemType::Cuda => sys::UCS_MEMORY_TYPE_CUDA,
        }
    }
}

/// What a `ucs_status_ptr_t` says: done, failed, or a request to wait for.
pub(crate) enum StatusPtr {
    Done,
    Failed(sys::ucs_status_t),
    Pending(*mut std::ffi::c_void),
}

pub(crate) fn status_ptr(p: sys::ucs_status_ptr_t) -> StatusPtr {
    let v = p as isize;
    if p.is_null() {
        StatusPtr::Done
    } else if v < 0 && v >= sys::UCS_ERR_LAST {
        // UCS_PTR_IS_ERR: error codes are small negative numbers cast to pointers.
        StatusPtr::Failed(v as sys::ucs_status_t)
    } else {
        StatusPtr::Pending(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_pointers_decode() {
        assert!(matches!(status_ptr(std::ptr::null_mut()), StatusPtr::Done));
        assert!(matches!(status_ptr(-25isize as *mut _), StatusPtr::Failed(-25)));
        assert!(matches!(status_ptr(0x7f00_0000_1000usize as *mut _), StatusPtr::Pending(_)));
    }

    /// The structs of [`sys`] against the C compiler's view of the headers of the UCX found
    /// (`RSHMEM_UCX_DIR/../include`, the wheel's layout): every field rshmem sets is at the same
    /// offset, and no struct of ours is smaller than UCX's (it may read up to its own size).
    #[test]
    fn layouts_match_the_wheel_headers() {
        use std::mem::{offset_of, size_of};
        let Some(include) = std::env::var_os(DIR_VAR).map(|d| PathBuf::from(d).join("../include")).filter(|i| i.join("ucp/api/ucp.h").exists())
        else {
            assert!(std::env::var_os("CI").is_none(), "CI sets {DIR_VAR} to a UCX with headers (the libucx-cu12 wheel)");
            eprintln!("no UCX headers beside {DIR_VAR}; layouts not checked");
            return;
        };
        let mut facts: Vec<String> = Vec::new();
        macro_rules! at {
            ($ty:ident, [$($f:ident),*]) => {
                $(facts.push(format!("offsetof({}, {}) == {}", stringify!($ty), stringify!($f), offset_of!(sys::$ty, $f)));)*
                facts.push(format!("sizeof({}) <= {}", stringify!($ty), size_of::<sys::$ty>()));
            };
        }
        at!(ucp_params_t, [field_mask, features, request_size, request_init, request_cleanup, tag_sender_mask, mt_workers_shared, estimated_num_eps]);
        at!(ucp_worker_params_t, [field_mask, thread_mode, cpu_mask]);
        at!(ucp_ep_params_t, [field_mask, address, err_mode, err_handler]);
        at!(ucp_mem_map_params_t, [field_mask, address, length, flags, prot, memory_type]);
        at!(ucp_am_recv_param_t, [recv_attr, reply_ep]);
        at!(ucp_am_handler_param_t, [field_mask, id, flags, cb, arg]);
        at!(ucp_request_param_t, [op_attr_mask, flags, request, cb, datatype, user_data, reply_buffer, memory_type]);
        at!(ucp_context_attr_t, [field_mask, request_size, thread_mode, memory_types]);
        facts.push(format!("UCP_AM_RECV_ATTR_FLAG_RNDV == {}ull", sys::UCP_AM_RECV_ATTR_FLAG_RNDV));
        facts.push(format!("UCP_ATTR_FIELD_MEMORY_TYPES == {}", sys::UCP_ATTR_FIELD_MEMORY_TYPES));
        facts.push(format!("UCS_MEMORY_TYPE_CUDA == {} && UCS_MEMORY_TYPE_HOST == {}", sys::UCS_MEMORY_TYPE_CUDA, sys::UCS_MEMORY_TYPE_HOST));
        facts.push(format!("UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE == {}", sys::UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE));
        facts.push(format!("UCP_OP_ATTR_FIELD_MEMORY_TYPE == {}", sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE));
        facts.push(format!("UCP_AM_SEND_FLAG_EAGER == {} && UCP_AM_SEND_FLAG_COPY_HEADER == {}", sys::UCP_AM_SEND_FLAG_EAGER, sys::UCP_AM_SEND_FLAG_COPY_HEADER));
        facts.push(format!("UCP_OP_ATTR_FIELD_REPLY_BUFFER == {}", sys::UCP_OP_ATTR_FIELD_REPLY_BUFFER));
        let mut src = String::from("#include <stddef.h>\n#include <ucp/api/ucp.h>\n");
        for f in &facts {
            src.push_str(&format!("_Static_assert({f}, \"{}\");\n", f.replace('"', "")));
        }
        let dir = std::env::temp_dir().join(format!("rshmem-ucx-abi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("abi.c");
        std::fs::write(&file, &src).unwrap();
        let out = std::process::Command::new("cc").arg("-fsyntax-only").arg("-I").arg(&include).arg(&file).output().expect("running cc");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "UCX layouts differ:\n{}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn a_missing_library_says_how_to_install_ucx() {
        let err = load(Some(Path::new("/nonexistent-ucx"))).err().unwrap();
        assert!(err.contains("RSHMEM_UCX_DIR=/nonexistent-ucx") && err.contains("pip install libucx-cu12"), "{err}");
    }
}
