/* NVSHMEM source compatibility: an NVSHMEM program builds against rshmem by changing its include
   path and link line only (docs/c.md, "NVSHMEM programs"):
     nvcc -std=c++17 -arch=sm_90 $(pkg-config --cflags rshmem) prog.cu $(pkg-config --libs rshmem)
   The nvshmem_* / nvshmemx_* names, types and constants below map to rshmem's host API (rshmem.h)
   and, in CUDA device code, to its device API (rshmem_cuda.h). A host call that fails prints
   rshmem's message and exits the process (NVSHMEM stops the job on such errors too); allocation
   returns NULL with the message printed, as nvshmem_malloc does. docs/c.md lists what is not
   mapped and why. Include mpi.h before this header to use NVSHMEMX_INIT_WITH_MPI_COMM. */
#ifndef RSHMEM_NVSHMEM_H
#define RSHMEM_NVSHMEM_H

#include <assert.h> /* NVSHMEM's headers bring these in; programs use them without including */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVSHMEM's half and bfloat16 are CUDA's types (cuda_fp16.h, cuda_bf16.h), whose headers NVSHMEM
   always includes. Here they are mapped (nvshmem_half_sum_reduce, nvshmem_bfloat16_p, ...) where
   those headers are found: in CUDA code, and in a host program compiled with CUDA's include
   directory; a C program without them has every other type. In C, CUDA declares only the raw
   16-bit structs, so half is __half_raw and __nv_bfloat16 is __nv_bfloat16_raw, as in NVSHMEM's
   C API. RSHMEM_NVSHMEM_HALF is 1 where they are mapped, 0 elsewhere. */
#if defined(__CUDACC__)
#define RSHMEM_NVSHMEM_HALF 1
#elif defined(__has_include)
/* crt/host_defines.h too: some include directories (the CUDA runtime's PyPI wheel) have
   cuda_fp16.h without the headers it includes. */
#if __has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>) && __has_include(<crt/host_defines.h>)
#define RSHMEM_NVSHMEM_HALF 1
#endif
#endif
#if defined(RSHMEM_NVSHMEM_HALF)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#if !defined(__cplusplus)
typedef __half_raw half;
typedef __nv_bfloat16_raw __nv_bfloat16;
#endif
/* rshmem.h's type list reaches the 16-bit floats through this switch. */
#define RSHMEMI_COMPAT_HALF_TYPES(X) RSHMEMI_COMPAT_HALF_TYPE_LIST(X)
#else
#define RSHMEM_NVSHMEM_HALF 0
#define RSHMEMI_COMPAT_HALF_TYPES(X)
#endif

#include "rshmem.h"
#include "nvshmem_generated.h"
#if defined(__CUDACC__)
#include "rshmem_cuda.h"
#define RSHMEMI_COMPAT_HD __host__ __device__ static inline
#define RSHMEMI_COMPAT_D __device__ static inline
#else
#define RSHMEMI_COMPAT_HD static inline
#endif
#if defined(MPI_VERSION)
#include "rshmem_mpi.h"
#endif

/* ------------------------------------------------------------------ constants and types */
#define NVSHMEM_SUCCESS 0
/* As NVSHMEM defines them: the OpenSHMEM specification version of the API (what
   nvshmem_info_get_version gives), and the NVSHMEM release whose names these headers follow
   (programs test NVSHMEM_VENDOR_* to pick APIs); the vendor string names rshmem. */
#define NVSHMEM_MAJOR_VERSION 1
#define NVSHMEM_MINOR_VERSION 3
#define NVSHMEM_VENDOR_MAJOR_VERSION 3
#define NVSHMEM_VENDOR_MINOR_VERSION 4
#define NVSHMEM_VENDOR_PATCH_VERSION 5
#define NVSHMEM_VENDOR_VERSION \
  ((NVSHMEM_VENDOR_MAJOR_VERSION) * 10000 + (NVSHMEM_VENDOR_MINOR_VERSION) * 100 + (NVSHMEM_VENDOR_PATCH_VERSION))
#define NVSHMEM_VENDOR_STRING "rshmem (NVSHMEM 3.4.5 API)"
#define NVSHMEM_MAX_NAME_LEN 256
/* Thread levels: rshmem's host calls may come from any thread, but (as NVSHMEM, which provides
   SERIALIZED whatever is asked) rshmem promises only calls that do not overlap. */
enum { NVSHMEM_THREAD_SINGLE = 0, NVSHMEM_THREAD_FUNNELED, NVSHMEM_THREAD_SERIALIZED, NVSHMEM_THREAD_MULTIPLE };
/* NVSHMEM's status codes of the nvshmemx_* calls that return one. */
enum nvshmemx_status {
  NVSHMEMX_SUCCESS = 0,
  NVSHMEMX_ERROR_INVALID_VALUE,
  NVSHMEMX_ERROR_OUT_OF_MEMORY,
  NVSHMEMX_ERROR_NOT_SUPPORTED,
  NVSHMEMX_ERROR_SYMMETRY,
  NVSHMEMX_ERROR_GPU_NOT_SELECTED,
  NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED,
  NVSHMEMX_ERROR_INTERNAL,
  NVSHMEMX_ERROR_SENTINEL = INT_MAX
};
#define NVSHMEM_CMP_EQ RSHMEM_CMP_EQ
#define NVSHMEM_CMP_NE RSHMEM_CMP_NE
#define NVSHMEM_CMP_GT RSHMEM_CMP_GT
#define NVSHMEM_CMP_LE RSHMEM_CMP_LE
#define NVSHMEM_CMP_LT RSHMEM_CMP_LT
#define NVSHMEM_CMP_GE RSHMEM_CMP_GE
#define NVSHMEM_SIGNAL_SET RSHMEM_SIGNAL_SET
#define NVSHMEM_SIGNAL_ADD RSHMEM_SIGNAL_ADD
typedef int32_t nvshmem_team_t;
#define NVSHMEM_TEAM_INVALID RSHMEM_TEAM_INVALID
#define NVSHMEM_TEAM_WORLD RSHMEM_TEAM_WORLD
#define NVSHMEM_TEAM_SHARED RSHMEM_TEAM_SHARED
#define NVSHMEMX_TEAM_NODE RSHMEM_TEAM_NODE
#define NVSHMEMX_TEAM_SAME_MYPE_NODE RSHMEM_TEAM_SAME_MYPE_NODE
/* NVSHMEM 1.0's active-set collectives take pSync / pWrk arrays; rshmem keeps its own workspace
   and ignores them, so one element each is enough. */
#define NVSHMEM_SYNC_VALUE 0
#define NVSHMEM_REDUCE_SYNC_SIZE 1
#define NVSHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define NVSHMEM_COLLECT_SYNC_SIZE 1
#define NVSHMEM_BCAST_SYNC_SIZE 1
#define NVSHMEM_ALLTOALL_SYNC_SIZE 1
#define NVSHMEM_BARRIER_SYNC_SIZE 1

/* Team configuration (accepted and ignored: rshmem's teams have no per-team contexts). */
typedef struct {
  int version;
  int num_contexts;
  uint64_t uniqueid;
  char padding[48];
} nvshmem_team_config_t;
#define NVSHMEM_TEAM_NUM_CONTEXTS 1
#define NVSHMEMX_TEAM_UNIQUEID 2

/* nvshmemx_init_attr's flags, NVSHMEM's values. */
#define NVSHMEMX_INIT_THREAD_PES 1
#define NVSHMEMX_INIT_WITH_MPI_COMM (1 << 1)
#define NVSHMEMX_INIT_WITH_SHMEM (1 << 2)
#define NVSHMEMX_INIT_WITH_UNIQUEID (1 << 3)
/* The unique id is rshmem's (RSHMEM_UNIQUE_ID_BYTES bytes): share it as bytes, as NVSHMEM's. */
typedef rshmem_uniqueid_t nvshmemx_uniqueid_t;
#define NVSHMEMX_UNIQUEID_INITIALIZER {{0}}
typedef struct {
  int version;
  const nvshmemx_uniqueid_t *id;
  int myrank;
  int nranks;
} nvshmemx_uniqueid_args_t;
#define NVSHMEMX_UNIQUEID_ARGS_INITIALIZER {1, NULL, -1, -1}
typedef struct {
  int version;
  nvshmemx_uniqueid_args_t uid_args;
} nvshmemx_init_args_t;
/* NVSHMEM's layout in names (mpi_comm, args.uid_args): set them with the helpers below or directly. */
typedef struct {
  int version;
  void *mpi_comm; /* an MPI_Comm *: NVSHMEMX_INIT_WITH_MPI_COMM */
  nvshmemx_init_args_t args;
} nvshmemx_init_attr_t;
#define NVSHMEMX_INIT_ATTR_INITIALIZER {1, NULL, {1, NVSHMEMX_UNIQUEID_ARGS_INITIALIZER}}

/* ------------------------------------------------------------------ host-side errors */
static inline void rshmemi_compat_fail(const char *call) {
  fprintf(stderr, "%s (rshmem): %s\n", call, rshmem_host_last_error());
  exit(EXIT_FAILURE);
}
#define RSHMEMI_COMPAT_CHECK(call, expr)                          \
  do {                                                            \
    if ((expr) != RSHMEM_SUCCESS) rshmemi_compat_fail(call);      \
  } while (0)

/* ------------------------------------------------------------------ setup */
static inline void nvshmem_init(void) {
#if defined(__CUDACC__)
  RSHMEMI_COMPAT_CHECK("nvshmem_init", rshmemx_cuda_init_attr(NULL));
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_init", rshmem_host_init(NULL));
#endif
}
static inline void rshmemi_compat_init_fail(const char *why) {
  fprintf(stderr, "nvshmemx_init_attr (rshmem): %s\n", why);
  exit(EXIT_FAILURE);
}
/* NVSHMEMX_INIT_WITH_UNIQUEID: the id one PE made (nvshmemx_get_uniqueid) and this PE's rank
   among nranks, from nvshmemx_set_attr_uniqueid_args; NVSHMEMX_INIT_WITH_MPI_COMM: attr->mpi_comm
   (mpi.h included before this header); no flag: the launcher's environment (nvshmem_init). */
static inline int nvshmemx_init_attr(unsigned int flags, nvshmemx_init_attr_t *attr) {
  if (flags & NVSHMEMX_INIT_WITH_SHMEM)
    rshmemi_compat_init_fail("NVSHMEMX_INIT_WITH_SHMEM: rshmem has no OpenSHMEM bootstrap; use the "
                             "launcher's environment, a unique id or MPI (docs/c.md)");
  if ((flags & NVSHMEMX_INIT_WITH_UNIQUEID) && (flags & NVSHMEMX_INIT_WITH_MPI_COMM))
    rshmemi_compat_init_fail("NVSHMEMX_INIT_WITH_UNIQUEID and NVSHMEMX_INIT_WITH_MPI_COMM together: pass one");
  if (flags & NVSHMEMX_INIT_WITH_UNIQUEID) {
    if (attr == NULL || attr->args.uid_args.id == NULL)
      rshmemi_compat_init_fail("NVSHMEMX_INIT_WITH_UNIQUEID needs the id, rank and nranks in attr "
                               "(nvshmemx_set_attr_uniqueid_args)");
    rshmem_init_attr_t a = RSHMEM_INIT_ATTR_INITIALIZER;
    a.uid = attr->args.uid_args.id;
    a.rank = attr->args.uid_args.myrank;
    a.nranks = attr->args.uid_args.nranks;
#if defined(__CUDACC__)
    RSHMEMI_COMPAT_CHECK("nvshmemx_init_attr", rshmemx_cuda_init_attr(&a));
#else
    RSHMEMI_COMPAT_CHECK("nvshmemx_init_attr", rshmem_host_init(&a));
#endif
    return NVSHMEMX_SUCCESS;
  }
  if (flags & NVSHMEMX_INIT_WITH_MPI_COMM) {
#if defined(MPI_VERSION)
    if (attr == NULL || attr->mpi_comm == NULL)
      rshmemi_compat_init_fail("NVSHMEMX_INIT_WITH_MPI_COMM needs attr->mpi_comm");
    RSHMEMI_COMPAT_CHECK("nvshmemx_init_attr", rshmem_mpi_init(*(MPI_Comm *)attr->mpi_comm));
#if defined(__CUDACC__)
    RSHMEMI_COMPAT_CHECK("nvshmemx_init_attr", rshmemx_cuda_init_state());
#endif
    return NVSHMEMX_SUCCESS;
#else
    rshmemi_compat_init_fail("NVSHMEMX_INIT_WITH_MPI_COMM needs mpi.h included before nvshmem.h");
#endif
  }
  nvshmem_init();
  return NVSHMEMX_SUCCESS;
}
static inline int nvshmemx_set_attr_uniqueid_args(const int myrank, const int nranks, const nvshmemx_uniqueid_t *uniqueid,
                                                  nvshmemx_init_attr_t *attr) {
  if (attr == NULL || uniqueid == NULL) return NVSHMEMX_ERROR_INVALID_VALUE;
  attr->args.uid_args.id = uniqueid;
  attr->args.uid_args.myrank = myrank;
  attr->args.uid_args.nranks = nranks;
  return NVSHMEMX_SUCCESS;
}
static inline int nvshmemx_set_attr_mpi_comm_args(void *mpi_comm, nvshmemx_init_attr_t *attr) {
  if (attr == NULL) return NVSHMEMX_ERROR_INVALID_VALUE;
  attr->mpi_comm = mpi_comm;
  return NVSHMEMX_SUCCESS;
}
/* NVSHMEM's provided level is SERIALIZED whatever is asked; so is rshmem's (see above). */
static inline int nvshmem_init_thread(int requested, int *provided) {
  if (requested < NVSHMEM_THREAD_SINGLE || requested > NVSHMEM_THREAD_MULTIPLE) {
    fprintf(stderr, "nvshmem_init_thread (rshmem): %d is no thread level (NVSHMEM_THREAD_SINGLE .. MULTIPLE)\n",
            requested);
    exit(EXIT_FAILURE);
  }
  nvshmem_init();
  if (provided != NULL) *provided = NVSHMEM_THREAD_SERIALIZED;
  return NVSHMEMX_SUCCESS;
}
static inline void nvshmem_query_thread(int *provided) {
  if (provided != NULL) *provided = NVSHMEM_THREAD_SERIALIZED;
}
static inline void nvshmem_finalize(void) { RSHMEMI_COMPAT_CHECK("nvshmem_finalize", rshmem_host_finalize()); }
static inline int nvshmemx_init_status(void) {
  int up = 0;
  rshmem_host_is_initialized(&up);
  return up ? 2 : 0; /* NVSHMEM_STATUS_IS_INITIALIZED : NVSHMEM_STATUS_NOT_INITIALIZED */
}
static inline int nvshmemx_get_uniqueid(nvshmemx_uniqueid_t *id) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_get_uniqueid", rshmem_host_get_unique_id(id));
  return NVSHMEMX_SUCCESS;
}
/* Every PE of the job exits with `status` (in kernels: the kernel traps, and the host's next call
   reports it; rshmem has no device-initiated exit). */
RSHMEMI_COMPAT_HD void nvshmem_global_exit(int status) {
#if defined(__CUDA_ARCH__)
  (void)status;
  __trap();
#else
  fflush(NULL);
  RSHMEMI_COMPAT_CHECK("nvshmem_global_exit", rshmem_host_global_exit(status));
#endif
}
RSHMEMI_COMPAT_HD void nvshmem_info_get_version(int *major, int *minor) {
  *major = NVSHMEM_MAJOR_VERSION;
  *minor = NVSHMEM_MINOR_VERSION;
}
RSHMEMI_COMPAT_HD void nvshmemx_vendor_get_version(int *major, int *minor, int *patch) {
  *major = NVSHMEM_VENDOR_MAJOR_VERSION;
  *minor = NVSHMEM_VENDOR_MINOR_VERSION;
  *patch = NVSHMEM_VENDOR_PATCH_VERSION;
}
/* Writes at most NVSHMEM_MAX_NAME_LEN bytes, the terminating NUL included. */
RSHMEMI_COMPAT_HD void nvshmem_info_get_name(char *name) {
  const char *vendor = NVSHMEM_VENDOR_STRING;
  int i = 0;
  for (; i < NVSHMEM_MAX_NAME_LEN - 1 && vendor[i] != '\0'; i++) name[i] = vendor[i];
  name[i] = '\0';
}
/* Writes the device state into a module the program loaded with the driver API. */
static inline int nvshmemx_cumodule_init(void *module) {
  int done = 0;
  return rshmem_host_device_init_module(module, &done);
}
static inline int nvshmemx_cumodule_finalize(void *module) {
  int known = 0;
  return rshmem_host_device_forget_module(module, &known);
}

/* NVSHMEM's host-library-only start and stop: the same here (rshmem's host library is the one). */
static inline int nvshmemx_hostlib_init_attr(unsigned int flags, nvshmemx_init_attr_t *attr) {
  return nvshmemx_init_attr(flags, attr);
}
static inline void nvshmemx_hostlib_finalize(void) { nvshmem_finalize(); }
/* NVSHMEM registers a local buffer with the network transports, so that puts and gets can take
   it as their local side without staging. rshmem's calls take any local buffer as it is (the
   transport stages or registers what it needs), so registering succeeds with nothing to do;
   NULL or an empty range is NVSHMEMX_ERROR_INVALID_VALUE, as in NVSHMEM. */
static inline int nvshmemx_buffer_register(void *addr, size_t length) {
  return addr != NULL && length > 0 ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INVALID_VALUE;
}
static inline int nvshmemx_buffer_unregister(void *addr) {
  return addr != NULL ? NVSHMEMX_SUCCESS : NVSHMEMX_ERROR_INVALID_VALUE;
}
static inline void nvshmemx_buffer_unregister_all(void) {}

/* ------------------------------------------------------------------ queries (host and device) */
RSHMEMI_COMPAT_HD int nvshmem_my_pe(void) {
#if defined(__CUDA_ARCH__)
  return rshmem_my_pe();
#else
  int v = -1;
  RSHMEMI_COMPAT_CHECK("nvshmem_my_pe", rshmem_host_my_pe(&v));
  return v;
#endif
}
RSHMEMI_COMPAT_HD int nvshmem_n_pes(void) {
#if defined(__CUDA_ARCH__)
  return rshmem_n_pes();
#else
  int v = -1;
  RSHMEMI_COMPAT_CHECK("nvshmem_n_pes", rshmem_host_n_pes(&v));
  return v;
#endif
}
RSHMEMI_COMPAT_HD int nvshmem_team_my_pe(nvshmem_team_t team) {
#if defined(__CUDA_ARCH__)
  return rshmem_team_my_pe(team);
#else
  int32_t v = -1;
  RSHMEMI_COMPAT_CHECK("nvshmem_team_my_pe", rshmem_host_team_my_pe(team, &v));
  return v;
#endif
}
RSHMEMI_COMPAT_HD int nvshmem_team_n_pes(nvshmem_team_t team) {
#if defined(__CUDA_ARCH__)
  return rshmem_team_n_pes(team);
#else
  int32_t v = -1;
  RSHMEMI_COMPAT_CHECK("nvshmem_team_n_pes", rshmem_host_team_n_pes(team, &v));
  return v;
#endif
}
RSHMEMI_COMPAT_HD int nvshmem_team_translate_pe(nvshmem_team_t src_team, int src_pe, nvshmem_team_t dest_team) {
#if defined(__CUDA_ARCH__)
  return rshmem_team_translate_pe(src_team, src_pe, dest_team);
#else
  int32_t v = -1;
  RSHMEMI_COMPAT_CHECK("nvshmem_team_translate_pe", rshmem_host_team_translate_pe(src_team, src_pe, dest_team, &v));
  return v;
#endif
}
/* NVSHMEM 1.0 spelled the team queries nvshmemx_my_pe / nvshmemx_n_pes. */
#define nvshmemx_my_pe(team) nvshmem_team_my_pe(team)
#define nvshmemx_n_pes(team) nvshmem_team_n_pes(team)

/* ------------------------------------------------------------------ memory (host) */
static inline void *nvshmem_malloc(size_t size) {
  void *p = NULL;
  if (rshmem_host_malloc(size, &p) != RSHMEM_SUCCESS) fprintf(stderr, "nvshmem_malloc (rshmem): %s\n", rshmem_host_last_error());
  return p;
}
static inline void *nvshmem_calloc(size_t count, size_t size) {
  void *p = NULL;
  if (rshmem_host_calloc(count, size, &p) != RSHMEM_SUCCESS) fprintf(stderr, "nvshmem_calloc (rshmem): %s\n", rshmem_host_last_error());
  return p;
}
static inline void *nvshmem_align(size_t alignment, size_t size) {
  void *p = NULL;
  if (rshmem_host_align(alignment, size, &p) != RSHMEM_SUCCESS) fprintf(stderr, "nvshmem_align (rshmem): %s\n", rshmem_host_last_error());
  return p;
}
static inline void nvshmem_free(void *p) {
  if (p != NULL) RSHMEMI_COMPAT_CHECK("nvshmem_free", rshmem_host_free(p));
}
RSHMEMI_COMPAT_HD void *nvshmem_ptr(const void *p, int pe) {
#if defined(__CUDA_ARCH__)
  return rshmem_ptr(p, pe);
#else
  void *out = NULL;
  RSHMEMI_COMPAT_CHECK("nvshmem_ptr", rshmem_host_ptr(p, pe, &out));
  return out;
#endif
}

/* ------------------------------------------------------------------ ordering and barriers */
RSHMEMI_COMPAT_HD void nvshmem_fence(void) {
#if defined(__CUDA_ARCH__)
  rshmem_fence();
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_fence", rshmem_host_fence());
#endif
}
RSHMEMI_COMPAT_HD void nvshmem_quiet(void) {
#if defined(__CUDA_ARCH__)
  rshmem_quiet();
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_quiet", rshmem_host_quiet());
#endif
}
RSHMEMI_COMPAT_HD void nvshmem_barrier_all(void) {
#if defined(__CUDA_ARCH__)
  rshmem_barrier_all();
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_barrier_all", rshmem_host_barrier_all());
#endif
}
RSHMEMI_COMPAT_HD void nvshmem_sync_all(void) {
#if defined(__CUDA_ARCH__)
  rshmem_sync_all();
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_sync_all", rshmem_host_sync_all());
#endif
}
RSHMEMI_COMPAT_HD int nvshmem_barrier(nvshmem_team_t team) {
#if defined(__CUDA_ARCH__)
  return rshmem_barrier(team);
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_barrier", rshmem_host_barrier(team));
  return 0;
#endif
}
RSHMEMI_COMPAT_HD int nvshmem_team_sync(nvshmem_team_t team) {
#if defined(__CUDA_ARCH__)
  return rshmem_team_sync(team);
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_team_sync", rshmem_host_sync(team));
  return 0;
#endif
}
/* NVSHMEM_TEAM_INVALID (what a split gives the PEs it leaves out): the queries above give -1,
   destroy does nothing, a split of it gives NVSHMEM_TEAM_INVALID and returns nonzero, as NVSHMEM.
   The configurations are accepted and ignored (no per-team contexts). */
static inline int nvshmem_team_split_strided(nvshmem_team_t parent, int start, int stride, int size,
                                             const nvshmem_team_config_t *config, long config_mask, nvshmem_team_t *team) {
  (void)config;
  (void)config_mask;
  if (parent == NVSHMEM_TEAM_INVALID) {
    *team = NVSHMEM_TEAM_INVALID;
    return 1;
  }
  return rshmem_host_team_split_strided(parent, start, stride, size, team);
}
static inline int nvshmem_team_split_2d(nvshmem_team_t parent, int xrange, const nvshmem_team_config_t *xaxis_config,
                                        long xaxis_mask, nvshmem_team_t *xaxis_team,
                                        const nvshmem_team_config_t *yaxis_config, long yaxis_mask,
                                        nvshmem_team_t *yaxis_team) {
  (void)xaxis_config;
  (void)xaxis_mask;
  (void)yaxis_config;
  (void)yaxis_mask;
  if (parent == NVSHMEM_TEAM_INVALID) {
    *xaxis_team = NVSHMEM_TEAM_INVALID;
    *yaxis_team = NVSHMEM_TEAM_INVALID;
    return 1;
  }
  return rshmem_host_team_split_2d(parent, xrange, xaxis_team, yaxis_team);
}
static inline void nvshmem_team_get_config(nvshmem_team_t team, nvshmem_team_config_t *config) {
  if (team == NVSHMEM_TEAM_INVALID || config == NULL) return;
  memset(config, 0, sizeof *config);
  config->version = 1;
  config->num_contexts = 0;
}
static inline void nvshmem_team_destroy(nvshmem_team_t team) {
  RSHMEMI_COMPAT_CHECK("nvshmem_team_destroy", rshmem_host_team_destroy(team));
}

/* ------------------------------------------------------------------ RMA */
RSHMEMI_COMPAT_HD void nvshmem_putmem(void *dest, const void *source, size_t nbytes, int pe) {
#if defined(__CUDA_ARCH__)
  rshmem_putmem(dest, source, nbytes, pe);
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_putmem", rshmem_host_putmem(dest, source, nbytes, pe));
#endif
}
RSHMEMI_COMPAT_HD void nvshmem_getmem(void *dest, const void *source, size_t nbytes, int pe) {
#if defined(__CUDA_ARCH__)
  rshmem_getmem(dest, source, nbytes, pe);
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_getmem", rshmem_host_getmem(dest, source, nbytes, pe));
#endif
}
/* The host's puts and gets complete on return, so their nbi forms are the same calls. */
#define nvshmem_putmem_nbi nvshmem_putmem
#define nvshmem_getmem_nbi nvshmem_getmem

/* RSHMEMI_COMPAT_TYPES(X): NVSHMEM's type names, generated into rshmem.h from api/dtypes.toml. */

/* The element-typed pointers go through the device API's fixed-width types. */
#define RSHMEMI_COMPAT_HOST_TYPED(NAME, T, R)                                                     \
  RSHMEMI_COMPAT_HD void nvshmem_##NAME##_p(T *dest, T value, int pe) {                           \
    RSHMEMI_COMPAT_P_BODY(NAME, T, R)                                                             \
  }                                                                                               \
  RSHMEMI_COMPAT_HD T nvshmem_##NAME##_g(const T *source, int pe) { RSHMEMI_COMPAT_G_BODY(NAME, T, R) } \
  RSHMEMI_COMPAT_HD void nvshmem_##NAME##_put(T *dest, const T *source, size_t nelems, int pe) {  \
    nvshmem_putmem(dest, source, nelems * sizeof(T), pe);                                         \
  }                                                                                               \
  RSHMEMI_COMPAT_HD void nvshmem_##NAME##_get(T *dest, const T *source, size_t nelems, int pe) {  \
    nvshmem_getmem(dest, source, nelems * sizeof(T), pe);                                         \
  }                                                                                               \
  RSHMEMI_COMPAT_HD void nvshmem_##NAME##_put_nbi(T *dest, const T *source, size_t nelems, int pe) { \
    nvshmem_putmem(dest, source, nelems * sizeof(T), pe);                                         \
  }                                                                                               \
  RSHMEMI_COMPAT_HD void nvshmem_##NAME##_get_nbi(T *dest, const T *source, size_t nelems, int pe) { \
    nvshmem_getmem(dest, source, nelems * sizeof(T), pe);                                         \
  }
#if defined(__CUDA_ARCH__)
#define RSHMEMI_COMPAT_P_BODY(NAME, T, R) rshmem_##R##_p((R##_t *)dest, (R##_t)value, pe);
#define RSHMEMI_COMPAT_G_BODY(NAME, T, R) return (T)rshmem_##R##_g((const R##_t *)source, pe);
#else
/* The value travels as its bits (T and the host type have one size): a cast would convert a half's
   value, and C has no conversion of CUDA's raw half structs at all. */
#define RSHMEMI_COMPAT_P_BODY(NAME, T, R)                                                          \
  RSHMEM_HOST_TYPE_##R bits;                                                                       \
  memcpy(&bits, &value, sizeof bits);                                                              \
  RSHMEMI_COMPAT_CHECK("nvshmem_" #NAME "_p", rshmem_host_##R##_p((RSHMEM_HOST_TYPE_##R *)dest, bits, pe));
#define RSHMEMI_COMPAT_G_BODY(NAME, T, R)                                                          \
  RSHMEM_HOST_TYPE_##R v = 0;                                                                      \
  T out;                                                                                           \
  RSHMEMI_COMPAT_CHECK("nvshmem_" #NAME "_g", rshmem_host_##R##_g((const RSHMEM_HOST_TYPE_##R *)source, pe, &v)); \
  memcpy((void *)&out, &v, sizeof out); /* void *: a C++ half is a class */                     \
  return out;
#endif
/* fp32_t / fp64_t (and fp16_t / bf16_t in CUDA code) for the device casts above (the host's C
   types come from rshmem.h). */
typedef float fp32_t;
typedef double fp64_t;
#if defined(__CUDACC__)
typedef rshmem_fp16_t fp16_t;
typedef rshmem_bf16_t bf16_t;
#endif
RSHMEMI_COMPAT_TYPES(RSHMEMI_COMPAT_HOST_TYPED)

/* Strided RMA: element i moves between dest[i * dst] and source[i * sst]. On the host one call
   (rshmem_host_iput / _iget: both spans checked first); in kernels a loop of element copies, as
   NVSHMEM's. */
#if defined(__CUDA_ARCH__)
#define RSHMEMI_COMPAT_STRIDED(CALL, HOST, DEV, BYTES)                                          \
  for (size_t i = 0; i < nelems; i++)                                                          \
    DEV((char *)dest + (ptrdiff_t)i * dst * (ptrdiff_t)(BYTES),                                \
        (const char *)source + (ptrdiff_t)i * sst * (ptrdiff_t)(BYTES), (BYTES), pe);
#else
#define RSHMEMI_COMPAT_STRIDED(CALL, HOST, DEV, BYTES) \
  RSHMEMI_COMPAT_CHECK(CALL, HOST(dest, source, dst, sst, nelems, (BYTES), pe));
#endif
#define RSHMEMI_COMPAT_TYPED_STRIDED(NAME, T, R)                                                           \
  RSHMEMI_COMPAT_HD void nvshmem_##NAME##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,     \
                                               size_t nelems, int pe) {                                   \
    RSHMEMI_COMPAT_STRIDED("nvshmem_" #NAME "_iput", rshmem_host_iput, rshmem_putmem, sizeof(T))                                   \
  }                                                                                                       \
  RSHMEMI_COMPAT_HD void nvshmem_##NAME##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,     \
                                               size_t nelems, int pe) {                                   \
    RSHMEMI_COMPAT_STRIDED("nvshmem_" #NAME "_iget", rshmem_host_iget, rshmem_getmem, sizeof(T))                                   \
  }
RSHMEMI_COMPAT_TYPES(RSHMEMI_COMPAT_TYPED_STRIDED)

/* Sized RMA (nvshmem_put32, nvshmem_iget64, ...): elements of BITS bits. */
#define RSHMEMI_COMPAT_SIZED(BITS)                                                                         \
  RSHMEMI_COMPAT_HD void nvshmem_put##BITS(void *dest, const void *source, size_t nelems, int pe) {        \
    nvshmem_putmem(dest, source, nelems * (BITS / 8), pe);                                                \
  }                                                                                                       \
  RSHMEMI_COMPAT_HD void nvshmem_get##BITS(void *dest, const void *source, size_t nelems, int pe) {        \
    nvshmem_getmem(dest, source, nelems * (BITS / 8), pe);                                                \
  }                                                                                                       \
  RSHMEMI_COMPAT_HD void nvshmem_put##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe) {  \
    nvshmem_putmem(dest, source, nelems * (BITS / 8), pe);                                                \
  }                                                                                                       \
  RSHMEMI_COMPAT_HD void nvshmem_get##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe) {  \
    nvshmem_getmem(dest, source, nelems * (BITS / 8), pe);                                                \
  }                                                                                                       \
  RSHMEMI_COMPAT_HD void nvshmem_iput##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,  \
                                            size_t nelems, int pe) {                                      \
    RSHMEMI_COMPAT_STRIDED("nvshmem_iput" #BITS, rshmem_host_iput, rshmem_putmem, BITS / 8)                                        \
  }                                                                                                       \
  RSHMEMI_COMPAT_HD void nvshmem_iget##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,  \
                                            size_t nelems, int pe) {                                      \
    RSHMEMI_COMPAT_STRIDED("nvshmem_iget" #BITS, rshmem_host_iget, rshmem_getmem, BITS / 8)                                        \
  }
RSHMEMI_COMPAT_SIZED(8)
RSHMEMI_COMPAT_SIZED(16)
RSHMEMI_COMPAT_SIZED(32)
RSHMEMI_COMPAT_SIZED(64)
RSHMEMI_COMPAT_SIZED(128)

/* ------------------------------------------------------------------ collectives (host and device) */
/* nvshmem_<type>_{broadcast,fcollect,alltoall,<op>_reduce}: blocking on the host, the device
   library's thread-scope collective in kernels (generated from the tables). */
RSHMEMI_COMPAT_HD_COLLECTIVES

/* ------------------------------------------------------------------ signals */
RSHMEMI_COMPAT_HD uint64_t nvshmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t value) {
#if defined(__CUDA_ARCH__)
  return rshmem_signal_wait_until(sig_addr, cmp, value);
#else
  uint64_t seen = 0;
  RSHMEMI_COMPAT_CHECK("nvshmem_signal_wait_until", rshmem_host_signal_wait_until(sig_addr, cmp, value, &seen));
  return seen;
#endif
}
RSHMEMI_COMPAT_HD uint64_t nvshmem_signal_fetch(uint64_t *sig_addr) {
#if defined(__CUDA_ARCH__)
  return rshmem_signal_fetch(sig_addr);
#else
  uint64_t v = 0;
  RSHMEMI_COMPAT_CHECK("nvshmem_signal_fetch", rshmem_host_signal_fetch(sig_addr, &v));
  return v;
#endif
}
RSHMEMI_COMPAT_HD void nvshmemx_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) {
#if defined(__CUDA_ARCH__)
  rshmemx_signal_op(sig_addr, signal, sig_op, pe);
#else
  RSHMEMI_COMPAT_CHECK("nvshmemx_signal_op", rshmem_host_signal_op(sig_addr, signal, sig_op, pe));
#endif
}
RSHMEMI_COMPAT_HD void nvshmem_putmem_signal(void *dest, const void *source, size_t nbytes, uint64_t *sig_addr,
                                             uint64_t signal, int sig_op, int pe) {
#if defined(__CUDA_ARCH__)
  rshmem_putmem_signal(dest, source, nbytes, sig_addr, signal, sig_op, pe);
#else
  RSHMEMI_COMPAT_CHECK("nvshmem_putmem_signal",
                       rshmem_host_putmem_signal(dest, source, nbytes, sig_addr, signal, sig_op, pe));
#endif
}
#define nvshmem_putmem_signal_nbi nvshmem_putmem_signal

/* ------------------------------------------------------------------ on-stream (host) */
#if defined(__CUDACC__) || defined(CUDART_VERSION)
#define RSHMEMI_COMPAT_STREAM(s) ((void *)(s))
static inline void nvshmemx_barrier_all_on_stream(cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_barrier_all_on_stream", rshmem_host_barrier_all_on_stream(RSHMEMI_COMPAT_STREAM(s)));
}
static inline void nvshmemx_sync_all_on_stream(cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_sync_all_on_stream", rshmem_host_barrier_all_on_stream(RSHMEMI_COMPAT_STREAM(s)));
}
static inline void nvshmemx_barrier_on_stream(nvshmem_team_t team, cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_barrier_on_stream", rshmem_host_barrier_on_stream(team, RSHMEMI_COMPAT_STREAM(s)));
}
/* A barrier is a valid sync: rshmem has no weaker on-stream one. */
static inline int nvshmemx_team_sync_on_stream(nvshmem_team_t team, cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_team_sync_on_stream", rshmem_host_barrier_on_stream(team, RSHMEMI_COMPAT_STREAM(s)));
  return 0;
}
static inline void nvshmemx_quiet_on_stream(cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_quiet_on_stream", rshmem_host_quiet_on_stream(RSHMEMI_COMPAT_STREAM(s)));
}
static inline void nvshmemx_putmem_on_stream(void *dest, const void *src, size_t nbytes, int pe, cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_putmem_on_stream", rshmem_host_putmem_on_stream(dest, src, nbytes, pe, RSHMEMI_COMPAT_STREAM(s)));
}
static inline void nvshmemx_getmem_on_stream(void *dest, const void *src, size_t nbytes, int pe, cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_getmem_on_stream", rshmem_host_getmem_on_stream(dest, src, nbytes, pe, RSHMEMI_COMPAT_STREAM(s)));
}
static inline void nvshmemx_putmem_signal_on_stream(void *dest, const void *src, size_t nbytes, uint64_t *sig,
                                                    uint64_t signal, int sig_op, int pe, cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_putmem_signal_on_stream",
                       rshmem_host_putmem_signal_on_stream(dest, src, nbytes, sig, signal, sig_op, pe, RSHMEMI_COMPAT_STREAM(s)));
}
static inline void nvshmemx_signal_op_on_stream(uint64_t *sig, uint64_t signal, int sig_op, int pe, cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_signal_op_on_stream", rshmem_host_signal_op_on_stream(sig, signal, sig_op, pe, RSHMEMI_COMPAT_STREAM(s)));
}
static inline void nvshmemx_signal_wait_until_on_stream(uint64_t *sig, int cmp, uint64_t value, cudaStream_t s) {
  RSHMEMI_COMPAT_CHECK("nvshmemx_signal_wait_until_on_stream",
                       rshmem_host_signal_wait_until_on_stream(sig, cmp, value, RSHMEMI_COMPAT_STREAM(s)));
}

/* The nbi forms on a stream are the same queued copies: ordered on the stream either way. */
static inline void nvshmemx_putmem_nbi_on_stream(void *dest, const void *src, size_t nbytes, int pe, cudaStream_t s) {
  nvshmemx_putmem_on_stream(dest, src, nbytes, pe, s);
}
static inline void nvshmemx_getmem_nbi_on_stream(void *dest, const void *src, size_t nbytes, int pe, cudaStream_t s) {
  nvshmemx_getmem_on_stream(dest, src, nbytes, pe, s);
}
static inline void nvshmemx_putmem_signal_nbi_on_stream(void *dest, const void *src, size_t nbytes, uint64_t *sig,
                                                        uint64_t signal, int sig_op, int pe, cudaStream_t s) {
  nvshmemx_putmem_signal_on_stream(dest, src, nbytes, sig, signal, sig_op, pe, s);
}
/* Strided copies on a stream: one queued copy per element (rshmem has no strided stream
   operation), in order on the stream. */
static inline void rshmemi_compat_strided_on_stream(const char *call, int put, void *dest, const void *source,
                                                    ptrdiff_t dst, ptrdiff_t sst, size_t nelems, size_t bytes, int pe,
                                                    cudaStream_t s) {
  for (size_t i = 0; i < nelems; i++) {
    char *d = (char *)dest + (ptrdiff_t)i * dst * (ptrdiff_t)bytes;
    const char *src = (const char *)source + (ptrdiff_t)i * sst * (ptrdiff_t)bytes;
    RSHMEMI_COMPAT_CHECK(call, put ? rshmem_host_putmem_on_stream(d, src, bytes, pe, RSHMEMI_COMPAT_STREAM(s))
                                   : rshmem_host_getmem_on_stream(d, src, bytes, pe, RSHMEMI_COMPAT_STREAM(s)));
  }
}
/* Typed RMA on a stream. p and g wait for the stream's earlier work, then move the element
   from the host, so they are ordered after that work and complete before anything queued later
   (rshmem queues no single-element kernels). */
#define RSHMEMI_COMPAT_STREAM_RMA(NAME, T, R)                                                                      \
  static inline void nvshmemx_##NAME##_put_on_stream(T *d, const T *src, size_t n, int pe, cudaStream_t s) {        \
    nvshmemx_putmem_on_stream(d, src, n * sizeof(T), pe, s);                                                        \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_put_nbi_on_stream(T *d, const T *src, size_t n, int pe, cudaStream_t s) {    \
    nvshmemx_putmem_on_stream(d, src, n * sizeof(T), pe, s);                                                        \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_get_on_stream(T *d, const T *src, size_t n, int pe, cudaStream_t s) {        \
    nvshmemx_getmem_on_stream(d, src, n * sizeof(T), pe, s);                                                        \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_get_nbi_on_stream(T *d, const T *src, size_t n, int pe, cudaStream_t s) {    \
    nvshmemx_getmem_on_stream(d, src, n * sizeof(T), pe, s);                                                        \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_put_signal_on_stream(T *d, const T *src, size_t n, uint64_t *sig,            \
                                                            uint64_t signal, int sig_op, int pe, cudaStream_t s) {  \
    nvshmemx_putmem_signal_on_stream(d, src, n * sizeof(T), sig, signal, sig_op, pe, s);                            \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_put_signal_nbi_on_stream(T *d, const T *src, size_t n, uint64_t *sig,        \
                                                                uint64_t signal, int sig_op, int pe,                \
                                                                cudaStream_t s) {                                   \
    nvshmemx_putmem_signal_on_stream(d, src, n * sizeof(T), sig, signal, sig_op, pe, s);                            \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_iput_on_stream(T *d, const T *src, ptrdiff_t dst, ptrdiff_t sst, size_t n,   \
                                                      int pe, cudaStream_t s) {                                     \
    rshmemi_compat_strided_on_stream("nvshmemx_" #NAME "_iput_on_stream", 1, d, src, dst, sst, n, sizeof(T), pe, s); \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_iget_on_stream(T *d, const T *src, ptrdiff_t dst, ptrdiff_t sst, size_t n,   \
                                                      int pe, cudaStream_t s) {                                     \
    rshmemi_compat_strided_on_stream("nvshmemx_" #NAME "_iget_on_stream", 0, d, src, dst, sst, n, sizeof(T), pe, s); \
  }                                                                                                                 \
  static inline void nvshmemx_##NAME##_p_on_stream(T *d, const T value, int pe, cudaStream_t s) {                   \
    if (cudaStreamSynchronize(s) != cudaSuccess) rshmemi_compat_cuda_fail("nvshmemx_" #NAME "_p_on_stream");        \
    nvshmem_##NAME##_p(d, value, pe);                                                                               \
  }                                                                                                                 \
  static inline T nvshmemx_##NAME##_g_on_stream(const T *src, int pe, cudaStream_t s) {                             \
    if (cudaStreamSynchronize(s) != cudaSuccess) rshmemi_compat_cuda_fail("nvshmemx_" #NAME "_g_on_stream");        \
    return nvshmem_##NAME##_g(src, pe);                                                                             \
  }
static inline void rshmemi_compat_cuda_fail(const char *call) {
  fprintf(stderr, "%s (rshmem): %s\n", call, cudaGetErrorString(cudaGetLastError()));
  exit(EXIT_FAILURE);
}
RSHMEMI_COMPAT_TYPES(RSHMEMI_COMPAT_STREAM_RMA)
/* Sized RMA on a stream (nvshmemx_put32_on_stream, ...). */
#define RSHMEMI_COMPAT_STREAM_SIZED(BITS)                                                                          \
  static inline void nvshmemx_put##BITS##_on_stream(void *d, const void *src, size_t n, int pe, cudaStream_t s) {   \
    nvshmemx_putmem_on_stream(d, src, n * (BITS / 8), pe, s);                                                       \
  }                                                                                                                 \
  static inline void nvshmemx_put##BITS##_nbi_on_stream(void *d, const void *src, size_t n, int pe,                 \
                                                        cudaStream_t s) {                                           \
    nvshmemx_putmem_on_stream(d, src, n * (BITS / 8), pe, s);                                                       \
  }                                                                                                                 \
  static inline void nvshmemx_get##BITS##_on_stream(void *d, const void *src, size_t n, int pe, cudaStream_t s) {   \
    nvshmemx_getmem_on_stream(d, src, n * (BITS / 8), pe, s);                                                       \
  }                                                                                                                 \
  static inline void nvshmemx_get##BITS##_nbi_on_stream(void *d, const void *src, size_t n, int pe,                 \
                                                        cudaStream_t s) {                                           \
    nvshmemx_getmem_on_stream(d, src, n * (BITS / 8), pe, s);                                                       \
  }                                                                                                                 \
  static inline void nvshmemx_put##BITS##_signal_on_stream(void *d, const void *src, size_t n, uint64_t *sig,       \
                                                           uint64_t signal, int sig_op, int pe, cudaStream_t s) {   \
    nvshmemx_putmem_signal_on_stream(d, src, n * (BITS / 8), sig, signal, sig_op, pe, s);                           \
  }                                                                                                                 \
  static inline void nvshmemx_put##BITS##_signal_nbi_on_stream(void *d, const void *src, size_t n, uint64_t *sig,   \
                                                               uint64_t signal, int sig_op, int pe,                 \
                                                               cudaStream_t s) {                                    \
    nvshmemx_putmem_signal_on_stream(d, src, n * (BITS / 8), sig, signal, sig_op, pe, s);                           \
  }                                                                                                                 \
  static inline void nvshmemx_iput##BITS##_on_stream(void *d, const void *src, ptrdiff_t dst, ptrdiff_t sst,        \
                                                     size_t n, int pe, cudaStream_t s) {                            \
    rshmemi_compat_strided_on_stream("nvshmemx_iput" #BITS "_on_stream", 1, d, src, dst, sst, n, BITS / 8, pe, s);  \
  }                                                                                                                 \
  static inline void nvshmemx_iget##BITS##_on_stream(void *d, const void *src, ptrdiff_t dst, ptrdiff_t sst,        \
                                                     size_t n, int pe, cudaStream_t s) {                            \
    rshmemi_compat_strided_on_stream("nvshmemx_iget" #BITS "_on_stream", 0, d, src, dst, sst, n, BITS / 8, pe, s);  \
  }
RSHMEMI_COMPAT_STREAM_SIZED(8)
RSHMEMI_COMPAT_STREAM_SIZED(16)
RSHMEMI_COMPAT_STREAM_SIZED(32)
RSHMEMI_COMPAT_STREAM_SIZED(64)
RSHMEMI_COMPAT_STREAM_SIZED(128)

/* The team of NVSHMEM 1.0's active set (PE_start, 2^logPE_stride, PE_size): the world, the one set
   rshmem maps (docs/c.md). */
static inline nvshmem_team_t rshmemi_compat_active_set(const char *call, int start, int log_stride, int size) {
  int n = 0;
  rshmem_host_n_pes(&n);
  if (start == 0 && log_stride == 0 && size == n) return NVSHMEM_TEAM_WORLD;
  fprintf(stderr, "%s (rshmem): only the active set of every PE (PE_start 0, logPE_stride 0, PE_size %d) is mapped, "
                  "not (%d, %d, %d); make a team with nvshmem_team_split_strided\n", call, n, start, log_stride, size);
  exit(EXIT_FAILURE);
}

/* Reductions, fcollect, broadcast and alltoall on a stream: NVSHMEM 2's team forms and 1.0's
   active-set forms (<op>_to_all_on_stream), generated from the host table's on-stream rows. */
RSHMEMI_COMPAT_STREAM_COLLECTIVES
#endif /* CUDA */

/* ------------------------------------------------------------------ collective launch */
#if defined(__CUDACC__)
static inline int nvshmemx_collective_launch(const void *func, dim3 grid, dim3 block, void **args, size_t shared_mem,
                                             cudaStream_t stream) {
  return rshmemx_collective_launch(func, grid, block, args, shared_mem, stream);
}
/* As NVSHMEM: success with the largest co-resident grid, which is 0 when not one block of this
   size fits; an error only when the occupancy query itself fails. */
static inline int nvshmemx_collective_launch_query_gridsize(const void *func, dim3 block, void **args,
                                                            size_t shared_mem, int *gridsize) {
  (void)args;
  int most = rshmemx_collective_launch_query_gridsize(func, block, shared_mem);
  *gridsize = most > 0 ? most : 0;
  return most < 0 ? NVSHMEMX_ERROR_INTERNAL : NVSHMEMX_SUCCESS;
}
#endif

/* ------------------------------------------------------------------ device-only forms */
#if defined(__CUDACC__)
#include "nvshmemx.h"
#endif

#endif /* RSHMEM_NVSHMEM_H */
