//! What a long wait does besides waiting: it asks whether the program wants it to stop (Ctrl-C
//! in Python), and it reports once, to stderr, a wait that makes no progress.
//!
//! Every blocking loop of the runtime (host waits, barriers, collectives, the bootstrap's
//! collectives and handshake) calls [`check_interrupt`] every [`INTERRUPT_EVERY`] and keeps a
//! [`Stall`]. The interrupt hook is installed by the front end: the Python extension's hook takes
//! the GIL and runs Python's pending signal handlers, so Ctrl-C raises `KeyboardInterrupt` from
//! a wait instead of being ignored until it ends. A stall report says what this PE waits for
//! (operation, team, word, expected and seen values, which peers have not arrived) after
//! `RSHMEM_STUCK_REPORT_MS` without progress; the wait then goes on, unless
//! `RSHMEM_DEBUG_WAIT_TIMEOUT_MS` (or the bootstrap timeout) ends it.

use crate::error::{Error, Result};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// How often a wait asks the interrupt hook (each ask may take the GIL).
pub const INTERRUPT_EVERY: Duration = Duration::from_millis(50);

/// Answers whether the program asked to stop; when it did, the hook keeps the reason (e.g. the
/// Python exception) for the front end to raise once the call returns
/// [`Error::Interrupted`].
pub type InterruptHook = Box<dyn Fn() -> bool + Send + Sync>;

static HOOK: RwLock<Option<InterruptHook>> = RwLock::new(None);

/// Installs (or with `None` removes) the process's interrupt hook.
pub fn set_interrupt_hook(hook: Option<InterruptHook>) {
    *HOOK.write().unwrap_or_else(|p| p.into_inner()) = hook;
}

/// Fails with [`Error::Interrupted`] when the hook says the program asked to stop.
///
/// # Errors
/// [`Error::Interrupted`] naming `during`.
pub fn check_interrupt(during: &str) -> Result<()> {
    let hook = HOOK.read().unwrap_or_else(|p| p.into_inner());
    match hook.as_ref() {
        Some(asked) if asked() => Err(Error::Interrupted { during: during.to_string() }),
        _ => Ok(()),
    }
}

std::thread_local! {
    /// The public call this thread is inside, in its front end's terms (`None`: the runtime's
    /// own name of the operation is the one the user called).
    static CALL: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `call` as the name every wait report, timeout and peer error of this thread
/// gives (a front end's public function, e.g. `free_tensor` for the runtime's `free`), unless
/// an outer call already named itself: the user called the outermost one.
pub fn in_call<T>(call: &str, f: impl FnOnce() -> T) -> T {
    let _named = call_scope(call);
    f()
}

/// [`in_call`] until the returned guard is dropped.
#[must_use = "the name holds while the guard lives"]
pub fn call_scope(call: &str) -> CallScope {
    let outer = CALL.with(|c| c.borrow().is_some());
    if !outer {
        CALL.with(|c| *c.borrow_mut() = Some(call.to_string()));
    }
    CallScope { set: !outer }
}

/// Names this thread's call while it lives (see [`call_scope`]).
#[derive(Debug)]
pub struct CallScope {
    /// Whether this guard set the name (and so clears it).
    set: bool,
}

impl Drop for CallScope {
    fn drop(&mut self) {
        if self.set {
            CALL.with(|c| *c.borrow_mut() = None);
        }
    }
}

/// `op` (the runtime's name of what waits) as the user knows it: `"free_tensor (allgather)"`
/// inside [`in_call`], else `op` itself.
pub fn call_name(op: &str) -> String {
    CALL.with(|c| match c.borrow().as_deref() {
        Some(call) if call != op => format!("{call} ({op})"),
        _ => op.to_string(),
    })
}

/// The stall report of one wait: printed once, after the configured time without progress.
#[derive(Debug)]
pub struct Stall {
    since: Instant,
    after: Option<Duration>,
    reported: bool,
}

impl Stall {
    /// Starts the clock; `after` is `RSHMEM_STUCK_REPORT_MS` (`None`: never report).
    pub fn new(after: Option<Duration>) -> Stall {
        Stall { since: Instant::now(), after, reported: false }
    }

    /// The wait moved (a peer arrived, a value changed): the clock starts again.
    pub fn progressed(&mut self) {
        self.since = Instant::now();
    }

    /// Prints `what()` to stderr once the wait has made no progress for the configured time.
    /// `who` names the PE ("PE 3").
    pub fn check(&mut self, who: &str, what: impl FnOnce() -> String) {
        let Some(after) = self.after else { return };
        if self.reported || self.since.elapsed() < after {
            return;
        }
        self.reported = true;
        let text = what();
        tracing::warn!("{who} stuck for {:?}: {text}", self.since.elapsed());
        eprintln!(
            "rshmem: {who} has waited {:.1} s without progress: {text} (still waiting; \
             RSHMEM_STUCK_REPORT_MS sets when this is printed, RSHMEM_DEBUG_WAIT_TIMEOUT_MS makes \
             such a wait fail)",
            self.since.elapsed().as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_front_end_names_the_call() {
        assert_eq!(call_name("barrier_all"), "barrier_all");
        let inner = in_call("free_tensor", || {
            assert_eq!(call_name("free"), "free_tensor (free)");
            in_call("fcollect", || call_name("barrier"))
        });
        assert_eq!(inner, "free_tensor (barrier)", "the outermost call is the user's");
        assert_eq!(call_name("free"), "free", "restored");
    }

    #[test]
    fn hook_answers_and_can_be_removed() {
        check_interrupt("nothing installed").unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        set_interrupt_hook(Some(Box::new(move || f.load(Ordering::Relaxed))));
        check_interrupt("not asked").unwrap();
        flag.store(true, Ordering::Relaxed);
        let err = check_interrupt("a barrier").unwrap_err().to_string();
        assert!(err.contains("interrupted") && err.contains("a barrier"), "{err}");
        set_interrupt_hook(None);
        check_interrupt("removed").unwrap();
    }

    #[test]
    fn stall_reports_once_after_the_time_without_progress() {
        let mut s = Stall::new(Some(Duration::from_millis(30)));
        let mut calls = 0;
        s.check("PE 0", || {
            calls += 1;
            String::new()
        });
        assert_eq!(calls, 0, "too early");
        std::thread::sleep(Duration::from_millis(40));
        s.progressed();
        s.check("PE 0", || {
            calls += 1;
            String::new()
        });
        assert_eq!(calls, 0, "progress restarts the clock");
        std::thread::sleep(Duration::from_millis(40));
        for _ in 0..3 {
            s.check("PE 0", || {
                calls += 1;
                "waiting for PE 1".into()
            });
        }
        assert_eq!(calls, 1);
        let mut never = Stall::new(None);
        never.check("PE 0", || unreachable!("disabled"));
    }
}
