/* An NVSHMEM host program, in NVSHMEM's names (nvshmem.h): a matrix of npes rows of K * npes ints,
   row r on PE r, is transposed block-wise with strided gets, then summed along the rows and the
   columns of a 2D grid of teams. Checks every value and prints "correct", or names the first wrong
   one and exits 1. The CPU reads and writes the symmetric heap, as an OpenSHMEM host program does,
   so it runs on the host backend, which it asks for unless RSHMEM_BACKEND says otherwise (on the
   cuda backend the heap is GPU memory, and those accesses would fault, as with NVSHMEM):
     torchrun --nproc-per-node 4 --no-python build/matrix_teams
   Built with -DRSHMEM_WITH_MPI by mpicc (`make mpi`: build/matrix_teams_mpi) it starts NVSHMEM's
   unique-id way: rank 0 makes the id, MPI_Bcast shares it, and every rank passes it to
   nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, ...):
     mpirun -np 4 build/matrix_teams_mpi
   Names used: nvshmem_init_thread / nvshmem_query_thread (or the unique-id initializer path),
   nvshmem_info_get_name / _version, nvshmem_int_iget, nvshmem_iput32, nvshmem_team_split_2d with
   nvshmem_team_config_t, NVSHMEM_TEAM_INVALID, nvshmem_int_sum_reduce over the teams. */
#define _POSIX_C_SOURCE 200809L /* setenv under -std=c11 */
#ifdef RSHMEM_WITH_MPI
#include <mpi.h>
#endif
#include <nvshmem.h>
#include <nvshmemx.h>

#include <stdio.h>
#include <stdlib.h>

#define K 3 /* elements per block */

static int wrong(int me, const char *what, int i, int got, int want) {
  fprintf(stderr, "PE %d: %s[%d] = %d, expected %d: WRONG\n", me, what, i, got, want);
  return 1;
}

/* Element j of row r. */
static int value(int r, int j) { return 1000 * r + j; }

int main(int argc, char **argv) {
  setenv("RSHMEM_BACKEND", "host", 0);
#ifdef RSHMEM_WITH_MPI
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) nvshmemx_get_uniqueid(&id);
  MPI_Bcast(&id, sizeof(nvshmemx_uniqueid_t), MPI_UINT8_T, 0, MPI_COMM_WORLD);
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_set_attr_uniqueid_args(rank, nranks, &id, &attr);
  nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
  const char *joined = "a unique id over MPI";
#else
  (void)argc, (void)argv;
  int provided = -1;
  nvshmem_init_thread(NVSHMEM_THREAD_SERIALIZED, &provided);
  int queried = -1;
  nvshmem_query_thread(&queried);
  if (queried != provided) return fprintf(stderr, "query_thread %d, init_thread %d\n", queried, provided), 1;
  const char *joined = "the launcher's environment";
#endif
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes(), width = K * npes;
  char name[NVSHMEM_MAX_NAME_LEN];
  int major, minor;
  nvshmem_info_get_name(name);
  nvshmem_info_get_version(&major, &minor);
  if (me == 0) printf("%s (OpenSHMEM %d.%d), %d PEs joined through %s\n", name, major, minor, npes, joined);

  /* This PE holds row `me`. It gathers block `me` (K elements) of every row: one strided get per
     PE reads the block contiguously and stores it every npes-th element, so that col[k * npes + p]
     is element me * K + k of row p. */
  int *row = (int *)nvshmem_malloc(width * sizeof(int));
  int *col = (int *)malloc(width * sizeof(int));
  for (int j = 0; j < width; j++) row[j] = value(me, j);
  nvshmem_barrier_all();
  for (int p = 0; p < npes; p++) nvshmem_int_iget(col + p, row + me * K, npes, 1, K, p);
  int errors = 0;
  for (int k = 0; k < K; k++)
    for (int p = 0; p < npes; p++)
      if (col[k * npes + p] != value(p, me * K + k))
        errors += wrong(me, "col", k * npes + p, col[k * npes + p], value(p, me * K + k));

  /* The same gather, pushed: each PE puts its block `p` into PE p's column with iput32. */
  int *pushed = (int *)nvshmem_calloc(width, sizeof(int));
  nvshmem_barrier_all();
  for (int p = 0; p < npes; p++) nvshmem_iput32(pushed + me, row + p * K, npes, 1, K, p);
  nvshmem_barrier_all();
  for (int j = 0; j < width; j++)
    if (pushed[j] != col[j]) errors += wrong(me, "pushed", j, pushed[j], col[j]);

  /* A grid of 2 columns: the x-axis team is this PE's row of the grid, the y-axis its column. */
  nvshmem_team_config_t config = {0};
  config.num_contexts = 1;
  nvshmem_team_t xteam, yteam;
  nvshmem_team_split_2d(NVSHMEM_TEAM_WORLD, 2, &config, 0, &xteam, &config, 0, &yteam);
  int *mine = (int *)nvshmem_malloc(sizeof(int)), *sum = (int *)nvshmem_malloc(sizeof(int));
  *mine = me;
  nvshmem_barrier_all();
  nvshmem_int_sum_reduce(xteam, sum, mine, 1);
  int want = 0;
  for (int t = 0; t < nvshmem_team_n_pes(xteam); t++) want += nvshmem_team_translate_pe(xteam, t, NVSHMEM_TEAM_WORLD);
  if (*sum != want) errors += wrong(me, "row sum", 0, *sum, want);
  nvshmem_int_sum_reduce(yteam, sum, mine, 1);
  want = 0;
  for (int p = me % 2; p < npes; p += 2) want += p;
  if (*sum != want) errors += wrong(me, "column sum", 0, *sum, want);

  /* A team of PE 0 alone: the others get NVSHMEM_TEAM_INVALID, whose queries give -1, and destroy
     it with everyone. */
  nvshmem_team_t first;
  nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, 0, 1, 1, NULL, 0, &first);
  if ((me == 0) != (nvshmem_team_n_pes(first) == 1) || (me != 0 && nvshmem_team_my_pe(first) != -1))
    errors += wrong(me, "team of PE 0: n_pes", 0, nvshmem_team_n_pes(first), me == 0 ? 1 : -1);
  nvshmem_team_destroy(first);
  nvshmem_team_destroy(xteam);
  nvshmem_team_destroy(yteam);

  nvshmem_barrier_all();
  printf("PE %d: %s\n", me, errors ? "WRONG" : "correct");
  free(col);
  nvshmem_free(row);
  nvshmem_free(pushed);
  nvshmem_free(mine);
  nvshmem_free(sum);
  nvshmem_finalize();
#ifdef RSHMEM_WITH_MPI
  MPI_Finalize();
#endif
  return errors ? 1 : 0;
}
