/* Every variant of the runtime's error (rshmem::Error) returns its documented status code in C.
   The table below is the contract (docs/errors.md, docs/c-api.md) written out by hand: the
   library lists its variants (rshmem_host_error_variant) and names the code each one returns
   (rshmem_host_error_status, the mapping every C function goes through). A variant that returns
   another code, a variant this table does not know, or a row whose variant is gone fails the
   program. One process, no init needed. Prints "N checks passed" and exits 0, or names the
   first failed check and exits 1. */
#include <rshmem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks = 0;

#define FAIL(...)                                  \
  do {                                             \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                  \
    fprintf(stderr, "\n");                         \
    exit(1);                                       \
  } while (0)
#define CHECK(cond)                          \
  do {                                       \
    if (!(cond)) FAIL("%s is false", #cond); \
    checks++;                                \
  } while (0)

struct documented {
  const char *variant;
  rshmem_status_t status;
  const char *status_name;
};

#define ROW(variant, code) {variant, code, #code}
static const struct documented DOCUMENTED[] = {
    ROW("NotInitialized", RSHMEM_ERROR_NOT_INITIALIZED),
    ROW("ForkedChild", RSHMEM_ERROR_NOT_INITIALIZED),
    ROW("AlreadyInitialized", RSHMEM_ERROR_ALREADY_INITIALIZED),
    ROW("PeOutOfRange", RSHMEM_ERROR_PE_OUT_OF_RANGE),
    ROW("NotSymmetric", RSHMEM_ERROR_NOT_SYMMETRIC),
    ROW("NotAllocated", RSHMEM_ERROR_NOT_SYMMETRIC),
    ROW("HeapExhausted", RSHMEM_ERROR_HEAP_EXHAUSTED),
    ROW("Mismatch", RSHMEM_ERROR_MISMATCH),
    ROW("PeerDied", RSHMEM_ERROR_PEER_DIED),
    ROW("PeerExited", RSHMEM_ERROR_PEER_DIED),
    ROW("Timeout", RSHMEM_ERROR_TIMEOUT),
    ROW("Refused", RSHMEM_ERROR_REFUSED),
    ROW("InvalidArgument", RSHMEM_ERROR_INVALID_ARGUMENT),
    ROW("Config", RSHMEM_ERROR_CONFIG),
    ROW("Unsupported", RSHMEM_ERROR_UNSUPPORTED),
    ROW("Os", RSHMEM_ERROR_OS),
    ROW("Driver", RSHMEM_ERROR_DRIVER),
    ROW("Transport", RSHMEM_ERROR_TRANSPORT),
    ROW("Interrupted", RSHMEM_ERROR_INTERRUPTED),
    ROW("WaitTimeout", RSHMEM_ERROR_TIMEOUT),
};
#define N_DOCUMENTED ((int)(sizeof DOCUMENTED / sizeof DOCUMENTED[0]))

int main(void) {
  int seen[N_DOCUMENTED] = {0};
  int n = 0;
  for (const char *variant; (variant = rshmem_host_error_variant(n)) != NULL; n++) {
    int row = -1;
    for (int i = 0; i < N_DOCUMENTED; i++)
      if (strcmp(DOCUMENTED[i].variant, variant) == 0) row = i;
    if (row < 0) FAIL("the runtime's error has a variant %s this test does not document: add its row", variant);
    seen[row]++;
    rshmem_status_t got = -1;
    rshmem_status_t rc = rshmem_host_error_status(variant, &got);
    if (rc != RSHMEM_SUCCESS) FAIL("rshmem_host_error_status(\"%s\") returned %d: %s", variant, rc, rshmem_host_last_error());
    if (got != DOCUMENTED[row].status)
      FAIL("Error::%s returns %s (%d) in C, documented as %s (%d)", variant, rshmem_host_status_name(got), got,
           DOCUMENTED[row].status_name, DOCUMENTED[row].status);
    checks++;
    /* No runtime error is success, nor the C layer's own codes (a panic, finalize while busy). */
    CHECK(got != RSHMEM_SUCCESS && got != RSHMEM_ERROR_INTERNAL && got != RSHMEM_ERROR_BUSY);
    CHECK(strcmp(rshmem_host_status_name(got), DOCUMENTED[row].status_name) == 0);
  }
  for (int i = 0; i < N_DOCUMENTED; i++)
    if (seen[i] != 1)
      FAIL("variant %s is listed %d times by rshmem_host_error_variant (documented once)", DOCUMENTED[i].variant, seen[i]);
  CHECK(n == N_DOCUMENTED);
  CHECK(rshmem_host_error_variant(-1) == NULL);

  /* The names are the real path's: a call before init returns what NotInitialized names. */
  rshmem_status_t not_init = -1;
  CHECK(rshmem_host_error_status("NotInitialized", &not_init) == RSHMEM_SUCCESS);
  int pe;
  CHECK(rshmem_host_my_pe(&pe) == not_init);

  /* Bad input: an unknown name or NULL is an argument error with a message, never a crash. */
  rshmem_status_t out = 1234;
  CHECK(rshmem_host_error_status("NoSuchVariant", &out) == RSHMEM_ERROR_INVALID_ARGUMENT);
  CHECK(out == 1234);
  CHECK(strstr(rshmem_host_last_error(), "NoSuchVariant") != NULL);
  CHECK(strstr(rshmem_host_last_error(), "Transport") != NULL); /* lists the known ones */
  CHECK(rshmem_host_error_status(NULL, &out) == RSHMEM_ERROR_INVALID_ARGUMENT);
  CHECK(rshmem_host_error_status("Transport", NULL) == RSHMEM_ERROR_INVALID_ARGUMENT);

  printf("error_codes: %d checks passed (%d variants)\n", checks, n);
  return 0;
}
