// simulate_plan: a plan simulated as it would run (topology -> chain -> the
// batch's sample map -> bind_world -> simulate_bound) agrees with evaluate's
// closed form where that is exact, stays within a measured band of it on a
// disaggregated plan, and exports a trace of the bound world.
#include <string>
#include <vector>

#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/schedule/validate_bound.hpp"
#include "disttrain/schedule/zero_bubble.hpp"
#include "disttrain/sim/trace.hpp"
#include "disttrain_catch.hpp"
#include "mock_cost.hpp"

using disttrain::errc;
using disttrain::module_plan;
using disttrain::parallel_plan;

TEST_CASE("a single-module-chain plan simulates to its closed form") {
  // Monolithic plan, dp 1, two equal backbone stages, encoder and generator
  // colocated on the first / last stage: 1F1B with m microbatches costs
  // (m - 1) * max + sum (+ sync).
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
  CHECK(s.topo.world_size() == 2);
  CHECK(s.world.num_microbatches == 8);
  CHECK_NOTHROW(disttrain::validate_bound(s.world));
  // The same pipeline: measured 1.2% below the closed form, which puts the
  // transfers on the critical path that the simulation overlaps with the next
  // forward; 2% leaves room for float noise only.
  CHECK(s.result.iteration_time < e.iteration_time_s);
  CHECK(s.result.iteration_time == Approx(e.iteration_time_s).epsilon(0.02));
  const auto trace = disttrain::to_trace_json(s.world, s.result, &s.topo);
  CHECK(trace.dump().find("llama-2-7b stage 1") != std::string::npos);
}

TEST_CASE("an all-colocated plan with one pipeline stage simulates (a chain without links)") {
  // Megatron-style at small scale: every module on every GPU, pp 1, dp 2.
  // bind_world used to read the message index of a chain with no link
  // (out of bounds: a crash).
  disttrain::testing::mock_cost cm(16);
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 4;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}, false, true},
               module_plan{"llama-2-7b", "backbone", 1, 1, 2, {32}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 2, {25}, false, true}};
  const auto w = disttrain::testing::mock_sample();
  const auto s = disttrain::simulate_plan(p, cm, w);
  CHECK(s.topo.world_size() == 2);
  CHECK(s.shapes.empty());
  CHECK_NOTHROW(disttrain::validate_bound(s.world));
  for (const auto& prog : s.world.programs)
    for (const auto& b : prog.ops) CHECK(b.op.peer < 0);  // no message: nothing to send
  // No pipeline, no transfer: m microbatches back to back plus the sync, the
  // closed form exactly (measured equal; the tolerance is float noise).
  const auto e = disttrain::evaluate(p, cm, w);
  INFO("simulated " << s.result.iteration_time << " s, evaluated " << e.iteration_time_s << " s");
  CHECK(s.result.iteration_time == Approx(e.iteration_time_s).epsilon(1e-9));
}

TEST_CASE("a disaggregated plan simulates every rank's bound program") {
  disttrain::testing::mock_cost cm(16);
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 4;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}},
               module_plan{"llama-2-7b", "backbone", 2, 2, 2, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
  const auto w = disttrain::testing::mock_sample();
  const auto s = disttrain::simulate_plan(p, cm, w);
  CHECK(s.world.world_size() == 2 + 8 + 1);  // every GPU, TP ranks included
  CHECK(s.world.num_microbatches == 4);      // split microbatches: m, not m * dp
  CHECK(s.map.samples.size() == 8);
  CHECK_NOTHROW(disttrain::validate_bound(s.world));
  // Every TP rank of a backbone replica receives the full activation (TP
  // fan-out), so there are messages of both route phases.
  bool fan_out = false;
  for (const auto& prog : s.world.programs)
    for (const auto& b : prog.ops) fan_out = fan_out || b.phase == 1;
  CHECK(fan_out);
  // Gap to evaluate's closed form. On the presets (analytic cost model,
  // docs/planner.md) simulated / evaluated is 0.90 .. 1.02. This mock plan is
  // transfer-bound (1 MB per token over 10 GB/s), where the closed form counts
  // every boundary transfer into the period and the simulation overlaps
  // transfers with compute: measured 0.644 (0.734 before links followed the
  // placement: backbone stage 1 on ranks 6-9 straddles two nodes, so the
  // closed form's hop is now the NIC's, which the simulation partly overlaps).
  // Band: the presets' and this plan's range, +-5%.
  const auto e = disttrain::evaluate(p, cm, w);
  const double ratio = s.result.iteration_time / e.iteration_time_s;
  INFO("simulated / evaluated = " << ratio);
  CHECK(ratio > 0.61);
  CHECK(ratio < 1.07);
}

TEST_CASE("simulate_plan runs a given batch and rejects a batch of another model") {
  disttrain::testing::mock_cost cm(16);
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 2;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}},
               module_plan{"llama-2-7b", "backbone", 1, 1, 2, {32}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 2, {25}, false, true}};
  const auto w = disttrain::testing::mock_sample();
  // A batch of the mean sample is the expected batch; twice the work per
  // sample takes longer (the analytic-free mock is linear in tokens).
  std::vector<disttrain::model_workload> batch(8, w), heavy(8, w * 2.0);
  const auto a = disttrain::simulate_plan(p, cm, std::span<const disttrain::model_workload>(batch));
  const auto b = disttrain::simulate_plan(p, cm, std::span<const disttrain::model_workload>(heavy));
  CHECK(a.result.iteration_time == disttrain::simulate_plan(p, cm, w).result.iteration_time);
  CHECK(b.result.iteration_time > 1.5 * a.result.iteration_time);
  auto bad = batch;
  bad[3].size = 2;
  DISTTRAIN_CHECK_ERROR(
      disttrain::simulate_plan(p, cm, std::span<const disttrain::model_workload>(bad)),
      errc::invalid_argument, "simulate_plan.batch[3]");
  DISTTRAIN_CHECK_ERROR(
      disttrain::simulate_plan(p, cm, std::span<const disttrain::model_workload>()),
      errc::invalid_argument, "simulate_plan.batch");
}

TEST_CASE("a zb_h1 plan runs ZB-H1's order and stays near its closed form") {
  disttrain::testing::mock_cost cm(16);
  cm.weight_share = 0.5;  // F = B = W
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 8;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 1, {32}, false, true},
               module_plan{"llama-2-7b", "backbone", 1, 4, 1, {8, 8, 8, 8}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}, false, true}};
  const auto w = disttrain::testing::mock_sample();
  const auto s1 = disttrain::simulate_plan(p, cm, w);
  const auto e1 = disttrain::evaluate(p, cm, w);
  p.schedule = disttrain::plan_schedule::zb_h1;
  const auto sz = disttrain::simulate_plan(p, cm, w);
  const auto ez = disttrain::evaluate(p, cm, w);
  // Every chain stage's compute ops are ZB-H1's.
  REQUIRE(sz.chain.ops.size() == 4);
  for (int r = 0; r < 4; ++r) {
    std::vector<disttrain::schedule_op> compute;
    for (const auto& o : sz.chain.ops[static_cast<std::size_t>(r)])
      if (o.kind == disttrain::op_kind::forward || o.kind == disttrain::op_kind::backward ||
          o.kind == disttrain::op_kind::weight)
        compute.push_back(o);
    CHECK(compute ==
          disttrain::zb_h1_ops({.stages = 4, .position = r, .microbatches = 8, .op_stage = r}));
  }
  CHECK_NOTHROW(disttrain::validate_bound(sz.world));
  INFO("1f1b: simulated " << s1.result.iteration_time << " s, evaluated " << e1.iteration_time_s
                          << " s; zb_h1: simulated " << sz.result.iteration_time << " s, evaluated "
                          << ez.iteration_time_s << " s");
  CHECK(sz.result.iteration_time < s1.result.iteration_time);
  // Measured 0.954 here (1F1B: 0.988); on the presets (analytic cost model, their 1F1B
  // plans run as ZB-H1) 0.91 .. 1.02, as 1F1B's 0.89 .. 1.01.
  CHECK(sz.result.iteration_time / ez.iteration_time_s > 0.9);
  CHECK(sz.result.iteration_time / ez.iteration_time_s < 1.03);
  // GPipe has no bound chain program: refused, not run as 1F1B.
  p.schedule = disttrain::plan_schedule::gpipe;
  DISTTRAIN_CHECK_ERROR(disttrain::simulate_plan(p, cm, w), errc::unsupported, "plan.schedule");
}
