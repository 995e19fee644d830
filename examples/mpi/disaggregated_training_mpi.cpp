// Disaggregated training of the tiny multimodal model across MPI processes:
// one process per rank of the plan (encoder replicas, backbone stages x
// replicas, generator replicas). Same driver as the threads version
// (examples/disaggregated_training.cpp).
//
//   mpirun --oversubscribe -np 7 ./example_mpi_disaggregated_training --check
//   (the plan's rank count must equal -np: 2 + 2*2 + 1 = 7 by default)
#include <cstdio>
#include <exception>

#include "disttrain/comm/mpi_backend.hpp"
#include "../tiny_mllm/driver.hpp"

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  const auto opts = tiny_mllm::parse_driver_options(argc, argv);
  int status = 0;
  try {
    disttrain::mpi_backend backend(MPI_COMM_WORLD, {std::chrono::seconds(60)});
    if (backend.size() != opts.plan.world_size()) {
      if (backend.rank() == 0)
        std::fprintf(stderr, "the plan needs %d ranks, mpirun started %d (use -np %d)\n", opts.plan.world_size(),
                     backend.size(), opts.plan.world_size());
      return 2;
    }
    status = tiny_mllm::train(backend, opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return status;
}
