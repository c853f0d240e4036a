//! The raw UCP API, as much of it as rshmem calls: types, constants and a table of function
//! pointers resolved from `libucp` / `libucs` at run time.
//!
//! Written by hand from UCX's `ucp/api/ucp.h` (1.13, Debian 12's, to 1.22, the `libucx-cu12`
//! wheel's). UCX keeps its ABI stable by appending fields to parameter structs and naming the
//! ones it may read in a `field_mask`, so these structs stop where the newest field rshmem sets
//! is; a newer library never reads past a field whose bit is clear.
//! The inline test `layouts_match_the_wheel_headers` (in `ucx/mod.rs`) compiles a C program
//! against the headers of the `libucx-cu12` wheel, when they are found, and checks the sizes
//! and offsets of the fields rshmem sets.
//!
//! # Safety
//! Plain data and function-pointer types; nothing is called here. The pointers are resolved
//! from a library that stays loaded for the life of the process (a `'static` [`Api`]).
#![allow(unsafe_code, non_camel_case_types, missing_docs)]

use std::ffi::{c_char, c_int, c_uint, c_void};

pub type ucs_status_t = i8;
pub type ucp_context_h = *mut c_void;
pub type ucp_worker_h = *mut c_void;
pub type ucp_ep_h = *mut c_void;
pub type ucp_mem_h = *mut c_void;
pub type ucp_rkey_h = *mut c_void;
pub type ucp_config_t = c_void;
pub type ucp_address_t = c_void;
/// `ucp_datatype_t`: `ucp_dt_make_contig(n)` is `n << 3`.
pub type ucp_datatype_t = u64;
pub type ucs_status_ptr_t = *mut c_void;

pub const UCS_OK: ucs_status_t = 0;
pub const UCS_INPROGRESS: ucs_status_t = 1;
pub const UCS_ERR_IO_ERROR: ucs_status_t = -3;
pub const UCS_ERR_BUSY: ucs_status_t = -15;
/// `UCS_ERR_LAST`: pointers at or above `(void *)UCS_ERR_LAST` are error codes.
pub const UCS_ERR_LAST: isize = -100;

pub const UCP_FEATURE_RMA: u64 = 1 << 1;
pub const UCP_FEATURE_AMO32: u64 = 1 << 2;
pub const UCP_FEATURE_AMO64: u64 = 1 << 3;
pub const UCP_FEATURE_WAKEUP: u64 = 1 << 4;
pub const UCP_FEATURE_AM: u64 = 1 << 6;

pub const UCP_PARAM_FIELD_FEATURES: u64 = 1 << 0;
pub const UCP_PARAM_FIELD_MT_WORKERS_SHARED: u64 = 1 << 5;
pub const UCP_PARAM_FIELD_ESTIMATED_NUM_EPS: u64 = 1 << 6;

pub const UCP_ATTR_FIELD_MEMORY_TYPES: u64 = 1 << 2;
/// `ucs_memory_type_t`: `UCS_MEMORY_TYPE_HOST`.
pub const UCS_MEMORY_TYPE_HOST: u32 = 0;
/// `ucs_memory_type_t`: `UCS_MEMORY_TYPE_CUDA` (its bit in `ucp_context_attr_t::memory_types`).
pub const UCS_MEMORY_TYPE_CUDA: u32 = 1;

pub const UCS_THREAD_MODE_MULTI: c_int = 2;
pub const UCP_WORKER_PARAM_FIELD_THREAD_MODE: u64 = 1 << 0;

pub const UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: u64 = 1 << 0;
pub const UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: u64 = 1 << 1;
pub const UCP_EP_PARAM_FIELD_ERR_HANDLER: u64 = 1 << 2;
pub const UCP_ERR_HANDLING_MODE_PEER: c_int = 1;
pub const UCP_EP_CLOSE_FLAG_FORCE: u32 = 1 << 0;

pub const UCP_MEM_MAP_PARAM_FIELD_ADDRESS: u64 = 1 << 0;
pub const UCP_MEM_MAP_PARAM_FIELD_LENGTH: u64 = 1 << 1;
pub const UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE: u64 = 1 << 4;

pub const UCP_AM_HANDLER_PARAM_FIELD_ID: u64 = 1 << 0;
pub const UCP_AM_HANDLER_PARAM_FIELD_FLAGS: u64 = 1 << 1;
pub const UCP_AM_HANDLER_PARAM_FIELD_CB: u64 = 1 << 2;
pub const UCP_AM_HANDLER_PARAM_FIELD_ARG: u64 = 1 << 3;
pub const UCP_AM_FLAG_WHOLE_MSG: u32 = 1 << 0;
pub const UCP_AM_SEND_FLAG_EAGER: u32 = 1 << 1;
pub const UCP_AM_SEND_FLAG_COPY_HEADER: u32 = 1 << 3;
pub const UCP_AM_RECV_ATTR_FLAG_RNDV: u64 = 1 << 17;

pub const UCP_OP_ATTR_FIELD_DATATYPE: u32 = 1 << 3;
pub const UCP_OP_ATTR_FIELD_FLAGS: u32 = 1 << 4;
pub const UCP_OP_ATTR_FIELD_REPLY_BUFFER: u32 = 1 << 5;
pub const UCP_OP_ATTR_FIELD_MEMORY_TYPE: u32 = 1 << 6;

pub const UCP_ATOMIC_OP_ADD: c_int = 0;
pub const UCP_ATOMIC_OP_SWAP: c_int = 1;
pub const UCP_ATOMIC_OP_CSWAP: c_int = 2;
pub const UCP_ATOMIC_OP_AND: c_int = 3;
pub const UCP_ATOMIC_OP_OR: c_int = 4;
pub const UCP_ATOMIC_OP_XOR: c_int = 5;

/// `ucp_dt_make_contig(elem_size)`.
pub const fn dt_contig(elem_size: u64) -> ucp_datatype_t {
    elem_size << 3
}

/// `ucp_params_t` up to `estimated_num_eps`.
#[repr(C)]
pub struct ucp_params_t {
    pub field_mask: u64,
    pub features: u64,
    pub request_size: usize,
    pub request_init: *mut c_void,
    pub request_cleanup: *mut c_void,
    pub tag_sender_mask: u64,
    pub mt_workers_shared: c_int,
    pub estimated_num_eps: usize,
    /// Fields of newer releases, never flagged; padding to the 1.22 size.
    pub _tail: [u64; 3],
}

/// `ucp_context_attr_t` up to `memory_types`.
#[repr(C)]
pub struct ucp_context_attr_t {
    pub field_mask: u64,
    pub request_size: usize,
    pub thread_mode: c_int,
    pub memory_types: u64,
    /// `name[32]` and fields of newer releases, never flagged; padding beyond the 1.22 size.
    pub _tail: [u64; 8],
}

/// `ucs_cpu_set_t`: 1024 CPU bits.
#[repr(C)]
pub struct ucs_cpu_set_t {
    pub bits: [u64; 16],
}

/// `ucp_worker_params_t` up to `thread_mode` and `cpu_mask` (so that `thread_mode` sits where
/// UCX reads it; later fields are never flagged).
#[repr(C)]
pub struct ucp_worker_params_t {
    pub field_mask: u64,
    pub thread_mode: c_int,
    pub cpu_mask: ucs_cpu_set_t,
    /// Fields of newer releases, never flagged; padding to the 1.22 size.
    pub _tail: [u64; 7],
}

pub type ucp_err_handler_cb_t = unsafe extern "C" fn(arg: *mut c_void, ep: ucp_ep_h, status: ucs_status_t);

#[repr(C)]
pub struct ucp_err_handler_t {
    pub cb: Option<ucp_err_handler_cb_t>,
    pub arg: *mut c_void,
}

/// `ucp_ep_params_t` up to `err_handler`.
#[repr(C)]
pub struct ucp_ep_params_t {
    pub field_mask: u64,
    pub address: *const ucp_address_t,
    pub err_mode: c_int,
    pub err_handler: ucp_err_handler_t,
    /// Fields of newer releases, never flagged; padding to the 1.22 size.
    pub _tail: [u64; 8],
}

/// `ucp_mem_map_params_t` up to `memory_type`.
#[repr(C)]
pub struct ucp_mem_map_params_t {
    pub field_mask: u64,
    pub address: *mut c_void,
    pub length: usize,
    pub flags: u32,
    pub prot: u32,
    pub memory_type: u32,
    /// `exported_memh_buffer` and fields of newer releases, never flagged; padding to the 1.22 size.
    pub _tail: [u32; 3],
}

#[repr(C)]
pub struct ucp_am_recv_param_t {
    pub recv_attr: u64,
    pub reply_ep: ucp_ep_h,
}

pub type ucp_am_recv_callback_t = unsafe extern "C" fn(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const ucp_am_recv_param_t,
) -> ucs_status_t;

#[repr(C)]
pub struct ucp_am_handler_param_t {
    pub field_mask: u64,
    pub id: c_uint,
    pub flags: u32,
    pub cb: Option<ucp_am_recv_callback_t>,
    pub arg: *mut c_void,
}

/// `ucp_request_param_t` up to `memory_type` (the fields rshmem flags).
#[repr(C)]
pub struct ucp_request_param_t {
    pub op_attr_mask: u32,
    pub flags: u32,
    pub request: *mut c_void,
    pub cb: *mut c_void,
    pub datatype: ucp_datatype_t,
    pub user_data: *mut c_void,
    pub reply_buffer: *mut c_void,
    pub memory_type: u32,
    /// Fields of newer releases, never flagged; padding to the 1.22 size.
    pub _tail: [u32; 11],
}

impl ucp_request_param_t {
    /// No attributes: contiguous bytes, no callback (completion is polled).
    pub fn empty() -> Self {
        ucp_request_param_t {
            op_attr_mask: 0,
            flags: 0,
            request: std::ptr::null_mut(),
            cb: std::ptr::null_mut(),
            datatype: 0,
            user_data: std::ptr::null_mut(),
            reply_buffer: std::ptr::null_mut(),
            memory_type: 0,
            _tail: [0; 11],
        }
    }
}

/// Declares [`Api`], one function pointer per UCX function rshmem calls, and its loader.
macro_rules! api {
    ($($lib:ident $name:ident : fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The UCX functions rshmem calls, resolved from the loaded libraries.
        #[derive(Clone, Copy)]
        pub struct Api {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Api {
            /// Resolves every function from `ucp` / `ucs`.
            ///
            /// # Safety
            /// The libraries must be UCX's and stay loaded while the returned table is used.
            pub unsafe fn resolve(ucp: &libloading::Library, ucs: &libloading::Library) -> Result<Api, String> {
                Ok(Api {
                    $($name: {
                        let lib = match stringify!($lib) { "ucs" => ucs, _ => ucp };
                        // SAFETY: the symbol is the C function of that name with this
                        // signature in every UCX release since 1.13 (ucp.h, status.h).
                        let sym: libloading::Symbol<'_, unsafe extern "C" fn($($arg),*) $(-> $ret)?> =
                            unsafe { lib.get(concat!(stringify!($name), "\0").as_bytes()) }
                                .map_err(|e| format!("{}: {e}", stringify!($name)))?;
                        *sym
                    },)*
                })
            }
        }
    };
}

api! {
    ucp ucp_get_version: fn(*mut c_uint, *mut c_uint, *mut c_uint);
    ucp ucp_config_read: fn(*const c_char, *const c_char, *mut *mut ucp_config_t) -> ucs_status_t;
    ucp ucp_config_release: fn(*mut ucp_config_t);
    ucp ucp_init_version: fn(c_uint, c_uint, *const ucp_params_t, *const ucp_config_t, *mut ucp_context_h) -> ucs_status_t;
    ucp ucp_cleanup: fn(ucp_context_h);
    ucp ucp_context_query: fn(ucp_context_h, *mut ucp_context_attr_t) -> ucs_status_t;
    ucp ucp_worker_create: fn(ucp_context_h, *const ucp_worker_params_t, *mut ucp_worker_h) -> ucs_status_t;
    ucp ucp_worker_destroy: fn(ucp_worker_h);
    ucp ucp_worker_get_address: fn(ucp_worker_h, *mut *mut ucp_address_t, *mut usize) -> ucs_status_t;
    ucp ucp_worker_release_address: fn(ucp_worker_h, *mut ucp_address_t);
    ucp ucp_worker_progress: fn(ucp_worker_h) -> c_uint;
    ucp ucp_worker_get_efd: fn(ucp_worker_h, *mut c_int) -> ucs_status_t;
    ucp ucp_worker_arm: fn(ucp_worker_h) -> ucs_status_t;
    ucp ucp_worker_signal: fn(ucp_worker_h) -> ucs_status_t;
    ucp ucp_worker_flush_nbx: fn(ucp_worker_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp ucp_worker_set_am_recv_handler: fn(ucp_worker_h, *const ucp_am_handler_param_t) -> ucs_status_t;
    ucp ucp_ep_create: fn(ucp_worker_h, *const ucp_ep_params_t, *mut ucp_ep_h) -> ucs_status_t;
    ucp ucp_ep_close_nbx: fn(ucp_ep_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp ucp_ep_flush_nbx: fn(ucp_ep_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp ucp_mem_map: fn(ucp_context_h, *const ucp_mem_map_params_t, *mut ucp_mem_h) -> ucs_status_t;
    ucp ucp_mem_unmap: fn(ucp_context_h, ucp_mem_h) -> ucs_status_t;
    ucp ucp_rkey_pack: fn(ucp_context_h, ucp_mem_h, *mut *mut c_void, *mut usize) -> ucs_status_t;
    ucp ucp_rkey_buffer_release: fn(*mut c_void);
    ucp ucp_ep_rkey_unpack: fn(ucp_ep_h, *const c_void, *mut ucp_rkey_h) -> ucs_status_t;
    ucp ucp_rkey_destroy: fn(ucp_rkey_h);
    ucp ucp_put_nbx: fn(ucp_ep_h, *const c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp ucp_get_nbx: fn(ucp_ep_h, *mut c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp ucp_atomic_op_nbx: fn(ucp_ep_h, c_int, *const c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp ucp_am_send_nbx: fn(ucp_ep_h, c_uint, *const c_void, usize, *const c_void, usize, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp ucp_request_check_status: fn(*mut c_void) -> ucs_status_t;
    ucp ucp_request_free: fn(*mut c_void);
    ucs ucs_status_string: fn(ucs_status_t) -> *const c_char;
}
