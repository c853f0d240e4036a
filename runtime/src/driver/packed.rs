//! One kernel launch with its parameters packed once: the ops' steady state.
//!
//! An op of `rshmem.ops` relaunches the same compiled Triton kernel call after call with only a
//! few pointers changed (its input and output). Triton's launcher parses every argument from
//! Python, asks the driver about every pointer and builds the parameter array on each call,
//! which is most of such a call's host time. A [`PackedLaunch`] holds the parameter values, one
//! 64-bit word each (a TMA descriptor its 128 bytes), and the array of pointers to them, made
//! once; a call writes the values that change and calls `cuLaunchKernel`. A descriptor that
//! changes with the call's tensors is encoded here from the tensor's address
//! ([`PackedLaunch::vary_map`]), so the caller passes only addresses.
//!
//! The kernel's parameter list is checked against the driver's own (`cuFuncGetParamInfo`,
//! CUDA 12.4 drivers and later) when the launch is made, so a caller that packed the wrong
//! number of parameters gets [`Error::Unsupported`], and a value of the wrong width
//! [`Error::InvalidArgument`], and keeps its own launcher, instead of a kernel reading garbage.
#![allow(unsafe_code)]

use super::module::{launch, Function, LaunchDims};
use super::stream::StreamHandle;
use super::tensor_map::TiledMap;
use super::{check, sys};
use crate::error::{Error, Result};
use std::ffi::c_void;

/// The byte size of each parameter of `function`, as the driver reads them.
fn param_sizes(function: Function) -> Result<Vec<usize>> {
    let f = super::newer::param_info()
        .ok_or_else(|| Error::Unsupported("this CUDA driver has no cuFuncGetParamInfo (CUDA 12.4 and later)".into()))?;
    let mut sizes = Vec::new();
    loop {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: "Returns the offset and size of a kernel parameter in the device-side
        // parameter layout"; an index past the last parameter returns CUDA_ERROR_INVALID_VALUE.
        // The caller of `PackedLaunch::new` vouches for `function`; both outputs are live locals.
        let r = unsafe { f(function.raw(), sizes.len(), &mut offset, &mut size) };
        if r as u32 == sys::CUresult::CUDA_ERROR_INVALID_VALUE as u32 && !sizes.is_empty() {
            return Ok(sizes);
        }
        check("cuFuncGetParamInfo", r)?;
        sizes.push(size);
        if sizes.len() > 4096 {
            return Err(Error::Unsupported("a kernel of more than 4096 parameters".into()));
        }
    }
}

/// One parameter's value: a scalar or pointer in the low bytes of a word (little-endian, as the
/// driver reads a parameter of 1, 2, 4 or 8 bytes from its start), or the exact bytes of a wider
/// one (a `CUtensorMap`, 128 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param<'a> {
    /// A parameter of at most 8 bytes.
    Word(u64),
    /// A parameter of exactly this many bytes.
    Bytes(&'a [u8]),
}

/// 128 bytes at 128-byte alignment: the storage unit of a parameter (a `CUtensorMap` wants 64).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(128))]
struct Chunk([u8; 128]);

/// A kernel, its launch geometry and its parameter values, packed once (see the module docs).
#[derive(Debug)]
pub struct PackedLaunch {
    function: Function,
    dims: LaunchDims,
    /// The parameters' values, each from the start of its own chunk(s). Read and written only
    /// through `params`; held here so that it lives as long as they do.
    _storage: Box<[Chunk]>,
    /// `params[i]` points at parameter i's first chunk: a boxed slice, never reallocated.
    params: Box<[*mut c_void]>,
    /// Each parameter's size in bytes, as the driver reads it.
    sizes: Box<[usize]>,
    /// The parameters a launch rewrites, in the order of its `values`.
    varying: Box<[usize]>,
    /// Per varying parameter: the view whose descriptor a launch encodes from a base address
    /// (see [`PackedLaunch::vary_map`]), with the base last encoded (0: none yet).
    maps: Box<[Option<(TiledMap, u64)>]>,
}

// SAFETY: the raw pointers point into `_storage`, owned by the same value and moved with it
// (the heap buffer does not move); the CUfunction is a driver handle usable from any thread.
unsafe impl Send for PackedLaunch {}
// SAFETY: shared access reads only; launching takes `&mut self`.
unsafe impl Sync for PackedLaunch {}

/// Writes `value` at `dst`, the start of a parameter of `size` bytes.
///
/// # Safety
/// `dst` must point at `size.div_ceil(128).max(1)` chunks of writable storage.
unsafe fn put(dst: *mut c_void, size: usize, value: Param<'_>, what: usize) -> Result<()> {
    match value {
        Param::Word(w) if size <= 8 => {
            // SAFETY: a chunk holds at least 8 bytes at 128-byte alignment.
            unsafe { dst.cast::<u64>().write(w) };
        }
        Param::Bytes(b) if b.len() == size => {
            // SAFETY: `size` bytes fit the parameter's chunks (the caller's contract).
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst.cast::<u8>(), size) };
        }
        Param::Word(_) => {
            return Err(Error::InvalidArgument(format!("parameter {what} is {size} bytes: pass its bytes, not a word")));
        }
        Param::Bytes(b) => {
            return Err(Error::InvalidArgument(format!("parameter {what} is {size} bytes, not {}", b.len())));
        }
    }
    Ok(())
}

impl PackedLaunch {
    /// Packs a launch of `function` with `values` (one per kernel parameter) on `dims`; a
    /// launch replaces the parameters at `varying`.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when the driver cannot describe the kernel's parameters or when
    /// their number differs from `values`; [`Error::InvalidArgument`] for a value that does not
    /// fit its parameter, or a `varying` index out of range.
    ///
    /// # Safety
    /// `function` must be a `CUfunction` of a module loaded in the context current on this
    /// thread (and on every thread that launches it), alive for as long as this value is.
    pub unsafe fn new(function: usize, dims: LaunchDims, values: &[Param<'_>], varying: Vec<usize>) -> Result<PackedLaunch> {
        let function = Function::from_raw(function);
        let sizes = param_sizes(function)?;
        if sizes.len() != values.len() {
            return Err(Error::Unsupported(format!(
                "the kernel has {} parameters and {} were packed",
                sizes.len(),
                values.len()
            )));
        }
        if let Some(&i) = varying.iter().find(|&&i| i >= values.len()) {
            return Err(Error::InvalidArgument(format!("parameter {i} of {} cannot vary", values.len())));
        }
        let chunks: Vec<usize> = sizes.iter().map(|s| s.div_ceil(128).max(1)).collect();
        let mut storage = vec![Chunk([0; 128]); chunks.iter().sum()].into_boxed_slice();
        let mut params = Vec::with_capacity(sizes.len());
        let mut at = 0;
        for n in &chunks {
            params.push(storage[at..].as_mut_ptr().cast::<c_void>());
            at += n;
        }
        for (i, (&p, v)) in params.iter().zip(values).enumerate() {
            // SAFETY: `p` starts parameter i's `chunks[i]` chunks of `storage`.
            unsafe { put(p, sizes[i], *v, i) }?;
        }
        Ok(PackedLaunch {
            function,
            dims,
            _storage: storage,
            params: params.into_boxed_slice(),
            sizes: sizes.into_boxed_slice(),
            maps: vec![None; varying.len()].into_boxed_slice(),
            varying: varying.into_boxed_slice(),
        })
    }

    /// Makes varying value `k` a base address: a launch encodes the TMA descriptor of `map` at
    /// it (only when it differs from the last), instead of taking the descriptor's bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `k` is not a varying value or its parameter is not a
    /// 128-byte descriptor.
    pub fn vary_map(&mut self, k: usize, map: TiledMap) -> Result<()> {
        let Some(&i) = self.varying.get(k) else {
            return Err(Error::InvalidArgument(format!("this launch has {} values, not {}", self.varying.len(), k + 1)));
        };
        if self.sizes[i] != 128 {
            return Err(Error::InvalidArgument(format!("parameter {i} is {} bytes, not a TMA descriptor", self.sizes[i])));
        }
        self.maps[k] = Some((map, 0));
        Ok(())
    }

    /// How many values a launch takes.
    pub fn varying(&self) -> usize {
        self.varying.len()
    }

    /// Writes `values` into the varying parameters and enqueues the kernel on `stream`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong number of values or one that does not fit its
    /// parameter (nothing is launched); [`Error::Driver`] from `cuTensorMapEncodeTiled` or `cuLaunchKernel`
    /// (`CUDA_ERROR_INVALID_CONTEXT` on a thread where the kernel's context is not current).
    ///
    /// # Safety
    /// `stream` must be a live stream of the kernel's context (or 0); the values must be what
    /// the kernel expects there (live device addresses for pointers, a descriptor of live
    /// memory), and whatever memory the kernel touches must stay valid until it finishes.
    pub unsafe fn launch(&mut self, stream: StreamHandle, values: &[Param<'_>]) -> Result<()> {
        if values.len() != self.varying.len() {
            return Err(Error::InvalidArgument(format!(
                "this launch takes {} values, not {}",
                self.varying.len(),
                values.len()
            )));
        }
        for ((&i, &v), map) in self.varying.iter().zip(values).zip(self.maps.iter_mut()) {
            match (map, v) {
                (Some((_, last)), Param::Word(base)) if *last == base => {}
                (Some((view, last)), Param::Word(base)) => {
                    *last = 0; // a failed encode leaves no descriptor to reuse
                    // SAFETY: parameter i is one 128-byte chunk at 128-byte alignment (`vary_map`).
                    unsafe { view.encode_at(base, self.params[i]) }?;
                    *last = base;
                }
                (map, v) => {
                    if let Some((_, last)) = map {
                        *last = 0; // the bytes written now are no encoded view
                    }
                    // SAFETY: `params[i]` starts parameter i's chunks (see the fields).
                    unsafe { put(self.params[i], self.sizes[i], v, i) }?;
                }
            }
        }
        // SAFETY: `params` points at each parameter's value, written in its driver size (checked
        // in `new` and in `put`), and the driver copies them before returning; the caller's
        // contract covers the rest.
        unsafe { launch(self.function, self.dims, stream, &mut self.params) }
    }
}

#[cfg(test)]
mod tests {
    use super::{put, Chunk, Param};
    use std::ffi::c_void;

    #[test]
    fn values_fill_their_parameters_and_wrong_widths_are_refused() {
        let mut storage = [Chunk([0xAA; 128]); 2];
        let p = storage.as_mut_ptr().cast::<c_void>();
        // SAFETY: two chunks of storage; each call writes at most 128 bytes at `p`.
        unsafe {
            put(p, 4, Param::Word(0x1122_3344), 0).unwrap();
            assert_eq!(&storage[0].0[..4], &[0x44, 0x33, 0x22, 0x11]);
            let desc: Vec<u8> = (0..128).collect();
            put(p, 128, Param::Bytes(&desc), 1).unwrap();
            assert_eq!(storage[0].0.to_vec(), desc);
            let e = put(p, 128, Param::Word(1), 2).unwrap_err().to_string();
            assert!(e.contains("parameter 2 is 128 bytes: pass its bytes"), "{e}");
            let e = put(p, 8, Param::Bytes(&desc[..4]), 3).unwrap_err().to_string();
            assert!(e.contains("parameter 3 is 8 bytes, not 4"), "{e}");
        }
        assert_eq!(storage[1].0, [0xAA; 128], "nothing past the parameter was written");
    }
}
