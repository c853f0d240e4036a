//! The transport half of the seam: how the runtime reaches PEs on other hosts.
//!
//! Node-local peers are mapped, so the runtime reaches them through the heap and the backend's
//! memory; a PE on another host has no address here, and every operation towards it goes
//! through a [`Transport`], by heap offset (the address on the peer is its heap base plus the
//! offset). The runtime holds one `Box<dyn Transport>` when the job spans hosts and never names
//! an implementation (`crate::transport` opens the one there is, over UCX).
//!
//! A transport also runs what device code posts for PEs on other hosts (GPU threads cannot use
//! the network): a proxy thread empties a ring of descriptors in [`RingMemory`] the backend
//! provides ([`super::Backend::ring_memory`]).
//!
//! # Safety
//! The data movers take the caller's local buffers as raw addresses, under the contract each
//! `# Safety` states (as the backend's memory accessors do).
#![allow(unsafe_code)]

use super::memory::{AmoOp, Width};
use crate::consts::SignalOp;
use crate::device_state::{ProxyDesc, ProxyRing, PROXY_SLOTS};
use crate::error::{Error, Result};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// PEs on other hosts, reached by heap offset. Operations towards one PE land in the order they
/// were issued: a put followed by a signal, an atomic or a get to the same PE is seen in that
/// order, as between node-local PEs.
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Whether `pe` is reached through this transport (false for node-local PEs).
    fn reaches(&self, pe: usize) -> bool;

    /// `nbytes` from local `src` to heap offset `offset` of `pe`; returns once `src` may be
    /// reused (the data is at `pe` after [`Transport::quiet`] or any later operation to `pe`).
    ///
    /// # Errors
    /// [`Error::NotSymmetric`] for a range outside the peer's heap; [`Error::Transport`];
    /// [`Error::PeerDied`].
    ///
    /// # Safety
    /// `src` must be readable for `nbytes`.
    unsafe fn put(&self, pe: usize, offset: usize, src: usize, nbytes: usize) -> Result<()>;

    /// [`Transport::put`] that may return before `src` may be reused: it must stay unchanged
    /// until this PE's next [`Transport::quiet`] (or any later operation to `pe`) returns.
    ///
    /// # Errors
    /// As [`Transport::put`]; also the error of an earlier put that failed.
    ///
    /// # Safety
    /// `src` must be readable for `nbytes` until this PE's next quiet returns, and not written
    /// meanwhile.
    unsafe fn put_nbi(&self, pe: usize, offset: usize, src: usize, nbytes: usize) -> Result<()>;

    /// `nbytes` from heap offset `offset` of `pe` into local `dst`; returns when they are there.
    ///
    /// # Errors
    /// As [`Transport::put`].
    ///
    /// # Safety
    /// `dst` must be writable for `nbytes` and not otherwise accessed during the call.
    unsafe fn get(&self, pe: usize, offset: usize, dst: usize, nbytes: usize) -> Result<()>;

    /// Applies `op` to the `width`-byte word at heap offset `offset` of `pe`, atomically at the
    /// target; returns the old bits.
    ///
    /// # Errors
    /// As [`Transport::put`].
    fn atomic(&self, pe: usize, offset: usize, width: Width, op: AmoOp) -> Result<u64>;

    /// Applies `op` (not [`AmoOp::Fetch`]) without waiting for it: complete at the target after
    /// [`Transport::quiet`] or any later operation to `pe`.
    ///
    /// # Errors
    /// As [`Transport::put`].
    fn atomic_post(&self, pe: usize, offset: usize, width: Width, op: AmoOp) -> Result<()>;

    /// Puts `nbytes` from `src` to heap offset `dest` of `pe`, then updates its signal word at
    /// heap offset `sig`: the target sees the data once it sees the signal.
    ///
    /// # Errors
    /// As [`Transport::put`].
    ///
    /// # Safety
    /// `src` must be readable for `nbytes`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn put_signal(&self, pe: usize, dest: usize, src: usize, nbytes: usize, sig: usize, value: u64, op: SignalOp) -> Result<()>;

    /// Completes every operation this PE issued through the transport at its target.
    ///
    /// # Errors
    /// [`Error::Transport`]; [`Error::PeerDied`].
    fn quiet(&self) -> Result<()>;

    /// One round of progress: waits call it between polls, so that what peers on other hosts
    /// send to this PE lands sooner. `spinning`: the caller polls again at once.
    fn progress(&self, spinning: bool);

    /// The address of the proxy's ring (`DeviceState::proxy_ring`); `None` when this PE runs
    /// no proxy.
    fn proxy_ring(&self) -> Option<usize>;

    /// The error the proxy stopped on, once (later calls return `None`).
    fn proxy_error(&self) -> Option<Error>;

    /// Posts `d` to the proxy from a host thread, as a GPU thread does: a ticket from `head`
    /// (this PE's `DeviceState::proxy_head`), the slot, the fields; waits until the proxy has
    /// run it and returns a fetching descriptor's result, else 0.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without a proxy; the proxy's error; [`Error::Timeout`] after
    /// `timeout`.
    ///
    /// # Safety
    /// The local buffer `d` names must stay valid until this returns.
    unsafe fn proxy_post(&self, head: &AtomicU64, d: ProxyDesc, timeout: Duration) -> Result<u64>;
}

/// Bytes of a proxy ring: the header and its descriptors.
pub const RING_BYTES: usize = std::mem::size_of::<ProxyRing>() + PROXY_SLOTS as usize * std::mem::size_of::<ProxyDesc>();

/// Memory a proxy ring lives in, zeroed, 64-byte aligned, [`RING_BYTES`] long: page-locked host
/// memory that kernels write on the cuda backend, plain memory on the host backend.
pub trait RingMemory: Send + Sync {
    /// Its address (the same for the host and, through unified addressing, for kernels).
    fn addr(&self) -> usize;
}

/// A ring in ordinary memory (the host backend, whose "device" posts come from host threads).
#[derive(Debug)]
pub struct HostRing {
    words: Box<[AtomicU64]>,
}

impl HostRing {
    /// A zeroed ring.
    pub fn new() -> HostRing {
        // u64 words are 8-byte aligned; nothing here needs more than 8 (descriptors are read
        // whole, not with 16-byte atomics).
        HostRing { words: (0..RING_BYTES / 8).map(|_| AtomicU64::new(0)).collect() }
    }
}

impl Default for HostRing {
    fn default() -> Self {
        Self::new()
    }
}

impl RingMemory for HostRing {
    fn addr(&self) -> usize {
        self.words.as_ptr() as usize
    }
}
