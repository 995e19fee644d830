// Disaggregated training of a tiny multimodal model (encoder -> backbone
// pipeline -> generator, each module with its own data-parallel degree), one
// thread per rank over the in-process backend. The layout comes from the
// planner (plan/) for --ranks ranks unless a hand layout is given. The MPI
// version is examples/mpi/disaggregated_training_mpi.cpp (same driver, one
// process per rank). Prints the plan, the loss per iteration and writes a
// Perfetto trace.
//
//   ./example_disaggregated_training --ranks 7 --iterations 20 --check   # planner's layout
//   ./example_disaggregated_training --bb-dp 3 --check                   # hand layout 2/2x3/1
#include <exception>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "disttrain/comm/local_backend.hpp"
#include "tiny_mllm/driver.hpp"

int main(int argc, char** argv) {
  auto opts = tiny_mllm::parse_driver_options(argc, argv);
  try {
    const auto resolved = tiny_mllm::resolve_plan(opts, opts.ranks);
    opts.plan = resolved.plan;
    if (!opts.quiet) fmt::print("{}\n", resolved.description);
    disttrain::local_world world(opts.plan.world_size(), {std::chrono::seconds(60)});
    std::vector<int> status(static_cast<std::size_t>(world.size()), 0);
    std::vector<std::exception_ptr> errors(status.size());
    std::vector<std::thread> ranks;
    for (int r = 0; r < world.size(); ++r)
      ranks.emplace_back([&, r] {
        try {
          auto backend = world.endpoint(r);
          status[static_cast<std::size_t>(r)] = tiny_mllm::train(backend, opts);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    for (auto& t : ranks) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    return status[0];
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
