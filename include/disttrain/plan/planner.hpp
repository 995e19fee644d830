#pragma once
/// @file planner.hpp
/// @brief The parallelism planner (disaggregated model orchestration) and the
/// Megatron-LM-style baseline, both exact over their search spaces.
///
/// `plan_parallelism` chooses, for every module, its GPUs, TP, PP, DP, layers
/// per stage and recompute, plus the microbatch count, minimising the modelled
/// iteration time (`evaluate`) subject to per-GPU memory, the cluster's GPU
/// count and TP groups inside nodes. Its space contains the baseline's, so the
/// baseline is never better. The algorithm (branch and bound over backbone
/// configurations, monotone per-module option lists, bounded pairing of the
/// encoder and generator) and its complexity are in docs/planner.md.
///
/// @code
/// auto sc = disttrain::presets::scenario_preset("paper-72b");
/// disttrain::analytic_cost_model cm(sc.model, sc.cluster);
/// auto req = disttrain::make_request(sc);
/// disttrain::plan_result ours = disttrain::plan_parallelism(cm, req);
/// disttrain::plan_result base = disttrain::plan_megatron_baseline(cm, req);
/// double speedup = base.evaluation.iteration_time_s / ours.evaluation.iteration_time_s;
/// @endcode

#include <chrono>
#include <cmath>

#include "disttrain/core/error.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/plan/detail/search.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain {

/// @brief A planner's answer: the plan, its evaluation, and how long the
/// search took (wall clock; the plan itself never depends on timing).
/// @code std::printf("%.2f ms\n", result.solve_ms); @endcode
struct plan_result {
  parallel_plan plan;
  plan_evaluation evaluation;
  double solve_ms = 0;
  planner_stats stats;
};

namespace detail {
template <cost_model C>
[[nodiscard]] plan_result run_planner(const C& cost, const plan_request& req,
                                      const planner_options& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  plan_search<C> search(cost, req, opt);
  ranked_plan best = search.run();
  const auto t1 = std::chrono::steady_clock::now();
  plan_result r;
  r.plan = std::move(best.plan);
  r.solve_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  r.stats = search.stats();
  r.evaluation = evaluate(r.plan, cost, req.sample_workload);
  ensure(r.evaluation.iteration_time_s == best.time, "planner", "evaluate() gives ",
         r.evaluation.iteration_time_s, " s, the search ", best.time,
         " s (the cost model breaks an assumption of docs/planner.md: costs depending on more than "
         "layer count, "
         "first/last layer and dp)");
  return r;
}
}  // namespace detail

/// @brief The best plan of the planner's space for `req` on `cost`'s model and
/// cluster (see the file comment). Deterministic: the same inputs give the
/// same plan bit for bit; ties are broken by fewer GPUs, then the smallest
/// (n, backbone tp, recompute, dp, pp, side modules' choices) key.
/// Throws `errc::infeasible` naming the module/stage or GPU count when nothing
/// fits, `errc::invalid_argument` for bad options or requests.
template <cost_model C>
[[nodiscard]] plan_result plan_parallelism(const C& cost, const plan_request& req,
                                           const planner_options& opt = {}) {
  return detail::run_planner(cost, req, opt);
}

/// @brief The best Megatron-LM-style layout: one TP/PP/DP for the backbone,
/// the encoder on its first stage and the generator on its last (same DP, TP
/// where the module supports it), one recompute flag, Megatron-LM's even layer
/// split (pp divides the layer count), searched over the same microbatch / TP /
/// PP / DP candidates with the same cost model. The planner's space contains
/// this one, so the baseline is never better.
template <cost_model C>
[[nodiscard]] plan_result plan_megatron_baseline(const C& cost, const plan_request& req,
                                                 planner_options opt = {}) {
  opt.include_monolithic = true;
  opt.include_disaggregated = false;
  opt.monolithic_splits = {layer_split_rule::even};
  return detail::run_planner(cost, req, opt);
}

inline void to_json(json& j, const planner_stats& s) {
  j = json{{"backbone_configs", s.backbone_configs},
           {"backbone_expanded", s.backbone_expanded},
           {"side_lists", s.side_lists},
           {"side_options", s.side_options},
           {"pairs_evaluated", s.pairs_evaluated},
           {"monolithic_configs", s.monolithic_configs}};
}

}  // namespace disttrain
