// DP gradient-sync overlap (Megatron-LM's --overlap-grad-reduce and
// --overlap-param-gather) in evaluate(), the planner and the cost model,
// checked against hand computation on the round-number mock cost model.
#include <cmath>

#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain_catch.hpp"
#include "mock_cost.hpp"

using disttrain::module_plan;
using disttrain::parallel_plan;
using disttrain::detail::exposed_behind;

namespace {

// The mock with the sync split by collective: 60% reduce-scatter, 40%
// all-gather, 1e8 parameters per layer and GPU (so 40M-parameter buckets).
struct split_mock : disttrain::testing::mock_cost {
  using mock_cost::mock_cost;
  [[nodiscard]] disttrain::dp_sync_times dp_sync(const disttrain::stage_config& s,
                                                 bool spans) const {
    const double t = dp_sync_time(s, spans);
    return {0.6 * t, 0.4 * t, t > 0 ? 1e8 * s.num_layers : 0.0};
  }
};
static_assert(disttrain::splits_dp_sync<split_mock>);
static_assert(!disttrain::splits_dp_sync<disttrain::testing::mock_cost>);

parallel_plan plan(bool grad, bool param) {
  parallel_plan p = disttrain::testing::mock_plan();
  p.overlap_grad_reduce = grad;
  p.overlap_param_gather = param;
  return p;
}

}  // namespace

TEST_CASE("a bucketed collective hides behind compute up to its last bucket") {
  CHECK(exposed_behind(0.0, 1.0, 10) == 0.0);
  CHECK(exposed_behind(1.0, 5.0, 1) == 1.0);             // one bucket: issued after the compute
  CHECK(exposed_behind(1.0, 0.0, 10) == 1.0);            // no compute to hide behind
  CHECK(exposed_behind(1.0, 100.0, 10) == Approx(0.1));  // long window: only the last bucket
  // Short window: the buckets queue up; x - window * (k - 1) / k.
  CHECK(exposed_behind(1.0, 0.5, 10) == Approx(1.0 - 0.45));
  // Never more than the collective, never less than one bucket.
  for (double w : {0.0, 0.01, 0.3, 2.0, 50.0})
    for (double k : {1.0, 2.0, 7.0, 64.0}) {
      const double e = exposed_behind(0.8, w, k);
      CHECK(e <= 0.8);
      CHECK(e >= 0.8 / k - 1e-15);
    }
}

TEST_CASE("overlapped sync matches the hand computation") {
  split_mock cm(16);
  const auto w = disttrain::testing::mock_sample();
  // Encoder stage (32 layers, tp 1, dp 2, 1 sample of 100 tokens): forward 0.0032 s, backward
  // 0.0064 s; sync 0.032 s = reduce-scatter 0.0192 + all-gather 0.0128; optimizer 0.0016 s;
  // 3.2e9 parameters = 80 buckets of 40M.
  const double rs = std::max(0.0192 / 80, 0.0192 - 0.0064 * 79 / 80);  // 0.01288
  const double ag = std::max(0.0128 / 80, 0.0128 - 0.0032 * 79 / 80);  // 0.00964
  const auto none = disttrain::evaluate(plan(false, false), cm, w);
  const auto grad = disttrain::evaluate(plan(true, false), cm, w);
  const auto both = disttrain::evaluate(plan(true, true), cm, w);
  CHECK(none.sync_time_s == Approx(0.0336));
  CHECK(grad.sync_time_s == Approx(rs + 0.0128 + 0.0016));
  CHECK(both.sync_time_s == Approx(rs + ag + 0.0016));
  // Backbone stages (16 layers, tp 2, dp 2, 1000 tokens): forward 0.008, backward 0.016; sync
  // 0.016 s in 40 buckets hides all but the last bucket of each collective.
  CHECK(both.stages[1].sync_s == Approx(0.0096 / 40 + 0.0064 / 40 + 0.0008));
  // The work itself is the same; only what is exposed changes, and the pipeline is untouched.
  for (std::size_t s = 0; s < both.stages.size(); ++s) {
    CHECK(both.stages[s].sync_total_s == none.stages[s].sync_total_s);
    CHECK(none.stages[s].sync_s == none.stages[s].sync_total_s);
    CHECK(both.stages[s].sync_s <= grad.stages[s].sync_s);
    CHECK(grad.stages[s].sync_s <= none.stages[s].sync_s);
  }
  CHECK(both.pipeline_time_s == none.pipeline_time_s);
  CHECK(both.iteration_time_s == Approx(both.pipeline_time_s + both.sync_time_s));
}

TEST_CASE("a cost model without dp_sync gets no overlap credit") {
  disttrain::testing::mock_cost cm(16);
  const auto w = disttrain::testing::mock_sample();
  CHECK(disttrain::evaluate(plan(true, true), cm, w).iteration_time_s ==
        disttrain::evaluate(plan(false, false), cm, w).iteration_time_s);
}

TEST_CASE("the analytic model splits its sync by collective") {
  const auto sc = disttrain::presets::scenario_preset("mllm-7b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const disttrain::stage_config s{.module = 1, .first_layer = 0, .num_layers = 8, .tp = 2, .dp = 8};
  const auto d = cm.dp_sync(s, true);
  CHECK(d.total_s() == cm.dp_sync_time(s, true));
  CHECK(d.reduce_scatter_s > 0);
  CHECK(d.all_gather_s > 0);
  CHECK(d.params == Approx(cm.stage_params(s) / 2));
  const auto one = cm.dp_sync(disttrain::stage_config{.module = 1, .num_layers = 8, .dp = 1}, true);
  CHECK(one.total_s() == 0.0);
}

TEST_CASE("planner and baseline plan with the overlap switches and score what they return") {
  const auto sc = disttrain::presets::scenario_preset("mllm-7b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  for (bool on : {false, true}) {
    disttrain::planner_options o;
    o.overlap_grad_reduce = on;
    o.overlap_param_gather = on;
    for (const auto& r :
         {disttrain::plan_parallelism(cm, req, o), disttrain::plan_megatron_baseline(cm, req, o)}) {
      CHECK(r.plan.overlap_grad_reduce == on);
      CHECK(r.plan.overlap_param_gather == on);
      CHECK(disttrain::evaluate(r.plan, cm, req.sample_workload).iteration_time_s ==
            r.evaluation.iteration_time_s);
    }
  }
  // Overlap never makes the optimum slower (every plan's time falls or stays).
  disttrain::planner_options off;
  off.overlap_grad_reduce = off.overlap_param_gather = false;
  CHECK(disttrain::plan_parallelism(cm, req).evaluation.iteration_time_s <=
        disttrain::plan_parallelism(cm, req, off).evaluation.iteration_time_s);
  CHECK(disttrain::plan_megatron_baseline(cm, req).evaluation.iteration_time_s <
        disttrain::plan_megatron_baseline(cm, req, off).evaluation.iteration_time_s);
}

TEST_CASE("plan JSON carries the overlap switches; absent means off") {
  const parallel_plan p = plan(true, false);
  const disttrain::json j = p;
  CHECK(j.at("overlap_grad_reduce") == true);
  CHECK(j.at("overlap_param_gather") == false);
  CHECK(j.get<parallel_plan>() == p);
  disttrain::json old = j;
  old.erase("overlap_grad_reduce");
  old.erase("overlap_param_gather");
  const auto q = old.get<parallel_plan>();
  CHECK_FALSE(q.overlap_grad_reduce);
  CHECK_FALSE(q.overlap_param_gather);
  disttrain::json bad = j;
  bad["overlap_grad_reduce"] = "yes";
  DISTTRAIN_CHECK_ERROR(bad.get<parallel_plan>(), disttrain::errc::parse_error,
                        "plan.overlap_grad_reduce");
}
