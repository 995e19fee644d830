// One-way message timing between ranks 0 and 1 of MPI_COMM_WORLD, shared by
// the MPI point-to-point benchmarks (bench_comm_mpi, bench_nccl_mpi).
#pragma once

#include <functional>

#include <mpi.h>

namespace disttrain::bench {

/// Seconds per one-way message of `reps` messages: rank 0 calls `send` and
/// rank 1 `recv`, `reps` times each, then rank 1 sends a 1-byte
/// acknowledgement that ends rank 0's clock. Every rank of MPI_COMM_WORLD
/// must call it; all get rank 0's figure.
inline double one_way(int me, int reps, const std::function<void()>& send,
                      const std::function<void()>& recv) {
  constexpr int ack_tag = 999;
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; ++i) {
    if (me == 0)
      send();
    else if (me == 1)
      recv();
  }
  if (me == 0)
    MPI_Recv(&ack, 1, MPI_CHAR, 1, ack_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else if (me == 1)
    MPI_Send(&ack, 1, MPI_CHAR, 0, ack_tag, MPI_COMM_WORLD);
  double t = (MPI_Wtime() - t0) / reps;
  MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);  // rank 0's clock decides
  return t;
}

}  // namespace disttrain::bench
