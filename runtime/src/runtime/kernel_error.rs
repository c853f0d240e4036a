//! What the error record a kernel wrote before it stopped (`trap`) means, in the runtime's
//! errors: the backend hands over the record as the device wrote it (`device_state.rs` says what
//! each field holds), and the runtime, which knows the heap's allocations and the on-stream
//! collectives' signatures, words it.

use super::agree::stream_mismatch;
use crate::consts::Cmp;
use crate::device_state::{
    ErrorRecord, BAD_ADDRESS_BOUND_MASK, BAD_ADDRESS_REMOTE, BAD_ADDRESS_RING, BAD_ADDRESS_SEEN, CHECK_OP_AMO, CHECK_OP_G,
    CHECK_OP_GET, CHECK_OP_P, CHECK_OP_PUT, CHECK_OP_PUT_SIGNAL, CHECK_OP_SIGNAL, ERROR_FLAG_BAD_ADDRESS,
    ERROR_FLAG_BAD_ARGUMENT, ERROR_FLAG_MISMATCH, ERROR_FLAG_PEER_LEFT, ERROR_FLAG_PROXY, ERROR_FLAG_UNSAFE_ADDRESS, ERROR_FLAG_WAIT_TIMEOUT,
    PEER_LEFT_DIED, WAIT_ON_STREAM,
};
use crate::error::Error;
use std::time::Duration;

/// What a kernel's wait recorded besides its word, for describing a barrier's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WaitSeen {
    /// The value the wait awaited.
    pub expected: u64,
    /// The value it last read (a timeout's record; a departure's record holds the departure).
    pub seen: Option<u64>,
    /// A team barrier's members that had not entered it, as bits of their team index
    /// ([`ErrorRecord::missing`]); 0 when the record does not say.
    pub missing: u64,
}

/// The error for a record a kernel wrote; `describe` names a heap address (given what a wait
/// recorded, a barrier's word also says how many arrivals it counted),
/// `timeout` is the wait timeout the kernel ran with, `how_left` what a departed peer said when
/// it left.
pub(super) fn record_error(
    rec: &ErrorRecord,
    describe: impl Fn(usize, Option<WaitSeen>) -> String,
    timeout: Option<Duration>,
    how_left: impl Fn(usize) -> Option<String>,
) -> Error {
    let addr = rec.addr as usize;
    let at = |a: usize| format!("{a:#x} ({})", describe(a, None));
    // A wait's record: which wait (signal_wait_until_on_stream's kernel marks its comparison)
    // and the comparison.
    let on_stream = rec.cmp & WAIT_ON_STREAM != 0;
    let waiter = if on_stream { "signal_wait_until_on_stream" } else { "a wait in a kernel" };
    let wait_cmp = || i32::try_from(rec.cmp & (WAIT_ON_STREAM - 1)).ok().and_then(|c| Cmp::from_raw(c).ok()).map_or("?", Cmp::symbol);
    let at_wait = |seen: Option<u64>| format!("{addr:#x} ({})", describe(addr, Some(WaitSeen { expected: rec.expected, seen, missing: rec.missing })));
    match rec.flag {
        ERROR_FLAG_PEER_LEFT => {
            let pe = ((rec.seen & 0xffff_ffff) as usize).saturating_sub(1);
            let during = format!("{waiter} on PE {} at {} for a value {} {}", rec.pe, at_wait(None), wait_cmp(), rec.expected as i64);
            if rec.seen & PEER_LEFT_DIED != 0 {
                Error::PeerDied { pe, during }
            } else {
                let how = how_left(pe).unwrap_or_else(|| "finalize".to_string());
                Error::PeerExited { pe, during, how }
            }
        }
        ERROR_FLAG_WAIT_TIMEOUT => Error::WaitTimeout {
            pe: rec.pe.max(0) as usize,
            // The word says which: a team's barrier words are described as that barrier.
            call: waiter.to_string(),
            location: at_wait(Some(rec.seen)),
            cmp: wait_cmp(),
            expected: rec.expected as i64,
            seen: rec.seen as i64,
            timeout_ms: timeout.map_or(0, |d| d.as_millis() as u64),
        },
        ERROR_FLAG_BAD_ADDRESS => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped: address {} cannot be reached on PE {} by load/store (not a \
             symmetric address, or that PE is not reachable from this GPU){}; the CUDA context is \
             unusable now, restart the job",
            rec.pe,
            at(addr),
            rec.cmp as i64,
            bad_address_seen(rec)
        )),
        ERROR_FLAG_BAD_ARGUMENT => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped on a bad argument {} (pointer {}): a comparison or signal \
             operation that is not a CMP_*/SIGNAL_* value, a team this PE is not in, a root outside \
             the team, or a missing workspace; the CUDA context is unusable now, restart the job",
            rec.pe,
            rec.cmp as i64,
            at(addr)
        )),
        ERROR_FLAG_UNSAFE_ADDRESS => Error::InvalidArgument(format!(
            "a kernel on PE {} built in check mode (RSHMEM_CHECK=1) stopped before a {} of {} bytes at {} \
             on PE {}: the range is not program memory (the runtime's own words lie below the first \
             program allocation, and nothing lies past the heap bound); the CUDA context is \
             unusable now, restart the job",
            rec.pe,
            check_op_name(rec.expected),
            rec.seen,
            at(addr),
            rec.cmp as i64
        )),
        ERROR_FLAG_MISMATCH => {
            stream_mismatch(rec.pe.max(0) as usize, rec.addr, rec.cmp, rec.expected, rec.seen)
        }
        ERROR_FLAG_PROXY => Error::Unsupported(format!(
            "a kernel on PE {} stopped: the proxy that carries its operations to PEs on other \
             hosts had failed (waiting at {} for operation {}; the proxy's own error was \
             reported by an earlier call); the CUDA context is unusable now, restart the job",
            rec.pe,
            at(addr),
            rec.expected
        )),
        other => Error::InvalidArgument(format!(
            "a kernel on PE {} stopped with an error record of unknown kind {other} (address {}): \
             the device library and the runtime come from different versions",
            rec.pe,
            at(addr)
        )),
    }
}

/// What the translation of an [`ERROR_FLAG_BAD_ADDRESS`] record saw, as a parenthesis for the
/// message (empty for a record without it): which of its conditions failed is what tells a
/// wrong address from a PE that neither load/store nor the proxy reaches.
fn bad_address_seen(rec: &ErrorRecord) -> String {
    if rec.expected & BAD_ADDRESS_SEEN == 0 {
        return String::new();
    }
    let bound = rec.expected & BAD_ADDRESS_BOUND_MASK;
    let offset = if rec.seen < bound {
        format!("offset {:#x} in this PE's heap slot, within the bound {bound:#x}", rec.seen)
    } else {
        format!("offset {:#x} from this PE's heap slot, outside the bound {bound:#x}", rec.seen)
    };
    let remote = if rec.expected & BAD_ADDRESS_REMOTE != 0 { "on another host" } else { "mapped here" };
    let ring = if rec.expected & BAD_ADDRESS_RING != 0 { "a proxy ring" } else { "no proxy ring" };
    format!(" (the kernel saw: {offset}; the target PE {remote}; {ring} on this PE)")
}

/// The operation of an [`ERROR_FLAG_UNSAFE_ADDRESS`] record (`CHECK_OP_*`).
fn check_op_name(op: u64) -> &'static str {
    match u32::try_from(op).unwrap_or(0) {
        CHECK_OP_PUT => "put",
        CHECK_OP_GET => "get",
        CHECK_OP_P => "single-element put (p)",
        CHECK_OP_G => "single-element get (g)",
        CHECK_OP_SIGNAL => "signal operation",
        CHECK_OP_AMO => "atomic operation",
        CHECK_OP_PUT_SIGNAL => "put with signal",
        _ => "device operation",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_records_become_errors_naming_pe_address_and_values() {
        let describe = |a: usize, wait: Option<WaitSeen>| {
            let counted = wait
                .map(|w| format!(", {:?} of {}", w.seen, w.expected))
                .unwrap_or_default();
            format!("allocation of 64 bytes at heap offset 0, +{}{counted}", a - 0x1000)
        };
        let rec = ErrorRecord { flag: ERROR_FLAG_WAIT_TIMEOUT, pe: 1, addr: 0x1008, cmp: 5, expected: 7, seen: 3, missing: 0 };
        let e = record_error(&rec, describe, Some(Duration::from_millis(100)), |_| None);
        assert!(
            matches!(e, Error::WaitTimeout { pe: 1, cmp: ">=", expected: 7, seen: 3, timeout_ms: 100, .. }),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("PE 1") && msg.contains("0x1008") && msg.contains("+8") && msg.contains(">= 7"), "{msg}");
        assert!(msg.contains("+8, Some(3) of 7"), "a timed-out wait's word is described with its values: {msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_BAD_ADDRESS, pe: 0, addr: 0x1010, cmp: 3, expected: 0, seen: 0, missing: 0 };
        let msg = record_error(&rec, describe, None, |_| None).to_string();
        assert!(msg.contains("PE 0") && msg.contains("0x1010") && msg.contains("on PE 3"), "{msg}");
        assert!(!msg.contains("the kernel saw"), "{msg}");
        let seen = BAD_ADDRESS_SEEN | BAD_ADDRESS_REMOTE | 0x100_0000;
        let rec = ErrorRecord { flag: ERROR_FLAG_BAD_ADDRESS, pe: 1, addr: 0x1010, cmp: 0, expected: seen, seen: 0x52_2500, missing: 0 };
        let msg = record_error(&rec, describe, None, |_| None).to_string();
        assert!(msg.contains("offset 0x522500 in this PE's heap slot, within the bound 0x1000000"), "{msg}");
        assert!(msg.contains("target PE on another host") && msg.contains("no proxy ring on this PE"), "{msg}");
        let rec = ErrorRecord { expected: seen | BAD_ADDRESS_RING, seen: u64::MAX - 15, ..rec };
        let msg = record_error(&rec, describe, None, |_| None).to_string();
        assert!(msg.contains("outside the bound") && msg.contains("a proxy ring on this PE"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_BAD_ARGUMENT, pe: 0, addr: 0x1000, cmp: 77, expected: 0, seen: 0, missing: 0 };
        let msg = record_error(&rec, describe, None, |_| None).to_string();
        assert!(msg.contains("bad argument 77"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_UNSAFE_ADDRESS, pe: 0, addr: 0x1008, cmp: 1, expected: CHECK_OP_PUT_SIGNAL as u64, seen: 64, missing: 0 };
        let msg = record_error(&rec, describe, None, |_| None).to_string();
        assert!(msg.contains("PE 0 built in check mode") && msg.contains("put with signal of 64 bytes"), "{msg}");
        assert!(msg.contains("0x1008") && msg.contains("on PE 1"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_PROXY, pe: 1, addr: 0x1000, cmp: 1, expected: 12, seen: 11, missing: 0 };
        let msg = record_error(&rec, describe, None, |_| None).to_string();
        assert!(msg.contains("PE 1") && msg.contains("proxy") && msg.contains("operation 12"), "{msg}");
        let rec = ErrorRecord { flag: ERROR_FLAG_PEER_LEFT, pe: 0, addr: 0x1008, cmp: 5, expected: 2, seen: 2, missing: 0 };
        let e = record_error(&rec, describe, None, |pe| (pe == 1).then(|| "rshmem.finalize()".to_string()));
        assert!(matches!(&e, Error::PeerExited { pe: 1, how, .. } if how == "rshmem.finalize()"), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("PE 1 left") && msg.contains("kernel on PE 0") && msg.contains("+8") && msg.contains(">= 2"), "{msg}");
        let rec = ErrorRecord { seen: 2 | PEER_LEFT_DIED, ..rec };
        assert!(matches!(record_error(&rec, describe, None, |_| None), Error::PeerDied { pe: 1, .. }));
        // signal_wait_until_on_stream's kernel marks its comparison; the message names the call.
        let msg = record_error(&ErrorRecord { cmp: WAIT_ON_STREAM | 2, ..rec }, describe, None, |_| None).to_string();
        assert!(msg.contains("signal_wait_until_on_stream on PE 0") && msg.contains("> 2") && !msg.contains("kernel on"), "{msg}");
        let timeout = ErrorRecord { flag: ERROR_FLAG_WAIT_TIMEOUT, cmp: WAIT_ON_STREAM | 5, ..rec };
        let e = record_error(&timeout, describe, Some(Duration::from_millis(100)), |_| None);
        assert!(matches!(&e, Error::WaitTimeout { cmp: ">=", call, .. } if call == "signal_wait_until_on_stream"), "{e:?}");
        let rec = ErrorRecord { flag: 99, ..rec };
        assert!(record_error(&rec, describe, None, |_| None).to_string().contains("unknown kind 99"));
    }
}
