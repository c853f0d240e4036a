//! The heap's collective logic with PEs as threads of one process (each with its own
//! reservation, as separate processes would have). Multi-process tests are in `tests/heap.rs`.
//!
//! # Safety
//! Tests write heap memory through raw addresses the heap returned.
#![allow(unsafe_code)]

use super::group::{Group, NodeView};
use super::SymmetricHeap;
use crate::backend::host::HostMemory;
use crate::backend::{AmoOp, MemoryBackend, Width};
use crate::error::{Error, Result};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const MIB: usize = 1 << 20;

/// A barrier that panics instead of hanging when a PE thread never arrives (it panicked).
struct Barrier {
    n: usize,
    state: Mutex<(usize, u64)>, // (arrived, generation)
    cv: Condvar,
}

impl Barrier {
    fn new(n: usize) -> Barrier {
        Barrier { n, state: Mutex::new((0, 0)), cv: Condvar::new() }
    }

    fn wait(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let generation = st.1;
        st.0 += 1;
        if st.0 == self.n {
            *st = (0, generation + 1);
            self.cv.notify_all();
            return;
        }
        let (st, timeout) = self
            .cv
            .wait_timeout_while(st, Duration::from_secs(20), |st| st.1 == generation)
            .unwrap_or_else(|p| p.into_inner());
        assert!(!timeout.timed_out() || st.1 != generation, "a PE thread never reached the barrier (it failed)");
    }
}

struct Hub {
    node_of: Vec<usize>,
    barrier: Barrier,
    data: Mutex<Vec<Vec<u8>>>,
    fds: Mutex<Vec<Option<OwnedFd>>>,
}

/// One PE of a thread "job".
struct ThreadPe {
    rank: usize,
    hub: Arc<Hub>,
}

impl Group for ThreadPe {
    fn rank(&self) -> usize {
        self.rank
    }
    fn nranks(&self) -> usize {
        self.hub.node_of.len()
    }
    fn node_view(&self) -> NodeView {
        let node_of = self.hub.node_of.clone();
        let local_pes: Vec<usize> = (0..node_of.len()).filter(|&p| node_of[p] == node_of[self.rank]).collect();
        let local_index = local_pes.iter().position(|&p| p == self.rank).unwrap();
        NodeView { local_pes, local_index, node_of }
    }
    fn allgather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.hub.data.lock().unwrap_or_else(|p| p.into_inner())[self.rank] = data.to_vec();
        self.hub.barrier.wait();
        let all = self.hub.data.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.hub.barrier.wait();
        Ok(all)
    }
    fn barrier(&self) -> Result<()> {
        self.hub.barrier.wait();
        Ok(())
    }
    fn allgather_local_fds(&self, fd: BorrowedFd<'_>) -> Result<Vec<Option<OwnedFd>>> {
        self.hub.fds.lock().unwrap_or_else(|p| p.into_inner())[self.rank] = Some(fd.try_clone_to_owned().unwrap());
        self.hub.barrier.wait();
        let node = self.node_view();
        let out = {
            let fds = self.hub.fds.lock().unwrap_or_else(|p| p.into_inner());
            node.local_pes
                .iter()
                .map(|&p| (p != self.rank).then(|| fds[p].as_ref().unwrap().try_clone().unwrap()))
                .collect()
        };
        self.hub.barrier.wait();
        Ok(out)
    }
}

/// Runs `body` on one thread per PE (PE `p` on host `node_of[p]`) and returns each result.
fn run<T: Send>(node_of: &[usize], body: impl Fn(&ThreadPe) -> T + Sync) -> Vec<T> {
    let n = node_of.len();
    let hub = Arc::new(Hub {
        node_of: node_of.to_vec(),
        barrier: Barrier::new(n),
        data: Mutex::new(vec![Vec::new(); n]),
        fds: Mutex::new((0..n).map(|_| None).collect()),
    });
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let pe = ThreadPe { rank, hub: hub.clone() };
                let body = &body;
                s.spawn(move || body(&pe))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn heap(pe: &ThreadPe, bound: usize, growth: usize) -> SymmetricHeap {
    SymmetricHeap::new_in(Arc::new(HostMemory::new()), pe, bound, growth).unwrap()
}

fn set(h: &SymmetricHeap, addr: usize, v: u64) {
    // SAFETY: tests only pass addresses inside mapped heap memory (checked by translate).
    unsafe { h.backend().atomic(addr, Width::W64, AmoOp::Set(v)) }.unwrap();
}

fn get(h: &SymmetricHeap, addr: usize) -> u64 {
    // SAFETY: as in `set`.
    unsafe { h.backend().load_acquire(addr, Width::W64) }.unwrap()
}

#[test]
fn a_write_into_a_peer_copy_is_seen_by_the_peer() {
    let seen = run(&[0, 0, 0], |pe| {
        let h = heap(pe, 64 * MIB, MIB);
        let x = h.malloc_in(pe, 4096, 0).unwrap();
        assert_eq!(x - h.my_base(), 0);
        let right = (pe.rank + 1) % 3;
        set(&h, h.translate(x, 8, right).unwrap() + 8 * pe.rank, 100 + pe.rank as u64);
        pe.barrier().unwrap();
        (0..3).map(|i| get(&h, x + 8 * i)).collect::<Vec<_>>()
    });
    assert_eq!(seen[0], [0, 0, 102]);
    assert_eq!(seen[1], [100, 0, 0]);
    assert_eq!(seen[2], [0, 101, 0]);
}

#[test]
fn growth_keeps_data_and_peer_views() {
    let sizes: Vec<usize> = (0..10).map(|i| 1024 << (2 * i).min(17)).collect();
    let ok = run(&[0, 0], |pe| {
        let h = heap(pe, 512 * MIB, 64 << 10);
        let mut blocks = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let x = h.malloc_in(pe, size, 0).unwrap();
            let tag = |k: u64| ((pe.rank as u64) << 32) | (i as u64) << 8 | k;
            set(&h, x, tag(1));
            set(&h, x + size - 8, tag(2));
            blocks.push((x, size, tag(1), tag(2)));
        }
        assert!(h.mapped() >= sizes.iter().sum::<usize>() && h.in_use() == sizes.iter().sum::<usize>());
        pe.barrier().unwrap();
        let other = 1 - pe.rank;
        blocks.iter().all(|&(x, size, a, b)| {
            let (pa, pb) = (h.translate(x, 8, other).unwrap(), h.translate(x + size - 8, 8, other).unwrap());
            let flip = |t: u64| t ^ (1 << 32);
            get(&h, x) == a && get(&h, x + size - 8) == b && get(&h, pa) == flip(a) && get(&h, pb) == flip(b)
        })
    });
    assert_eq!(ok, [true, true]);
}

#[test]
fn mismatched_sizes_fail_on_every_pe() {
    let errs = run(&[0, 0, 0], |pe| {
        let h = heap(pe, 64 * MIB, MIB);
        let size = if pe.rank == 2 { 2048 } else { 1024 };
        let e = h.malloc_in(pe, size, 0).unwrap_err();
        // The heap stays usable and in step after the failed call.
        let x = h.malloc_in(pe, 512, 0).unwrap() - h.my_base();
        (e, x)
    });
    for (me, (e, x)) in errs.iter().enumerate() {
        match e {
            Error::Mismatch { what, me: m, pe, mine, theirs } => {
                assert_eq!((*what, *m), ("malloc size", me));
                let want_pe = if me == 2 { 0 } else { 2 };
                assert_eq!(*pe, want_pe, "{e}");
                assert_ne!(mine, theirs);
            }
            other => panic!("PE {me}: expected Mismatch, got {other}"),
        }
        assert_eq!(*x, 0);
    }
}

#[test]
fn the_bound_gives_heap_exhausted_everywhere_and_nothing_breaks() {
    let out = run(&[0, 0], |pe| {
        let h = heap(pe, 8 * MIB, 2 * MIB);
        let a = h.malloc_in(pe, 6 * MIB, 0).unwrap();
        let e = h.malloc_in(pe, 3 * MIB, 0).unwrap_err();
        let b = h.malloc_in(pe, MIB, 0).unwrap();
        h.free_in(pe, a).unwrap();
        let c = h.malloc_in(pe, 6 * MIB, 0).unwrap();
        (e, b - h.my_base(), c - h.my_base(), h.mapped())
    });
    for (e, b, c, mapped) in out {
        assert!(matches!(e, Error::HeapExhausted { requested, in_use, bound } if requested == 3 * MIB && in_use == 6 * MIB && bound == 8 * MIB), "{e}");
        assert_eq!((b, c, mapped), (6 * MIB, 0, 8 * MIB));
    }
}

#[test]
fn translate_and_ptr_errors() {
    // PEs 0, 1 on host 0; PEs 2, 3 on host 1.
    let out = run(&[0, 0, 1, 1], |pe| {
        let h = heap(pe, 16 * MIB, MIB);
        let x = h.malloc_in(pe, 4096, 0).unwrap();
        let local = pe.rank ^ 1;
        let remote = (pe.rank + 2) % 4;
        assert_eq!(h.translate(x, 4096, pe.rank).unwrap(), x);
        assert_eq!(h.ptr(x + 16, local), Some(h.slot_base(local).unwrap() + 16));
        assert_eq!(h.ptr(x, remote), None);
        assert_eq!(h.slot_base(remote), None);
        let outside = h.my_base() + h.mapped();
        assert_eq!(h.ptr(outside, local), None);
        let r = [
            h.translate(x, 8, 4).unwrap_err(),
            h.translate(outside - 4, 8, local).unwrap_err(),
            h.translate(x, 8, remote).unwrap_err(),
        ];
        r.map(|e| e.to_string())
    });
    for (me, [range, sym, remote]) in out.iter().enumerate() {
        assert!(range.contains("PE 4 is out of range") && range.contains("4 PEs"), "{range}");
        assert!(sym.contains("is not inside the symmetric heap"), "{sym}");
        assert!(remote.starts_with("not supported") && remote.contains(&format!("PE {}", (me + 2) % 4)), "{remote}");
    }
}

#[test]
fn allocation_record_and_user_checks() {
    use super::Owner;
    let out = run(&[0, 0], |pe| {
        let h = heap(pe, 16 * MIB, MIB);
        let runtime = h.malloc_in(pe, 512, 0).unwrap();
        h.set_owner(runtime, Owner::Runtime).unwrap();
        let x = h.malloc_in(pe, 1000, 0).unwrap();
        let a = h.allocation_of(x + 999).unwrap();
        assert_eq!((a.pe, a.base, a.offset, a.len, a.owner), (pe.rank, x, 512, 1000, Owner::User));
        let peer = h.allocation_of(h.slot_base(1 - pe.rank).unwrap() + 512 + 3).unwrap();
        assert_eq!((peer.pe, peer.offset, peer.id), (1 - pe.rank, 512, a.id));
        assert_eq!(h.allocation_of(x + 1000), None, "past the requested bytes");
        h.check_user(x, 1000).unwrap();
        h.check_user(x + 10, 8).unwrap(); // the cached answer
        let errors = [
            h.check_user(x + 996, 8).unwrap_err(),
            h.check_user(runtime, 8).unwrap_err(),
            h.check_user(h.my_base() + h.mapped(), 8).unwrap_err(),
            h.free_in(pe, runtime).unwrap_err(),
        ];
        h.free_in(pe, x).unwrap();
        let freed = h.check_user(x + 10, 8).unwrap_err(); // the cache must not answer now
        let y = h.malloc_in(pe, 1000, 0).unwrap();
        let reused = h.allocation_of(y).unwrap();
        assert_eq!((y, reused.offset), (x, 512));
        assert_ne!(reused.id, a.id, "a new allocation at the same offset has a new id");
        h.free_runtime_in(pe, runtime).unwrap();
        (errors.map(|e| e.to_string()), freed.to_string())
    });
    for ([past, runtime, outside, free_rt], freed) in out {
        assert!(past.contains("runs past the end of the 1000-byte allocation at heap offset 512"), "{past}");
        assert!(runtime.contains("runtime's own words"), "{runtime}");
        assert!(outside.contains("is not inside the symmetric heap"), "{outside}");
        assert!(free_rt.contains("only finalize frees"), "{free_rt}");
        assert!(freed.contains("heap offset 522 is in no live allocation"), "{freed}");
    }
}

#[test]
fn free_checks_and_calloc_zeroes_reused_memory() {
    let out = run(&[0, 0], |pe| {
        let h = heap(pe, 16 * MIB, MIB);
        let x = h.malloc_in(pe, 1000, 0).unwrap();
        set(&h, x + 512, 77);
        let interior = h.free_in(pe, x + 256).unwrap_err();
        let one_sided = h.free_in(pe, if pe.rank == 0 { x } else { 0 }).unwrap_err();
        h.free_in(pe, 0).unwrap();
        assert_eq!(h.describe(x + 520), "allocation of 1000 bytes at heap offset 0, +520");
        let peer = h.slot_base(1 - pe.rank).unwrap();
        assert_eq!(h.describe(peer + 8), format!("PE {}'s copy of allocation of 1000 bytes at heap offset 0, +8", 1 - pe.rank));
        h.free_in(pe, x).unwrap();
        assert_eq!((h.in_use(), h.describe(x)), (0, "heap offset 0 (no live allocation)".to_string()));
        let y = h.calloc_in(pe, 125, 8).unwrap();
        let zero = get(&h, y + 512);
        let overflow = h.calloc_in(pe, usize::MAX, 2).unwrap_err();
        let unknown = h.free_in(pe, x + 4096).unwrap_err();
        (y == x, zero, [interior, one_sided, overflow, unknown].map(|e| e.to_string()))
    });
    for (me, (same, zero, [interior, one_sided, overflow, unknown])) in out.into_iter().enumerate() {
        assert!(same && zero == 0);
        assert!(interior.contains("256 bytes into the allocation"), "{interior}");
        assert!(one_sided.contains("freed address") && one_sided.contains(&format!("PE {}", 1 - me)), "{one_sided}");
        assert!(one_sided.contains("a null pointer") && one_sided.contains("heap offset 0"), "{one_sided}");
        assert!(overflow.contains("overflows"), "{overflow}");
        assert!(unknown.contains("not in the symmetric heap") || unknown.contains("not the start"), "{unknown}");
    }
}

#[test]
fn different_bounds_are_a_mismatch() {
    let out = run(&[0, 0], |pe| {
        SymmetricHeap::new_in(Arc::new(HostMemory::new()), pe, (16 + 16 * pe.rank) * MIB, MIB).map(|_| ())
    });
    for r in out {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("RSHMEM_SYMMETRIC_SIZE"), "{e}");
    }
}

/// A host backend that refuses chunks larger than `max` (to make one PE fail a growth step), and
/// that adopts the "program's buffers" of [`Stingy::program_buffer`] as a GPU backend adopts a
/// `cuMemCreate` allocation: the same memory, mapped a second time.
struct Stingy {
    inner: HostMemory,
    max: usize,
    /// The program's buffers: (its address, the memory, its own mapping, its own addresses).
    buffers: Mutex<Vec<ProgramBuffer>>,
}

type ProgramBuffer = (usize, Box<dyn crate::backend::Chunk>, Box<dyn crate::backend::Mapping>, Box<dyn crate::backend::Reservation>);

impl Stingy {
    fn new(max: usize) -> Stingy {
        Stingy { inner: HostMemory::new(), max, buffers: Mutex::default() }
    }

    /// `len` bytes the program maps itself, outside the heap; returns their address.
    fn program_buffer(&self, len: usize) -> usize {
        let range = self.inner.reserve(len).unwrap();
        let chunk = self.inner.create_chunk(len).unwrap();
        let mapping = chunk.map_at(range.base()).unwrap();
        let addr = range.base();
        self.buffers.lock().unwrap().push((addr, chunk, mapping, range));
        addr
    }
}

impl crate::backend::MemoryBackend for Stingy {
    fn kind(&self) -> crate::backend::BackendKind {
        self.inner.kind()
    }
    fn granularity(&self) -> usize {
        self.inner.granularity()
    }
    fn reserve(&self, len: usize) -> Result<Box<dyn crate::backend::Reservation>> {
        self.inner.reserve(len)
    }
    fn create_chunk(&self, len: usize) -> Result<Box<dyn crate::backend::Chunk>> {
        if len > self.max {
            return Err(Error::Unsupported(format!("test backend refuses a {len}-byte chunk")));
        }
        self.inner.create_chunk(len)
    }
    fn import_chunk(&self, fd: OwnedFd, len: usize) -> Result<Box<dyn crate::backend::Chunk>> {
        self.inner.import_chunk(fd, len)
    }
    fn adopt_chunk(&self, addr: usize, len: usize) -> Result<Box<dyn crate::backend::Chunk>> {
        let buffers = self.buffers.lock().unwrap();
        let Some((_, chunk, _, _)) = buffers.iter().find(|b| b.0 == addr) else {
            return Err(Error::InvalidArgument(format!("no program buffer at {addr:#x}")));
        };
        if chunk.len() != len {
            return Err(Error::InvalidArgument(format!("the buffer at {addr:#x} has {} bytes, not {len}", chunk.len())));
        }
        self.inner.import_chunk(chunk.export_fd()?, len)
    }
    unsafe fn copy(&self, dst: usize, src: usize, len: usize) -> Result<()> {
        // SAFETY: same contract.
        unsafe { self.inner.copy(dst, src, len) }
    }
    unsafe fn atomic(&self, addr: usize, width: Width, op: AmoOp) -> Result<u64> {
        // SAFETY: same contract.
        unsafe { self.inner.atomic(addr, width, op) }
    }
    unsafe fn load_acquire(&self, addr: usize, width: Width) -> Result<u64> {
        // SAFETY: same contract.
        unsafe { self.inner.load_acquire(addr, width) }
    }
    fn quiet(&self) -> Result<()> {
        self.inner.quiet()
    }
}

#[test]
fn a_growth_step_failing_on_one_pe_fails_on_all_and_leaves_the_heap_as_it_was() {
    let out = run(&[0, 0, 0], |pe| {
        let max = if pe.rank == 1 { 2 * MIB } else { usize::MAX };
        let backend = Arc::new(Stingy::new(max));
        let h = SymmetricHeap::new_in(backend, pe, 64 * MIB, MIB).unwrap();
        let x = h.malloc_in(pe, MIB, 0).unwrap();
        set(&h, h.translate(x, 8, (pe.rank + 1) % 3).unwrap(), 5 + pe.rank as u64);
        let e = h.malloc_in(pe, 8 * MIB, 0).unwrap_err().to_string();
        let after = (h.mapped(), h.in_use());
        // The heap still grows by steps the stingy PE accepts, and old data is intact.
        let y = h.malloc_in(pe, MIB + 4096, 0).unwrap();
        pe.barrier().unwrap();
        (e, after, y - x, get(&h, x), h.mapped())
    });
    for (me, (e, after, dy, seen, mapped)) in out.into_iter().enumerate() {
        // PE 1 reports its own error; the others name PE 1 and quote it.
        assert!((me == 1 || e.contains("on PE 1")) && e.contains("refuses a 8388608-byte chunk"), "PE {me}: {e}");
        assert_eq!(after, (MIB, MIB));
        assert_eq!((dy, mapped), (MIB, 2 * MIB + 4096), "grown by exactly what the request needs");
        assert_eq!(seen, 5 + ((me + 2) % 3) as u64);
    }
}

#[test]
fn the_heap_is_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<SymmetricHeap>();
    shareable::<HostMemory>();
}

#[test]
fn a_registered_buffer_is_symmetric_and_its_place_is_reused_after_unregistering() {
    let out = run(&[0, 0, 0], |pe| {
        let backend = Arc::new(Stingy::new(usize::MAX));
        let h = SymmetricHeap::new_in(backend.clone(), pe, 64 * MIB, MIB).unwrap();
        let gran = backend.granularity();
        let x = h.malloc_in(pe, 4096, 0).unwrap();
        let (mapped0, in_use0) = (h.mapped(), h.in_use());
        let buf = backend.program_buffer(2 * gran);
        let reg = h.register_in(pe, buf, 2 * gran).unwrap();
        // PE p writes into the next PE's copy; each reads it through its own address of the buffer.
        let next = (pe.rank + 1) % 3;
        set(&h, h.translate(reg + 8, 8, next).unwrap(), 100 + pe.rank as u64);
        pe.barrier().unwrap();
        let seen = get(&h, buf + 8);
        let checks = (h.check_user(reg, 2 * gran).is_ok(), h.describe(reg + 8));
        let free = h.free_in(pe, reg).unwrap_err().to_string();
        let small = h.malloc_in(pe, 4096, 0).unwrap();
        let wrong = h.unregister_in(pe, reg, gran).unwrap_err().to_string();
        let stray = h.unregister_in(pe, x, 4096).unwrap_err().to_string();
        pe.barrier().unwrap();
        h.unregister_in(pe, reg, 2 * gran).unwrap();
        let gone = (h.check_user(reg, 8).is_err(), h.unregister_in(pe, reg, 2 * gran).is_err());
        // A later malloc never lands in the hole; a later registration fills it.
        let big = h.malloc_in(pe, 3 * gran, 0).unwrap();
        let again = h.register_in(pe, buf, 2 * gran).unwrap();
        let kept = get(&h, again + 8);
        let other = backend.program_buffer(gran);
        let mismatch = h.register_in(pe, other, if pe.rank == 2 { 2 * gran } else { gran }).unwrap_err().to_string();
        pe.barrier().unwrap();
        (reg - x, mapped0, in_use0, seen, checks, free, small, wrong, stray, gone, big, again == reg, kept, mismatch, h.mapped())
    });
    for (me, (at, mapped0, in_use0, seen, checks, free, small, wrong, stray, gone, big, same, kept, mismatch, mapped)) in out.into_iter().enumerate() {
        let gran = HostMemory::new().granularity();
        assert_eq!(at, mapped0, "PE {me}: the buffer goes at the end of the mapped part");
        assert_eq!(in_use0, 4096);
        assert_eq!(seen, 100 + ((me + 2) % 3) as u64, "PE {me} sees its left neighbour's write through its own address");
        assert!(checks.0 && checks.1.contains(&format!("allocation of {} bytes", 2 * gran)), "{checks:?}");
        assert!(free.contains("nvshmemx_buffer_unregister_symmetric"), "{free}");
        assert!(small < mapped0 + big, "a malloc still finds room below: {small:#x}");
        assert!(wrong.contains("registered there has"), "{wrong}");
        assert!(stray.contains("not an address nvshmemx_buffer_register_symmetric returned"), "{stray}");
        assert_eq!(gone, (true, true));
        assert!(big >= mapped0 + 2 * gran || big + 3 * gran <= mapped0, "malloc used the hole: {big:#x}");
        assert!(same, "PE {me}: the registration went back into the hole");
        assert_eq!(kept, 100 + ((me + 2) % 3) as u64, "the program's memory kept its bytes while unregistered");
        assert!(mismatch.contains("registered size") && mismatch.contains("PE"), "{mismatch}");
        assert!(mapped >= mapped0 + 2 * gran);
    }
}

#[test]
fn the_host_backend_refuses_to_register_a_buffer_on_every_pe() {
    let out = run(&[0, 0], |pe| {
        let h = heap(pe, 64 * MIB, MIB);
        let gran = h.backend().granularity();
        let local = vec![0u8; gran];
        let e = h.register_in(pe, local.as_ptr() as usize, gran).unwrap_err().to_string();
        let odd = h.register_in(pe, local.as_ptr() as usize, gran + 1).unwrap_err().to_string();
        (e, odd, h.malloc_in(pe, 64, 0).is_ok())
    });
    for (e, odd, after) in out {
        assert!(e.contains("host backend") && e.contains("cuMemCreate"), "{e}");
        assert!(odd.contains("multiple of the allocation granularity"), "{odd}");
        assert!(after);
    }
}
