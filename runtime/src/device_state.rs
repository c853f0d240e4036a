//! The device state: the one struct device code reads.
//!
//! Every CUDA module that links the device library (`triton-lib/`) holds a global
//! `rshmemi_device_state_d` of this type. After loading such a module the runtime writes one
//! [`DeviceState`] into it (`cuModuleGetGlobal` + a copy); device functions only read it. The
//! values do not change after init: the heap's virtual range is reserved once, so its base and
//! stride are fixed, and teams live in a table that the state only points to.
//!
//! This file is the only definition. `triton-lib/include/rshmem/device_state.h` is generated from
//! it (and from [`crate::consts`]) by cbindgen with `runtime/cbindgen.toml`; the test
//! `runtime/tests/device_state_header.rs` regenerates the header, fails on a difference, and
//! checks every size and offset against the C compiler's. Regenerate with
//! `RSHMEM_BLESS=1 cargo test -p rshmem --test device_state_header`.
//!
//! Layout rules that keep Rust and C identical without relying on either compiler's padding:
//! fields are ordered by size, 64-bit fields start at 8-byte offsets, and the size is a multiple
//! of 8 (checked by the const assertions at the end of this file).

/// `DeviceState::magic`: "RSHM" in little-endian, so a zero (never initialized) state is seen.
pub const DEVICE_STATE_MAGIC: u32 = 0x4D48_5352;

/// `DeviceState::version`: bumped whenever a field changes meaning, size or place.
pub const DEVICE_STATE_VERSION: u32 = 5;

/// How many PEs the device state can describe (`DeviceState::pe_slot` entries).
///
/// 1024 covers 128 hosts of 8 GPUs; the table costs 4 KiB per module, which is read only for the
/// PEs a kernel talks to.
pub const MAX_PES: usize = 1024;

/// `DeviceState::pe_slot` entry of a PE this PE cannot reach by load/store.
pub const PE_NOT_REACHABLE: i32 = -1;

/// `DeviceState::flags` bit: the state was written by the runtime (set with `magic`).
pub const DEVICE_FLAG_INITIALIZED: u32 = 1;

/// `DeviceState::flags` bit: every PE of the job is reachable by load/store (one host), so device
/// code may skip the per-PE reachability check.
pub const DEVICE_FLAG_ALL_REACHABLE: u32 = 2;

/// Bytes of barrier workspace per team at `DeviceState::barrier_ws`: three `u64` words.
///
/// For team `t` the words live at `barrier_ws + BARRIER_WS_BYTES_PER_TEAM * t`:
/// `arrive` (offset 0), incremented remotely by every member at each barrier; `ticket`
/// (offset 8) and `done` (offset 16), touched only by their own PE. A barrier instance takes
/// `e = ++ticket`, waits until `done >= e - 1` (this PE's previous instance of the team has
/// finished), adds 1 to every member's `arrive`, waits until its own `arrive >= e * size`, then
/// sets `done = e`. So a PE's instances of one team run one after another in ticket order, and
/// two of them (two CTAs, a kernel and the host) can never count each other's arrivals. The
/// words are never reset while the team lives; host and device barriers share them.
pub const BARRIER_WS_BYTES_PER_TEAM: u64 = 24;

/// `ErrorRecord::flag` while the first failing thread is writing the record.
pub const ERROR_FLAG_WRITING: u32 = 1;

/// `ErrorRecord::flag` once complete: a wait spun longer than `debug_wait_timeout_ns`.
/// `addr` is the polled address, `cmp`/`expected` the condition, `seen` the last value read.
pub const ERROR_FLAG_WAIT_TIMEOUT: u32 = 2;

/// `ErrorRecord::flag` once complete: a put/get/atomic/signal named a PE that this PE cannot
/// reach by load/store, or an address outside the symmetric heap. `addr` is the address,
/// `cmp` the target PE; `expected`/`seen` 0, or what the translation saw: `expected` has
/// [`BAD_ADDRESS_SEEN`] set, the heap bound in its low bits ([`BAD_ADDRESS_BOUND_MASK`]) and the
/// [`BAD_ADDRESS_RING`] / [`BAD_ADDRESS_REMOTE`] bits, `seen` the offset of `addr` from the start
/// of this PE's heap slot (wrapped when below it).
pub const ERROR_FLAG_BAD_ADDRESS: u32 = 3;

/// `ErrorRecord::expected` bit of an [`ERROR_FLAG_BAD_ADDRESS`] record: the kernel recorded what
/// its translation saw (the other bits and `seen` are meaningful).
pub const BAD_ADDRESS_SEEN: u64 = 0x8000_0000_0000_0000;
/// This PE had a proxy ring (`DeviceState::proxy_ring` non-zero) when the kernel stopped.
pub const BAD_ADDRESS_RING: u64 = 0x4000_0000_0000_0000;
/// The target PE's `DeviceState::pe_slot` entry said "not reachable by load/store" (negative).
pub const BAD_ADDRESS_REMOTE: u64 = 0x2000_0000_0000_0000;
/// The bits of `expected` that hold the heap bound (`DeviceState::heap_bound`) the kernel read.
pub const BAD_ADDRESS_BOUND_MASK: u64 = 0x1fff_ffff_ffff_ffff;

/// `ErrorRecord::flag` once complete: an argument device code cannot act on (a comparison or
/// signal operation that is not a `CMP_*` / `SIGNAL_*` value, a team that does not exist or
/// that this PE is not in, a root outside the team, a missing workspace). `addr` is the pointer
/// argument (0 if none), `cmp` the bad value.
pub const ERROR_FLAG_BAD_ARGUMENT: u32 = 4;

/// `ErrorRecord::flag` once complete: an operation towards a PE on another host could not be
/// carried out because the proxy that executes them (`transport/proxy.rs`) stopped on an
/// error (a dead peer, a broken connection); the host reports the proxy's own error. `addr` is
/// the ring word that was polled, `cmp` the proxy's failure code, `expected`/`seen` the ticket
/// waited for and the value read.
pub const ERROR_FLAG_PROXY: u32 = 5;

/// `ErrorRecord::flag` once complete: the members of an on-stream collective queued it with
/// different arguments (`runtime/src/runtime/agree.rs`). `addr` holds this PE's call number of
/// the team in its high 32 bits and the member's in its low 32 bits; `cmp` the member's world
/// PE in its low 32 bits and the team slot in its high 32 bits; `expected` this PE's packed
/// call and `seen` the member's.
pub const ERROR_FLAG_MISMATCH: u32 = 6;

/// `ErrorRecord::flag` once complete: device code built in check mode (`RSHMEM_CHECK=1`: the
/// device library's `libshmem_device.check.bc`) found a put, get, signal or atomic whose range
/// is not program memory: it starts below `DeviceState::user_base` (the runtime's own words,
/// such as the barrier counters) or reaches past `heap_bound`. `addr` is the symmetric address,
/// `cmp` the target PE, `expected` the operation (`CHECK_OP_*`), `seen` the byte count.
pub const ERROR_FLAG_UNSAFE_ADDRESS: u32 = 7;

/// `ErrorRecord::flag` once complete: a wait in a kernel gave up because a peer left the job
/// (its departure written to `DeviceState::peer_left` by the runtime) and the wait stayed
/// unsatisfied [`PEER_LEFT_GRACE_NS`] after the kernel saw it. `addr` is the polled address,
/// `cmp`/`expected` the condition, `seen` the `peer_left` word.
pub const ERROR_FLAG_PEER_LEFT: u32 = 8;

/// `ErrorRecord::cmp` bit of an [`ERROR_FLAG_WAIT_TIMEOUT`] or [`ERROR_FLAG_PEER_LEFT`] record:
/// the wait was the kernel that `signal_wait_until_on_stream` queues (the comparison is in the
/// low bits), so the message names that call instead of "a wait in a kernel".
pub const WAIT_ON_STREAM: u64 = 0x100;

/// How long a wait in a kernel keeps polling after it saw a peer's departure, for arrivals
/// still in flight (a PE that left after its calls; through another host's transport they can
/// land after its notice), as host waits do.
pub const PEER_LEFT_GRACE_NS: u64 = 500_000_000;

/// Per index among the PEs sharing a GPU, how much later a wait in a kernel stops than the
/// first sharer's would ([`DeviceState::stop_delay_ms`]). Measured on an H200: kernels of two
/// processes that trapped within a few ms of each other left one running; about 1.3 s apart
/// both stopped.
pub const STOP_STAGGER_MS: u32 = 1000;

/// `DeviceState::peer_left` word: the low 32 bits hold 1 + the first PE that left the job
/// (0: none); this bit is set when that PE died instead of finalizing.
pub const PEER_LEFT_DIED: u64 = 0x1_0000_0000;

/// `ErrorRecord::expected` of [`ERROR_FLAG_UNSAFE_ADDRESS`]: a put (`putmem`, `put`, ...).
pub const CHECK_OP_PUT: u32 = 1;
/// A get.
pub const CHECK_OP_GET: u32 = 2;
/// A single-element put (`p`).
pub const CHECK_OP_P: u32 = 3;
/// A single-element get (`g`).
pub const CHECK_OP_G: u32 = 4;
/// A signal operation on a signal word (also the signal of a put with signal).
pub const CHECK_OP_SIGNAL: u32 = 5;
/// An atomic memory operation.
pub const CHECK_OP_AMO: u32 = 6;
/// The data of a put with signal.
pub const CHECK_OP_PUT_SIGNAL: u32 = 7;

/// Descriptor slots in a PE's proxy ring (a power of two: ticket `t` uses slot `t % PROXY_SLOTS`).
/// 1024 slots of 64 bytes: 64 KiB of page-locked host memory per PE.
pub const PROXY_SLOTS: u32 = 1024;

/// `ProxyDesc::kind`: copy `nbytes` from local `source` to symmetric `dest` on `pe`.
pub const PROXY_PUT: u8 = 1;
/// Copy `nbytes` from symmetric `source` on `pe` to local `dest`.
pub const PROXY_GET: u8 = 2;
/// A put of `nbytes` (at most 8) whose data is `value` itself (`p`); nothing to wait for.
pub const PROXY_PUT_INLINE: u8 = 3;
/// A put, then `sub` (`SIGNAL_SET` / `SIGNAL_ADD`) of `value` on signal word `sig_addr`.
pub const PROXY_PUT_SIGNAL: u8 = 4;
/// An atomic `sub` (`AMO_*`) of `width` bytes on symmetric `dest` of `pe`, operands `value`
/// and `value2` (compare-and-swap: expected, new); with [`PROXY_FLAG_FETCH`] the old value is
/// returned in `value`.
pub const PROXY_AMO: u8 = 5;
/// Completes every operation posted before it at its target (device `quiet` / `fence`).
pub const PROXY_QUIET: u8 = 6;

/// `ProxyDesc::flags` bit: the poster waits for a result (`g`, fetching atomics): the proxy
/// writes it to `value`, sets `seq` to [`PROXY_SEQ_RESULT`], and reuses the slot only after the
/// poster has set `seq` to 0.
pub const PROXY_FLAG_FETCH: u8 = 1;

/// `ProxyDesc::seq` of a fetching descriptor whose result is in `value`.
pub const PROXY_SEQ_RESULT: u64 = 0xFFFF_FFFF_FFFF_FFFF;

/// One operation a GPU thread posts for the proxy: slot `t % PROXY_SLOTS` of the ring.
///
/// The poster writes every field, then `seq = t + 1` with release at system scope; the proxy
/// acquires `seq`, runs the operation, and frees the slot (`seq = 0`, then `ProxyRing::tail`).
/// Addresses are this PE's symmetric addresses (the same object on `pe` is at the same heap
/// offset) or, for `source` of a put and `dest` of a get, any device or host address.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyDesc {
    /// 0 = free, `t + 1` = ticket `t` posted, [`PROXY_SEQ_RESULT`] = result ready.
    pub seq: u64,
    /// Destination address (symmetric for a put, local for a get; the word of an atomic).
    pub dest: u64,
    /// Source address (local for a put, symmetric for a get).
    pub source: u64,
    /// Bytes moved.
    pub nbytes: u64,
    /// Symmetric address of the signal word ([`PROXY_PUT_SIGNAL`]).
    pub sig_addr: u64,
    /// Signal value, atomic operand, inline data; the result of a fetching descriptor.
    pub value: u64,
    /// Second atomic operand (the new value of a compare-and-swap).
    pub value2: u64,
    /// `PROXY_*` operation.
    pub kind: u8,
    /// Signal operation (`SIGNAL_*`) or atomic operation (`AMO_*`).
    pub sub: u8,
    /// Bytes of an atomic's word (4 or 8).
    pub width: u8,
    /// `PROXY_FLAG_*` bits.
    pub flags: u8,
    /// The target PE (world numbering).
    pub pe: i32,
}

/// The header of a PE's proxy ring, followed by [`PROXY_SLOTS`] [`ProxyDesc`]s, all in
/// page-locked host memory at `DeviceState::proxy_ring`. Tickets come from the device word at
/// `DeviceState::proxy_head` (an atomic add in GPU memory is cheap, one on host memory over PCIe
/// is not everywhere supported); everything here the proxy writes and GPU threads poll.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyRing {
    /// Tickets the proxy has finished, in order: slot `t % PROXY_SLOTS` is free for ticket
    /// `t + PROXY_SLOTS` once `tail > t`.
    pub tail: u64,
    /// `tail` after the last [`PROXY_QUIET`]: every ticket below it is complete at its target.
    pub quieted: u64,
    /// Nonzero once the proxy stopped on an error: waits on the ring fail
    /// ([`ERROR_FLAG_PROXY`]) instead of spinning for ever.
    pub failed: u64,
    /// Zero; the descriptors start on their own 64-byte line.
    pub reserved: [u64; 5],
}

/// Operation codes of the cuda backend's one-thread atomic kernels (`rshmemi_amo32/64` in
/// `triton-lib/src/runtime_kernels.cu`, which reads them from the generated header): fetch.
pub const AMO_FETCH: u32 = 0;
/// Store (returns the old value).
pub const AMO_SET: u32 = 1;
/// Exchange.
pub const AMO_SWAP: u32 = 2;
/// Compare and swap (first operand: the expected value, second: the new one).
pub const AMO_COMPARE_SWAP: u32 = 3;
/// Wrapping add.
pub const AMO_ADD: u32 = 4;
/// Bitwise and.
pub const AMO_AND: u32 = 5;
/// Bitwise or.
pub const AMO_OR: u32 = 6;
/// Bitwise xor.
pub const AMO_XOR: u32 = 7;
/// A load with acquire ordering (no fence before it).
pub const AMO_LOAD_ACQUIRE: u32 = 8;

/// A team as device code sees it: entry `t` of the array at `DeviceState::team_table`.
///
/// Member `i` of the team (0 <= i < `size`) is world PE `start + i * stride`. The runtime writes
/// an entry when the team is made and sets `size = 0` when it is destroyed.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TeamDesc {
    /// World PE of member 0.
    pub start: i32,
    /// Distance between consecutive members, in world PEs (>= 1).
    pub stride: i32,
    /// Number of members; 0 for an unused entry.
    pub size: i32,
    /// This PE's index in the team, or -1 when it is not a member.
    pub my_index: i32,
}

/// What device code writes to `DeviceState::error_buf` before it stops the kernel with `trap`.
///
/// The buffer is host-mapped memory, so the host reads it after the launch fails and raises an
/// error naming the PE, the address and the values. Only the first thread that wins `flag`
/// (compare-and-swap 0 -> [`ERROR_FLAG_WRITING`]) writes the rest; it stores the final `ERROR_FLAG_*`
/// kind into `flag` last, with release semantics at system scope.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorRecord {
    /// 0 = empty, [`ERROR_FLAG_WRITING`], or the kind of a complete record (`ERROR_FLAG_*`).
    pub flag: u32,
    /// The PE whose kernel stopped.
    pub pe: i32,
    /// Symmetric (local) address that was polled.
    pub addr: u64,
    /// The comparison (`CMP_*`).
    pub cmp: u64,
    /// The value compared against.
    pub expected: u64,
    /// The last value read.
    pub seen: u64,
    /// A team barrier's wait: the members, as bits of their index in the team (the first 64),
    /// that had not entered that barrier when the kernel stopped; 0 for other records.
    pub missing: u64,
}

/// The state every module linking the device library reads from `rshmemi_device_state_d`.
///
/// All addresses are this process's virtual addresses, passed as `u64` so that the layout is the
/// same in Rust, C and PTX.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceState {
    /// [`DEVICE_STATE_MAGIC`] once written; 0 in a module the runtime has not initialized.
    pub magic: u32,
    /// [`DEVICE_STATE_VERSION`] of the runtime that wrote it.
    pub version: u32,
    /// This PE's index in the world team.
    pub my_pe: i32,
    /// Number of PEs in the world team.
    pub n_pes: i32,
    /// Number of heap slots on this host (node-local PEs).
    pub node_size: i32,
    /// This PE's slot in the heap range (its node-local rank).
    pub my_slot: i32,
    /// `DEVICE_FLAG_*` bits.
    pub flags: u32,
    /// Milliseconds a wait in a kernel adds to the debug timeout and to [`PEER_LEFT_GRACE_NS`]
    /// before it stops the kernel: [`STOP_STAGGER_MS`] times this PE's index among the PEs
    /// sharing its GPU (0 on a GPU of its own). Kernels of processes sharing a GPU that trap at
    /// the same moment can leave one of them running for good, so sharers stop one at a time.
    pub stop_delay_ms: u32,
    /// This process's address of slot 0 of the symmetric heap range.
    pub heap_base: u64,
    /// Distance in bytes between consecutive slots.
    pub heap_stride: u64,
    /// Bytes of each slot that may hold symmetric data: a symmetric address `p` satisfies
    /// `heap_base + my_slot * heap_stride <= p < that + heap_bound`.
    pub heap_bound: u64,
    /// Offset in each slot of the first byte program allocations may hold: the runtime's own
    /// allocations (barrier words, team table, workspaces) lie below it. Device code built in
    /// check mode refuses puts, gets, signals and atomics below it ([`ERROR_FLAG_UNSAFE_ADDRESS`]).
    pub user_base: u64,
    /// Device address of `[TeamDesc; MAX_TEAMS]`, indexed by team id.
    pub team_table: u64,
    /// Symmetric address of the barrier words (see [`BARRIER_WS_BYTES_PER_TEAM`]).
    pub barrier_ws: u64,
    /// Symmetric address of the scratch space of device reductions: one part of
    /// `coll_ws_size` bytes per team slot, team `t`'s at `coll_ws + t * coll_ws_size`, so
    /// collectives of different teams running at once never share scratch.
    pub coll_ws: u64,
    /// Bytes of each team slot's part of `coll_ws` (the whole is `MAX_TEAMS` times this).
    pub coll_ws_size: u64,
    /// A device wait that spins longer than this stops the kernel; 0 = wait forever.
    pub debug_wait_timeout_ns: u64,
    /// Host-mapped device address of one [`ErrorRecord`]; 0 = none.
    pub error_buf: u64,
    /// Host-mapped address of this PE's [`ProxyRing`] (descriptors follow it); 0 when no PE is
    /// on another host (every operation is a load or store).
    pub proxy_ring: u64,
    /// Symmetric address (device memory) of the `u64` from which GPU threads take proxy tickets.
    pub proxy_head: u64,
    /// Host-mapped address of a `u64` the runtime sets when a peer leaves the job (see
    /// [`PEER_LEFT_DIED`]); waits in kernels look at it between polls and stop
    /// ([`ERROR_FLAG_PEER_LEFT`]) instead of waiting for a PE that is gone. 0 = none.
    pub peer_left: u64,
    /// Slot of each world PE in the heap range, [`PE_NOT_REACHABLE`] when its memory cannot be
    /// reached by load/store; entries at and beyond `n_pes` are [`PE_NOT_REACHABLE`].
    pub pe_slot: [i32; MAX_PES],
}

impl DeviceState {
    /// A state for `n_pes` PEs with nothing reachable and no heap: the starting point the
    /// runtime fills in.
    pub fn new(my_pe: i32, n_pes: i32) -> DeviceState {
        DeviceState {
            magic: DEVICE_STATE_MAGIC,
            version: DEVICE_STATE_VERSION,
            my_pe,
            n_pes,
            node_size: 0,
            my_slot: PE_NOT_REACHABLE,
            flags: DEVICE_FLAG_INITIALIZED,
            stop_delay_ms: 0,
            heap_base: 0,
            heap_stride: 0,
            heap_bound: 0,
            user_base: 0,
            team_table: 0,
            barrier_ws: 0,
            coll_ws: 0,
            coll_ws_size: 0,
            debug_wait_timeout_ns: 0,
            error_buf: 0,
            proxy_ring: 0,
            proxy_head: 0,
            peer_left: 0,
            pe_slot: [PE_NOT_REACHABLE; MAX_PES],
        }
    }
}

// No padding anywhere: the size is the sum of the field sizes.
const _: () = assert!(
    std::mem::size_of::<DeviceState>() == 8 * 4 + 13 * 8 + 4 * MAX_PES,
    "DeviceState has padding: reorder its fields"
);
const _: () = assert!(std::mem::size_of::<DeviceState>() % 8 == 0);
const _: () = assert!(std::mem::size_of::<TeamDesc>() == 16);
const _: () = assert!(std::mem::size_of::<ErrorRecord>() == 48);
const _: () = assert!(std::mem::size_of::<ProxyDesc>() == 64);
const _: () = assert!(std::mem::size_of::<ProxyRing>() == 64);
const _: () = assert!(PROXY_SLOTS.is_power_of_two());
const _: () = assert!(crate::consts::MAX_TEAMS as u64 * BARRIER_WS_BYTES_PER_TEAM <= 4096);
