//! The secret of a job started from the launcher's environment alone (torchrun / mpirun
//! variables, no `RSHMEM_BOOTSTRAP_SECRET`, no unique id handed around).
//!
//! Nothing in that environment is private: any process on the host can read another's
//! variables through `/proc` (other users included, for most of them), so a secret derived from
//! them can be derived by anyone. Instead PE 0 draws a random secret and hands it out over an
//! abstract Unix socket of random name ([`socket_name`]), which PE 0's handshake preface tells
//! every connecting PE (`rendezvous.rs`): nobody can bind it before PE 0 (a predictable name could
//! be taken by another user first, keeping the job from starting). Both ends check
//! the other's `SO_PEERCRED` and deal only with processes of their own uid. What this proves is
//! "same user on PE 0's host", nothing more: another user is always refused (at this socket,
//! and at the TCP handshake for want of the secret), while a process of the same user can fetch
//! the secret like a PE could. That process could read the job's memory through `/proc` anyway,
//! so in this mode it is inside the trust boundary (`docs/security.md`). PEs on other hosts
//! cannot reach the socket: multi-host jobs need `RSHMEM_BOOTSTRAP_SECRET` or a unique id.

use super::uid::SECRET_LEN;
use crate::error::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the server looks at its stop flag.
const POLL: Duration = Duration::from_millis(20);

/// A fresh abstract name for a job's secret socket: the uid (for whoever lists the sockets) and
/// 128 random bits, so that no other process can bind it first.
///
/// # Errors
/// [`Error::Os`] when the system's random source fails.
pub(crate) fn socket_name() -> Result<Vec<u8>> {
    let mut random = [0u8; 16];
    getrandom::fill(&mut random)
        .map_err(|e| Error::os("getrandom for the secret socket's name", std::io::Error::other(e.to_string())))?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("rshmem-secret-{}-{hex}", rustix::process::getuid().as_raw()).into_bytes())
}

fn addr(name: &[u8]) -> Result<SocketAddr> {
    SocketAddr::from_abstract_name(name).map_err(|e| Error::os("make an abstract Unix socket address", e))
}

fn show(name: &[u8]) -> String {
    format!("@{}", String::from_utf8_lossy(name))
}

/// PE 0's server: hands `secret` to every process of this uid that connects, until dropped.
pub(crate) struct SecretServer {
    name: Vec<u8>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SecretServer {
    /// The abstract name it listens on.
    pub(crate) fn name(&self) -> &[u8] {
        &self.name
    }
}

impl Drop for SecretServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds the job's secret socket and serves `secret` on a thread.
///
/// # Errors
/// [`Error::Os`] when the name is taken (not by chance: it is random) or the thread cannot
/// start.
pub(crate) fn serve(name: &[u8], secret: [u8; SECRET_LEN]) -> Result<SecretServer> {
    let listener = UnixListener::bind_addr(&addr(name)?).map_err(|e| {
        Error::os(
            format!(
                "PE 0 binding the job's secret socket {} (or set RSHMEM_BOOTSTRAP_SECRET)",
                show(name)
            ),
            e,
        )
    })?;
    listener.set_nonblocking(true).map_err(|e| Error::os("set the secret socket non-blocking", e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("rshmem-secret".into())
        .stack_size(64 << 10)
        .spawn(move || {
            let ours = rustix::process::getuid();
            while !flag.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((mut s, _)) => match rustix::net::sockopt::socket_peercred(&s) {
                        // 16 bytes fit any socket buffer: a client that never reads cannot block us.
                        Ok(cred) if cred.uid == ours => {
                            let _ = s.set_nonblocking(true);
                            let _ = s.write_all(&secret);
                        }
                        Ok(cred) => tracing::warn!(
                            uid = cred.uid.as_raw(),
                            pid = cred.pid.as_raw_nonzero().get(),
                            "bootstrap: refused the job secret to a process of another user"
                        ),
                        Err(e) => tracing::warn!("bootstrap: refused the job secret (no credentials: {e})"),
                    },
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL / 4),
                    Err(e) => {
                        tracing::debug!("bootstrap: accept on the secret socket: {e}");
                        std::thread::sleep(POLL);
                    }
                }
            }
        })
        .map_err(|e| Error::os("spawn the bootstrap secret thread", e))?;
    Ok(SecretServer { name: name.to_vec(), stop, thread: Some(thread) })
}

/// A non-zero PE's side: fetches the secret from PE 0's socket, retrying until `deadline`
/// while PE 0 is not up yet, and only from a process of this uid.
///
/// # Errors
/// [`Error::Refused`] when the socket belongs to another user; [`Error::Timeout`] when no PE 0
/// answers by `deadline` (the message says what multi-host jobs need).
pub(crate) fn fetch(name: &[u8], rank: usize, deadline: Instant, timeout: Duration) -> Result<[u8; SECRET_LEN]> {
    let a = addr(name)?;
    let ours = rustix::process::getuid();
    let mut pause = Duration::from_millis(5);
    loop {
        let last = match UnixStream::connect_addr(&a) {
            Ok(mut s) => {
                let cred = rustix::net::sockopt::socket_peercred(&s)
                    .map_err(|e| Error::os(format!("SO_PEERCRED of the job's secret socket {}", show(name)), e))?;
                if cred.uid != ours {
                    return Err(Error::Refused {
                        reason: format!(
                            "the job's secret socket {} is held by uid {} (pid {}), not by this user \
                             (uid {}): not PE 0 of this job",
                            show(name),
                            cred.uid.as_raw(),
                            cred.pid.as_raw_nonzero(),
                            ours.as_raw()
                        ),
                    });
                }
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut secret = [0u8; SECRET_LEN];
                match s.read_exact(&mut secret) {
                    Ok(()) => return Ok(secret),
                    Err(e) => format!("reading the secret: {e}"),
                }
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() + pause >= deadline {
            return Err(Error::Timeout {
                what: format!(
                    "PE {rank} fetching the job secret from PE 0's socket {} (last error: {last}). \
                     Without RSHMEM_BOOTSTRAP_SECRET or a unique id, rshmem trusts only processes of \
                     the same user on PE 0's host: is PE 0 running on this host, in this network \
                     namespace? Jobs across hosts need RSHMEM_BOOTSTRAP_SECRET (one private value \
                     for every PE) or rshmem.init() after torch.distributed",
                    show(name)
                ),
                after: timeout,
            });
        }
        crate::watchdog::check_interrupt("fetching the job secret from PE 0")?;
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_user_gets_the_secret_and_a_second_server_is_refused() {
        let name = socket_name().unwrap();
        assert!(String::from_utf8(name.clone()).unwrap().contains(&rustix::process::getuid().as_raw().to_string()));
        assert_ne!(socket_name().unwrap(), name, "names are random");
        let server = serve(&name, [9; SECRET_LEN]).unwrap();
        assert!(serve(&name, [1; SECRET_LEN]).is_err(), "the name is taken");
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(fetch(&name, 1, deadline, Duration::from_secs(5)).unwrap(), [9; SECRET_LEN]);
        drop(server);
        let t0 = Instant::now();
        let err = fetch(&name, 1, Instant::now() + Duration::from_millis(200), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }) && err.to_string().contains("RSHMEM_BOOTSTRAP_SECRET"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(2));
    }
}
