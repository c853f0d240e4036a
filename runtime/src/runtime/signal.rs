//! Signal words: 64-bit symmetric words updated with `SIGNAL_SET` / `SIGNAL_ADD`.
//!
//! # Safety
//! `putmem_signal` takes the caller's local buffer as a raw address, as `putmem` does.
#![allow(unsafe_code)]

use super::mem::Place;
use super::wait::Unmet;
use super::Runtime;
use crate::backend::{AmoOp, Width};
use crate::consts::{Cmp, SignalOp};
use crate::heap::SymAddr;
use crate::error::Result;

fn amo_of(op: SignalOp, signal: u64) -> AmoOp {
    match op {
        SignalOp::Set => AmoOp::Set(signal),
        SignalOp::Add => AmoOp::Add(signal),
    }
}

impl Runtime {
    /// Puts `nbytes` from local `source` to symmetric `dest` on PE `pe`, then updates the
    /// signal word `sig_addr` on `pe`. The target sees the data once it sees the signal.
    ///
    /// # Errors
    /// As [`Runtime::putmem`] and [`Runtime::signal_op`]; the data is not sent when the signal
    /// word is invalid.
    ///
    /// # Safety
    /// `source` must be readable for `nbytes` bytes for the duration of the call.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/signal.html>
    #[doc(alias = "nvshmem_putmem_signal")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn putmem_signal(
        &self,
        dest: SymAddr,
        source: usize,
        nbytes: usize,
        sig_addr: SymAddr,
        signal: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        // Check the signal word first so that a bad one fails before any data moves.
        let sig = self.user_word(sig_addr, Width::W64, pe, "putmem_signal")?;
        if let Place::Net { pe, offset: sig_off } = sig {
            // One message carries data and signal (`transport`): no round trip between them.
            let dest_off = match nbytes {
                0 => 0,
                _ => match self.user_remote(dest, nbytes, pe, "putmem_signal")? {
                    Place::Net { offset, .. } => offset,
                    Place::Mapped(_) => unreachable!("a PE is reached one way"),
                },
            };
            // SAFETY: the caller's promise about `source` is passed on unchanged.
            return unsafe { self.net()?.put_signal(pe, dest_off, source, nbytes, sig_off, signal, op) };
        }
        // SAFETY: the caller's promise about `source` is passed on unchanged.
        unsafe { self.putmem(dest, source, nbytes, pe)? };
        // Orders the data before the signal for backends whose copies are not plain stores;
        // on the host the SeqCst update below is already a release.
        self.fence()?;
        self.signal_op(sig_addr, signal, op, pe)
    }

    /// Updates the 64-bit signal word at symmetric `sig_addr` on PE `pe`: stores `signal`
    /// (`SignalOp::Set`) or adds it (`SignalOp::Add`), atomically.
    ///
    /// # Errors
    /// [`crate::Error::PeOutOfRange`], [`crate::Error::NotSymmetric`],
    /// [`crate::Error::InvalidArgument`] for a word not 8-byte aligned.
    #[doc(alias = "nvshmemx_signal_op")]
    pub fn signal_op(&self, sig_addr: SymAddr, signal: u64, op: SignalOp, pe: usize) -> Result<()> {
        self.user_amo_post(sig_addr, Width::W64, amo_of(op, signal), pe, "signal_op")
    }

    /// Reads this PE's signal word at `sig_addr` (acquire).
    ///
    /// # Errors
    /// As [`Runtime::signal_op`].
    #[doc(alias = "nvshmem_signal_fetch")]
    pub fn signal_fetch(&self, sig_addr: SymAddr) -> Result<u64> {
        self.user_word(sig_addr, Width::W64, self.my_pe(), "signal_fetch")?;
        self.load_local(sig_addr.get(), Width::W64)
    }

    /// Waits until this PE's signal word at `sig_addr` compares `cmp` to `value` (unsigned);
    /// returns the value seen. Acquire: data put before the signal is visible on return.
    ///
    /// # Errors
    /// As [`Runtime::signal_op`]; [`crate::Error::PeerDied`]; [`crate::Error::WaitTimeout`].
    #[doc(alias = "nvshmem_signal_wait_until")]
    pub fn signal_wait_until(&self, sig_addr: SymAddr, cmp: Cmp, value: u64) -> Result<u64> {
        self.user_word(sig_addr, Width::W64, self.my_pe(), "signal_wait_until")?;
        self.poll("signal_wait_until", || {
            let seen = self.load_local(sig_addr.get(), Width::W64)?;
            Ok(if cmp.holds(seen, value) {
                Ok(seen)
            } else {
                Err(Unmet { addr: sig_addr.get(), cmp, expected: value.into(), seen: seen.into() })
            })
        })
    }
}
