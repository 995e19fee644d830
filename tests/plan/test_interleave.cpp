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

TEST_CASE("interleaved closed form: a colocated part runs whole in its chunk") {
  // Two stages of 0.4 s of layers; stage 0 also runs a 0.2 s colocated encoder
  // (whole, in chunk 0), v = 2. Path: the slowest stage (0.6) plus the other's
  // chunk 0.4 / 2. Period: chunk 0's wave max(0.2 + 0.2, 0.2) plus chunk 1's
  // max(0.2, 0.2): 0.6 = the stage's time; with 4 chunks 0.1 + 0.2 + 3 x 0.1 = 0.6 too.
  const std::vector<double> t{0.6, 0.4}, h{0.0, 0.0}, e{0.2, 0.0};
  const auto two = disttrain::detail::module_path({.stage_s = t, .hop_s = h, .fixed_s = e}, 0, 2);
  CHECK(two.path_s == Approx(0.6 + 0.2));
  CHECK(two.max_stage_s == Approx(0.6));
  // A heavier encoder on a lighter stage: 0.1 s of layers + 0.5 s encoder
  // on stage 0, 0.6 s of layers on stage 1. Chunk 0's wave: max(0.05 + 0.5,
  // 0.3) = 0.55, chunk 1's 0.3: 0.85, more than either stage's 0.6; half
  // ((p - 1) / p) of the excess 0.25 is charged: 0.725.
  const std::vector<double> t2{0.6, 0.6}, e2{0.5, 0.0};
  const auto w = disttrain::detail::module_path({.stage_s = t2, .hop_s = h, .fixed_s = e2}, 0, 2);
  CHECK(w.max_stage_s == Approx(0.6 + 0.25 / 2));
  CHECK(w.path_s == Approx(0.6 + 0.3));  // the first stage of equals is the slowest
  // No fixed parts: the same bits as before.
  const auto none = disttrain::detail::module_path({.stage_s = t, .hop_s = h}, 0, 2);
  const auto zero = disttrain::detail::module_path(
      {.stage_s = t, .hop_s = h, .fixed_s = std::vector<double>{0.0, 0.0}}, 0, 2);
  CHECK(none.path_s == zero.path_s);
  CHECK(none.max_stage_s == zero.max_stage_s);
  CHECK(none.loop_s == zero.loop_s);
}

TEST_CASE("interleaved closed form against simulate_plan: colocated parts, uneven stages") {
  // The closed form against the bound program it prices (expected batch),
  // over layer splits, chunk counts and colocation; docs/planner.md gives
  // the presets' figures.
  const auto sc = disttrain::presets::scenario_preset("mllm-7b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc.model, sc.data, 16, 64);
  double lo = 10, hi = 0;
  for (const bool colocated : {false, true})
    for (const int v : {2, 4})
      for (const std::vector<int>& layers :
           {std::vector<int>{16, 16}, std::vector<int>{8, 24}, std::vector<int>{8, 8, 8, 8},
            std::vector<int>{4, 12, 12, 4}}) {
        if (layers.front() % v != 0 || layers.back() % v != 0 || layers[1] % v != 0) continue;
        parallel_plan p;
        p.global_batch = 16;
        p.num_microbatches = 8;
        const int pp = static_cast<int>(layers.size());
        p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}},
                     module_plan{"llama-2-7b", "backbone", 2, pp, 2, layers},
                     module_plan{"sd-2.1-unet", "generator", 1, 1, 2, {25}}};
        if (colocated) {
          p.modules[0] = module_plan{"vit-h-14", "encoder", 2, 1, 2, {32}};
          p.modules[2] = module_plan{"sd-2.1-unet", "generator", 2, 1, 2, {25}};
          p.modules[0].colocated = p.modules[2].colocated = true;
        }
        p.modules[1].virtual_stages = v;
        const double closed = disttrain::evaluate(p, cm, req.sample_workload).iteration_time_s;
        const double sim =
            disttrain::simulate_plan(p, cm, req.sample_workload).result.iteration_time;
        CAPTURE(colocated, v, layers, closed, sim);
        lo = std::min(lo, sim / closed);
        hi = std::max(hi, sim / closed);
        CHECK(sim / closed >= 0.85);
        CHECK(sim / closed <= 1.05);
      }
  WARN("simulated / closed form: " << lo << " - " << hi);
}
