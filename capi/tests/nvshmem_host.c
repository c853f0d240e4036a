/* NVSHMEM's host-side team collectives through the compatibility header, as a plain C program
   (CI: 2 PEs on the host backend under torchrun --no-python): nvshmem_<type>_<op>_reduce for every
   operation (the bitwise ones on integer types), broadcast, fcollect and alltoall, the
   reduce-scatters (nvshmem_<type>_<op>_reducescatter), the byte forms nvshmem_broadcastmem /
   fcollectmem / alltoallmem, a reduction over a split team with nvshmem_team_translate_pe, and,
   built with CUDA's include directory (RSHMEM_NVSHMEM_HALF), the half and bfloat16 reductions,
   broadcast, p and g; each checked against what the PEs' inputs must give. Prints "PE i: N nvshmem
   collectives correct" and exits 0, or names the first wrong value and exits 1. EXPECT_HALF (0 or
   1, from the compile line) must match RSHMEM_NVSHMEM_HALF. */
#include <nvshmem.h>

#include <stdio.h>
#include <stdlib.h>

#define N 4

#include "check.h"

/* PE p contributes p + 1 + i at index i (integers) so every operation has a known result. */
static void int_reductions(int me, int npes) {
  int *src = (int *)nvshmem_malloc(N * sizeof(int)), *dst = (int *)nvshmem_malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) src[i] = me + 1 + i;
  nvshmem_barrier_all();
  for (int op = 0; op < 7; op++) {
    switch (op) {
      case 0: nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, dst, src, N); break;
      case 1: nvshmem_int_prod_reduce(NVSHMEM_TEAM_WORLD, dst, src, N); break;
      case 2: nvshmem_int_min_reduce(NVSHMEM_TEAM_WORLD, dst, src, N); break;
      case 3: nvshmem_int_max_reduce(NVSHMEM_TEAM_WORLD, dst, src, N); break;
      case 4: nvshmem_int_and_reduce(NVSHMEM_TEAM_WORLD, dst, src, N); break;
      case 5: nvshmem_int_or_reduce(NVSHMEM_TEAM_WORLD, dst, src, N); break;
      default: nvshmem_int_xor_reduce(NVSHMEM_TEAM_WORLD, dst, src, N); break;
    }
    for (int i = 0; i < N; i++) {
      int want = op == 1 ? 1 : op == 2 ? 1 << 30 : op == 4 ? -1 : 0;
      for (int p = 0; p < npes; p++) {
        const int v = p + 1 + i;
        want = op == 0 ? want + v : op == 1 ? want * v : op == 2 ? (v < want ? v : want)
             : op == 3 ? (v > want ? v : want) : op == 4 ? want & v : op == 5 ? want | v : want ^ v;
      }
      CHECK(dst[i] == want, "op %d, element %d: %d, expected %d", op, i, dst[i], want);
    }
  }
  nvshmem_free(src);
  nvshmem_free(dst);
}

static void other_types(int me, int npes) {
  unsigned long *u = (unsigned long *)nvshmem_malloc(sizeof(unsigned long));
  double *d = (double *)nvshmem_malloc(sizeof(double)), *dsum = (double *)nvshmem_malloc(sizeof(double));
  int64_t *bits = (int64_t *)nvshmem_malloc(sizeof(int64_t));
  *u = 1ul << me;
  *d = 0.5 * (me + 1);
  *bits = (int64_t)1 << (me + 8);
  nvshmem_barrier_all();
  nvshmem_ulong_or_reduce(NVSHMEM_TEAM_WORLD, u, u, 1); /* dest may be source */
  nvshmem_double_sum_reduce(NVSHMEM_TEAM_WORLD, dsum, d, 1);
  nvshmem_int64_xor_reduce(NVSHMEM_TEAM_WORLD, bits, bits, 1);
  CHECK(*u == (1ul << npes) - 1, "ulong or: %lu", *u);
  CHECK(*dsum == 0.25 * npes * (npes + 1), "double sum: %g", *dsum);
  CHECK(*bits == (((int64_t)1 << npes) - 1) << 8, "int64 xor: %lld", (long long)*bits);
  nvshmem_free(u);
  nvshmem_free(d);
  nvshmem_free(dsum);
  nvshmem_free(bits);
}

/* The even PEs as a team: translate_pe and a reduction over a team that is not the world. */
static void split_team(int me, int npes) {
  nvshmem_team_t even = NVSHMEM_TEAM_INVALID;
  nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &even);
  CHECK((even != NVSHMEM_TEAM_INVALID) == (me % 2 == 0), "team handle %d on PE %d", (int)even, me);
  const int members = (npes + 1) / 2;
  if (even != NVSHMEM_TEAM_INVALID) {
    const int last = nvshmem_team_translate_pe(even, members - 1, NVSHMEM_TEAM_WORLD);
    CHECK(last == 2 * (members - 1), "even PE %d is world PE %d", members - 1, last);
    CHECK(nvshmem_team_translate_pe(NVSHMEM_TEAM_WORLD, me, even) == me / 2, "world PE %d in the even team", me);
    CHECK(nvshmem_team_translate_pe(NVSHMEM_TEAM_WORLD, 1, even) == -1, "world PE 1 is not an even PE");
  }
  short *v = (short *)nvshmem_malloc(sizeof(short)), *top = (short *)nvshmem_malloc(sizeof(short));
  *v = (short)(10 * me);
  nvshmem_barrier_all();
  if (even != NVSHMEM_TEAM_INVALID) {
    nvshmem_short_max_reduce(even, top, v, 1);
    CHECK(*top == 10 * 2 * (members - 1), "max over the even PEs: %d", *top);
    nvshmem_team_destroy(even);
  }
  nvshmem_free(v);
  nvshmem_free(top);
}

static void data_movement(int me, int npes) {
  long *src = (long *)nvshmem_malloc(N * npes * sizeof(long)), *dst = (long *)nvshmem_malloc(N * npes * sizeof(long));
  for (int i = 0; i < N * npes; i++) src[i] = 1000 * me + i;
  nvshmem_barrier_all();
  nvshmem_long_broadcast(NVSHMEM_TEAM_WORLD, dst, src, N, npes - 1);
  for (int i = 0; i < N; i++) CHECK(dst[i] == 1000 * (npes - 1) + i, "broadcast [%d]: %ld", i, dst[i]);
  nvshmem_long_fcollect(NVSHMEM_TEAM_WORLD, dst, src, N);
  for (int p = 0; p < npes; p++)
    for (int i = 0; i < N; i++)
      CHECK(dst[p * N + i] == 1000 * p + i, "fcollect [%d]: %ld", p * N + i, dst[p * N + i]);
  nvshmem_long_alltoall(NVSHMEM_TEAM_WORLD, dst, src, N);
  for (int p = 0; p < npes; p++)
    for (int i = 0; i < N; i++)
      CHECK(dst[p * N + i] == 1000 * p + me * N + i, "alltoall [%d]: %ld", p * N + i, dst[p * N + i]);
  nvshmem_free(src);
  nvshmem_free(dst);
}

/* Reduce-scatters: block b of PE p's source holds 100 * b + p + i at index i, so PE me's result
   is a function of its own block only; the xor runs in place, into this PE's own block. */
static void reduce_scatters(int me, int npes) {
  int *src = (int *)nvshmem_malloc(N * npes * sizeof(int)), *dst = (int *)nvshmem_malloc(N * sizeof(int));
  long *bits = (long *)nvshmem_malloc(N * npes * sizeof(long));
  for (int b = 0; b < npes; b++)
    for (int i = 0; i < N; i++) {
      src[b * N + i] = 100 * b + me + i;
      bits[b * N + i] = 1l << (me + b);
    }
  nvshmem_barrier_all();
  nvshmem_int_sum_reducescatter(NVSHMEM_TEAM_WORLD, dst, src, N);
  for (int i = 0; i < N; i++)
    CHECK(dst[i] == npes * (100 * me + i) + npes * (npes - 1) / 2, "int sum reducescatter [%d]: %d", i, dst[i]);
  nvshmem_int_max_reducescatter(NVSHMEM_TEAM_WORLD, dst, src, N);
  CHECK(dst[0] == 100 * me + npes - 1, "int max reducescatter: %d", dst[0]);
  nvshmem_long_xor_reducescatter(NVSHMEM_TEAM_WORLD, bits + me * N, bits, N);
  long want = 0;
  for (int p = 0; p < npes; p++) want ^= 1l << (p + me);
  CHECK(bits[me * N] == want, "long xor reducescatter in place: %ld", bits[me * N]);
  nvshmem_free(bits);
  nvshmem_free(dst);
  nvshmem_free(src);
}

/* The byte forms, with counts that are no multiple of a wider type: PE p's byte k is 37 p + k. */
static void byte_collectives(int me, int npes) {
  enum { BYTES = 5 };
  unsigned char *src = (unsigned char *)nvshmem_malloc(BYTES * npes), *dst = (unsigned char *)nvshmem_malloc(BYTES * npes);
  for (int k = 0; k < BYTES * npes; k++) src[k] = (unsigned char)(37 * me + k);
  nvshmem_barrier_all();
  nvshmem_broadcastmem(NVSHMEM_TEAM_WORLD, dst, src, BYTES, npes - 1);
  for (int k = 0; k < BYTES; k++)
    CHECK(dst[k] == (unsigned char)(37 * (npes - 1) + k), "broadcastmem [%d]: %d", k, dst[k]);
  nvshmem_fcollectmem(NVSHMEM_TEAM_WORLD, dst, src, BYTES);
  for (int p = 0; p < npes; p++)
    for (int k = 0; k < BYTES; k++)
      CHECK(dst[p * BYTES + k] == (unsigned char)(37 * p + k), "fcollectmem [%d]: %d", p * BYTES + k, dst[p * BYTES + k]);
  nvshmem_alltoallmem(NVSHMEM_TEAM_WORLD, dst, src, BYTES);
  for (int p = 0; p < npes; p++)
    for (int k = 0; k < BYTES; k++)
      CHECK(dst[p * BYTES + k] == (unsigned char)(37 * p + me * BYTES + k), "alltoallmem [%d]: %d", p * BYTES + k,
            dst[p * BYTES + k]);
  nvshmem_free(src);
  nvshmem_free(dst);
}

#if defined(EXPECT_HALF) && EXPECT_HALF != RSHMEM_NVSHMEM_HALF
#error "RSHMEM_NVSHMEM_HALF is not what the compile line expects (EXPECT_HALF)"
#endif
#if RSHMEM_NVSHMEM_HALF
/* C has CUDA's raw 16-bit structs only (half is __half_raw): the bits of a small positive integer k,
   exact in half below 2048 and in bfloat16 below 256 (an implicit leading 1, then the mantissa). */
static unsigned short float16_bits(int k, int mantissa_bits, int bias) {
  int e = 0;
  while ((k >> (e + 1)) != 0) e++;
  return (unsigned short)(((e + bias) << mantissa_bits) | ((k << (mantissa_bits - e)) & ((1 << mantissa_bits) - 1)));
}
#define HALF_OF(k) float16_bits((k), 10, 15)
#define BF16_OF(k) float16_bits((k), 7, 127)

/* PE p contributes p + 1 + i at index i, as in int_reductions. */
static void half_types(int me, int npes) {
  half *h = (half *)nvshmem_malloc(N * sizeof(half)), *hout = (half *)nvshmem_malloc(N * sizeof(half));
  __nv_bfloat16 *b = (__nv_bfloat16 *)nvshmem_malloc(N * sizeof(__nv_bfloat16));
  __nv_bfloat16 *bout = (__nv_bfloat16 *)nvshmem_malloc(N * sizeof(__nv_bfloat16));
  for (int i = 0; i < N; i++) {
    h[i].x = HALF_OF(me + 1 + i);
    b[i].x = BF16_OF(me + 1 + i);
  }
  CHECK(HALF_OF(1) == 0x3C00 && HALF_OF(3) == 0x4200 && BF16_OF(1) == 0x3F80 && BF16_OF(3) == 0x4040,
        "the test's own half / bfloat16 encodings");
  nvshmem_barrier_all();
  nvshmem_half_sum_reduce(NVSHMEM_TEAM_WORLD, hout, h, N);
  for (int i = 0; i < N; i++)
    CHECK(hout[i].x == HALF_OF(npes * (npes + 1) / 2 + npes * i), "half sum [%d]: bits %#x", i, hout[i].x);
  nvshmem_half_max_reduce(NVSHMEM_TEAM_WORLD, hout, h, N);
  for (int i = 0; i < N; i++) CHECK(hout[i].x == HALF_OF(npes + i), "half max [%d]: bits %#x", i, hout[i].x);
  nvshmem_bfloat16_min_reduce(NVSHMEM_TEAM_WORLD, bout, b, N);
  for (int i = 0; i < N; i++) CHECK(bout[i].x == BF16_OF(1 + i), "bfloat16 min [%d]: bits %#x", i, bout[i].x);
  nvshmem_bfloat16_prod_reduce(NVSHMEM_TEAM_WORLD, bout, b, 1);
  int prod = 1;
  for (int p = 0; p < npes; p++) prod *= p + 1;
  CHECK(bout[0].x == BF16_OF(prod), "bfloat16 prod: bits %#x", bout[0].x);
  nvshmem_bfloat16_broadcast(NVSHMEM_TEAM_WORLD, bout, b, N, 0);
  for (int i = 0; i < N; i++) CHECK(bout[i].x == BF16_OF(1 + i), "bfloat16 broadcast [%d]: bits %#x", i, bout[i].x);
  /* p and g move the bits: PE me writes 100 + me into the next PE's h[0] and reads it back there. */
  const int next = (me + 1) % npes;
  half v;
  v.x = HALF_OF(100 + me);
  nvshmem_barrier_all();
  nvshmem_half_p(h, v, next);
  nvshmem_barrier_all();
  CHECK(h[0].x == HALF_OF(100 + (me + npes - 1) % npes), "half p from the previous PE: bits %#x", h[0].x);
  CHECK(nvshmem_half_g(h, next).x == HALF_OF(100 + me), "half g of what this PE put");
  nvshmem_barrier_all();
  nvshmem_free(h);
  nvshmem_free(hout);
  nvshmem_free(b);
  nvshmem_free(bout);
}
#endif

int main(void) {
  nvshmem_init();
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  int_reductions(me, npes);
  other_types(me, npes);
  data_movement(me, npes);
  reduce_scatters(me, npes);
  byte_collectives(me, npes);
#if RSHMEM_NVSHMEM_HALF
  half_types(me, npes);
#endif
  split_team(me, npes);
  nvshmem_barrier_all();
  printf("PE %d: %d nvshmem collectives correct\n", me, checks);
  nvshmem_finalize();
  return 0;
}
