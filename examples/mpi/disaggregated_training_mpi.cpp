// Disaggregated training of the tiny multimodal model across MPI processes:
// one process per rank of the plan (encoder replicas, backbone stages x
// replicas, generator replicas). Same driver as the threads version
// (examples/disaggregated_training.cpp).
//
// The layout comes from the planner for the world's -np ranks (every rank
// runs the same deterministic search); ranks the plan leaves unused sit the
// run out. A hand layout (--enc-dp/--bb-pp/--bb-dp/--gen-dp) needs -np equal
// to its rank count.
//
//   mpirun --oversubscribe -np 7 ./example_mpi_disaggregated_training_mpi --check        # planner
//   mpirun --oversubscribe -np 7 ./example_mpi_disaggregated_training_mpi --bb-dp 2 --check  # 2/2x2/1
#include <cstdio>
#include <exception>

#include "../tiny_mllm/driver.hpp"
#include "disttrain/comm/mpi_backend.hpp"

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  auto opts = tiny_mllm::parse_driver_options(argc, argv);
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int status = 0;
  try {
    const auto resolved = tiny_mllm::resolve_plan(opts, world_size);
    opts.plan = resolved.plan;
    const int needed = opts.plan.world_size();
    if (world_rank == 0 && !opts.quiet) std::printf("%s\n", resolved.description.c_str());
    if (needed > world_size || (opts.hand_layout && needed != world_size)) {
      if (world_rank == 0)
        std::fprintf(stderr, "the plan needs %d ranks, mpirun started %d (use -np %d)\n", needed,
                     world_size, needed);
      return 2;
    }
    if (needed < world_size && world_rank == 0)
      std::printf("the plan uses %d of the %d ranks; ranks %d.. sit this run out\n", needed,
                  world_size, needed);
    // The plan's ranks in their own communicator (all of them when the plan uses the whole world).
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < needed ? 0 : MPI_UNDEFINED, world_rank, &comm);
    if (comm != MPI_COMM_NULL) {
      {
        disttrain::mpi_backend backend(comm, {std::chrono::seconds(60)});
        status = tiny_mllm::train(backend, opts);
      }
      MPI_Comm_free(&comm);
    }
    // Every rank leaves with the trainers' status.
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return status;
}
