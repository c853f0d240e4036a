/* rshmem over an MPI communicator (nvshmemx_init_attr with NVSHMEMX_INIT_WITH_MPI_COMM): rank 0 of
   `comm` makes the job's unique id, MPI_Bcast hands it to every rank, and each rank initializes
   rshmem as PE <its rank in comm> of <the size of comm>. Header-only, so librshmem.so does not
   depend on MPI: the program's own MPI does the broadcast. Include mpi.h first; call it after
   MPI_Init, on every rank of `comm`. */
#ifndef RSHMEM_MPI_H
#define RSHMEM_MPI_H

#include <mpi.h>

#include "rshmem.h"

/* Collective over `comm`. The MPI calls' errors come back as RSHMEM_ERROR_INVALID_ARGUMENT (the
   communicator) or RSHMEM_ERROR_OS (the broadcast); rshmem's own as its status codes. */
static inline rshmem_status_t rshmem_mpi_init(MPI_Comm comm) {
  int rank = -1, size = -1;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return RSHMEM_ERROR_INVALID_ARGUMENT;
  rshmem_uniqueid_t uid;
  /* Rank 0's status goes with the id, so every rank fails alike when it cannot make one. */
  int made = RSHMEM_SUCCESS;
  if (rank == 0) made = rshmem_host_get_unique_id(&uid);
  if (MPI_Bcast(&made, 1, MPI_INT, 0, comm) != MPI_SUCCESS) return RSHMEM_ERROR_OS;
  if (made != RSHMEM_SUCCESS) return made;
  if (MPI_Bcast(uid.bytes, RSHMEM_UNIQUE_ID_BYTES, MPI_BYTE, 0, comm) != MPI_SUCCESS) return RSHMEM_ERROR_OS;
  rshmem_init_attr_t attr = RSHMEM_INIT_ATTR_INITIALIZER;
  attr.uid = &uid;
  attr.rank = rank;
  attr.nranks = size;
  return rshmem_host_init(&attr);
}

#endif /* RSHMEM_MPI_H */
