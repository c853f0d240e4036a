//! [`LocalExchange`]: passing file descriptors (memory handles) between PEs on one host.
//!
//! Each PE binds a Unix stream listener under a random abstract name (Linux: no file to clean
//! up, gone when the process is) before the bootstrap handshake, and announces the name with its
//! pid. After the handshake the node-local PEs build a full mesh: the PE with the higher local
//! index connects to the lower one's listener and sends its global PE number. Both ends then
//! check the other end's `SO_PEERCRED`: same uid as ours, and the pid that PE announced. Any
//! other process that found the name (abstract names are visible in `/proc/net/unix`) is dropped
//! and the listener keeps waiting for the real PEs, so a stranger can neither join nor abort
//! init.
//! Descriptors travel as `SCM_RIGHTS` on those connections, which gives the receiver its own dup.

use super::deadline::deadline_after;
use super::health::Health;
use super::node::NodeInfo;
use super::pending::{Need, Pending};
use super::rendezvous::PeInfo;
use crate::error::{Error, Result};
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use std::io::{IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a waiting exchange looks at [`Health`] and its deadline.
const POLL: Duration = Duration::from_millis(20);

/// How long a process that connected to the node-local listener has to name its PE.
const HELLO_WAIT: Duration = Duration::from_secs(2);

/// Most connections waiting to name their PE; one more pushes out the oldest.
const MAX_PENDING: usize = 64;

/// Bytes of a descriptor message: collective sequence number, sender's local index.
const MSG_LEN: usize = 8;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This PE's node-local listener, bound before the handshake so that its name can be announced.
pub(crate) struct LocalListener {
    listener: UnixListener,
    name: Vec<u8>,
}

impl LocalListener {
    /// Binds `rshmem-<pid>-<random>` in the abstract namespace.
    pub(crate) fn bind() -> Result<LocalListener> {
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| {
            Error::os(
                "getrandom for the local socket name",
                std::io::Error::other(e.to_string()),
            )
        })?;
        let hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let name = format!("rshmem-{}-{hex}", std::process::id()).into_bytes();
        let addr = SocketAddr::from_abstract_name(&name)
            .map_err(|e| Error::os("make an abstract Unix socket address", e))?;
        let listener = UnixListener::bind_addr(&addr).map_err(|e| {
            Error::os(
                format!(
                    "bind the node-local Unix socket @{}",
                    String::from_utf8_lossy(&name)
                ),
                e,
            )
        })?;
        Ok(LocalListener { listener, name })
    }

    /// The abstract name to announce.
    pub(crate) fn name(&self) -> &[u8] {
        &self.name
    }
}

/// Descriptor exchange among the PEs of one host (see the module docs for the checks made).
#[derive(Debug)]
pub struct LocalExchange {
    rank: usize,
    local_pes: Vec<usize>,
    my_index: usize,
    /// Connection to each node-local peer, by local index (`None` at our own index).
    peers: Vec<Option<UnixStream>>,
    health: Health,
    timeout: Duration,
    seq: Mutex<u32>,
}

impl LocalExchange {
    /// Builds the mesh among the node-local PEs. Collective over them.
    pub(crate) fn connect(
        listener: LocalListener,
        table: &[PeInfo],
        node: &NodeInfo,
        rank: usize,
        health: Health,
        timeout: Duration,
    ) -> Result<LocalExchange> {
        let deadline = deadline_after(Instant::now(), timeout);
        let local_pes = node.local_pes.clone();
        let my_index = node.local_index;
        let mut peers: Vec<Option<UnixStream>> = (0..local_pes.len()).map(|_| None).collect();
        for (j, &pe) in local_pes.iter().enumerate().take(my_index) {
            let name = &table[pe].unix_name;
            let addr = SocketAddr::from_abstract_name(name).map_err(|e| {
                Error::os(format!("make the Unix socket address of local PE {pe}"), e)
            })?;
            let mut s = UnixStream::connect_addr(&addr).map_err(|e| {
                Error::os(
                    format!(
                        "PE {rank} connecting to local PE {pe}'s socket @{} (are the PEs in different \
                         network namespaces?)",
                        String::from_utf8_lossy(name)
                    ),
                    e,
                )
            })?;
            verify_peer(&s, rank, pe, table[pe].pid)?;
            s.write_all(&(rank as u32).to_le_bytes())
                .map_err(|e| Error::PeerDied {
                    pe,
                    during: format!("node-local setup on PE {rank} ({e})"),
                })?;
            peers[j] = Some(s);
        }
        let expected = local_pes.len() - 1 - my_index;
        let mut accepted = 0;
        listener
            .listener
            .set_nonblocking(true)
            .map_err(|e| Error::os("set the local listener non-blocking", e))?;
        // Anyone who finds the abstract name can connect: another user is dropped on the spot
        // (SO_PEERCRED), the rest must name an expected PE within HELLO_WAIT and be that PE's
        // process; whoever is not is dropped and the wait goes on.
        let mut pending: Pending<UnixStream> = Pending::new(MAX_PENDING, HELLO_WAIT, 4);
        let ours = rustix::process::getuid();
        while accepted < expected {
            health.check("node-local setup")?;
            crate::watchdog::check_interrupt("node-local setup")?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let missing: Vec<usize> = (my_index + 1..local_pes.len())
                    .filter(|&j| peers[j].is_none())
                    .map(|j| local_pes[j])
                    .collect();
                return Err(Error::Timeout {
                    what: format!(
                        "node-local PEs {missing:?} to connect to PE {rank}'s Unix socket (dropped \
                         {} other connection(s))",
                        pending.dropped
                    ),
                    after: timeout,
                });
            }
            let (ready, arrived) = pending
                .step(listener.listener.as_fd(), left.min(POLL), |_| Ok(Need::Done))
                .map_err(|e| Error::os("poll on the node-local listener", e))?;
            if ready {
                while let Ok((s, _)) = listener.listener.accept() {
                    match rustix::net::sockopt::socket_peercred(&s) {
                        Ok(cred) if cred.uid == ours => {
                            if s.set_nonblocking(true).is_ok() {
                                pending.add(s, format!("pid {}", cred.pid.as_raw_nonzero()));
                            }
                        }
                        Ok(cred) => tracing::warn!(
                            uid = cred.uid.as_raw(),
                            pid = cred.pid.as_raw_nonzero().get(),
                            "bootstrap: dropped a connection to PE {rank}'s node-local socket from another user"
                        ),
                        Err(e) => tracing::warn!("bootstrap: dropped a node-local connection without credentials: {e}"),
                    }
                }
            }
            for a in arrived {
                let pe = u32::from_le_bytes(a.bytes[..4].try_into().unwrap_or_default()) as usize;
                let j = local_pes.iter().position(|&p| p == pe).filter(|&j| j > my_index && peers[j].is_none());
                let verdict = match j {
                    None => Err(format!(
                        "it claims to be PE {pe}, which is not a node-local PE still expected (local PEs: \
                         {local_pes:?})"
                    )),
                    Some(j) => verify_peer(&a.stream, rank, pe, table[pe].pid).map(|()| j).map_err(|e| e.to_string()),
                };
                match verdict {
                    Ok(j) => {
                        a.stream
                            .set_nonblocking(false)
                            .map_err(|e| Error::os("set a local socket blocking", e))?;
                        peers[j] = Some(a.stream);
                        accepted += 1;
                    }
                    Err(why) => {
                        pending.dropped += 1;
                        tracing::warn!(peer = %a.peer, "bootstrap: dropped a connection to PE {rank}'s node-local socket: {why}");
                    }
                }
            }
        }
        for s in peers.iter().flatten() {
            s.set_read_timeout(Some(POLL))
                .map_err(|e| Error::os("set a local socket's read timeout", e))?;
        }
        Ok(LocalExchange {
            rank,
            local_pes,
            my_index,
            peers,
            health,
            timeout,
            seq: Mutex::new(0),
        })
    }

    /// Sends a dup of `fd` to every other node-local PE and returns what each sent, indexed by
    /// local index (this PE's own entry is `None`). Every node-local PE must call it.
    ///
    /// The peers' credentials were checked when the connections were made: same uid as this
    /// process, and the pid each PE announced in the bootstrap handshake.
    ///
    /// # Errors
    /// [`Error::Refused`] when a peer's credentials do not match (at setup) or it sends something
    /// other than one descriptor; [`Error::PeerDied`] when a peer is gone; [`Error::Timeout`]
    /// after the bootstrap timeout; [`Error::Mismatch`] when a peer is in another exchange.
    pub fn allgather_fds(&self, fd: BorrowedFd<'_>) -> Result<Vec<Option<OwnedFd>>> {
        let mut seq = lock(&self.seq);
        let this = *seq;
        *seq = seq.wrapping_add(1);
        let what = format!("allgather_fds #{this} on PE {}", self.rank);
        self.health.check(&what)?;
        let deadline = deadline_after(Instant::now(), self.timeout);
        let mut msg = [0u8; MSG_LEN];
        msg[..4].copy_from_slice(&this.to_le_bytes());
        msg[4..].copy_from_slice(&(self.my_index as u32).to_le_bytes());
        for (j, s) in self.peers.iter().enumerate() {
            if let Some(s) = s {
                self.send_fd(s, self.local_pes[j], &msg, fd, &what)?;
            }
        }
        let mut out: Vec<Option<OwnedFd>> = (0..self.local_pes.len()).map(|_| None).collect();
        for (j, s) in self.peers.iter().enumerate() {
            if let Some(s) = s {
                out[j] = Some(self.recv_fd(s, j, this, deadline, &what)?);
            }
        }
        Ok(out)
    }

    fn send_fd(
        &self,
        s: &UnixStream,
        pe: usize,
        msg: &[u8],
        fd: BorrowedFd<'_>,
        what: &str,
    ) -> Result<()> {
        let fds = [fd];
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(Error::InvalidArgument(
                "no room for one descriptor in a control message".into(),
            ));
        }
        match sendmsg(s, &[IoSlice::new(msg)], &mut control, SendFlags::NOSIGNAL) {
            Ok(n) if n == msg.len() => Ok(()),
            Ok(n) => Err(Error::PeerDied {
                pe,
                during: format!("{what} (sent {n} of {} bytes)", msg.len()),
            }),
            Err(e) => {
                self.health.check(what)?;
                Err(Error::PeerDied {
                    pe,
                    during: format!("{what} (sendmsg failed: {e})"),
                })
            }
        }
    }

    fn recv_fd(
        &self,
        s: &UnixStream,
        j: usize,
        seq: u32,
        deadline: Instant,
        what: &str,
    ) -> Result<OwnedFd> {
        let pe = self.local_pes[j];
        let mut buf = [0u8; MSG_LEN];
        let mut got = 0;
        let mut fds: Vec<OwnedFd> = Vec::new();
        while got < MSG_LEN {
            let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(4))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let r = recvmsg(
                s,
                &mut [IoSliceMut::new(&mut buf[got..])],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            );
            match r {
                Ok(r) if r.bytes == 0 => {
                    self.health.check(what)?;
                    return Err(Error::PeerDied {
                        pe,
                        during: format!("{what} (its socket closed)"),
                    });
                }
                Ok(r) => {
                    got += r.bytes;
                    for m in control.drain() {
                        if let RecvAncillaryMessage::ScmRights(rights) = m {
                            fds.extend(rights);
                        }
                    }
                    if r.flags.contains(ReturnFlags::CTRUNC) {
                        return Err(Error::Refused {
                            reason: format!("{what}: local PE {pe} sent more descriptors than one"),
                        });
                    }
                }
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {
                    self.health.check(what)?;
                    crate::watchdog::check_interrupt(what)?;
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout {
                            what: format!("{what}: local PE {pe} to send its descriptor"),
                            after: self.timeout,
                        });
                    }
                }
                Err(e) => {
                    self.health.check(what)?;
                    return Err(Error::PeerDied {
                        pe,
                        during: format!("{what} (recvmsg failed: {e})"),
                    });
                }
            }
        }
        let their_seq = u32::from_le_bytes(buf[..4].try_into().unwrap_or_default());
        let their_index = u32::from_le_bytes(buf[4..].try_into().unwrap_or_default()) as usize;
        if their_seq != seq || their_index != j {
            return Err(Error::Mismatch {
                what: "node-local descriptor exchange",
                me: self.rank,
                pe,
                mine: format!("exchange #{seq} expecting local index {j}"),
                theirs: format!("exchange #{their_seq} from local index {their_index}"),
            });
        }
        let count = fds.len();
        match (fds.pop(), count) {
            (Some(fd), 1) => Ok(fd),
            _ => Err(Error::Refused {
                reason: format!("{what}: local PE {pe} sent {count} descriptors, expected 1"),
            }),
        }
    }
}

/// Checks that the process at the other end of `s` runs as our uid and is the pid `pe`
/// announced in the handshake.
fn verify_peer(s: &UnixStream, rank: usize, pe: usize, announced_pid: u32) -> Result<()> {
    let cred = rustix::net::sockopt::socket_peercred(s)
        .map_err(|e| Error::os(format!("SO_PEERCRED of local PE {pe}'s socket"), e))?;
    let ours = rustix::process::getuid();
    if cred.uid != ours {
        return Err(Error::Refused {
            reason: format!(
                "the process behind local PE {pe}'s socket runs as uid {}, PE {rank} as uid {}; all PEs \
                 of a host must run as one user",
                cred.uid.as_raw(),
                ours.as_raw()
            ),
        });
    }
    let pid = cred.pid.as_raw_nonzero().get();
    if i64::from(pid) != i64::from(announced_pid) {
        return Err(Error::Refused {
            reason: format!(
                "the process behind local PE {pe}'s socket is pid {pid}, but PE {pe} announced pid \
                 {announced_pid} in the bootstrap handshake (another process holds its socket, or the \
                 PEs are in different pid namespaces)"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::node::HostId;
    use super::*;
    use std::os::fd::AsFd;

    fn info(l: &LocalListener, pid: u32) -> PeInfo {
        PeInfo {
            pid,
            host: HostId {
                hostname: "h".into(),
                boot_id: "b".into(),
            },
            unix_name: l.name().to_vec(),
        }
    }

    /// Two "PEs" as two threads of this process: both ends see this pid and uid.
    fn pair(pid_of_pe0: u32) -> (Result<LocalExchange>, Result<LocalExchange>) {
        let (l0, l1) = (
            LocalListener::bind().unwrap(),
            LocalListener::bind().unwrap(),
        );
        let table = vec![info(&l0, pid_of_pe0), info(&l1, std::process::id())];
        let hosts = [table[0].host.clone(), table[1].host.clone()];
        let t1 = table.clone();
        let h = std::thread::spawn(move || {
            let node = NodeInfo::from_hosts(&hosts, 1);
            LocalExchange::connect(l1, &t1, &node, 1, Health::new(), Duration::from_secs(2))
        });
        let node = NodeInfo::from_hosts(&[table[0].host.clone(), table[1].host.clone()], 0);
        let a = LocalExchange::connect(l0, &table, &node, 0, Health::new(), Duration::from_secs(2));
        (a, h.join().unwrap())
    }

    #[test]
    fn exchanges_descriptors_between_threads() {
        let (a, b) = pair(std::process::id());
        let (a, b) = (a.unwrap(), b.unwrap());
        let h = std::thread::spawn(move || {
            let mut f = tempfile_with(b"one");
            let got = b.allgather_fds(f.as_fd()).unwrap();
            f.flush().unwrap();
            read_all(got.into_iter().next().unwrap().unwrap())
        });
        let f = tempfile_with(b"zero");
        let got = a.allgather_fds(f.as_fd()).unwrap();
        assert!(got[0].is_none());
        assert_eq!(read_all(got.into_iter().nth(1).unwrap().unwrap()), b"one");
        assert_eq!(h.join().unwrap(), b"zero");
    }

    /// Strangers on PE 0's abstract socket (silent, or naming a PE that is
    /// not expected) are dropped and the real PE still gets in.
    #[test]
    fn strangers_on_the_local_socket_are_dropped() {
        let (l0, l1) = (LocalListener::bind().unwrap(), LocalListener::bind().unwrap());
        let table = vec![info(&l0, std::process::id()), info(&l1, std::process::id())];
        let hosts = [table[0].host.clone(), table[1].host.clone()];
        let addr = SocketAddr::from_abstract_name(l0.name()).unwrap();
        let _silent = UnixStream::connect_addr(&addr).unwrap();
        let mut liar = UnixStream::connect_addr(&addr).unwrap();
        liar.write_all(&7u32.to_le_bytes()).unwrap();
        let t1 = table.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let node = NodeInfo::from_hosts(&hosts, 1);
            LocalExchange::connect(l1, &t1, &node, 1, Health::new(), Duration::from_secs(5))
        });
        let node = NodeInfo::from_hosts(&[table[0].host.clone(), table[1].host.clone()], 0);
        let a = LocalExchange::connect(l0, &table, &node, 0, Health::new(), Duration::from_secs(5)).unwrap();
        let b = h.join().unwrap().unwrap();
        assert!(a.peers[1].is_some() && b.peers[0].is_some());
    }

    #[test]
    fn wrong_announced_pid_is_refused() {
        let (_a, b) = pair(1);
        let err = b.unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(err.to_string().contains("announced pid 1"), "{err}");
    }

    fn tempfile_with(bytes: &[u8]) -> std::fs::File {
        let fd = rustix::fs::memfd_create("rshmem-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let mut f = std::fs::File::from(fd);
        f.write_all(bytes).unwrap();
        f
    }

    fn read_all(fd: OwnedFd) -> Vec<u8> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::from(fd);
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut v = Vec::new();
        f.read_to_end(&mut v).unwrap();
        v
    }
}
