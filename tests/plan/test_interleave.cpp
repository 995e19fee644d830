// Interleaved 1F1B (Megatron-LM's virtual pipeline stages) in the plan,
// evaluate() and the planner, checked against hand computation on the
// round-number mock cost model (mock_cost.hpp).
#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain_catch.hpp"
#include "mock_cost.hpp"

using disttrain::errc;
using disttrain::module_plan;
using disttrain::parallel_plan;

namespace {

parallel_plan plan(int v) {
  parallel_plan p = disttrain::testing::mock_plan();
  p.modules[1].virtual_stages = v;
  return p;
}

}  // namespace

TEST_CASE("interleaved closed form matches the hand computation") {
  disttrain::testing::mock_cost cm(16);
  const auto w = disttrain::testing::mock_sample();
  const auto plain = disttrain::evaluate(plan(1), cm, w);
  const auto two = disttrain::evaluate(plan(2), cm, w);
  // Backbone: two stages of 0.024 s on ranks 2-5 and 6-9 (across nodes 0 and 1 of 8 GPUs), one
  // NIC hop 2 * 5e8 / 1e10 = 0.1 s. 1F1B path 0.148; interleaved path (S - T) / v + T + H =
  // 0.024 / 2 + 0.024 + 0.1 = 0.136, loop S + v H = 0.248. Encoder path 0.0116, generator 0.4075
  // (test_evaluate.cpp).
  const double path = 0.0116 + 0.136 + 0.4075;
  const double loop = 0.0116 + 0.248 + 0.4075;
  CHECK(two.pipeline_time_s == Approx(3 * (loop / 4) + path));
  CHECK(plain.pipeline_time_s == Approx(3 * ((0.0116 + 0.148 + 0.4075) / 4) + 0.5671));
  CHECK(two.sync_time_s == plain.sync_time_s);
  // Memory: device j of the backbone keeps 2 (pp - j - 1) + (v - 1) pp + 1 chunk-microbatches
  // plus v per later chain stage (the generator), of 8 layers each.
  REQUIRE(two.stages.size() == 4);
  CHECK(two.stages[1].in_flight == 2 * 1 + 1 * 2 + 1 + 2);
  CHECK(two.stages[2].in_flight == 0 + 2 + 1 + 2);
  CHECK(two.stages[1].virtual_stages == 2);
  CHECK(two.stages[1].memory.activations == Approx(7 * 8 * 1e6 * 1000 / 2.0));
  CHECK(two.stages[2].memory.activations == Approx(5 * 8 * 1e6 * 1000 / 2.0));
  CHECK(plain.stages[1].memory.activations == Approx(3 * 16 * 1e6 * 1000 / 2.0));
  CHECK(two.stages[1].memory.params == plain.stages[1].memory.params);
  // Side modules are unchanged.
  CHECK(two.stages[0].memory_bytes == plain.stages[0].memory_bytes);
}

TEST_CASE("uniform interleaved pipeline has the published bubble (p - 1) / v") {
  // One segment of p equal stages and no transfers: m T + (p - 1) T / v.
  std::vector<double> t(4, 1.0), h(4, 0.0);
  for (int v : {1, 2, 4}) {
    const auto terms = disttrain::detail::module_path({.stage_s = t, .hop_s = h}, 0.0, v);
    const disttrain::detail::module_terms arr[1] = {terms};
    const auto cf = disttrain::detail::combine(8, arr);
    CHECK(cf.pipeline_s == Approx(8.0 + 3.0 / v));
  }
}

TEST_CASE("interleaving is validated naming the field") {
  auto p = plan(3);  // 16 layers per stage do not split into 3 chunks
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument,
                        "plan.llama-2-7b.layers[0]");
  p = plan(2);
  p.global_batch = 24;
  p.num_microbatches = 3;  // 3 microbatches are not a multiple of pp 2
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument,
                        "plan.llama-2-7b.virtual_stages");
  p = plan(1);
  p.modules[0].virtual_stages = 2;
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument,
                        "plan.vit-h-14.virtual_stages");
  p = plan(2);
  p.schedule = disttrain::plan_schedule::gpipe;
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument,
                        "plan.llama-2-7b.virtual_stages");
  p = plan(0);
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument,
                        "plan.llama-2-7b.virtual_stages");
  // JSON: round trip, absent means 1.
  const disttrain::json j = plan(2);
  CHECK(j.get<parallel_plan>() == plan(2));
  disttrain::json old = j;
  old["modules"][1].erase("virtual_stages");
  CHECK(old.get<parallel_plan>().modules[1].virtual_stages == 1);
}

TEST_CASE("the simulator runs an interleaved plan as planned: chunk ops, a smaller bubble") {
  const auto sc = disttrain::presets::scenario_preset("mllm-7b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  auto req = disttrain::make_request(sc.model, sc.data, 8, 64);
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 4;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}},
               module_plan{"llama-2-7b", "backbone", 2, 2, 2, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
  const auto plain = disttrain::simulate_plan(p, cm, req.sample_workload);
  p.modules[1].virtual_stages = 2;
  const auto sim = disttrain::simulate_plan(p, cm, req.sample_workload);
  CHECK(sim.topo.module(sim.topo.backbone()).chunks == 2);
  // Every backbone rank runs F and B of each microbatch on each chunk.
  for (const auto& prog : sim.world.programs) {
    if (sim.topo.coord(prog.rank).module != sim.topo.backbone()) continue;
    int f = 0;
    for (const auto& b : prog.ops) f += b.op.kind == disttrain::op_kind::forward ? 1 : 0;
    CHECK(f == 2 * 4);
    CHECK(prog.virtual_stages.size() == 2u);
  }
  // Same work in smaller pieces: interleaving shrinks the backbone's bubble.
  CHECK(sim.result.iteration_time < plain.result.iteration_time);
  // The closed form prices the interleaved plan within 15% of its simulation.
  const double closed = disttrain::evaluate(p, cm, req.sample_workload).iteration_time_s;
  CHECK(closed == Approx(sim.result.iteration_time).epsilon(0.15));
}

TEST_CASE("the planner interleaves where it pays and not when told not to") {
  const auto sc = disttrain::presets::scenario_preset("mllm-70b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const auto base = disttrain::plan_megatron_baseline(cm, req);
  disttrain::planner_options plain;
  plain.max_virtual_stages = 1;
  const auto base1 = disttrain::plan_megatron_baseline(cm, req, plain);
  CHECK(base1.plan.modules[1].virtual_stages == 1);
  CHECK(base.evaluation.iteration_time_s <= base1.evaluation.iteration_time_s);
  // mllm-70b's Megatron-style optimum interleaves (a short, deep-chunked pipeline).
  CHECK(base.plan.modules[1].virtual_stages > 1);
  CHECK(disttrain::evaluate(base.plan, cm, req.sample_workload).iteration_time_s ==
        base.evaluation.iteration_time_s);
  disttrain::planner_options bad;
  bad.max_virtual_stages = 0;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(cm, req, bad), errc::invalid_argument,
                        "planner.max_virtual_stages");
}
