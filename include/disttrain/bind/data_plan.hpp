#pragma once
/// @file data_plan.hpp
/// @brief Planning for the data: the plan that minimises the mean iteration
/// time over *sampled* global batches after the reorderer, not the closed
/// form of the expected batch (docs/planner.md, "Planning for the data").
///
/// Real batches are drawn from a heavy-tailed distribution: every microbatch
/// cell costs what its samples cost, a 1F1B pipeline runs at the pace of its
/// slowest cells, and the reorderer only partly repairs that. How much is
/// left depends on the samples per cell (n / dp), the microbatch count and
/// the pipeline depth, which the closed form cannot see. `plan_for_data`:
///
/// 1. draws `batches` global batches of the data (the planner's own: sample
///    ids from `data_plan_first_sample`, so they never overlap the batches
///    `simulate_heterogeneity` draws from id 0);
/// 2. plans for the expected batch (`plan_parallelism`'s exact search) and
///    scores that plan with the *chain model* below: h0;
/// 3. runs the same exact search in pool mode (`detail::plan_classes`): the
///    best closed-form plan of every class (samples per microbatch, backbone
///    dp and pp, schedule, which side modules are colocated: what data
///    heterogeneity acts on) whose closed form is at most h0;
/// 4. scores the classes in increasing closed-form order with the chain
///    model, stopping at the first whose closed form is above the best mean
///    so far, and stopping a class's batches early once even closed-form
///    batches could not bring its mean under the best (both rest on A7);
/// 5. simulates the `finalists` best by the chain model (within
///    `finalist_within` of the best, while their GPUs x microbatches x
///    batches fit `simulation_budget`) with `simulate_plan` on the same
///    batches and the reorderer's maps, and returns the one of least
///    simulated mean, whose
///    simulated times are the prediction (`predicted`); without a finalist,
///    the best by the chain model and its chain-model times.
///
/// The screening reorder (`sample_order::screening`, `screening_order`):
/// the reorderer with size-sorted slots, LPT balance and 100 order
/// evaluations, 0.2-1 ms a batch on the presets where the defaults take up
/// to 240 ms; its maps simulate 0.2-1.6% slower than the defaults' (so the
/// prediction errs on the slow side).
///
/// The chain model of a plan on one batch: the screening reorder's map for
/// the plan, every cell priced by the cost model
/// (`plan_bound_durations`), then one 1F1B recurrence (`pipeline_time`)
/// per backbone replica ("lane"): the backbone's stages with that replica's
/// own F and B per microbatch, every other module's stages with the slowest
/// of the replicas holding the lane's samples in that microbatch; the
/// slowest lane, plus the closed form's exposed DP sync. Hops cost the
/// closed form's point-to-point time; a ZB-H1 or interleaved plan's
/// pipeline is scaled by its closed form's ratio to plain 1F1B (an
/// interleaved stage runs its chunks' times summed). It costs a screening reorder and
/// O(m x stages x dp + samples x side stages) per batch; docs/planner.md
/// gives its error against `simulate_plan` (a few % at the presets' scale,
/// up to 20% with 1-4 microbatches, which the finalists then settle).
///
/// A7 (the assumption the bound rests on): no batch runs faster than the
/// plan's closed form of the expected batch. It holds on every preset; the
/// chain-model batches that break it are counted (`data_plan_stats::
/// below_closed`), so a cost model or data set that breaks it is visible.
///
/// Interleaved plans are searched like the others (the chain model scales
/// their 1F1B recurrence by the closed form's interleaved / plain ratio;
/// the finalists are simulated as planned).
///
/// @snippet bind.cpp plan_for_data

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain/reorder/pipeline_time.hpp"

namespace disttrain {

/// @brief What the planner averages over.
/// - `expected`: the closed form of the expected batch (`plan_parallelism`);
/// - `sampled`: the mean iteration over sampled batches after the reorderer
///   (`plan_for_data`); the same as `expected` for data without variance.
enum class data_objective : std::uint8_t { expected, sampled };

/// @brief "expected" or "sampled".
constexpr std::string_view to_string(data_objective o) noexcept {
  return o == data_objective::expected ? "expected" : "sampled";
}

/// @brief The data objective named `name`; anything else is
/// `errc::parse_error` at `where`.
[[nodiscard]] inline data_objective parse_data_objective(std::string_view name,
                                                         std::string_view where) {
  if (name == "expected") return data_objective::expected;
  if (name == "sampled") return data_objective::sampled;
  fail(errc::parse_error, where, "unknown data objective '", name,
       "' (expected 'expected' or 'sampled')");
}

/// @brief Whether samples of `data` can differ (a distribution that can
/// draw two values, or two records that differ). Validates `data`.
[[nodiscard]] inline bool data_varies(const data_spec& data) {
  data.validate();
  if (!data.records.empty()) {
    sample first = data.records.front();
    for (sample r : data.records) {
      r.id = first.id;
      if (!(r == first)) return true;
    }
    return false;
  }
  for (const distribution* d :
       {&data.text_tokens, &data.images_per_sample, &data.image_side, &data.image_aspect,
        &data.generated_per_sample, &data.generated_side})
    if (d->lowest() != d->highest()) return true;
  return false;
}

/// @brief Sample id of the planner's first sampled sample: 2^40, far from the
/// ids `simulate_heterogeneity` draws (from 0), so its batches are held out.
inline constexpr std::uint64_t data_plan_first_sample = std::uint64_t{1} << 40;

/// @brief Most sampled batches `plan_for_data` takes.
inline constexpr int max_data_plan_batches = 1024;

/// @brief The batches `plan_for_data` averages for `batches` (0: auto) and a
/// global batch of `global_batch` samples: `batches`, or
/// max(8, ceil(4096 / global_batch)) for 0.
[[nodiscard]] constexpr int data_plan_batches(int batches, int global_batch) noexcept {
  if (batches > 0 || global_batch <= 0) return batches;
  const int need = (4096 + global_batch - 1) / global_batch;
  return need > 8 ? (need > max_data_plan_batches ? max_data_plan_batches : need) : 8;
}

/// @brief How `plan_for_data` plans (named fields: the two ints would be easy to swap).
/// @snippet bind.cpp data_plan_options
struct data_plan_options {
  data_objective objective = data_objective::sampled;  ///< see `data_objective`
  /// Sampled global batches averaged, 1..max_data_plan_batches; 0: enough
  /// for 4096 samples, at least 8 (`data_plan_batches`).
  int batches = 0;
  /// Most plans re-ranked with `simulate_plan` at the end (0: the chain
  /// model decides), best chain-model mean first, while the simulations fit
  /// `simulation_budget`.
  int finalists = 5;
  /// Finalists must be within this fraction of the best chain-model mean (>= 0).
  double finalist_within = 0.10;
  /// Most simulated work for the finalists, in GPUs x microbatches x
  /// batches summed over them (>= 0): the chain model is least exact with
  /// few microbatches and small batches, where simulating is cheap; the
  /// default simulates the presets' 64-GPU plans, not their 512-GPU ones.
  long long simulation_budget = 250000;
  /// A7's slack: a batch is assumed to take at least the plan's closed form
  /// divided by (1 + `bound_slack`) (>= 0; see the file comment).
  double bound_slack = 0.05;
};

/// @brief Counters of one `plan_for_data` search.
struct data_plan_stats {
  long long classes = 0;       ///< plan classes with a closed form within the bound
  long long screened = 0;      ///< classes scored by the chain model
  long long cut_early = 0;     ///< of those, stopped before their last batch (A7 bound)
  long long simulated = 0;     ///< finalists simulated with `simulate_plan`
  long long below_closed = 0;  ///< chain-model batches under their plan's closed form (A7 broken)
};

/// @brief A plan `plan_for_data` simulated at the end.
struct data_plan_finalist {
  parallel_plan plan;
  double closed_form_s = 0;  ///< `evaluate`'s iteration time (expected batch)
  double modelled_s = 0;     ///< chain-model mean over the planner's batches
  double simulated_s = 0;    ///< `simulate_plan` mean over the same batches, reordered
};

/// @brief `plan_for_data`'s answer.
struct data_plan_result {
  plan_result result;  ///< the chosen plan, its closed-form evaluation; solve_ms: everything
  data_objective objective = data_objective::sampled;  ///< the objective used
  int batches = 0;                                     ///< planner batches (0 for `expected`)
  std::uint64_t first_sample = 0;  ///< sample id of the first planner batch's first sample
  /// The chosen plan on the planner's batches, reordered: `simulate_plan`'s
  /// times for a finalist, else the chain model's (empty for `expected`).
  iteration_time_stats predicted{};
  double predicted_mfu = 0;                   ///< model FLOPs / (predicted mean x GPUs x peak)
  double expected_optimum_s = 0;              ///< closed form of the expected-batch optimum
  std::vector<data_plan_finalist> finalists;  ///< best simulated first
  data_plan_stats stats;
  planner_stats search;  ///< the pool search's counters
};

namespace detail {

/// @brief The chain model of one plan (see the file comment). Keeps
/// references to the plan and the cost model, which must outlive it.
template <cost_model C>
class chain_model {
 public:
  chain_model(const parallel_plan& p, const C& cost, const model_workload& expected)
      : p_(p), cost_(cost), topo_(topology_of(p, cost.model())) {
    const evaluate_options no_memory_check{.check_memory = false};
    const plan_evaluation ev = evaluate(p, cost, expected, no_memory_check);
    sync_s_ = ev.sync_time_s;
    // Plain 1F1B, one chunk per device: the recurrence's schedule.
    parallel_plan plain = p;
    plain.schedule = plan_schedule::one_f_one_b;
    bool is_plain = p.schedule == plan_schedule::one_f_one_b;
    for (module_plan& m : plain.modules) {
      is_plain = is_plain && m.virtual_stages == 1;
      m.virtual_stages = 1;
    }
    const plan_evaluation e1 = is_plain ? ev : evaluate(plain, cost, expected, no_memory_check);
    if (!is_plain && e1.pipeline_time_s > 0) scale_ = ev.pipeline_time_s / e1.pipeline_time_s;
    pt_ = pipeline_time(pipeline_kind::one_f_one_b, hop_latency(e1, p.num_microbatches));
    // The backbone's chain stages, and every other one with its segment.
    const module_id bb{static_cast<int>(p.backbone_index())};
    bseg_ = static_cast<std::size_t>(topo_.owning_index(bb));
    for (int c = 0; c < topo_.num_chain_stages(); ++c) {
      const module_id mid = topo_.chain_at(c).first;
      if (mid == bb)
        own_.push_back(c);
      else
        side_.push_back({c, static_cast<std::size_t>(topo_.owning_index(mid))});
    }
  }

  /// @brief The chain model's iteration time of `batch` (one workload per sample).
  double operator()(std::span<const model_workload> batch) {
    const reorder_result map = plan_sample_map(p_, cost_, batch, sample_order::screening);
    const plan_bound_durations<C> d(p_, cost_, topo_, map, batch);
    const auto S = static_cast<std::size_t>(d.chain_stages());
    const std::size_t m = map.microbatches;
    f_.assign(m * S, 0.0);
    b_.assign(m * S, 0.0);
    double worst = 0;
    for (std::uint32_t r = 0; r < map.dp[bseg_]; ++r) {
      const replica_id lane{static_cast<int>(r)};
      for (const int c : own_)
        for (std::size_t j = 0; j < m; ++j) put(c, S, j, stage_of(d, c, lane, j), false);
      // A side stage's slowest replica among those feeding (or fed by) this
      // backbone replica in the microbatch.
      for (const auto& [c, seg] : side_)
        for (std::size_t j = 0; j < m; ++j) {
          put(c, S, j, stage_times{}, false);
          for (const std::uint32_t i : map.cell(bseg_, r, j)) {
            const replica_id rr{static_cast<int>(map.samples[i].module[seg].replica)};
            put(c, S, j, stage_of(d, c, rr, j), true);
          }
        }
      const microbatch_times mt{m, S, f_, b_};
      worst = std::max(worst, pt_(mt));
    }
    return worst * scale_ + sync_s_;
  }

 private:
  /// Row `j`, column `c` of F and B: `t`'s (`keep_max`: the max with what is there).
  void put(int c, std::size_t S, std::size_t j, const stage_times& t, bool keep_max) {
    // (t: the stage's chunks summed, `stage_of`.)
    const std::size_t at = j * S + static_cast<std::size_t>(c);
    const double f = t.forward_s, b = t.backward_s + t.weight_grad_s;
    f_[at] = keep_max ? std::max(f_[at], f) : f;
    b_[at] = keep_max ? std::max(b_[at], b) : b;
  }

  /// A stage's times in microbatch j: its chunks' summed (an interleaved
  /// plan's recurrence runs whole stages; `scale_` brings its bubble in).
  stage_times stage_of(const plan_bound_durations<C>& d, int c, replica_id r, std::size_t j) const {
    stage_times t;
    for (int k = 0; k < topo_.chunks_of(c); ++k) {
      const stage_times& x = d.cell_times(c, r, j, k);
      t.forward_s += x.forward_s;
      t.backward_s += x.backward_s;
      t.weight_grad_s += x.weight_grad_s;
    }
    return t;
  }

  /// The closed form's point-to-point seconds per hop: its fill/drain path
  /// less the stage times, over the 2 (S - 1) hops of a forward and a
  /// backward pass (the period is the slowest stage, or path / S).
  static double hop_latency(const plan_evaluation& e, int microbatches) {
    const std::size_t S = e.stages.size();
    if (S < 2) return 0.0;
    double tmax = 0, tsum = 0;
    for (const stage_report& s : e.stages) {
      tmax = std::max(tmax, s.time_s);
      tsum += s.time_s;
    }
    const double m1 = static_cast<double>(microbatches - 1);
    double path = e.pipeline_time_s - m1 * tmax;
    if (path / static_cast<double>(S) > tmax)  // the dependency cycle sets the period
      path = e.pipeline_time_s * static_cast<double>(S) / (m1 + static_cast<double>(S));
    return std::max(0.0, path - tsum) / (2.0 * static_cast<double>(S - 1));
  }

  const parallel_plan& p_;
  const C& cost_;
  topology topo_;
  std::size_t bseg_ = 0;                           // the backbone's segment in the map
  std::vector<int> own_;                           // the backbone's chain stages
  std::vector<std::pair<int, std::size_t>> side_;  // the other chain stages, their segment
  double sync_s_ = 0, scale_ = 1.0;
  pipeline_time pt_;
  std::vector<double> f_, b_;
};

}  // namespace detail

/// @brief `simulate_plan` of `p` on each of `batches` with the sample map of
/// `order` (`plan_sample_map`), summarised. Throws like `simulate_plan`, and
/// `invalid_argument` at `seconds` for no batch.
template <cost_model C>
[[nodiscard]] iteration_time_stats simulate_batches(
    const parallel_plan& p, const C& cost, const std::vector<std::vector<model_workload>>& batches,
    sample_order order = sample_order::reordered) {
  std::vector<double> seconds;
  for (const auto& batch : batches) {
    const std::span<const model_workload> view(batch);
    seconds.push_back(
        simulate_plan(p, cost, view, plan_sample_map(p, cost, view, order)).result.iteration_time);
  }
  return summarize_times(std::move(seconds));
}

/// @brief The plan of least mean iteration time over sampled batches of
/// `data` after the reorderer (see the file comment), or, for
/// `data_objective::expected` or data without variance, `plan_parallelism`.
/// `req` is the request of `data` (`make_request`). Deterministic: the same
/// inputs give the same plan bit for bit. Throws `invalid_argument` at
/// `data_plan_options.<field>` for bad options, `errc::unsupported` at
/// `planner.objective` for a sampled objective with a planner objective
/// other than `time`, and like `plan_parallelism` and `simulate_plan`.
template <cost_model C>
[[nodiscard]] data_plan_result plan_for_data(const C& cost, const plan_request& req,
                                             const data_spec& data,
                                             const planner_options& popt = {},
                                             const data_plan_options& dopt = {}) {
  require_in_range(dopt.batches, 0, max_data_plan_batches, "data_plan_options.batches");
  const int nbatches = data_plan_batches(dopt.batches, req.global_batch);
  require(dopt.finalists >= 0, "data_plan_options.finalists", "must be >= 0, got ", dopt.finalists);
  require(std::isfinite(dopt.bound_slack) && dopt.bound_slack >= 0, "data_plan_options.bound_slack",
          "must be finite and >= 0, got ", dopt.bound_slack);
  require(dopt.simulation_budget >= 0, "data_plan_options.simulation_budget", "must be >= 0, got ",
          dopt.simulation_budget);
  require(std::isfinite(dopt.finalist_within) && dopt.finalist_within >= 0,
          "data_plan_options.finalist_within", "must be finite and >= 0, got ",
          dopt.finalist_within);
  const auto t0 = std::chrono::steady_clock::now();
  data_plan_result out;
  if (dopt.objective == data_objective::expected || !data_varies(data)) {
    out.objective = data_objective::expected;
    out.result = plan_parallelism(cost, req, popt);
    out.expected_optimum_s = out.result.evaluation.iteration_time_s;
    return out;
  }
  if (popt.objective != plan_objective::time)
    fail(errc::unsupported, "planner.objective", "the sampled data objective minimises time; '",
         to_string(popt.objective), "' needs the expected data objective");
  const planner_options& opt = popt;
  out.batches = nbatches;
  out.first_sample = data_plan_first_sample;
  const auto batches =
      sample_batches(cost.model(), data, req.global_batch, nbatches, data_plan_first_sample);
  const auto nb = static_cast<double>(batches.size());

  // Steps 2-3: the expected-batch optimum bounds the classes worth scoring.
  const plan_result first = detail::run_planner(cost, req, opt);
  out.expected_optimum_s = first.evaluation.iteration_time_s;
  double bound = 0;
  {
    detail::chain_model<C> cm(first.plan, cost, req.sample_workload);
    for (const auto& b : batches) bound += cm(b);
    bound /= nb;
  }
  std::vector<detail::ranked_plan> classes = detail::plan_classes(
      cost, req, opt, std::max(bound, first.evaluation.iteration_time_s), out.search);
  out.stats.classes = static_cast<long long>(classes.size());

  // Step 4: the chain model over the classes, best closed form first.
  struct scored {
    std::size_t index;
    double mean;
    std::vector<double> seconds;
  };
  std::vector<scored> kept;
  double best = bound;
  // A plan scoring above best x window can neither win nor be a finalist
  // (the window is 1 for a plan too large to simulate within the budget).
  const auto window = [&](const parallel_plan& p) {
    const bool small = dopt.finalists > 0 &&
                       p.total_gpus() * p.num_microbatches * nbatches <= dopt.simulation_budget;
    return small ? 1.0 + dopt.finalist_within : 1.0;
  };
  const double widest = dopt.finalists > 0 ? 1.0 + dopt.finalist_within : 1.0;
  std::vector<double> seconds;
  // classes[0] is the expected-batch optimum (the best closed form): always
  // scored in full, so that a broken A7 cannot leave no plan.
  for (std::size_t i = 0; i < classes.size(); ++i) {
    const detail::ranked_plan& c = classes[i];
    if (i > 0 && c.time > best * widest * (1.0 + dopt.bound_slack)) break;  // A7
    if (i > 0 && c.time > best * window(c.plan) * (1.0 + dopt.bound_slack)) continue;
    ++out.stats.screened;
    detail::chain_model<C> cm(c.plan, cost, req.sample_workload);
    double sum = 0;
    seconds.clear();
    for (const auto& b : batches) {
      const double t = cm(b);
      if (t * (1.0 + dopt.bound_slack) < c.time) ++out.stats.below_closed;
      sum += t;
      seconds.push_back(t);
      // A7: the batches left take at least the closed form / (1 + slack) each.
      const double rest = static_cast<double>(batches.size() - seconds.size()) * c.time;
      if (i > 0 && seconds.size() < batches.size() &&
          (sum + rest / (1.0 + dopt.bound_slack)) / nb > best * window(c.plan))
        break;
    }
    if (seconds.size() < batches.size()) {
      ++out.stats.cut_early;
      continue;
    }
    kept.push_back({i, sum / nb, seconds});
    best = std::min(best, sum / nb);
  }
  ensure(!kept.empty(), "plan_for_data", "no plan class was scored on every batch");
  std::stable_sort(kept.begin(), kept.end(),
                   [](const scored& a, const scored& b) { return a.mean < b.mean; });
  // Step 5 (with finalists): the best by the chain model, simulated.
  std::size_t chosen = kept.front().index;
  std::vector<double> chosen_seconds = kept.front().seconds;
  double chosen_mean = std::numeric_limits<double>::infinity();
  long long spent = 0;
  for (const scored& k : kept) {
    const parallel_plan& p = classes[k.index].plan;
    spent += p.total_gpus() * p.num_microbatches * nbatches;
    if (out.finalists.size() >= static_cast<std::size_t>(dopt.finalists) ||
        k.mean > best * (1.0 + dopt.finalist_within) || spent > dopt.simulation_budget)
      break;
    iteration_time_stats sim = simulate_batches(p, cost, batches);
    ++out.stats.simulated;
    out.finalists.push_back({p, classes[k.index].time, k.mean, sim.mean_s});
    if (sim.mean_s < chosen_mean) {  // ties: the better chain model (earlier)
      chosen_mean = sim.mean_s;
      chosen = k.index;
      chosen_seconds = std::move(sim.seconds);
    }
  }
  std::stable_sort(out.finalists.begin(), out.finalists.end(),
                   [](const data_plan_finalist& a, const data_plan_finalist& b) {
                     return a.simulated_s < b.simulated_s;
                   });
  out.predicted = summarize_times(std::move(chosen_seconds));
  out.result.plan = std::move(classes[chosen].plan);
  out.result.evaluation = evaluate(out.result.plan, cost, req.sample_workload);
  out.result.stats = out.search;
  out.predicted_mfu =
      out.result.evaluation.model_flops /
      (out.predicted.mean_s * static_cast<double>(out.result.evaluation.gpus) * cost.peak_flops());
  out.result.solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace disttrain
