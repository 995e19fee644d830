#pragma once
/// @file batch_checks.hpp
/// @brief Internal: the `reorderer`'s checks of a batch against its options,
/// before any work (sizes, costs, equal-count and per-replica limits that no
/// split can meet) and after step 1 (sums that would overflow).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/detail/batch_ranking.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain::detail {

// Per-replica limits the batch cannot meet whatever the split: a sample
// larger than a replica's token budget, a microbatch with more samples than
// dp x max_samples, more tokens in the batch than every cell can hold.
inline void check_batch_limits(const reorder_options& options, std::span<const sample_meta> batch) {
  const std::size_t n = batch.size();
  const std::size_t m = options.microbatches;
  const std::size_t largest = (n + m - 1) / m;  // the largest slot (every cut: floor/ceil(n/m))
  for (std::size_t k = 0; k < options.modules.size(); ++k) {
    const reorder_module& mod = options.modules[k];
    const auto where = [k](std::string_view field) {  // built only to throw
      return cat("reorder_options.modules[", k, "].", field);
    };
    if (mod.max_samples != 0 && largest > std::uint64_t{mod.max_samples} * mod.dp)
      fail(errc::infeasible, where("max_samples"), "module '", mod.name,
           "': a microbatch holds up to ", largest, " samples (", n, " samples over ", m,
           " microbatches), more than dp ", mod.dp, " x max_samples ", mod.max_samples,
           "; use at least ",
           (n + std::uint64_t{mod.max_samples} * mod.dp - 1) /
               (std::uint64_t{mod.max_samples} * mod.dp),
           " microbatches, or raise the limit");
    if (mod.max_tokens == 0) continue;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t t = batch[i].tokens[k];
      if (t > mod.max_tokens)
        fail(errc::infeasible, cat("batch[", i, "].tokens[", k, "]"), "sample id ", batch[i].id,
             ": ", t, " tokens for module '", mod.name, "', above its max_tokens ", mod.max_tokens,
             " per replica per microbatch: no replica can hold it");
      total += t;
    }
    const std::uint64_t cells = std::uint64_t{mod.dp} * m;
    if (total / cells > mod.max_tokens || (total / cells == mod.max_tokens && total % cells != 0))
      fail(errc::infeasible, where("max_tokens"), "module '", mod.name, "': the batch has ", total,
           " tokens, more than ", m, " microbatches x dp ", mod.dp, " x max_tokens ",
           mod.max_tokens, " can hold");
  }
}

// Sizes, costs (validate_sample_costs), equal-count mode's samples per
// replica, and the per-replica limits (check_batch_limits): the errors of
// reorderer::assign that need no work on the batch.
inline void check_batch(const reorder_options& options, std::span<const sample_meta> batch) {
  const std::size_t n = batch.size();
  const std::size_t K = options.modules.size();
  const std::size_t m = options.microbatches;
  require(n > 0, "batch", "global batch is empty");
  require(n >= m, "batch", "has ", n, " samples, fewer than microbatches ", m,
          " (every microbatch needs a sample)");
  require(n <= 0xfffffffeu, "batch", "has ", n, " samples, limit 4294967294");
  for (std::size_t i = 0; i < n; ++i) validate_sample_costs(batch[i], K, i);
  if (options.equal_count) {
    for (std::size_t k = 0; k < K; ++k)
      if (n / m < options.modules[k].dp)
        fail(errc::infeasible, cat("reorder_options.modules[", k, "].dp"), "module '",
             options.modules[k].name, "': equal_count needs >= dp = ", options.modules[k].dp,
             " samples per microbatch, the smallest of ", m, " microbatches has ", n / m,
             " (batch of ", n, ")");
  }
  for (const reorder_module& mod : options.modules)
    if (mod.limited()) return check_batch_limits(options, batch);
}

// Every sum the reorderer forms is at most a module total T_k (up to
// rounding), and every time the objective sees at most
// sum_s (forward_scale_s + backward_scale_s) T_k(s). Both must be finite, with
// headroom for rounding, or the overflow would surface later at an internal
// location (a stage time) or as an infinite iteration time.
inline void check_batch_sums(const reorder_options& options, std::span<const sample_meta> batch,
                             const batch_ranking& ranking) {
  constexpr double top = std::numeric_limits<double>::max();
  const std::size_t K = options.modules.size();
  for (std::size_t k = 0; k < K; ++k) {
    if (ranking.total(k) <= top) continue;
    double run = 0.0;  // the sum in id order, as the total was taken: find where it overflows
    for (const std::uint32_t i : ranking.by_id()) {
      run += batch[i].cost[k];
      if (!(run <= top))
        fail(errc::invalid_argument, cat("batch[", i, "].cost[", k, "]"), "module '",
             options.modules[k].name, "': sample id ", batch[i].id, " (cost ", batch[i].cost[k],
             ") makes the batch's total cost[", k, "] overflow (exceed ", top,
             "); scale the costs down");
    }
  }
  std::array<double, max_reorder_modules> scale{};
  for (const pipeline_stage& st : options.stages)
    scale[st.module] += st.forward_scale + st.backward_scale;
  double bound = 0.0;
  std::size_t worst = 0;
  for (std::size_t k = 0; k < K; ++k) {
    bound += scale[k] * ranking.total(k);
    if (scale[k] * ranking.total(k) > scale[worst] * ranking.total(worst)) worst = k;
  }
  if (!(bound <= top / 4))
    fail(errc::invalid_argument, "batch",
         "the modelled iteration time overflows: sum over stages of (forward_scale + "
         "backward_scale) x the module's total cost is ",
         bound, ", limit ", top / 4, " (largest: module '", options.modules[worst].name,
         "', total cost ", ranking.total(worst), " x scales ", scale[worst],
         "); scale the costs down");
}

}  // namespace disttrain::detail
