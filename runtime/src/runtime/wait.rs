//! Waiting on local symmetric words: the polling loop shared by every wait of the runtime
//! (barriers and signals included), and the `wait_until` / `test` families.
//!
//! The loop spins briefly, then yields the CPU (PEs often outnumber cores in tests), then
//! sleeps in short steps. About every millisecond it asks the bootstrap whether a peer died,
//! so a wait on a dead peer fails with [`Error::PeerDied`] instead of hanging; with
//! `RSHMEM_DEBUG_WAIT_TIMEOUT_MS` set it gives up with [`Error::WaitTimeout`], naming the word
//! (allocation and offset), the comparison and the last value seen. Every 50 ms it asks whether
//! the program wants to stop (Ctrl-C in Python, [`crate::watchdog`]), and after
//! `RSHMEM_STUCK_REPORT_MS` without the word moving it prints once what it waits for.

use super::{kernel_error, Runtime};
use crate::backend::Width;
use crate::consts::Cmp;
use crate::dtype::{DType, SYNC_DTYPES};
use crate::heap::SymAddr;
use crate::error::{Error, Result};
use crate::watchdog::{call_name, check_interrupt, Stall, INTERRUPT_EVERY};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Where the next `test_any` / `wait_until_any` scan starts (modulo its length): each scan
/// starts one further, as NVSHMEM's do, so a word that stays ready cannot hide the others from
/// a caller that polls and clears one word at a time.
static ANY_START: AtomicUsize = AtomicUsize::new(0);

/// The first index of `met` at or after `start` in rotation (`met` is ascending).
fn rotated_first(met: &[usize], start: usize) -> Option<usize> {
    met.iter().copied().find(|&i| i >= start).or_else(|| met.first().copied())
}

/// The start of the next rotating scan over `nelems` words.
fn next_any_start(nelems: usize) -> usize {
    ANY_START.fetch_add(1, Ordering::Relaxed) % nelems.max(1)
}

/// Whether a peer that left did so after making its calls (a finalize, or a program that ended
/// normally), so that its last arrivals may still be in flight; one that left on an uncaught
/// error (`how` says "uncaught ...") may not have made them, and fails a wait at once.
fn left_after_its_calls(e: &Error) -> bool {
    matches!(e, Error::PeerExited { how, .. } if !how.contains("uncaught"))
}

/// Polls that only spin before the loop starts yielding.
const SPIN_POLLS: u32 = 128;
/// After this long the loop sleeps between polls instead of yielding.
const YIELD_FOR: Duration = Duration::from_millis(5);
/// The sleep step after `YIELD_FOR`.
const SLEEP_STEP: Duration = Duration::from_micros(50);
/// How often the loop checks peer health.
const HEALTH_EVERY: Duration = Duration::from_millis(1);
/// How long a wait goes on polling after a peer it waits for announced that it leaves, for that
/// peer's last puts still in flight (a peer that died fails the wait at once).
const LEAVE_GRACE: Duration = Duration::from_millis(500);

/// Whose departure ends a wait: a peer that left (finalize) fails only the waits it could have
/// ended. A dead peer fails every wait.
#[derive(Debug, Clone, Copy)]
pub(super) enum Awaits<'a> {
    /// A team's members (barriers, collectives): any one of them leaving fails it.
    Members(&'a [usize]),
    /// Any peer (point-to-point waits: whoever may signal): fails once every other PE left.
    AnyPeer,
}

/// The unmet condition of one poll, kept for the timeout message.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unmet {
    /// The watched word (symmetric address).
    pub addr: usize,
    /// The comparison.
    pub cmp: Cmp,
    /// The value compared against.
    pub expected: i128,
    /// The value read.
    pub seen: i128,
}

impl Runtime {
    /// Calls `probe` until it returns `Ok(Ok(r))`; `Ok(Err(unmet))` means "not yet".
    ///
    /// # Errors
    /// The first error of `probe`; [`Error::PeerDied`] naming a dead peer (`during` says what
    /// this PE was doing); [`Error::WaitTimeout`] past `RSHMEM_DEBUG_WAIT_TIMEOUT_MS`;
    /// [`Error::Interrupted`] when the program asked to stop (Ctrl-C).
    pub(super) fn poll<R>(
        &self,
        during: &str,
        probe: impl FnMut() -> Result<std::result::Result<R, Unmet>>,
    ) -> Result<R> {
        self.poll_with(during, Awaits::AnyPeer, &|u| self.describe_unmet(u), probe)
    }

    /// Fails when a PE that `awaits` names left the job, or any PE died: the wait cannot end.
    ///
    /// # Errors
    /// [`Error::PeerDied`]; [`Error::PeerExited`] naming the first such PE and how it left.
    pub(super) fn peers_gone(&self, awaits: Awaits<'_>, during: &str) -> Result<()> {
        let health = self.boot.health();
        health.check_dead(during)?;
        if health.left_pe().is_none() {
            // Every barrier starts here: nobody left costs two atomic loads, no allocation.
            return Ok(());
        }
        let me = self.my_pe();
        let gone = match awaits {
            Awaits::Members(members) => {
                let others: Vec<usize> = members.iter().copied().filter(|&pe| pe != me).collect();
                health.left_among(&others)
            }
            Awaits::AnyPeer if health.left_count() + 1 >= self.n_pes() => {
                let others: Vec<usize> = (0..self.n_pes()).filter(|&pe| pe != me).collect();
                health.left_among(&others)
            }
            Awaits::AnyPeer => None,
        };
        match gone {
            None => Ok(()),
            Some((pe, how)) => Err(Error::PeerExited { pe, during: call_name(during), how }),
        }
    }

    /// [`Runtime::poll`], with `detail` saying what is awaited when the stuck report
    /// (`RSHMEM_STUCK_REPORT_MS`) is printed.
    ///
    /// # Errors
    /// As [`Runtime::poll`].
    pub(super) fn poll_with<R>(
        &self,
        during: &str,
        awaits: Awaits<'_>,
        detail: &dyn Fn(&Unmet) -> String,
        mut probe: impl FnMut() -> Result<std::result::Result<R, Unmet>>,
    ) -> Result<R> {
        let start = Instant::now();
        let mut last_health = start;
        let mut last_interrupt = start;
        let mut stall = Stall::new(self.stuck_report);
        let mut last_seen = None;
        let mut polls = 0u32;
        let mut left_noticed: Option<Instant> = None;
        loop {
            let unmet = match probe()? {
                Ok(r) => return Ok(r),
                Err(unmet) => unmet,
            };
            if let Some(net) = &self.net {
                // A peer on another host writes through this PE's worker: run what it sent.
                net.progress(start.elapsed() < YIELD_FOR);
            }
            if polls < SPIN_POLLS {
                polls += 1;
                std::hint::spin_loop();
                continue;
            }
            let now = Instant::now();
            if now.duration_since(last_health) >= HEALTH_EVERY {
                let health = self.boot.health();
                if health.dead_pe().is_some() || health.left_pe().is_some() {
                    match self.peers_gone(awaits, during) {
                        Ok(()) => {}
                        // The peer may have met this wait's condition just before it left (its
                        // last arrival, then its finalize), and that arrival may still be on its
                        // way: a put through another host's transport can land after the leaving
                        // notice the bootstrap carries. Keep polling a while before failing.
                        Err(e @ Error::PeerExited { .. }) if left_after_its_calls(&e) => {
                            let first = *left_noticed.get_or_insert(now);
                            if now.duration_since(first) >= LEAVE_GRACE {
                                if let Ok(r) = probe()? {
                                    return Ok(r);
                                }
                                return Err(e);
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                last_health = now;
                if last_seen != Some(unmet.seen) {
                    // The word moved (e.g. another member arrived): not stuck.
                    last_seen = Some(unmet.seen);
                    stall.progressed();
                }
                stall.check(&format!("PE {}", self.my_pe()), || format!("{}: {}", call_name(during), detail(&unmet)));
            }
            if now.duration_since(last_interrupt) >= INTERRUPT_EVERY {
                check_interrupt(during).map_err(|_| Error::Interrupted { during: call_name(during) })?;
                last_interrupt = now;
            }
            let waited = now.duration_since(start);
            if let Some(limit) = self.wait_timeout {
                if waited >= limit {
                    return Err(self.timeout_error(during, &detail(&unmet), unmet, limit));
                }
            }
            if waited < YIELD_FOR {
                std::thread::yield_now();
            } else {
                std::thread::sleep(SLEEP_STEP);
            }
        }
    }

    /// What a wait on a word awaits, for the stuck report.
    pub(super) fn describe_unmet(&self, u: &Unmet) -> String {
        format!(
            "waiting until the word at {:#x} ({}) {} {}; last seen {}",
            u.addr,
            self.heap.describe(u.addr),
            u.cmp.symbol(),
            u.expected,
            u.seen
        )
    }

    /// A symmetric word for messages: its allocation and offset, and for a team's barrier words
    /// (what device and on-stream barriers wait on) which team's barrier it is. With what a
    /// kernel's wait on a team's arrival word recorded (`wait`), also which barrier instance and
    /// how many arrivals it counted.
    pub(super) fn describe_wait_word(&self, addr: usize, wait: Option<kernel_error::WaitSeen>) -> String {
        let first = self.barrier_words(0);
        let per_team = crate::device_state::BARRIER_WS_BYTES_PER_TEAM as usize;
        let place = self.heap.describe(addr);
        let Some(off) = addr.checked_sub(first) else { return place };
        let slot = off / per_team;
        if slot >= crate::consts::MAX_TEAMS {
            return place;
        }
        let teams = self.teams();
        let Ok(t) = teams.get(super::Team(slot as i32)) else {
            return format!("{place}: the barrier words of team {slot}");
        };
        let mut text = format!("{place}: the barrier words of {} (members {:?})", t.name, t.members);
        if let (Some(w), true) = (wait, off % per_team == 0) {
            text += &barrier_wait_seen(w, &t.members, self.my_pe());
        }
        text
    }

    /// What a barrier awaits, for the stuck report: the team, its counter, and which members
    /// have not arrived (their epoch word is behind this PE's).
    pub(super) fn describe_barrier(&self, team: super::Team, members: &[usize], epoch_word: usize, epoch: u64, u: &Unmet) -> String {
        let name = self.teams().get(team).map_or_else(|_| format!("team {}", team.0), |t| t.name.clone());
        let mut missing = Vec::new();
        let mut word = [0u8; 8];
        for &pe in members {
            if self.read_heap(epoch_word, pe, &mut word).is_ok() && u64::from_ne_bytes(word) < epoch {
                missing.push(pe);
            }
        }
        format!(
            "barrier #{epoch} of {name} (members {members:?}): {} of {} arrivals counted; PEs not in \
             this barrier yet: {missing:?}",
            u.seen - (i128::from(epoch) - 1) * members.len() as i128,
            members.len()
        )
    }

    fn timeout_error(&self, during: &str, detail: &str, unmet: Unmet, limit: Duration) -> Error {
        let word = format!("{:#x} ({})", unmet.addr, self.heap.describe(unmet.addr));
        Error::WaitTimeout {
            pe: self.my_pe(),
            call: call_name(during),
            // A barrier's detail names the team and the PEs that have not arrived.
            location: if detail.starts_with("waiting until the word") { word } else { format!("{word}, {detail}") },
            cmp: unmet.cmp.symbol(),
            // The error carries i64; a uint64 above i64::MAX shows as its two's-complement bits.
            expected: unmet.expected as i64,
            seen: unmet.seen as i64,
            timeout_ms: limit.as_millis() as u64,
        }
    }

    /// Checks the arguments of a point-to-point wait; returns the word width.
    fn sync_word(&self, what: &str, dtype: DType, value: i128) -> Result<Width> {
        dtype.expect_one_of(what, &SYNC_DTYPES)?;
        let (lo, hi) = dtype.int_range().unwrap_or((0, 0));
        if value < lo || value > hi {
            return Err(Error::InvalidArgument(format!(
                "{what}: value {value} does not fit dtype {dtype} ({lo}..={hi})"
            )));
        }
        Ok(if dtype.size() == 4 { Width::W32 } else { Width::W64 })
    }

    /// Reads word `i` of the array at `addr` and compares it.
    fn probe_word(
        &self,
        addr: SymAddr,
        i: usize,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<std::result::Result<i128, Unmet>> {
        let width = if dtype.size() == 4 { Width::W32 } else { Width::W64 };
        let at = addr + i * dtype.size();
        let bits = self.load_local(at.get(), width)?;
        let seen = dtype.int_from_bits(bits).unwrap_or(0);
        Ok(if cmp.holds(seen, value) { Ok(seen) } else { Err(Unmet { addr: at.get(), cmp, expected: value, seen }) })
    }

    /// Waits until this PE's `dtype` word at symmetric `addr` compares `cmp` to `value`
    /// (int32, int64, uint32 or uint64); returns the value that satisfied it. Acquire: data
    /// written before the word was updated is visible afterwards.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for another dtype or a value outside the dtype;
    /// [`Error::NotSymmetric`]; [`Error::PeerDied`]; [`Error::WaitTimeout`].
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/sync.html>
    #[doc(alias = "nvshmem_wait_until")]
    pub fn wait_until(&self, addr: SymAddr, dtype: DType, cmp: Cmp, value: i128) -> Result<i128> {
        let width = self.sync_word("wait_until", dtype, value)?;
        self.user_word(addr, width, self.my_pe(), "wait_until")?;
        self.poll("wait_until", || self.probe_word(addr, 0, dtype, cmp, value))
    }

    /// Whether this PE's word at `addr` compares `cmp` to `value` now.
    ///
    /// # Errors
    /// As [`Runtime::wait_until`], without the waiting ones.
    #[doc(alias = "nvshmem_test")]
    pub fn test(&self, addr: SymAddr, dtype: DType, cmp: Cmp, value: i128) -> Result<bool> {
        let width = self.sync_word("test", dtype, value)?;
        self.user_word(addr, width, self.my_pe(), "test")?;
        Ok(self.probe_word(addr, 0, dtype, cmp, value)?.is_ok())
    }

    /// Which of the `nelems` words at `addr` (skipping those with a non-zero `status`) meet
    /// the condition now: the indices that do, and the first word that does not.
    fn scan(
        &self,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<(Vec<usize>, Option<Unmet>)> {
        let mut met = Vec::new();
        let mut unmet = None;
        for i in (0..nelems).filter(|&i| status.is_none_or(|s| s[i] == 0)) {
            match self.probe_word(addr, i, dtype, cmp, value)? {
                Ok(_) => met.push(i),
                Err(u) => unmet = unmet.or(Some(u)),
            }
        }
        Ok((met, unmet))
    }

    /// Validates the array arguments of the `_all/_any/_some` forms.
    fn check_array(
        &self,
        what: &str,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        value: i128,
    ) -> Result<()> {
        self.sync_word(what, dtype, value)?;
        if let Some(s) = status {
            if s.len() != nelems {
                return Err(Error::InvalidArgument(format!(
                    "{what}: status has {} entries but nelems is {nelems}; pass one entry per word \
                     (non-zero skips it) or no status",
                    s.len()
                )));
            }
        }
        let bytes = nelems.checked_mul(dtype.size()).ok_or_else(|| {
            Error::InvalidArgument(format!("{what}: {nelems} elements of {dtype} overflow the address space"))
        })?;
        if bytes > 0 {
            self.remote(addr.get(), bytes, self.my_pe())?;
            self.user_range(addr, bytes, what)?;
        }
        Ok(())
    }

    /// Waits until every word of `addr[..nelems]` not skipped by `status` meets the condition.
    /// Returns at once when all words are skipped or `nelems == 0`.
    ///
    /// # Errors
    /// As [`Runtime::wait_until`]; [`Error::InvalidArgument`] when `status.len() != nelems`.
    #[doc(alias = "nvshmem_wait_until_all")]
    pub fn wait_until_all(
        &self,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<()> {
        self.check_array("wait_until_all", addr, nelems, status, dtype, value)?;
        self.poll("wait_until_all", || {
            let (_, unmet) = self.scan(addr, nelems, status, dtype, cmp, value)?;
            Ok(unmet.map_or(Ok(()), Err))
        })
    }

    /// Waits until some word not skipped meets the condition; returns its index, or `None` at
    /// once when all words are skipped or `nelems == 0`. Each scan starts one word further
    /// (rotating, as NVSHMEM's), so among several ready words successive calls return each in
    /// turn.
    ///
    /// # Errors
    /// As [`Runtime::wait_until_all`].
    #[doc(alias = "nvshmem_wait_until_any")]
    pub fn wait_until_any(
        &self,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<Option<usize>> {
        self.check_array("wait_until_any", addr, nelems, status, dtype, value)?;
        self.poll("wait_until_any", || {
            let start = next_any_start(nelems);
            let (met, unmet) = self.scan(addr, nelems, status, dtype, cmp, value)?;
            match (rotated_first(&met, start), unmet) {
                (Some(i), _) => Ok(Ok(Some(i))),
                (None, None) => Ok(Ok(None)),
                (None, Some(u)) => Ok(Err(u)),
            }
        })
    }

    /// Waits until at least one word not skipped meets the condition; returns the indices of
    /// all that do (empty at once when all words are skipped or `nelems == 0`).
    ///
    /// # Errors
    /// As [`Runtime::wait_until_all`].
    #[doc(alias = "nvshmem_wait_until_some")]
    pub fn wait_until_some(
        &self,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<Vec<usize>> {
        self.check_array("wait_until_some", addr, nelems, status, dtype, value)?;
        self.poll("wait_until_some", || {
            let (met, unmet) = self.scan(addr, nelems, status, dtype, cmp, value)?;
            match unmet {
                Some(u) if met.is_empty() => Ok(Err(u)),
                _ => Ok(Ok(met)),
            }
        })
    }

    /// Whether every word not skipped meets the condition now (true when none is considered).
    ///
    /// # Errors
    /// As [`Runtime::wait_until_all`], without the waiting ones.
    #[doc(alias = "nvshmem_test_all")]
    pub fn test_all(
        &self,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<bool> {
        self.check_array("test_all", addr, nelems, status, dtype, value)?;
        Ok(self.scan(addr, nelems, status, dtype, cmp, value)?.1.is_none())
    }

    /// The index of a word not skipped that meets the condition now, found by a scan that
    /// starts one word further on each call (rotating, as NVSHMEM's `test_any`).
    ///
    /// # Errors
    /// As [`Runtime::test_all`].
    #[doc(alias = "nvshmem_test_any")]
    pub fn test_any(
        &self,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<Option<usize>> {
        self.check_array("test_any", addr, nelems, status, dtype, value)?;
        let start = next_any_start(nelems);
        Ok(rotated_first(&self.scan(addr, nelems, status, dtype, cmp, value)?.0, start))
    }

    /// The indices of all words not skipped that meet the condition now, ascending (every
    /// ready word is returned, so no rotation is needed for fairness).
    ///
    /// # Errors
    /// As [`Runtime::test_all`].
    #[doc(alias = "nvshmem_test_some")]
    pub fn test_some(
        &self,
        addr: SymAddr,
        nelems: usize,
        status: Option<&[i32]>,
        dtype: DType,
        cmp: Cmp,
        value: i128,
    ) -> Result<Vec<usize>> {
        self.check_array("test_some", addr, nelems, status, dtype, value)?;
        Ok(self.scan(addr, nelems, status, dtype, cmp, value)?.0)
    }
}

/// What a kernel's wait on a team's arrival word saw, for its record's message. The arrival word
/// (the first of the team's barrier words) counts `e * n` arrivals by the end of barrier instance
/// `e`, each member adding one to every member's word, itself included. The stopped kernel's
/// context cannot read the members' own words any more, so the kernel named the members whose
/// ticket word was behind (`missing`, by team index) before it stopped; a record without them
/// (another wait on the word) has the count: when only this PE's own arrival is counted, every
/// other member is missing.
fn barrier_wait_seen(w: kernel_error::WaitSeen, members: &[usize], me: usize) -> String {
    let n = members.len() as u64;
    if n == 0 {
        return String::new();
    }
    let e = w.expected / n;
    let mut text = format!("; barrier #{e}");
    if let Some(seen) = w.seen {
        let counted = seen.saturating_sub(e.saturating_sub(1) * n);
        text += &format!(": {counted} of {n} arrivals counted");
        if w.missing == 0 && counted == 1 {
            let missing: Vec<usize> = members.iter().copied().filter(|&pe| pe != me).collect();
            text += &format!(" (this PE's own): PEs not in this barrier yet: {missing:?}");
        }
    }
    if w.missing != 0 {
        let missing: Vec<usize> =
            members.iter().take(64).enumerate().filter(|(i, _)| w.missing >> i & 1 == 1).map(|(_, &pe)| pe).collect();
        text += &format!(": PEs not in this barrier yet: {missing:?}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{barrier_wait_seen, next_any_start, rotated_first};
    use super::kernel_error::WaitSeen;

    #[test]
    fn a_kernels_barrier_record_names_the_missing_members_when_the_count_does() {
        let seen = |expected, seen| WaitSeen { expected, seen, missing: 0 };
        // Barrier #3 of 2 members: 2 * 3 arrivals expected, 2 * 2 + 1 seen: only this PE's own.
        let text = barrier_wait_seen(seen(6, Some(5)), &[0, 1], 0);
        assert_eq!(text, "; barrier #3: 1 of 2 arrivals counted (this PE's own): PEs not in this barrier yet: [1]");
        let text = barrier_wait_seen(seen(8, Some(5)), &[4, 5, 6, 7], 6);
        assert_eq!(text, "; barrier #2: 1 of 4 arrivals counted (this PE's own): PEs not in this barrier yet: [4, 5, 7]");
        // 3 of 4 arrived: which one is missing is not in the record; a departure's record has no count.
        assert_eq!(barrier_wait_seen(seen(8, Some(7)), &[0, 1, 2, 3], 2), "; barrier #2: 3 of 4 arrivals counted");
        assert_eq!(barrier_wait_seen(seen(8, None), &[0, 1, 2, 3], 2), "; barrier #2");
        assert_eq!(barrier_wait_seen(seen(4, Some(1)), &[], 0), "");
        // The kernel named them (team indices 1 and 3 behind): the PEs, whatever the count.
        let named = WaitSeen { expected: 8, seen: Some(6), missing: 0b1010 };
        assert_eq!(barrier_wait_seen(named, &[4, 5, 6, 7], 6), "; barrier #2: 2 of 4 arrivals counted: PEs not in this barrier yet: [5, 7]");
        let named = WaitSeen { expected: 8, seen: Some(7), missing: 0b1000 };
        assert_eq!(barrier_wait_seen(named, &[0, 1, 2, 3], 2), "; barrier #2: 3 of 4 arrivals counted: PEs not in this barrier yet: [3]");
        let departed = WaitSeen { seen: None, ..named };
        assert_eq!(barrier_wait_seen(departed, &[0, 1, 2, 3], 2), "; barrier #2: PEs not in this barrier yet: [3]");
    }

    #[test]
    fn rotation_wraps_to_the_first_ready_word() {
        assert_eq!(rotated_first(&[1, 3], 0), Some(1));
        assert_eq!(rotated_first(&[1, 3], 2), Some(3));
        assert_eq!(rotated_first(&[1, 3], 4), Some(1));
        assert_eq!(rotated_first(&[], 2), None);
    }

    #[test]
    fn successive_scans_visit_every_ready_word() {
        let met = [0, 2, 3];
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..8 {
            seen.insert(rotated_first(&met, next_any_start(4)).unwrap());
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), met);
        assert_eq!(next_any_start(0), 0);
    }
}
