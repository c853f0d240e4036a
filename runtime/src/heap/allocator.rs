//! The symmetric allocator: which offsets of the heap are in use. Pure logic, no OS calls.
//!
//! Offsets lie in `[0, capacity)`; the heap adds its slot base to get addresses. Free space is a
//! map from start offset to length, kept coalesced (no two free blocks touch), and allocation is
//! first-fit in address order. Both maps are `BTreeMap`s, so the same sequence of calls gives the
//! same offsets on every PE: that is what makes the heap symmetric without exchanging offsets.
//!
//! A size-class index finds the first fit without walking every hole: free blocks are also kept
//! in one address-ordered set per power-of-two length class. A block of a class above the one of
//! `size + align - MIN_ALIGN` surely fits, so the lowest start among those classes' first
//! entries is a candidate; only the classes between `size`'s and that one are walked, and only
//! below the candidate. The answer is the same block the plain first-fit walk finds
//! (`examples/heap_cost` measures both cases).
//!
//! Every block starts and ends on a multiple of the minimum alignment (256 bytes by default, so
//! 16-byte vector loads and 128-byte GPU cache lines never straddle two allocations). Larger
//! alignments split a block into a free head, the allocation and a free tail.

use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};

/// The default (and smallest) alignment of every allocation, in bytes.
pub const MIN_ALIGN: usize = 256;

/// Who may address an allocation through the host API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The program: every host call takes addresses inside it.
    User,
    /// The runtime itself (barrier words, team table, collective workspaces): host calls with
    /// user addresses refuse it, so a stray put cannot corrupt the runtime's state.
    Runtime,
}

/// One live allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// Offset of the first byte.
    pub offset: usize,
    /// Bytes the caller asked for.
    pub requested: usize,
    /// Bytes the block takes (requested rounded up to the minimum alignment).
    pub size: usize,
    /// Number of this allocation among every allocation this allocator made (from 1): an
    /// allocation later made at the same offset has another number, so a stale reference to a
    /// freed one can be told apart.
    pub seq: u64,
    /// Who may address it.
    pub owner: Owner,
}

/// First-fit allocator over `[0, capacity)` with coalescing free. See the module docs.
#[derive(Debug, Clone)]
pub struct Allocator {
    capacity: usize,
    min_align: usize,
    /// start -> length of each free block; blocks never touch.
    free: BTreeMap<usize, usize>,
    /// The starts of the free blocks by length class (`class_of(len)`), each in address order.
    by_class: Vec<BTreeSet<usize>>,
    /// start -> allocation.
    used: BTreeMap<usize, Allocation>,
    in_use: usize,
    /// `seq` of the last allocation made.
    last_seq: u64,
    /// start -> length of the ranges with no memory behind them: a registered buffer's place
    /// after it was unregistered (see [`Allocator::retire`]). Never handed out by `malloc`.
    holes: BTreeMap<usize, usize>,
}

impl Allocator {
    /// An allocator with no capacity yet (the heap grows it with [`Allocator::grow`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `min_align` is not a power of two.
    pub fn new(min_align: usize) -> Result<Allocator> {
        if !min_align.is_power_of_two() {
            return Err(Error::InvalidArgument(format!(
                "allocator alignment {min_align} is not a power of two"
            )));
        }
        Ok(Allocator {
            capacity: 0,
            min_align,
            free: BTreeMap::new(),
            by_class: vec![BTreeSet::new(); CLASSES],
            used: BTreeMap::new(),
            in_use: 0,
            last_seq: 0,
            holes: BTreeMap::new(),
        })
    }

    /// Offsets below this are managed.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes taken by live allocations (each rounded up to the minimum alignment).
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Number of live allocations.
    pub fn count(&self) -> usize {
        self.used.len()
    }

    /// The block size and alignment a request really takes.
    fn normalize(&self, size: usize, align: usize) -> Result<(usize, usize)> {
        if size == 0 {
            return Err(Error::InvalidArgument("allocation of 0 bytes".into()));
        }
        let align = if align == 0 { self.min_align } else { align };
        if !align.is_power_of_two() {
            return Err(Error::InvalidArgument(format!(
                "alignment {align} is not a power of two; pass 0 for the default ({})",
                self.min_align
            )));
        }
        let size = round_up(size, self.min_align).ok_or_else(|| {
            Error::InvalidArgument(format!("allocation of {size} bytes overflows the address space"))
        })?;
        Ok((size, align.max(self.min_align)))
    }

    /// Where a `(size, align)` block would go in the free block `[start, start+len)`.
    fn place(start: usize, len: usize, size: usize, align: usize) -> Option<usize> {
        let at = round_up(start, align)?;
        let end = at.checked_add(size)?;
        (end <= start + len).then_some(at)
    }

    /// Allocates `size` bytes aligned to `align` (0 = the minimum alignment; smaller values are
    /// raised to it). `Ok(None)` when nothing fits: ask [`Allocator::capacity_needed`], grow, retry.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for size 0, an alignment that is not a power of two, or a size
    /// that overflows.
    pub fn malloc(&mut self, size: usize, align: usize) -> Result<Option<usize>> {
        let requested = size;
        let (size, align) = self.normalize(size, align)?;
        let Some((start, len, at)) = self.first_fit(size, align) else {
            return Ok(None);
        };
        self.remove_free(start);
        if at > start {
            self.add_free(start, at - start);
        }
        let tail = start + len - (at + size);
        if tail > 0 {
            self.add_free(at + size, tail);
        }
        self.last_seq += 1;
        self.used.insert(at, Allocation { offset: at, requested, size, seq: self.last_seq, owner: Owner::User });
        self.in_use += size;
        Ok(Some(at))
    }

    /// The capacity at which [`Allocator::malloc`]`(size, align)` would succeed, if it does not
    /// now: the request placed at the start of the free space that ends at the current capacity
    /// (or at the capacity itself when the last block is in use). `Ok(None)` when it fits now.
    ///
    /// # Errors
    /// As [`Allocator::malloc`], and [`Error::InvalidArgument`] when the answer overflows.
    pub fn capacity_needed(&self, size: usize, align: usize) -> Result<Option<usize>> {
        let (size, align) = self.normalize(size, align)?;
        if self.first_fit(size, align).is_some() {
            return Ok(None);
        }
        let tail_start = match self.free.last_key_value() {
            Some((&s, &l)) if s + l == self.capacity => s,
            _ => self.capacity,
        };
        round_up(tail_start, align)
            .and_then(|at| at.checked_add(size))
            .map(Some)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "allocation of {size} bytes aligned to {align} overflows the address space; pass a smaller \
                     size or alignment"
                ))
            })
    }

    /// Adds `[capacity, new_capacity)` as free space.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `new_capacity` is smaller than the capacity or not a
    /// multiple of the minimum alignment.
    pub fn grow(&mut self, new_capacity: usize) -> Result<()> {
        if new_capacity < self.capacity || new_capacity % self.min_align != 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot grow the allocator from {} to {new_capacity} bytes (must not shrink and \
                 must be a multiple of {})",
                self.capacity, self.min_align
            )));
        }
        if new_capacity > self.capacity {
            let old = self.capacity;
            self.capacity = new_capacity;
            self.insert_free(old, new_capacity - old);
        }
        Ok(())
    }

    /// Frees the allocation starting at `offset`; returns it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when no allocation starts at `offset`.
    pub fn free(&mut self, offset: usize) -> Result<Allocation> {
        let Some(a) = self.used.remove(&offset) else {
            let hint = match self.find(offset) {
                Some(a) => format!(
                    "it is {} bytes into the allocation at heap offset {}; free the start",
                    offset - a.offset,
                    a.offset
                ),
                None => "no allocation contains it (freed twice?)".to_string(),
            };
            return Err(Error::InvalidArgument(format!(
                "free of heap offset {offset}, which is not the start of a live allocation: {hint}"
            )));
        };
        self.in_use -= a.size;
        self.insert_free(a.offset, a.size);
        Ok(a)
    }

    /// Where a registered buffer of `len` bytes goes: the start of the lowest hole that holds it,
    /// else `None` (it goes at the capacity). Changes nothing: [`Allocator::adopt`] takes the place.
    pub fn hole_for(&self, len: usize) -> Option<usize> {
        self.holes.iter().find(|&(_, &l)| l >= len).map(|(&start, _)| start)
    }

    /// Records `[offset, offset+len)` as a live allocation of the program that is not the
    /// allocator's free space (a registered buffer): at the capacity, which grows past it, or
    /// inside a hole (see [`Allocator::hole_for`]), whose rest stays a hole. Returns its `seq`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a range elsewhere, or not a multiple of the minimum alignment.
    pub fn adopt(&mut self, offset: usize, len: usize) -> Result<u64> {
        if len == 0 || offset % self.min_align != 0 || len % self.min_align != 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot adopt {len} bytes at heap offset {offset}: both must be positive multiples of {}",
                self.min_align
            )));
        }
        if offset == self.capacity {
            self.capacity += len;
        } else {
            let hole = self.holes.range(..=offset).next_back().map(|(&s, &l)| (s, l));
            let Some((start, hole_len)) = hole.filter(|&(s, l)| offset + len <= s + l) else {
                return Err(Error::InvalidArgument(format!(
                    "cannot adopt {len} bytes at heap offset {offset}: the range is not a hole of the heap"
                )));
            };
            self.holes.remove(&start);
            if offset > start {
                self.holes.insert(start, offset - start);
            }
            if start + hole_len > offset + len {
                self.holes.insert(offset + len, start + hole_len - offset - len);
            }
        }
        self.last_seq += 1;
        self.used.insert(offset, Allocation { offset, requested: len, size: len, seq: self.last_seq, owner: Owner::User });
        self.in_use += len;
        Ok(self.last_seq)
    }

    /// Ends the allocation at `offset` without giving its range back as free space: the
    /// memory behind it is gone (an unregistered buffer), so the range becomes a hole that only a
    /// later [`Allocator::adopt`] fills. Returns the allocation.
    ///
    /// # Errors
    /// As [`Allocator::free`].
    pub fn retire(&mut self, offset: usize) -> Result<Allocation> {
        let a = self.free(offset)?;
        // `free` made it free space; take it back out (it was merged with free neighbours).
        let (start, len) = self
            .free
            .range(..=offset)
            .next_back()
            .map(|(&s, &l)| (s, l))
            .expect("the range just freed is inside a free block");
        self.remove_free(start);
        if offset > start {
            self.add_free(start, offset - start);
        }
        let end = offset + a.size;
        if start + len > end {
            self.add_free(end, start + len - end);
        }
        let (mut hs, mut hl) = (offset, a.size);
        if let Some((&ps, &pl)) = self.holes.range(..hs).next_back() {
            if ps + pl == hs {
                self.holes.remove(&ps);
                (hs, hl) = (ps, pl + hl);
            }
        }
        if let Some(nl) = self.holes.remove(&(hs + hl)) {
            hl += nl;
        }
        self.holes.insert(hs, hl);
        Ok(a)
    }

    /// The holes ([`Allocator::retire`]) in address order.
    pub fn holes(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.holes.iter().map(|(&s, &l)| (s, l))
    }

    /// Hands the allocation starting at `offset` to `owner`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when no allocation starts at `offset`.
    pub fn set_owner(&mut self, offset: usize, owner: Owner) -> Result<()> {
        let a = self.used.get_mut(&offset).ok_or_else(|| {
            Error::InvalidArgument(format!("heap offset {offset} is not the start of a live allocation"))
        })?;
        a.owner = owner;
        Ok(())
    }

    /// The live allocation containing `offset`, if any.
    pub fn find(&self, offset: usize) -> Option<Allocation> {
        let (_, a) = self.used.range(..=offset).next_back()?;
        (offset < a.offset + a.size).then_some(*a)
    }

    /// The lowest-addressed free block where a normalized `(size, align)` request fits:
    /// `(start, len, where the allocation goes)`. See the module docs for the index.
    fn first_fit(&self, size: usize, align: usize) -> Option<(usize, usize, usize)> {
        let lo = class_of(size);
        let sure = class_of(size.saturating_add(align - self.min_align));
        // Every block of a class above `sure` is at least 2^(sure+1) > size + align - min_align
        // bytes long: it fits wherever it starts (starts are multiples of min_align).
        let mut best: Option<(usize, usize, usize)> = None;
        for set in &self.by_class[(sure + 1).min(CLASSES)..] {
            if let Some(&s) = set.first() {
                if best.is_none_or(|(b, _, _)| s < b) {
                    let l = self.free[&s];
                    best = Some((s, l, Self::place(s, l, size, align).expect("a block of a larger class fits")));
                }
            }
        }
        for set in &self.by_class[lo..=sure.min(CLASSES - 1)] {
            let below = best.map_or(usize::MAX, |(b, _, _)| b);
            if let Some(found) = set
                .range(..below)
                .find_map(|&s| Self::place(s, self.free[&s], size, align).map(|at| (s, self.free[&s], at)))
            {
                best = Some(found);
            }
        }
        best
    }

    /// Records a free block in both maps.
    fn add_free(&mut self, start: usize, len: usize) {
        self.free.insert(start, len);
        self.by_class[class_of(len)].insert(start);
    }

    /// Forgets the free block at `start`; returns its length.
    fn remove_free(&mut self, start: usize) -> Option<usize> {
        let len = self.free.remove(&start)?;
        self.by_class[class_of(len)].remove(&start);
        Some(len)
    }

    /// Inserts a free block and merges it with free neighbours.
    fn insert_free(&mut self, mut start: usize, mut len: usize) {
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            debug_assert!(ps + pl <= start, "free block {ps}+{pl} overlaps {start}");
            if ps + pl == start {
                self.remove_free(ps);
                start = ps;
                len += pl;
            }
        }
        if let Some(nl) = self.remove_free(start + len) {
            len += nl;
        }
        self.add_free(start, len);
    }

    /// Free blocks in address order, for tests and debug dumps.
    pub fn free_blocks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.free.iter().map(|(&s, &l)| (s, l))
    }

    /// Live allocations in address order.
    pub fn allocations(&self) -> impl Iterator<Item = Allocation> + '_ {
        self.used.values().copied()
    }
}

/// Length classes of the free-block index: class `c` holds lengths in `[2^c, 2^(c+1))`.
const CLASSES: usize = usize::BITS as usize;

/// The length class of `len` (> 0): the position of its highest set bit.
fn class_of(len: usize) -> usize {
    (usize::BITS - 1 - len.max(1).leading_zeros()) as usize
}

/// `value` rounded up to a multiple of the power of two `to`; `None` on overflow.
pub(crate) fn round_up(value: usize, to: usize) -> Option<usize> {
    debug_assert!(to.is_power_of_two());
    Some(value.checked_add(to - 1)? & !(to - 1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn length_classes_are_powers_of_two() {
        assert_eq!((super::class_of(1), super::class_of(256), super::class_of(511), super::class_of(512)), (0, 8, 8, 9));
        assert_eq!(super::class_of(usize::MAX), super::CLASSES - 1);
    }

    use super::*;

    fn grown(cap: usize) -> Allocator {
        let mut a = Allocator::new(MIN_ALIGN).unwrap();
        a.grow(cap).unwrap();
        a
    }

    /// Every invariant the module docs promise.
    fn check(a: &Allocator) {
        // The size-class index holds exactly the free blocks, each in its length's class.
        let indexed: usize = a.by_class.iter().map(BTreeSet::len).sum();
        assert_eq!(indexed, a.free.len(), "index out of step with the free map");
        for (s, l) in a.free_blocks() {
            assert!(a.by_class[class_of(l)].contains(&s), "free block {s}+{l} missing from class {}", class_of(l));
        }
        let mut spans: Vec<(usize, usize, bool)> = a.free_blocks().map(|(s, l)| (s, l, true)).collect();
        spans.extend(a.allocations().map(|x| (x.offset, x.size, false)));
        spans.extend(a.holes().map(|(s, l)| (s, l, false)));
        spans.sort();
        let mut at = 0;
        let mut prev_free = false;
        for &(s, l, is_free) in &spans {
            assert_eq!(s, at, "gap or overlap at {s}: {spans:?}");
            assert!(l > 0 && s % a.min_align == 0 && l % a.min_align == 0, "{spans:?}");
            assert!(!(is_free && prev_free), "free blocks not coalesced at {s}: {spans:?}");
            prev_free = is_free;
            at = s + l;
        }
        assert_eq!(at, a.capacity(), "blocks do not cover the capacity: {spans:?}");
        assert_eq!(a.in_use(), a.allocations().map(|x| x.size).sum::<usize>());
    }

    #[test]
    fn adopted_ranges_are_not_free_space_and_leave_holes_only_adoption_fills() {
        let mut a = grown(4096);
        let x = a.malloc(1000, 0).unwrap().unwrap();
        assert_eq!(a.hole_for(8192), None);
        a.adopt(4096, 8192).unwrap();
        assert_eq!((a.capacity(), a.in_use()), (4096 + 8192, 1024 + 8192));
        check(&a);
        // Free space below the adopted range is used first; nothing fits above it.
        assert_eq!(a.malloc(2048, 0).unwrap(), Some(1024));
        assert_eq!(a.malloc(2048, 0).unwrap(), None);
        assert!(a.adopt(0, 4096).is_err(), "over live allocations");
        a.grow(4096 + 8192 + 8192).unwrap();
        let after = a.malloc(2048, 0).unwrap().unwrap();
        assert_eq!(after, 4096 + 8192);
        // Retired: neither free nor in use; merged with a neighbouring hole.
        assert_eq!(a.retire(4096).unwrap().size, 8192);
        check(&a);
        assert_eq!(a.holes().collect::<Vec<_>>(), vec![(4096, 8192)]);
        assert_eq!(a.malloc(4096, 0).unwrap(), Some(after + 2048), "malloc skips the hole");
        assert_eq!(a.in_use(), 1024 + 2048 + 2048 + 4096);
        // A smaller adoption takes the hole's start; the rest stays a hole.
        assert_eq!(a.hole_for(4096), Some(4096));
        a.adopt(4096, 4096).unwrap();
        assert_eq!(a.holes().collect::<Vec<_>>(), vec![(8192, 4096)]);
        check(&a);
        a.retire(4096).unwrap();
        assert_eq!(a.holes().collect::<Vec<_>>(), vec![(4096, 8192)], "neighbouring holes merge");
        check(&a);
        a.free(x).unwrap();
        check(&a);
    }

    #[test]
    fn first_fit_rounds_and_aligns() {
        let mut a = grown(1 << 20);
        assert_eq!(a.malloc(1, 0).unwrap(), Some(0));
        assert_eq!(a.malloc(300, 0).unwrap(), Some(256));
        assert_eq!(a.in_use(), 256 + 512);
        assert_eq!(a.malloc(10, 4096).unwrap(), Some(4096));
        // The head left by the 4096 alignment is reused first.
        assert_eq!(a.malloc(256, 16).unwrap(), Some(768));
        check(&a);
        let f = a.find(4096 + 100).unwrap();
        assert_eq!((f.offset, f.requested, f.size, f.seq, f.owner), (4096, 10, 256, 3, Owner::User));
        a.set_owner(4096, Owner::Runtime).unwrap();
        assert_eq!(a.find(4096).unwrap().owner, Owner::Runtime);
        assert!(a.set_owner(4096 + 1, Owner::User).is_err());
        assert_eq!(a.find(4096 + 256), None);
    }

    #[test]
    fn free_coalesces_both_sides() {
        let mut a = grown(4096);
        let x: Vec<usize> = (0..4).map(|_| a.malloc(1024, 0).unwrap().unwrap()).collect();
        assert_eq!(x, [0, 1024, 2048, 3072]);
        assert_eq!(a.malloc(1, 0).unwrap(), None);
        a.free(x[0]).unwrap();
        a.free(x[2]).unwrap();
        check(&a);
        assert_eq!(a.free_blocks().count(), 2);
        a.free(x[1]).unwrap();
        assert_eq!(a.free_blocks().collect::<Vec<_>>(), [(0, 3072)]);
        a.free(x[3]).unwrap();
        assert_eq!(a.free_blocks().collect::<Vec<_>>(), [(0, 4096)]);
        assert_eq!(a.in_use(), 0);
        check(&a);
    }

    #[test]
    fn bad_requests_are_invalid_arguments() {
        let mut a = grown(4096);
        assert!(matches!(a.malloc(0, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(a.malloc(8, 3), Err(Error::InvalidArgument(_))));
        assert!(matches!(a.malloc(usize::MAX - 10, 0), Err(Error::InvalidArgument(_))));
        let off = a.malloc(512, 0).unwrap().unwrap();
        let err = a.free(off + 256).unwrap_err().to_string();
        assert!(err.contains("256 bytes into the allocation at heap offset 0"), "{err}");
        a.free(off).unwrap();
        let err = a.free(off).unwrap_err().to_string();
        assert!(err.contains("freed twice"), "{err}");
        assert!(Allocator::new(100).is_err());
        assert!(a.grow(1000).is_err(), "not a multiple of the alignment");
        assert!(a.grow(0).is_err(), "shrinking");
    }

    #[test]
    fn capacity_needed_then_grow_fits() {
        let mut a = Allocator::new(MIN_ALIGN).unwrap();
        assert_eq!(a.malloc(100, 0).unwrap(), None);
        assert_eq!(a.capacity_needed(100, 0).unwrap(), Some(256));
        a.grow(1024).unwrap();
        assert_eq!(a.capacity_needed(100, 0).unwrap(), None);
        let x = a.malloc(768, 0).unwrap().unwrap();
        // 256 free bytes at the tail count toward the next request.
        assert_eq!(a.capacity_needed(1000, 0).unwrap(), Some(768 + 1024));
        // With the last block in use, growth starts at the capacity.
        let y = a.malloc(256, 0).unwrap().unwrap();
        assert_eq!(a.capacity_needed(1, 8192).unwrap(), Some(8192 + 256));
        a.free(x).unwrap();
        // A hole in the middle that is too small does not count.
        assert_eq!(a.capacity_needed(1024, 0).unwrap(), Some(1024 + 1024));
        a.grow(2048).unwrap();
        assert_eq!(a.malloc(1024, 0).unwrap(), Some(1024));
        assert_eq!(y, 768);
        check(&a);
    }

    /// A tiny deterministic generator (xorshift64*), so the test needs no crate and replays.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The model: a byte map of which 256-byte units are taken; first-fit by scanning it.
    struct Model {
        taken: Vec<bool>,
        live: Vec<(usize, usize)>,
    }
    impl Model {
        fn malloc(&mut self, size: usize, align: usize) -> Option<usize> {
            let (units, step) = (size.div_ceil(MIN_ALIGN), align.max(MIN_ALIGN) / MIN_ALIGN);
            let at = (0..self.taken.len())
                .step_by(step)
                .find(|&u| u + units <= self.taken.len() && self.taken[u..u + units].iter().all(|t| !t))?;
            self.taken[at..at + units].iter_mut().for_each(|t| *t = true);
            self.live.push((at * MIN_ALIGN, units));
            Some(at * MIN_ALIGN)
        }
        fn free(&mut self, i: usize) -> usize {
            let (off, units) = self.live.swap_remove(i);
            let u = off / MIN_ALIGN;
            self.taken[u..u + units].iter_mut().for_each(|t| *t = false);
            off
        }
    }

    #[test]
    fn randomized_against_a_model() {
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut a = Allocator::new(MIN_ALIGN).unwrap();
            let mut m = Model { taken: Vec::new(), live: Vec::new() };
            for step in 0..2000 {
                let what = rng.below(10);
                if what < 5 {
                    let max = if rng.below(4) == 0 { 20_000 } else { 2000 };
                    let size = 1 + rng.below(max) as usize;
                    let align = 1usize << rng.below(14);
                    let got = a.malloc(size, align).unwrap();
                    let want = m.malloc(size, align);
                    assert_eq!(got, want, "seed {seed} step {step}: malloc({size}, {align})");
                    if got.is_none() {
                        // Grow exactly as the heap does and retry: it must fit then.
                        let need = a.capacity_needed(size, align).unwrap().unwrap();
                        let extra = rng.below(3) as usize * MIN_ALIGN;
                        let cap = round_up(need, MIN_ALIGN).unwrap() + extra;
                        a.grow(cap).unwrap();
                        m.taken.resize(cap / MIN_ALIGN, false);
                        let got = a.malloc(size, align).unwrap();
                        assert_eq!(got, m.malloc(size, align), "seed {seed} step {step} after growth");
                        assert!(got.is_some(), "seed {seed} step {step}: grown to {cap} but no fit");
                    }
                } else if what < 9 && !m.live.is_empty() {
                    let i = rng.below(m.live.len() as u64) as usize;
                    let off = m.free(i);
                    a.free(off).unwrap();
                } else if !m.live.is_empty() {
                    // Look-ups inside and a free of an interior offset, which must fail.
                    let (off, units) = m.live[rng.below(m.live.len() as u64) as usize];
                    let inner = off + rng.below((units * MIN_ALIGN) as u64) as usize;
                    assert_eq!(a.find(inner).map(|x| x.offset), Some(off));
                    if inner != off {
                        assert!(a.free(inner).is_err());
                    }
                }
                check(&a);
                assert_eq!(a.count(), m.live.len());
            }
        }
    }
}
