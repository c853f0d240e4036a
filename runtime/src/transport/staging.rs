//! Puts in flight: bounce buffers for staged puts, and the requests of puts that return before
//! UCX has finished with their source (`putmem_nbi`, and the tail of a large blocking put).
//!
//! Why stage: `putmem` returns once its source may be reused, and UCX completes a zero-copy put
//! only when the source has been read, which on TCP (UCX's `put_zcopy` there) means when the
//! target has acknowledged it: a round trip through the target's progress per put, so a stream
//! of puts ran one round trip at a time (0.3x of `ucp_put_bw` at 64 KiB on the CI machine) and
//! an 8-byte `p` cost a round trip before its ping could be answered. A copy of up to
//! [`STAGE_MAX`] bytes costs a few microseconds. A larger put sends all but its last
//! [`STAGE_MAX`] bytes from the caller's buffer and stages the tail: it waits only for the head,
//! whose acknowledgement comes back while the tail is still on the wire (`Net::put`).
//!
//! The buffers are pooled (no allocation per put once warm). At most [`MAX_IN_FLIGHT`] puts are
//! in flight, staged or not; the next one first waits for the oldest; a later put, `quiet` or
//! any other operation reaps the done ones.
//!
//! A buffer is handed to UCX only while this module keeps it, with its request, in `in_flight`;
//! it returns to the pool (or is freed) only once that request has completed. Requests given up
//! on (a dead peer, the transport closing) leak their buffers instead.

use crate::error::Result;
use super::ucx::Request;
use std::collections::VecDeque;
use std::sync::Mutex;

/// The largest put staged whole, and the staged tail of a larger one.
pub const STAGE_MAX: usize = 64 << 10;

/// Puts in flight at most (staged or not); the next one first waits for the oldest. The same
/// as `ucx_perftest`'s default window for `ucp_put_bw`, which `benchmarks/net_vs_ucx` compares
/// `putmem_nbi` with: 32 puts of 64 KiB are more than loopback TCP's socket buffers hold.
pub const MAX_IN_FLIGHT: usize = 32;

/// Pooled buffers and the puts in flight.
pub(super) struct Staging {
    state: Mutex<State>,
}

struct State {
    free: Vec<Box<[u8]>>,
    /// Oldest first; the buffer is `None` for a put from the caller's memory.
    in_flight: VecDeque<(Option<Box<[u8]>>, Request)>,
}

impl Staging {
    pub(super) fn new() -> Staging {
        Staging { state: Mutex::new(State { free: Vec::new(), in_flight: VecDeque::new() }) }
    }

    /// Copies `src` (at most [`STAGE_MAX`] bytes) into a buffer, calls `send(addr)` with the
    /// copy's address, and keeps the buffer until the returned request completes. `abort`
    /// bounds the wait for room.
    ///
    /// # Errors
    /// What `send` returns; a failed earlier put's error; what `abort` returns.
    pub(super) fn put(
        &self,
        src: &[u8],
        abort: &dyn Fn() -> Result<()>,
        send: impl FnOnce(usize) -> Result<Request>,
    ) -> Result<()> {
        debug_assert!(src.len() <= STAGE_MAX);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.make_room(abort)?;
        // The most recently freed buffer first: the one most likely still in cache.
        let mut buf = st.free.pop().unwrap_or_else(|| vec![0u8; STAGE_MAX].into_boxed_slice());
        buf[..src.len()].copy_from_slice(src);
        let req = match send(buf.as_ptr() as usize) {
            Ok(req) => req,
            Err(e) => {
                st.free.push(buf);
                return Err(e);
            }
        };
        st.keep(Some(buf), req)
    }

    /// Keeps `req`, a put from memory the caller keeps valid until it completes, until it does
    /// (a later reap, or a wait for room). Waits for room first, bounded by `abort`.
    ///
    /// # Errors
    /// A failed earlier put's error; `req`'s own when it failed at once; what `abort` returns.
    pub(super) fn track(&self, abort: &dyn Fn() -> Result<()>, send: impl FnOnce() -> Result<Request>) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.make_room(abort)?;
        let req = send()?;
        st.keep(None, req)
    }

    /// Returns the buffers of completed puts to the pool.
    ///
    /// # Errors
    /// The error of a put that failed.
    pub(super) fn reap(&self) -> Result<()> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).reap()
    }

    /// Gives up on the puts still in flight (the transport is closing): their buffers are leaked,
    /// as UCX may still read them.
    pub(super) fn abandon(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let _ = st.reap();
        for (buf, req) in st.in_flight.drain(..) {
            std::mem::forget(buf);
            drop(req);
        }
    }
}

impl State {
    /// Reaps, then waits for the oldest put while [`MAX_IN_FLIGHT`] are in flight.
    fn make_room(&mut self, abort: &dyn Fn() -> Result<()>) -> Result<()> {
        self.reap()?;
        while self.in_flight.len() >= MAX_IN_FLIGHT {
            let Some((buf, req)) = self.in_flight.pop_front() else { break };
            match req.wait(abort) {
                Ok(()) => self.free.extend(buf),
                Err(e) => {
                    // UCX may still read it.
                    std::mem::forget(buf);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Keeps `buf` (if any) with `req` until it completes; at once back to the pool when done.
    fn keep(&mut self, buf: Option<Box<[u8]>>, mut req: Request) -> Result<()> {
        match req.test() {
            Ok(true) => self.free.extend(buf),
            Ok(false) => self.in_flight.push_back((buf, req)),
            Err(e) => {
                // Finished with an error: UCX is done with the buffer.
                self.free.extend(buf);
                return Err(e);
            }
        }
        Ok(())
    }

    fn reap(&mut self) -> Result<()> {
        let mut first_err = None;
        let mut i = 0;
        while i < self.in_flight.len() {
            let (_, req) = &mut self.in_flight[i];
            match req.test() {
                Ok(false) => i += 1,
                done => {
                    if let Some((buf, _)) = self.in_flight.remove(i) {
                        self.free.extend(buf);
                    }
                    if let Err(e) = done {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
