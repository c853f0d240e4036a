//! Bootstrap: how PEs find each other before any memory is shared.
//!
//! | file | what it holds |
//! |---|---|
//! | `uid.rs` | [`UniqueId`]: PE 0's address + a secret; from PE 0 ([`UniqueId::new`]) or from torchrun / mpirun variables |
//! | `secret.rs` | the secret of a job started from the environment alone: PE 0's random one, handed to its user's processes over a Unix socket |
//! | `wire.rs` | framing of TCP messages |
//! | `pending.rs` | connections whose first message has not arrived, read all at once within bounds (strangers cannot stall init) |
//! | `rendezvous.rs` | the handshake: hello, refusal, the table of every PE |
//! | `tcp.rs` | allgather / broadcast / barrier through PE 0, and the watcher threads |
//! | `health.rs` | [`Health`]: which peer died, one atomic load to check |
//! | `node.rs` | [`NodeInfo`]: which PEs share a host |
//! | `local.rs` | [`LocalExchange`]: file descriptors over Unix sockets among a host's PEs |
//! | `fuzz.rs` | property tests of every parser of network bytes |
//!
//! Who may join, and what is refused how, is written down in `docs/security.md`.
//!
//! Every PE holds one TCP connection to PE 0. The connections carry the collectives (through PE
//! 0, so each costs two hops) and double as liveness watches: when a process dies, however it
//! dies, the kernel closes its sockets; PE 0 sees the end-of-file and tells every other PE, and a
//! PE that sees PE 0's connection close knows PE 0 is gone. Collectives then fail with
//! [`crate::Error::PeerDied`] naming the PE instead of hanging, and so does
//! [`Health::check`] in any spin-wait. A PE that finalizes first announces that it leaves
//! ([`Bootstrap::leave`]): the others' blocking calls fail with [`crate::Error::PeerExited`]
//! instead of waiting for it, and its goodbye keeps it from being reported dead.
//!
//! What it does not guard against: a dead PE whose sockets stay open because a child process
//! forked from it (e.g. a data-loader worker) still holds them; TCP keepalive covers a host that
//! vanishes (about 25 s), nothing covers a live but stuck PE except the collective timeout.

#[cfg(test)]
mod fuzz;
mod deadline;
mod health;
mod local;
mod node;
mod pending;
mod rendezvous;
mod secret;
mod tcp;
mod uid;
mod wire;

pub use health::{DepartureNotifier, Health};
pub use local::LocalExchange;
pub use node::NodeInfo;
pub use uid::UniqueId;

use crate::error::{Error, Result};
use deadline::deadline_after;
use local::LocalListener;
use node::HostId;
use rendezvous::{JobIdent, PeInfo};
use std::time::{Duration, Instant};
use tcp::Star;

/// A connected set of PEs: byte-blob collectives, peer-death watch, host layout, fd passing.
///
/// Dropping it without [`Bootstrap::finalize`] closes the connections, which the other PEs
/// report as this PE's death.
pub struct Bootstrap {
    rank: usize,
    nranks: usize,
    health: Health,
    node: NodeInfo,
    local: LocalExchange,
    star: Star,
    /// The job's secret (the unique id's), which the network transport's messages carry.
    secret: [u8; uid::SECRET_LEN],
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("rank", &self.rank)
            .field("nranks", &self.nranks)
            .field("node", &self.node)
            .field("dead_pe", &self.health.dead_pe())
            .finish()
    }
}

/// `uid` with its secret as PE 0 holds it: as given, or for an environment id, PE 0's random one
/// (served by the returned server while it lives, on a socket of random name that the preface
/// names). Another PE keeps the id as it is: it fetches the secret once PE 0's preface has named
/// the socket (`rendezvous::join`).
fn resolve_secret(uid: &UniqueId, rank: usize, nranks: usize) -> Result<(UniqueId, Option<secret::SecretServer>)> {
    if !uid.secret_from_pe0 || nranks == 1 {
        return Ok((UniqueId { secret_from_pe0: false, ..uid.clone() }, None));
    }
    if rank == 0 {
        let mut resolved = UniqueId { addr: uid.addr, secret: [0; uid::SECRET_LEN], secret_from_pe0: false };
        getrandom::fill(&mut resolved.secret).map_err(|e| {
            Error::os("getrandom for the bootstrap secret", std::io::Error::other(e.to_string()))
        })?;
        let server = secret::serve(&secret::socket_name()?, resolved.secret)?;
        return Ok((resolved, Some(server)));
    }
    // PE 0's socket is reachable only from PE 0's host: say so at once rather than after the
    // timeout when MASTER_ADDR is certainly another host's address.
    if std::net::UdpSocket::bind((uid.addr.ip(), 0)).is_err_and(|e| e.kind() == std::io::ErrorKind::AddrNotAvailable) {
        return Err(Error::Config {
            var: "RSHMEM_BOOTSTRAP_SECRET",
            value: String::new(),
            reason: format!(
                "PE {rank} is not on PE 0's host ({}), and without a secret rshmem trusts only \
                 processes of the same user on PE 0's host; give every PE the same private \
                 RSHMEM_BOOTSTRAP_SECRET, or call rshmem.init() after torch.distributed",
                uid.addr.ip()
            ),
        });
    }
    Ok((uid.clone(), None))
}

impl Bootstrap {
    /// Joins the job as PE `rank` of `nranks` (`nvshmemx_init_attr` with a unique id). Every PE
    /// must call it.
    ///
    /// PE 0 accepts the other `nranks - 1` on the listener [`UniqueId::new`] parked in this
    /// process, or binds the id's address itself (the environment path). The others connect,
    /// retrying until `timeout` while PE 0 is not up yet. The handshake carries the secret, rank,
    /// PE count and protocol version; PE 0 refuses a wrong secret, a duplicate rank or another PE
    /// count and keeps waiting for the right PEs. It then exchanges host identities to build
    /// [`NodeInfo`], and connects the node-local PEs for [`LocalExchange`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `rank >= nranks`; [`Error::Refused`] on the PE that PE 0
    /// refused (with PE 0's reason); [`Error::Timeout`] when PE 0 is unreachable or some rank
    /// never arrives (PE 0's message lists the missing ranks and what it refused; the other PEs
    /// wait up to half the timeout, at most 5 s, past their own deadline to relay that message);
    /// [`Error::PeerDied`] when PE 0 goes away during the handshake; [`Error::Os`] when a socket
    /// cannot be bound.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/setup.html#nvshmemx-init-attr>
    #[doc(alias = "nvshmemx_init_attr")]
    pub fn connect(
        uid: &UniqueId,
        rank: usize,
        nranks: usize,
        timeout: Duration,
    ) -> Result<Bootstrap> {
        Self::connect_with(uid, rank, nranks, timeout, 1)
    }

    /// [`Bootstrap::connect`] with this PE placed on one of `virtual_hosts` virtual hosts of
    /// its machine (`RSHMEM_VIRTUAL_HOSTS`): PE `rank` announces host `rank * virtual_hosts /
    /// nranks`, so consecutive ranks share a virtual host (as `torchrun --nnodes` numbers them),
    /// and PEs on other virtual hosts are never node-local (no shared memory, no fd passing:
    /// they are reached through the network transport). 0 and 1 mean no virtual hosts.
    ///
    /// # Errors
    /// As [`Bootstrap::connect`].
    pub fn connect_with(
        uid: &UniqueId,
        rank: usize,
        nranks: usize,
        timeout: Duration,
        virtual_hosts: usize,
    ) -> Result<Bootstrap> {
        if nranks == 0 || rank >= nranks {
            return Err(Error::InvalidArgument(format!(
                "bootstrap rank {rank} of {nranks} PEs: the rank must be in 0..nranks and nranks above 0"
            )));
        }
        let started = Instant::now();
        let deadline = deadline_after(started, timeout);
        // An id from the bare environment has no secret yet: PE 0 makes one and serves it to its
        // user's processes until the handshake is over (`secret.rs`).
        let (uid, server) = resolve_secret(uid, rank, nranks)?;
        let uid = &uid;
        let ident = JobIdent { job: uid::job_label(), secret_from_pe0: uid.secret_from_pe0 };
        let health = Health::new();
        let listener = LocalListener::bind()?;
        let mine = PeInfo {
            pid: std::process::id(),
            host: HostId::current().virtual_host(rank, nranks, virtual_hosts),
            unix_name: listener.name().to_vec(),
        };
        let mut secret = uid.secret;
        let (streams, table) = if nranks == 1 {
            // Alone: nothing to connect; drop the id's parked listener if there is one.
            drop(uid::take_parked(uid));
            (vec![None], vec![mine])
        } else if rank == 0 {
            let tcp = rendezvous::bind_root(uid)?;
            let socket = server.as_ref().map(|s| s.name().to_vec()).unwrap_or_default();
            rendezvous::accept_all(&tcp, uid, nranks, mine, &ident.job, &socket, deadline, timeout)?
        } else {
            let (s, table, fetched) = rendezvous::join(uid, rank, nranks, &mine, &ident, deadline, timeout)?;
            secret = fetched;
            let mut streams: Vec<_> = (0..nranks).map(|_| None).collect();
            streams[0] = Some(s);
            (streams, table)
        };
        drop(server);
        let star = Star::start(rank, nranks, streams, health.clone(), timeout)?;
        let hosts: Vec<HostId> = table.iter().map(|p| p.host.clone()).collect();
        let node = NodeInfo::from_hosts(&hosts, rank);
        let local = LocalExchange::connect(listener, &table, &node, rank, health.clone(), timeout)?;
        tracing::debug!(rank, nranks, local = ?node.local_pes, elapsed = ?started.elapsed(), "bootstrap: connected");
        Ok(Bootstrap {
            rank,
            nranks,
            health,
            node,
            local,
            star,
            secret,
        })
    }

    /// This PE's number (`nvshmem_my_pe`).
    #[doc(alias = "nvshmem_my_pe")]
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many PEs the job has (`nvshmem_n_pes`).
    #[doc(alias = "nvshmem_n_pes")]
    pub fn nranks(&self) -> usize {
        self.nranks
    }

    /// Every PE's blob, indexed by PE; blobs may differ in length. Every PE must call it.
    ///
    /// # Errors
    /// [`Error::PeerDied`] naming a dead PE; [`Error::Timeout`] naming the collective when a PE
    /// does not join within the bootstrap timeout; [`Error::Mismatch`] when PEs call different
    /// collectives.
    pub fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.star.allgather(mine)
    }

    /// PE `root`'s `data` on every PE (`data` is ignored elsewhere). Every PE must call it with
    /// the same `root`.
    ///
    /// # Errors
    /// As [`Bootstrap::allgather`], and [`Error::PeOutOfRange`] for a bad `root`.
    pub fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>> {
        self.star.broadcast(root, data)
    }

    /// Ends the job: every PE's process exits with `status` (NVSHMEM's `global_exit`); this one
    /// too, last.
    pub fn global_exit(&self, status: i32) -> ! {
        self.star.global_exit(status)
    }

    /// Returns once every PE has called it. Every PE must call it.
    ///
    /// # Errors
    /// As [`Bootstrap::allgather`].
    pub fn barrier(&self) -> Result<()> {
        self.star.barrier()
    }

    /// The peer-death state, to check in spin loops.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Which PEs share this host.
    pub fn node(&self) -> &NodeInfo {
        &self.node
    }

    /// The job's secret: only PEs that presented it joined (the network transport's messages
    /// carry it, `crate::transport`).
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// File-descriptor exchange among this host's PEs.
    pub fn local(&self) -> &LocalExchange {
        &self.local
    }

    /// Announces to every PE that this one leaves the job, saying `how` ("finalize", "exit after
    /// an uncaught KeyError: ..."), then waits until every PE has announced it too. Not a
    /// barrier: no [`Bootstrap::barrier`] or collective of a peer matches it; a peer blocked in
    /// one instead fails with [`Error::PeerExited`] naming this PE and `how`. Done once.
    ///
    /// # Errors
    /// [`Error::PeerDied`] when a PE died instead; [`Error::Timeout`] naming the PEs that did
    /// not begin their finalize within the bootstrap timeout.
    pub fn leave(&self, how: &str) -> Result<()> {
        self.star.leave(how)
    }

    /// Clean shutdown (`nvshmem_finalize`): [`Bootstrap::leave`] when not done yet, then a
    /// goodbye so that no PE reports this one as dead; stops the watcher threads. Every PE must
    /// call it.
    ///
    /// # Errors
    /// As [`Bootstrap::leave`]; the connections are closed either way.
    #[doc(alias = "nvshmem_finalize")]
    pub fn finalize(self) -> Result<()> {
        let Bootstrap { star, local, .. } = self;
        let r = star.finalize();
        drop(local);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shareable_across_threads() {
        fn check<T: Send + Sync>() {}
        check::<Bootstrap>();
        check::<Health>();
        check::<LocalExchange>();
    }

    /// Several PEs as threads of one process (how other modules can test without a harness).
    #[test]
    fn pes_as_threads() {
        use std::os::fd::AsFd;
        let uid = UniqueId::new().unwrap();
        let n = 3;
        let threads: Vec<_> = (0..n)
            .map(|pe| {
                let uid = uid.clone();
                std::thread::spawn(move || {
                    let b = Bootstrap::connect(&uid, pe, n, Duration::from_secs(20)).unwrap();
                    let all = b.allgather(&[pe as u8; 3]).unwrap();
                    assert_eq!(all, (0..n).map(|q| vec![q as u8; 3]).collect::<Vec<_>>());
                    assert_eq!(b.broadcast(2, &[pe as u8]).unwrap(), vec![2]);
                    let fd =
                        rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
                    let got = b.local().allgather_fds(fd.as_fd()).unwrap();
                    assert_eq!(got.iter().filter(|f| f.is_some()).count(), n - 1);
                    assert!(got[pe].is_none());
                    b.finalize().unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// 100 silent connections and one announcing a 2^62-byte hello (then
    /// sending data) neither stall PE 0 nor grow its memory; the job forms at once.
    #[test]
    fn silent_and_huge_connections_do_not_stall_init() {
        use std::io::{Read, Write};
        use std::net::TcpStream;
        let uid = UniqueId::new().unwrap();
        let silent: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(uid.addr).unwrap()).collect();
        let mut huge = TcpStream::connect(uid.addr).unwrap();
        let mut header = [0u8; wire::HEADER_LEN];
        header[..4].copy_from_slice(b"RSHB");
        header[4] = wire::Kind::HELLO.0;
        header[12..20].copy_from_slice(&(1u64 << 62).to_le_bytes());
        huge.write_all(&header).unwrap();
        let _ = huge.write_all(&[0x55; 64 << 10]);
        let t0 = Instant::now();
        let n = 3;
        let threads: Vec<_> = (0..n)
            .map(|pe| {
                let uid = uid.clone();
                std::thread::spawn(move || {
                    let b = Bootstrap::connect(&uid, pe, n, Duration::from_secs(20)).unwrap();
                    assert_eq!(b.allgather(&[pe as u8]).unwrap(), vec![vec![0], vec![1], vec![2]]);
                    b.finalize().unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "init took {:?}", t0.elapsed());
        // PE 0 closed the huge one without reading its payload into memory; all it ever sent
        // was its challenge.
        huge.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            match huge.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => got.extend_from_slice(&buf[..k]),
            }
                assert!(got.len() <= 256, "still open, {} bytes sent", got.len());
        }
        assert_eq!(got[4], wire::Kind::CHALLENGE.0, "PE 0 sends its challenge first");
        let challenge = wire::split_frame(&got).unwrap();
        let preface: rendezvous::Preface = wire::decode(&challenge.payload, "challenge").unwrap();
        assert_eq!(preface.nranks, 3);
        drop(silent);
    }

    #[test]
    fn huge_timeouts_do_not_overflow() {
        let now = Instant::now();
        assert!(deadline_after(now, Duration::MAX) > now + Duration::from_secs(1 << 30));
        assert_eq!(
            deadline_after(now, Duration::from_secs(3)),
            now + Duration::from_secs(3)
        );
        let uid = UniqueId::new().unwrap();
        let b = Bootstrap::connect(&uid, 0, 1, Duration::MAX).unwrap();
        b.barrier().unwrap();
        b.finalize().unwrap();
    }
}
