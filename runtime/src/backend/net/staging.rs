//! Bounce buffers for small puts: a put of host memory up to [`STAGE_MAX`] bytes is copied into
//! one of these and returns at once, instead of waiting for UCX's local completion.
//!
//! Why: `putmem` returns once its source may be reused, and UCX completes a zero-copy put only
//! when the source has been read, which on TCP (UCX's `put_zcopy` there) means when the target
//! has acknowledged it: a round trip through the target's progress per put, so a stream of puts
//! ran one round trip at a time (0.3x of `ucp_put_bw` at 64 KiB on the CI machine) and an 8-byte
//! `p` cost a round trip before its ping could be answered. A copy of up to 64 KiB costs a few
//! microseconds. The buffers are pooled (no allocation per put once warm) and at most
//! [`MAX_IN_FLIGHT`] are in flight; a later put, `quiet` or any other operation reaps the done ones.
//!
//! A buffer is handed to UCX only while this module keeps it, with its request, in `in_flight`;
//! it returns to the pool (or is freed) only once that request has completed. Requests given up
//! on (a dead peer, the transport closing) leak their buffers instead.

use crate::error::Result;
use crate::ucx::Request;
use std::collections::VecDeque;
use std::sync::Mutex;

/// The largest put staged (larger ones are sent from the caller's buffer and waited for).
pub const STAGE_MAX: usize = 64 << 10;

/// Staged puts in flight at most; the next one first waits for the oldest.
pub const MAX_IN_FLIGHT: usize = 64;

/// Pooled buffers and the puts in flight from them.
pub(super) struct Staging {
    state: Mutex<State>,
}

struct State {
    free: Vec<Box<[u8]>>,
    in_flight: VecDeque<(Box<[u8]>, Request)>,
}

impl Staging {
    pub(super) fn new() -> Staging {
        Staging { state: Mutex::new(State { free: Vec::new(), in_flight: VecDeque::new() }) }
    }

    /// Copies `src` into a buffer, calls `send(addr)` with the copy's address, and keeps the
    /// buffer until the returned request completes. `abort` bounds the wait for room.
    ///
    /// # Errors
    /// What `send` returns; a failed earlier staged put's error; what `abort` returns.
    pub(super) fn put(
        &self,
        src: &[u8],
        abort: &dyn Fn() -> Result<()>,
        send: impl FnOnce(usize) -> Result<Request>,
    ) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.reap()?;
        if st.in_flight.len() >= MAX_IN_FLIGHT {
            if let Some((buf, req)) = st.in_flight.pop_front() {
                match req.wait(abort) {
                    Ok(()) => st.free.push(buf),
                    Err(e) => {
                        // UCX may still read it.
                        std::mem::forget(buf);
                        return Err(e);
                    }
                }
            }
        }
        let mut buf = st.free.pop().unwrap_or_else(|| vec![0u8; STAGE_MAX].into_boxed_slice());
        buf[..src.len()].copy_from_slice(src);
        let mut req = match send(buf.as_ptr() as usize) {
            Ok(req) => req,
            Err(e) => {
                st.free.push(buf);
                return Err(e);
            }
        };
        if req.test()? {
            st.free.push(buf);
        } else {
            st.in_flight.push_back((buf, req));
        }
        Ok(())
    }

    /// Returns the buffers of completed puts to the pool.
    ///
    /// # Errors
    /// The error of a staged put that failed.
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
    fn reap(&mut self) -> Result<()> {
        let mut first_err = None;
        let mut i = 0;
        while i < self.in_flight.len() {
            let (_, req) = &mut self.in_flight[i];
            match req.test() {
                Ok(false) => i += 1,
                done => {
                    if let Some((buf, _)) = self.in_flight.remove(i) {
                        self.free.push(buf);
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
