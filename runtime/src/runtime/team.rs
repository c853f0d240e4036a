//! The `team_*` calls of [`Runtime`]: what they check and what they write to the runtime
//! workspace. The teams themselves (handle, table, split arithmetic, how slots and barrier words
//! are reused) are `team_table.rs`.

use super::team_table::{common_free_slot, split_members, Team};
use super::{workspace, Runtime};
use crate::consts::MAX_TEAMS;
use crate::device_state::BARRIER_WS_BYTES_PER_TEAM;
use crate::error::{Error, Result};

impl Runtime {
    /// This PE's number in `team`; -1 for [`Team::INVALID`] (what a split gives the PEs it
    /// leaves out), as NVSHMEM.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for another team this PE is not in.
    #[doc(alias = "nvshmem_team_my_pe")]
    pub fn team_my_pe(&self, team: Team) -> Result<i32> {
        if team == Team::INVALID {
            return Ok(-1);
        }
        Ok(self.teams().get(team)?.my_index as i32)
    }

    /// Number of PEs in `team`; -1 for [`Team::INVALID`], as NVSHMEM.
    ///
    /// # Errors
    /// As [`Runtime::team_my_pe`].
    #[doc(alias = "nvshmem_team_n_pes")]
    pub fn team_n_pes(&self, team: Team) -> Result<i32> {
        if team == Team::INVALID {
            return Ok(-1);
        }
        Ok(self.teams().get(team)?.size() as i32)
    }

    /// The number in `dest` of team PE `pe` of `src`, or -1 when that PE is not in `dest` or
    /// either team is [`Team::INVALID`] (as NVSHMEM).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for another team this PE is not in; [`Error::PeOutOfRange`]
    /// when `pe` is not a PE of `src`.
    #[doc(alias = "nvshmem_team_translate_pe")]
    pub fn team_translate_pe(&self, src: Team, pe: i32, dest: Team) -> Result<i32> {
        if src == Team::INVALID || dest == Team::INVALID {
            return Ok(-1);
        }
        self.teams().translate(src, pe, dest)
    }

    /// Makes a team of the parent's PEs `start, start + stride, ...` (`size` of them).
    /// Collective over `parent`: every parent PE calls it with the same arguments; members get
    /// the new team, the others `None` ([`Team::INVALID`] in C). A PE whose `parent` is
    /// [`Team::INVALID`] (left out of an earlier split) takes no part and gets `None`, as in
    /// NVSHMEM.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the values for a selection outside the parent, a
    /// `size < 1`, a zero stride with `size > 1`, or when all `MAX_TEAMS` slots are taken;
    /// [`Error::Mismatch`] when parent PEs pass different arguments; [`Error::PeerDied`].
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/team.html>
    #[doc(alias = "nvshmem_team_split_strided")]
    pub fn team_split_strided(&self, parent: Team, start: i32, stride: i32, size: i32) -> Result<Option<Team>> {
        if parent == Team::INVALID {
            return Ok(None);
        }
        let _named = crate::watchdog::call_scope("team_split_strided");
        let (pinfo, mask) = {
            let t = self.teams();
            (t.get(parent)?.clone(), t.free_mask())
        };
        // Exchange the free-slot masks and the arguments through the workspace scratch: each
        // parent PE writes its own, then reads everyone's between two parent barriers (the
        // second keeps a PE from overwriting its scratch while others still read it).
        let scratch = self.workspace + workspace::SPLIT;
        let mine = [mask, start as i64 as u64, stride as i64 as u64, size as i64 as u64];
        self.write_heap(scratch, self.my_pe(), &words_to_bytes(&mine))?;
        self.barrier(parent)?;
        let mut all = Vec::with_capacity(pinfo.size());
        let mut buf = [0u8; workspace::SPLIT_WORDS * 8];
        for &pe in &pinfo.members {
            self.read_heap(scratch, pe, &mut buf)?;
            all.push((pe, bytes_to_words(&buf)));
        }
        let mismatch = all.iter().find(|(_, w)| w[1..] != mine[1..]).copied();
        let masks: Vec<u64> = all.iter().map(|(_, w)| w[0]).collect();
        let chosen = match (mismatch, split_members(&pinfo, start, stride, size), common_free_slot(&masks)) {
            (None, Ok(members), Some(slot)) => Some((members, slot)),
            _ => None,
        };
        // A member zeroes its barrier words of the new slot before the last parent barrier, so
        // no member can arrive at the new team's first barrier before every member's words
        // are zero (see the module docs for why nobody else touches them then).
        if let Some((members, slot)) = &chosen {
            if members.contains(&self.my_pe()) {
                self.write_heap(self.barrier_words(*slot), self.my_pe(), &[0u8; BARRIER_WS_BYTES_PER_TEAM as usize])?;
                self.write_heap(self.hosts_barrier_words(*slot), self.my_pe(), &[0u8; workspace::HOSTS_BARRIER_WORDS * 8])?;
            }
        }
        self.barrier(parent)?;
        if let Some((pe, theirs)) = mismatch {
            let show = |w: &[u64; 4]| format!("start={}, stride={}, size={}", w[1] as i64, w[2] as i64, w[3] as i64);
            return Err(Error::Mismatch {
                what: "team_split_strided arguments",
                me: self.my_pe(),
                pe,
                mine: show(&mine),
                theirs: show(&theirs),
            });
        }
        split_members(&pinfo, start, stride, size)?;
        let Some((members, slot)) = chosen else {
            return Err(Error::InvalidArgument(format!(
                "team_split_strided over {}: no team slot is free on every parent PE (at most {MAX_TEAMS} \
                 teams, predefined ones included); destroy teams that are no longer used",
                pinfo.name
            )));
        };
        let name = format!("team {slot} (start {start}, stride {stride}, size {size} of {})", pinfo.name);
        tracing::debug!(pe = self.my_pe(), slot, ?members, "team split");
        let team = self.teams().insert(slot, name, members);
        if team.is_some() {
            self.write_team_desc(slot)?;
        }
        Ok(team)
    }

    /// Destroys a team made by [`Runtime::team_split_strided`]; its id may be reused by a later
    /// split. Every member calls it; outstanding puts of this PE are completed first, and so
    /// are the team's barriers, fcollects and reductions this PE queued on streams (the slot's
    /// barrier words and workspace are reused). Kernels of the caller that use the team must
    /// have finished (synchronize their streams).
    ///
    /// [`Team::INVALID`] is a no-op, as in NVSHMEM: the PEs a split left out may destroy "the
    /// team" with everyone else.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a predefined team or one this PE is not in;
    /// [`Error::PeerDied`] / [`Error::WaitTimeout`] while waiting for queued work.
    #[doc(alias = "nvshmem_team_destroy")]
    pub fn team_destroy(&self, team: Team) -> Result<()> {
        if team == Team::INVALID {
            return Ok(());
        }
        self.quiet()?;
        self.teams().get(team)?;
        if !team.is_predefined() {
            self.wait_for_queued_barriers(team, "team_destroy")?;
        }
        self.teams().destroy(team)?;
        self.write_team_desc(team.0 as usize)
    }

    /// Splits `parent` into a 2D grid of `xrange` columns: the x-axis teams are the rows
    /// (consecutive parent PEs, `xrange` of them, the last row shorter when `xrange` does not
    /// divide the parent's size) and the y-axis teams the columns (parent PEs `j, j + xrange,
    /// ...`). Returns this PE's (x-axis, y-axis) teams. Collective over `parent`, made of
    /// [`Runtime::team_split_strided`] calls in NVSHMEM's order (rows, then columns), so it
    /// takes `ceil(size / xrange) + xrange` team slots across the parent; an `xrange` above the
    /// parent's size is clamped to it. A PE whose `parent` is [`Team::INVALID`] gets
    /// `(None, None)`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `xrange < 1` or when the team slots run out; as
    /// [`Runtime::team_split_strided`] otherwise.
    ///
    /// # References
    /// <https://docs.nvidia.com/nvshmem/api/gen/api/team.html>
    #[doc(alias = "nvshmem_team_split_2d")]
    pub fn team_split_2d(&self, parent: Team, xrange: i32) -> Result<(Option<Team>, Option<Team>)> {
        if parent == Team::INVALID {
            return Ok((None, None));
        }
        let size = self.team_n_pes(parent)?;
        if xrange < 1 {
            return Err(Error::InvalidArgument(format!(
                "team_split_2d over team {}: xrange must be at least 1, got {xrange}",
                parent.0
            )));
        }
        let xrange = xrange.min(size);
        let (rows, rest) = (size / xrange, size % xrange);
        let mut x = None;
        for row in 0..rows + i32::from(rest > 0) {
            let len = if row == rows { rest } else { xrange };
            if let Some(t) = self.team_split_strided(parent, row * xrange, 1, len)? {
                x = Some(t);
            }
        }
        let mut y = None;
        for col in 0..xrange {
            let len = rows + i32::from(col < rest);
            if let Some(t) = self.team_split_strided(parent, col, xrange, len)? {
                y = Some(t);
            }
        }
        Ok((x, y))
    }

    /// Writes this PE's device team-table entry of `slot` from the team table.
    pub(super) fn write_team_desc(&self, slot: usize) -> Result<()> {
        let d = self.teams().desc(slot);
        let mut bytes = [0u8; 16];
        for (chunk, v) in bytes.chunks_exact_mut(4).zip([d.start, d.stride, d.size, d.my_index]) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        self.write_heap(self.workspace + workspace::TEAM_TABLE + 16 * slot, self.my_pe(), &bytes)
    }
}

fn words_to_bytes(words: &[u64; workspace::SPLIT_WORDS]) -> [u8; workspace::SPLIT_WORDS * 8] {
    let mut out = [0u8; workspace::SPLIT_WORDS * 8];
    for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_ne_bytes());
    }
    out
}

fn bytes_to_words(bytes: &[u8; workspace::SPLIT_WORDS * 8]) -> [u64; workspace::SPLIT_WORDS] {
    let mut out = [0u64; workspace::SPLIT_WORDS];
    for (w, chunk) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *w = u64::from_ne_bytes(b);
    }
    out
}
