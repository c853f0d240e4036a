/* Generated from runtime/src/device_state.rs and runtime/src/consts.rs by cbindgen (runtime/cbindgen.toml); do not edit. Regenerate: RSHMEM_BLESS=1 cargo test -p rshmem --test device_state_header */

#ifndef RSHMEM_DEVICE_STATE_H
#define RSHMEM_DEVICE_STATE_H

/* Device code reads rshmemi_device_state_t; the Rust runtime writes it. Constants are shared with Python through this file. */

#include <stdint.h>

/*
 `wait_until(ptr, CMP_EQ, v)`: wait until `*ptr == v`.
 */
#define RSHMEM_CMP_EQ 0

/*
 `*ptr != v`.
 */
#define RSHMEM_CMP_NE 1

/*
 `*ptr > v`.
 */
#define RSHMEM_CMP_GT 2

/*
 `*ptr <= v`.
 */
#define RSHMEM_CMP_LE 3

/*
 `*ptr < v`.
 */
#define RSHMEM_CMP_LT 4

/*
 `*ptr >= v`.
 */
#define RSHMEM_CMP_GE 5

/*
 Signal operation: store the value.
 */
#define RSHMEM_SIGNAL_SET 9

/*
 Signal operation: add the value.
 */
#define RSHMEM_SIGNAL_ADD 10

/*
 No team.
 */
#define RSHMEM_TEAM_INVALID -1

/*
 Every PE.
 */
#define RSHMEM_TEAM_WORLD 0

/*
 PEs whose memory this PE reaches by load/store.
 */
#define RSHMEM_TEAM_SHARED 1

/*
 PEs on this host.
 */
#define RSHMEM_TEAM_NODE 2

/*
 PEs with this PE's local rank, one per host.
 */
#define RSHMEM_TEAM_SAME_MYPE_NODE 3

/*
 How many teams may exist at once (predefined ones included).
 */
#define RSHMEM_MAX_TEAMS 32

/*
 `DeviceState::magic`: "RSHM" in little-endian, so a zero (never initialized) state is seen.
 */
#define RSHMEM_DEVICE_STATE_MAGIC 1296585554

/*
 `DeviceState::version`: bumped whenever a field changes meaning, size or place.
 */
#define RSHMEM_DEVICE_STATE_VERSION 5

/*
 How many PEs the device state can describe (`DeviceState::pe_slot` entries).

 1024 covers 128 hosts of 8 GPUs; the table costs 4 KiB per module, which is read only for the
 PEs a kernel talks to.
 */
#define RSHMEM_MAX_PES 1024

/*
 `DeviceState::pe_slot` entry of a PE this PE cannot reach by load/store.
 */
#define RSHMEM_PE_NOT_REACHABLE -1

/*
 `DeviceState::flags` bit: the state was written by the runtime (set with `magic`).
 */
#define RSHMEM_DEVICE_FLAG_INITIALIZED 1

/*
 `DeviceState::flags` bit: every PE of the job is reachable by load/store (one host), so device
 code may skip the per-PE reachability check.
 */
#define RSHMEM_DEVICE_FLAG_ALL_REACHABLE 2

/*
 Bytes of barrier workspace per team at `DeviceState::barrier_ws`: three `u64` words.

 For team `t` the words live at `barrier_ws + BARRIER_WS_BYTES_PER_TEAM * t`:
 `arrive` (offset 0), incremented remotely by every member at each barrier; `ticket`
 (offset 8) and `done` (offset 16), touched only by their own PE. A barrier instance takes
 `e = ++ticket`, waits until `done >= e - 1` (this PE's previous instance of the team has
 finished), adds 1 to every member's `arrive`, waits until its own `arrive >= e * size`, then
 sets `done = e`. So a PE's instances of one team run one after another in ticket order, and
 two of them (two CTAs, a kernel and the host) can never count each other's arrivals. The
 words are never reset while the team lives; host and device barriers share them.
 */
#define RSHMEM_BARRIER_WS_BYTES_PER_TEAM 24

/*
 `ErrorRecord::flag` while the first failing thread is writing the record.
 */
#define RSHMEM_ERROR_FLAG_WRITING 1

/*
 `ErrorRecord::flag` once complete: a wait spun longer than `debug_wait_timeout_ns`.
 `addr` is the polled address, `cmp`/`expected` the condition, `seen` the last value read.
 */
#define RSHMEM_ERROR_FLAG_WAIT_TIMEOUT 2

/*
 `ErrorRecord::flag` once complete: a put/get/atomic/signal named a PE that this PE cannot
 reach by load/store, or an address outside the symmetric heap. `addr` is the address,
 `cmp` the target PE; `expected`/`seen` 0, or what the translation saw: `expected` has
 [`BAD_ADDRESS_SEEN`] set, the heap bound in its low bits ([`BAD_ADDRESS_BOUND_MASK`]) and the
 [`BAD_ADDRESS_RING`] / [`BAD_ADDRESS_REMOTE`] bits, `seen` the offset of `addr` from the start
 of this PE's heap slot (wrapped when below it).
 */
#define RSHMEM_ERROR_FLAG_BAD_ADDRESS 3

/*
 `ErrorRecord::expected` bit of an [`ERROR_FLAG_BAD_ADDRESS`] record: the kernel recorded what
 its translation saw (the other bits and `seen` are meaningful).
 */
#define RSHMEM_BAD_ADDRESS_SEEN 9223372036854775808ull

/*
 This PE had a proxy ring (`DeviceState::proxy_ring` non-zero) when the kernel stopped.
 */
#define RSHMEM_BAD_ADDRESS_RING 4611686018427387904

/*
 The target PE's `DeviceState::pe_slot` entry said "not reachable by load/store" (negative).
 */
#define RSHMEM_BAD_ADDRESS_REMOTE 2305843009213693952

/*
 The bits of `expected` that hold the heap bound (`DeviceState::heap_bound`) the kernel read.
 */
#define RSHMEM_BAD_ADDRESS_BOUND_MASK 2305843009213693951

/*
 `ErrorRecord::flag` once complete: an argument device code cannot act on (a comparison or
 signal operation that is not a `CMP_*` / `SIGNAL_*` value, a team that does not exist or
 that this PE is not in, a root outside the team, a missing workspace). `addr` is the pointer
 argument (0 if none), `cmp` the bad value.
 */
#define RSHMEM_ERROR_FLAG_BAD_ARGUMENT 4

/*
 `ErrorRecord::flag` once complete: an operation towards a PE on another host could not be
 carried out because the proxy that executes them (`transport/proxy.rs`) stopped on an
 error (a dead peer, a broken connection); the host reports the proxy's own error. `addr` is
 the ring word that was polled, `cmp` the proxy's failure code, `expected`/`seen` the ticket
 waited for and the value read.
 */
#define RSHMEM_ERROR_FLAG_PROXY 5

/*
 `ErrorRecord::flag` once complete: the members of an on-stream collective queued it with
 different arguments (`runtime/src/runtime/agree.rs`). `addr` holds this PE's call number of
 the team in its high 32 bits and the member's in its low 32 bits; `cmp` the member's world
 PE in its low 32 bits and the team slot in its high 32 bits; `expected` this PE's packed
 call and `seen` the member's.
 */
#define RSHMEM_ERROR_FLAG_MISMATCH 6

/*
 `ErrorRecord::flag` once complete: device code built in check mode (`RSHMEM_CHECK=1`: the
 device library's `libshmem_device.check.bc`) found a put, get, signal or atomic whose range
 is not program memory: it starts below `DeviceState::user_base` (the runtime's own words,
 such as the barrier counters) or reaches past `heap_bound`. `addr` is the symmetric address,
 `cmp` the target PE, `expected` the operation (`CHECK_OP_*`), `seen` the byte count.
 */
#define RSHMEM_ERROR_FLAG_UNSAFE_ADDRESS 7

/*
 `ErrorRecord::flag` once complete: a wait in a kernel gave up because a peer left the job
 (its departure written to `DeviceState::peer_left` by the runtime) and the wait stayed
 unsatisfied [`PEER_LEFT_GRACE_NS`] after the kernel saw it. `addr` is the polled address,
 `cmp`/`expected` the condition, `seen` the `peer_left` word.
 */
#define RSHMEM_ERROR_FLAG_PEER_LEFT 8

/*
 `ErrorRecord::cmp` bit of an [`ERROR_FLAG_WAIT_TIMEOUT`] or [`ERROR_FLAG_PEER_LEFT`] record:
 the wait was the kernel that `signal_wait_until_on_stream` queues (the comparison is in the
 low bits), so the message names that call instead of "a wait in a kernel".
 */
#define RSHMEM_WAIT_ON_STREAM 256

/*
 How long a wait in a kernel keeps polling after it saw a peer's departure, for arrivals
 still in flight (a PE that left after its calls; through another host's transport they can
 land after its notice), as host waits do.
 */
#define RSHMEM_PEER_LEFT_GRACE_NS 500000000

/*
 Per index among the PEs sharing a GPU, how much later a wait in a kernel stops than the
 first sharer's would ([`DeviceState::stop_delay_ms`]). Measured on an H200: kernels of two
 processes that trapped within a few ms of each other left one running; about 1.3 s apart
 both stopped.
 */
#define RSHMEM_STOP_STAGGER_MS 1000

/*
 `DeviceState::peer_left` word: the low 32 bits hold 1 + the first PE that left the job
 (0: none); this bit is set when that PE died instead of finalizing.
 */
#define RSHMEM_PEER_LEFT_DIED 4294967296

/*
 `ErrorRecord::expected` of [`ERROR_FLAG_UNSAFE_ADDRESS`]: a put (`putmem`, `put`, ...).
 */
#define RSHMEM_CHECK_OP_PUT 1

/*
 A get.
 */
#define RSHMEM_CHECK_OP_GET 2

/*
 A single-element put (`p`).
 */
#define RSHMEM_CHECK_OP_P 3

/*
 A single-element get (`g`).
 */
#define RSHMEM_CHECK_OP_G 4

/*
 A signal operation on a signal word (also the signal of a put with signal).
 */
#define RSHMEM_CHECK_OP_SIGNAL 5

/*
 An atomic memory operation.
 */
#define RSHMEM_CHECK_OP_AMO 6

/*
 The data of a put with signal.
 */
#define RSHMEM_CHECK_OP_PUT_SIGNAL 7

/*
 Descriptor slots in a PE's proxy ring (a power of two: ticket `t` uses slot `t % PROXY_SLOTS`).
 1024 slots of 64 bytes: 64 KiB of page-locked host memory per PE.
 */
#define RSHMEM_PROXY_SLOTS 1024

/*
 `ProxyDesc::kind`: copy `nbytes` from local `source` to symmetric `dest` on `pe`.
 */
#define RSHMEM_PROXY_PUT 1

/*
 Copy `nbytes` from symmetric `source` on `pe` to local `dest`.
 */
#define RSHMEM_PROXY_GET 2

/*
 A put of `nbytes` (at most 8) whose data is `value` itself (`p`); nothing to wait for.
 */
#define RSHMEM_PROXY_PUT_INLINE 3

/*
 A put, then `sub` (`SIGNAL_SET` / `SIGNAL_ADD`) of `value` on signal word `sig_addr`.
 */
#define RSHMEM_PROXY_PUT_SIGNAL 4

/*
 An atomic `sub` (`AMO_*`) of `width` bytes on symmetric `dest` of `pe`, operands `value`
 and `value2` (compare-and-swap: expected, new); with [`PROXY_FLAG_FETCH`] the old value is
 returned in `value`.
 */
#define RSHMEM_PROXY_AMO 5

/*
 Completes every operation posted before it at its target (device `quiet` / `fence`).
 */
#define RSHMEM_PROXY_QUIET 6

/*
 `ProxyDesc::flags` bit: the poster waits for a result (`g`, fetching atomics): the proxy
 writes it to `value`, sets `seq` to [`PROXY_SEQ_RESULT`], and reuses the slot only after the
 poster has set `seq` to 0.
 */
#define RSHMEM_PROXY_FLAG_FETCH 1

/*
 `ProxyDesc::seq` of a fetching descriptor whose result is in `value`.
 */
#define RSHMEM_PROXY_SEQ_RESULT 18446744073709551615ull

/*
 Operation codes of the cuda backend's one-thread atomic kernels (`rshmemi_amo32/64` in
 `triton-lib/src/runtime_kernels.cu`, which reads them from the generated header): fetch.
 */
#define RSHMEM_AMO_FETCH 0

/*
 Store (returns the old value).
 */
#define RSHMEM_AMO_SET 1

/*
 Exchange.
 */
#define RSHMEM_AMO_SWAP 2

/*
 Compare and swap (first operand: the expected value, second: the new one).
 */
#define RSHMEM_AMO_COMPARE_SWAP 3

/*
 Wrapping add.
 */
#define RSHMEM_AMO_ADD 4

/*
 Bitwise and.
 */
#define RSHMEM_AMO_AND 5

/*
 Bitwise or.
 */
#define RSHMEM_AMO_OR 6

/*
 Bitwise xor.
 */
#define RSHMEM_AMO_XOR 7

/*
 A load with acquire ordering (no fence before it).
 */
#define RSHMEM_AMO_LOAD_ACQUIRE 8

/*
 The state every module linking the device library reads from `rshmemi_device_state_d`.

 All addresses are this process's virtual addresses, passed as `u64` so that the layout is the
 same in Rust, C and PTX.
 */
typedef struct {
  /*
   [`DEVICE_STATE_MAGIC`] once written; 0 in a module the runtime has not initialized.
   */
  uint32_t magic;
  /*
   [`DEVICE_STATE_VERSION`] of the runtime that wrote it.
   */
  uint32_t version;
  /*
   This PE's index in the world team.
   */
  int32_t my_pe;
  /*
   Number of PEs in the world team.
   */
  int32_t n_pes;
  /*
   Number of heap slots on this host (node-local PEs).
   */
  int32_t node_size;
  /*
   This PE's slot in the heap range (its node-local rank).
   */
  int32_t my_slot;
  /*
   `DEVICE_FLAG_*` bits.
   */
  uint32_t flags;
  /*
   Milliseconds a wait in a kernel adds to the debug timeout and to [`PEER_LEFT_GRACE_NS`]
   before it stops the kernel: [`STOP_STAGGER_MS`] times this PE's index among the PEs
   sharing its GPU (0 on a GPU of its own). Kernels of processes sharing a GPU that trap at
   the same moment can leave one of them running for good, so sharers stop one at a time.
   */
  uint32_t stop_delay_ms;
  /*
   This process's address of slot 0 of the symmetric heap range.
   */
  uint64_t heap_base;
  /*
   Distance in bytes between consecutive slots.
   */
  uint64_t heap_stride;
  /*
   Bytes of each slot that may hold symmetric data: a symmetric address `p` satisfies
   `heap_base + my_slot * heap_stride <= p < that + heap_bound`.
   */
  uint64_t heap_bound;
  /*
   Offset in each slot of the first byte program allocations may hold: the runtime's own
   allocations (barrier words, team table, workspaces) lie below it. Device code built in
   check mode refuses puts, gets, signals and atomics below it ([`ERROR_FLAG_UNSAFE_ADDRESS`]).
   */
  uint64_t user_base;
  /*
   Device address of `[TeamDesc; MAX_TEAMS]`, indexed by team id.
   */
  uint64_t team_table;
  /*
   Symmetric address of the barrier words (see [`BARRIER_WS_BYTES_PER_TEAM`]).
   */
  uint64_t barrier_ws;
  /*
   Symmetric address of the scratch space of device reductions: one part of
   `coll_ws_size` bytes per team slot, team `t`'s at `coll_ws + t * coll_ws_size`, so
   collectives of different teams running at once never share scratch.
   */
  uint64_t coll_ws;
  /*
   Bytes of each team slot's part of `coll_ws` (the whole is `MAX_TEAMS` times this).
   */
  uint64_t coll_ws_size;
  /*
   A device wait that spins longer than this stops the kernel; 0 = wait forever.
   */
  uint64_t debug_wait_timeout_ns;
  /*
   Host-mapped device address of one [`ErrorRecord`]; 0 = none.
   */
  uint64_t error_buf;
  /*
   Host-mapped address of this PE's [`ProxyRing`] (descriptors follow it); 0 when no PE is
   on another host (every operation is a load or store).
   */
  uint64_t proxy_ring;
  /*
   Symmetric address (device memory) of the `u64` from which GPU threads take proxy tickets.
   */
  uint64_t proxy_head;
  /*
   Host-mapped address of a `u64` the runtime sets when a peer leaves the job (see
   [`PEER_LEFT_DIED`]); waits in kernels look at it between polls and stop
   ([`ERROR_FLAG_PEER_LEFT`]) instead of waiting for a PE that is gone. 0 = none.
   */
  uint64_t peer_left;
  /*
   Slot of each world PE in the heap range, [`PE_NOT_REACHABLE`] when its memory cannot be
   reached by load/store; entries at and beyond `n_pes` are [`PE_NOT_REACHABLE`].
   */
  int32_t pe_slot[RSHMEM_MAX_PES];
} rshmemi_device_state_t;

/*
 A team as device code sees it: entry `t` of the array at `DeviceState::team_table`.

 Member `i` of the team (0 <= i < `size`) is world PE `start + i * stride`. The runtime writes
 an entry when the team is made and sets `size = 0` when it is destroyed.
 */
typedef struct {
  /*
   World PE of member 0.
   */
  int32_t start;
  /*
   Distance between consecutive members, in world PEs (>= 1).
   */
  int32_t stride;
  /*
   Number of members; 0 for an unused entry.
   */
  int32_t size;
  /*
   This PE's index in the team, or -1 when it is not a member.
   */
  int32_t my_index;
} rshmemi_team_desc_t;

/*
 What device code writes to `DeviceState::error_buf` before it stops the kernel with `trap`.

 The buffer is host-mapped memory, so the host reads it after the launch fails and raises an
 error naming the PE, the address and the values. Only the first thread that wins `flag`
 (compare-and-swap 0 -> [`ERROR_FLAG_WRITING`]) writes the rest; it stores the final `ERROR_FLAG_*`
 kind into `flag` last, with release semantics at system scope.
 */
typedef struct {
  /*
   0 = empty, [`ERROR_FLAG_WRITING`], or the kind of a complete record (`ERROR_FLAG_*`).
   */
  uint32_t flag;
  /*
   The PE whose kernel stopped.
   */
  int32_t pe;
  /*
   Symmetric (local) address that was polled.
   */
  uint64_t addr;
  /*
   The comparison (`CMP_*`).
   */
  uint64_t cmp;
  /*
   The value compared against.
   */
  uint64_t expected;
  /*
   The last value read.
   */
  uint64_t seen;
  /*
   A team barrier's wait: the members, as bits of their index in the team (the first 64),
   that had not entered that barrier when the kernel stopped; 0 for other records.
   */
  uint64_t missing;
} rshmemi_error_record_t;

/*
 One operation a GPU thread posts for the proxy: slot `t % PROXY_SLOTS` of the ring.

 The poster writes every field, then `seq = t + 1` with release at system scope; the proxy
 acquires `seq`, runs the operation, and frees the slot (`seq = 0`, then `ProxyRing::tail`).
 Addresses are this PE's symmetric addresses (the same object on `pe` is at the same heap
 offset) or, for `source` of a put and `dest` of a get, any device or host address.
 */
typedef struct {
  /*
   0 = free, `t + 1` = ticket `t` posted, [`PROXY_SEQ_RESULT`] = result ready.
   */
  uint64_t seq;
  /*
   Destination address (symmetric for a put, local for a get; the word of an atomic).
   */
  uint64_t dest;
  /*
   Source address (local for a put, symmetric for a get).
   */
  uint64_t source;
  /*
   Bytes moved.
   */
  uint64_t nbytes;
  /*
   Symmetric address of the signal word ([`PROXY_PUT_SIGNAL`]).
   */
  uint64_t sig_addr;
  /*
   Signal value, atomic operand, inline data; the result of a fetching descriptor.
   */
  uint64_t value;
  /*
   Second atomic operand (the new value of a compare-and-swap).
   */
  uint64_t value2;
  /*
   `PROXY_*` operation.
   */
  uint8_t kind;
  /*
   Signal operation (`SIGNAL_*`) or atomic operation (`AMO_*`).
   */
  uint8_t sub;
  /*
   Bytes of an atomic's word (4 or 8).
   */
  uint8_t width;
  /*
   `PROXY_FLAG_*` bits.
   */
  uint8_t flags;
  /*
   The target PE (world numbering).
   */
  int32_t pe;
} rshmemi_proxy_desc_t;

/*
 The header of a PE's proxy ring, followed by [`PROXY_SLOTS`] [`ProxyDesc`]s, all in
 page-locked host memory at `DeviceState::proxy_ring`. Tickets come from the device word at
 `DeviceState::proxy_head` (an atomic add in GPU memory is cheap, one on host memory over PCIe
 is not everywhere supported); everything here the proxy writes and GPU threads poll.
 */
typedef struct {
  /*
   Tickets the proxy has finished, in order: slot `t % PROXY_SLOTS` is free for ticket
   `t + PROXY_SLOTS` once `tail > t`.
   */
  uint64_t tail;
  /*
   `tail` after the last [`PROXY_QUIET`]: every ticket below it is complete at its target.
   */
  uint64_t quieted;
  /*
   Nonzero once the proxy stopped on an error: waits on the ring fail
   ([`ERROR_FLAG_PROXY`]) instead of spinning for ever.
   */
  uint64_t failed;
  /*
   Zero; the descriptors start on their own 64-byte line.
   */
  uint64_t reserved[5];
} rshmemi_proxy_ring_t;

#endif  /* RSHMEM_DEVICE_STATE_H */
