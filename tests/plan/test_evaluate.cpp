// evaluate(): the 1F1B closed form, memory, MFU and bubble checked against
// hand computation on the round-number mock cost model (mock_cost.hpp).
#include <algorithm>
#include <string>

#include "disttrain/plan/evaluate.hpp"
#include "disttrain_catch.hpp"
#include "mock_cost.hpp"

using disttrain::errc;
using disttrain::module_plan;
using disttrain::parallel_plan;

namespace {

parallel_plan disaggregated() {
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 4;  // n = 2 samples per microbatch
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}},
               module_plan{"llama-2-7b", "backbone", 2, 2, 2, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
  return p;
}

parallel_plan monolithic() {
  parallel_plan p = disaggregated();
  p.modules[0] = module_plan{"vit-h-14", "encoder", 2, 1, 2, {32}, false, true};
  p.modules[2] = module_plan{"sd-2.1-unet", "generator", 1, 1, 2, {25}, false, true};
  return p;
}

}  // namespace

TEST_CASE("closed form of a disaggregated plan matches the hand computation") {
  disttrain::testing::mock_cost cm(16);
  const auto e = disttrain::evaluate(disaggregated(), cm, disttrain::testing::mock_sample());
  // Stage times: encoder 3*32*1e-6*100 = 0.0096 (1 sample/replica), backbone 3*16*1e-6*1000/2 = 0.024
  // per stage, generator 3*25*1e-6*100 = 0.0075 (dp 1: 2 samples).
  REQUIRE(e.stages.size() == 4);
  CHECK(e.stages[0].time_s == Approx(0.0096));
  CHECK(e.stages[1].time_s == Approx(0.024));
  CHECK(e.stages[3].time_s == Approx(0.0075));
  CHECK(e.stages[3].replica_samples == 2);
  // Placement (8 GPUs a node): encoder ranks 0-1, backbone stage 0 ranks 2-5, stage 1 ranks 6-9
  // (straddles nodes 0 and 1), generator rank 10.
  // Paths: encoder 0.0096 + boundary over NVLink (ranks 0-5 in node 0) 2*max(1e8/1e11, 5e7/1e11)
  // = 0.0116; backbone 0.024 + hop over the NIC (ranks 2-9) 2*5e8/1e10 + 0.024 = 0.148;
  // generator 0.0075 + NIC boundary 2*max(5e8/1e10, 2e9/1e10) = 0.4075.
  // Period: max(slowest stage 0.024, path / P = 0.5671 / 4): the transfer-bound loop.
  const double path = 0.0116 + 0.148 + 0.4075;
  const double pipeline = 3 * (path / 4) + path;
  CHECK(e.pipeline_time_s == Approx(pipeline));
  // Sync: encoder dp 2: 1e-3*32 + 1e-4*32/2 = 0.0336 is the largest.
  CHECK(e.sync_time_s == Approx(0.0336));
  CHECK(e.iteration_time_s == Approx(pipeline + 0.0336));
  // 1F1B in flight: min(P - s, m) with P = 4, m = 4.
  CHECK(e.stages[0].in_flight == 4);
  CHECK(e.stages[1].in_flight == 3);
  CHECK(e.stages[2].in_flight == 2);
  CHECK(e.stages[3].in_flight == 1);
  // Memory of backbone stage 0: 1e8*16/2 + 4e8*16/4 + 3*16*1e6*1000/2.
  CHECK(e.stages[1].memory_bytes == Approx(8e8 + 1.6e9 + 2.4e10));
  CHECK(e.max_memory_bytes == Approx(2.64e10));
  // MFU: model FLOPs of 8 samples = 6e9*(32*800 + 32*8000 + 25*400) on 11 GPUs at 1e15.
  CHECK(e.gpus == 11);
  CHECK(e.model_flops == Approx(6e9 * (32 * 800.0 + 32 * 8000.0 + 25 * 400.0)));
  CHECK(e.mfu == Approx(e.model_flops / (e.iteration_time_s * 11 * 1e15)));
  CHECK(e.bubble_fraction == Approx(1 - 4 * (0.0096 + 0.024 + 0.024 + 0.0075) / (4 * pipeline)));
  CHECK(e.samples_per_s == Approx(8 / e.iteration_time_s));
}

TEST_CASE("colocated modules add their work, memory and sync to the backbone's end stages") {
  disttrain::testing::mock_cost cm(16);
  const auto e = disttrain::evaluate(monolithic(), cm, disttrain::testing::mock_sample());
  REQUIRE(e.stages.size() == 2);
  CHECK(e.gpus == 8);
  CHECK(e.stages[0].colocated == std::vector<std::string>{"vit-h-14"});
  CHECK(e.stages[1].colocated == std::vector<std::string>{"sd-2.1-unet"});
  // Stage 0: encoder at tp 2 (0.0048) + backbone 0.024; stage 1: 0.024 + UNet tp 1, 1 sample (0.00375).
  CHECK(e.stages[0].time_s == Approx(0.0288));
  CHECK(e.stages[1].time_s == Approx(0.02775));
  // Period max(0.0288, (0.0288 + 0.01 + 0.02775) / 2 = 0.033275).
  CHECK(e.pipeline_time_s == Approx(3 * 0.033275 + 0.06655));
  // Stage 0 sync: encoder (0.032 + 0.0016) + backbone (0.016 + 0.0008).
  CHECK(e.sync_time_s == Approx(0.0504));
  CHECK(e.iteration_time_s == Approx(3 * 0.033275 + 0.06655 + 0.0504));
}

TEST_CASE("GPipe keeps every microbatch in flight") {
  disttrain::testing::mock_cost cm(16);
  auto p = disaggregated();
  p.schedule = disttrain::plan_schedule::gpipe;
  const auto g = disttrain::evaluate(p, cm, disttrain::testing::mock_sample());
  const auto f = disttrain::evaluate(disaggregated(), cm, disttrain::testing::mock_sample());
  for (const auto& s : g.stages) CHECK(s.in_flight == 4);
  CHECK(g.iteration_time_s == f.iteration_time_s);
  CHECK(g.stages[2].memory_bytes > f.stages[2].memory_bytes);
}

TEST_CASE("ZB-H1 takes f (sum W - max W) off the pipeline and keeps min(P, m) in flight") {
  disttrain::testing::mock_cost cm(16);
  cm.weight_share = 0.5;  // F = B = W
  const auto w = disttrain::testing::mock_sample();
  auto p = disaggregated();
  const auto f = disttrain::evaluate(p, cm, w);
  p.schedule = disttrain::plan_schedule::zb_h1;
  const auto z = disttrain::evaluate(p, cm, w);
  REQUIRE(z.stages.size() == 4);
  double w_sum = 0, w_max = 0;
  for (const auto& s : z.stages) {
    CHECK(s.in_flight == 4);  // min(P = 4, m = 4) on every stage
    w_sum += s.time_s / 3;
    w_max = std::max(w_max, s.time_s / 3);
  }
  CHECK(f.stages[3].in_flight == 1);
  CHECK(z.stages[3].memory_bytes > f.stages[3].memory_bytes);
  CHECK(z.pipeline_time_s == Approx(f.pipeline_time_s - 2 * (w_sum - w_max)).epsilon(1e-12));
  CHECK(z.sync_time_s == f.sync_time_s);
  CHECK(z.iteration_time_s < f.iteration_time_s);
  // Fewer microbatches than stages: the credit factor is 1 + (m - 1) / (P - 1), not 2.
  auto few = disaggregated();
  few.num_microbatches = 2;
  const auto f2 = disttrain::evaluate(few, cm, w);
  few.schedule = disttrain::plan_schedule::zb_h1;
  const auto z2 = disttrain::evaluate(few, cm, w);
  double w2_sum = 0, w2_max = 0;
  for (const auto& s : z2.stages) {
    CHECK(s.in_flight == 2);
    w2_sum += s.time_s / 3;
    w2_max = std::max(w2_max, s.time_s / 3);
  }
  CHECK(z2.pipeline_time_s ==
        Approx(f2.pipeline_time_s - (1.0 + 1.0 / 3) * (w2_sum - w2_max)).epsilon(1e-12));
  // Without W (the backward not split in the cost model) ZB-H1 prices as 1F1B, bit for bit.
  cm.weight_share = 0;
  CHECK(disttrain::evaluate(p, cm, w).iteration_time_s ==
        disttrain::evaluate(disaggregated(), cm, w).iteration_time_s);
}

TEST_CASE("an over-memory plan is rejected naming module, stage and bytes over") {
  disttrain::testing::mock_cost cm(16, 2.5e10);
  try {
    (void)disttrain::evaluate(disaggregated(), cm, disttrain::testing::mock_sample());
    FAIL("no throw");
  } catch (const disttrain::error& e) {
    CHECK(e.code() == errc::infeasible);
    CHECK(e.where() == "llama-2-7b/stage 0");
    CHECK(std::string(e.message()).find("over by 1.4 GB (1400000000 bytes)") != std::string::npos);
  }
  // Without the check the report still says which stage is over.
  const auto r = disttrain::evaluate(disaggregated(), cm, disttrain::testing::mock_sample(),
                                     disttrain::evaluate_options{false});
  CHECK(r.max_memory_bytes > r.memory_limit_bytes);
}

TEST_CASE("plans that do not match the model or cluster are rejected with the field") {
  disttrain::testing::mock_cost cm(16);
  const auto w = disttrain::testing::mock_sample();
  auto p = disaggregated();
  p.modules[1].layers = {16, 15};
  DISTTRAIN_CHECK_ERROR(disttrain::evaluate(p, cm, w), errc::invalid_argument,
                        "plan.llama-2-7b.layers");
  p = disaggregated();
  p.modules[0].name = "clip";
  DISTTRAIN_CHECK_ERROR(disttrain::evaluate(p, cm, w), errc::invalid_argument,
                        "plan.modules[0].name");
  p = disaggregated();
  p.modules[1].dp = 1;
  p.modules[2].dp = 2;
  p.modules[0].dp = 1;  // encoder 1 GPU: the backbone (tp 2) would start at rank 1
  DISTTRAIN_CHECK_ERROR(disttrain::evaluate(p, cm, w), errc::invalid_argument,
                        "plan.llama-2-7b.tp");
  disttrain::testing::mock_cost small(8);
  DISTTRAIN_CHECK_ERROR(disttrain::evaluate(disaggregated(), small, w), errc::infeasible,
                        "plan.total_gpus");
  p = disaggregated();
  p.gpus_per_node = 4;
  DISTTRAIN_CHECK_ERROR(disttrain::evaluate(p, cm, w), errc::invalid_argument,
                        "plan.gpus_per_node");
}
