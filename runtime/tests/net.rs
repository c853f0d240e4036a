//! The network transport (UCX) on one machine: PEs in virtual hosts (`RSHMEM_VIRTUAL_HOSTS`),
//! so every PE on the other virtual host is reached only through UCX, over TCP on loopback.
//!
//! UCX must be loadable (`RSHMEM_UCX_DIR` or the loader path; `.ci/run` points at the
//! `libucx-cu12` wheel of the venv). Without it these tests fail under CI and say so elsewhere.
//! The rest of the host API over the transport is `host_api.rs`, `collectives.rs` and
//! `teams.rs` run again with `RSHMEM_VIRTUAL_HOSTS=2` (`.ci/run`).

mod common;

use common::{Exit, Pes};
use rshmem::backend::{AmoOp, Width};
use rshmem::consts::{Cmp, SignalOp};
use rshmem::device_state::{
    ProxyDesc, AMO_ADD, AMO_COMPARE_SWAP, AMO_FETCH, PROXY_AMO, PROXY_FLAG_FETCH, PROXY_GET, PROXY_PUT,
    PROXY_PUT_INLINE, PROXY_PUT_SIGNAL, PROXY_QUIET, PROXY_SLOTS,
};
use rshmem::runtime::{InitOptions, Runtime};
use std::time::{Duration, Instant};

/// The variables of a job of `n` PEs in `hosts` virtual hosts, UCX over TCP on loopback only.
fn vhosts(name: &'static str, n: usize, hosts: usize) -> Option<Pes> {
    if !rshmem::transport::ucx::available() && Pes::child_pe().is_none() {
        assert!(std::env::var_os("CI").is_none(), "UCX is not loadable (set RSHMEM_UCX_DIR): {}", rshmem::transport::ucx::api().unwrap_err());
        eprintln!("{name}: UCX not found; not run (set RSHMEM_UCX_DIR)");
        return None;
    }
    Some(
        Pes::new(name, n)
            .env("RSHMEM_VIRTUAL_HOSTS", &hosts.to_string())
            .env("UCX_TLS", "tcp,self")
            .env("UCX_NET_DEVICES", "lo")
            .env("UCX_WARN_UNUSED_ENV_VARS", "n"),
    )
}

fn init() -> Runtime {
    Runtime::init(InitOptions::default()).expect("init")
}

#[test]
fn rma_atomics_and_signals_cross_virtual_hosts() {
    rma_atomics_and_signals("rma_atomics_and_signals_cross_virtual_hosts", false);
}

/// The same through the path a GPU heap takes: every atomic and put-with-signal is an active
/// message that the target's runtime runs with its backend's atomics (`RSHMEM_NET_TARGET_ATOMICS`).
#[test]
fn rma_atomics_and_signals_run_by_the_target_runtime() {
    rma_atomics_and_signals("rma_atomics_and_signals_run_by_the_target_runtime", true);
}

fn rma_atomics_and_signals(name: &'static str, target_atomics: bool) {
    let Some(pes) = vhosts(name, 4, 2) else { return };
    pes.env("RSHMEM_NET_TARGET_ATOMICS", if target_atomics { "1" } else { "0" }).run(|pe, n| {
        let rt = init();
        let far = (pe + 2) % n;
        assert!(rt.ptr(rt.malloc(8).unwrap(), far).unwrap().is_none(), "no pointer to a PE on another host");
        assert!(rt.ptr(rt.malloc(8).unwrap(), pe ^ 1).unwrap().is_some(), "node-local peers stay mapped");
        // 1 MiB put / get of a pattern, across the heap's first growth step.
        let len = 1 << 20;
        let buf = rt.malloc(len).unwrap();
        let src: Vec<u8> = (0..len).map(|i| (i * 7 + pe) as u8).collect();
        // SAFETY: `src` is a live buffer of `len` bytes.
        unsafe { rt.putmem(buf, src.as_ptr() as usize, len, far) }.unwrap();
        rt.barrier_all().unwrap();
        let mut back = vec![0u8; len];
        // SAFETY: `back` is ours, `len` bytes.
        unsafe { rt.getmem(back.as_mut_ptr() as usize, buf, len, pe) }.unwrap();
        let from = (pe + n - 2) % n;
        assert!(back.iter().enumerate().all(|(i, &b)| b == (i * 7 + from) as u8), "PE {pe}: data from PE {from}");
        // SAFETY: as above.
        unsafe { rt.getmem(back.as_mut_ptr() as usize, buf, len, far) }.unwrap();
        assert!(back.iter().enumerate().all(|(i, &b)| b == (i * 7 + pe) as u8), "PE {pe}: get from PE {far}");
        // Atomics: every PE adds to PE 0's and PE 3's counters; compare-swap; 32-bit words.
        let words = rt.calloc(4, 8).unwrap();
        rt.barrier_all().unwrap();
        for target in [0, 3] {
            rt.atomic(words, Width::W64, AmoOp::Add(pe as u64 + 1), target).unwrap();
            rt.atomic(words + 8, Width::W32, AmoOp::Add(u64::MAX), target).unwrap();
        }
        rt.barrier_all().unwrap();
        for target in [0, 3] {
            assert_eq!(rt.atomic(words, Width::W64, AmoOp::Fetch, target).unwrap(), 10);
            assert_eq!(rt.atomic(words + 8, Width::W32, AmoOp::Fetch, target).unwrap(), 0xffff_fffc);
        }
        rt.barrier_all().unwrap();
        let won = rt.atomic(words + 16, Width::W64, AmoOp::CompareSwap { cond: 0, value: pe as u64 + 1 }, 1).unwrap() == 0;
        let wins = rt.calloc(1, 8).unwrap();
        if won {
            rt.atomic(wins, Width::W64, AmoOp::Add(1), 2).unwrap();
        }
        rt.barrier_all().unwrap();
        assert_eq!(rt.atomic(wins, Width::W64, AmoOp::Fetch, 2).unwrap(), 1, "exactly one compare-swap wins");
        // Put with signal, small (one message) and large (put, flush, atomic).
        let sig = rt.calloc(1, 8).unwrap();
        for (round, size) in [(1u64, 4096usize), (2, 512 << 10)] {
            let data: Vec<u8> = (0..size).map(|i| (i as u64 * round + pe as u64) as u8).collect();
            // SAFETY: `data` is a live buffer of `size` bytes.
            unsafe { rt.putmem_signal(buf, data.as_ptr() as usize, size, sig, 1, SignalOp::Add, far) }.unwrap();
            assert_eq!(rt.signal_wait_until(sig, Cmp::Ge, round).unwrap(), round);
            let mut got = vec![0u8; size];
            // SAFETY: `got` is ours.
            unsafe { rt.getmem(got.as_mut_ptr() as usize, buf, size, pe) }.unwrap();
            assert!(got.iter().enumerate().all(|(i, &b)| b == (i as u64 * round + from as u64) as u8), "round {round}");
            rt.barrier_all().unwrap();
        }
        // Many small puts in a row (staged: more than the bounce buffers in flight), then quiet.
        let k = 300usize;
        for i in 0..k {
            let chunk = [(i as u8) ^ (pe as u8); 1024];
            // SAFETY: `chunk` is a live buffer of 1 KiB, reusable once the put returns.
            unsafe { rt.putmem(buf + i * 1024, chunk.as_ptr() as usize, 1024, far) }.unwrap();
        }
        rt.quiet().unwrap();
        rt.barrier_all().unwrap();
        let mut got = vec![0u8; k * 1024];
        // SAFETY: `got` is ours.
        unsafe { rt.getmem(got.as_mut_ptr() as usize, buf, k * 1024, pe) }.unwrap();
        assert!(got.chunks(1024).enumerate().all(|(i, c)| c.iter().all(|&b| b == (i as u8) ^ (from as u8))), "PE {pe}: staged puts");
        rt.barrier_all().unwrap();
        // Blocking puts past the staged size return once the source may be reused: their
        // source is overwritten at once (a head sent from it, a tail sent from a copy).
        for (round, size) in [(1usize, (64 << 10) + 1), (2, 200 << 10), (3, (1 << 20) - 3)] {
            let pattern = |i: usize| (i * 13 + round * 3 + pe) as u8;
            let mut src: Vec<u8> = (0..size).map(pattern).collect();
            // SAFETY: `src` is a live buffer of `size` bytes.
            unsafe { rt.putmem(buf, src.as_ptr() as usize, size, far) }.unwrap();
            src.fill(0xee);
            rt.barrier_all().unwrap();
            let mut got = vec![0u8; size];
            // SAFETY: `got` is ours.
            unsafe { rt.getmem(got.as_mut_ptr() as usize, buf, size, pe) }.unwrap();
            let want = |i: usize| (i * 13 + round * 3 + from) as u8;
            assert!(got.iter().enumerate().all(|(i, &b)| b == want(i)), "PE {pe}: a {size}-byte put's source reused at once");
            rt.barrier_all().unwrap();
        }
        // Non-blocking puts, more than the transport keeps in flight, complete at quiet.
        let (count, each) = (40usize, 96usize << 10);
        let many = rt.malloc(count * each).unwrap();
        let src: Vec<u8> = (0..count * each).map(|i| (i / 7 + pe) as u8).collect();
        for k in 0..count {
            // SAFETY: `src` stays unchanged until the quiet below.
            unsafe { rt.putmem_nbi(many + k * each, src.as_ptr() as usize + k * each, each, far) }.unwrap();
        }
        rt.quiet().unwrap();
        rt.barrier_all().unwrap();
        let mut got = vec![0u8; count * each];
        // SAFETY: `got` is ours.
        unsafe { rt.getmem(got.as_mut_ptr() as usize, many, count * each, pe) }.unwrap();
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i / 7 + from) as u8), "PE {pe}: putmem_nbi");
        rt.barrier_all().unwrap();
        // p / g across hosts.
        rt.p::<u16>(buf, 0xbeef, far).unwrap();
        rt.quiet().unwrap();
        assert_eq!(rt.g::<u16>(buf, far).unwrap(), 0xbeef);
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn a_dead_pe_on_the_other_virtual_host_is_reported_to_every_peer() {
    a_dead_pe_is_reported("a_dead_pe_on_the_other_virtual_host_is_reported_to_every_peer", false);
}

/// The same where atomics are run by the target's runtime (a GPU heap's path): waiting for an
/// answer from a dead PE ends too.
#[test]
fn a_dead_pe_is_reported_with_atomics_run_by_the_target() {
    a_dead_pe_is_reported("a_dead_pe_is_reported_with_atomics_run_by_the_target", true);
}

fn a_dead_pe_is_reported(name: &'static str, target_atomics: bool) {
    let Some(pes) = vhosts(name, 4, 2) else { return };
    let target = if target_atomics { "1" } else { "0" };
    pes.env("RSHMEM_NET_TARGET_ATOMICS", target).exit(3, Exit::Any).deadline(Duration::from_secs(60)).run(|pe, _| {
        let rt = init();
        let sig = rt.calloc(1, 8).unwrap();
        rt.barrier_all().unwrap();
        // Every PE leaves the barrier before PE 3 dies (else the barrier itself reports it).
        std::thread::sleep(Duration::from_millis(200));
        if pe == 3 {
            std::process::exit(17);
        }
        let t0 = Instant::now();
        // Nobody signals: the wait must end with the death of PE 3, not hang.
        let err = rt.signal_wait_until(sig, Cmp::Eq, 1).unwrap_err();
        assert!(matches!(err, rshmem::Error::PeerDied { pe: 3, .. }), "PE {pe}: {err}");
        assert!(t0.elapsed() < Duration::from_secs(5), "reported after {:?}", t0.elapsed());
        // Operations towards the dead PE fail too, at once.
        let err = rt.atomic(sig, Width::W64, AmoOp::Add(1), 3).unwrap_err();
        assert!(matches!(err, rshmem::Error::PeerDied { pe: 3, .. }), "PE {pe}: {err}");
        std::process::exit(0);
    });
}

#[test]
fn without_ucx_a_multi_host_job_says_what_is_missing() {
    let Some(pes) = vhosts("without_ucx_a_multi_host_job_says_what_is_missing", 2, 2) else { return };
    pes.env("RSHMEM_UCX_DIR", "/nonexistent/ucx").run(|pe, _| {
        let err = Runtime::init(InitOptions::default()).unwrap_err().to_string();
        assert!(err.contains("reached through UCX") && err.contains("pip install libucx-cu12"), "PE {pe}: {err}");
    });
}

/// A descriptor of `kind` towards `pe`, the rest zero.
fn desc(kind: u8, pe: usize) -> ProxyDesc {
    ProxyDesc { kind, pe: pe as i32, ..ProxyDesc::default() }
}

/// The proxy runs descriptors in the ring exactly as GPU threads post them (the host backend
/// posts from host threads, `RSHMEM_NET_PROXY=1`); the GPU form is tests/device/test_device_proxy.py.
#[test]
fn the_proxy_runs_what_is_posted_for_the_other_virtual_host() {
    proxy_runs_what_is_posted("the_proxy_runs_what_is_posted_for_the_other_virtual_host", false);
}

/// The proxy as on a GPU heap: its atomics and signals are run by the target's runtime.
#[test]
fn the_proxy_runs_what_is_posted_with_atomics_run_by_the_target() {
    proxy_runs_what_is_posted("the_proxy_runs_what_is_posted_with_atomics_run_by_the_target", true);
}

fn proxy_runs_what_is_posted(name: &'static str, target_atomics: bool) {
    let Some(pes) = vhosts(name, 2, 2) else { return };
    let target = if target_atomics { "1" } else { "0" };
    pes.env("RSHMEM_NET_PROXY", "1").env("RSHMEM_NET_TARGET_ATOMICS", target).run(|pe, _| {
        let rt = init();
        let far = 1 - pe;
        let len = 64 << 10;
        let buf = rt.malloc(len).unwrap();
        let words = rt.calloc(8, 8).unwrap();
        rt.barrier_all().unwrap();
        let pattern = |from: usize| (0..len).map(move |i| (i * 13 + from * 101) as u8);
        let src: Vec<u8> = pattern(pe).collect();
        // SAFETY (every post): the buffers named live until the post returns.
        unsafe {
            rt.proxy_post(ProxyDesc { dest: buf.get() as u64, source: src.as_ptr() as u64, nbytes: len as u64, ..desc(PROXY_PUT, far) }).unwrap();
            rt.proxy_post(ProxyDesc { dest: (words + 8).get() as u64, value: 0x1234_5678, nbytes: 4, ..desc(PROXY_PUT_INLINE, far) }).unwrap();
            let amo = |sub: u32, value: u64, value2: u64, fetch: bool| ProxyDesc {
                dest: (words + 16).get() as u64,
                sub: sub as u8,
                width: 8,
                value,
                value2,
                flags: if fetch { PROXY_FLAG_FETCH } else { 0 },
                ..desc(PROXY_AMO, far)
            };
            assert_eq!(rt.proxy_post(amo(AMO_ADD, 5, 0, true)).unwrap(), 0);
            rt.proxy_post(amo(AMO_ADD, 7, 0, false)).unwrap();
            assert_eq!(rt.proxy_post(amo(AMO_COMPARE_SWAP, 12, 40, true)).unwrap(), 12);
            assert_eq!(rt.proxy_post(amo(AMO_FETCH, 0, 0, true)).unwrap(), 40);
            // Put-with-signal: the far PE sees the data once it sees the signal.
            let small: Vec<u8> = (0..100u8).map(|i| i ^ pe as u8).collect();
            rt.proxy_post(ProxyDesc {
                dest: (buf + len - 100).get() as u64,
                source: small.as_ptr() as u64,
                nbytes: 100,
                sig_addr: words.get() as u64,
                sub: rshmem::consts::SIGNAL_ADD as u8,
                value: 1,
                ..desc(PROXY_PUT_SIGNAL, far)
            })
            .unwrap();
            rt.proxy_post(desc(PROXY_QUIET, far)).unwrap();
        }
        assert_eq!(rt.signal_wait_until(words, Cmp::Ge, 1).unwrap(), 1);
        let mut mine = vec![0u8; len];
        // SAFETY: `mine` is ours.
        unsafe { rt.getmem(mine.as_mut_ptr() as usize, buf, len, pe) }.unwrap();
        let expect: Vec<u8> = pattern(far).take(len - 100).chain((0..100u8).map(|i| i ^ far as u8)).collect();
        assert!(mine == expect, "PE {pe}: the data PE {far} posted");
        assert_eq!(rt.g::<u32>(words + 8, pe).unwrap(), 0x1234_5678);
        rt.barrier_all().unwrap();
        // Gets: a block into a local buffer, and a g whose result comes back in the ring.
        let mut back = vec![0u8; len];
        // SAFETY: `back` lives until the post returns.
        unsafe { rt.proxy_post(ProxyDesc { dest: back.as_mut_ptr() as u64, source: buf.get() as u64, nbytes: len as u64, ..desc(PROXY_GET, far) }) }.unwrap();
        assert!(back[..len - 100] == src[..len - 100], "PE {pe}: get from PE {far}");
        let g = ProxyDesc { source: (words + 8).get() as u64, nbytes: 4, flags: PROXY_FLAG_FETCH, ..desc(PROXY_GET, far) };
        // SAFETY: a fetching get names no local buffer.
        assert_eq!(unsafe { rt.proxy_post(g) }.unwrap(), 0x1234_5678);
        // Many threads at once, more descriptors than the ring has slots: every one runs once.
        let per_thread = PROXY_SLOTS as usize / 2 + 37;
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..per_thread {
                        let add = ProxyDesc { dest: (words + 24).get() as u64, sub: AMO_ADD as u8, width: 4, value: 1, ..desc(PROXY_AMO, far) };
                        // SAFETY: no local buffer.
                        unsafe { rt.proxy_post(add) }.unwrap();
                    }
                });
            }
        });
        // SAFETY: no local buffer.
        unsafe { rt.proxy_post(desc(PROXY_QUIET, far)) }.unwrap();
        rt.barrier_all().unwrap();
        assert_eq!(rt.g::<u32>(words + 24, pe).unwrap() as usize, 4 * per_thread, "PE {pe}: 32-bit adds from PE {far}");
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn the_proxy_reports_a_dead_pe_on_the_other_virtual_host() {
    let Some(pes) = vhosts("the_proxy_reports_a_dead_pe_on_the_other_virtual_host", 2, 2) else { return };
    pes.env("RSHMEM_NET_PROXY", "1").exit(1, Exit::Any).deadline(Duration::from_secs(60)).run(|pe, _| {
        let rt = init();
        let words = rt.calloc(1, 8).unwrap();
        rt.barrier_all().unwrap();
        // PE 0 leaves the barrier before PE 1 dies.
        std::thread::sleep(Duration::from_millis(200));
        if pe == 1 {
            std::process::exit(17);
        }
        std::thread::sleep(Duration::from_millis(300));
        let t0 = Instant::now();
        let add = ProxyDesc { dest: words.get() as u64, sub: AMO_ADD as u8, width: 8, value: 1, flags: PROXY_FLAG_FETCH, ..desc(PROXY_AMO, 1) };
        // SAFETY: no local buffer.
        let err = unsafe { rt.proxy_post(add) }.unwrap_err();
        assert!(
            matches!(err, rshmem::Error::PeerDied { pe: 1, .. } | rshmem::Error::Transport { pe: Some(1), .. }),
            "{err}"
        );
        assert!(t0.elapsed() < Duration::from_secs(5), "reported after {:?}", t0.elapsed());
        // The proxy stays stopped: a later post fails at once instead of waiting.
        // SAFETY: as above.
        assert!(unsafe { rt.proxy_post(add) }.is_err());
        std::process::exit(0);
    });
}
