//! What the runtime holds of the transport: the [`Net`] and, where device code posts work for
//! PEs on other hosts, its [`Proxy`]; together they are the runtime's [`Transport`].

use super::proxy::Proxy;
use super::Net;
use crate::backend::{AmoOp, Backend, Transport, Width};
use crate::bootstrap::Bootstrap;
use crate::consts::SignalOp;
use crate::device_state::ProxyDesc;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::heap::agree::all_ok;
use crate::heap::{GrowHook, SymmetricHeap};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// Opens the transport when the job's PEs sit on more than one host (virtual hosts included);
/// `None` when every PE is node-local. Collective over all PEs. Before the heap's first
/// allocation: every growth step of `heap` from here on is registered with the network. The
/// proxy runs where `RSHMEM_NET_PROXY` asks for it, by default where `backend` has a device.
///
/// # Errors
/// What [`Net::open`] returns: [`Error::Unsupported`] naming the remote PEs when UCX is missing,
/// [`Error::Transport`], bootstrap errors; the first PE's error in starting its proxy.
pub fn open(boot: &Bootstrap, heap: &SymmetricHeap, backend: &dyn Backend, env: &Env) -> Result<Option<Box<dyn Transport>>> {
    let node_of = &boot.node().node_of;
    let mine = node_of[boot.rank()];
    let remote: Vec<bool> = node_of.iter().map(|&n| n != mine).collect();
    if !remote.iter().any(|&r| r) {
        return Ok(None);
    }
    let net = Arc::new(Net::open(
        boot,
        &remote,
        heap.my_base(),
        backend.memory(),
        backend.device().is_none(),
        env.net_target_atomics,
        backend.thread_setup(),
        env.bootstrap_timeout,
    )?);
    heap.set_grow_hook(Some(net.clone() as Arc<dyn GrowHook>));
    let proxy = if env.net_proxy.unwrap_or(backend.device().is_some()) {
        let started = backend.ring_memory().and_then(|ring| Proxy::start(net.clone(), ring, boot.rank()));
        let (mine, proxy) = match started {
            Ok(p) => (Ok(()), Some(p)),
            Err(e) => (Err(e), None),
        };
        all_ok(boot, mine, "starting the proxy")?;
        proxy
    } else {
        None
    };
    Ok(Some(Box::new(Link { proxy, net })))
}

/// The open transport. Field order is drop order: the proxy stops before the network it uses.
#[derive(Debug)]
struct Link {
    proxy: Option<Proxy>,
    net: Arc<Net>,
}

#[allow(unsafe_code)]
impl Transport for Link {
    fn reaches(&self, pe: usize) -> bool {
        self.net.reaches(pe)
    }

    unsafe fn put(&self, pe: usize, offset: usize, src: usize, nbytes: usize) -> Result<()> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.net.put(pe, offset, src, nbytes) }
    }

    unsafe fn put_nbi(&self, pe: usize, offset: usize, src: usize, nbytes: usize) -> Result<()> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.net.put_nbi(pe, offset, src, nbytes) }
    }

    unsafe fn get(&self, pe: usize, offset: usize, dst: usize, nbytes: usize) -> Result<()> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.net.get(pe, offset, dst, nbytes) }
    }

    fn atomic(&self, pe: usize, offset: usize, width: Width, op: AmoOp) -> Result<u64> {
        self.net.atomic(pe, offset, width, op)
    }

    fn atomic_post(&self, pe: usize, offset: usize, width: Width, op: AmoOp) -> Result<()> {
        self.net.atomic_post(pe, offset, width, op)
    }

    unsafe fn put_signal(&self, pe: usize, dest: usize, src: usize, nbytes: usize, sig: usize, value: u64, op: SignalOp) -> Result<()> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.net.put_signal(pe, dest, src, nbytes, sig, value, op) }
    }

    fn quiet(&self) -> Result<()> {
        self.net.quiet()
    }

    fn progress(&self, spinning: bool) {
        self.net.progress(spinning)
    }

    fn proxy_ring(&self) -> Option<usize> {
        self.proxy.as_ref().map(Proxy::ring)
    }

    fn proxy_error(&self) -> Option<Error> {
        self.proxy.as_ref().and_then(Proxy::error)
    }

    unsafe fn proxy_post(&self, head: &AtomicU64, d: ProxyDesc, timeout: Duration) -> Result<u64> {
        let proxy = self.proxy.as_ref().ok_or_else(|| Error::Unsupported("this PE runs no proxy".into()))?;
        // SAFETY: the caller's promise, passed on.
        unsafe { proxy.post(head, d, timeout) }
    }
}
