//! The symmetric heap: one reserved range with a slot per node-local PE, grown on demand.
//!
//! Each process reserves `nslots * stride` bytes of addresses once (`stride` = the bound,
//! `RSHMEM_SYMMETRIC_SIZE`, rounded to the backend's granularity); node-local PE with local
//! index `i` owns slot `i`. Physical memory is added inside the collective [`SymmetricHeap::malloc`]
//! when the allocator runs out: every PE creates a chunk of the same size, maps it at the end of
//! its slot's mapped part, and maps each node-local peer's chunk at the same offset in that
//! peer's slot. Nothing already mapped moves, so earlier addresses stay valid.
//!
//! Files: `layout.rs` (slot arithmetic), `allocator.rs` (which offsets are in use; pure logic),
//! `agree.rs` (checking every PE makes the same call), `segment.rs` (one growth step),
//! `group.rs` (what the heap needs from the bootstrap), `record.rs` (the live allocations as
//! other layers ask about them: [`SymmetricHeap::allocation_of`], [`SymmetricHeap::check_user`]).
//!
//! The allocator's table of live allocations is the one record of what the heap holds: the host
//! API checks every address a program passes against it (a put into freed memory or into the
//! runtime's own words fails instead of landing), and the layers above (Python tensors) ask it
//! whether an allocation they remember is still the same one ([`HeapAllocation::id`]).
//!
//! # Safety
//! One unsafe call: zeroing a `calloc` block through the backend, after checking the range
//! lies in this PE's mapped slot.
#![allow(unsafe_code)]

mod addr;
pub mod agree;
pub mod allocator;
pub mod group;
pub mod layout;
mod record;
pub mod segment;

use crate::backend::{MemoryBackend, Reservation};
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use agree::{agree, Call, Op};
use allocator::{round_up, Allocator, MIN_ALIGN};
use group::Group;
use layout::Layout;
use segment::Segment;
pub use addr::SymAddr;
pub use allocator::Owner;
pub use record::HeapAllocation;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The symmetric heap of this PE. `Send + Sync`: address queries are lock-free, collective
/// calls take an internal lock (they must not run concurrently on one PE anyway).
///
/// Owns the reservation and every chunk and mapping in it, through a [`HeapPin`] of its own.
/// Dropping it (not collective) unmaps all segments, newest first, then releases the
/// reservation, once no other [`HeapPin`] is left.
pub struct SymmetricHeap {
    /// Told of each growth step (the network transport registers it); dropped before the
    /// mappings, so a registration never outlives its memory.
    grow_hook: Mutex<Option<Arc<dyn GrowHook>>>,
    backend: Arc<dyn MemoryBackend>,
    layout: Layout,
    rank: usize,
    nranks: usize,
    node_of: Vec<usize>,
    bound: usize,
    growth: usize,
    /// Bytes mapped per slot; only grows, read without the lock.
    mapped: AtomicUsize,
    alloc: Mutex<Allocator>,
    /// This heap among every heap of the process (from 1): part of each [`HeapAllocation::id`].
    serial: u64,
    /// Bumped under the `alloc` lock whenever the table of live allocations changes, so that a
    /// thread's cached answer of [`SymmetricHeap::check_user`] is used only while still true.
    generation: AtomicU64,
    /// The mappings and the reservation.
    memory: HeapPin,
    /// Held for the whole of a collective call: the number of collective heap calls so far.
    calls: Mutex<u64>,
    /// Heap offset -> length of each buffer the program registered
    /// ([`SymmetricHeap::register_in`]).
    registered: Mutex<std::collections::BTreeMap<usize, usize>>,
}

/// Keeps every mapping of a heap (and its reserved addresses) alive while it exists, even past
/// the heap's own drop at `finalize`.
///
/// A front end hands one to each object built over heap memory (a Python tensor's storage), so
/// that a tensor a program keeps after `finalize` reads and writes memory that is still mapped
/// instead of faulting: after `finalize` that memory is this process's alone (the peers have
/// unmapped theirs), and it is released when the last pin goes.
#[derive(Clone)]
pub struct HeapPin(Arc<Mapped>);

impl std::fmt::Debug for HeapPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeapPin").field("base", &self.0.reservation.base()).finish()
    }
}

/// The segments and the reservation of one heap.
struct Mapped {
    /// Growth steps in order; dropped newest first, before the reservation.
    segments: Mutex<Vec<Segment>>,
    /// Held only to keep the addresses reserved until the last pin is gone.
    reservation: Box<dyn Reservation>,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // Newest first, then the reservation (a field, dropped after this) releases the addresses.
        let mut segments = lock(&self.segments);
        while segments.pop().is_some() {}
    }
}

/// Serial number of the next heap made in this process.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

fn next_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data that is still consistent enough to
    // report from; do not turn it into a second panic.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl std::fmt::Debug for SymmetricHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymmetricHeap")
            .field("backend", &self.backend.kind())
            .field("layout", &self.layout)
            .field("mapped", &self.mapped())
            .field("in_use", &self.in_use())
            .finish()
    }
}

impl SymmetricHeap {
    /// Creates the heap (the heap part of `nvshmem_init`). Collective: every PE of `boot`
    /// must call it with the same `bound` (`RSHMEM_SYMMETRIC_SIZE`) and `growth`
    /// (`RSHMEM_HEAP_GROWTH`). Reserves `node-local PEs x bound` bytes of addresses; maps
    /// nothing yet.
    ///
    /// # Errors
    /// [`Error::Mismatch`] (on every PE) when PEs pass different bounds or growth steps;
    /// [`Error::Os`] / [`Error::Driver`] when the addresses cannot be reserved; bootstrap errors.
    pub fn new(backend: Arc<dyn MemoryBackend>, boot: &Bootstrap, bound: usize, growth: usize) -> Result<SymmetricHeap> {
        Self::new_in(backend, boot, bound, growth)
    }

    /// `shmem_malloc` / `shmem_align`: `size` bytes aligned to `align` (0 or anything up to 256
    /// gives 256). Collective: every PE must pass the same `size` and `align`. Grows the heap
    /// when needed. Returns the local address; 0 for size 0 (nothing is allocated).
    ///
    /// # Errors
    /// On every PE alike: [`Error::Mismatch`] naming the first PE whose call differs (size,
    /// alignment, another heap call, or a different number of heap calls so far);
    /// [`Error::HeapExhausted`] past the bound; [`Error::InvalidArgument`] for an alignment that
    /// is not a power of two. Bootstrap errors ([`Error::PeerDied`], [`Error::Timeout`]).
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/memory.html>
    #[doc(alias = "nvshmem_malloc")]
    #[doc(alias = "nvshmem_align")]
    pub fn malloc(&self, boot: &Bootstrap, size: usize, align: usize) -> Result<usize> {
        self.malloc_in(boot, size, align)
    }

    /// `shmem_calloc`: `count * size` zeroed bytes. Collective, as [`SymmetricHeap::malloc`];
    /// ends with a barrier so no peer writes into this PE's block before it is zeroed.
    ///
    /// # Errors
    /// As [`SymmetricHeap::malloc`]; [`Error::InvalidArgument`] (on every PE) when
    /// `count * size` overflows.
    #[doc(alias = "nvshmem_calloc")]
    pub fn calloc(&self, boot: &Bootstrap, count: usize, size: usize) -> Result<usize> {
        self.calloc_in(boot, count, size)
    }

    /// `shmem_free`. Collective: every PE must free the same allocation; `free(0)` does
    /// nothing (but is still a collective call). Every PE has entered it before any returns.
    ///
    /// # Errors
    /// On every PE alike: [`Error::Mismatch`] when PEs free different offsets;
    /// [`Error::InvalidArgument`] when `addr` is not the start of a live allocation.
    #[doc(alias = "nvshmem_free")]
    pub fn free(&self, boot: &Bootstrap, addr: usize) -> Result<()> {
        self.free_in(boot, addr)
    }

    /// Creates the heap. Collective over all PEs of `group`; reserves the range, maps nothing.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when PEs pass different bounds or growth steps; reservation and
    /// bootstrap errors.
    pub fn new_in(backend: Arc<dyn MemoryBackend>, group: &dyn Group, bound: usize, growth: usize) -> Result<SymmetricHeap> {
        let gran = backend.granularity();
        let stride = Layout::stride_for(bound, gran)?;
        let growth = Layout::stride_for(growth.max(1), gran)?.min(stride);
        agree(group, Call::plain(Op::Init, 0, stride as u64, growth as u64))?;
        let node = group.node_view();
        let nranks = group.nranks();
        let mut slot_of = vec![None; nranks];
        for (slot, &pe) in node.local_pes.iter().enumerate() {
            slot_of[pe] = Some(slot);
        }
        let reservation = backend.reserve(Layout::reservation_len(stride, node.local_pes.len())?)?;
        let layout = Layout { base: reservation.base(), stride, my_slot: node.local_index, slot_of };
        tracing::debug!(base = layout.base, stride, slots = layout.nslots(), growth, "symmetric heap reserved");
        Ok(SymmetricHeap {
            grow_hook: Mutex::new(None),
            backend,
            rank: group.rank(),
            nranks,
            node_of: node.node_of,
            bound,
            growth,
            mapped: AtomicUsize::new(0),
            alloc: Mutex::new(Allocator::new(MIN_ALIGN)?),
            serial: next_serial(),
            generation: AtomicU64::new(0),
            memory: HeapPin(Arc::new(Mapped { segments: Mutex::new(Vec::new()), reservation })),
            calls: Mutex::new(0),
            registered: Mutex::default(),
            layout,
        })
    }

    /// `shmem_malloc` / `shmem_align` over any [`Group`]; see [`SymmetricHeap::malloc`].
    ///
    /// # Errors
    /// As [`SymmetricHeap::malloc`].
    pub fn malloc_in(&self, group: &dyn Group, size: usize, align: usize) -> Result<usize> {
        let mut calls = lock(&self.calls);
        *calls += 1;
        agree(group, Call::plain(Op::Malloc, *calls, size as u64, align as u64))?;
        if size == 0 {
            return Ok(0);
        }
        self.allocate(group, size, align)
    }

    /// `shmem_calloc` over any [`Group`]; see [`SymmetricHeap::calloc`].
    ///
    /// # Errors
    /// As [`SymmetricHeap::calloc`].
    pub fn calloc_in(&self, group: &dyn Group, count: usize, size: usize) -> Result<usize> {
        self.calloc_described(group, count, size, "")
    }

    /// [`SymmetricHeap::calloc_in`], with `what` the caller's words for what it allocates (a
    /// tensor's shape and dtype): PEs whose descriptions differ fail with a `Mismatch` quoting
    /// both, even where the sizes agree.
    ///
    /// # Errors
    /// As [`SymmetricHeap::calloc`].
    pub fn calloc_described(&self, group: &dyn Group, count: usize, size: usize, what: &str) -> Result<usize> {
        let mut calls = lock(&self.calls);
        *calls += 1;
        agree(group, Call { what: what.to_string(), ..Call::plain(Op::Calloc, *calls, count as u64, size as u64) })?;
        let total = count.checked_mul(size).ok_or_else(|| {
            Error::InvalidArgument(format!("calloc of {count} elements of {size} bytes overflows"))
        })?;
        if total == 0 {
            return Ok(0);
        }
        let addr = self.allocate(group, total, 0)?;
        self.zero_range(addr, total)?;
        // No peer may write into its new block before this PE has zeroed it.
        group.barrier()?;
        Ok(addr)
    }

    /// `shmem_free` over any [`Group`]; see [`SymmetricHeap::free`].
    ///
    /// # Errors
    /// As [`SymmetricHeap::free`].
    pub fn free_in(&self, group: &dyn Group, addr: usize) -> Result<()> {
        self.free_as(group, addr, Owner::User)
    }

    /// Frees an allocation of the runtime's own (see [`SymmetricHeap::set_owner`]). Collective,
    /// as [`SymmetricHeap::free`].
    ///
    /// # Errors
    /// As [`SymmetricHeap::free`].
    pub fn free_runtime_in(&self, group: &dyn Group, addr: usize) -> Result<()> {
        self.free_as(group, addr, Owner::Runtime)
    }

    /// `free` by `who`: an allocation of the other owner is refused (on every PE alike, since
    /// owners are the same everywhere).
    fn free_as(&self, group: &dyn Group, addr: usize, who: Owner) -> Result<()> {
        let mut calls = lock(&self.calls);
        *calls += 1;
        let offset = self.offset_word(addr);
        agree(group, Call::plain(Op::Free, *calls, offset, 0))?;
        match offset {
            agree::NULL => Ok(()),
            // The same error as any other use of memory outside the heap, so callers catch one
            // class (Python: `NotSymmetricError`) for "not symmetric memory".
            agree::NOT_IN_HEAP => Err(Error::NotSymmetric {
                addr,
                len: 1,
                heap_lo: self.my_base(),
                heap_hi: self.my_base() + self.mapped(),
            }),
            off if lock(&self.registered).contains_key(&(off as usize)) => Err(Error::InvalidArgument(format!(
                "free of {addr:#x}: heap offset {off} is a buffer the program registered \
                 (nvshmemx_buffer_register_symmetric); end it with nvshmemx_buffer_unregister_symmetric"
            ))),
            off => {
                let mut a = lock(&self.alloc);
                match a.find(off as usize) {
                    Some(found) if found.offset == off as usize && found.owner != who => {
                        return Err(Error::InvalidArgument(match found.owner {
                            Owner::Runtime => format!(
                                "free of {addr:#x}: heap offset {off} holds the runtime's own words \
                                 (barrier counters, team table, collective workspace), which only \
                                 finalize frees"
                            ),
                            Owner::User => format!("the runtime freeing the program's allocation at heap offset {off}"),
                        }))
                    }
                    _ => {}
                }
                a.free(off as usize)?;
                self.generation.fetch_add(1, Ordering::Release);
                Ok(())
            }
        }
    }

    /// `nvshmemx_buffer_register_symmetric` over any [`Group`]: makes the program's own `len`
    /// bytes at `addr` (one allocation it mapped itself, of this PE's GPU) part of the heap, at
    /// the same heap offset on every PE, and returns this PE's heap address of it. The memory
    /// is the program's (the heap maps it a second time, it copies nothing); every node-local
    /// peer maps it too, so symmetric calls reach it as any allocation. Collective: every PE
    /// passes its own buffer of the same size.
    ///
    /// The buffer goes in the first hole an unregistered buffer left that holds it, else at the
    /// end of the mapped part of the slots (as a growth step would).
    ///
    /// # Errors
    /// On every PE alike: [`Error::Mismatch`] for different sizes; [`Error::InvalidArgument`]
    /// for a size that is not a multiple of the backend's granularity, or a buffer the backend
    /// cannot adopt; [`Error::Unsupported`] on a backend that adopts nothing, or when PEs of
    /// the job are on other hosts (the network transport registers only the heap's own growth);
    /// [`Error::HeapExhausted`] past the bound.
    #[doc(alias = "nvshmemx_buffer_register_symmetric")]
    pub fn register_in(&self, group: &dyn Group, addr: usize, len: usize) -> Result<usize> {
        let mut calls = lock(&self.calls);
        *calls += 1;
        agree(group, Call::plain(Op::Register, *calls, len as u64, 0))?;
        let gran = self.backend.granularity();
        if len == 0 || len % gran != 0 {
            return Err(Error::InvalidArgument(format!(
                "registering {len} bytes at {addr:#x}: the size must be a positive multiple of the \
                 allocation granularity ({gran} bytes), as the buffer's own cuMemCreate size is"
            )));
        }
        if lock(&self.grow_hook).is_some() {
            return Err(Error::Unsupported(format!(
                "registering {len} bytes at {addr:#x}: this job has PEs on {} hosts, and rshmem's network \
                 transport reaches only memory from malloc; allocate the buffer with malloc / nvshmem_malloc",
                self.node_of.iter().max().map_or(1, |h| h + 1)
            )));
        }
        let hole = lock(&self.alloc).hole_for(len);
        let mapped = self.mapped();
        let offset = hole.unwrap_or(mapped);
        if hole.is_none() && len > self.layout.stride - mapped {
            return Err(Error::HeapExhausted { requested: len, in_use: self.in_use(), bound: self.bound });
        }
        let backend = self.backend.as_ref();
        let seg = Segment::map_with(backend, group, &self.layout, offset, len, "adopting the program's buffer", || {
            backend.adopt_chunk(addr, len)
        })?;
        lock(&self.memory.0.segments).push(seg);
        if hole.is_none() {
            self.mapped.store(mapped + len, Ordering::Release);
        }
        lock(&self.alloc).adopt(offset, len)?;
        lock(&self.registered).insert(offset, len);
        self.generation.fetch_add(1, Ordering::Release);
        tracing::debug!(pe = self.rank, addr, offset, len, "registered the program's buffer");
        Ok(self.my_base() + offset)
    }

    /// `nvshmemx_buffer_unregister_symmetric` over any [`Group`]: ends a registration made by
    /// [`SymmetricHeap::register_in`] (`addr` is the heap address it returned, `len` its size).
    /// Every PE unmaps the buffer (the program's own mapping of it stays); its heap addresses
    /// stay reserved for a later registration. Collective; the caller has finished its work on
    /// the buffer (as for `free`).
    ///
    /// # Errors
    /// On every PE alike: [`Error::Mismatch`] when PEs pass different buffers or sizes;
    /// [`Error::InvalidArgument`] for an address that is not a registered buffer of that size.
    #[doc(alias = "nvshmemx_buffer_unregister_symmetric")]
    pub fn unregister_in(&self, group: &dyn Group, addr: usize, len: usize) -> Result<()> {
        let mut calls = lock(&self.calls);
        *calls += 1;
        let offset = self.offset_word(addr);
        agree(group, Call::plain(Op::Unregister, *calls, offset, len as u64))?;
        let off = offset as usize;
        let known = lock(&self.registered).get(&off).copied();
        match known {
            Some(l) if l == len => {}
            Some(l) => {
                return Err(Error::InvalidArgument(format!(
                    "unregistering {len} bytes at {addr:#x}: the buffer registered there has {l} bytes"
                )))
            }
            None => {
                return Err(Error::InvalidArgument(format!(
                    "unregistering {addr:#x}: not an address nvshmemx_buffer_register_symmetric returned \
                     (or it was unregistered already); {}",
                    self.describe(addr)
                )))
            }
        }
        let seg = {
            let mut segs = lock(&self.memory.0.segments);
            let at = segs.iter().position(|s| s.offset == off).expect("a registered buffer has its segment");
            segs.remove(at)
        };
        // Unmaps, after this PE's queued device work (the mappings' drop waits for it).
        drop(seg);
        lock(&self.registered).remove(&off);
        lock(&self.alloc).retire(off)?;
        self.generation.fetch_add(1, Ordering::Release);
        // No PE registers anything new over these addresses before every PE has unmapped them.
        group.barrier()?;
        Ok(())
    }

    /// `addr` as the word PEs compare in a `free` or an unregistration: its heap offset, or
    /// [`agree::NULL`] / [`agree::NOT_IN_HEAP`].
    fn offset_word(&self, addr: usize) -> u64 {
        if addr == 0 {
            agree::NULL
        } else if self.contains(addr, 1) {
            (addr - self.my_base()) as u64
        } else {
            agree::NOT_IN_HEAP
        }
    }

    /// Finds room for `size` bytes, growing the heap (collectively) as often as needed. The
    /// caller holds the `calls` lock.
    fn allocate(&self, group: &dyn Group, size: usize, align: usize) -> Result<usize> {
        loop {
            let need = {
                let mut a = lock(&self.alloc);
                if let Some(off) = a.malloc(size, align)? {
                    self.generation.fetch_add(1, Ordering::Release);
                    return Ok(self.my_base() + off);
                }
                a.capacity_needed(size, align)?.unwrap_or(a.capacity())
            };
            let mapped = self.mapped();
            if need > self.layout.stride && align > self.layout.stride / 2 {
                // Not a matter of free space: no offset in a slot is aligned to that.
                return Err(Error::InvalidArgument(format!(
                    "alignment {align} for {size} bytes: a PE's whole symmetric heap slot holds {} bytes, so no \
                     allocation in it can start at a multiple of {align} other than 0 (which the heap's own words \
                     take); pass an alignment of at most {} (a power of two)",
                    self.layout.stride,
                    self.layout.stride / 2
                )));
            }
            if need > self.layout.stride {
                return Err(Error::HeapExhausted { requested: size, in_use: self.in_use(), bound: self.bound });
            }
            // At least the growth step, but never past the slot's end.
            let want = round_up(need - mapped, self.backend.granularity()).unwrap_or(usize::MAX);
            let len = want.max(self.growth).min(self.layout.stride - mapped);
            tracing::debug!(pe = self.rank, offset = mapped, len, "growing the symmetric heap");
            let seg = Segment::grow(self.backend.as_ref(), group, &self.layout, mapped, len)?;
            lock(&self.memory.0.segments).push(seg);
            // Before the new bytes are handed out: a put to a remote PE's copy of them needs
            // the registration.
            let hook = lock(&self.grow_hook).clone();
            if let Some(hook) = hook {
                hook.grown(group, mapped, len)?;
            }
            self.mapped.store(mapped + len, Ordering::Release);
            lock(&self.alloc).grow(mapped + len)?;
        }
    }

    fn zero_range(&self, addr: usize, len: usize) -> Result<()> {
        if !self.contains(addr, len) {
            return Err(Error::NotSymmetric { addr, len, heap_lo: self.my_base(), heap_hi: self.my_base() + self.mapped() });
        }
        zero_checked(self.backend.as_ref(), addr, len)
    }

    /// The address of `[addr, addr+len)` of this PE's heap on `pe`, in this process.
    ///
    /// # Errors
    /// [`Error::PeOutOfRange`] for `pe >= nranks`; [`Error::NotSymmetric`] unless the range
    /// lies in this PE's mapped slot; [`Error::Unsupported`] when `pe` is on another host.
    pub fn translate(&self, addr: usize, len: usize, pe: usize) -> Result<usize> {
        if pe >= self.nranks {
            return Err(Error::PeOutOfRange { pe: pe as i64, n_pes: self.nranks, scope: "the job".into() });
        }
        if !self.contains(addr, len) {
            return Err(Error::NotSymmetric { addr, len, heap_lo: self.my_base(), heap_hi: self.my_base() + self.mapped() });
        }
        self.layout.peer_addr(addr, pe).ok_or_else(|| {
            Error::Unsupported(format!(
                "PE {pe} is on host #{} and PE {} (this PE) on host #{}: its memory has no address \
                 in this process (as nvshmem_ptr returns NULL); reach it with puts, gets, atomics \
                 and signals, which go through the network transport",
                self.node_of[pe], self.rank, self.node_of[self.rank]
            ))
        })
    }

    /// `shmem_ptr`: the address on `pe` if reachable by load/store, else `None` (also for
    /// addresses outside the heap).
    #[doc(alias = "nvshmem_ptr")]
    pub fn ptr(&self, addr: usize, pe: usize) -> Option<usize> {
        self.translate(addr, 1, pe).ok()
    }

    /// Whether `[addr, addr+len)` lies in this PE's mapped slot.
    pub fn contains(&self, addr: usize, len: usize) -> bool {
        let lo = self.my_base();
        addr >= lo && addr.checked_add(len).is_some_and(|end| end <= lo + self.mapped())
    }

    /// Start of this PE's slot (the address of heap offset 0).
    pub fn my_base(&self) -> usize {
        self.layout.my_base()
    }

    /// Start of `pe`'s slot in this process, if `pe` is node-local.
    pub fn slot_base(&self, pe: usize) -> Option<usize> {
        self.layout.pe_base(pe)
    }

    /// Bytes between two slots.
    pub fn stride(&self) -> usize {
        self.layout.stride
    }

    /// The bound given at creation (`RSHMEM_SYMMETRIC_SIZE`).
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// Bytes mapped per slot so far.
    pub fn mapped(&self) -> usize {
        self.mapped.load(Ordering::Acquire)
    }

    /// Bytes allocated (each allocation rounded up to 256 bytes).
    pub fn in_use(&self) -> usize {
        lock(&self.alloc).in_use()
    }

    /// The slot layout (for the device state).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Names `addr` for error messages: "allocation of N bytes at heap offset O, +K", with
    /// "PE p's copy of" in front for an address in a peer's slot.
    pub fn describe(&self, addr: usize) -> String {
        let Some((pe, off)) = self.layout.locate(addr).filter(|&(_, off)| off < self.mapped()) else {
            return format!("address {addr:#x} (outside the symmetric heap)");
        };
        let whose = if pe == self.rank { String::new() } else { format!("PE {pe}'s copy of ") };
        match lock(&self.alloc).find(off) {
            Some(a) => format!(
                "{whose}allocation of {} bytes at heap offset {}, +{}",
                a.requested,
                a.offset,
                off - a.offset
            ),
            None => format!("{whose}heap offset {off} (no live allocation)"),
        }
    }

    /// Installs the hook told of every later growth step (`None` removes it).
    pub fn set_grow_hook(&self, hook: Option<Arc<dyn GrowHook>>) {
        *lock(&self.grow_hook) = hook;
    }

    /// The memory backend.
    pub fn backend(&self) -> &Arc<dyn MemoryBackend> {
        &self.backend
    }

    /// A pin that keeps every mapping of this heap alive while it exists (see [`HeapPin`]).
    pub fn pin(&self) -> HeapPin {
        self.memory.clone()
    }
}

/// Told of each growth step of a heap, inside the collective call that grows it.
pub trait GrowHook: Send + Sync {
    /// `[offset, offset+len)` of every PE's slot was just mapped. Collective over `group`.
    ///
    /// # Errors
    /// Whatever keeps the new memory from being used; the same on every PE.
    fn grown(&self, group: &dyn Group, offset: usize, len: usize) -> Result<()>;
}

fn zero_checked(backend: &dyn MemoryBackend, addr: usize, len: usize) -> Result<()> {
    // SAFETY: the caller checked `[addr, addr+len)` lies in this PE's mapped slot.
    unsafe { backend.zero(addr, len) }
}

#[cfg(test)]
mod tests;
