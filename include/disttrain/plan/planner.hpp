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
/// @snippet plan.cpp planner

#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/plan/detail/search.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain {

/// @brief A planner's answer: the plan, its evaluation, and how long the
/// search took (wall clock; the plan itself never depends on timing).
/// @snippet plan.cpp plan_result
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

/// @brief The best plan of every `plan_class` of the planner's space (under
/// `opt`, objective ignored) whose closed-form time is at most `limit`, best
/// first; each is exact within its class. Adds the search's counters to
/// `stats`. Behind `plan_for_data` (`bind/data_plan.hpp`).
template <cost_model C>
[[nodiscard]] std::vector<ranked_plan> plan_classes(const C& cost, const plan_request& req,
                                                    const planner_options& opt, double limit,
                                                    planner_stats& stats) {
  plan_search<C> search(cost, req, opt);
  std::vector<ranked_plan> out = search.run_classes(limit);
  stats = search.stats();
  return out;
}

/// @brief Walks the exact time-vs-GPUs frontier for the objectives other than
/// `time`: best(G) (the best time with at most G GPUs) does not grow with G,
/// so searching again with at most one GPU fewer than the last answer visits
/// every frontier point in decreasing GPU order. `min_gpus_within` stops at
/// the first point beyond the tolerance; `throughput_per_gpu` keeps the least
/// time x GPUs (every plan p is dominated by the frontier point found with a
/// cap >= its GPUs: no more GPUs and no more time).
template <cost_model C>
[[nodiscard]] plan_result run_objective(const C& cost, const plan_request& req,
                                        const planner_options& opt) {
  require(std::isfinite(opt.within) && opt.within >= 0, "planner.within",
          "must be a finite fraction >= 0, got ", opt.within);
  require(opt.max_frontier_plans >= 1, "planner.max_frontier_plans", "must be >= 1, got ",
          opt.max_frontier_plans);
  plan_result chosen = run_planner(cost, req, opt);
  if (opt.objective == plan_objective::time) return chosen;
  const double best_time = chosen.evaluation.iteration_time_s;
  double solve_ms = chosen.solve_ms;
  long long steps = 1;
  auto cost_of = [](const plan_result& r) {
    return r.evaluation.iteration_time_s * static_cast<double>(r.evaluation.gpus);
  };
  planner_options o = opt;
  for (long long cap = chosen.evaluation.gpus - 1; cap >= 1;) {
    if (steps >= opt.max_frontier_plans)
      fail(errc::infeasible, "planner.max_frontier_plans", "the GPU frontier has more than ",
           opt.max_frontier_plans, " plans (down to ", cap + 1,
           " GPUs); raise max_frontier_plans or bound the search with max_gpus");
    o.max_gpus = cap;
    plan_result r;
    try {
      r = run_planner(cost, req, o);
    } catch (const error& e) {
      if (e.code() != errc::infeasible) throw;
      break;  // nothing fits on fewer GPUs: the frontier ends
    }
    ++steps;
    solve_ms += r.solve_ms;
    cap = r.evaluation.gpus - 1;  // the next frontier point has fewer GPUs
    if (opt.objective == plan_objective::min_gpus_within) {
      if (r.evaluation.iteration_time_s > best_time * (1.0 + opt.within)) break;
      chosen = std::move(r);
    } else if (cost_of(r) <= cost_of(chosen)) {
      chosen = std::move(r);
    }
  }
  chosen.solve_ms = solve_ms;
  chosen.stats.frontier_plans = steps;
  return chosen;
}
}  // namespace detail

/// @brief The best plan of the planner's space for `req` on `cost`'s model and
/// cluster under `opt.objective` (see the file comment and `plan_objective`).
/// Deterministic: the same inputs give the same plan bit for bit; ties are
/// broken by fewer GPUs, then the smallest (n, backbone tp, recompute, dp, pp,
/// virtual stages, side modules' choices) key. Throws `errc::infeasible`
/// naming the module/stage or GPU count when nothing fits,
/// `errc::invalid_argument` for bad options or requests.
template <cost_model C>
[[nodiscard]] plan_result plan_parallelism(const C& cost, const plan_request& req,
                                           const planner_options& opt = {}) {
  return detail::run_objective(cost, req, opt);
}

/// @brief The best Megatron-LM-style layout: one TP/PP/DP for the backbone,
/// the encoder on its first stage and the generator on its last (same DP, TP
/// where the module supports it), one recompute flag, Megatron-LM's even layer
/// split (pp divides the layer count), 1F1B or interleaved 1F1B (never ZB-H1),
/// searched over the same microbatch / TP / PP / DP candidates with the same
/// cost model. The planner's space contains
/// this one, so the baseline is never better.
template <cost_model C>
[[nodiscard]] plan_result plan_megatron_baseline(const C& cost, const plan_request& req,
                                                 planner_options opt = {}) {
  opt.include_monolithic = true;
  opt.include_disaggregated = false;
  opt.monolithic_splits = {layer_split_rule::even};
  opt.zero_bubble = false;
  return detail::run_objective(cost, req, opt);
}

}  // namespace disttrain
