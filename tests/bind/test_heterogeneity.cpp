// simulate_heterogeneity (bind/heterogeneity.hpp): the baseline and the plan
// simulated on sampled batches with arrival-order and reordered sample maps.
// Tests the mechanics (which map each case uses, the statistics, determinism,
// rejected inputs), not that a gain exceeds 1.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/bind/json.hpp"
#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;

namespace {

// mllm-7b on `gpus` H800s, batch 32, plain 1F1B (simulate_plan's program).
struct small_setup {
  disttrain::scenario sc;
  disttrain::analytic_cost_model cm;
  disttrain::plan_result ours, base;

  explicit small_setup(int gpus)
      : sc(make(gpus)), cm(sc.model, sc.cluster), ours(plan(false)), base(plan(true)) {}

  static disttrain::scenario make(int gpus) {
    auto s = disttrain::presets::scenario_preset("mllm-7b");
    s.cluster.num_gpus = gpus;
    s.global_batch_size = 32;
    return s;
  }
  disttrain::plan_result plan(bool baseline) const {
    disttrain::planner_options o;
    o.max_virtual_stages = 1;
    const auto req = disttrain::make_request(sc);
    return baseline ? disttrain::plan_megatron_baseline(cm, req, o)
                    : disttrain::plan_parallelism(cm, req, o);
  }
  // Batch `it` as simulate_heterogeneity draws it (data's own seed).
  std::vector<disttrain::model_workload> batch(std::size_t it) const {
    const disttrain::data_sampler s(sc.data);
    std::vector<disttrain::model_workload> w;
    const auto b = static_cast<std::size_t>(sc.global_batch_size);
    for (std::size_t i = 0; i < b; ++i)
      w.push_back(disttrain::workload_of(sc.model, s.draw(it * b + i)));
    return w;
  }
};

}  // namespace

TEST_CASE("summarize_times: mean, median, nearest-rank p90") {
  const auto odd = disttrain::summarize_times({1.0, 3.0, 2.0});
  CHECK(odd.mean_s == 2.0);
  CHECK(odd.median_s == 2.0);
  CHECK(odd.p90_s == 3.0);
  CHECK(odd.min_s == 1.0);
  CHECK(odd.max_s == 3.0);
  CHECK(odd.seconds == std::vector<double>{1.0, 3.0, 2.0});  // batch order kept
  const auto even = disttrain::summarize_times({4.0, 1.0, 3.0, 2.0});
  CHECK(even.median_s == 2.5);
  CHECK(even.p90_s == 4.0);
  std::vector<double> ten;
  for (int i = 10; i >= 1; --i) ten.push_back(i);
  CHECK(disttrain::summarize_times(ten).p90_s == 9.0);  // the 9th smallest of 10
  DISTTRAIN_CHECK_ERROR(disttrain::summarize_times({}), errc::invalid_argument, "seconds");
}

TEST_CASE("arrival_order: Megatron-LM's dealing, microbatches and DP shares in input order") {
  small_setup s(16);
  const auto& p = s.ours.plan;
  REQUIRE(p.num_microbatches == 16);  // 2 samples a microbatch
  const auto batch = s.batch(0);
  const auto map =
      disttrain::plan_sample_map(p, s.cm, std::span(batch), disttrain::sample_order::arrival);
  const std::size_t per_mb = batch.size() / map.microbatches;
  for (std::size_t i = 0; i < map.samples.size(); ++i) {
    INFO("sample " << i);
    CHECK(map.samples[i].id == i);
    CHECK(map.samples[i].microbatch == i / per_mb);
    for (std::size_t k = 0; k < map.modules; ++k)
      CHECK(map.samples[i].module[k].replica == (i % per_mb) / (per_mb / map.dp[k]));
  }
  // The same options through the reorderer directly give the same map.
  const auto pr = disttrain::reorder_for_plan(p, s.cm);
  const auto arrival = disttrain::arrival_order(pr.options);
  CHECK(arrival.modules == pr.options.modules);
  CHECK(arrival.microbatches == pr.options.microbatches);
  CHECK(arrival.stages == pr.options.stages);
  CHECK(arrival.order == disttrain::order_method::identity);
}

TEST_CASE("simulate_heterogeneity: each case is simulate_plan with its map") {
  small_setup s(16);
  const disttrain::heterogeneity_options opt{.iterations = 3};
  const auto h = disttrain::simulate_heterogeneity(s.base.plan, s.ours.plan, s.cm, s.sc.data, opt);
  CHECK(h.iterations == 3);
  CHECK(h.global_batch == 32);
  CHECK(h.seed == s.sc.data.seed);
  for (const auto* c :
       {&h.baseline_arrival, &h.plan_arrival, &h.plan_reordered, &h.baseline_reordered}) {
    REQUIRE(c->times.seconds.size() == 3);
    CHECK(c->times.min_s <= c->times.median_s);
    CHECK(c->times.median_s <= c->times.p90_s);
    CHECK(c->times.p90_s <= c->times.max_s);
    CHECK(c->mfu > 0);
    CHECK(c->expected_s > 0);
  }
  CHECK(h.baseline_arrival.gpus == s.base.plan.total_gpus());
  CHECK(h.plan_reordered.gpus == s.ours.plan.total_gpus());
  CHECK(h.baseline_reordered.gpus == s.base.plan.total_gpus());
  CHECK(h.baseline_reordered.expected_s == h.baseline_arrival.expected_s);
  CHECK(h.orchestration_gain == h.baseline_reordered.times.mean_s / h.plan_reordered.times.mean_s);
  CHECK(h.orchestration_gain_arrival ==
        h.baseline_arrival.times.mean_s / h.plan_arrival.times.mean_s);
  CHECK(h.reordering_gain == h.plan_arrival.times.mean_s / h.plan_reordered.times.mean_s);
  CHECK(h.total_gain == h.baseline_arrival.times.mean_s / h.plan_reordered.times.mean_s);

  // Batch 1 by hand: (b) is the plan with the arrival map, (c) with the
  // reorderer's map, (a) the baseline with its arrival map.
  const auto batch = s.batch(1);
  const std::span<const disttrain::model_workload> view(batch);
  const auto arrival =
      disttrain::plan_sample_map(s.ours.plan, s.cm, view, disttrain::sample_order::arrival);
  CHECK(disttrain::simulate_plan(s.ours.plan, s.cm, view, arrival).result.iteration_time ==
        h.plan_arrival.times.seconds[1]);
  CHECK(disttrain::simulate_plan(s.ours.plan, s.cm, view).result.iteration_time ==
        h.plan_reordered.times.seconds[1]);
  const auto base_arrival =
      disttrain::plan_sample_map(s.base.plan, s.cm, view, disttrain::sample_order::arrival);
  CHECK(disttrain::simulate_plan(s.base.plan, s.cm, view, base_arrival).result.iteration_time ==
        h.baseline_arrival.times.seconds[1]);
  // (d): the baseline with the reorderer's map.
  CHECK(disttrain::simulate_plan(s.base.plan, s.cm, view).result.iteration_time ==
        h.baseline_reordered.times.seconds[1]);
  // A "reordered" map equal to the arrival map simulates exactly as (b).
  auto same = arrival;
  same.iteration_time = -1.0;  // the objective's value plays no part in the simulation
  CHECK(disttrain::simulate_plan(s.ours.plan, s.cm, view, same).result.iteration_time ==
        h.plan_arrival.times.seconds[1]);
  // The reorderer's map is another map (else (b) and (c) would test nothing).
  CHECK(disttrain::plan_sample_map(s.ours.plan, s.cm, view) != arrival);
}

TEST_CASE("simulate_heterogeneity: deterministic, seeded, the plan against itself gains 1") {
  small_setup s(16);
  const auto& p = s.ours.plan;
  const disttrain::heterogeneity_options opt{.iterations = 2, .seed = 11};
  const auto h1 = disttrain::simulate_heterogeneity(s.base.plan, p, s.cm, s.sc.data, opt);
  const auto h2 = disttrain::simulate_heterogeneity(s.base.plan, p, s.cm, s.sc.data, opt);
  CHECK(disttrain::json(h1) == disttrain::json(h2));
  CHECK(h1.seed == 11);
  const auto other = disttrain::simulate_heterogeneity(s.base.plan, p, s.cm, s.sc.data,
                                                       {.iterations = 2, .seed = 12});
  CHECK(other.plan_arrival.times.seconds != h1.plan_arrival.times.seconds);
  // Baseline = plan: (a) and (b) are the same simulation.
  const auto self = disttrain::simulate_heterogeneity(p, p, s.cm, s.sc.data, opt);
  CHECK(self.orchestration_gain == 1.0);
  CHECK(self.orchestration_gain_arrival == 1.0);
  CHECK(self.baseline_arrival.times.seconds == self.plan_arrival.times.seconds);
  CHECK(self.baseline_reordered.times.seconds == self.plan_reordered.times.seconds);
  CHECK(self.plan_reordered.times.seconds == h1.plan_reordered.times.seconds);
  const auto j = disttrain::json(h1);
  for (const char* key :
       {"baseline_arrival", "plan_arrival", "plan_reordered", "baseline_reordered"}) {
    CHECK(j.at(key).contains("median_s"));
    CHECK(j.at(key).contains("p90_s"));
    CHECK(j.at(key).at("seconds").size() == 2);
  }
  CHECK(j.at("reordering_gain").get<double>() == h1.reordering_gain);
}

TEST_CASE("simulate_heterogeneity: an all-colocated pp=1 baseline simulates") {
  small_setup s(8);  // both plans: the whole model on every GPU, DP 8, one stage
  const auto& bp = s.base.plan;
  REQUIRE(bp.modules[bp.backbone_index()].pp == 1);
  for (const auto& m : bp.modules)
    if (m.role != "backbone") REQUIRE(m.colocated);
  const auto h =
      disttrain::simulate_heterogeneity(bp, s.ours.plan, s.cm, s.sc.data, {.iterations = 1});
  CHECK(h.baseline_arrival.times.seconds.at(0) > 0);
  const auto batch = s.batch(0);
  const auto sim = disttrain::simulate_plan(
      bp, s.cm, std::span(batch),
      disttrain::plan_sample_map(bp, s.cm, std::span(batch), disttrain::sample_order::arrival));
  CHECK(sim.world.world_size() == 8);
  CHECK(sim.result.iteration_time == h.baseline_arrival.times.seconds[0]);
}

TEST_CASE("simulate_heterogeneity and simulate_plan reject bad input") {
  small_setup s(16);
  const auto& p = s.ours.plan;
  for (const int n : {0, -1, disttrain::max_heterogeneity_iterations + 1})
    DISTTRAIN_CHECK_ERROR(
        disttrain::simulate_heterogeneity(s.base.plan, p, s.cm, s.sc.data, {.iterations = n}),
        errc::invalid_argument, "heterogeneity_options.iterations");
  auto other_batch = s.base.plan;
  other_batch.global_batch = 64;
  other_batch.num_microbatches = 2;
  DISTTRAIN_CHECK_ERROR(
      disttrain::simulate_heterogeneity(other_batch, p, s.cm, s.sc.data, {.iterations = 1}),
      errc::invalid_argument, "baseline.global_batch");
  auto gpipe = s.base.plan;
  gpipe.schedule = disttrain::plan_schedule::gpipe;
  DISTTRAIN_CHECK_ERROR(
      disttrain::simulate_heterogeneity(gpipe, p, s.cm, s.sc.data, {.iterations = 1}),
      errc::unsupported, "plan.schedule");
  // A map of another plan (other segments / microbatches) is refused.
  const auto batch = s.batch(0);
  const std::span<const disttrain::model_workload> view(batch);
  const auto base_map = disttrain::plan_sample_map(s.base.plan, s.cm, view);
  DISTTRAIN_CHECK_ERROR(disttrain::simulate_plan(p, s.cm, view, base_map), errc::invalid_argument,
                        "simulate_plan.map");
  const auto map = disttrain::plan_sample_map(p, s.cm, view);
  DISTTRAIN_CHECK_ERROR(disttrain::simulate_plan(p, s.cm, view.first(16), map),
                        errc::invalid_argument, "simulate_plan.map");
}
