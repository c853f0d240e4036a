//! Deadlines from timeouts that may be "none": every part of the bootstrap (and the bootstrap
//! itself) turns its timeouts into deadlines here.

use std::time::{Duration, Instant};

/// `start + timeout`, or a century from `start` when that overflows (`Duration::MAX` means "no
/// timeout" to callers).
pub(super) fn deadline_after(start: Instant, timeout: Duration) -> Instant {
    start
        .checked_add(timeout)
        .or_else(|| start.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(start)
}
