// What every example shares: stop with a message on a failed CUDA or rshmem call.
#ifndef RSHMEM_EXAMPLES_COMMON_CUH
#define RSHMEM_EXAMPLES_COMMON_CUH

#include <cstdio>
#include <cstdlib>

#include <rshmem_cuda.h>

#define CUDA_OK(call)                                                                             \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define RSHMEM_OK(call)                                                                            \
  do {                                                                                             \
    rshmem_status_t s_ = (call);                                                                   \
    if (s_ != RSHMEM_SUCCESS) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,                      \
                   rshmem_host_status_name(s_), rshmem_host_last_error());                         \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

// The PE's number and count after init.
struct Pes {
  int me = -1, n = 0;
};
inline Pes pes() {
  Pes p;
  RSHMEM_OK(rshmem_host_my_pe(&p.me));
  RSHMEM_OK(rshmem_host_n_pes(&p.n));
  return p;
}

template <typename T>
T *symmetric(size_t count) {
  void *p = nullptr;
  RSHMEM_OK(rshmem_host_calloc(count, sizeof(T), &p));
  return static_cast<T *>(p);
}

#endif
