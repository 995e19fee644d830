#pragma once
/// @file heterogeneity.hpp
/// @brief The data-heterogeneity gain, simulated: how a plan and the
/// Megatron-LM-style baseline run real (sampled) global batches, with and
/// without the reorderer. Behind `disttrain-plan --iterations N`.
///
/// For each of `iterations` global batches drawn from the data distribution
/// (batch b = sample ids `b * B .. b * B + B - 1` of a `data_sampler`, B the
/// plans' global batch; deterministic for a seed; `sample_batches`), four
/// simulations (`simulate_plan`: every GPU's bound 1F1B program, durations
/// from the cost model, on the batch's own per-sample workloads):
/// - (a) the baseline with the data in arrival order (`sample_order::arrival`:
///   microbatches and DP shares dealt in input order, as Megatron-LM's
///   sampler does);
/// - (b) the plan with the data in arrival order;
/// - (c) the plan with the reorderer's map (`sample_order::reordered`);
/// - (d) the baseline with the reorderer's map: what a user who adopts only
///   the reorderer gets.
///
/// Gains are ratios of the mean iteration times over the sampled batches (so
/// of throughputs): orchestration = (d)/(c) (both reordered), reordering =
/// (b)/(c), total = (a)/(c); (a)/(b), the orchestration gain when neither
/// reorders, is `orchestration_gain_arrival`. Each case also reports the simulated *expected*
/// batch (`global_batch` samples of the mean workload, the batch `evaluate`
/// prices): the time a plan would take without any data heterogeneity.
///
/// GPipe plans are refused (`errc::unsupported`): the bound chain program
/// runs 1F1B (interleaved where the plan interleaves) or ZB-H1.
///
/// @snippet bind.cpp heterogeneity_file

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/sample.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"

namespace disttrain {

/// @brief Fills `out` (its size: the batch) with the workloads of samples
/// `first_id, first_id + 1, ..` of `sampler`, reusing its storage.
inline void sample_batch_into(const model_spec& model, const data_sampler& sampler,
                              std::uint64_t first_id, std::vector<model_workload>& out) {
  sample s;
  for (std::size_t i = 0; i < out.size(); ++i) {
    sampler.draw_into(first_id + static_cast<std::uint64_t>(i), s);
    out[i] = workload_of(model, s);
  }
}

/// @brief The workloads of `batches` global batches of `global_batch` samples
/// of `data`: batch b holds sample ids `first_id + b * global_batch ..`.
/// Deterministic. Throws `invalid_argument` for a non-positive count or
/// batch, and like `data_sampler` for an invalid spec.
[[nodiscard]] inline std::vector<std::vector<model_workload>> sample_batches(
    const model_spec& model, const data_spec& data, int global_batch, int batches,
    std::uint64_t first_id = 0) {
  require_positive(global_batch, "global_batch");
  require_positive(batches, "batches");
  const data_sampler sampler(data);
  const auto b = static_cast<std::size_t>(global_batch);
  std::vector<std::vector<model_workload>> out(static_cast<std::size_t>(batches),
                                               std::vector<model_workload>(b));
  for (std::size_t it = 0; it < out.size(); ++it)
    sample_batch_into(model, sampler, first_id + static_cast<std::uint64_t>(it * b), out[it]);
  return out;
}

/// @brief Most sampled batches one `simulate_heterogeneity` call takes.
inline constexpr int max_heterogeneity_iterations = 100000;

/// @brief What `simulate_heterogeneity` samples.
/// @snippet bind.cpp heterogeneity_options
struct heterogeneity_options {
  int iterations = 8;  ///< sampled global batches, 1..max_heterogeneity_iterations
  /// The data stream's seed (`data_spec::seed`); empty: the data spec's own.
  /// Ignored in records mode (records are cycled by sample id).
  std::optional<std::uint64_t> seed{};
};

/// @brief Iteration times of one case over the sampled batches.
/// @snippet bind.cpp summarize_times
struct iteration_time_stats {
  std::vector<double> seconds;  ///< per sampled batch, in batch order
  double mean_s = 0;            ///< mean
  double median_s = 0;          ///< median (mean of the two middle values for an even count)
  double p90_s = 0;             ///< 90th percentile, nearest rank: the ceil(0.9 n)-th smallest
  double min_s = 0;             ///< fastest batch
  double max_s = 0;             ///< slowest batch
};

/// @brief Mean, median, p90 (nearest rank), min and max of `seconds`.
/// Throws `invalid_argument` at `seconds` when it is empty.
[[nodiscard]] inline iteration_time_stats summarize_times(std::vector<double> seconds) {
  require(!seconds.empty(), "seconds", "is empty");
  iteration_time_stats s;
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  double sum = 0;
  for (const double x : seconds) sum += x;  // batch order: the same sum on every call
  s.mean_s = sum / static_cast<double>(n);
  s.median_s = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const auto rank = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(n)));
  s.p90_s = sorted[std::max<std::size_t>(rank, 1) - 1];
  s.min_s = sorted.front();
  s.max_s = sorted.back();
  s.seconds = std::move(seconds);
  return s;
}

/// @brief One simulated case: a plan with one kind of sample map.
struct heterogeneity_case {
  iteration_time_stats times;  ///< per sampled batch
  double expected_s = 0;       ///< the expected batch simulated: `global_batch` samples of
                               ///< `expected_workload(model, data)` (no heterogeneity)
  double mfu = 0;      ///< model FLOPs of all sampled batches / (sum of times x GPUs x peak)
  long long gpus = 0;  ///< GPUs the plan uses
};

/// @brief `simulate_heterogeneity`'s answer (see the file comment).
struct heterogeneity_result {
  int iterations = 0;                     ///< sampled batches
  std::uint64_t seed = 0;                 ///< data stream seed used
  int global_batch = 0;                   ///< samples per batch
  heterogeneity_case baseline_arrival;    ///< (a)
  heterogeneity_case plan_arrival;        ///< (b)
  heterogeneity_case plan_reordered;      ///< (c)
  heterogeneity_case baseline_reordered;  ///< (d)
  double orchestration_gain = 0;          ///< mean (d) / mean (c)
  double reordering_gain = 0;             ///< mean (b) / mean (c)
  double total_gain = 0;                  ///< mean (a) / mean (c)
  double orchestration_gain_arrival = 0;  ///< mean (a) / mean (b)
};

/// @brief Simulates `baseline` and `plan` on `opt.iterations` sampled global
/// batches of `data` (see the file comment). Deterministic: the same inputs
/// give the same result. Throws `invalid_argument` at
/// `heterogeneity_options.iterations` (outside 1..max_heterogeneity_iterations),
/// at `baseline.global_batch` when the two plans' batches differ, `data....`
/// for an invalid data spec, `errc::unsupported` at `plan.schedule` for a
/// GPipe plan (before any simulation), and like `simulate_plan`.
template <cost_model C>
[[nodiscard]] heterogeneity_result simulate_heterogeneity(const parallel_plan& baseline,
                                                          const parallel_plan& plan, const C& cost,
                                                          const data_spec& data,
                                                          const heterogeneity_options& opt = {}) {
  require_in_range(opt.iterations, 1, max_heterogeneity_iterations,
                   "heterogeneity_options.iterations");
  (void)detail::chain_options_of(baseline);
  (void)detail::chain_options_of(plan);
  detail::check_plan_against(baseline, cost.model(), cost.cluster());
  detail::check_plan_against(plan, cost.model(), cost.cluster());
  require(baseline.global_batch == plan.global_batch, "baseline.global_batch", "is ",
          baseline.global_batch, ", the plan's ", plan.global_batch,
          ": both must run the same batches");
  data_spec spec = data;
  if (opt.seed) spec.seed = *opt.seed;
  const data_sampler sampler(std::move(spec));

  heterogeneity_result out;
  out.iterations = opt.iterations;
  out.seed = sampler.spec().seed;
  out.global_batch = plan.global_batch;
  const auto b = static_cast<std::size_t>(plan.global_batch);
  const std::size_t modules = cost.model().modules.size();
  const evaluate_options no_memory_check{.check_memory = false};

  // The three cases: plan, sample map, where the answer goes.
  struct simulated_case {
    const parallel_plan* plan;
    sample_order order;
    heterogeneity_case* out;
    std::vector<double> seconds{};
    double flops = 0;  // model FLOPs of the sampled batches
  };
  std::array<simulated_case, 4> cases{
      simulated_case{&baseline, sample_order::arrival, &out.baseline_arrival},
      simulated_case{&plan, sample_order::arrival, &out.plan_arrival},
      simulated_case{&plan, sample_order::reordered, &out.plan_reordered},
      simulated_case{&baseline, sample_order::reordered, &out.baseline_reordered}};
  std::vector<model_workload> batch(b);
  for (int it = 0; it < opt.iterations; ++it) {
    sample_batch_into(cost.model(), sampler, static_cast<std::uint64_t>(it) * b, batch);
    model_workload total;
    total.size = modules;
    for (const model_workload& w : batch) total += w;
    const std::span<const model_workload> view(batch);
    // Model FLOPs of the batch, once per plan ((b) and (c) share theirs).
    const model_workload mean = total * (1.0 / static_cast<double>(b));
    const double baseline_flops = evaluate(baseline, cost, mean, no_memory_check).model_flops;
    const double plan_flops = evaluate(plan, cost, mean, no_memory_check).model_flops;
    for (simulated_case& c : cases) {
      const reorder_result map = plan_sample_map(*c.plan, cost, view, c.order);
      c.seconds.push_back(simulate_plan(*c.plan, cost, view, map).result.iteration_time);
      c.flops += c.plan == &baseline ? baseline_flops : plan_flops;
    }
  }
  // The expected batch of the distribution as the planner prices it (the
  // data's own seed, like make_request), whatever `opt.seed`.
  const model_workload expected = expected_workload(cost.model(), data);
  for (simulated_case& c : cases) {
    heterogeneity_case& hc = *c.out;
    hc.gpus = c.plan->total_gpus();
    double total_s = 0;
    for (const double t : c.seconds) total_s += t;
    hc.times = summarize_times(std::move(c.seconds));
    const double denom = total_s * static_cast<double>(hc.gpus) * cost.peak_flops();
    hc.mfu = denom > 0 ? c.flops / denom : 0.0;
    // (b) and (c), (a) and (d) share a plan: its expected batch is simulated once.
    hc.expected_s = c.out == &out.plan_reordered ? out.plan_arrival.expected_s
                    : c.out == &out.baseline_reordered
                        ? out.baseline_arrival.expected_s
                        : simulate_plan(*c.plan, cost, expected).result.iteration_time;
  }
  out.orchestration_gain = out.baseline_reordered.times.mean_s / out.plan_reordered.times.mean_s;
  out.reordering_gain = out.plan_arrival.times.mean_s / out.plan_reordered.times.mean_s;
  out.total_gain = out.baseline_arrival.times.mean_s / out.plan_reordered.times.mean_s;
  out.orchestration_gain_arrival =
      out.baseline_arrival.times.mean_s / out.plan_arrival.times.mean_s;
  return out;
}

}  // namespace disttrain
