//! [`Pending`]: connections a listener accepted whose first message has not arrived yet, read
//! all at once so that no stranger can hold up the others.
//!
//! Whoever finds a listener's address can connect (PE 0's TCP port; the abstract Unix names,
//! listed in `/proc/net/unix`). A real PE sends its first message right after connecting; a
//! stranger may send nothing, a little at a time, or a length that announces gigabytes. So each
//! accepted connection is non-blocking and polled with the listener, and is dropped when it
//! breaks one of three bounds: its first message must be complete within [`Pending::new`]'s
//! `wait`, may not be longer than the caller's parser allows (checked from the header, before
//! anything is read into memory), and at most `max` connections wait at once (the oldest goes
//! when one more arrives). A dropped connection is closed and logged; it never fails the
//! bootstrap.

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

/// What a parser says about the bytes received so far.
pub(crate) enum Need {
    /// The message is complete.
    Done,
    /// The message needs this many bytes in all (more than received).
    Total(usize),
}

/// A connection whose first message is complete.
pub(crate) struct Arrived<S> {
    /// The connection (still non-blocking).
    pub(crate) stream: S,
    /// Every byte received: exactly the first message.
    pub(crate) bytes: Vec<u8>,
    /// Who connected, for messages.
    pub(crate) peer: String,
}

struct Conn<S> {
    stream: S,
    peer: String,
    buf: Vec<u8>,
    /// Bytes the first message needs in all, as far as known.
    need: usize,
    since: Instant,
}

/// Connections waiting for their first message. See the module docs.
pub(crate) struct Pending<S> {
    conns: Vec<Conn<S>>,
    max: usize,
    wait: Duration,
    /// First message size before anything is known (a header's length).
    first_need: usize,
    /// How many connections were dropped, for messages.
    pub(crate) dropped: usize,
}

impl<S: AsFd + Read> Pending<S> {
    /// At most `max` waiting connections, each given `wait` to send a message whose first
    /// `first_need` bytes tell its size (the parser's job).
    pub(crate) fn new(max: usize, wait: Duration, first_need: usize) -> Pending<S> {
        Pending { conns: Vec::new(), max: max.max(1), wait, first_need, dropped: 0 }
    }

    /// Adds an accepted connection (already non-blocking), dropping the oldest when full.
    pub(crate) fn add(&mut self, stream: S, peer: String) {
        if self.conns.len() >= self.max {
            let old = self.conns.remove(0);
            self.drop_conn(old, "too many connections waiting for their first message");
        }
        self.conns.push(Conn { stream, peer, buf: Vec::new(), need: self.first_need, since: Instant::now() });
    }

    /// Whether the connection from `peer` still waits.
    pub(crate) fn holds(&self, peer: &str) -> bool {
        self.conns.iter().any(|c| c.peer == peer)
    }

    /// How many connections wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.conns.len()
    }

    fn drop_conn(&mut self, c: Conn<S>, why: &str) {
        self.dropped += 1;
        tracing::warn!(peer = %c.peer, "bootstrap: dropped a connection: {why}");
    }

    /// Waits up to `slice` for the listener or any waiting connection; reads what arrived;
    /// drops connections that broke a bound. Returns whether the listener is readable and the
    /// connections whose first message is complete. `parse` judges the bytes so far.
    ///
    /// # Errors
    /// When `poll` itself fails.
    pub(crate) fn step(
        &mut self,
        listener: BorrowedFd<'_>,
        slice: Duration,
        parse: impl Fn(&[u8]) -> Result<Need, String>,
    ) -> rustix::io::Result<(bool, Vec<Arrived<S>>)> {
        let ts = Timespec { tv_sec: slice.as_secs() as _, tv_nsec: slice.subsec_nanos() as _ };
        let (listener_ready, ready) = {
            let mut fds = Vec::with_capacity(self.conns.len() + 1);
            fds.push(PollFd::from_borrowed_fd(listener, PollFlags::IN));
            fds.extend(self.conns.iter().map(|c| PollFd::from_borrowed_fd(c.stream.as_fd(), PollFlags::IN)));
            match poll(&mut fds, Some(&ts)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e),
            }
            let ready: Vec<bool> = fds[1..].iter().map(|f| !f.revents().is_empty()).collect();
            (!fds[0].revents().is_empty(), ready)
        };
        let now = Instant::now();
        let mut arrived = Vec::new();
        let mut keep = Vec::with_capacity(self.conns.len());
        for (mut c, ready) in std::mem::take(&mut self.conns).into_iter().zip(ready) {
            let verdict = if ready { Self::read_some(&mut c, &parse) } else { Ok(false) };
            match verdict {
                Ok(true) => arrived.push(Arrived { stream: c.stream, bytes: c.buf, peer: c.peer }),
                Ok(false) if now.duration_since(c.since) > self.wait => {
                    let why = format!("no complete first message within {:?} ({} bytes came)", self.wait, c.buf.len());
                    self.drop_conn(c, &why);
                }
                Ok(false) => keep.push(c),
                Err(why) => self.drop_conn(c, &why),
            }
        }
        self.conns = keep;
        Ok((listener_ready, arrived))
    }

    /// Reads what is there, never past what the message needs; `Ok(true)` once complete.
    fn read_some(c: &mut Conn<S>, parse: &impl Fn(&[u8]) -> Result<Need, String>) -> Result<bool, String> {
        loop {
            if c.buf.len() >= c.need {
                match parse(&c.buf)? {
                    Need::Done => return Ok(true),
                    Need::Total(n) if n > c.buf.len() => c.need = n,
                    Need::Total(n) => return Err(format!("the parser asked for {n} bytes with {} read", c.buf.len())),
                }
            }
            let start = c.buf.len();
            c.buf.resize(c.need, 0);
            match c.stream.read(&mut c.buf[start..]) {
                Ok(0) => {
                    c.buf.truncate(start);
                    return Err(format!("closed after {start} bytes"));
                }
                Ok(n) => c.buf.truncate(start + n),
                Err(e) => {
                    c.buf.truncate(start);
                    return match e.kind() {
                        ErrorKind::WouldBlock | ErrorKind::Interrupted => Ok(false),
                        _ => Err(format!("read failed: {e}")),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// Messages of one length byte then that many bytes, at most 8.
    fn parse(b: &[u8]) -> Result<Need, String> {
        let n = usize::from(b[0]);
        if n > 8 {
            return Err(format!("length {n}"));
        }
        Ok(if b.len() == 1 + n { Need::Done } else { Need::Total(1 + n) })
    }

    #[test]
    fn bounds_on_time_size_and_count() {
        let dir = std::env::temp_dir().join(format!("rshmem-pending-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let l = UnixListener::bind(&dir).unwrap();
        l.set_nonblocking(true).unwrap();
        let mut p: Pending<UnixStream> = Pending::new(4, Duration::from_millis(300), 1);
        let connect = || UnixStream::connect(&dir).unwrap();
        let (mut good, _silent, mut huge, mut slow) = (connect(), connect(), connect(), connect());
        good.write_all(&[3, 1, 2, 3]).unwrap();
        huge.write_all(&[200]).unwrap();
        slow.write_all(&[2, 9]).unwrap(); // one byte short, then nothing
        let mut got = Vec::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(600) {
            let (ready, arrived) = p.step(l.as_fd(), Duration::from_millis(20), parse).unwrap();
            got.extend(arrived.into_iter().map(|a| a.bytes));
            if ready {
                while let Ok((s, _)) = l.accept() {
                    s.set_nonblocking(true).unwrap();
                    p.add(s, "test".into());
                }
            }
        }
        assert_eq!(got, vec![vec![3, 1, 2, 3]]);
        // huge: dropped at once; silent and slow: after the wait.
        assert_eq!((p.len(), p.dropped), (0, 3));
        // A fifth waiting connection pushes out the oldest.
        for _ in 0..5 {
            let s = connect();
            s.set_nonblocking(true).unwrap();
            p.add(s, "x".into());
        }
        assert_eq!((p.len(), p.dropped), (4, 4));
        let _ = std::fs::remove_file(&dir);
    }
}
