//! The live allocations as the layers above the heap ask about them: which allocation holds an
//! address ([`SymmetricHeap::allocation_of`]), whether a range a program passed is memory it may
//! address ([`SymmetricHeap::check_user`]), and who owns an allocation.
//!
//! There is one record, the allocator's table; nothing here copies it. `check_user` runs on
//! every host put, get and atomic, whose own work can be a few nanoseconds, so each thread keeps
//! its last answer (the allocation's bounds) with the heap's generation number, bumped on every
//! malloc and free: the table is searched, under its lock, only when a thread moves to another
//! allocation or the table changed.

use super::allocator::Owner;
use super::SymmetricHeap;
use crate::error::{Error, Result};
use std::cell::Cell;
use std::sync::atomic::Ordering;

/// Bits of [`HeapAllocation::id`] that number allocations within one heap.
const SEQ_BITS: u32 = 40;

/// One live allocation, seen from an address inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapAllocation {
    /// Which PE's copy the address was in (this PE, or a node-local peer mapped here).
    pub pe: usize,
    /// Address of the allocation's first byte in that copy, in this process.
    pub base: usize,
    /// Heap offset of the first byte (the same on every PE).
    pub offset: usize,
    /// Bytes the program asked for.
    pub len: usize,
    /// Unique in this process, across heaps too (a heap made after `finalize` + `init` never
    /// repeats one): a layer that remembers an allocation by its id knows it was freed when the
    /// address now answers another id, or none.
    pub id: u64,
    /// Who may address it through the host API.
    pub owner: Owner,
}

/// A thread's last successful [`SymmetricHeap::check_user`]: `[lo, hi)` of user memory in the
/// heap `serial` at `generation`.
#[derive(Clone, Copy)]
struct Hit {
    serial: u64,
    generation: u64,
    lo: usize,
    hi: usize,
}

thread_local! {
    static LAST_HIT: Cell<Hit> = const { Cell::new(Hit { serial: 0, generation: 0, lo: 0, hi: 0 }) };
}

impl SymmetricHeap {
    /// The live allocation holding `addr` (in this PE's slot or a node-local peer's), if any.
    pub fn allocation_of(&self, addr: usize) -> Option<HeapAllocation> {
        let (pe, off) = self.layout.locate(addr).filter(|&(_, off)| off < self.mapped())?;
        let a = super::lock(&self.alloc).find(off)?;
        (off < a.offset + a.requested.max(1)).then(|| HeapAllocation {
            pe,
            base: addr - (off - a.offset),
            offset: a.offset,
            len: a.requested,
            id: (self.serial << SEQ_BITS) | (a.seq & ((1 << SEQ_BITS) - 1)),
            owner: a.owner,
        })
    }

    /// Whether allocation id `id` (see [`HeapAllocation::id`]) was handed out by this heap, and
    /// not by one that an earlier `finalize` dropped.
    pub fn made_id(&self, id: u64) -> bool {
        id >> SEQ_BITS == self.serial
    }

    /// Hands the allocation at `addr` (its first byte, in this PE's slot) to `owner`. Every PE
    /// must make the same call, so that owners stay symmetric.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `addr` is not the start of a live allocation.
    pub fn set_owner(&self, addr: usize, owner: Owner) -> Result<()> {
        if !self.contains(addr, 1) {
            return Err(self.outside(addr, 1));
        }
        let mut a = super::lock(&self.alloc);
        a.set_owner(addr - self.my_base(), owner)?;
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Checks a range a program passed as symmetric memory: `[addr, addr+len)` lies in this PE's
    /// slot, inside one live allocation of the program's (not one of the runtime's own).
    /// An empty range is checked as its first byte.
    ///
    /// # Errors
    /// [`Error::NotSymmetric`] outside the heap; [`Error::NotAllocated`] naming the heap offset
    /// and why (no live allocation there, the runtime's own words, or past the allocation's end).
    pub fn check_user(&self, addr: usize, len: usize) -> Result<()> {
        let generation = self.generation.load(Ordering::Acquire);
        let hit = LAST_HIT.with(Cell::get);
        if hit.serial == self.serial
            && hit.generation == generation
            && addr >= hit.lo
            && addr.checked_add(len).is_some_and(|end| end <= hit.hi)
        {
            return Ok(());
        }
        let (lo, hi) = self.user_bounds(addr, len)?;
        LAST_HIT.with(|c| c.set(Hit { serial: self.serial, generation, lo, hi }));
        Ok(())
    }

    /// `[lo, hi)` of the user allocation that holds `[addr, addr+len)`, or why there is none.
    fn user_bounds(&self, addr: usize, len: usize) -> Result<(usize, usize)> {
        if !self.contains(addr, len.max(1)) {
            return Err(self.outside(addr, len));
        }
        let off = addr - self.my_base();
        let refuse = |detail: String| Error::NotAllocated { addr, len, detail };
        let Some(a) = super::lock(&self.alloc).find(off) else {
            return Err(refuse(format!("heap offset {off} is in no live allocation (freed, or never allocated)")));
        };
        if a.owner == Owner::Runtime {
            return Err(refuse(format!(
                "heap offset {off} is inside the runtime's own words (barrier counters, team table, \
                 collective workspace), which the host API never lets a program address"
            )));
        }
        let end = a.offset + a.requested.max(1);
        if off >= end || off + len > end {
            return Err(refuse(format!(
                "heap offset {off} +{len} bytes runs past the end of the {}-byte allocation at heap \
                 offset {}",
                a.requested, a.offset
            )));
        }
        let lo = self.my_base() + a.offset;
        Ok((lo, lo + a.requested.max(1)))
    }

    /// The error for a range outside this PE's mapped slot.
    pub(super) fn outside(&self, addr: usize, len: usize) -> Error {
        Error::NotSymmetric { addr, len, heap_lo: self.my_base(), heap_hi: self.my_base() + self.mapped() }
    }
}
