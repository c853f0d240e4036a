/* simple_shift and a ring reduction from the host, in C: each PE puts its number into the next
   PE's symmetric int, then passes a running sum around the ring (n-1 rounds of put + barrier), and
   checks both results. Runs on either backend: `RSHMEM_BACKEND=host` needs no GPU.
     torchrun --nproc-per-node 2 --no-python build/shift_host
     MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 mpirun -np 2 -x MASTER_ADDR -x MASTER_PORT build/shift_host
   Built with -DRSHMEM_WITH_MPI by mpicc (`make mpi`: build/shift_host_mpi) it is an MPI program that
   joins over MPI_COMM_WORLD through init attributes (rshmem_mpi.h), with no variables to export:
     mpirun -np 2 build/shift_host_mpi */
#ifdef RSHMEM_WITH_MPI
#include <mpi.h>
#include <rshmem_mpi.h>
#endif
#include <rshmem.h>
#include <stdio.h>
#include <stdlib.h>

#define OK(call)                                                                            \
  do {                                                                                      \
    rshmem_status_t s_ = (call);                                                            \
    if (s_ != RSHMEM_SUCCESS) {                                                             \
      fprintf(stderr, "%s failed: %s: %s\n", #call, rshmem_host_status_name(s_), rshmem_host_last_error()); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

int main(int argc, char **argv) {
#ifdef RSHMEM_WITH_MPI
  MPI_Init(&argc, &argv);
  OK(rshmem_mpi_init(MPI_COMM_WORLD));
  const char *joined = "MPI_COMM_WORLD";
#else
  (void)argc, (void)argv;
  OK(rshmem_host_init(NULL));
  const char *joined = "launcher env";
#endif
  int me, n;
  OK(rshmem_host_my_pe(&me));
  OK(rshmem_host_n_pes(&n));
  int32_t *box;
  OK(rshmem_host_calloc(1, sizeof(int32_t), (void **)&box));

  OK(rshmem_host_int32_p(box, me, (me + 1) % n));
  OK(rshmem_host_barrier_all());
  int32_t got;
  OK(rshmem_host_int32_g(box, me, &got));
  int shift_ok = got == (me + n - 1) % n;
  printf("%d: received message %d (%s)\n", me, got, shift_ok ? "correct" : "WRONG");

  int32_t value = me;
  for (int round = 1; round < n; round++) {
    OK(rshmem_host_barrier_all()); /* the previous round's value has been read */
    OK(rshmem_host_int32_p(box, value, (me + 1) % n));
    OK(rshmem_host_barrier_all());
    OK(rshmem_host_int32_g(box, me, &got));
    value = got + me;
  }
  int sum_ok = value == n * (n - 1) / 2;
  printf("[%d of %d, joined by %s] ring reduction: %d (%s)\n", me, n, joined, value, sum_ok ? "correct" : "WRONG");
  OK(rshmem_host_free(box));
  OK(rshmem_host_finalize());
#ifdef RSHMEM_WITH_MPI
  MPI_Finalize();
#endif
  return shift_ok && sum_ok ? 0 : 1;
}
