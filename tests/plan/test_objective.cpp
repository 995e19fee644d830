// Planner objectives (time, throughput per GPU, fewest GPUs within x% of the
// best time) against an independent reference: one exact time search per GPU
// cap, every cap from the cluster's size down to 1.
#include <cmath>
#include <limits>

#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::plan_objective;
using disttrain::planner_options;

namespace {

struct capped {
  bool feasible = false;
  disttrain::plan_result r;
};

// best(G) for every G in [1, N] (time objective, at most G GPUs).
std::vector<capped> every_cap(const disttrain::analytic_cost_model& cm,
                              const disttrain::plan_request& req, const planner_options& base) {
  std::vector<capped> out(static_cast<std::size_t>(cm.cluster().num_gpus) + 1);
  for (int g = 1; g <= cm.cluster().num_gpus; ++g) {
    planner_options o = base;
    o.max_gpus = g;
    try {
      out[static_cast<std::size_t>(g)] = {true, disttrain::plan_parallelism(cm, req, o)};
    } catch (const disttrain::error& e) {
      REQUIRE(e.code() == errc::infeasible);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("throughput_per_gpu and min_gpus_within match a search at every GPU cap") {
  for (const char* preset : {"mllm-7b", "mllm-13b"}) {
    auto sc = disttrain::presets::scenario_preset(preset);
    sc.cluster = disttrain::presets::h800_cluster(24);
    disttrain::analytic_cost_model cm(sc.model, sc.cluster);
    const auto req = disttrain::make_request(sc.model, sc.data, 32, 256);
    planner_options base;
    base.max_side_pp = 1;
    const auto caps = every_cap(cm, req, base);
    INFO(preset);
    // Reference optimum of time x GPUs (ties: fewer GPUs) over all plans: every plan with G GPUs
    // takes at least best(G), so the minimum over caps of best(G) x GPUs(best(G)) is it.
    double ref = std::numeric_limits<double>::infinity();
    long long ref_gpus = 0;
    for (const auto& c : caps) {
      if (!c.feasible) continue;
      const double x = c.r.evaluation.iteration_time_s * static_cast<double>(c.r.evaluation.gpus);
      if (x < ref || (x == ref && c.r.evaluation.gpus < ref_gpus)) {
        ref = x;
        ref_gpus = c.r.evaluation.gpus;
      }
    }
    planner_options o = base;
    o.objective = plan_objective::throughput_per_gpu;
    const auto t = disttrain::plan_parallelism(cm, req, o);
    CHECK(t.evaluation.iteration_time_s * static_cast<double>(t.evaluation.gpus) == ref);
    CHECK(t.evaluation.gpus == ref_gpus);
    CHECK(t.stats.frontier_plans >= 1);
    // Fewest GPUs within x of the best time on all GPUs.
    const double best = caps.back().r.evaluation.iteration_time_s;
    for (double within : {0.0, 0.05, 0.25}) {
      long long fewest = 0;
      for (std::size_t g = 1; g < caps.size() && fewest == 0; ++g)
        if (caps[g].feasible && caps[g].r.evaluation.iteration_time_s <= best * (1 + within))
          fewest = caps[g].r.evaluation.gpus;
      o.objective = plan_objective::min_gpus_within;
      o.within = within;
      const auto m = disttrain::plan_parallelism(cm, req, o);
      INFO("within " << within);
      CHECK(m.evaluation.gpus == fewest);
      CHECK(m.evaluation.iteration_time_s <= best * (1 + within));
      // The baseline honours the objective too.
      const auto b = disttrain::plan_megatron_baseline(cm, req, o);
      CHECK(b.evaluation.gpus <= cm.cluster().num_gpus);
    }
    // The time objective is unchanged: the best on all GPUs.
    CHECK(disttrain::plan_parallelism(cm, req, base).evaluation.iteration_time_s == best);
  }
}

TEST_CASE("objective options are validated and the frontier walk is bounded") {
  const auto sc = disttrain::presets::scenario_preset("mllm-7b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  planner_options o;
  o.within = -0.1;
  o.objective = plan_objective::min_gpus_within;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(cm, req, o), errc::invalid_argument,
                        "planner.within");
  o.within = std::numeric_limits<double>::quiet_NaN();
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(cm, req, o), errc::invalid_argument,
                        "planner.within");
  o = {};
  o.max_gpus = -1;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(cm, req, o), errc::invalid_argument,
                        "planner.max_gpus");
  o = {};
  o.objective = plan_objective::throughput_per_gpu;
  o.max_frontier_plans = 1;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(cm, req, o), errc::infeasible,
                        "planner.max_frontier_plans");
  // max_gpus caps the plan.
  o = {};
  o.max_gpus = 40;
  CHECK(disttrain::plan_parallelism(cm, req, o).evaluation.gpus <= 40);
}
