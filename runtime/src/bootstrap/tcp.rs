//! [`Star`]: the byte-blob collectives over the TCP connections between PE 0 and every other PE,
//! and the watcher threads that turn a closed connection into a peer-death report.
//!
//! Every PE has one connection to PE 0 (PE 0 has one per peer). A watcher thread per connection
//! reads every frame: data frames go to an in-memory inbox that the collectives wait on; control
//! frames are handled on the spot (`DEAD k` marks PE k dead; `LEAVING k` records that PE k
//! began its finalize, and how; `RELEASE` ends a finalize; `GOODBYE` means the end-of-file that
//! follows is a clean finalize). End-of-file without goodbye means the process on the other
//! end is gone: the kernel closes a dead process's sockets however it died. PE 0's watcher for
//! PE k then marks k dead and relays `DEAD k` to every other PE; a non-zero PE's watcher marks
//! PE 0 dead. `EXIT s` (a PE called `global_exit(s)`) makes the receiving process exit with
//! status `s`, PE 0 relaying it to every other PE first.
//!
//! Finalize is not a collective a program's calls could match: a finalizing PE announces
//! `LEAVING` (PE 0 relays it to all), which fails every blocking call of the others with
//! [`Error::PeerExited`], and waits until every PE has announced it too; then PE 0 sends
//! `RELEASE` and everyone tears down.
//!
//! Collectives go through PE 0 (a star): fine for the small blobs bootstrap carries (handles,
//! sizes), with two network hops of latency.

use super::deadline::deadline_after;
use super::health::Health;
use super::wire::{decode, encode, read_frame, write_frame, Frame, Kind, ReadError};
use crate::error::{Error, Result};
use crate::watchdog::{check_interrupt, Stall};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a waiting collective looks at [`Health`] and its deadline.
const POLL: Duration = Duration::from_millis(20);
/// How long a collective waits for PE 0's answer after another PE announced that it leaves (the
/// answer may be on its way; see `recv`). Dead peers fail the wait at once.
const LEAVE_GRACE: Duration = Duration::from_secs(2);

/// Stack of a watcher thread: it only reads frames into vectors on the heap.
const WATCHER_STACK: usize = 256 << 10;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The write half of every connection, indexed by PE (PE 0's watchers use it to relay deaths).
type Writers = Arc<Vec<Option<Mutex<TcpStream>>>>;

/// One connection's receiving side.
struct Link {
    inbox: Mutex<Receiver<Frame>>,
    said_goodbye: Arc<AtomicBool>,
    watcher: Option<JoinHandle<()>>,
}

/// The collectives and the watchers of one PE.
pub(crate) struct Star {
    rank: usize,
    nranks: usize,
    timeout: Duration,
    /// `RSHMEM_STUCK_REPORT_MS`.
    stuck_report: Option<Duration>,
    health: Health,
    /// Sequence number of the next collective; the lock also keeps collectives from interleaving
    /// when two threads call them at once.
    seq: Mutex<u32>,
    writers: Writers,
    /// Indexed by PE: PE 0 holds one per peer, the others only index 0.
    links: Vec<Option<Link>>,
    /// Set before this side closes on purpose, so its watchers exit quietly.
    closing: Arc<AtomicBool>,
    /// Set by the watcher of PE 0's connection when PE 0 releases a finalize.
    released: Arc<AtomicBool>,
    /// Whether this PE announced that it leaves (finalize's first step, done once).
    left: AtomicBool,
}

impl Star {
    /// Starts the watchers over the handshaken connections (`streams[pe]`, `None` for self and,
    /// off PE 0, for everyone but PE 0).
    pub(crate) fn start(
        rank: usize,
        nranks: usize,
        streams: Vec<Option<TcpStream>>,
        health: Health,
        timeout: Duration,
    ) -> Result<Star> {
        let closing = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::with_capacity(nranks);
        let mut writers = Vec::with_capacity(nranks);
        for (pe, s) in streams.into_iter().enumerate() {
            match s {
                Some(s) => {
                    let _ = s.set_read_timeout(None);
                    let _ = s.set_write_timeout(Some(timeout));
                    let r = s
                        .try_clone()
                        .map_err(|e| Error::os(format!("dup of the socket to PE {pe}"), e))?;
                    readers.push(Some(r));
                    writers.push(Some(Mutex::new(s)));
                }
                None => {
                    readers.push(None);
                    writers.push(None);
                }
            }
        }
        let writers: Writers = Arc::new(writers);
        let mut links = Vec::with_capacity(nranks);
        for (pe, r) in readers.into_iter().enumerate() {
            let Some(r) = r else {
                links.push(None);
                continue;
            };
            let (tx, rx) = mpsc::channel();
            let said_goodbye = Arc::new(AtomicBool::new(false));
            let w = Watcher {
                me: rank,
                pe,
                stream: r,
                tx,
                health: health.clone(),
                said_goodbye: said_goodbye.clone(),
                closing: closing.clone(),
                released: released.clone(),
                writers: writers.clone(),
            };
            let watcher = std::thread::Builder::new()
                .name(format!("rshmem-watch-{pe}"))
                .stack_size(WATCHER_STACK)
                .spawn(move || w.run())
                .map_err(|e| Error::os("spawn a bootstrap watcher thread", e))?;
            links.push(Some(Link {
                inbox: Mutex::new(rx),
                said_goodbye,
                watcher: Some(watcher),
            }));
        }
        Ok(Star {
            rank,
            nranks,
            timeout,
            stuck_report: crate::env::env().ok().and_then(|e| e.stuck_report),
            health,
            seq: Mutex::new(0),
            writers,
            links,
            closing,
            released,
            left: AtomicBool::new(false),
        })
    }

    /// Ends the job: tells every other PE (through PE 0) to exit with `status`, then exits this
    /// process with it. The notice is written to the sockets before this process exits, so it
    /// arrives ahead of the end-of-file its exit causes; a PE that cannot be told (its connection
    /// is gone) has died already.
    pub(crate) fn global_exit(&self, status: i32) -> ! {
        let notice = encode(&status);
        for (pe, w) in self.writers.iter().enumerate() {
            if let Some(w) = w {
                if let Err(e) = write_frame(&mut *lock(w), Kind::EXIT, 0, &notice) {
                    tracing::debug!(me = self.rank, pe, "global_exit: could not tell PE {pe}: {e}");
                }
            }
        }
        self.closing.store(true, Ordering::Release);
        std::process::exit(status)
    }

    fn send(&self, pe: usize, kind: Kind, seq: u32, payload: &[u8], what: &str) -> Result<()> {
        let Some(w) = self.writers.get(pe).and_then(Option::as_ref) else {
            return Err(Error::InvalidArgument(format!(
                "PE {} has no bootstrap connection to PE {pe}",
                self.rank
            )));
        };
        write_frame(&mut *lock(w), kind, seq, payload).map_err(|e| {
            if let Err(died) = self.health.check(what) {
                return died;
            }
            match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Error::Timeout {
                    what: format!("{what}: sending to PE {pe}, which stopped reading"),
                    after: self.timeout,
                },
                _ => Error::PeerDied {
                    pe,
                    during: format!("{what} (send failed: {e})"),
                },
            }
        })
    }

    /// Waits for the next data frame from `pe`, which must be `kind` number `seq`.
    fn recv(
        &self,
        pe: usize,
        kind: Kind,
        seq: u32,
        deadline: Instant,
        what: &str,
    ) -> Result<Vec<u8>> {
        let Some(link) = self.links.get(pe).and_then(Option::as_ref) else {
            return Err(Error::InvalidArgument(format!(
                "PE {} has no bootstrap connection to PE {pe}",
                self.rank
            )));
        };
        let inbox = lock(&link.inbox);
        let mut stall = Stall::new(self.stuck_report);
        let mut left_noticed: Option<Instant> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match inbox.recv_timeout(left.min(POLL)) {
                Ok(f) if f.kind == kind && f.seq == seq => return Ok(f.payload),
                Ok(f) => {
                    return Err(Error::Mismatch {
                        what: "bootstrap collective",
                        me: self.rank,
                        pe,
                        mine: format!("{} #{seq}", kind.name()),
                        theirs: format!("{} #{}", f.kind.name(), f.seq),
                    })
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.health.check_dead(what)?;
                    if self.health.left_pe().is_some() {
                        // The PE this wait reads from left: nothing more comes from it (its data
                        // precedes its notice on the one connection).
                        self.health.check_left(pe, what)?;
                        // Another PE left. PE 0 answers every PE in turn, and its watcher's relay
                        // of a leaving notice can overtake this PE's answer to a collective the
                        // leaver completed: wait a while for the answer before failing.
                        let first = *left_noticed.get_or_insert_with(Instant::now);
                        if first.elapsed() >= LEAVE_GRACE {
                            self.health.check(what)?;
                        }
                    }
                    check_interrupt(what)?;
                    stall.check(&format!("PE {}", self.rank), || {
                        if self.rank == 0 {
                            format!("{what}: waiting for PE {pe}'s {} message", kind.name())
                        } else {
                            format!("{what}: waiting for PE 0's answer (some PE has not joined this collective)")
                        }
                    });
                    if Instant::now() >= deadline {
                        let who = if self.rank == 0 {
                            format!("PE {pe} to join")
                        } else {
                            "PE 0's answer (some PE has not joined)".to_string()
                        };
                        return Err(Error::Timeout {
                            what: format!("{what}: {who}"),
                            after: self.timeout,
                        });
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.health.check(what)?;
                    return Err(Error::PeerDied {
                        pe,
                        during: what.to_string(),
                    });
                }
            }
        }
    }

    /// Runs `body` as the next collective, with its sequence number and deadline.
    fn collective<T>(
        &self,
        name: &str,
        body: impl FnOnce(u32, Instant, &str) -> Result<T>,
    ) -> Result<T> {
        let mut seq = lock(&self.seq);
        let this = *seq;
        *seq = seq.wrapping_add(1);
        // In the front end's terms when it named its call: "free_tensor (bootstrap allgather #10)".
        let what = format!("{} on PE {}", crate::watchdog::call_name(&format!("bootstrap {name} #{this}")), self.rank);
        self.health.check(&what)?;
        body(
            this,
            deadline_after(Instant::now(), self.timeout),
            &what,
        )
    }

    /// Every PE's blob, indexed by PE.
    pub(crate) fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        if self.nranks == 1 {
            return Ok(vec![mine.to_vec()]);
        }
        self.collective("allgather", |seq, deadline, what| {
            if self.rank == 0 {
                let mut all = vec![mine.to_vec()];
                for pe in 1..self.nranks {
                    all.push(self.recv(pe, Kind::ALLGATHER, seq, deadline, what)?);
                }
                let e = encode_blobs(&all);
                for pe in 1..self.nranks {
                    self.send(pe, Kind::ALLGATHER, seq, &e, what)?;
                }
                Ok(all)
            } else {
                self.send(0, Kind::ALLGATHER, seq, mine, what)?;
                let reply = self.recv(0, Kind::ALLGATHER, seq, deadline, what)?;
                decode_blobs(&reply, self.nranks).map_err(|why| Error::Refused {
                    reason: format!("{what}: PE 0 sent a malformed result: {why}"),
                })
            }
        })
    }

    /// `root`'s blob, on every PE.
    pub(crate) fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>> {
        if root >= self.nranks {
            return Err(Error::PeOutOfRange {
                pe: root as i64,
                n_pes: self.nranks,
                scope: "the job".into(),
            });
        }
        if self.nranks == 1 {
            return Ok(data.to_vec());
        }
        self.collective("broadcast", |seq, deadline, what| {
            if self.rank == root {
                let targets: Vec<usize> = if root == 0 {
                    (1..self.nranks).collect()
                } else {
                    vec![0]
                };
                for pe in targets {
                    self.send(pe, Kind::BROADCAST, seq, data, what)?;
                }
                Ok(data.to_vec())
            } else if self.rank == 0 {
                let d = self.recv(root, Kind::BROADCAST, seq, deadline, what)?;
                for pe in (1..self.nranks).filter(|&pe| pe != root) {
                    self.send(pe, Kind::BROADCAST, seq, &d, what)?;
                }
                Ok(d)
            } else {
                self.recv(0, Kind::BROADCAST, seq, deadline, what)
            }
        })
    }

    /// Returns once every PE has called it.
    pub(crate) fn barrier(&self) -> Result<()> {
        if self.nranks == 1 {
            return Ok(());
        }
        self.collective("barrier", |seq, deadline, what| {
            if self.rank == 0 {
                for pe in 1..self.nranks {
                    self.recv(pe, Kind::BARRIER, seq, deadline, what)?;
                }
                for pe in 1..self.nranks {
                    self.send(pe, Kind::BARRIER, seq, &[], what)?;
                }
                Ok(())
            } else {
                self.send(0, Kind::BARRIER, seq, &[], what)?;
                self.recv(0, Kind::BARRIER, seq, deadline, what).map(drop)
            }
        })
    }

    /// Announces that this PE leaves the job, saying `how`, and waits until every PE has (the
    /// finalize's collective part). Done once; later calls return at once.
    ///
    /// From the announcement on, every other PE's blocking calls fail with
    /// [`Error::PeerExited`] naming this PE; a PE that is in its own finalize is not disturbed.
    ///
    /// # Errors
    /// [`Error::PeerDied`] when a PE died instead of leaving (the others are released at once);
    /// [`Error::Timeout`] naming the PEs that did not begin their finalize within the bootstrap
    /// timeout; [`Error::Interrupted`].
    pub(crate) fn leave(&self, how: &str) -> Result<()> {
        if self.nranks == 1 || self.left.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let what = "finalize";
        let notice = encode(&(self.rank as u32, how.to_string()));
        let deadline = deadline_after(Instant::now(), self.timeout);
        let mut stall = Stall::new(self.stuck_report);
        let not_left = |s: &Star| -> Vec<usize> {
            (0..s.nranks).filter(|&pe| pe != s.rank && !s.health.has_left(pe)).collect()
        };
        let mut wait = |done: &dyn Fn() -> bool| -> Result<()> {
            let mut last_interrupt = Instant::now();
            loop {
                self.health.check_dead(what)?;
                if done() {
                    return Ok(());
                }
                let missing = not_left(self);
                stall.check(&format!("PE {}", self.rank), || {
                    format!("finalize: waiting for PEs {missing:?} to begin their finalize")
                });
                if Instant::now() >= deadline {
                    return Err(Error::Timeout {
                        what: format!(
                            "finalize on PE {}: PEs {missing:?} to begin their finalize (they are still \
                             in other calls of their programs)",
                            self.rank
                        ),
                        after: self.timeout,
                    });
                }
                if last_interrupt.elapsed() >= crate::watchdog::INTERRUPT_EVERY {
                    check_interrupt(what)?;
                    last_interrupt = Instant::now();
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        };
        if self.rank != 0 {
            self.send(0, Kind::LEAVING, 0, &notice, what)?;
            return wait(&|| self.released.load(Ordering::Acquire));
        }
        for pe in 1..self.nranks {
            // A dead PE's send fails; the wait below reports it.
            let _ = self.send(pe, Kind::LEAVING, 0, &notice, what);
        }
        let waited = wait(&|| not_left(self).is_empty());
        // Released also when a PE died: the survivors need not wait for it.
        if waited.is_ok() || self.health.dead_pe().is_some() {
            for pe in 1..self.nranks {
                let _ = self.send(pe, Kind::RELEASE, 0, &[], what);
            }
        }
        waited
    }

    /// Clean shutdown after [`Star::leave`] (done here when it was not yet): a non-zero PE says
    /// goodbye and closes; PE 0 waits for every goodbye (so nobody sees PE 0's end-of-file
    /// before it has stopped watching), then closes.
    pub(crate) fn finalize(mut self) -> Result<()> {
        self.leave("finalize")?;
        self.closing.store(true, Ordering::Release);
        if self.rank != 0 {
            let _ = self.send(0, Kind::GOODBYE, 0, &[], "finalize");
        } else {
            let deadline = deadline_after(Instant::now(), self.timeout);
            let pending = |s: &Star| {
                s.links
                    .iter()
                    .flatten()
                    .filter(|l| {
                        !l.said_goodbye.load(Ordering::Acquire)
                            && l.watcher.as_ref().is_some_and(|w| !w.is_finished())
                    })
                    .count()
            };
            while pending(&self) > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.close();
        Ok(())
    }

    /// Stops the watchers: marks the close as intended, shuts the sockets (which wakes the
    /// blocked reads), joins the threads. Never panics.
    fn close(&mut self) {
        self.closing.store(true, Ordering::Release);
        for w in self.writers.iter().flatten() {
            let _ = lock(w).shutdown(Shutdown::Both);
        }
        for link in self.links.iter_mut().flatten() {
            if let Some(t) = link.watcher.take() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Star {
    fn drop(&mut self) {
        self.close();
    }
}

/// The allgather result PE 0 sends: every PE's blob, in rank order.
pub(crate) fn encode_blobs(all: &[Vec<u8>]) -> Vec<u8> {
    encode(&all.iter().map(|b| serde_bytes::Bytes::new(b)).collect::<Vec<_>>())
}

pub(crate) fn decode_blobs(payload: &[u8], nranks: usize) -> Result<Vec<Vec<u8>>, String> {
    let blobs: Vec<serde_bytes::ByteBuf> = decode(payload, "allgather result")?;
    if blobs.len() != nranks {
        return Err(format!("{} blobs for {nranks} PEs", blobs.len()));
    }
    Ok(blobs.into_iter().map(serde_bytes::ByteBuf::into_vec).collect())
}

/// The state one watcher thread owns.
struct Watcher {
    me: usize,
    pe: usize,
    stream: TcpStream,
    tx: Sender<Frame>,
    health: Health,
    said_goodbye: Arc<AtomicBool>,
    closing: Arc<AtomicBool>,
    released: Arc<AtomicBool>,
    writers: Writers,
}

impl Watcher {
    /// PE `self.pe` called `global_exit(status)`: PE 0 passes it on to every other PE; then this
    /// process exits with it.
    fn exit_job(&self, status: i32) -> ! {
        self.closing.store(true, Ordering::Release);
        if self.me == 0 {
            let notice = encode(&status);
            for (other, w) in self.writers.iter().enumerate() {
                if other != self.pe {
                    if let Some(w) = w {
                        let _ = write_frame(&mut *lock(w), Kind::EXIT, 0, &notice);
                    }
                }
            }
        }
        tracing::debug!(me = self.me, pe = self.pe, status, "global_exit from PE {}", self.pe);
        std::process::exit(status)
    }

    /// Records a leaving notice; PE 0 relays it to every PE but the one it came from.
    fn leaving(&self, f: &Frame) -> std::result::Result<(), String> {
        let (pe, how): (u32, String) = decode(&f.payload, "leaving notice")?;
        if self.me == 0 {
            for (other, w) in self.writers.iter().enumerate() {
                if other != self.pe {
                    if let Some(w) = w {
                        let _ = write_frame(&mut *lock(w), Kind::LEAVING, 0, &f.payload);
                    }
                }
            }
        }
        self.health.mark_left(pe as usize, how);
        Ok(())
    }

    fn run(mut self) {
        let end = loop {
            match read_frame(&mut self.stream) {
                Ok(f) if f.kind == Kind::GOODBYE => {
                    self.said_goodbye.store(true, Ordering::Release)
                }
                Ok(f) if f.kind == Kind::EXIT => match decode::<i32>(&f.payload, "global exit") {
                    Ok(status) => self.exit_job(status),
                    Err(why) => break format!("bad global-exit notice: {why}"),
                },
                Ok(f) if f.kind == Kind::LEAVING => {
                    if let Err(why) = self.leaving(&f) {
                        break why;
                    }
                }
                Ok(f) if f.kind == Kind::RELEASE => self.released.store(true, Ordering::Release),
                Ok(f) if f.kind == Kind::DEAD => match decode::<u32>(&f.payload, "peer-died notice") {
                    Ok(dead) => {
                        self.health.mark_dead(dead as usize);
                    }
                    Err(why) => break format!("bad peer-died notice: {why}"),
                },
                Ok(f) => {
                    // The receiver is gone only when the Star is being dropped.
                    if self.tx.send(f).is_err() {
                        return;
                    }
                }
                Err(ReadError::Eof) => break "end of file".to_string(),
                Err(e) => break e.to_string(),
            }
        };
        if self.closing.load(Ordering::Acquire) || self.said_goodbye.load(Ordering::Acquire) {
            return;
        }
        tracing::debug!(
            me = self.me,
            pe = self.pe,
            "bootstrap: connection to PE {} lost: {end}",
            self.pe
        );
        // Relay before recording: once recorded, this process may fail its collective and exit,
        // and the others must hear "PE k died" before they see this process's own sockets close.
        if self.me == 0 {
            let notice = encode(&(self.pe as u32));
            for (other, w) in self.writers.iter().enumerate() {
                if other != self.pe {
                    if let Some(w) = w {
                        let _ = write_frame(&mut *lock(w), Kind::DEAD, 0, &notice);
                    }
                }
            }
        }
        self.health.mark_dead(self.pe);
    }
}
