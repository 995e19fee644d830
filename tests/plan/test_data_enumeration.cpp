// plan_for_data (bind/data_plan.hpp) against an enumeration scored by the
// simulator on small cases: every plan class's best plan within twice the
// closed-form optimum, the planner under restrictions and the Megatron-style
// baseline, all simulated (simulate_plan, reordered) on held-out batches. The
// planner's choice must be within 2% of the best of them, and its prediction
// within 10% of its own simulated mean. Label exhaustive (about two minutes
// at -Og, over ten under ASan): .ci/run's exhaustive step runs it, the README's
// test command and the asan preset do not.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "disttrain/bind/data_plan.hpp"
#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain_catch.hpp"

namespace {

struct enum_case {
  const char* preset;
  int gpus;
  int batch;
};

// The planner with `o`, or nothing where no plan fits under the restriction.
void add_plan(std::vector<disttrain::parallel_plan>& out, const disttrain::analytic_cost_model& cm,
              const disttrain::plan_request& req, const disttrain::planner_options& o,
              bool baseline = false) {
  try {
    out.push_back(baseline ? disttrain::plan_megatron_baseline(cm, req, o).plan
                           : disttrain::plan_parallelism(cm, req, o).plan);
  } catch (const disttrain::error& e) {
    if (e.code() != disttrain::errc::infeasible) throw;
  }
}

}  // namespace

TEST_CASE("plan_for_data: within 2% of an enumeration scored by the simulator") {
  // Plain 1F1B (the sampled objective does not search interleaving). Sampled batches run
  // 1.0-1.7x their closed form on the presets, hence the factor 2; 12
  // held-out batches, as small batches vary much from one to the next.
  // hires-70b at 128 GPUs and batch 32 (2 microbatches) is left out: there
  // the planner's choice and the enumeration's best tie on its 128 batches
  // but differ by 3% on held-out ones (docs/planner.md, "Planning for the
  // data", limits).
  for (const enum_case c : {enum_case{"mllm-7b", 16, 32}, enum_case{"mllm-13b", 16, 32},
                            enum_case{"gen-70b", 64, 32}}) {
    CAPTURE(c.preset);
    auto sc = disttrain::presets::scenario_preset(c.preset);
    sc.cluster.num_gpus = c.gpus;
    sc.global_batch_size = c.batch;
    const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
    const auto req = disttrain::make_request(sc);
    disttrain::planner_options popt;
    popt.max_virtual_stages = 1;
    const auto d = disttrain::plan_for_data(cm, req, sc.data, popt);
    REQUIRE(d.objective == disttrain::data_objective::sampled);
    auto held = sc.data;
    held.seed = sc.data.seed + 1000;
    const auto batches = disttrain::sample_batches(sc.model, held, sc.global_batch_size, 12);
    const double chosen = disttrain::simulate_batches(d.result.plan, cm, batches).mean_s;

    std::vector<disttrain::parallel_plan> rivals;
    disttrain::planner_stats stats;
    for (auto& r :
         disttrain::detail::plan_classes(cm, req, popt, 2.0 * d.expected_optimum_s, stats))
      rivals.push_back(std::move(r.plan));
    INFO(rivals.size() << " classes");
    for (const int pp : {1, 2, 4}) {
      auto o = popt;
      o.max_backbone_pp = pp;
      add_plan(rivals, cm, req, o);
    }
    auto no_mixed = popt;
    no_mixed.include_mixed = false;
    add_plan(rivals, cm, req, no_mixed);
    add_plan(rivals, cm, req, popt, true);  // the Megatron-style baseline
    add_plan(rivals, cm, req, popt);        // the expected-batch optimum
    double best = std::numeric_limits<double>::infinity();
    for (const auto& p : rivals)
      best = std::min(best, disttrain::simulate_batches(p, cm, batches).mean_s);
    INFO("chosen " << chosen << " s, best of " << rivals.size() << " rivals " << best << " s");
    CHECK(chosen <= 1.02 * best);
    // The prediction (the planner's own batches) against the held-out simulation.
    CHECK(std::abs(d.predicted.mean_s / chosen - 1.0) <= 0.10);
  }
}
