#pragma once
// Runs tiny_mllm::rank_trainer on every rank of a local world (one thread per
// rank) and collects what each rank produced.
#include <chrono>
#include <exception>
#include <functional>
#include <vector>

#include "../../examples/tiny_mllm/dist_trainer.hpp"
#include "../comm/local_harness.hpp"

namespace tiny_mllm::test {

using trainer = rank_trainer<disttrain::local_backend>;

// Per rank: the results of each step and the last gradients.
struct rank_record {
  std::vector<step_result> steps;
  std::map<std::string, matrix> grads;
  disttrain::topology_coord coord;
};

inline std::vector<rank_record> run_world(
    const config& c, const dist_plan& plan, const trainer_options& opts, int iterations,
    std::vector<std::exception_ptr>* errors_out = nullptr,
    std::chrono::milliseconds comm_timeout = std::chrono::seconds(20)) {
  disttrain::local_world world(plan.world_size(), {comm_timeout});
  std::vector<rank_record> rec(static_cast<std::size_t>(plan.world_size()));
  auto errors = disttrain::test::run_ranks(world, [&](disttrain::local_backend& b) {
    trainer t(b, c, plan, opts);
    rank_record& r = rec[static_cast<std::size_t>(b.rank())];
    r.coord = t.coord();
    for (int k = 0; k < iterations; ++k)
      r.steps.push_back(t.step(static_cast<std::uint64_t>(k), k + 1 < iterations));
    r.grads = t.last_gradients();
  });
  if (errors_out)
    *errors_out = errors;
  else
    disttrain::test::rethrow_first(errors);
  return rec;
}

}  // namespace tiny_mllm::test
