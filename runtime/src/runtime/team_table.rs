//! Teams as data: the handle, the table of live teams on this PE, and the pure arithmetic of
//! `team_my_pe`, `team_translate_pe` and `team_split_strided` (the calls themselves, which
//! need the runtime, are `team.rs`).
//!
//! A team is an ordered list of world PEs. Its id is its slot in the table, the same on every
//! member: predefined teams take slots 0..4 (the `consts::TEAM_*` values) and a split picks the
//! lowest slot free on every PE of the parent (see `Runtime::team_split_strided`). The slot also
//! selects the team's barrier words in the runtime workspace (`arrive`, `epoch`; see `sync.rs`)
//! and its entry in the device team table, which device code and the runtime's kernels read.
//!
//! Barrier words are never reset while a team lives, so their counts assume one team size per
//! slot. When a split puts a new team into a slot, each member zeroes its own three words before
//! the split's last parent barrier: members of teams alive at once in one slot are disjoint (the
//! slot was free on all of them), so nobody else touches those words, and a PE's `arrive` is
//! stable once it has left its last barrier of the slot's previous team (every arrival it waited
//! for has landed, and no member can start another barrier of a destroyed team).

use crate::consts::{MAX_TEAMS, TEAM_INVALID, TEAM_NODE, TEAM_SAME_MYPE_NODE, TEAM_SHARED, TEAM_WORLD};
use crate::device_state::TeamDesc;
use crate::error::{Error, Result};

/// A team handle: the id of a team, valid on its members until `team_destroy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[doc(alias = "nvshmem_team_t")]
pub struct Team(pub i32);

impl Team {
    /// No team (what `team_split_strided` gives non-members in the C API).
    pub const INVALID: Team = Team(TEAM_INVALID);
    /// Every PE of the job.
    pub const WORLD: Team = Team(TEAM_WORLD);
    /// PEs whose symmetric memory this PE reaches by load/store.
    pub const SHARED: Team = Team(TEAM_SHARED);
    /// PEs on this host.
    pub const NODE: Team = Team(TEAM_NODE);
    /// PEs with this PE's node-local index, one per host.
    pub const SAME_MYPE_NODE: Team = Team(TEAM_SAME_MYPE_NODE);

    /// The id (a `consts::TEAM_*` value or a split team's slot).
    pub fn id(self) -> i32 {
        self.0
    }

    /// Whether this is one of the predefined teams.
    pub fn is_predefined(self) -> bool {
        (TEAM_WORLD..=TEAM_SAME_MYPE_NODE).contains(&self.0)
    }
}

/// Slots 0..PREDEFINED hold the predefined teams.
pub(crate) const PREDEFINED: usize = 4;

/// One live team, as this PE sees it.
#[derive(Debug, Clone)]
pub(crate) struct TeamInfo {
    /// For messages: `"team WORLD"`, `"team 4 (start 0, stride 2, size 2 of team WORLD)"`.
    pub name: String,
    /// World PE of each team PE, in team order.
    pub members: Vec<usize>,
    /// This PE's index in `members`.
    pub my_index: usize,
    /// On-stream collectives this PE queued on the team (their agreement's call numbers).
    pub stream_calls: u64,
}

impl TeamInfo {
    fn new(name: String, members: Vec<usize>, me: usize) -> Option<TeamInfo> {
        let my_index = members.iter().position(|&p| p == me)?;
        Some(TeamInfo { name, members, my_index, stream_calls: 0 })
    }

    /// Team size.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// World PE of team PE `pe`.
    ///
    /// # Errors
    /// [`Error::PeOutOfRange`] naming the team.
    pub fn world_pe(&self, pe: i64) -> Result<usize> {
        usize::try_from(pe).ok().and_then(|i| self.members.get(i).copied()).ok_or_else(|| Error::PeOutOfRange {
            pe,
            n_pes: self.size(),
            scope: self.name.clone(),
        })
    }

    /// The first member (a world PE) for which `reaches` is false, if any.
    pub fn first_unreachable(&self, reaches: impl Fn(usize) -> bool) -> Option<usize> {
        self.members.iter().copied().find(|&pe| !reaches(pe))
    }

    /// Team PE of world PE `world`, if a member.
    pub fn team_pe(&self, world: usize) -> Option<usize> {
        self.members.iter().position(|&p| p == world)
    }

    /// The team as device code sees it: members `start + i * stride` with `stride >= 1`.
    /// `None` when the members are not such a sequence (a split with a negative stride, or
    /// `SHARED` / `NODE` of an irregular layout): device code cannot address that team.
    pub fn desc(&self) -> Option<TeamDesc> {
        let start = *self.members.first()?;
        let stride = match self.members.get(1) {
            Some(&second) if second > start => second - start,
            Some(_) => return None,
            None => 1,
        };
        let regular = self.members.iter().enumerate().all(|(i, &p)| p == start + i * stride);
        let fits = |v: usize| i32::try_from(v).ok();
        if !regular {
            return None;
        }
        Some(TeamDesc {
            start: fits(start)?,
            stride: fits(stride)?,
            size: fits(self.size())?,
            my_index: fits(self.my_index)?,
        })
    }
}

/// The members of `team_split_strided(parent, start, stride, size)`, as world PEs.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the values when `size < 1`, when a selected index falls
/// outside the parent, or when `stride == 0` with `size > 1` (a PE listed twice).
pub(crate) fn split_members(parent: &TeamInfo, start: i32, stride: i32, size: i32) -> Result<Vec<usize>> {
    let call = || {
        format!(
            "team_split_strided(start={start}, stride={stride}, size={size}) over {} of {} PEs",
            parent.name,
            parent.size()
        )
    };
    if size < 1 {
        return Err(Error::InvalidArgument(format!("{}: size must be at least 1", call())));
    }
    if stride == 0 && size > 1 {
        return Err(Error::InvalidArgument(format!(
            "{}: stride 0 selects one PE several times; use size 1 or a non-zero stride",
            call()
        )));
    }
    let n = parent.size() as i64;
    (0..i64::from(size))
        .map(|i| {
            let idx = i64::from(start) + i * i64::from(stride);
            if (0..n).contains(&idx) {
                Ok(parent.members[idx as usize])
            } else {
                Err(Error::InvalidArgument(format!("{}: member {i} would be parent PE {idx}, outside 0..{n}", call())))
            }
        })
        .collect()
}

/// The live teams of this PE.
#[derive(Debug)]
pub(crate) struct TeamTable {
    slots: Vec<Option<TeamInfo>>,
    me: usize,
}

impl TeamTable {
    /// The predefined teams of PE `me`, from the node of every PE (`node_of[pe]`) and the
    /// load/store reachability of every PE (`reachable[pe]`).
    pub fn new(me: usize, node_of: &[usize], reachable: &[bool]) -> TeamTable {
        let n = node_of.len();
        let local_index = |p: usize| (0..p).filter(|&q| node_of[q] == node_of[p]).count();
        let my_local = local_index(me);
        let world: Vec<usize> = (0..n).collect();
        let node: Vec<usize> = (0..n).filter(|&p| node_of[p] == node_of[me]).collect();
        let shared: Vec<usize> = (0..n).filter(|&p| p == me || reachable[p]).collect();
        let same: Vec<usize> = (0..n).filter(|&p| local_index(p) == my_local).collect();
        let mut slots = vec![None; MAX_TEAMS];
        let defs = [
            (TEAM_WORLD, "team WORLD", world),
            (TEAM_SHARED, "team SHARED", shared),
            (TEAM_NODE, "team NODE", node),
            (TEAM_SAME_MYPE_NODE, "team SAME_MYPE_NODE", same),
        ];
        for (id, name, members) in defs {
            slots[id as usize] = TeamInfo::new(name.to_string(), members, me);
        }
        TeamTable { slots, me }
    }

    /// The team behind a handle.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the handle names no live team of this PE.
    pub fn get(&self, team: Team) -> Result<&TeamInfo> {
        usize::try_from(team.0).ok().and_then(|i| self.slots.get(i)).and_then(Option::as_ref).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "team {} is not a live team of PE {}: it was destroyed, never created, or \
                     this PE is not a member (team_split_strided returned None here)",
                team.0, self.me
            ))
        })
    }

    /// `team_translate_pe`: the PE of `dest` that is team PE `pe` of `src`, -1 if not a member.
    ///
    /// # Errors
    /// As [`TeamTable::get`] for either team; [`Error::PeOutOfRange`] when `pe` is not in `src`.
    pub fn translate(&self, src: Team, pe: i32, dest: Team) -> Result<i32> {
        let world = self.get(src)?.world_pe(pe.into())?;
        Ok(self.get(dest)?.team_pe(world).map_or(-1, |i| i as i32))
    }

    /// Bit `k` set when slot `k` is free here.
    pub fn free_mask(&self) -> u64 {
        self.slots.iter().enumerate().filter(|(_, s)| s.is_none()).fold(0u64, |m, (k, _)| m | (1 << k))
    }

    /// Records a split team in `slot` if this PE is a member; returns its handle.
    pub fn insert(&mut self, slot: usize, name: String, members: Vec<usize>) -> Option<Team> {
        let info = TeamInfo::new(name, members, self.me)?;
        debug_assert!(self.slots[slot].is_none());
        self.slots[slot] = Some(info);
        Some(Team(slot as i32))
    }

    /// The call number of the next on-stream collective on `team` (1, 2, ...), counted.
    ///
    /// # Errors
    /// As [`TeamTable::get`].
    pub fn next_stream_call(&mut self, team: Team) -> Result<u64> {
        match usize::try_from(team.0).ok().and_then(|i| self.slots.get_mut(i)).and_then(Option::as_mut) {
            Some(info) => {
                info.stream_calls += 1;
                Ok(info.stream_calls)
            }
            // Not live: `get` says why.
            None => self.get(team).map(|_| 0),
        }
    }

    /// Removes a split team.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a predefined or unknown team.
    pub fn destroy(&mut self, team: Team) -> Result<()> {
        if team.is_predefined() {
            return Err(Error::InvalidArgument(format!(
                "team {} is predefined and cannot be destroyed",
                self.get(team).map_or_else(|_| team.0.to_string(), |t| t.name.clone())
            )));
        }
        self.get(team)?;
        self.slots[team.0 as usize] = None;
        Ok(())
    }

    /// The device table entry of `slot`: the team's [`TeamInfo::desc`], or an unused entry
    /// (`size == 0`) for a free slot or a team device code cannot address.
    pub fn desc(&self, slot: usize) -> TeamDesc {
        self.slots.get(slot).and_then(Option::as_ref).and_then(TeamInfo::desc).unwrap_or_default()
    }
}

/// The lowest slot free in every mask, above the predefined ones.
pub(crate) fn common_free_slot(masks: &[u64]) -> Option<usize> {
    let all = masks.iter().fold(u64::MAX, |a, &m| a & m) & !((1u64 << PREDEFINED) - 1);
    let slot = all.trailing_zeros() as usize;
    (slot < MAX_TEAMS).then_some(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two hosts with PEs interleaved: node_of = [0, 1, 0, 1, 0, 1].
    fn two_nodes(me: usize) -> TeamTable {
        TeamTable::new(me, &[0, 1, 0, 1, 0, 1], &[true, false, true, false, true, false])
    }

    #[test]
    fn predefined_teams_follow_the_node_layout() {
        let t = two_nodes(4);
        assert_eq!(t.get(Team::WORLD).unwrap().members, [0, 1, 2, 3, 4, 5]);
        assert_eq!(t.get(Team::NODE).unwrap().members, [0, 2, 4]);
        assert_eq!(t.get(Team::NODE).unwrap().my_index, 2);
        assert_eq!(t.get(Team::SHARED).unwrap().members, [0, 2, 4]);
        assert_eq!(t.get(Team::SAME_MYPE_NODE).unwrap().members, [4, 5]);
        let t = two_nodes(3);
        assert_eq!(t.get(Team::SAME_MYPE_NODE).unwrap().members, [2, 3]);
        assert_eq!(t.get(Team::SAME_MYPE_NODE).unwrap().my_index, 1);
    }

    #[test]
    fn translate_pe() {
        let t = two_nodes(2);
        assert_eq!(t.translate(Team::NODE, 1, Team::WORLD).unwrap(), 2);
        assert_eq!(t.translate(Team::WORLD, 3, Team::NODE).unwrap(), -1);
        assert_eq!(t.translate(Team::WORLD, 4, Team::NODE).unwrap(), 2);
        let err = t.translate(Team::NODE, 3, Team::WORLD).unwrap_err().to_string();
        assert!(err.contains("PE 3") && err.contains("team NODE") && err.contains("3 PEs"), "{err}");
        assert!(t.translate(Team(9), 0, Team::WORLD).is_err());
        assert!(t.translate(Team::WORLD, -1, Team::WORLD).is_err());
    }

    #[test]
    fn split_strided_validates_and_selects() {
        let t = two_nodes(0);
        let world = t.get(Team::WORLD).unwrap();
        assert_eq!(split_members(world, 0, 2, 3).unwrap(), [0, 2, 4]);
        assert_eq!(split_members(world, 5, -2, 3).unwrap(), [5, 3, 1]);
        assert_eq!(split_members(world, 3, 0, 1).unwrap(), [3]);
        let node = t.get(Team::NODE).unwrap();
        assert_eq!(split_members(node, 1, 1, 2).unwrap(), [2, 4]);
        for (start, stride, size, needle) in
            [(0, 2, 4, "parent PE 6"), (-1, 1, 1, "parent PE -1"), (0, 1, 0, "at least 1"), (0, 0, 2, "stride 0")]
        {
            let err = split_members(world, start, stride, size).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains(&format!("start={start}")), "{err}");
        }
    }

    #[test]
    fn slots_are_chosen_in_common_and_reused() {
        let mut t = two_nodes(0);
        assert_eq!(t.free_mask() & 0xf, 0);
        let mut other = two_nodes(2);
        // A team on PE 0 only (slot 4) makes slot 4 busy for any split PE 0 takes part in.
        assert_eq!(t.insert(4, "a".into(), vec![0]), Some(Team(4)));
        assert_eq!(common_free_slot(&[t.free_mask(), other.free_mask()]), Some(5));
        assert_eq!(other.insert(5, "b".into(), vec![0, 4]), None, "PE 2 is not a member");
        t.destroy(Team(4)).unwrap();
        assert_eq!(common_free_slot(&[t.free_mask(), other.free_mask()]), Some(4));
        assert!(t.destroy(Team(4)).is_err());
        assert!(t.destroy(Team::WORLD).unwrap_err().to_string().contains("predefined"));
        let full: Vec<u64> = vec![0xf];
        assert_eq!(common_free_slot(&full), None);
        other.destroy(Team(5)).unwrap_err();
    }

    #[test]
    fn a_member_on_another_host_is_found_before_any_kernel_runs() {
        // PEs 1, 3, 5 live on the other host (two_nodes): device code cannot reach them.
        let t = two_nodes(0);
        let reaches = |pe: usize| pe % 2 == 0;
        assert_eq!(t.get(Team::WORLD).unwrap().first_unreachable(reaches), Some(1));
        assert_eq!(t.get(Team::NODE).unwrap().first_unreachable(reaches), None);
        assert_eq!(t.get(Team::SAME_MYPE_NODE).unwrap().first_unreachable(reaches), Some(1));
    }

    #[test]
    fn device_descriptors_of_regular_and_irregular_teams() {
        let mut t = two_nodes(4);
        let d = |start, stride, size, my_index| TeamDesc { start, stride, size, my_index };
        assert_eq!(t.desc(TEAM_WORLD as usize), d(0, 1, 6, 4));
        assert_eq!(t.desc(TEAM_NODE as usize), d(0, 2, 3, 2));
        assert_eq!(t.desc(TEAM_SAME_MYPE_NODE as usize), d(4, 1, 2, 0));
        // Free slot, one-PE team, reversed (negative stride) and irregular teams.
        assert_eq!(t.desc(7), TeamDesc::default());
        t.insert(4, "one".into(), vec![4]);
        assert_eq!(t.desc(4), d(4, 1, 1, 0));
        t.insert(5, "reversed".into(), vec![5, 4, 3]);
        assert_eq!(t.desc(5).size, 0);
        t.insert(6, "irregular".into(), vec![0, 1, 4]);
        assert_eq!(t.desc(6).size, 0);
        t.destroy(Team(4)).unwrap();
        assert_eq!(t.desc(4), TeamDesc::default());
        assert_eq!(t.desc(MAX_TEAMS + 3), TeamDesc::default());
    }
}
