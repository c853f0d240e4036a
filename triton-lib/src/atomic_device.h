// Memory-ordering primitives in inline PTX, system scope (peers are other GPUs).
//
// Names carry order and scope: `ld_acquire_sys`, `st_release_sys`, `atom_add_relaxed_sys`, ...
// The plain name of an operation is its ordered form; `relaxed_*` is the weaker one. Pointers are
// generic addresses (no state space), so they work for global memory of any PE mapped here.
// References: PTX ISA "Memory Consistency Model", "ld", "st", "atom", "red", "membar/fence".
#ifndef RSHMEM_ATOMIC_DEVICE_H
#define RSHMEM_ATOMIC_DEVICE_H

#include "device.h"

// ---- fences ----
// fence.acq_rel.sys: orders this thread's earlier memory operations before its later ones as
// seen by any thread in the system (the SHMEM `fence`).
RSHMEMI_DEV void rshmemi_fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
// fence.sc.sys: sequentially consistent; every earlier operation is performed before any later
// one (the SHMEM `quiet`, as every rshmem put is a synchronous store).
RSHMEMI_DEV void rshmemi_fence_sc_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }

// ---- loads and stores ----
RSHMEMI_DEV uint64_t rshmemi_ld_acquire_sys_u64(const void* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
RSHMEMI_DEV uint32_t rshmemi_ld_acquire_sys_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
RSHMEMI_DEV uint64_t rshmemi_relaxed_ld_sys_u64(const void* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
RSHMEMI_DEV uint32_t rshmemi_relaxed_ld_sys_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// 8- and 16-bit forms, for single elements (p/g). PTX lets ld/st use a register wider than
// the access ("Operand Size Exceeding Instruction-Type Size"), so bytes travel in 32-bit ones.
RSHMEMI_DEV uint16_t rshmemi_relaxed_ld_sys_u16(const void* p) {
  uint16_t v;
  asm volatile("ld.relaxed.sys.b16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}
RSHMEMI_DEV uint8_t rshmemi_relaxed_ld_sys_u8(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.b8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return (uint8_t)v;
}
RSHMEMI_DEV void rshmemi_relaxed_st_sys_u16(void* p, uint16_t v) {
  asm volatile("st.relaxed.sys.b16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}
RSHMEMI_DEV void rshmemi_relaxed_st_sys_u8(void* p, uint8_t v) {
  asm volatile("st.relaxed.sys.b8 [%0], %1;" ::"l"(p), "r"((uint32_t)v) : "memory");
}
RSHMEMI_DEV void rshmemi_st_release_sys_u64(void* p, uint64_t v) {
  asm volatile("st.release.sys.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
RSHMEMI_DEV void rshmemi_st_release_sys_u32(void* p, uint32_t v) {
  asm volatile("st.release.sys.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
RSHMEMI_DEV void rshmemi_relaxed_st_sys_u64(void* p, uint64_t v) {
  asm volatile("st.relaxed.sys.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
RSHMEMI_DEV void rshmemi_relaxed_st_sys_u32(void* p, uint32_t v) {
  asm volatile("st.relaxed.sys.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// ---- reductions without a result (red) ----
RSHMEMI_DEV void rshmemi_red_add_release_sys_u64(void* p, uint64_t v) {
  asm volatile("red.release.sys.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Relaxed: for a caller that has just issued a fence itself (fence + strong write is a release
// pattern), so a loop of these pays for one fence instead of one per reduction.
RSHMEMI_DEV void rshmemi_relaxed_red_add_sys_u64(void* p, uint64_t v) {
  asm volatile("red.relaxed.sys.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// ---- read-modify-write atomics (atom), relaxed at system scope ----
// SHMEM atomics are unordered with respect to other operations except through fence/quiet, as
// in NVSHMEM; `fence`/`quiet` order them.
#define RSHMEMI_ATOM_RELAXED(NAME, PTXOP, T, CONSTR)                                  \
  RSHMEMI_DEV T rshmemi_relaxed_atom_##NAME(void* p, T v) {                           \
    T old;                                                                            \
    asm volatile("atom.relaxed.sys." PTXOP " %0, [%1], %2;"                          \
                 : "=" CONSTR(old)                                                    \
                 : "l"(p), CONSTR(v)                                                  \
                 : "memory");                                                         \
    return old;                                                                       \
  }
RSHMEMI_ATOM_RELAXED(add_u32, "add.u32", uint32_t, "r")
RSHMEMI_ATOM_RELAXED(add_u64, "add.u64", uint64_t, "l")
RSHMEMI_ATOM_RELAXED(and_b32, "and.b32", uint32_t, "r")
RSHMEMI_ATOM_RELAXED(and_b64, "and.b64", uint64_t, "l")
RSHMEMI_ATOM_RELAXED(or_b32, "or.b32", uint32_t, "r")
RSHMEMI_ATOM_RELAXED(or_b64, "or.b64", uint64_t, "l")
RSHMEMI_ATOM_RELAXED(xor_b32, "xor.b32", uint32_t, "r")
RSHMEMI_ATOM_RELAXED(xor_b64, "xor.b64", uint64_t, "l")
RSHMEMI_ATOM_RELAXED(exch_b32, "exch.b32", uint32_t, "r")
RSHMEMI_ATOM_RELAXED(exch_b64, "exch.b64", uint64_t, "l")
#undef RSHMEMI_ATOM_RELAXED

RSHMEMI_DEV uint32_t rshmemi_relaxed_atom_cas_b32(void* p, uint32_t cmp, uint32_t v) {
  uint32_t old;
  asm volatile("atom.relaxed.sys.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(cmp), "r"(v) : "memory");
  return old;
}
RSHMEMI_DEV uint64_t rshmemi_relaxed_atom_cas_b64(void* p, uint64_t cmp, uint64_t v) {
  uint64_t old;
  asm volatile("atom.relaxed.sys.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(cmp), "l"(v) : "memory");
  return old;
}

// ---- one element of any 1/2/4/8-byte type by a strong (relaxed, system-scope) access ----
// Strong accesses are what the memory model's patterns are made of: a fence followed by a strong
// write is a release, a strong read followed by a fence an acquire; a plain C++ access is weak
// (the compiler may also merge, hoist or drop it). Floating-point values go by their bits.
template <typename T>
RSHMEMI_DEV void rshmemi_relaxed_st_sys_elem(T* p, T v) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "1, 2, 4 or 8 bytes");
  if constexpr (sizeof(T) == 1) rshmemi_relaxed_st_sys_u8(p, __builtin_bit_cast(uint8_t, v));
  else if constexpr (sizeof(T) == 2) rshmemi_relaxed_st_sys_u16(p, __builtin_bit_cast(uint16_t, v));
  else if constexpr (sizeof(T) == 4) rshmemi_relaxed_st_sys_u32(p, __builtin_bit_cast(uint32_t, v));
  else rshmemi_relaxed_st_sys_u64(p, __builtin_bit_cast(uint64_t, v));
}
template <typename T>
RSHMEMI_DEV T rshmemi_relaxed_ld_sys_elem(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "1, 2, 4 or 8 bytes");
  if constexpr (sizeof(T) == 1) return __builtin_bit_cast(T, rshmemi_relaxed_ld_sys_u8(p));
  else if constexpr (sizeof(T) == 2) return __builtin_bit_cast(T, rshmemi_relaxed_ld_sys_u16(p));
  else if constexpr (sizeof(T) == 4) return __builtin_bit_cast(T, rshmemi_relaxed_ld_sys_u32(p));
  else return __builtin_bit_cast(T, rshmemi_relaxed_ld_sys_u64(p));
}

// ---- typed dispatch for templates: 32- and 64-bit integers share the bit-level forms ----
template <typename T> struct rshmemi_bits;
template <> struct rshmemi_bits<int32_t> { typedef uint32_t type; };
template <> struct rshmemi_bits<uint32_t> { typedef uint32_t type; };
template <> struct rshmemi_bits<int64_t> { typedef uint64_t type; };
template <> struct rshmemi_bits<uint64_t> { typedef uint64_t type; };

RSHMEMI_DEV uint32_t rshmemi_ld_acquire_sys(const uint32_t* p) { return rshmemi_ld_acquire_sys_u32(p); }
RSHMEMI_DEV uint64_t rshmemi_ld_acquire_sys(const uint64_t* p) { return rshmemi_ld_acquire_sys_u64(p); }
RSHMEMI_DEV uint32_t rshmemi_relaxed_ld_sys(const uint32_t* p) { return rshmemi_relaxed_ld_sys_u32(p); }
RSHMEMI_DEV uint64_t rshmemi_relaxed_ld_sys(const uint64_t* p) { return rshmemi_relaxed_ld_sys_u64(p); }
RSHMEMI_DEV void rshmemi_relaxed_st_sys(uint32_t* p, uint32_t v) { rshmemi_relaxed_st_sys_u32(p, v); }
RSHMEMI_DEV void rshmemi_relaxed_st_sys(uint64_t* p, uint64_t v) { rshmemi_relaxed_st_sys_u64(p, v); }
RSHMEMI_DEV uint32_t rshmemi_relaxed_atom_add(uint32_t* p, uint32_t v) { return rshmemi_relaxed_atom_add_u32(p, v); }
RSHMEMI_DEV uint64_t rshmemi_relaxed_atom_add(uint64_t* p, uint64_t v) { return rshmemi_relaxed_atom_add_u64(p, v); }
RSHMEMI_DEV uint32_t rshmemi_relaxed_atom_and(uint32_t* p, uint32_t v) { return rshmemi_relaxed_atom_and_b32(p, v); }
RSHMEMI_DEV uint64_t rshmemi_relaxed_atom_and(uint64_t* p, uint64_t v) { return rshmemi_relaxed_atom_and_b64(p, v); }
RSHMEMI_DEV uint32_t rshmemi_relaxed_atom_or(uint32_t* p, uint32_t v) { return rshmemi_relaxed_atom_or_b32(p, v); }
RSHMEMI_DEV uint64_t rshmemi_relaxed_atom_or(uint64_t* p, uint64_t v) { return rshmemi_relaxed_atom_or_b64(p, v); }
RSHMEMI_DEV uint32_t rshmemi_relaxed_atom_xor(uint32_t* p, uint32_t v) { return rshmemi_relaxed_atom_xor_b32(p, v); }
RSHMEMI_DEV uint64_t rshmemi_relaxed_atom_xor(uint64_t* p, uint64_t v) { return rshmemi_relaxed_atom_xor_b64(p, v); }
RSHMEMI_DEV uint32_t rshmemi_relaxed_atom_exch(uint32_t* p, uint32_t v) { return rshmemi_relaxed_atom_exch_b32(p, v); }
RSHMEMI_DEV uint64_t rshmemi_relaxed_atom_exch(uint64_t* p, uint64_t v) { return rshmemi_relaxed_atom_exch_b64(p, v); }
RSHMEMI_DEV uint32_t rshmemi_relaxed_atom_cas(uint32_t* p, uint32_t c, uint32_t v) { return rshmemi_relaxed_atom_cas_b32(p, c, v); }
RSHMEMI_DEV uint64_t rshmemi_relaxed_atom_cas(uint64_t* p, uint64_t c, uint64_t v) { return rshmemi_relaxed_atom_cas_b64(p, c, v); }

#endif  // RSHMEM_ATOMIC_DEVICE_H
