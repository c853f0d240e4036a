//! Peer-death state shared by the bootstrap's watcher threads and every spin-wait of the runtime.
//!
//! The watchers (see `tcp.rs`) learn that a PE is gone when its TCP connection to PE 0 reaches
//! end-of-file without a goodbye (the kernel closes a dead process's sockets, whatever killed it),
//! or when PE 0 relays that news. They record the first dead PE here; readers only load an atomic.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// No PE is known dead.
const ALL_ALIVE: usize = usize::MAX;

/// Whether every peer is still alive; cheap to clone and to check (one atomic load).
///
/// Shared with spin loops elsewhere in the runtime: they call [`Health::check`] between polls so
/// that a dead peer turns a hang into [`Error::PeerDied`].
#[derive(Clone, Debug)]
pub struct Health {
    dead: Arc<AtomicUsize>,
}

impl Health {
    /// A fresh state: every PE alive.
    pub(crate) fn new() -> Health {
        Health {
            dead: Arc::new(AtomicUsize::new(ALL_ALIVE)),
        }
    }

    /// Fails once any peer is known dead.
    ///
    /// `during` names what the caller was doing; it ends up in the error message.
    ///
    /// # Errors
    /// [`Error::PeerDied`] naming the first PE seen dead.
    pub fn check(&self, during: &str) -> Result<()> {
        match self.dead_pe() {
            None => Ok(()),
            Some(pe) => Err(Error::PeerDied {
                pe,
                during: during.to_string(),
            }),
        }
    }

    /// The first PE seen dead, if any.
    pub fn dead_pe(&self) -> Option<usize> {
        match self.dead.load(Ordering::Acquire) {
            ALL_ALIVE => None,
            pe => Some(pe),
        }
    }

    /// Records that `pe` is gone. The first report wins, so every later error names the same PE.
    /// Returns whether this call was the first report.
    pub(crate) fn mark_dead(&self, pe: usize) -> bool {
        let first = self
            .dead
            .compare_exchange(ALL_ALIVE, pe, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if first {
            tracing::warn!(pe, "bootstrap: PE {pe} died or disconnected");
        }
        first
    }
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
}
