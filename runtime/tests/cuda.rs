//! GPU tests of the cuda backend, the driver layer and device-state publication.
//!
//! They need two GPUs joined by NVLink, or one GPU that the two PEs share under
//! `RSHMEM_ALLOW_SHARED_GPU=1` (one for `device_state_*`), and are `#[ignore]`d; run them on a GPU machine with
//! `cargo test -p rshmem --test cuda -- --ignored --test-threads=1`.
//!
//! The two-PE tests start one process per PE through `common::Pes` with `RSHMEM_BACKEND=cuda`.
//! They do not use the bootstrap: the two processes meet on an abstract Unix socket named
//! after the harness's secret and pass chunk file descriptors with SCM_RIGHTS, exactly what the
//! heap does through the bootstrap.

mod common;

use common::Pes;
use rshmem::consts::SignalOp;
use rshmem::backend::cuda::CudaMemory;
use rshmem::backend::{AmoOp, Chunk, Mapping, MemoryBackend, Reservation, Width};
use rshmem::backend::cuda::{registry, select};
use rshmem::device_state::DeviceState;
use rshmem::driver::context;
use rshmem::driver::module::{self, LoadedModule};
use rshmem::driver::stream::{self, Stream, WaitCmp};
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// A socket between PE 0 and PE 1 of one test.
struct Link {
    sock: UnixStream,
}

impl Link {
    fn open(pe: usize) -> Link {
        let secret = std::env::var("RSHMEM_BOOTSTRAP_SECRET").unwrap();
        let addr = SocketAddr::from_abstract_name(format!("rshmem-cuda-test-{secret}")).unwrap();
        let sock = if pe == 0 {
            let l = UnixListener::bind_addr(&addr).unwrap();
            l.accept().unwrap().0
        } else {
            let start = Instant::now();
            loop {
                match UnixStream::connect_addr(&addr) {
                    Ok(s) => break s,
                    Err(e) if start.elapsed() < Duration::from_secs(30) => {
                        let _ = e;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => panic!("PE 1 could not reach PE 0: {e}"),
                }
            }
        };
        sock.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        Link { sock }
    }

    fn send_u64(&self, v: u64) {
        (&self.sock).write_all(&v.to_le_bytes()).unwrap();
    }

    fn recv_u64(&self) -> u64 {
        let mut b = [0u8; 8];
        (&self.sock).read_exact(&mut b).unwrap();
        u64::from_le_bytes(b)
    }

    fn barrier(&self) {
        self.send_u64(0xba);
        assert_eq!(self.recv_u64(), 0xba, "barrier out of step");
    }

    /// Sends `v` with `fd` attached (SCM_RIGHTS).
    fn send_fd(&self, v: u64, fd: &OwnedFd) {
        let fds = [fd.as_fd()];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut cmsg = rustix::net::SendAncillaryBuffer::new(&mut space);
        assert!(cmsg.push(rustix::net::SendAncillaryMessage::ScmRights(&fds)));
        let bytes = v.to_le_bytes();
        let n = rustix::net::sendmsg(&self.sock, &[IoSlice::new(&bytes)], &mut cmsg, rustix::net::SendFlags::empty())
            .unwrap();
        assert_eq!(n, 8);
    }

    fn recv_fd(&self) -> (u64, OwnedFd) {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut cmsg = rustix::net::RecvAncillaryBuffer::new(&mut space);
        let mut bytes = [0u8; 8];
        let msg = rustix::net::recvmsg(
            &self.sock,
            &mut [IoSliceMut::new(&mut bytes)],
            &mut cmsg,
            rustix::net::RecvFlags::CMSG_CLOEXEC,
        )
        .unwrap();
        assert_eq!(msg.bytes, 8);
        let mut fd = None;
        for m in cmsg.drain() {
            if let rustix::net::RecvAncillaryMessage::ScmRights(mut fds) = m {
                fd = fds.next();
            }
        }
        (u64::from_le_bytes(bytes), fd.expect("no file descriptor arrived"))
    }
}

/// A backend on this PE's GPU, opened to the other PE's GPU, after the same checks the runtime
/// makes (distinct GPUs, peer reachable by load/store).
fn backend(pe: usize, link: &Link) -> CudaMemory {
    assert_eq!(std::env::var("RSHMEM_BACKEND").as_deref(), Ok("cuda"));
    let info = context::init().expect("CUDA driver");
    assert!(info.version >= context::MIN_DRIVER_VERSION);
    // On a machine with one GPU the two PEs share it when the run opts in, as the runtime does.
    let allow = std::env::var("RSHMEM_ALLOW_SHARED_GPU").as_deref() == Ok("1");
    let dev = select::select(select::LocalPlace { rank: pe, size: 2 }, None, allow).unwrap();
    let mine = select::DeviceIdentity::of(dev).unwrap();
    // Exchange identities: uuid bytes as two u64 words, then the ordinal.
    let words = |id: &select::DeviceIdentity| {
        let b = id.to_bytes();
        [u64::from_le_bytes(b[..8].try_into().unwrap()), u64::from_le_bytes(b[8..16].try_into().unwrap()), id.ordinal as u64]
    };
    for w in words(&mine) {
        link.send_u64(w);
    }
    let (w0, w1, ord) = (link.recv_u64(), link.recv_u64(), link.recv_u64());
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(&w0.to_le_bytes());
    uuid[8..].copy_from_slice(&w1.to_le_bytes());
    let theirs = select::DeviceIdentity { uuid, ordinal: ord as u32, pci_bus_id: String::new() };
    let node = vec![(pe, mine.clone()), (1 - pe, theirs.clone())];
    select::check_distinct(&node, pe, allow).expect("each PE on its own GPU (or RSHMEM_ALLOW_SHARED_GPU=1)");
    let reach = select::reachability(dev, &[theirs]).unwrap();
    assert!(reach[0].load_store && reach[0].verified, "GPUs not peer-accessible: {reach:?}");
    CudaMemory::new(dev, &select::access_devices(&reach)).unwrap()
}

/// Each PE's chunk, mapped at slot `pe` of its own reservation, and the peer's chunk, imported
/// and mapped at the other slot.
struct Pair {
    // Field order is drop order: mappings, then chunks, then the reservation.
    _maps: Vec<Box<dyn Mapping>>,
    _chunks: Vec<Box<dyn Chunk>>,
    res: Box<dyn Reservation>,
    len: usize,
}

impl Pair {
    fn new(b: &CudaMemory, link: &Link, pe: usize, want: usize) -> Pair {
        let g = b.granularity();
        let len = want.div_ceil(g) * g;
        let res = b.reserve(2 * len).unwrap();
        let own = b.create_chunk(len).unwrap();
        link.send_fd(len as u64, &own.export_fd().unwrap());
        let (their_len, fd) = link.recv_fd();
        assert_eq!(their_len as usize, len);
        let peer = b.import_chunk(fd, len).unwrap();
        let m_own = own.map_at(res.base() + pe * len).unwrap();
        let m_peer = peer.map_at(res.base() + (1 - pe) * len).unwrap();
        assert_eq!((m_own.len(), m_peer.len()), (len, len));
        // Mapping over a live mapping is refused with a clear error.
        let Err(e) = own.map_at(res.base() + (1 - pe) * len) else { panic!("mapped over a live mapping") };
        let e = e.to_string();
        assert!(e.contains("already mapped"), "{e}");
        Pair { _maps: vec![m_own, m_peer], _chunks: vec![own, peer], res, len }
    }

    fn slot(&self, pe: usize) -> usize {
        self.res.base() + pe * self.len
    }
}

fn put_host(b: &CudaMemory, dst: usize, data: &[u8]) {
    // SAFETY: `dst` is inside a mapped slot (callers stay within `Pair::len`), `data` is a live
    // host slice; they cannot overlap.
    unsafe { b.copy(dst, data.as_ptr() as usize, data.len()).unwrap() }
}

fn get_host(b: &CudaMemory, src: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: as in `put_host`.
    unsafe { b.copy(v.as_mut_ptr() as usize, src, len).unwrap() };
    v
}

fn amo(b: &CudaMemory, addr: usize, w: Width, op: AmoOp) -> u64 {
    // SAFETY: callers pass aligned words inside a mapped slot.
    unsafe { b.atomic(addr, w, op).unwrap() }
}

fn load(b: &CudaMemory, addr: usize) -> u64 {
    // SAFETY: as in `amo`.
    unsafe { b.load_acquire(addr, Width::W64).unwrap() }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn wait_for(b: &CudaMemory, addr: usize, want: u64) {
    let start = Instant::now();
    while load(b, addr) != want {
        assert!(start.elapsed() < Duration::from_secs(30), "word at {addr:#x} never became {want}");
        std::thread::sleep(Duration::from_micros(50));
    }
}

const FLAG: usize = 1 << 20;
const COUNTER64: usize = FLAG + 64;
const COUNTER32: usize = FLAG + 128;

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn two_pes_share_chunks_and_see_each_others_writes_and_atomics() {
    Pes::new("two_pes_share_chunks_and_see_each_others_writes_and_atomics", 2)
        .env("RSHMEM_BACKEND", "cuda")
        .run(|pe, _| {
            let link = Link::open(pe);
            let b = backend(pe, &link);
            let pair = Pair::new(&b, &link, pe, 2 << 20);
            // cuMemCreate memory is not zeroed: each PE clears its own words.
            put_host(&b, pair.slot(pe) + FLAG, &[0u8; 256]);
            link.barrier();

            // PE 0 writes data into PE 1's chunk, then raises PE 1's flag.
            let data = pattern(4096, 7);
            if pe == 0 {
                put_host(&b, pair.slot(1), &data);
                assert_eq!(amo(&b, pair.slot(1) + FLAG, Width::W64, AmoOp::Set(1)), 0);
            } else {
                wait_for(&b, pair.slot(1) + FLAG, 1);
                assert_eq!(get_host(&b, pair.slot(1), 4096), data, "PE 1 does not see PE 0's write");
            }
            link.barrier();

            // Both PEs add into PE 0's counters through their own mappings.
            for _ in 0..500 {
                amo(&b, pair.slot(0) + COUNTER64, Width::W64, AmoOp::Add(1));
                amo(&b, pair.slot(0) + COUNTER32, Width::W32, AmoOp::Add(3));
            }
            link.barrier();
            assert_eq!(amo(&b, pair.slot(0) + COUNTER64, Width::W64, AmoOp::Fetch), 1000);
            assert_eq!(amo(&b, pair.slot(0) + COUNTER32, Width::W32, AmoOp::Fetch), 3000);
            link.barrier();

            if pe == 0 {
                // Every op's result, on own memory, 64 and 32 bits.
                let w = pair.slot(0) + FLAG + 192;
                assert_eq!(amo(&b, w, Width::W64, AmoOp::Set(10)), 0);
                assert_eq!(amo(&b, w, Width::W64, AmoOp::Swap(12)), 10);
                assert_eq!(amo(&b, w, Width::W64, AmoOp::CompareSwap { cond: 5, value: 99 }), 12);
                assert_eq!(amo(&b, w, Width::W64, AmoOp::CompareSwap { cond: 12, value: 0xF0 }), 12);
                assert_eq!(amo(&b, w, Width::W64, AmoOp::And(0x3C)), 0xF0);
                assert_eq!(amo(&b, w, Width::W64, AmoOp::Or(0x101)), 0x30);
                assert_eq!(amo(&b, w, Width::W64, AmoOp::Xor(0x1)), 0x131);
                assert_eq!(amo(&b, w, Width::W64, AmoOp::Add(u64::MAX)), 0x130);
                assert_eq!(load(&b, w), 0x12F);
                let w32 = w + 8;
                assert_eq!(amo(&b, w32, Width::W32, AmoOp::Set(0xFFFF_FFFF)), 0);
                assert_eq!(amo(&b, w32, Width::W32, AmoOp::Add(2)), 0xFFFF_FFFF);
                assert_eq!(amo(&b, w32, Width::W32, AmoOp::Fetch), 1, "32-bit add must wrap");
                // The neighbouring word of a 32-bit op is untouched.
                assert_eq!(amo(&b, w32 + 4, Width::W32, AmoOp::Fetch), 0);
                // SAFETY: refused before anything touches memory (the address is misaligned).
                let e = unsafe { b.atomic(w + 4, Width::W64, AmoOp::Fetch) }.unwrap_err();
                assert!(e.to_string().contains("aligned"), "{e}");
            }
            b.quiet().unwrap();
            link.barrier();
            drop(pair);
            assert!(rshmem::driver::deferred::take().is_none(), "a release failed");
        });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn copies_from_1_byte_to_1_gib_reach_the_peer_both_ways() {
    Pes::new("copies_from_1_byte_to_1_gib_reach_the_peer_both_ways", 2)
        .env("RSHMEM_BACKEND", "cuda")
        .deadline(Duration::from_secs(400))
        .run(|pe, _| {
            let link = Link::open(pe);
            let b = backend(pe, &link);
            let pair = Pair::new(&b, &link, pe, (1 << 30) + (4 << 20));
            let sizes: [(usize, usize); 8] = [
                (1, 0),
                (1, 3),
                (7, 5),
                (4096, 0),
                (65_537, 13),
                (1 << 20, 0),
                ((64 << 20) + 1, 1),
                (1 << 30, 0),
            ];
            for (i, &(n, off)) in sizes.iter().enumerate() {
                let data = pattern(n, i as u64 + 1);
                if pe == 0 {
                    // Put: own chunk -> PE 1's chunk, device to device over the link.
                    put_host(&b, pair.slot(0) + off, &data);
                    // SAFETY: both ranges lie inside mapped slots of `pair.len` bytes.
                    unsafe { b.copy(pair.slot(1) + off, pair.slot(0) + off, n).unwrap() };
                    link.send_u64(n as u64);
                    assert_eq!(link.recv_u64(), 1, "PE 1 saw wrong data for {n} bytes");
                } else {
                    assert_eq!(link.recv_u64(), n as u64);
                    let ok = get_host(&b, pair.slot(1) + off, n) == data;
                    // Get: PE 0's chunk -> own chunk, at another offset.
                    let back = off + 4096;
                    // SAFETY: as above; the ranges are in different chunks.
                    unsafe { b.copy(pair.slot(1) + back, pair.slot(0) + off, n).unwrap() };
                    let ok_get = get_host(&b, pair.slot(1) + back, n) == data;
                    link.send_u64(ok as u64);
                    assert!(ok, "put of {n} bytes from PE 0 arrived wrong");
                    assert!(ok_get, "get of {n} bytes from PE 0 returned wrong data");
                }
            }
            link.barrier();
        });
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn on_stream_put_signal_and_wait_order_data_before_signal() {
    Pes::new("on_stream_put_signal_and_wait_order_data_before_signal", 2)
        .env("RSHMEM_BACKEND", "cuda")
        .run(|pe, _| {
            let link = Link::open(pe);
            let b = backend(pe, &link);
            let pair = Pair::new(&b, &link, pe, 8 << 20);
            put_host(&b, pair.slot(pe) + FLAG, &[0u8; 256]);
            let n = 1 << 20;
            let data = pattern(n, 99);
            if pe == 0 {
                put_host(&b, pair.slot(0), &data);
            }
            link.barrier();
            let s = Stream::new(b.context()).unwrap();
            let ops = b.stream_ops();
            let h = s.handle();
            for round in 1..=20u64 {
                // SAFETY: every address lies inside a mapped slot and the stream is synchronized
                // before the mappings go away.
                unsafe {
                    if pe == 0 {
                        ops.copy(h, pair.slot(1) + 2 * n, pair.slot(0), n).unwrap();
                        ops.signal(h, pair.slot(1) + FLAG, 1, SignalOp::Add).unwrap();
                        // PE 1 answers with SIGNAL_SET of the round number.
                        stream::wait_value64(h, pair.slot(0) + FLAG + 8, round, WaitCmp::Eq).unwrap();
                    } else {
                        stream::wait_value64(h, pair.slot(1) + FLAG, round, WaitCmp::Geq).unwrap();
                        ops.copy(h, pair.slot(1) + 4 * n, pair.slot(1) + 2 * n, n).unwrap();
                        ops.signal(h, pair.slot(0) + FLAG + 8, round, SignalOp::Set).unwrap();
                    }
                }
                s.synchronize().unwrap();
                if pe == 1 {
                    assert_eq!(get_host(&b, pair.slot(1) + 4 * n, n), data, "round {round}: data after signal");
                    put_host(&b, pair.slot(1) + 4 * n, &vec![0u8; n]);
                }
            }
            // PE 0's answer word and PE 1's flag both end at 20.
            assert_eq!(load(&b, pair.slot(pe) + FLAG + 8 * (1 - pe)), 20);
            link.barrier();
        });
}

fn module_with_state_global(bytes: usize) -> String {
    format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n\
         .visible .global .align 8 .b8 rshmemi_device_state_d[{bytes}];\n"
    )
}

#[test]
#[ignore = "needs a GPU: 2 joined by NVLink, or 1 shared with RSHMEM_ALLOW_SHARED_GPU=1"]
fn device_state_is_published_only_into_modules_that_link_the_library() {
    let dev = select::select(select::LocalPlace { rank: 0, size: 1 }, None, true).unwrap();
    let b = CudaMemory::new(dev, &[]).unwrap();
    let ctx = b.context();
    let size = std::mem::size_of::<DeviceState>();
    let with = LoadedModule::load_ptx(ctx, &module_with_state_global(size)).unwrap();
    let wrong = LoadedModule::load_ptx(ctx, &module_with_state_global(size - 8)).unwrap();
    let without = LoadedModule::load_ptx(ctx, ".version 7.0\n.target sm_70\n.address_size 64\n").unwrap();

    let mut state = DeviceState::new(1, 2);
    state.heap_base = 0x7f00_0000_0000;
    // SAFETY: the three modules are loaded in `ctx` and stay loaded until forgotten below.
    unsafe {
        assert!(registry::publish(ctx, with.handle(), &state).unwrap());
        assert!(!registry::publish(ctx, without.handle(), &state).unwrap());
        let e = registry::publish(ctx, wrong.handle(), &state).unwrap_err().to_string();
        assert!(e.contains(&format!("{} bytes", size - 8)), "{e}");
    }
    assert_eq!(registry::modules(), [with.handle()]);

    // Read the global back through the backend's copy.
    // SAFETY: `with` is loaded in the current context.
    let global = unsafe { module::get_global(with.handle(), registry::STATE_SYMBOL) }.unwrap().unwrap();
    assert_eq!(global.size, size);
    let read = get_host(&b, global.addr, size);
    assert_eq!(&read[..4], &rshmem::device_state::DEVICE_STATE_MAGIC.to_le_bytes());
    assert_eq!(&read[8..12], &1i32.to_le_bytes());

    // Re-init writes the new state everywhere; finalize clears it.
    state.my_pe = 0;
    // SAFETY: as above.
    unsafe {
        assert_eq!(registry::republish_all(ctx, &state).unwrap(), 1);
        assert_eq!(&get_host(&b, global.addr, 12)[8..12], &0i32.to_le_bytes());
        assert_eq!(registry::unpublish_all(ctx).unwrap(), 1);
    }
    assert!(get_host(&b, global.addr, size).iter().all(|&x| x == 0));
    assert!(registry::forget(with.handle()));
    assert!(registry::modules().is_empty());
}
