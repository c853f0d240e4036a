/* nvshmem_global_exit: PE `argv[1]` calls it with status 7 while every other PE waits in a barrier
   that cannot complete; every process of the job must exit with 7 (capi/tests/run.sh checks each
   process's status, and a timeout catches a hang). */
#define _POSIX_C_SOURCE 200809L /* nanosleep under -std=c11 */
#include <nvshmem.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
  const int caller = argc > 1 ? atoi(argv[1]) : 0;
  nvshmem_init();
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  if (caller < 0 || caller >= npes) {
    fprintf(stderr, "global_exit: no PE %d in a job of %d\n", caller, npes);
    return 2;
  }
  nvshmem_barrier_all();
  if (me == caller) {
    /* Let the others reach the barrier first: they must be stopped inside it. */
    const struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    printf("PE %d: nvshmem_global_exit(7)\n", me);
    nvshmem_global_exit(7);
    fprintf(stderr, "PE %d: nvshmem_global_exit returned\n", me);
    return 1;
  }
  nvshmem_barrier_all();
  fprintf(stderr, "PE %d: the barrier completed without PE %d\n", me, caller);
  return 1;
}
