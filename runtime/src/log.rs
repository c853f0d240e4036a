//! The runtime's logs on stderr, one line per event, prefixed with the PE that wrote it.
//!
//! Every module logs through `tracing`; nothing is printed unless `RSHMEM_LOG` (a level such as
//! `info`, `debug`, `trace`, or `tracing_subscriber::EnvFilter` directives such as
//! `rshmem::bootstrap=trace,info`) or `RSHMEM_DEBUG=1` (the same as `RSHMEM_LOG=debug`) asks for
//! it (`Env::log_directives`). Then [`install`] sets a global `tracing_subscriber::fmt` subscriber whose lines begin with
//! `[rshmem pe 3/8]`, so the output of all PEs of a job, interleaved on one terminal, still says
//! who wrote what. Before the bootstrap knows this PE's number the prefix is `[rshmem pe ?]`.
//!
//! A program that installed its own global subscriber first keeps it; rshmem's events then go
//! there, unprefixed.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Once;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// This PE and the PE count as the prefix shows them: `pe << 32 | n_pes`, -1 before init.
static PLACE: AtomicI64 = AtomicI64::new(-1);

/// Records this PE's number for the prefix of later lines (init calls it once the bootstrap
/// has connected).
pub fn set_pe(pe: usize, n_pes: usize) {
    PLACE.store(((pe as i64) << 32) | (n_pes as i64 & 0xffff_ffff), Ordering::Relaxed);
}

/// Installs the rank-prefixed stderr subscriber with the filter `directives` (checked with
/// [`check_directives`]), or nothing for `None`; the first call decides, later calls do nothing.
pub fn install(directives: Option<&str>) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Some(directives) = directives else { return };
        // The caller checked the directives already, so a parse error cannot happen here; if it
        // did, logging stays off rather than failing init.
        let Ok(filter) = EnvFilter::try_new(directives) else { return };
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // Colour codes only for a terminal: a job's stderr is usually a file or a pipe.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .event_format(RankPrefixed(Format::default()))
            .finish();
        // Err: the program set a global subscriber already; it gets rshmem's events.
        let _ = tracing::subscriber::set_global_default(subscriber);
        tracing::debug!(%directives, "rshmem logging to stderr");
    });
}

/// Checks `RSHMEM_LOG`'s value: `None` when it is a valid filter, else why not.
pub fn check_directives(text: &str) -> Option<String> {
    EnvFilter::try_new(text).err().map(|e| e.to_string())
}

/// The default line format behind a `[rshmem pe N/M]` prefix.
struct RankPrefixed(Format);

impl<S, N> FormatEvent<S, N> for RankPrefixed
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    Format: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        match PLACE.load(Ordering::Relaxed) {
            -1 => write!(writer, "[rshmem pe ?] ")?,
            place => write!(writer, "[rshmem pe {}/{}] ", place >> 32, place & 0xffff_ffff)?,
        }
        self.0.format_event(ctx, writer, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_directives_are_named() {
        assert_eq!(check_directives("info"), None);
        assert_eq!(check_directives("rshmem::bootstrap=trace,warn"), None);
        assert!(check_directives("rshmem=loud").is_some());
    }
}
