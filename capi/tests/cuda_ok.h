// CUDA_OK(call): the test programs' check of a CUDA runtime call; a failure names the call, the
// file and line and CUDA's message, and exits 1.
#ifndef RSHMEM_TESTS_CUDA_OK_H
#define RSHMEM_TESTS_CUDA_OK_H

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

#endif  // RSHMEM_TESTS_CUDA_OK_H
