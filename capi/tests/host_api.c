/* The C ABI on every PE of a job (CI: 2 PEs on the host backend, under torchrun --no-python and
   under mpirun): each call's result, and each kind of bad input returning its status code with a
   message instead of crashing. Prints "PE i: N checks passed" and exits 0, or names the first
   failed check and exits 1. */
#define _POSIX_C_SOURCE 200809L /* fork, waitpid */
#include <rshmem.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks = 0;
static int me = -1;

#define FAIL(...)                                       \
  do {                                                  \
    fprintf(stderr, "PE %d: %s:%d: ", me, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                       \
    fprintf(stderr, "\n");                              \
    exit(1);                                            \
  } while (0)

/* `call` returns `want`; a failure also leaves a message. */
#define EXPECT(want, call)                                                                     \
  do {                                                                                         \
    rshmem_status_t got_ = (call);                                                             \
    if (got_ != (want))                                                                        \
      FAIL("%s returned %s, expected %s (last error: %s)", #call, rshmem_host_status_name(got_), \
           rshmem_host_status_name(want), rshmem_host_last_error());                           \
    if ((want) != RSHMEM_SUCCESS && rshmem_host_last_error()[0] == '\0')                       \
      FAIL("%s failed without a message", #call);                                              \
    checks++;                                                                                  \
  } while (0)
#define OK(call) EXPECT(RSHMEM_SUCCESS, call)
#define CHECK(cond)                     \
  do {                                  \
    if (!(cond)) FAIL("%s is false", #cond); \
    checks++;                           \
  } while (0)

static void before_init(void) {
  int v;
  EXPECT(RSHMEM_ERROR_NOT_INITIALIZED, rshmem_host_my_pe(&v));
  CHECK(strstr(rshmem_host_last_error(), "rshmem_host_my_pe") != NULL);
  /* In C terms: the C function to call, never the Python one. */
  CHECK(strstr(rshmem_host_last_error(), "call rshmem_host_init()") != NULL);
  CHECK(strstr(rshmem_host_last_error(), "rshmem.init") == NULL);
  EXPECT(RSHMEM_ERROR_NOT_INITIALIZED, rshmem_host_barrier_all());
  void *p;
  EXPECT(RSHMEM_ERROR_NOT_INITIALIZED, rshmem_host_malloc(64, &p));
  OK(rshmem_host_is_initialized(&v));
  CHECK(v == 0);
  OK(rshmem_host_finalize()); /* nothing to finalize: not an error */
  rshmem_init_attr_t bad = RSHMEM_INIT_ATTR_INITIALIZER;
  bad.size = 8;
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_init(&bad));
  rshmem_init_attr_t half = RSHMEM_INIT_ATTR_INITIALIZER;
  half.rank = 0; /* rank without uid and nranks */
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_init(&half));
  rshmem_init_attr_t backend = RSHMEM_INIT_ATTR_INITIALIZER;
  backend.backend = "tpu";
  EXPECT(RSHMEM_ERROR_CONFIG, rshmem_host_init(&backend));
  rshmem_uniqueid_t uid;
  OK(rshmem_host_get_unique_id(&uid));
  CHECK(uid.bytes[0] != 0);
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_get_unique_id(NULL));
  CHECK(strcmp(rshmem_host_status_name(RSHMEM_ERROR_PE_OUT_OF_RANGE), "RSHMEM_ERROR_PE_OUT_OF_RANGE") == 0);
  CHECK(strcmp(rshmem_host_status_name(12345), "unknown") == 0);
}

/* A child forked from a PE is not a PE (the library's pthread_atfork handler): its calls are
   refused naming the parent's PE, finalize too, is_initialized says 0, and the job goes on. */
static void forked_child(void) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) FAIL("fork failed");
  if (pid == 0) {
    int v = 1;
    int refused = rshmem_host_my_pe(&v) == RSHMEM_ERROR_NOT_INITIALIZED &&
                  strstr(rshmem_host_last_error(), "forked from PE") != NULL;
    int no_finalize = rshmem_host_finalize() == RSHMEM_ERROR_NOT_INITIALIZED;
    int down = rshmem_host_is_initialized(&v) == RSHMEM_SUCCESS && v == 0;
    _exit(refused && no_finalize && down ? 0 : 10 + refused + 2 * no_finalize + 4 * down);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    FAIL("the forked child was not refused (exit status %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  checks++;
  OK(rshmem_host_barrier_all()); /* the parent's job is untouched */
}

int main(void) {
  before_init();
  OK(rshmem_host_init(NULL));
  EXPECT(RSHMEM_ERROR_ALREADY_INITIALIZED, rshmem_host_init(NULL));
  int npes, v;
  OK(rshmem_host_my_pe(&me));
  OK(rshmem_host_n_pes(&npes));
  CHECK(npes >= 1 && me >= 0 && me < npes);
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_my_pe(NULL));
  const char *backend;
  OK(rshmem_host_backend(&backend));
  CHECK(strcmp(backend, "host") == 0 || strcmp(backend, "cuda") == 0);
  int host = strcmp(backend, "host") == 0;
  int next = (me + 1) % npes, prev = (me + npes - 1) % npes;

  /* simple_shift from the host: each PE stores its number on the next one */
  int32_t *dest;
  OK(rshmem_host_calloc(4, sizeof(int32_t), (void **)&dest));
  OK(rshmem_host_int32_p(dest, me, next));
  OK(rshmem_host_barrier_all());
  int32_t got;
  OK(rshmem_host_int32_g(dest, me, &got));
  CHECK(got == prev);
  OK(rshmem_host_fp64_p((double *)(dest + 2), 0.5 * me, next));
  OK(rshmem_host_barrier_all());
  double dgot;
  OK(rshmem_host_fp64_g((double *)(dest + 2), me, &dgot));
  CHECK(dgot == 0.5 * prev);

  /* bad PEs, addresses, buffers */
  EXPECT(RSHMEM_ERROR_PE_OUT_OF_RANGE, rshmem_host_int32_p(dest, 1, npes));
  EXPECT(RSHMEM_ERROR_PE_OUT_OF_RANGE, rshmem_host_int32_p(dest, 1, -1));
  int32_t local = 7;
  EXPECT(RSHMEM_ERROR_NOT_SYMMETRIC, rshmem_host_int32_p(&local, 1, next));
  EXPECT(RSHMEM_ERROR_NOT_SYMMETRIC, rshmem_host_putmem(&local, dest, 4, next));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_putmem(dest, (void *)16, 4, next));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_getmem((void *)16, dest, 4, next));
  /* past the allocation; the local source is a real 4096-byte buffer, because 4096 bytes from
     `local` can run off the top of the stack, which fails the local check first (a flake) */
  static int32_t page[1024];
  EXPECT(RSHMEM_ERROR_NOT_SYMMETRIC, rshmem_host_putmem(dest, page, sizeof page, next));

  /* bulk put and get */
  int64_t *buf;
  OK(rshmem_host_malloc(8 * sizeof(int64_t), (void **)&buf));
  int64_t src[8], back[8];
  for (int i = 0; i < 8; i++) src[i] = 100 * me + i;
  OK(rshmem_host_putmem(buf, src, sizeof src, next));
  OK(rshmem_host_barrier_all());
  OK(rshmem_host_getmem(back, buf, sizeof back, me));
  for (int i = 0; i < 8; i++) CHECK(back[i] == 100 * prev + i);

  /* atomics: every PE adds its number + 1 on PE 0 */
  uint64_t *counter, old;
  OK(rshmem_host_calloc(1, sizeof(uint64_t), (void **)&counter));
  OK(rshmem_host_atomic(counter, 8, RSHMEM_AMO_ADD, 0, (uint64_t)me + 1, 0, &old));
  OK(rshmem_host_barrier_all());
  OK(rshmem_host_atomic(counter, 8, RSHMEM_AMO_FETCH, 0, 0, 0, &old));
  CHECK(old == (uint64_t)npes * (npes + 1) / 2);
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_atomic(counter, 2, RSHMEM_AMO_FETCH, 0, 0, 0, &old));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_atomic(counter, 8, (rshmem_amo_t)42, 0, 0, 0, &old));

  /* signals: put to the next PE with a signal, wait for the previous one's */
  uint64_t *sig;
  OK(rshmem_host_calloc(1, sizeof(uint64_t), (void **)&sig));
  int64_t payload[4] = {me, me, me, me};
  OK(rshmem_host_putmem_signal(buf, payload, sizeof payload, sig, 1, RSHMEM_SIGNAL_ADD, next));
  uint64_t seen;
  OK(rshmem_host_signal_wait_until(sig, RSHMEM_CMP_GE, 1, &seen));
  CHECK(seen == 1);
  OK(rshmem_host_getmem(back, buf, sizeof payload, me));
  CHECK(back[0] == prev && back[3] == prev);
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_signal_op(sig, 1, 77, next));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_signal_wait_until(sig, 99, 1, &seen));

  /* waits over an array with a status mask */
  OK(rshmem_host_barrier_all());
  int32_t *flags;
  OK(rshmem_host_calloc(4, sizeof(int32_t), (void **)&flags));
  OK(rshmem_host_int32_p(flags + 1, 1, next));
  OK(rshmem_host_int32_p(flags + 3, 1, next));
  OK(rshmem_host_quiet());
  int32_t status[4] = {0, 0, 0, 1}; /* element 3 masked */
  size_t idx[4], count = 0;
  OK(rshmem_host_wait_until_some(flags, 4, status, RSHMEM_DTYPE_INT32, RSHMEM_CMP_EQ, 1, idx, &count));
  CHECK(count >= 1 && idx[0] == 1);
  int64_t satisfied = 0;
  OK(rshmem_host_wait_until(flags + 3, RSHMEM_DTYPE_INT32, RSHMEM_CMP_EQ, 1, &satisfied));
  CHECK(satisfied == 1);
  OK(rshmem_host_test(flags + 3, RSHMEM_DTYPE_INT32, RSHMEM_CMP_EQ, 1, &v));
  CHECK(v == 1);
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_test(flags, (rshmem_dtype_t)99, RSHMEM_CMP_EQ, 1, &v));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_test(flags, RSHMEM_DTYPE_FLOAT32, RSHMEM_CMP_EQ, 1, &v));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT,
         rshmem_host_wait_until_all(flags, 4, (const int32_t *)16, RSHMEM_DTYPE_INT32, RSHMEM_CMP_EQ, 1));

  /* collectives on the world */
  int32_t *in, *out;
  OK(rshmem_host_malloc(4 * sizeof(int32_t), (void **)&in));
  OK(rshmem_host_malloc(4 * (size_t)npes * sizeof(int32_t), (void **)&out));
  for (int i = 0; i < 4; i++) in[i] = me + i;
  OK(rshmem_host_reduce(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_SUM, out, in, 4, RSHMEM_DTYPE_INT32));
  for (int i = 0; i < 4; i++) CHECK(out[i] == npes * (npes - 1) / 2 + npes * i);
  OK(rshmem_host_fcollect(RSHMEM_TEAM_WORLD, out, in, 4, RSHMEM_DTYPE_INT32));
  for (int pe = 0; pe < npes; pe++) CHECK(out[4 * pe] == pe && out[4 * pe + 3] == pe + 3);
  OK(rshmem_host_broadcast(RSHMEM_TEAM_WORLD, out, in, 4, npes - 1, RSHMEM_DTYPE_INT32));
  CHECK(out[0] == npes - 1);
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_reduce(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_XOR, out, in, 4, RSHMEM_DTYPE_FLOAT32));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_reduce(RSHMEM_TEAM_WORLD, (rshmem_reduce_op_t)9, out, in, 4, RSHMEM_DTYPE_INT32));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_reduce(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_SUM, out, in, 4, (rshmem_dtype_t)-3));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT, rshmem_host_barrier(1234));

  /* reduce-scatter: element i of block p of PE q's `out` is 10 * p + q + i; PE me gets block me
     summed over the PEs */
  int32_t *part;
  OK(rshmem_host_malloc(4 * sizeof(int32_t), (void **)&part));
  for (int p = 0; p < npes; p++)
    for (int i = 0; i < 4; i++) out[4 * p + i] = 10 * p + me + i;
  OK(rshmem_host_reducescatter(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_SUM, part, out, 4, RSHMEM_DTYPE_INT32));
  for (int i = 0; i < 4; i++) CHECK(part[i] == npes * (10 * me + i) + npes * (npes - 1) / 2);
  int32_t private4[4] = {0};
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT,
         rshmem_host_reducescatter(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_XOR, part, out, 4, RSHMEM_DTYPE_FLOAT32));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT,
         rshmem_host_reducescatter(RSHMEM_TEAM_WORLD, (rshmem_reduce_op_t)9, part, out, 4, RSHMEM_DTYPE_INT32));
  EXPECT(RSHMEM_ERROR_INVALID_ARGUMENT,
         rshmem_host_reducescatter(1234, RSHMEM_REDUCE_SUM, part, out, 4, RSHMEM_DTYPE_INT32));
  EXPECT(RSHMEM_ERROR_NOT_SYMMETRIC,
         rshmem_host_reducescatter(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_SUM, part, private4, 1, RSHMEM_DTYPE_INT32));
  /* `out` holds 4 * npes elements: a block of 5 per PE runs past its end */
  EXPECT(RSHMEM_ERROR_NOT_SYMMETRIC,
         rshmem_host_reducescatter(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_SUM, part, out, 5, RSHMEM_DTYPE_INT32));

  /* on-stream forms with no stream run as their host forms on the host backend */
  if (host) {
    OK(rshmem_host_putmem_on_stream(buf, src, sizeof src, next, NULL));
    OK(rshmem_host_barrier_all_on_stream(NULL));
    OK(rshmem_host_getmem(back, buf, sizeof back, me));
    CHECK(back[7] == 100 * prev + 7);
    OK(rshmem_host_reduce_on_stream(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_MAX, out, in, 4, RSHMEM_DTYPE_INT32, NULL));
    CHECK(out[0] == npes - 1);
    for (int p = 0; p < npes; p++) out[4 * p] = 10 * p + me;
    OK(rshmem_host_reducescatter_on_stream(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_MIN, part, out, 4, RSHMEM_DTYPE_INT32, NULL));
    CHECK(part[0] == 10 * me);
  }

  /* teams: the even PEs */
  rshmem_team_t even;
  OK(rshmem_host_team_split_strided(RSHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, &even));
  int32_t tme;
  if (me % 2 == 0) {
    OK(rshmem_host_team_my_pe(even, &tme));
    CHECK(tme == me / 2);
    OK(rshmem_host_barrier(even));
    OK(rshmem_host_team_destroy(even));
  } else {
    CHECK(even == RSHMEM_TEAM_INVALID);
  }

  /* the heap */
  size_t in_use;
  OK(rshmem_host_heap_in_use(&in_use));
  CHECK(in_use > 0);
  void *peer;
  OK(rshmem_host_ptr(dest, next, &peer));
  CHECK(peer != NULL); /* one host: every PE's memory is mapped here */
  OK(rshmem_host_free(dest));
  EXPECT(RSHMEM_ERROR_NOT_SYMMETRIC, rshmem_host_int32_p(dest, 1, next)); /* freed */
  OK(rshmem_host_free(buf));
  OK(rshmem_host_free(counter));
  OK(rshmem_host_free(sig));
  OK(rshmem_host_free(flags));
  OK(rshmem_host_free(in));
  OK(rshmem_host_free(out));

  forked_child();
  OK(rshmem_host_finalize());
  EXPECT(RSHMEM_ERROR_NOT_INITIALIZED, rshmem_host_barrier_all());
  EXPECT(RSHMEM_ERROR_NOT_INITIALIZED, rshmem_host_int32_p(dest, 1, 0));
  OK(rshmem_host_finalize());
  printf("PE %d: %d checks passed\n", me, checks);
  return 0;
}
