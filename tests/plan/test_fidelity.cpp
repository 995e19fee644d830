// The cost model against published training runs (data/published_runs.json,
// docs/cost_model.md "Fidelity against published runs"): every run, fitted or
// held out, is predicted within 10% with the shipped parameters, and the fit
// that produced them is reproduced from the uncalibrated defaults.
#include <cmath>
#include <string>

#include "disttrain/core/json.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/fidelity.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
std::vector<published_run> load() {
  return read_published_runs(read_json_file(DISTTRAIN_PUBLISHED_RUNS));
}
}  // namespace

TEST_CASE("every published run is predicted within 10% by the shipped parameters") {
  const auto runs = load();
  REQUIRE(runs.size() >= 25);
  int fitted = 0, held_out = 0;
  for (const auto& r : runs) {
    const auto s = score_run(r, calibrated_cost_params(r.hardware));
    INFO(r.id << ": published " << r.published << ", predicted " << s.predicted);
    CHECK(std::abs(s.relative_error) <= 0.10);
    (r.split == "fit" ? fitted : held_out) += 1;
  }
  CHECK(fitted >= 5);
  CHECK(held_out >= 5);
}

TEST_CASE("the fit from the uncalibrated defaults reproduces the shipped A100 and H100 curves") {
  const auto runs = load();
  for (const std::string hw : {"a100", "h100"}) {
    INFO(hw);
    std::vector<published_run> mine;
    for (const auto& r : runs)
      if (r.hardware == hw) mine.push_back(r);
    const cost_params shipped = calibrated_cost_params(hw);
    const auto f = fit_runs(mine, shipped, cost_params{}.efficiency[1], {.flops_half = false});
    const auto& e = shipped.efficiency_for(module_role::backbone);
    CHECK(f.params.e_max == Approx(e.e_max).margin(0.005));
    CHECK(f.params.tp_penalty == Approx(e.tp_penalty).margin(0.002));
    CHECK(f.params.flops_half == e.flops_half);
    CHECK(f.max_abs_error <= 0.10);
    // Every role gets the curve, and it differs from the uncalibrated one.
    CHECK(shipped.efficiency[0] == e);
    CHECK(shipped.efficiency[2] == e);
    CHECK_FALSE(e == cost_params{}.efficiency[1]);
  }
  // GPU names map like preset names; the H800 (an H100 with less NVLink)
  // gets the H100 curve; unknown hardware keeps the uncalibrated defaults.
  CHECK(calibrated_cost_params("A100-SXM-80GB").efficiency[1] ==
        calibrated_cost_params("a100").efficiency[1]);
  CHECK(calibrated_cost_params("H100-SXM-80GB").efficiency[1] ==
        calibrated_cost_params("h100").efficiency[1]);
  CHECK(calibrated_cost_params("h800").efficiency[1] ==
        calibrated_cost_params("h100").efficiency[1]);
  CHECK(calibrated_cost_params("H800-SXM-80GB").efficiency[1] ==
        calibrated_cost_params("h100").efficiency[1]);
  CHECK(calibrated_cost_params("v100").efficiency[1] == cost_params{}.efficiency[1]);
}

TEST_CASE("analytic_cost_model(model, cluster) prices with the GPU's shipped curve") {
  for (const std::string preset : {"paper-72b", "mllm-7b"}) {
    INFO(preset);
    const auto sc = presets::scenario_preset(preset);
    const analytic_cost_model by_default(sc.model, sc.cluster);
    const analytic_cost_model shipped(sc.model, sc.cluster,
                                      calibrated_cost_params(sc.cluster.gpu.name));
    const analytic_cost_model uncalibrated(sc.model, sc.cluster, cost_params{});
    model_workload w;
    w.size = sc.model.modules.size();
    for (std::size_t k = 0; k < w.size; ++k) w[k].add_sequence(1024);
    const stage_config s{.module = 1, .first_layer = 0, .num_layers = 4, .tp = 4, .dp = 8};
    CHECK(by_default.stage_time(s, w[1]).forward_s == shipped.stage_time(s, w[1]).forward_s);
    CHECK(by_default.stage_time(s, w[1]).forward_s != uncalibrated.stage_time(s, w[1]).forward_s);
  }
}

TEST_CASE("a step-time run: the error is in throughput, and the memory check can be waived") {
  const auto runs = load();
  const published_run* t = nullptr;
  for (const auto& r : runs)
    if (t == nullptr && r.metric == "iteration_s" && r.check_memory) t = &r;
  REQUIRE(t != nullptr);
  const auto s = score_run(*t, calibrated_cost_params(t->hardware));
  CHECK(s.predicted == s.evaluation.iteration_time_s);
  // A faster prediction than published is an optimistic (positive) error.
  CHECK(s.relative_error == Approx(t->published / s.predicted - 1.0));
  published_run big = *t;
  big.tp = 1;  // a 15B model on one GPU per replica does not fit 80 GB
  DISTTRAIN_CHECK_ERROR(score_run(big, calibrated_cost_params(big.hardware)), errc::infeasible,
                        "gpt/stage 0");
  big.check_memory = false;
  CHECK(score_run(big, calibrated_cost_params(big.hardware)).evaluation.iteration_time_s > 0);
}

TEST_CASE("unfused attention and selective recompute are priced and kept as documented") {
  const auto runs = load();
  published_run r = runs.front();
  r.recompute = "off";
  r.attention = "flash";
  const double flash = score_run(r, cost_params{}).evaluation.iteration_time_s;
  r.attention = "unfused";
  const auto unfused = score_run(r, cost_params{}).evaluation;
  CHECK(unfused.iteration_time_s > flash);
  r.recompute = "selective";
  const auto selective = score_run(r, cost_params{}).evaluation;
  CHECK(selective.iteration_time_s > unfused.iteration_time_s);
  // Selective recompute keeps no score matrices: 5 bytes x heads x s^2 per layer less.
  const double scores =
      5.0 * r.arch.heads / r.tp * double(r.seq_len) * r.seq_len * r.arch.layers / r.pp;
  CHECK(unfused.stages[0].memory.activations - selective.stages[0].memory.activations ==
        Approx(scores).epsilon(1e-9));
}

TEST_CASE("published runs: bad input names the field") {
  json j = read_json_file(DISTTRAIN_PUBLISHED_RUNS);
  json bad = j;
  bad["runs"][0]["recompute"] = "partial";
  DISTTRAIN_CHECK_ERROR(read_published_runs(bad), errc::invalid_argument, "runs[0].recompute");
  bad = j;
  bad["runs"][1]["global_batch"] = 7;
  DISTTRAIN_CHECK_ERROR(read_published_runs(bad), errc::invalid_argument, "runs[1].global_batch");
  bad = j;
  bad["runs"][2]["hardware"] = "v100";
  DISTTRAIN_CHECK_ERROR(read_published_runs(bad), errc::invalid_argument, "runs[2].hardware");
  bad = j;
  bad["runs"][0]["speed"] = 1;
  DISTTRAIN_CHECK_ERROR(read_published_runs(bad), errc::parse_error, "runs[0]");
  bad = j;
  for (auto& r : bad["runs"]) r["split"] = "held_out";
  DISTTRAIN_CHECK_ERROR(fit_runs(read_published_runs(bad), cost_params{}, {}),
                        errc::invalid_argument, "runs");
}

TEST_CASE("recompute modes in plan JSON and attention_score_bytes in cost JSON") {
  const auto runs = load();
  published_run r = runs.front();
  r.recompute = "selective";
  parallel_plan p = run_plan(r);
  json j = p;
  CHECK(j["modules"][0]["recompute"] == "selective");
  parallel_plan back = j.get<parallel_plan>();
  CHECK(back.modules[0].selective_recompute);
  CHECK_FALSE(back.modules[0].recompute);
  j["modules"][0]["recompute"] = "full";
  back = j.get<parallel_plan>();
  CHECK(back.modules[0].recompute);
  CHECK_FALSE(back.modules[0].selective_recompute);
  j["modules"][0]["recompute"] = "some";
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.gpt.recompute");
  p.modules[0].recompute = true;  // and selective: exclusive
  DISTTRAIN_CHECK_ERROR(validate(p), errc::invalid_argument, "plan.gpt.recompute");

  cost_params c;
  c.attention_score_bytes = 13;
  const json cj = c;
  CHECK(disttrain::read_cost_params(cj, "cost").attention_score_bytes == 13);
  json neg = cj;
  neg["attention_score_bytes"] = -1;
  DISTTRAIN_CHECK_ERROR(disttrain::read_cost_params(neg, "cost"), errc::invalid_argument,
                        "cost.attention_score_bytes");
  // read_cost_params keeps the base's values for absent fields.
  CHECK(disttrain::read_cost_params(json::object(), "cost", calibrated_cost_params("a100"))
            .efficiency == calibrated_cost_params("a100").efficiency);
}
