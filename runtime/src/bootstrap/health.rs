//! Peer state shared by the bootstrap's watcher threads and every spin-wait of the runtime:
//! which peer died, and which peers announced that they leave the job (finalize).
//!
//! The watchers (see `tcp.rs`) learn that a PE is gone when its TCP connection to PE 0 reaches
//! end-of-file without a goodbye (the kernel closes a dead process's sockets, whatever killed it),
//! or when PE 0 relays that news; they learn that a PE leaves from its `LEAVING` notice, which
//! says how it leaves (an explicit finalize, the exit handler, after which exception). Readers of
//! the fast path only load two atomics.

use crate::device_state::PEER_LEFT_DIED;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// No PE is known dead (or known to have left).
const NOBODY: usize = usize::MAX;

/// Told of each departure as a `DeviceState::peer_left` word ([`PEER_LEFT_DIED`] and 1 + the
/// PE): the cuda backend writes it where its kernels' waits look.
pub type DepartureNotifier = Arc<dyn Fn(u64) + Send + Sync>;

struct Inner {
    /// The first PE seen dead.
    dead: AtomicUsize,
    /// The first PE that announced it leaves.
    left: AtomicUsize,
    /// Every PE that announced it leaves, with what it said.
    leavers: Mutex<BTreeMap<usize, String>>,
    /// Who else hears of departures (kernels' waits, through the cuda backend).
    notify: Mutex<Option<DepartureNotifier>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("dead", &self.dead).field("left", &self.left).finish_non_exhaustive()
    }
}

/// Whether every peer is still in the job; cheap to clone and to check (two atomic loads).
///
/// Shared with spin loops elsewhere in the runtime: they call [`Health::check`] between polls so
/// that a dead or departed peer turns a hang into [`Error::PeerDied`] / [`Error::PeerExited`].
#[derive(Clone, Debug)]
pub struct Health {
    inner: Arc<Inner>,
}

impl Health {
    /// A fresh state: every PE alive and in the job.
    pub(crate) fn new() -> Health {
        Health {
            inner: Arc::new(Inner {
                dead: AtomicUsize::new(NOBODY),
                left: AtomicUsize::new(NOBODY),
                leavers: Mutex::new(BTreeMap::new()),
                notify: Mutex::new(None),
            }),
        }
    }

    /// Fails once any peer is known dead or has announced that it leaves the job: no blocking
    /// call of this PE can complete without it any more.
    ///
    /// `during` names what the caller was doing; it ends up in the error message.
    ///
    /// # Errors
    /// [`Error::PeerDied`] naming the first PE seen dead; else [`Error::PeerExited`] naming the
    /// first PE that left and how.
    pub fn check(&self, during: &str) -> Result<()> {
        self.check_dead(during)?;
        match self.left_pe() {
            None => Ok(()),
            Some(pe) => Err(Error::PeerExited {
                pe,
                during: during.to_string(),
                how: self.how_left(pe).unwrap_or_default(),
            }),
        }
    }

    /// Fails only once a peer is known dead (finalize, where peers leaving is expected).
    ///
    /// # Errors
    /// [`Error::PeerDied`] naming the first PE seen dead.
    pub fn check_dead(&self, during: &str) -> Result<()> {
        match self.dead_pe() {
            None => Ok(()),
            Some(pe) => Err(Error::PeerDied { pe, during: during.to_string() }),
        }
    }

    /// Fails when `pe` announced that it leaves (its heap is going away).
    ///
    /// # Errors
    /// [`Error::PeerExited`] naming `pe`.
    pub fn check_left(&self, pe: usize, during: &str) -> Result<()> {
        // The common case, nobody left, costs one atomic load.
        if self.left_pe().is_none() {
            return Ok(());
        }
        match self.how_left(pe) {
            None => Ok(()),
            Some(how) => Err(Error::PeerExited { pe, during: during.to_string(), how }),
        }
    }

    /// The first PE seen dead, if any.
    pub fn dead_pe(&self) -> Option<usize> {
        match self.inner.dead.load(Ordering::Acquire) {
            NOBODY => None,
            pe => Some(pe),
        }
    }

    /// The first PE that announced it leaves, if any.
    pub fn left_pe(&self) -> Option<usize> {
        match self.inner.left.load(Ordering::Acquire) {
            NOBODY => None,
            pe => Some(pe),
        }
    }

    /// What `pe` said when it left ("finalize", "the exit handler after KeyboardInterrupt"),
    /// `None` while it has not.
    pub fn how_left(&self, pe: usize) -> Option<String> {
        self.inner.leavers.lock().unwrap_or_else(|p| p.into_inner()).get(&pe).cloned()
    }

    /// The first of `pes` (in their order) that announced it leaves, with how.
    pub fn left_among(&self, pes: &[usize]) -> Option<(usize, String)> {
        // The common case, nobody left, costs one atomic load.
        self.left_pe()?;
        let leavers = self.inner.leavers.lock().unwrap_or_else(|p| p.into_inner());
        pes.iter().find_map(|pe| leavers.get(pe).map(|how| (*pe, how.clone())))
    }

    /// How many PEs announced that they leave.
    pub fn left_count(&self) -> usize {
        if self.left_pe().is_none() {
            return 0;
        }
        self.inner.leavers.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether `pe` announced that it leaves.
    pub(crate) fn has_left(&self, pe: usize) -> bool {
        self.inner.leavers.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&pe)
    }

    /// From now on tells `notify` of every departure, and at once of one already known (a peer
    /// may leave before this PE's device started).
    pub fn on_departure(&self, notify: DepartureNotifier) {
        let mut slot = self.inner.notify.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pe) = self.dead_pe() {
            notify(departure_word(pe, true));
        } else if let Some(pe) = self.left_pe() {
            notify(departure_word(pe, false));
        }
        *slot = Some(notify);
    }

    fn tell(&self, pe: usize, died: bool) {
        if let Some(notify) = self.inner.notify.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            notify(departure_word(pe, died));
        }
    }

    /// Records that `pe` is gone. The first report wins, so every later error names the same PE.
    /// Returns whether this call was the first report.
    pub(crate) fn mark_dead(&self, pe: usize) -> bool {
        let first = self
            .inner
            .dead
            .compare_exchange(NOBODY, pe, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if first {
            tracing::warn!(pe, "bootstrap: PE {pe} died or disconnected");
            self.tell(pe, true);
        }
        first
    }

    /// Records that `pe` leaves the job, saying `how`. The reason is stored before the flag is
    /// raised, so a reader that sees the flag finds the reason.
    pub(crate) fn mark_left(&self, pe: usize, how: String) {
        self.inner.leavers.lock().unwrap_or_else(|p| p.into_inner()).entry(pe).or_insert(how);
        if self.inner.left.compare_exchange(NOBODY, pe, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            tracing::debug!(pe, "bootstrap: PE {pe} leaves the job");
            self.tell(pe, false);
        }
    }
}

/// The `DeviceState::peer_left` word for `pe`'s departure.
fn departure_word(pe: usize, died: bool) -> u64 {
    (pe as u64 + 1) | if died { PEER_LEFT_DIED } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_death_wins_and_is_shared() {
        let h = Health::new();
        let seen_elsewhere = h.clone();
        assert!(h.check("start").is_ok());
        assert_eq!(h.dead_pe(), None);
        assert!(h.mark_dead(3));
        assert!(!h.mark_dead(1));
        assert_eq!(seen_elsewhere.dead_pe(), Some(3));
        let msg = seen_elsewhere.check("barrier").unwrap_err().to_string();
        assert!(msg.contains("PE 3") && msg.contains("barrier"), "{msg}");
    }

    #[test]
    fn departures_reach_the_notifier_once_each_and_one_known_before_at_once() {
        let h = Health::new();
        h.mark_left(2, "finalize".into());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        h.on_departure(Arc::new(move |w| into.lock().unwrap().push(w)));
        h.mark_left(2, "again".into());
        h.mark_left(1, "finalize".into()); // not the first to leave: the word keeps PE 2
        h.mark_dead(0);
        h.mark_dead(3);
        assert_eq!(*seen.lock().unwrap(), vec![3, 1 | PEER_LEFT_DIED]);
    }

    #[test]
    fn a_peer_that_left_fails_waits_but_not_finalize() {
        let h = Health::new();
        h.mark_left(2, "finalize".into());
        h.mark_left(1, "the exit handler".into());
        h.mark_left(2, "something else".into());
        assert!(h.check_dead("finalize").is_ok(), "leaving is expected in finalize");
        let e = h.check("barrier_all").unwrap_err();
        assert!(matches!(e, Error::PeerExited { pe: 2, .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("PE 2") && msg.contains("barrier_all") && msg.contains("finalize"), "{msg}");
        assert!(h.has_left(1) && !h.has_left(0));
        assert_eq!(h.how_left(2).as_deref(), Some("finalize"), "the first word stays");
        h.mark_dead(0);
        assert!(matches!(h.check("x"), Err(Error::PeerDied { pe: 0, .. })), "a death is said first");
    }
}
