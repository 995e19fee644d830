// simulate_plan: a plan on the discrete-event simulator agrees with the closed
// form where the closed form is exact, and exports a trace.
#include <string>

#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/simulate.hpp"
#include "disttrain/schedule/validate.hpp"
#include "disttrain/sim/trace.hpp"
#include "disttrain_catch.hpp"
#include "mock_cost.hpp"

using disttrain::module_plan;
using disttrain::parallel_plan;

TEST_CASE("a single-module-chain plan simulates to its closed form") {
  // Monolithic plan, dp 1, two equal backbone stages, no colocated work beyond the
  // first/last stage: 1F1B with m microbatches costs (m - 1) * max + sum (+ sync).
  disttrain::testing::mock_cost cm(16);
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 8;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 1, {32}, false, true},
               module_plan{"llama-2-7b", "backbone", 1, 2, 1, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}, false, true}};
  const auto w = disttrain::testing::mock_sample();
  const auto e = disttrain::evaluate(p, cm, w);
  const auto s = disttrain::simulate_plan(p, cm, w);
  CHECK(s.schedule.num_ranks() == 2);
  CHECK_NOTHROW(disttrain::validate_schedule(s.schedule));
  // The simulator resolves the same pipeline: equal within a few percent (transfers overlap).
  CHECK(s.result.iteration_time == Approx(e.iteration_time_s).epsilon(0.05));
  const auto trace = disttrain::to_trace_json(s.schedule, s.result);
  CHECK(trace.dump().find("llama-2-7b") != std::string::npos);
}

TEST_CASE("a disaggregated plan simulates with one segment per module") {
  disttrain::testing::mock_cost cm(16);
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 4;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}},
               module_plan{"llama-2-7b", "backbone", 2, 2, 2, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
  const auto w = disttrain::testing::mock_sample();
  const auto s = disttrain::simulate_plan(p, cm, w);
  CHECK(s.schedule.segments.size() == 3);
  CHECK(s.schedule.num_ranks() == 2 + 4 + 1);
  CHECK(s.schedule.num_microbatches == 8);  // m * backbone dp
  const auto e = disttrain::evaluate(p, cm, w);
  CHECK(s.result.iteration_time > 0.5 * e.iteration_time_s);
  CHECK(s.result.iteration_time < 2.0 * e.iteration_time_s);
}
