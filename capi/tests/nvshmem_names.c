/* NVSHMEM's host names beyond the basics, and its team and test semantics, through nvshmem.h /
   nvshmemx.h as a plain C program (CI: 2 PEs, then 4, on the host backend under torchrun
   --no-python):
   - nvshmem_init_thread / nvshmem_query_thread and the NVSHMEM_THREAD_* levels;
   - nvshmem_info_get_version / _name, NVSHMEM_MAX_NAME_LEN, NVSHMEM_VENDOR_STRING, the version
     macros, NVSHMEMX_SUCCESS and the NVSHMEMX_ERROR_* codes, the init attribute and unique-id
     initializers and nvshmemx_set_attr_uniqueid_args;
   - strided nvshmem_<T>_iput / _iget and nvshmem_iput{8..128} / iget*, sized nvshmem_put{8..128}
     / get* and their _nbi forms, against the values the PEs must see (and a bad call refused
     before it copies anything);
   - NVSHMEM_TEAM_INVALID in every team call (-1 from the queries, a no-op destroy, a split that
     leaves PEs out and is destroyed on every PE, a split of it), nvshmem_team_split_2d with the
     grid NVSHMEM makes, nvshmem_team_config_t;
   - rshmem_host_test_any / wait_until_any rotating their start (NVSHMEM's test_any is device
     code), so a word that stays ready cannot hide the others;
   - nvshmemx_buffer_register_symmetric refusing host memory with NULL (on the host backend, as
     for any buffer not made by cuMemCreate; examples/cuda/user_buffer.cu registers one on a GPU)
     and _unregister_symmetric refusing what was never registered; nvshmemx_buffer_register
     (nothing to register in rshmem) accepting a buffer and refusing NULL.
   Prints "PE i: N checks of NVSHMEM's names correct" and exits 0, or names the first wrong value
   and exits 1. */
#include <nvshmem.h>
#include <nvshmemx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void constants(void) {
  int major = -1, minor = -1, patch = -1;
  nvshmem_info_get_version(&major, &minor);
  CHECK(major == NVSHMEM_MAJOR_VERSION && minor == NVSHMEM_MINOR_VERSION, "version %d.%d", major, minor);
  CHECK(major == 1 && minor == 3, "NVSHMEM's OpenSHMEM version is 1.3, not %d.%d", major, minor);
  nvshmemx_vendor_get_version(&major, &minor, &patch);
  CHECK(major * 10000 + minor * 100 + patch == NVSHMEM_VENDOR_VERSION, "vendor %d.%d.%d", major, minor, patch);
  char name[NVSHMEM_MAX_NAME_LEN];
  memset(name, 'x', sizeof name);
  nvshmem_info_get_name(name);
  CHECK(strcmp(name, NVSHMEM_VENDOR_STRING) == 0 && strstr(name, "rshmem") != NULL, "name '%.40s'", name);
  CHECK(NVSHMEMX_SUCCESS == 0 && NVSHMEMX_ERROR_INVALID_VALUE != 0 && NVSHMEMX_ERROR_INTERNAL > 0, "status codes");
  CHECK(NVSHMEM_THREAD_SINGLE < NVSHMEM_THREAD_FUNNELED && NVSHMEM_THREAD_FUNNELED < NVSHMEM_THREAD_SERIALIZED &&
            NVSHMEM_THREAD_SERIALIZED < NVSHMEM_THREAD_MULTIPLE,
        "thread levels in order");
  CHECK(NVSHMEMX_INIT_WITH_UNIQUEID == 8 && NVSHMEMX_INIT_WITH_MPI_COMM == 2, "NVSHMEM's flag values");

  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  CHECK(attr.mpi_comm == NULL && attr.args.uid_args.id == NULL && attr.args.uid_args.myrank == -1, "initializer");
  CHECK(nvshmemx_set_attr_uniqueid_args(1, 4, &id, &attr) == NVSHMEMX_SUCCESS, "set_attr_uniqueid_args");
  CHECK(attr.args.uid_args.id == &id && attr.args.uid_args.myrank == 1 && attr.args.uid_args.nranks == 4,
        "uid args %d of %d", attr.args.uid_args.myrank, attr.args.uid_args.nranks);
  CHECK(nvshmemx_set_attr_uniqueid_args(0, 1, NULL, &attr) == NVSHMEMX_ERROR_INVALID_VALUE, "a NULL id refused");
}

/* PE me's source holds 100 * me + i; each PE puts every other element of its source into every
   third element of the next PE's destination, and gets back every second element of the previous
   PE's source. */
static void strided(int me, int npes) {
  const int next = (me + 1) % npes, prev = (me + npes - 1) % npes;
  long *sym = (long *)nvshmem_calloc(24, sizeof(long));
  long src[16], back[8];
  for (int i = 0; i < 16; i++) src[i] = 100 * me + i;
  nvshmem_barrier_all();
  nvshmem_long_iput(sym, src, 3, 2, 8, next); /* sym[3i] on next = src[2i] */
  nvshmem_barrier_all();
  for (int i = 0; i < 24; i++) {
    const long want = i % 3 == 0 ? 100 * prev + 2 * (i / 3) : 0;
    CHECK(sym[i] == want, "long_iput: sym[%d] = %ld, expected %ld", i, sym[i], want);
  }
  /* The sized forms on 32-bit words, with the source stride 1 and a destination stride of 2. */
  int32_t *w = (int32_t *)nvshmem_calloc(16, sizeof(int32_t));
  int32_t ws[8], wb[16];
  for (int i = 0; i < 8; i++) ws[i] = 1000 * me + i;
  nvshmem_barrier_all();
  nvshmem_iput32(w, ws, 2, 1, 8, next);
  nvshmem_barrier_all();
  for (int i = 0; i < 16; i++) CHECK(w[i] == (i % 2 ? 0 : 1000 * prev + i / 2), "iput32: w[%d] = %d", i, w[i]);
  memset(wb, 0, sizeof wb);
  nvshmem_iget32(wb, w, 1, 2, 8, me); /* the even words back, packed */
  for (int i = 0; i < 8; i++) CHECK(wb[i] == 1000 * prev + i, "iget32: wb[%d] = %d", i, wb[i]);
  /* iget of the previous PE's long words, every second one. */
  nvshmem_barrier_all();
  memcpy(sym, src, sizeof src); /* each PE's own sym[0..16) = its source */
  nvshmem_barrier_all();
  nvshmem_long_iget(back, sym, 1, 2, 8, prev);
  for (int i = 0; i < 8; i++) CHECK(back[i] == 100 * prev + 2 * i, "long_iget: back[%d] = %ld", i, back[i]);
  /* 128-bit elements: pairs of longs. */
  long pairs[4] = {0, 0, 0, 0};
  nvshmem_iget128(pairs, sym, 1, 3, 2, prev); /* elements 0 and 3 of the 16-byte view */
  CHECK(pairs[0] == 100 * prev && pairs[1] == 100 * prev + 1 && pairs[2] == 100 * prev + 6 && pairs[3] == 100 * prev + 7,
        "iget128: %ld %ld %ld %ld", pairs[0], pairs[1], pairs[2], pairs[3]);
  /* 8- and 16-bit strides, and the typed float form. */
  uint8_t bytes[4] = {1, 2, 3, 4}, bback[4] = {0, 0, 0, 0};
  nvshmem_barrier_all();
  nvshmem_iput8(sym, bytes, 2, 1, 4, next);
  nvshmem_barrier_all();
  nvshmem_iget8(bback, sym, 1, 2, 4, me);
  CHECK(bback[0] == 1 && bback[3] == 4, "iput8/iget8: %d %d", bback[0], bback[3]);
  uint16_t halves[3] = {7, 8, 9}, hback[3] = {0, 0, 0};
  nvshmem_barrier_all();
  nvshmem_iput16(sym, halves, 1, 1, 3, next);
  nvshmem_barrier_all();
  nvshmem_iget16(hback, sym, 1, 1, 3, me);
  CHECK(hback[0] == 7 && hback[2] == 9, "iput16/iget16: %d %d", hback[0], hback[2]);
  float f[2] = {1.5f, 2.5f}, fback[2] = {0, 0};
  nvshmem_barrier_all();
  nvshmem_float_iput((float *)sym, f, 4, 1, 2, next);
  nvshmem_barrier_all();
  nvshmem_float_iget(fback, (float *)sym, 1, 4, 2, me);
  CHECK(fback[0] == 1.5f && fback[1] == 2.5f, "float_iput/iget: %g %g", fback[0], fback[1]);
  nvshmem_barrier_all();

  /* A bad call copies nothing: the last element would leave the allocation (24 longs). */
  long before[24];
  memcpy(before, sym, sizeof before);
  int32_t status = rshmem_host_iput(sym, src, 4, 1, 8, sizeof(long), next);
  CHECK(status != RSHMEM_SUCCESS, "an iput past the allocation returned %d", status);
  CHECK(strstr(rshmem_host_last_error(), "iput") != NULL, "message '%s'", rshmem_host_last_error());
  CHECK(rshmem_host_iget(back, sym, 1, 1, 2, 3, me) == RSHMEM_ERROR_INVALID_ARGUMENT, "element size 3 refused");
  CHECK(rshmem_host_iput(sym, src, 0, 1, 2, 8, me) == RSHMEM_ERROR_INVALID_ARGUMENT, "a destination stride 0 refused");
  nvshmem_barrier_all();
  CHECK(memcmp(before, sym, sizeof before) == 0, "a refused iput changed the destination");

  /* Sized contiguous puts and gets. */
  uint64_t q[3] = {11, 12, 13}, qb[3] = {0, 0, 0};
  nvshmem_barrier_all();
  nvshmem_put64(sym, q, 3, next);
  nvshmem_put64_nbi((uint64_t *)sym + 3, q, 1, next);
  nvshmem_quiet();
  nvshmem_barrier_all();
  nvshmem_get64(qb, sym, 2, me);
  nvshmem_get64_nbi(qb + 2, (uint64_t *)sym + 3, 1, me);
  nvshmem_quiet();
  CHECK(qb[0] == 11 && qb[1] == 12 && qb[2] == 11, "put64/get64: %llu %llu %llu", (unsigned long long)qb[0],
        (unsigned long long)qb[1], (unsigned long long)qb[2]);
  uint8_t b8[3] = {5, 6, 7}, b8b[3] = {0, 0, 0};
  uint16_t s16[2] = {300, 301}, s16b[2] = {0, 0};
  uint32_t u32 = 0xdeadbeef, u32b = 0;
  long l128[2] = {-1, 42}, l128b[2] = {0, 0};
  nvshmem_barrier_all();
  nvshmem_put8(sym, b8, 3, next);
  nvshmem_put16((char *)sym + 8, s16, 2, next);
  nvshmem_put32_nbi((char *)sym + 16, &u32, 1, next);
  nvshmem_put128((char *)sym + 32, l128, 1, next);
  nvshmem_barrier_all();
  nvshmem_get8(b8b, sym, 3, me);
  nvshmem_get16(s16b, (char *)sym + 8, 2, me);
  nvshmem_get32(&u32b, (char *)sym + 16, 1, me);
  nvshmem_get128_nbi(l128b, (char *)sym + 32, 1, me);
  nvshmem_quiet();
  CHECK(b8b[2] == 7 && s16b[1] == 301 && u32b == 0xdeadbeef && l128b[0] == -1 && l128b[1] == 42,
        "sized puts: %d %d %x %ld %ld", b8b[2], s16b[1], u32b, l128b[0], l128b[1]);
  nvshmem_barrier_all();
  nvshmem_free(w);
  nvshmem_free(sym);
}

static void teams(int me, int npes) {
  /* NVSHMEM_TEAM_INVALID: -1 from every query, destroy does nothing, a split of it gives it. */
  CHECK(nvshmem_team_my_pe(NVSHMEM_TEAM_INVALID) == -1, "team_my_pe(INVALID)");
  CHECK(nvshmem_team_n_pes(NVSHMEM_TEAM_INVALID) == -1, "team_n_pes(INVALID)");
  CHECK(nvshmem_team_translate_pe(NVSHMEM_TEAM_INVALID, 0, NVSHMEM_TEAM_WORLD) == -1, "translate from INVALID");
  CHECK(nvshmem_team_translate_pe(NVSHMEM_TEAM_WORLD, 0, NVSHMEM_TEAM_INVALID) == -1, "translate to INVALID");
  nvshmem_team_destroy(NVSHMEM_TEAM_INVALID);
  nvshmem_team_t t = NVSHMEM_TEAM_WORLD;
  CHECK(nvshmem_team_split_strided(NVSHMEM_TEAM_INVALID, 0, 1, 1, NULL, 0, &t) != 0 && t == NVSHMEM_TEAM_INVALID,
        "a split of INVALID");
  /* rshmem's own calls agree. */
  int32_t v = 0;
  CHECK(rshmem_host_team_n_pes(RSHMEM_TEAM_INVALID, &v) == RSHMEM_SUCCESS && v == -1, "rshmem_host_team_n_pes");
  CHECK(rshmem_host_team_destroy(RSHMEM_TEAM_INVALID) == RSHMEM_SUCCESS, "rshmem_host_team_destroy");
  /* Another team this PE is not in is still an error. */
  CHECK(rshmem_host_team_my_pe(17, &v) == RSHMEM_ERROR_INVALID_ARGUMENT, "an unknown team refused");

  /* The spec's pattern: split off PE 0 alone, use and destroy it on every PE. */
  nvshmem_team_config_t config;
  memset(&config, 0, sizeof config);
  config.num_contexts = 1;
  nvshmem_team_t first = NVSHMEM_TEAM_WORLD;
  CHECK(nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, 1, &config, NVSHMEM_TEAM_NUM_CONTEXTS, &first) == 0,
        "split");
  if (me == 0) {
    CHECK(first != NVSHMEM_TEAM_INVALID && nvshmem_team_n_pes(first) == 1 && nvshmem_team_my_pe(first) == 0,
          "PE 0's team");
  } else {
    CHECK(first == NVSHMEM_TEAM_INVALID && nvshmem_team_my_pe(first) == -1 && nvshmem_team_n_pes(first) == -1,
          "left out: %d", first);
  }
  nvshmem_team_config_t got;
  nvshmem_team_get_config(NVSHMEM_TEAM_WORLD, &got);
  nvshmem_team_destroy(first); /* every PE: a no-op where it is INVALID */
  nvshmem_barrier_all();

  /* A 2D split of the world with 2 columns: rows are consecutive pairs, columns every second PE. */
  nvshmem_team_t xt = 77, yt = 77;
  CHECK(nvshmem_team_split_2d(NVSHMEM_TEAM_WORLD, 2, &config, 0, &xt, &config, 0, &yt) == 0, "split_2d");
  const int xsize = npes % 2 && me == npes - 1 ? 1 : (npes < 2 ? 1 : 2);
  CHECK(nvshmem_team_n_pes(xt) == xsize && nvshmem_team_my_pe(xt) == me % 2, "x team of PE %d: %d of %d", me,
        nvshmem_team_my_pe(xt), nvshmem_team_n_pes(xt));
  const int ysize = npes / 2 + (npes % 2 && me % 2 == 0);
  CHECK(nvshmem_team_n_pes(yt) == (npes < 2 ? 1 : ysize) && nvshmem_team_my_pe(yt) == (npes < 2 ? 0 : me / 2),
        "y team of PE %d: %d of %d", me, nvshmem_team_my_pe(yt), nvshmem_team_n_pes(yt));
  CHECK(nvshmem_team_translate_pe(yt, 0, NVSHMEM_TEAM_WORLD) == me % 2, "column's first PE");
  /* A reduction over each, to show they are live teams. */
  int *one = (int *)nvshmem_malloc(sizeof(int)), *sum = (int *)nvshmem_malloc(sizeof(int));
  *one = me;
  nvshmem_barrier_all();
  nvshmem_int_sum_reduce(xt, sum, one, 1);
  const int row = me - me % 2;
  CHECK(*sum == (xsize == 2 ? 2 * row + 1 : row), "row sum %d", *sum);
  nvshmem_team_destroy(xt);
  nvshmem_team_destroy(yt);
  nvshmem_team_t ix = 5, iy = 5;
  CHECK(nvshmem_team_split_2d(NVSHMEM_TEAM_INVALID, 2, NULL, 0, &ix, NULL, 0, &iy) != 0 &&
            ix == NVSHMEM_TEAM_INVALID && iy == NVSHMEM_TEAM_INVALID,
        "a 2D split of INVALID");
  CHECK(rshmem_host_team_split_2d(RSHMEM_TEAM_WORLD, 0, &ix, &iy) == RSHMEM_ERROR_INVALID_ARGUMENT, "xrange 0");
  nvshmem_free(one);
  nvshmem_free(sum);
  nvshmem_barrier_all();
}

/* Words 1 and 3 stay ready: successive test_any calls must return both, not always 1. */
static void fair_tests(int me) {
  int64_t *words = (int64_t *)nvshmem_calloc(4, sizeof(int64_t));
  words[1] = 1;
  words[3] = 1;
  int seen1 = 0, seen3 = 0;
  for (int k = 0; k < 8; k++) {
    size_t idx = 99;
    CHECK(rshmem_host_test_any(words, 4, NULL, RSHMEM_DTYPE_INT64, NVSHMEM_CMP_EQ, 1, &idx) == RSHMEM_SUCCESS,
          "test_any");
    CHECK(idx == 1 || idx == 3, "test_any gave %zu", idx);
    seen1 += idx == 1;
    seen3 += idx == 3;
  }
  CHECK(seen1 > 0 && seen3 > 0, "test_any: index 1 %d times, index 3 %d times", seen1, seen3);
  seen1 = seen3 = 0;
  for (int k = 0; k < 8; k++) {
    size_t idx = 99;
    CHECK(rshmem_host_wait_until_any(words, 4, NULL, RSHMEM_DTYPE_INT64, NVSHMEM_CMP_EQ, 1, &idx) == RSHMEM_SUCCESS,
          "wait_until_any");
    seen1 += idx == 1;
    seen3 += idx == 3;
  }
  CHECK(seen1 > 0 && seen3 > 0, "wait_until_any: index 1 %d times, index 3 %d times", seen1, seen3);
  /* Masked words are never chosen; none ready is SIZE_MAX; test_some gives all, ascending. */
  const int32_t mask[4] = {0, 1, 0, 0};
  for (int k = 0; k < 4; k++) {
    size_t idx = 99;
    rshmem_host_test_any(words, 4, mask, RSHMEM_DTYPE_INT64, NVSHMEM_CMP_EQ, 1, &idx);
    CHECK(idx == 3, "masked test_any gave %zu", idx);
  }
  size_t none = 0;
  rshmem_host_test_any(words, 4, NULL, RSHMEM_DTYPE_INT64, NVSHMEM_CMP_EQ, 2, &none);
  CHECK(none == SIZE_MAX, "nothing ready gave %zu", none);
  size_t idx[4], count = 0;
  rshmem_host_test_some(words, 4, NULL, RSHMEM_DTYPE_INT64, NVSHMEM_CMP_EQ, 1, idx, &count);
  CHECK(count == 2 && idx[0] == 1 && idx[1] == 3, "test_some: %zu", count);
  (void)me;
  nvshmem_barrier_all();
  nvshmem_free(words);
}

int main(void) {
  int provided = -1;
  CHECK(nvshmem_init_thread(NVSHMEM_THREAD_MULTIPLE, &provided) == 0, "init_thread");
  CHECK(provided == NVSHMEM_THREAD_SERIALIZED, "provided %d", provided);
  int queried = -1;
  nvshmem_query_thread(&queried);
  CHECK(queried == provided, "query_thread %d", queried);
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  constants();
  strided(me, npes);
  teams(me, npes);
  fair_tests(me);
  CHECK(nvshmemx_buffer_register_symmetric(&provided, sizeof provided, 0) == NULL, "register_symmetric refused");
  CHECK(nvshmemx_buffer_unregister_symmetric(&provided, sizeof provided) == NVSHMEMX_ERROR_INVALID_VALUE,
        "unregister_symmetric of what was never registered refused");
  /* Registering a local buffer for the transports: nothing to do in rshmem, NULL refused. */
  CHECK(nvshmemx_buffer_register(&provided, sizeof provided) == NVSHMEMX_SUCCESS, "buffer_register");
  CHECK(nvshmemx_buffer_register(NULL, 4) == NVSHMEMX_ERROR_INVALID_VALUE, "buffer_register(NULL)");
  CHECK(nvshmemx_buffer_unregister(&provided) == NVSHMEMX_SUCCESS, "buffer_unregister");
  nvshmemx_buffer_unregister_all();
  nvshmem_barrier_all();
  printf("PE %d: %d checks of NVSHMEM's names correct\n", me, checks);
  nvshmem_finalize();
  return 0;
}
