// plan_for_data (bind/data_plan.hpp): the planner's data objective, the mean
// iteration over sampled batches after the reorderer: its modes, determinism,
// finalists and errors. test_data_enumeration.cpp (label exhaustive) checks
// its choice against an enumeration scored by the simulator.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "disttrain/bind/data_plan.hpp"
#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/bind/json.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;

namespace {

struct small_case {
  const char* preset;
  int gpus;
  int batch;
};

disttrain::scenario make(const small_case& c) {
  auto s = disttrain::presets::scenario_preset(c.preset);
  s.cluster.num_gpus = c.gpus;
  s.global_batch_size = c.batch;
  return s;
}

}  // namespace

TEST_CASE("plan_for_data: the expected objective is plan_parallelism") {
  const auto sc = make({"mllm-7b", 16, 32});
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const auto d = disttrain::plan_for_data(cm, req, sc.data, {},
                                          {.objective = disttrain::data_objective::expected});
  const auto p = disttrain::plan_parallelism(cm, req);
  CHECK(d.objective == disttrain::data_objective::expected);
  CHECK(disttrain::json(d.result.plan) == disttrain::json(p.plan));
  CHECK(d.result.evaluation.iteration_time_s == p.evaluation.iteration_time_s);
  CHECK(d.predicted.seconds.empty());
  CHECK(d.batches == 0);
}

TEST_CASE("plan_for_data: data without variance plans for the expected batch") {
  auto sc = make({"mllm-7b", 16, 32});
  sc.data = disttrain::data_spec{};  // constant distributions
  CHECK_FALSE(disttrain::data_varies(sc.data));
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const auto d = disttrain::plan_for_data(cm, req, sc.data);
  CHECK(d.objective == disttrain::data_objective::expected);
  CHECK(disttrain::json(d.result.plan) ==
        disttrain::json(disttrain::plan_parallelism(cm, req).plan));
}

TEST_CASE("data_varies: distributions and records") {
  disttrain::data_spec d;
  CHECK_FALSE(disttrain::data_varies(d));
  d.text_tokens = disttrain::uniform_int_dist{5, 5};
  CHECK_FALSE(disttrain::data_varies(d));
  d.text_tokens = disttrain::uniform_int_dist{5, 6};
  CHECK(disttrain::data_varies(d));
  disttrain::data_spec r;
  disttrain::sample a;
  a.text_tokens = 10;
  disttrain::sample b = a;
  b.id = 7;  // ids differ: the samples do not
  r.records = {a, b};
  CHECK_FALSE(disttrain::data_varies(r));
  b.text_tokens = 11;
  r.records = {a, b};
  CHECK(disttrain::data_varies(r));
}

TEST_CASE("plan_for_data: deterministic, and its batches are held out") {
  const auto sc = make({"mllm-7b", 16, 32});
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const disttrain::data_plan_options o{.batches = 4};
  const auto a = disttrain::plan_for_data(cm, req, sc.data, {}, o);
  const auto b = disttrain::plan_for_data(cm, req, sc.data, {}, o);
  CHECK(a.objective == disttrain::data_objective::sampled);
  CHECK(disttrain::json(a.result.plan) == disttrain::json(b.result.plan));
  CHECK(a.predicted.seconds == b.predicted.seconds);
  CHECK(a.predicted.seconds.size() == 4);
  CHECK(a.first_sample == disttrain::data_plan_first_sample);
  CHECK(a.stats.screened >= 1);
  CHECK(a.stats.screened <= a.stats.classes);
  CHECK(a.result.evaluation.iteration_time_s >= a.expected_optimum_s);
  CHECK(a.predicted_mfu > 0);
  const auto j = disttrain::json(a);
  CHECK(j.at("objective") == "sampled");
  CHECK(j.at("predicted").at("seconds").size() == 4);
}

TEST_CASE("plan_for_data: finalists are simulated and the fastest is kept") {
  const auto sc = make({"mllm-7b", 16, 32});
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const auto d = disttrain::plan_for_data(cm, req, sc.data, {},
                                          {.batches = 3, .finalists = 3, .finalist_within = 1.0});
  REQUIRE(!d.finalists.empty());
  CHECK(d.stats.simulated == static_cast<long long>(d.finalists.size()));
  for (std::size_t i = 1; i < d.finalists.size(); ++i)
    CHECK(d.finalists[i - 1].simulated_s <= d.finalists[i].simulated_s);
  CHECK(disttrain::json(d.result.plan) == disttrain::json(d.finalists.front().plan));
  CHECK(d.predicted.mean_s == Approx(d.finalists.front().simulated_s).epsilon(1e-12));
  // The prediction is simulate_plan on the planner's batches.
  const auto batches = disttrain::sample_batches(sc.model, sc.data, sc.global_batch_size, 3,
                                                 disttrain::data_plan_first_sample);
  CHECK(d.predicted.seconds == disttrain::simulate_batches(d.result.plan, cm, batches).seconds);
}

TEST_CASE("plan_for_data rejects bad options") {
  const auto sc = make({"mllm-7b", 16, 32});
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  DISTTRAIN_CHECK_ERROR(disttrain::plan_for_data(cm, req, sc.data, {}, {.batches = -1}),
                        errc::invalid_argument, "data_plan_options.batches");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_for_data(cm, req, sc.data, {}, {.finalists = -1}),
                        errc::invalid_argument, "data_plan_options.finalists");
  DISTTRAIN_CHECK_ERROR(
      disttrain::plan_for_data(cm, req, sc.data, {}, {.finalist_within = std::nan("")}),
      errc::invalid_argument, "data_plan_options.finalist_within");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_for_data(cm, req, sc.data, {}, {.bound_slack = -1}),
                        errc::invalid_argument, "data_plan_options.bound_slack");
  disttrain::planner_options tp;
  tp.objective = disttrain::plan_objective::throughput_per_gpu;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_for_data(cm, req, sc.data, tp), errc::unsupported,
                        "planner.objective");
  DISTTRAIN_CHECK_ERROR((void)disttrain::parse_data_objective("mean", "--data-objective"),
                        errc::parse_error, "--data-objective");
}
