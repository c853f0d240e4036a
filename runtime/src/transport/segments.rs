//! The heap's registrations with UCX: one per growth step, with every remote PE's key for it.
//!
//! The heap grows collectively (`heap/segment.rs`), at the same offsets on every PE, so growth
//! step `k` covers the same offsets everywhere: this PE registers its part (`ucp_mem_map`),
//! packs its key, and the keys are allgathered through the bootstrap and unpacked on the
//! endpoint of each remote PE.
//!
//! # Safety
//! One unsafe call, `Context::map`, whose contract (the range stays mapped while registered)
//! holds because the runtime drops the transport, and so these registrations, before the heap.
#![allow(unsafe_code)]

use crate::error::{Error, Result};
use crate::heap::agree::all_ok;
use crate::heap::group::Group;
use super::ucx::{Context, Endpoint, MemHandle, MemType, Rkey};
use std::sync::{Arc, RwLock};

/// One growth step: this PE's registration and each remote PE's key (field order: keys are
/// destroyed before the registration).
struct Segment {
    offset: usize,
    len: usize,
    rkeys: Vec<Option<Rkey>>,
    _memh: MemHandle,
}

/// Every registered growth step, in offset order.
pub struct Segments {
    list: RwLock<Vec<Segment>>,
    n_pes: usize,
}

impl Segments {
    /// None yet, for `n_pes` PEs.
    pub fn new(n_pes: usize) -> Segments {
        Segments { list: RwLock::new(Vec::new()), n_pes }
    }

    /// Registers `[base+offset, base+offset+len)`, memory of type `kind`, and learns the remote
    /// PEs' keys for the same offsets. Collective over `group`.
    ///
    /// # Errors
    /// On every PE alike, the first failing PE's error; bootstrap errors.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &self,
        group: &dyn Group,
        ctx: &Arc<Context>,
        eps: &[Option<Endpoint>],
        base: usize,
        offset: usize,
        len: usize,
        kind: MemType,
    ) -> Result<()> {
        let made = map(ctx, base + offset, len, kind);
        let (mine, packed, memh) = match made {
            Ok((memh, packed)) => (Ok(()), packed, Some(memh)),
            Err(e) => (Err(e), Vec::new(), None),
        };
        all_ok(group, mine, &format!("registering {len} bytes of the heap with UCX"))?;
        let keys = group.allgather(&packed)?;
        let unpacked = (|| {
            let mut rkeys: Vec<Option<Rkey>> = (0..self.n_pes).map(|_| None).collect();
            for (pe, ep) in eps.iter().enumerate() {
                if let Some(ep) = ep {
                    rkeys[pe] = Some(ep.unpack_rkey(&keys[pe])?);
                }
            }
            Ok(rkeys)
        })();
        let (mine, rkeys) = match unpacked {
            Ok(r) => (Ok(()), r),
            Err(e) => (Err(e), Vec::new()),
        };
        all_ok(group, mine, "unpacking the peers' UCX keys")?;
        let Some(memh) = memh else { unreachable!("all_ok returns this PE's error first") };
        let mut list = self.list.write().unwrap_or_else(|e| e.into_inner());
        list.push(Segment { offset, len, rkeys, _memh: memh });
        list.sort_by_key(|s| s.offset);
        Ok(())
    }

    /// Calls `f(offset, len, key)` for each piece of `[offset, offset+len)` of PE `pe`'s heap,
    /// split where registrations meet.
    ///
    /// # Errors
    /// [`Error::NotSymmetric`] when part of the range is in no registration; what `f` returns.
    pub fn each_piece(&self, pe: usize, offset: usize, len: usize, mut f: impl FnMut(usize, usize, &Rkey) -> Result<()>) -> Result<()> {
        let list = self.list.read().unwrap_or_else(|e| e.into_inner());
        let end = offset.checked_add(len).ok_or_else(|| Error::InvalidArgument(format!("heap range at offset {offset} of {len} bytes overflows")))?;
        let mut at = offset;
        while at < end {
            let seg = list.iter().find(|s| s.offset <= at && at < s.offset + s.len).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "heap offset {at} of PE {pe} is not registered with the network transport (registered: {:?})",
                    list.iter().map(|s| (s.offset, s.len)).collect::<Vec<_>>()
                ))
            })?;
            let piece = (seg.offset + seg.len).min(end) - at;
            let rkey = seg.rkeys.get(pe).and_then(Option::as_ref).ok_or_else(|| {
                Error::InvalidArgument(format!("PE {pe} is not reached through the network transport"))
            })?;
            f(at, piece, rkey)?;
            at += piece;
        }
        Ok(())
    }

    /// Bytes registered (the heap's mapped size once every growth step is in).
    pub fn registered(&self) -> usize {
        let list = self.list.read().unwrap_or_else(|e| e.into_inner());
        list.iter().map(|s| s.offset + s.len).max().unwrap_or(0)
    }
}

/// Registers a range and packs its key.
fn map(ctx: &Arc<Context>, addr: usize, len: usize, kind: MemType) -> Result<(MemHandle, Vec<u8>)> {
    // SAFETY: the range is part of the heap's mapped slot, which stays mapped while the
    // transport lives (module docs).
    let memh = unsafe { ctx.map(addr, len, kind)? };
    let packed = memh.pack_rkey()?;
    Ok((memh, packed))
}
