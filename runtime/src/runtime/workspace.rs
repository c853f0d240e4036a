//! Byte offsets inside the runtime's symmetric workspace (one per PE, same offsets everywhere),
//! and the sizes of what each team slot keeps there.

use crate::consts::MAX_TEAMS;
use crate::device_state::{TeamDesc, BARRIER_WS_BYTES_PER_TEAM, MAX_PES};

/// Words of one member's slot of a host collective's signature (`agree.rs`): a tag with kind,
/// dtype, op and the refused flag; the root; the element count; the heap offsets of `dest` and
/// `source`.
pub(super) const AGREE_WORDS: usize = 5;
/// Dissemination rounds enough for any number of hosts: ceil(log2(MAX_PES)).
const HOSTS_BARRIER_ROUNDS: usize = (usize::BITS - (MAX_PES - 1).leading_zeros()) as usize;
/// Words of each team slot's barrier across hosts ([`HOSTS_BARRIER`], `sync.rs`): `gather`,
/// `release`, then one per dissemination round.
pub(super) const HOSTS_BARRIER_WORDS: usize = 2 + HOSTS_BARRIER_ROUNDS;

/// Barrier words of every team slot (`DeviceState::barrier_ws`; see `sync.rs`).
pub const BARRIER: usize = 0;
/// This PE's device team table, `[TeamDesc; MAX_TEAMS]` (`DeviceState::team_table`). In the
/// heap because that is device memory on the cuda backend, written by the host runtime
/// through the same private stream as its other writes (no copy on the legacy stream,
/// which would wait for a kernel spinning in a barrier).
pub const TEAM_TABLE: usize = BARRIER + MAX_TEAMS * BARRIER_WS_BYTES_PER_TEAM as usize;
/// Scratch words of `team_split_strided` (free-slot mask and the arguments).
pub const SPLIT: usize = TEAM_TABLE + MAX_TEAMS * std::mem::size_of::<TeamDesc>();
/// Words in the split scratch.
pub const SPLIT_WORDS: usize = 4;
/// The signature of each team slot's current host collective (see `agree.rs`).
pub const AGREE: usize = SPLIT + SPLIT_WORDS * 8;
/// The `u64` GPU threads take proxy tickets from (`DeviceState::proxy_head`): in the heap
/// because that is device memory on cuda, where an atomic add is cheap.
pub const PROXY_HEAD: usize = AGREE + MAX_TEAMS * AGREE_WORDS * 8;
/// The words of the barrier across hosts of every team slot (host backend; `sync.rs`).
pub const HOSTS_BARRIER: usize = PROXY_HEAD + 8;
/// Total size.
pub const BYTES: usize = HOSTS_BARRIER + MAX_TEAMS * HOSTS_BARRIER_WORDS * 8;
/// Bytes of each team slot's part of the collective workspace (`DeviceState::coll_ws`):
/// device reductions stage one chunk of this size per round of two team barriers, in their
/// team's part, so reductions of different teams may run at once (two streams, or an
/// on-stream reduction beside a Triton `*_reduce_block`). 128 KiB per slot keeps the whole
/// at 4 MiB, which even a small `RSHMEM_SYMMETRIC_SIZE` affords; a reduction of more than
/// 128 KiB per PE pays about 4 µs of barriers per chunk over NVLink.
pub const COLL_WS_BYTES_PER_TEAM: usize = 128 << 10;
/// Bytes of the collective workspace, a separate allocation: one part per team slot.
pub const COLL_WS_BYTES: usize = MAX_TEAMS * COLL_WS_BYTES_PER_TEAM;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_layout_fits() {
        assert_eq!((TEAM_TABLE % 16, SPLIT % 8), (0, 0));
        // Per team: barrier words (24), team descriptor (16), collective signature (agree.rs);
        // then the split words and the proxy's ticket word; then per team the barrier across
        // hosts (gather, release and 10 dissemination rounds for 1024 PEs).
        assert_eq!(HOSTS_BARRIER_WORDS, 12);
        assert_eq!(BYTES, MAX_TEAMS * (24 + 16 + AGREE_WORDS * 8) + SPLIT_WORDS * 8 + 8 + MAX_TEAMS * 12 * 8);
        assert_eq!((PROXY_HEAD % 8, HOSTS_BARRIER % 8), (0, 0));
        const { assert!(COLL_WS_BYTES_PER_TEAM % crate::runtime::DEFAULT_ALIGN == 0) };
    }
}
