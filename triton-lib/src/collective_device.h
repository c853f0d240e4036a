// Team collectives built on RMA and barriers.
//
// Data moves by push (each PE stores into the others' memory over NVLink), bracketed by team
// barriers: the first makes every member's destination free and every source ready, the second
// (a barrier, so it includes quiet) makes every destination complete on return. Members on
// other hosts (no mapped heap here) are reached through the proxy (proxy_device.h): a push to
// one is a put descriptor that the group's first thread posts without waiting, and the closing
// barrier's proxy quiet completes it before this PE arrives; a reduction fetches their staged
// chunks with get descriptors. Reductions stage
// each chunk of `source` in this PE's part of `coll_ws` for the team (one part per team slot,
// rshmemi_team_ws), so `dest` may equal `source`, and reductions of different teams may run at
// once. One collective per team may run at a time (as in OpenSHMEM: not two CTAs, nor a kernel
// beside an on-stream collective of the same team); all members call it with the same
// arguments, and for warp/block scope all threads of the group do.
#ifndef RSHMEM_COLLECTIVE_DEVICE_H
#define RSHMEM_COLLECTIVE_DEVICE_H

#include "barrier_device.h"

RSHMEMI_DEV rshmemi_team_desc_t rshmemi_team_or_fail(int team) {
  rshmemi_team_desc_t t;
  if (!rshmemi_team_get(team, &t) || t.my_index < 0) rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, 0, (uint64_t)(int64_t)team, 0, 0);
  return t;
}

// Pushes n bytes of `source` to symmetric `dest` on `pe`, by the group's stores where `pe` is
// mapped here, else as one put descriptor posted by the group's first thread (a member on
// another host). It does not wait for the proxy: the caller's closing barrier (quiet) completes
// the put, and `source` stays unchanged until then (it is the caller's collective source). Every
// thread of the group calls it with the same arguments, so all take the same branch (the bulk
// copy of rshmemi_copy synchronizes the block).
RSHMEMI_DEV void rshmemi_coll_push(void* dest, const void* source, size_t n, int pe, int scope) {
  void* mapped = rshmemi_peer_ptr(dest, pe);
  if (mapped != 0) {
    rshmemi_coll_copy(mapped, source, n, rshmemi_lane(scope), rshmemi_nlanes(scope));
  } else if (rshmemi_lane(scope) == 0) {
    rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_PUT, pe);
    d.dest = (uint64_t)(uintptr_t)dest;
    d.source = (uint64_t)(uintptr_t)source;
    d.nbytes = n;
    rshmemi_proxy_post(rshmemi_proxy_or_fail(dest, pe), d);
  }
}

// The root member pushes `nbytes` of `source` to `dest` on every member.
RSHMEMI_DEV void rshmemi_broadcastmem(int team, void* dest, const void* source, size_t nbytes, int root, int scope) {
  const rshmemi_team_desc_t t = rshmemi_team_or_fail(team);
  if (root < 0 || root >= t.size) rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, dest, (uint64_t)(int64_t)root, 0, 0);
  if (nbytes != 0) rshmemi_check_user(dest, nbytes, rshmemi_team_member(&t, root), RSHMEM_CHECK_OP_PUT);
  rshmemi_team_barrier(team, true, scope);
  if (t.my_index == root && nbytes != 0) {
    for (int i = 0; i < t.size; ++i) {
      const int pe = rshmemi_team_member(&t, (t.my_index + i) % t.size);
      rshmemi_coll_push(dest, source, nbytes, pe, scope);
    }
  }
  rshmemi_team_barrier(team, true, scope);
}

// Member i's `source` lands at dest + i * nbytes on every member. With `agree` (the runtime's
// on-stream form), the first barrier also checks that every member passed the same arguments
// (barrier_device.h).
RSHMEMI_DEV void rshmemi_fcollectmem_agreed(int team, void* dest, const void* source, size_t nbytes, int scope,
                                            const rshmemi_agree_t* agree) {
  const rshmemi_team_desc_t t = rshmemi_team_or_fail(team);
  if (nbytes != 0) rshmemi_check_user(dest, nbytes * (size_t)t.size, rshmemi_team_member(&t, t.my_index), RSHMEM_CHECK_OP_PUT);
  rshmemi_team_barrier_agreed(team, true, scope, agree);
  if (nbytes != 0) {
    char* slot = (char*)dest + (size_t)t.my_index * nbytes;
    for (int i = 0; i < t.size; ++i) {
      const int pe = rshmemi_team_member(&t, (t.my_index + i) % t.size);
      rshmemi_coll_push(slot, source, nbytes, pe, scope);
    }
  }
  rshmemi_team_barrier(team, true, scope);
}

RSHMEMI_DEV void rshmemi_fcollectmem(int team, void* dest, const void* source, size_t nbytes, int scope) {
  rshmemi_fcollectmem_agreed(team, dest, source, nbytes, scope, 0);
}

// Block j of `source` (nbytes each) lands at dest + my_index * nbytes on member j.
RSHMEMI_DEV void rshmemi_alltoallmem(int team, void* dest, const void* source, size_t nbytes, int scope) {
  const rshmemi_team_desc_t t = rshmemi_team_or_fail(team);
  if (nbytes != 0) rshmemi_check_user(dest, nbytes * (size_t)t.size, rshmemi_team_member(&t, t.my_index), RSHMEM_CHECK_OP_PUT);
  rshmemi_team_barrier(team, true, scope);
  if (nbytes != 0) {
    char* slot = (char*)dest + (size_t)t.my_index * nbytes;
    for (int i = 0; i < t.size; ++i) {
      const int j = (t.my_index + i) % t.size;
      const int pe = rshmemi_team_member(&t, j);
      rshmemi_coll_push(slot, (const char*)source + (size_t)j * nbytes, nbytes, pe, scope);
    }
  }
  rshmemi_team_barrier(team, true, scope);
}

// ---- reductions ----
// Half-precision values are combined in fp32 and rounded back (round to nearest even).
RSHMEMI_DEV float rshmemi_bf16_to_float(__bf16 h) {
  const uint32_t bits = (uint32_t)__builtin_bit_cast(uint16_t, h) << 16;
  return __builtin_bit_cast(float, bits);
}
RSHMEMI_DEV __bf16 rshmemi_float_to_bf16(float f) {
  uint32_t bits = __builtin_bit_cast(uint32_t, f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return __builtin_bit_cast(__bf16, (uint16_t)((bits >> 16) | 0x40));  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return __builtin_bit_cast(__bf16, (uint16_t)(bits >> 16));
}

// Element type -> accumulator type and the conversions between them.
template <typename T> struct rshmemi_conv {
  typedef T acc;
  RSHMEMI_DEV T widen(T v) { return v; }
  RSHMEMI_DEV T narrow(T v) { return v; }
};
template <> struct rshmemi_conv<_Float16> {
  typedef float acc;
  RSHMEMI_DEV float widen(_Float16 v) { return (float)v; }
  RSHMEMI_DEV _Float16 narrow(float v) { return (_Float16)v; }
};
template <> struct rshmemi_conv<__bf16> {
  typedef float acc;
  RSHMEMI_DEV float widen(__bf16 v) { return rshmemi_bf16_to_float(v); }
  RSHMEMI_DEV __bf16 narrow(float v) { return rshmemi_float_to_bf16(v); }
};

enum rshmemi_op { RSHMEMI_SUM, RSHMEMI_PROD, RSHMEMI_MIN, RSHMEMI_MAX, RSHMEMI_AND, RSHMEMI_OR, RSHMEMI_XOR };

template <int OP, typename A> struct rshmemi_combine;
template <typename A> struct rshmemi_combine<RSHMEMI_SUM, A> { RSHMEMI_DEV A f(A a, A b) { return a + b; } };
template <typename A> struct rshmemi_combine<RSHMEMI_PROD, A> { RSHMEMI_DEV A f(A a, A b) { return a * b; } };
template <typename A> struct rshmemi_combine<RSHMEMI_MIN, A> { RSHMEMI_DEV A f(A a, A b) { return b < a ? b : a; } };
template <typename A> struct rshmemi_combine<RSHMEMI_MAX, A> { RSHMEMI_DEV A f(A a, A b) { return b > a ? b : a; } };
template <typename A> struct rshmemi_combine<RSHMEMI_AND, A> { RSHMEMI_DEV A f(A a, A b) { return a & b; } };
template <typename A> struct rshmemi_combine<RSHMEMI_OR, A> { RSHMEMI_DEV A f(A a, A b) { return a | b; } };
template <typename A> struct rshmemi_combine<RSHMEMI_XOR, A> { RSHMEMI_DEV A f(A a, A b) { return a ^ b; } };

// This PE's part of coll_ws for team slot `team` (checked by the caller to be a team id), or
// null when the runtime gave no workspace. Parts are `coll_ws_size` bytes, one per slot, so
// reductions of two teams never stage into the same bytes.
RSHMEMI_DEV void* rshmemi_team_ws(int team) {
  const rshmemi_device_state_t* s = rshmemi_state();
  if (s->coll_ws == 0 || team < 0 || team >= RSHMEM_MAX_TEAMS) return 0;
  return (void*)(uintptr_t)(s->coll_ws + (uint64_t)team * s->coll_ws_size);
}

// Whether some member of `t` has no mapped heap here (a PE on another host): symmetric `p`
// does not translate to it.
RSHMEMI_DEV bool rshmemi_team_far(const rshmemi_team_desc_t* t, const void* p) {
  for (int i = 0; i < t->size; ++i) {
    if (rshmemi_peer_ptr(p, rshmemi_team_member(t, i)) == 0) return true;
  }
  return false;
}

// Fetches the staged chunk of every member of `t` on another host (`bytes` at byte offset `at`
// of its workspace `ws`) into fetch + i * bytes for member i, and waits until all have landed
// (the proxy runs tickets in order). Called by one thread of the group. Inline: out of line it
// cost a 1024-thread block-scope reduce-scatter 4 more registers under nvcc and in Numba's link
// (74 against 70; a reduction the same 62), measured as each links at launch.
RSHMEMI_DEV void rshmemi_reduce_fetch(const rshmemi_team_desc_t* t, void* ws, void* fetch, size_t bytes, size_t at) {
  rshmemi_proxy_ring_t* r = 0;
  uint64_t last = 0;
  for (int i = 0; i < t->size; ++i) {
    const int pe = rshmemi_team_member(t, i);
    if (rshmemi_peer_ptr(ws, pe) != 0) continue;
    r = rshmemi_proxy_or_fail(ws, pe);
    rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_GET, pe);
    d.dest = (uint64_t)(uintptr_t)((char*)fetch + (size_t)i * bytes);
    d.source = (uint64_t)(uintptr_t)((char*)ws + at);
    d.nbytes = bytes;
    last = rshmemi_proxy_post(r, d);
  }
  if (r != 0) rshmemi_proxy_done(r, last);
}

// dest[i] = OP over members of source[i], for i < nelems (SCATTER false: reduce), or
// dest[i] = OP over members of source[my_index * nelems + i] (SCATTER true: reduce-scatter, where
// `source` holds one block of nelems per member). Integer arithmetic wraps (built with -fwrapv).
// Each round stages a chunk of what the members need into this PE's workspace: for a
// reduce-scatter the same element range of every member's block, block j at ws + j * m, so that
// member j reads its part of every PE's workspace at one offset.
//
// Members on other hosts: after the staging barrier the group's first thread posts one get per
// such member (the m elements this PE needs of its staged chunk) into the fetch area that follows
// the staging area (member i's at fetch + i * m), and waits for the last (the proxy runs tickets
// in order) before the group combines; the chunk is then a `blocks + size`-th of the workspace
// instead of a `blocks`-th. Every member combines in team order, mapped or fetched alike, so all
// compute the same result.
template <int OP, bool SCATTER, typename T>
RSHMEMI_DEV void rshmemi_reduce(int team, T* dest, const T* source, size_t nelems, int scope) {
  typedef rshmemi_conv<T> C;
  typedef typename C::acc A;
  const rshmemi_device_state_t* s = rshmemi_state();
  const rshmemi_team_desc_t t = rshmemi_team_or_fail(team);
  const size_t blocks = SCATTER ? (size_t)t.size : 1;
  T* ws = (T*)rshmemi_team_ws(team);
  const bool far = ws != 0 && rshmemi_proxy_ring() != 0 && rshmemi_team_far(&t, ws);
  const size_t chunk = (size_t)(s->coll_ws_size / sizeof(T)) / (blocks + (far ? (size_t)t.size : 0));
  if (ws == 0 || chunk == 0) rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, dest, s->coll_ws_size, 0, 0);
  T* fetch = ws + blocks * chunk;
  const uint32_t lane = rshmemi_lane(scope), nlanes = rshmemi_nlanes(scope);
  const size_t mine = SCATTER ? (size_t)t.my_index : 0;
  for (size_t off = 0; off < nelems; off += chunk) {
    const size_t m = nelems - off < chunk ? nelems - off : chunk;
    rshmemi_group_sync(scope);
    for (size_t j = 0; j < blocks; ++j) rshmemi_coll_copy(ws + j * m, source + j * nelems + off, m * sizeof(T), lane, nlanes);
    rshmemi_team_barrier(team, true, scope);  // every member's chunk is staged
    if (far) {
      if (lane == 0) rshmemi_reduce_fetch(&t, ws, fetch, m * sizeof(T), mine * m * sizeof(T));
      rshmemi_group_sync(scope);  // the fetched chunks are here for every thread
    }
#pragma unroll 1
    for (size_t e = lane; e < m; e += nlanes) {
      const size_t at = mine * m + e;
      A acc = A();
#pragma unroll 1
      for (int i = 0; i < t.size; ++i) {
        // Without a far member an unmapped one is a bad team (no proxy reaches it either).
        const int pe = rshmemi_team_member(&t, i);
        const T* peer = (const T*)rshmemi_peer_ptr(ws, pe);
        if (peer == 0 && !far) rshmemi_fail_unreachable(ws, pe);
        const T v = peer != 0 ? peer[at] : fetch[(size_t)i * m + e];
        acc = i == 0 ? C::widen(v) : rshmemi_combine<OP, A>::f(acc, C::widen(v));
      }
      dest[off + e] = C::narrow(acc);
    }
    rshmemi_team_barrier(team, true, scope);  // nobody restages before everyone has read
  }
}

#endif  // RSHMEM_COLLECTIVE_DEVICE_H
