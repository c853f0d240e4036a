//! [`UniqueId`]: where PE 0 listens and the secret every PE must present.
//!
//! Two ways to get one: [`UniqueId::new`] on the process that will be PE 0 (the id's bytes are then
//! handed to the others by torch.distributed, mpi4py, a file...), or [`UniqueId::from_env`] on
//! every PE of a torchrun / mpirun job.

use crate::env::Env;
use crate::error::{Error, Result};
use std::net::{
    IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, TcpListener, ToSocketAddrs, UdpSocket,
};
use std::sync::Mutex;

/// Length of the secret.
pub(crate) const SECRET_LEN: usize = 16;

/// Encoding: magic, version, family, port, 16 address bytes, IPv6 scope id, secret.
const ENCODED_LEN: usize = 4 + 1 + 1 + 2 + 16 + 4 + SECRET_LEN;
const MAGIC: [u8; 4] = *b"RSHM";
const ENCODING_VERSION: u8 = 1;

/// The address of PE 0's bootstrap listener and a random 16-byte secret.
///
/// The NVSHMEM equivalent is `nvshmemx_uniqueid_t`. Cheap to copy; its `Debug` form hides the
/// secret.
#[doc(alias = "nvshmemx_uniqueid_t")]
#[derive(Clone, PartialEq, Eq)]
pub struct UniqueId {
    pub(crate) addr: SocketAddr,
    pub(crate) secret: [u8; SECRET_LEN],
    /// For an id from the launcher's environment without `RSHMEM_BOOTSTRAP_SECRET`: PE 0 hands
    /// out the real secret to processes of its user, on the socket its preface names
    /// (`secret.rs`); `secret` is not set until then.
    pub(crate) secret_from_pe0: bool,
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UniqueId")
            .field("addr", &self.addr)
            .field("secret", &if self.secret_from_pe0 { "<from PE 0>" } else { "<hidden>" })
            .finish()
    }
}

/// Listeners bound by [`UniqueId::new`], waiting for `Bootstrap::connect` with rank 0 in this
/// process. Keyed by the whole id, so two ids made in one process never get each other's socket.
static PARKED: Mutex<Vec<(UniqueId, TcpListener)>> = Mutex::new(Vec::new());

/// Takes the listener that [`UniqueId::new`] parked for `uid`, if this process made it.
pub(crate) fn take_parked(uid: &UniqueId) -> Option<TcpListener> {
    let mut parked = PARKED.lock().unwrap_or_else(|p| p.into_inner());
    let i = parked.iter().position(|(id, _)| id == uid)?;
    Some(parked.swap_remove(i).1)
}

impl UniqueId {
    /// Bytes of [`UniqueId::to_bytes`]: the same for every id of this encoding version (C
    /// programs hold an id in a fixed array of at least this size).
    pub const ENCODED_LEN: usize = ENCODED_LEN;

    /// Makes a new id on the process that will be PE 0 (`nvshmemx_get_uniqueid`).
    ///
    /// Binds a TCP listener on port 0 of this host's routable address (the source address of
    /// the default route; 127.0.0.1 when there is none) and keeps it for the later
    /// `Bootstrap::connect(&id, 0, ..)` in this process.
    ///
    /// # Errors
    /// [`Error::Os`] when no listener can be bound or no random secret can be drawn.
    #[doc(alias = "nvshmemx_get_uniqueid")]
    pub fn new() -> Result<UniqueId> {
        let ip = routable_ip();
        let listener = TcpListener::bind((ip, 0))
            .or_else(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .map_err(|e| Error::os(format!("bind the bootstrap listener on {ip}:0"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::os("getsockname of the bootstrap listener", e))?;
        let mut secret = [0u8; SECRET_LEN];
        getrandom::fill(&mut secret).map_err(|e| {
            Error::os(
                "getrandom for the bootstrap secret",
                std::io::Error::other(e.to_string()),
            )
        })?;
        let uid = UniqueId { addr, secret, secret_from_pe0: false };
        tracing::debug!(%addr, "bootstrap: unique id made, listener parked");
        PARKED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((uid.clone(), listener));
        Ok(uid)
    }

    /// The fixed-size (44 bytes), versioned encoding, to hand to the other PEs. (An id read from
    /// the environment without a secret has none to encode yet: its PEs fetch it from PE 0.)
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(ENCODED_LEN);
        b.extend_from_slice(&MAGIC);
        b.push(ENCODING_VERSION);
        let (family, ip, scope) = match self.addr {
            SocketAddr::V4(a) => {
                let mut ip = [0u8; 16];
                ip[..4].copy_from_slice(&a.ip().octets());
                (4u8, ip, 0u32)
            }
            SocketAddr::V6(a) => (6u8, a.ip().octets(), a.scope_id()),
        };
        b.push(family);
        b.extend_from_slice(&self.addr.port().to_be_bytes());
        b.extend_from_slice(&ip);
        b.extend_from_slice(&scope.to_le_bytes());
        b.extend_from_slice(&self.secret);
        b
    }

    /// Decodes [`UniqueId::to_bytes`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the bytes are not an id of this encoding version.
    pub fn from_bytes(b: &[u8]) -> Result<UniqueId> {
        let bad = |why: String| Error::InvalidArgument(format!("not an rshmem unique id: {why}"));
        if b.len() != ENCODED_LEN {
            return Err(bad(format!("{} bytes, an id has {ENCODED_LEN}", b.len())));
        }
        if b[..4] != MAGIC {
            return Err(bad(format!("bad magic {:02x?}", &b[..4])));
        }
        if b[4] != ENCODING_VERSION {
            return Err(bad(format!(
                "encoding version {} (this build reads {ENCODING_VERSION}); use the same rshmem on every PE",
                b[4]
            )));
        }
        let port = u16::from_be_bytes([b[6], b[7]]);
        if port == 0 {
            return Err(bad("port 0".into()));
        }
        let ip: [u8; 16] = b[8..24]
            .try_into()
            .map_err(|_| bad("short address".into()))?;
        let scope = u32::from_le_bytes(
            b[24..28]
                .try_into()
                .map_err(|_| bad("short scope".into()))?,
        );
        let addr = match b[5] {
            4 if ip[4..].iter().all(|&x| x == 0) && scope == 0 => {
                SocketAddr::from((Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]), port))
            }
            6 => SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, 0, scope)),
            f => {
                return Err(bad(format!(
                    "address family byte {f} with address {ip:02x?}"
                )))
            }
        };
        let secret = b[28..].try_into().map_err(|_| bad("short secret".into()))?;
        Ok(UniqueId { addr, secret, secret_from_pe0: false })
    }

    /// Builds the id, rank and PE count from a torchrun or mpirun environment.
    ///
    /// Reads `MASTER_ADDR`, `RSHMEM_BOOTSTRAP_PORT` (default `MASTER_PORT + 1`, since torchrun's
    /// agent already listens on `MASTER_PORT`), and `RANK`/`WORLD_SIZE` (or
    /// `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`, or `PMI_RANK`/`PMI_SIZE`). The secret is
    /// `RSHMEM_BOOTSTRAP_SECRET` if set (one private value given to every PE). Otherwise nothing
    /// in the environment is private, so no secret is derived from it: PE 0 draws a random one at
    /// `Bootstrap::connect` and hands it only to processes of its own user on its host, over a
    /// Unix socket named after `TORCHELASTIC_RUN_ID`, `MASTER_ADDR`, the port and `WORLD_SIZE`
    /// (see `secret.rs` and `docs/security.md`); PEs on other hosts then need
    /// `RSHMEM_BOOTSTRAP_SECRET`.
    ///
    /// # Errors
    /// [`Error::Config`] naming a variable with a bad value, or `MASTER_PORT` when neither port
    /// variable is set. `Ok(None)` when `MASTER_ADDR` or the rank and size are absent.
    pub fn from_env() -> Result<Option<(UniqueId, usize, usize)>> {
        from_lookup(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }
}

/// [`UniqueId::from_env`] over any variable lookup (unit tests pass a map).
pub(crate) fn from_lookup(
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<(UniqueId, usize, usize)>> {
    let families = [
        ("RANK", "WORLD_SIZE"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
    ];
    let Some(master) = get("MASTER_ADDR") else {
        // mpirun says how many PEs there are but not where PE 0 listens: without an address
        // each process would silently become a job of its own.
        // (torchrun always sets MASTER_ADDR; RANK/WORLD_SIZE alone may come from elsewhere.)
        if let Some((size_var, size)) = families[1..]
            .iter()
            .find_map(|&(_, s)| get(s).map(|v| (s, v)))
            .filter(|(_, v)| v.trim().parse::<usize>().is_ok_and(|n| n > 1))
        {
            return Err(Error::Config {
                var: "MASTER_ADDR",
                value: String::new(),
                reason: format!(
                    "{size_var}={size} says this process is one of {size} PEs, but MASTER_ADDR is not set, so \
                     PE 0's address is unknown: export MASTER_ADDR and MASTER_PORT to every PE (mpirun -x \
                     MASTER_ADDR -x MASTER_PORT), or init with a unique id shared over MPI (rshmem_mpi.h, \
                     the mpi feature, mpi_comm= in Python)"
                ),
            });
        }
        return Ok(None);
    };
    let Some(&(rank_var, size_var)) = families.iter().find(|(r, _)| get(r).is_some()) else {
        return Ok(None);
    };
    let Some(size_text) = get(size_var) else {
        return Ok(None);
    };
    let rank = parse_num(rank_var, get(rank_var).unwrap_or_default())?;
    let nranks = parse_num(size_var, size_text.clone())?;
    if nranks == 0 || rank >= nranks {
        return Err(Error::Config {
            var: rank_var,
            value: rank.to_string(),
            reason: format!("must be below {size_var}={nranks} (and {size_var} above 0)"),
        });
    }
    let rshmem = Env::from_lookup(&get)?;
    let port = match (rshmem.bootstrap_port, get("MASTER_PORT")) {
        (Some(p), _) => p,
        (None, Some(mp)) => mp
            .trim()
            .parse::<u16>()
            .ok()
            .and_then(|p| p.checked_add(1))
            .filter(|&p| p > 1)
            .ok_or_else(|| Error::Config {
                var: "MASTER_PORT",
                value: mp.clone(),
                reason: "expected a port number below 65535 (rshmem listens on MASTER_PORT + 1); \
                         or set RSHMEM_BOOTSTRAP_PORT"
                    .into(),
            })?,
        (None, None) => {
            return Err(Error::Config {
                var: "MASTER_PORT",
                value: String::new(),
                reason: "MASTER_ADDR is set but neither MASTER_PORT nor RSHMEM_BOOTSTRAP_PORT is; \
                         set one so PE 0 knows where to listen"
                    .into(),
            })
        }
    };
    let addr = resolve(&master, port)?;
    let uid = match &rshmem.bootstrap_secret {
        Some(s) => UniqueId { addr, secret: hash128(&[b"rshmem-secret", s.as_bytes()]), secret_from_pe0: false },
        None => UniqueId { addr, secret: [0; SECRET_LEN], secret_from_pe0: true },
    };
    Ok(Some((uid, rank, nranks)))
}

/// The variables that name a job, as launchers set them: every PE of one job sees the same
/// values, and two jobs of one launcher see different ones. `RSHMEM_JOB_ID` is the program's
/// own, for launches where nothing else tells two jobs apart.
const JOB_VARIABLES: [&str; 7] = [
    "RSHMEM_JOB_ID",
    // torchrun: the rendezvous id (`--rdzv-id`; random under `--standalone`).
    "TORCHELASTIC_RUN_ID",
    // Open MPI (4.x, and before it ORTE), PMIx launchers (Open MPI 5, prrte, Slurm's PMIx).
    "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid",
    "PMIX_NAMESPACE",
    // Slurm's srun.
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
];

/// This process's job identity from its environment ("" where no launcher says one): the
/// `name=value` of each set variable of [`JOB_VARIABLES`], which the handshake compares between
/// every PE and PE 0.
pub(crate) fn job_label() -> String {
    job_label_from(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// [`job_label`] over any variable lookup.
pub(crate) fn job_label_from(get: impl Fn(&str) -> Option<String>) -> String {
    let parts: Vec<String> = JOB_VARIABLES
        .iter()
        .filter_map(|&k| get(k).map(|v| format!("{k}={}", v.chars().take(128).collect::<String>())))
        .collect();
    parts.join(", ")
}

fn parse_num(var: &'static str, text: String) -> Result<usize> {
    text.trim().parse::<usize>().map_err(|_| Error::Config {
        var,
        value: text,
        reason: "expected a non-negative integer".into(),
    })
}

/// Resolves `MASTER_ADDR` (an IP literal or a host name), preferring IPv4.
fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    let bad = |reason: String| Error::Config {
        var: "MASTER_ADDR",
        value: host.to_string(),
        reason,
    };
    let addrs: Vec<SocketAddr> = (host.trim(), port)
        .to_socket_addrs()
        .map_err(|e| bad(format!("cannot resolve it: {e}")))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| bad("it resolves to no address".into()))
}

/// This host's address on the default route, found by "connecting" a UDP socket (which sends
/// nothing) to a documentation address and reading the source address the kernel picked.
fn routable_ip() -> IpAddr {
    let probe = || -> std::io::Result<IpAddr> {
        let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        s.connect((Ipv4Addr::new(192, 0, 2, 1), 9))?;
        Ok(s.local_addr()?.ip())
    };
    match probe() {
        Ok(ip) if !ip.is_unspecified() => ip,
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}

/// FNV-1a over the parts, 128 bits, with a separator between parts. Not cryptographic: it only
/// has to make different jobs' socket names (and secrets given as text) differ.
fn hash128(parts: &[&[u8]]) -> [u8; SECRET_LEN] {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    let mut h = OFFSET;
    for part in parts {
        for &b in part.iter().chain(&[0xff]) {
            h ^= u128::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    h.to_le_bytes()
}

/// Bytes of PE 0's challenge to a connecting PE.
pub(crate) const NONCE_LEN: usize = 32;

/// A fresh random challenge.
///
/// # Errors
/// [`Error::Os`] when the system's random source fails.
pub(crate) fn nonce() -> Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| Error::os("getrandom for a bootstrap challenge", std::io::Error::other(e.to_string())))?;
    Ok(n)
}

/// What a hello carries instead of the secret: HMAC-SHA256 keyed with the secret over PE 0's
/// `nonce` and the rank and PE count the hello claims, cut to the secret's length. Only a
/// holder of the secret can compute it, it is good for one connection only (the nonce is
/// fresh), and it cannot be moved to another rank; the secret itself never crosses the wire.
pub(crate) fn hello_proof(secret: &[u8; SECRET_LEN], nonce: &[u8; NONCE_LEN], rank: u32, nranks: u32) -> [u8; SECRET_LEN] {
    use hmac::{Hmac, Mac};
    // HMAC takes a key of any length; the error case of `new_from_slice` cannot happen.
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret) else { return [0; SECRET_LEN] };
    mac.update(b"rshmem bootstrap hello v1");
    mac.update(nonce);
    mac.update(&rank.to_le_bytes());
    mac.update(&nranks.to_le_bytes());
    let tag = mac.finalize().into_bytes();
    let mut out = [0u8; SECRET_LEN];
    out.copy_from_slice(&tag[..SECRET_LEN]);
    out
}

/// Compares secrets without an early exit, so timing does not reveal a matching prefix.
pub(crate) fn secrets_equal(a: &[u8; SECRET_LEN], b: &[u8; SECRET_LEN]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> Result<Option<(UniqueId, usize, usize)>> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn job_labels_name_the_launchers_variables() {
        let m: HashMap<&str, &str> = [("TORCHELASTIC_RUN_ID", "abc"), ("SLURM_JOB_ID", "7"), ("PATH", "/bin")].into();
        assert_eq!(job_label_from(|k| m.get(k).map(|v| v.to_string())), "TORCHELASTIC_RUN_ID=abc, SLURM_JOB_ID=7");
        assert_eq!(job_label_from(|_| None), "");
        let long = "x".repeat(1000);
        assert_eq!(job_label_from(|k| (k == "RSHMEM_JOB_ID").then(|| long.clone())).len(), "RSHMEM_JOB_ID=".len() + 128);
    }

    #[test]
    fn round_trip_v4_and_v6() {
        let a = UniqueId {
            addr: "10.1.2.3:29501".parse().unwrap(),
            secret: [7; SECRET_LEN],
            secret_from_pe0: false,
        };
        let b = UniqueId {
            addr: SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 4000, 0, 3)),
            secret: *b"0123456789abcdef",
            secret_from_pe0: false,
        };
        for id in [a, b] {
            let bytes = id.to_bytes();
            assert_eq!(bytes.len(), ENCODED_LEN);
            assert_eq!(UniqueId::from_bytes(&bytes).unwrap(), id);
        }
    }

    #[test]
    fn new_parks_a_listener_that_can_be_taken_once() {
        let id = UniqueId::new().unwrap();
        assert_ne!(id.addr.port(), 0);
        assert_eq!(UniqueId::from_bytes(&id.to_bytes()).unwrap(), id);
        let other = UniqueId::new().unwrap();
        assert_ne!(id.secret, other.secret);
        let l = take_parked(&id).expect("parked listener");
        assert_eq!(l.local_addr().unwrap(), id.addr);
        assert!(take_parked(&id).is_none());
        assert!(take_parked(&other).is_some());
        assert!(format!("{id:?}").contains("<hidden>"));
    }

    #[test]
    fn garbage_is_rejected() {
        let good = UniqueId {
            addr: "127.0.0.1:5000".parse().unwrap(),
            secret: [1; SECRET_LEN],
            secret_from_pe0: false,
        }
        .to_bytes();
        let is_invalid =
            |b: &[u8]| matches!(UniqueId::from_bytes(b), Err(Error::InvalidArgument(_)));
        assert!(is_invalid(&[]));
        assert!(is_invalid(&good[..good.len() - 1]));
        assert!(is_invalid(&[good.clone(), vec![0]].concat()));
        for (at, value) in [(0, b'X'), (4, 99), (5, 5), (7, 0), (12, 1)] {
            let mut b = good.clone();
            b[at] = value;
            if at == 7 {
                b[6] = 0;
            }
            assert!(is_invalid(&b), "byte {at} = {value}");
        }
        let msg = UniqueId::from_bytes(b"hello").unwrap_err().to_string();
        assert!(msg.contains("5 bytes") && msg.contains("44"), "{msg}");
    }

    #[test]
    fn env_variants() {
        assert!(lookup(&[]).unwrap().is_none());
        assert!(lookup(&[("RANK", "0"), ("WORLD_SIZE", "2")])
            .unwrap()
            .is_none());
        assert!(lookup(&[("MASTER_ADDR", "127.0.0.1")]).unwrap().is_none());
        // mpirun without an address: an error naming what to export, not a job of one PE each.
        let m = lookup(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]).unwrap_err().to_string();
        assert!(m.contains("MASTER_ADDR") && m.contains("OMPI_COMM_WORLD_SIZE=2"), "{m}");
        assert!(lookup(&[("PMI_RANK", "0"), ("PMI_SIZE", "1")]).unwrap().is_none(), "one PE needs no address");
        let base = [
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
        ];
        let (id, rank, n) = lookup(&base).unwrap().unwrap();
        assert_eq!(
            (id.addr, rank, n),
            ("127.0.0.1:29501".parse().unwrap(), 1, 4)
        );
        // No secret is derived from the environment: PE 0 hands out its own.
        assert_eq!(id.secret, [0; SECRET_LEN]);
        assert!(id.secret_from_pe0);
        let (id0, ..) = lookup(&[base[0], base[1], ("RANK", "0"), base[3]])
            .unwrap()
            .unwrap();
        assert_eq!(id0, id);
        let (explicit, ..) = lookup(&[
            base[0],
            base[2],
            base[3],
            ("RSHMEM_BOOTSTRAP_PORT", "4000"),
            ("RSHMEM_BOOTSTRAP_SECRET", "s"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(explicit.addr.port(), 4000);
        assert_ne!(explicit.secret, id.secret);
        assert!(!explicit.secret_from_pe0);
        let (mpi, rank, n) = lookup(&[
            base[0],
            base[1],
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "3"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((mpi.addr.port(), rank, n), (29501, 2, 3));
        let (_, rank, n) = lookup(&[base[0], base[1], ("PMI_RANK", "0"), ("PMI_SIZE", "1")])
            .unwrap()
            .unwrap();
        assert_eq!((rank, n), (0, 1));
    }

    #[test]
    fn env_errors_name_the_variable() {
        let err = |pairs: &[(&str, &str)]| lookup(pairs).unwrap_err().to_string();
        let m = err(&[
            ("MASTER_ADDR", "127.0.0.1"),
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
        ]);
        assert!(m.contains("MASTER_PORT"), "{m}");
        let m = err(&[
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "1"),
            ("RANK", "2"),
            ("WORLD_SIZE", "2"),
        ]);
        assert!(m.contains("RANK") && m.contains("WORLD_SIZE=2"), "{m}");
        let m = err(&[
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "65535"),
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
        ]);
        assert!(m.contains("MASTER_PORT"), "{m}");
        let m = err(&[
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "80"),
            ("RANK", "x"),
            ("WORLD_SIZE", "2"),
        ]);
        assert!(m.contains("RANK"), "{m}");
        let m = err(&[
            ("MASTER_ADDR", "no such host.invalid"),
            ("MASTER_PORT", "80"),
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
        ]);
        assert!(m.contains("MASTER_ADDR"), "{m}");
    }
}
