/* CHECK(cond, fmt, ...): the C test programs' assertion. A false condition prints the PE, the
 * place, the condition and the message, and exits 1; `checks` counts the ones that held. */
#ifndef RSHMEM_TESTS_CHECK_H
#define RSHMEM_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <nvshmem.h>

static int checks = 0;

#define CHECK(cond, ...)                                                                            \
  do {                                                                                              \
    if (!(cond)) {                                                                                  \
      fprintf(stderr, "PE %d: %s:%d: %s is false: ", nvshmem_my_pe(), __FILE__, __LINE__, #cond);   \
      fprintf(stderr, __VA_ARGS__);                                                                 \
      fprintf(stderr, "\n");                                                                        \
      exit(1);                                                                                      \
    }                                                                                               \
    checks++;                                                                                       \
  } while (0)

#endif /* RSHMEM_TESTS_CHECK_H */
