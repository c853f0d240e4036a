//! The handshake: every PE connects to PE 0, proves it belongs to the job, and learns about all
//! the others.
//!
//! PE 0 opens every connection with a `CHALLENGE` ([`Preface`]): the nonce the hello must answer,
//! and what a PE of this job must agree with before it answers: the PE count, the job's identity
//! (the launcher's run or job id, `RSHMEM_JOB_ID`; [`super::uid::job_label`]) and where the secret
//! comes from (given to every PE, or PE 0's own random one served on the Unix socket it names). A
//! connecting PE that disagrees fails at once, naming both sides' values, instead of waiting for
//! a job it does not belong to; it still sends its hello, so that PE 0 logs the refusal too.
//!
//! A client sends `HELLO` (protocol version first, so any later version can still be told apart;
//! then secret, rank, nranks, pid, host identity, the name of its node-local Unix socket). PE 0
//! answers a good hello with `ACCEPTED`, a bad one with `REFUSE` and a reason, and keeps waiting
//! for the right PEs; connections that send no hello are dropped (see `pending.rs`). When all
//! `nranks - 1` have arrived it sends each the `WELCOME` table of every PE. If its deadline passes
//! first it sends `ABORT` naming the ranks that never came.

use super::deadline::deadline_after;
use super::node::HostId;
use super::uid::{hello_proof, nonce, secrets_equal, UniqueId, NONCE_LEN, SECRET_LEN};
use super::pending::Pending;
use super::wire::{
    decode, encode, hello_need, read_frame_until, split_frame, write_frame, Frame, Kind, ReadError, HEADER_LEN,
    PROTOCOL_VERSION,
};
use crate::error::{Error, Result};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// How long PE 0 waits for the hello of a connection it accepted. A real PE sends it right after
/// connecting; this bounds how long a silent stranger keeps a place among the waiting
/// connections (it holds up nobody: hellos are read from all connections at once).
const HELLO_WAIT: Duration = Duration::from_secs(3);

/// Most connections PE 0 keeps waiting for their hello; one more pushes out the oldest (whose PE,
/// if it was a real one, connects again).
const MAX_PENDING: usize = 256;

/// What every PE tells the others about itself.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PeInfo {
    /// Its process id (checked against `SO_PEERCRED` of node-local Unix sockets).
    pub(crate) pid: u32,
    /// Its host.
    pub(crate) host: HostId,
    /// Abstract name of its node-local Unix listener.
    #[serde(with = "serde_bytes")]
    pub(crate) unix_name: Vec<u8>,
}

/// Who a PE believes its job is, beyond the secret: compared between every PE and PE 0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct JobIdent {
    /// [`super::uid::job_label`]: the launcher's identity of the job ("" where none).
    pub(crate) job: String,
    /// Whether this PE takes PE 0's random secret from its Unix socket (an environment job
    /// without `RSHMEM_BOOTSTRAP_SECRET`) rather than holding one of its own.
    pub(crate) secret_from_pe0: bool,
}

/// PE 0's opening message on every connection (a `CHALLENGE` frame).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Preface {
    /// The challenge the hello's proof answers.
    pub(crate) nonce: [u8; NONCE_LEN],
    /// PE 0's PE count.
    pub(crate) nranks: u32,
    /// PE 0's [`JobIdent::job`].
    pub(crate) job: String,
    /// Abstract name of PE 0's secret socket when it serves its own random secret (its name is
    /// random too, so that nobody can take it first), empty when every PE was given the secret.
    #[serde(with = "serde_bytes")]
    pub(crate) socket: Vec<u8>,
}

/// What a connecting PE finds wrong with PE 0's preface, as the message both sides show.
pub(crate) fn disagreement(p: &Preface, rank: usize, nranks: usize, me: &JobIdent, at: &str) -> Option<String> {
    let show = |job: &str| if job.is_empty() { "no launcher job id".to_string() } else { job.to_string() };
    if p.job != me.job {
        return Some(format!(
            "PE 0 at {at} belongs to another job: PE 0 has {}, PE {rank} has {}; two jobs use the same address \
             and port: give each job its own MASTER_PORT (or RSHMEM_BOOTSTRAP_PORT), or the same RSHMEM_JOB_ID to \
             every PE of one job",
            show(&p.job),
            show(&me.job)
        ));
    }
    if p.nranks as usize != nranks {
        return Some(format!(
            "PE 0 at {at} was started for {} PEs, PE {rank} for {nranks} (WORLD_SIZE or its launcher's size \
             differs, or two jobs share the address and port); start every PE with the same WORLD_SIZE",
            p.nranks
        ));
    }
    match (p.socket.is_empty(), me.secret_from_pe0) {
        (true, true) => Some(format!(
            "PE 0 at {at} holds a secret (RSHMEM_BOOTSTRAP_SECRET, or a unique id), PE {rank} has none: give \
             every PE the same RSHMEM_BOOTSTRAP_SECRET (or none of them)"
        )),
        (false, false) => Some(format!(
            "PE 0 at {at} has no RSHMEM_BOOTSTRAP_SECRET (it hands a random secret to its user's processes), \
             PE {rank} holds one: set the same RSHMEM_BOOTSTRAP_SECRET on every PE (or on none of them)"
        )),
        _ => None,
    }
}

/// A client's first message to PE 0, as it travels (the version first, so that a peer of
/// another version is named as such rather than failing somewhere in the parse).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct HelloMsg {
    version: u32,
    /// `uid::hello_proof` of PE 0's challenge, never the secret itself.
    proof: [u8; SECRET_LEN],
    rank: u32,
    nranks: u32,
    info: PeInfo,
    job: String,
    secret_from_pe0: bool,
}

#[derive(Debug)]
pub(crate) struct Hello {
    pub(crate) proof: [u8; SECRET_LEN],
    pub(crate) rank: usize,
    pub(crate) nranks: usize,
    pub(crate) info: PeInfo,
    pub(crate) ident: JobIdent,
}

/// The hello of PE `rank` of `nranks` that answers PE 0's challenge `nonce`.
pub(crate) fn encode_hello(
    uid: &UniqueId,
    nonce: &[u8; NONCE_LEN],
    rank: usize,
    nranks: usize,
    info: &PeInfo,
    ident: &JobIdent,
) -> Vec<u8> {
    encode(&HelloMsg {
        version: PROTOCOL_VERSION,
        proof: hello_proof(&uid.secret, nonce, rank as u32, nranks as u32),
        rank: rank as u32,
        nranks: nranks as u32,
        info: info.clone(),
        job: ident.job.clone(),
        secret_from_pe0: ident.secret_from_pe0,
    })
}

pub(crate) fn decode_hello(payload: &[u8]) -> Result<Hello, String> {
    let version = postcard::take_from_bytes::<u32>(payload).map(|(v, _)| v).map_err(|_| "an empty hello".to_string())?;
    if version != PROTOCOL_VERSION {
        return Err(format!(
            "it speaks bootstrap protocol version {version}, PE 0 speaks {PROTOCOL_VERSION}; \
             run the same rshmem build on every PE"
        ));
    }
    let h: HelloMsg = decode(payload, "hello")?;
    let ident = JobIdent { job: h.job, secret_from_pe0: h.secret_from_pe0 };
    Ok(Hello { proof: h.proof, rank: h.rank as usize, nranks: h.nranks as usize, info: h.info, ident })
}

pub(crate) fn encode_table(table: &[PeInfo]) -> Vec<u8> {
    encode(table)
}

pub(crate) fn decode_table(payload: &[u8], nranks: usize) -> Result<Vec<PeInfo>, String> {
    let table: Vec<PeInfo> = decode(payload, "table of PEs")?;
    if table.len() != nranks {
        return Err(format!("the table lists {} PEs, expected {nranks}", table.len()));
    }
    Ok(table)
}

/// Sets the options every bootstrap connection gets: no Nagle delay (collectives are small and
/// latency bound), and TCP keepalive so that a peer host that vanishes without closing its
/// sockets (power loss, cable) is noticed in about half a minute rather than never.
pub(crate) fn tune(s: &TcpStream) {
    let _ = s.set_nodelay(true);
    let _ = rustix::net::sockopt::set_socket_keepalive(s, true);
    let _ = rustix::net::sockopt::set_tcp_keepidle(s, Duration::from_secs(10));
    let _ = rustix::net::sockopt::set_tcp_keepintvl(s, Duration::from_secs(5));
    let _ = rustix::net::sockopt::set_tcp_keepcnt(s, 3);
}

/// Binds PE 0's listener when [`UniqueId::new`] did not park one in this process (the
/// environment path). An address that is not on this host (`MASTER_ADDR` seen through NAT)
/// falls back to every interface, same port.
pub(crate) fn bind_root(uid: &UniqueId) -> Result<TcpListener> {
    if let Some(l) = super::uid::take_parked(uid) {
        return Ok(l);
    }
    let first = match TcpListener::bind(uid.addr) {
        Ok(l) => return Ok(l),
        Err(e) => e,
    };
    if first.kind() == std::io::ErrorKind::AddrNotAvailable {
        let any: SocketAddr = match uid.addr {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, uid.addr.port()).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, uid.addr.port()).into(),
        };
        if let Ok(l) = TcpListener::bind(any) {
            return Ok(l);
        }
    }
    Err(Error::os(
        format!(
            "PE 0 binding the bootstrap listener on {} (if the port is taken, set \
             RSHMEM_BOOTSTRAP_PORT to a free one; with a UniqueId, make it with UniqueId::new() on \
             the process that is PE 0)",
            uid.addr
        ),
        first,
    ))
}

/// PE 0's side: accepts until every other rank has presented a good hello, then sends the table.
/// Returns one stream per PE (index 0 empty) and the table.
///
/// Hellos are read from every accepted connection at once ([`Pending`]): a connection that
/// sends nothing, too little, or a length above [`super::wire::MAX_HELLO`] within [`HELLO_WAIT`] is dropped
/// without failing anything, and so is the oldest waiting one when [`MAX_PENDING`] wait. A
/// complete hello with a wrong secret, rank or PE count is refused with the reason (a
/// misconfigured PE learns what is wrong) and PE 0 keeps waiting.
#[allow(clippy::too_many_arguments)]
pub(crate) fn accept_all(
    listener: &TcpListener,
    uid: &UniqueId,
    nranks: usize,
    mine: PeInfo,
    job: &str,
    socket: &[u8],
    deadline: Instant,
    timeout: Duration,
) -> Result<(Vec<Option<TcpStream>>, Vec<PeInfo>)> {
    let mut streams: Vec<Option<TcpStream>> = (0..nranks).map(|_| None).collect();
    let mut table: Vec<Option<PeInfo>> = vec![None; nranks];
    table[0] = Some(mine);
    let mut refusals = Refusals::default();
    let mut arrived = 1;
    let mut pending: Pending<TcpStream> = Pending::new(MAX_PENDING, HELLO_WAIT, HEADER_LEN);
    // The challenge sent to each waiting connection, by peer address.
    let mut nonces: std::collections::HashMap<String, [u8; NONCE_LEN]> = std::collections::HashMap::new();
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::os("set the bootstrap listener non-blocking", e))?;
    while arrived < nranks {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let missing: Vec<usize> = (1..nranks).filter(|&r| streams[r].is_none()).collect();
            let mut why = format!(
                "PE 0 gave up after {timeout:?}: ranks {missing:?} of {nranks} never connected to {}",
                uid.addr
            );
            why += &refusals.summary(pending.dropped);
            for s in streams.iter_mut().flatten() {
                let _ = write_frame(s, Kind::ABORT, 0, why.as_bytes());
            }
            return Err(Error::Timeout { what: format!("all PEs to join the bootstrap ({why})"), after: timeout });
        }
        crate::watchdog::check_interrupt("the bootstrap handshake (PE 0 waiting for the other PEs)")?;
        let (ready, hellos) = pending
            .step(listener.as_fd(), left.min(Duration::from_millis(100)), hello_need)
            .map_err(|e| Error::os("poll on the bootstrap listener", e))?;
        if ready {
            // Take every connection queued now; a reset one or a moment without fds is skipped.
            // Each gets a fresh challenge first (a short frame: it fits the new socket's send
            // buffer, so the non-blocking write does not wait); the hello must answer it.
            while let Ok((mut s, peer)) = listener.accept() {
                let challenge = nonce()?;
                let preface = Preface { nonce: challenge, nranks: nranks as u32, job: job.to_string(), socket: socket.to_vec() };
                if s.set_nonblocking(true).is_ok() && write_frame(&mut s, Kind::CHALLENGE, 0, &encode(&preface)).is_ok() {
                    let peer = peer.to_string();
                    nonces.insert(peer.clone(), challenge);
                    pending.add(s, peer);
                }
            }
        }
        for hello in hellos {
            let peer = hello.peer;
            let mut s = hello.stream;
            let challenge = nonces.remove(&peer);
            let verdict = split_frame(&hello.bytes)
                .and_then(|f| decode_hello(&f.payload))
                .and_then(|h| judge(h, uid, challenge.as_ref(), nranks, job, !socket.is_empty(), &table, &peer));
            match verdict {
                Ok(h) => {
                    let ack = s
                        .set_nonblocking(false)
                        .and_then(|()| s.set_write_timeout(Some(HELLO_WAIT)))
                        .and_then(|()| write_frame(&mut s, Kind::ACCEPTED, 0, &[]));
                    if let Err(e) = ack {
                        tracing::warn!(rank = h.rank, %peer, "bootstrap: a PE left right after its hello: {e}");
                        continue;
                    }
                    tune(&s);
                    tracing::debug!(rank = h.rank, %peer, "bootstrap: PE joined");
                    table[h.rank] = Some(h.info);
                    streams[h.rank] = Some(s);
                    arrived += 1;
                }
                Err(why) => {
                    tracing::warn!("bootstrap: refused a connection: {why}");
                    // Best effort, on the non-blocking socket: a short reason fits its buffer.
                    let _ = write_frame(&mut s, Kind::REFUSE, 0, why.as_bytes());
                    refusals.push(why);
                }
            }
        }
        // Challenges of connections that no longer wait (dropped unanswered) are forgotten.
        nonces.retain(|peer, _| pending.holds(peer));
    }
    let table: Vec<PeInfo> = table.into_iter().flatten().collect();
    let welcome = encode_table(&table);
    for (rank, s) in streams.iter_mut().enumerate() {
        if let Some(s) = s {
            let _ = s.set_write_timeout(Some(timeout));
            write_frame(s, Kind::WELCOME, 0, &welcome).map_err(|e| Error::PeerDied {
                pe: rank,
                during: format!("bootstrap connect (sending the PE table failed: {e})"),
            })?;
        }
    }
    Ok((streams, table))
}

/// PE 0's verdict on a hello from `peer`. The job's identity first: a PE of another job (or
/// one told of another PE count or secret) is named as such, with both sides' values.
#[allow(clippy::too_many_arguments)]
fn judge(
    h: Hello,
    uid: &UniqueId,
    challenge: Option<&[u8; NONCE_LEN]>,
    nranks: usize,
    job: &str,
    serves_secret: bool,
    table: &[Option<PeInfo>],
    peer: &str,
) -> Result<Hello, String> {
    let preface = Preface { nonce: [0; NONCE_LEN], nranks: nranks as u32, job: job.to_string(), socket: if serves_secret { vec![0] } else { vec![] } };
    if let Some(why) = disagreement(&preface, h.rank, h.nranks, &h.ident, "this address") {
        return Err(format!("rank {} from {peer}: {why}", h.rank));
    }
    let proved = challenge.is_some_and(|n| secrets_equal(&h.proof, &hello_proof(&uid.secret, n, h.rank as u32, h.nranks as u32)));
    if !proved {
        return Err(format!(
            "wrong secret from {peer} (claiming rank {}): it belongs to another job; give every PE \
             the same unique id / RSHMEM_BOOTSTRAP_SECRET",
            h.rank
        ));
    }
    if h.nranks != nranks {
        return Err(format!(
            "rank {} from {peer} says the job has {} PEs, PE 0 was started with {nranks}; start \
             every PE with the same WORLD_SIZE",
            h.rank, h.nranks
        ));
    }
    if h.rank == 0 || h.rank >= nranks {
        return Err(format!("rank {} from {peer} is not in 1..{nranks}", h.rank));
    }
    if let Some(prev) = &table[h.rank] {
        return Err(format!(
            "rank {} from {peer} (pid {}) is a duplicate: rank {} already joined from pid {} on \
             host {:?}; give every PE its own RANK",
            h.rank, h.info.pid, h.rank, prev.pid, prev.host.hostname
        ));
    }
    Ok(h)
}

/// The first few refusals PE 0 made, for its timeout message; the rest are only counted, so a
/// stranger's flood cannot grow PE 0's memory.
#[derive(Default)]
struct Refusals {
    first: Vec<String>,
    more: usize,
}

impl Refusals {
    const KEEP: usize = 8;

    fn push(&mut self, why: String) {
        if self.first.len() < Self::KEEP {
            self.first.push(why);
        } else {
            self.more += 1;
        }
    }

    fn summary(&self, dropped: usize) -> String {
        let mut s = String::new();
        if !self.first.is_empty() {
            s += &format!("; refused meanwhile: {}", self.first.join("; "));
            if self.more > 0 {
                s += &format!(" (and {} more)", self.more);
            }
        }
        if dropped > 0 {
            s += &format!("; dropped {dropped} connection(s) that sent no valid hello in time");
        }
        s
    }
}

/// A non-zero rank's side: connects to PE 0 (retrying while it is not listening yet), says
/// hello, waits for PE 0 to accept it (connecting again if PE 0 dropped the connection unread),
/// then for the table.
///
/// An environment job without a secret (`uid.fetch_from`) fetches PE 0's random one from the
/// socket PE 0's preface names, once; the secret it used is returned with the table.
pub(crate) fn join(
    uid: &UniqueId,
    rank: usize,
    nranks: usize,
    mine: &PeInfo,
    ident: &JobIdent,
    deadline: Instant,
    timeout: Duration,
) -> Result<(TcpStream, Vec<PeInfo>, [u8; SECRET_LEN])> {
    let mut uid = uid.clone();
    let mut fetched = !uid.secret_from_pe0;
    let text = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    // Wait a little past our own deadline: PE 0 started its clock at another moment, and its
    // verdict (which ranks never came) says more than our own timeout could.
    let grace = (timeout / 2).min(Duration::from_secs(5));
    let verdict_by = deadline_after(deadline, grace);
    let mut pause = Duration::from_millis(5);
    let mut s = loop {
        let mut s = connect(&uid, rank, deadline, timeout)?;
        // PE 0's challenge first; a connection closed before it was dropped unread (retry).
        let challenge = match read_frame_until(&mut s, verdict_by) {
            Ok(Frame { kind: Kind::CHALLENGE, payload, .. }) => match decode::<Preface>(&payload, "challenge") {
                Ok(p) => Some(p),
                Err(why) => {
                    return Err(Error::Refused {
                        reason: format!(
                            "PE 0 at {} sent {why} (another rshmem version? run the same build on every PE)",
                            uid.addr
                        ),
                    })
                }
            },
            Ok(f) => {
                return Err(Error::Refused {
                    reason: format!(
                        "PE 0 at {} opened with a {} instead of a challenge (another rshmem version?)",
                        uid.addr,
                        f.kind.name()
                    ),
                })
            }
            Err(ReadError::Garbage(why)) => {
                return Err(Error::Refused {
                    reason: format!("{} is not an rshmem bootstrap listener ({why}); check the port", uid.addr),
                })
            }
            Err(ReadError::Timeout) => return Err(gather_timeout(&uid, rank, timeout)),
            Err(_) => None,
        };
        let verdict = match challenge {
            Some(p) => {
                let at = uid.addr.to_string();
                if let Some(why) = disagreement(&p, rank, nranks, ident, &at) {
                    // PE 0 hears of it too (it refuses the hello and logs why); this PE is done.
                    let _ = write_frame(&mut s, Kind::HELLO, 0, &encode_hello(&uid, &p.nonce, rank, nranks, mine, ident));
                    return Err(Error::Refused { reason: why });
                }
                if !fetched {
                    uid.secret = super::secret::fetch(&p.socket, rank, deadline, timeout)?;
                    fetched = true;
                }
                write_frame(&mut s, Kind::HELLO, 0, &encode_hello(&uid, &p.nonce, rank, nranks, mine, ident)).map_err(|e| {
                    Error::os(format!("PE {rank} sending its hello to PE 0 at {}", uid.addr), e)
                })?;
                read_frame_until(&mut s, verdict_by)
            }
            None => Err(ReadError::Eof),
        };
        match verdict {
            Ok(Frame { kind: Kind::ACCEPTED, .. }) => break s,
            Ok(Frame { kind: Kind::REFUSE, payload, .. }) => {
                return Err(Error::Refused {
                    reason: format!("PE 0 at {} refused PE {rank}: {}", uid.addr, text(&payload)),
                })
            }
            Ok(Frame { kind: Kind::ABORT, payload, .. }) => {
                return Err(Error::Timeout {
                    what: format!("all PEs to join the bootstrap ({})", text(&payload)),
                    after: timeout,
                })
            }
            Ok(f) => {
                return Err(Error::Refused {
                    reason: format!("PE 0 at {} answered the hello with a {}", uid.addr, f.kind.name()),
                })
            }
            Err(ReadError::Garbage(why)) => {
                return Err(Error::Refused {
                    reason: format!("{} is not an rshmem bootstrap listener ({why}); check the port", uid.addr),
                })
            }
            Err(ReadError::Timeout) => return Err(gather_timeout(&uid, rank, timeout)),
            // Closed unread: PE 0 dropped it among strangers' connections. Connect again.
            Err(e) => {
                tracing::debug!(rank, "bootstrap: PE 0 closed the connection before accepting the hello ({e}); retrying");
                if Instant::now() + pause >= deadline {
                    return Err(Error::Timeout {
                        what: format!(
                            "PE 0 at {} to accept PE {rank}'s hello (it kept closing the connection: {e})",
                            uid.addr
                        ),
                        after: timeout,
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
        }
    };
    match read_frame_until(&mut s, verdict_by) {
        Ok(Frame { kind: Kind::WELCOME, payload, .. }) => {
            let table = decode_table(&payload, nranks).map_err(|why| Error::Refused {
                reason: format!("PE 0 at {} sent a bad PE table: {why}", uid.addr),
            })?;
            Ok((s, table, uid.secret))
        }
        Ok(Frame { kind: Kind::ABORT, payload, .. }) => Err(Error::Timeout {
            what: format!("all PEs to join the bootstrap ({})", text(&payload)),
            after: timeout,
        }),
        Ok(f) => Err(Error::Refused {
            reason: format!("PE 0 at {} sent a {} instead of the PE table", uid.addr, f.kind.name()),
        }),
        Err(ReadError::Timeout) => Err(gather_timeout(&uid, rank, timeout)),
        Err(e) => Err(Error::PeerDied { pe: 0, during: format!("bootstrap connect ({e})") }),
    }
}

fn gather_timeout(uid: &UniqueId, rank: usize, timeout: Duration) -> Error {
    Error::Timeout {
        what: format!("PE 0 at {} to gather every PE (PE {rank} is connected; some other PE is not)", uid.addr),
        after: timeout,
    }
}

/// Connects to PE 0, retrying while it is not listening yet.
fn connect(uid: &UniqueId, rank: usize, deadline: Instant, timeout: Duration) -> Result<TcpStream> {
    let mut pause = Duration::from_millis(5);
    let s = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let last = match TcpStream::connect_timeout(&uid.addr, left.max(Duration::from_millis(1)).min(Duration::from_secs(2))) {
            Ok(s) => break s,
            Err(e) => e,
        };
        if Instant::now() + pause >= deadline {
            return Err(Error::Timeout {
                what: format!(
                    "PE {rank} connecting to PE 0 at {} (last error: {last}); is PE 0 running and is \
                     that address reachable from this host?",
                    uid.addr
                ),
                after: timeout,
            });
        }
        crate::watchdog::check_interrupt("the bootstrap handshake (connecting to PE 0)")?;
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    };
    tune(&s);
    let _ = s.set_write_timeout(Some(timeout));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(pid: u32) -> PeInfo {
        PeInfo {
            pid,
            host: HostId {
                hostname: "h".into(),
                boot_id: "b".into(),
            },
            unix_name: vec![0, 1, 2],
        }
    }

    #[test]
    fn a_pe_of_another_job_count_or_secret_is_named_with_both_values() {
        let ident = |job: &str, from0: bool| JobIdent { job: job.into(), secret_from_pe0: from0 };
        let p = Preface { nonce: [1; NONCE_LEN], nranks: 2, job: "TORCHELASTIC_RUN_ID=a".into(), socket: vec![] };
        assert_eq!(decode::<Preface>(&encode(&p), "challenge").unwrap(), p);
        assert_eq!(disagreement(&p, 1, 2, &ident("TORCHELASTIC_RUN_ID=a", false), "h:1"), None);
        let e = disagreement(&p, 1, 2, &ident("TORCHELASTIC_RUN_ID=b", false), "h:1").unwrap();
        assert!(e.contains("PE 0 has TORCHELASTIC_RUN_ID=a") && e.contains("PE 1 has TORCHELASTIC_RUN_ID=b"), "{e}");
        let e = disagreement(&p, 1, 2, &ident("", false), "h:1").unwrap();
        assert!(e.contains("PE 1 has no launcher job id") && e.contains("RSHMEM_JOB_ID"), "{e}");
        let e = disagreement(&p, 2, 3, &ident("TORCHELASTIC_RUN_ID=a", false), "h:1").unwrap();
        assert!(e.contains("started for 2 PEs, PE 2 for 3") && e.contains("WORLD_SIZE"), "{e}");
        let e = disagreement(&p, 1, 2, &ident("TORCHELASTIC_RUN_ID=a", true), "h:1").unwrap();
        assert!(e.contains("PE 0 at h:1 holds a secret") && e.contains("PE 1 has none"), "{e}");
        let served = Preface { socket: b"rshmem-secret-1-ab".to_vec(), ..p.clone() };
        let e = disagreement(&served, 1, 2, &ident("TORCHELASTIC_RUN_ID=a", false), "h:1").unwrap();
        assert!(e.contains("PE 0 at h:1 has no RSHMEM_BOOTSTRAP_SECRET") && e.contains("PE 1 holds one"), "{e}");
        // PE 0 refuses such a hello the same way, before looking at its proof.
        let uid = UniqueId { addr: "127.0.0.1:1".parse().unwrap(), secret: [3; SECRET_LEN], secret_from_pe0: false };
        let h = decode_hello(&encode_hello(&uid, &[7; NONCE_LEN], 1, 2, &info(5), &ident("x", false))).unwrap();
        let e = judge(h, &uid, Some(&[7; NONCE_LEN]), 2, "y", false, &[Some(info(0)), None], "peer").unwrap_err();
        assert!(e.contains("rank 1 from peer") && e.contains("PE 0 has y, PE 1 has x"), "{e}");
    }

    #[test]
    fn hello_and_table_round_trip() {
        let uid = UniqueId {
            addr: "127.0.0.1:1".parse().unwrap(),
            secret: [3; SECRET_LEN],
            secret_from_pe0: false,
        };
        let h = decode_hello(&encode_hello(&uid, &[7; NONCE_LEN], 2, 5, &info(77), &JobIdent::default())).unwrap();
        let proof = hello_proof(&[3; SECRET_LEN], &[7; NONCE_LEN], 2, 5);
        assert_eq!((h.proof, h.rank, h.nranks, h.info), (proof, 2, 5, info(77)));
        // The hello carries a proof, never the secret; the proof binds the nonce, rank and count.
        assert_ne!(proof, [3; SECRET_LEN]);
        assert!(!encode_hello(&uid, &[7; NONCE_LEN], 2, 5, &info(77), &JobIdent::default()).windows(SECRET_LEN).any(|w| w == [3; SECRET_LEN]));
        for other in [
            hello_proof(&[3; SECRET_LEN], &[8; NONCE_LEN], 2, 5),
            hello_proof(&[3; SECRET_LEN], &[7; NONCE_LEN], 1, 5),
            hello_proof(&[3; SECRET_LEN], &[7; NONCE_LEN], 2, 6),
            hello_proof(&[4; SECRET_LEN], &[7; NONCE_LEN], 2, 5),
        ] {
            assert_ne!(other, proof);
        }
        // The judge accepts the proof for its own challenge only.
        let table = vec![Some(info(0)), None, None, None, None];
        assert!(judge(decode_hello(&encode_hello(&uid, &[7; NONCE_LEN], 2, 5, &info(77), &JobIdent::default())).unwrap(), &uid, Some(&[7; NONCE_LEN]), 5, "", false, &table, "p").is_ok());
        for challenge in [Some(&[8; NONCE_LEN]), None] {
            let h = decode_hello(&encode_hello(&uid, &[7; NONCE_LEN], 2, 5, &info(77), &JobIdent::default())).unwrap();
            assert!(judge(h, &uid, challenge, 5, "", false, &table, "p").unwrap_err().contains("wrong secret"));
        }
        let mut wrong_version = encode_hello(&uid, &[7; NONCE_LEN], 2, 5, &info(77), &JobIdent::default());
        wrong_version[0] = 9;
        assert!(decode_hello(&wrong_version)
            .unwrap_err()
            .contains("version 9"));
        let table = vec![info(1), info(2)];
        assert_eq!(decode_table(&encode_table(&table), 2).unwrap(), table);
        assert!(decode_table(&encode_table(&table), 3).is_err());
    }
}
