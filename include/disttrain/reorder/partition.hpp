#pragma once
/// @file partition.hpp
/// @brief Balanced number partitioning: split items with costs into `k` bins
/// so the heaviest bin is as light as possible (LPT, Karmarkar-Karp, and the
/// refined default), optionally with equal item counts per bin.
///
/// This is the inner step of intra-microbatch balancing: the samples of one
/// microbatch slot are split over one module's DP replicas.
///
/// Methods (see docs/reorder.md for the bounds):
/// - `none`: items in the given order, contiguous chunks of near-equal count.
///   The reorderer hands a slot's samples in rank order (cost key descending),
///   so there `none` gives *cost-sorted chunks*, not a no-reordering baseline;
/// - `arrival`: the same chunks of the given order; the reorderer hands a
///   slot's samples in arrival (input) order, so there it is the true "no
///   balancing" baseline (what a data loader without reordering does);
/// - `lpt`: longest processing time first: items by descending cost, each to
///   the currently lightest bin (DistTrain's rule; max load < 4/3 of optimal);
/// - `karmarkar_karp`: k-way largest differencing (the method verl uses),
///   with sparse states (only non-empty parts are stored): O(n log n + n k)
///   time at worst and O(n + k) memory;
/// - `refined` (default): LPT and KK, each followed by local search (moves and pairwise swaps between the heaviest bin and the
///   lightest ones while that lowers the heavier of the two); the better result
///   wins; problems of at most `exact_max_items` items finish with a budgeted
///   branch and bound seeded by that result. Never worse than LPT or KK.
///
/// Tie rule: items are ranked by (cost descending, index ascending), bins by
/// (load, bin index); the result depends only on the cost sequence.
///
/// @snippet reorder.cpp partition

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/detail/branch_and_bound.hpp"
#include "disttrain/reorder/detail/karmarkar_karp.hpp"
#include "disttrain/reorder/detail/local_search.hpp"
#include "disttrain/reorder/detail/lpt.hpp"
#include "disttrain/reorder/detail/multifit.hpp"
#include "disttrain/reorder/detail/partition_workspace.hpp"

namespace disttrain {

/// @brief How the samples of a slot are split over a module's DP replicas.
/// @snippet reorder.cpp balance_method
enum class balance_method : std::uint8_t {
  none,            ///< given order, contiguous chunks (reorderer: cost-sorted chunks)
  lpt,             ///< longest processing time first (DistTrain)
  karmarkar_karp,  ///< k-way largest differencing (verl)
  refined,         ///< LPT / KK + local search (default)
  arrival,         ///< given order, contiguous chunks (reorderer: arrival order; the baseline)
};

/// @brief Most bins `partitioner::partition` accepts (and most DP replicas of a
/// reorder module): 2^20.
inline constexpr std::uint32_t max_partition_bins = 1u << 20;

/// @brief Name of a balance method ("none", "lpt", "karmarkar_karp", "refined", "arrival").
constexpr std::string_view to_string(balance_method m) noexcept {
  switch (m) {
    case balance_method::none: return "none";
    case balance_method::lpt: return "lpt";
    case balance_method::karmarkar_karp: return "karmarkar_karp";
    case balance_method::refined: return "refined";
    case balance_method::arrival: return "arrival";
  }
  return "unknown";
}

/// @brief Splits items into bins; owns its scratch buffers so repeated calls
/// do not allocate once the buffers have grown to the largest problem seen.
///
/// Not thread-safe: use one partitioner per thread.
/// @snippet reorder.cpp partitioner
class partitioner {
 public:
  /// Local search stops after this many improving steps per call times (items + bins).
  std::uint32_t refine_steps_per_item = 1;
  /// Local search takes a step only if it lowers the heavier bin by more than this fraction.
  double refine_min_gain = 1e-6;
  /// Local search compares the heaviest bin with at most this many of the lightest bins ...
  std::uint32_t refine_width = 8;
  /// ... and, when none of them helps, with every other bin while the
  /// heaviest is more than this fraction above the lower bound max(mean load,
  /// largest item) (< 0: always; infinity: never).
  double refine_wide_gap = 5e-3;
  /// `refined` also runs KK (and keeps the better) when bins <= this ...
  /// (default: always, so `refined` is never worse than plain KK; KK costs
  /// O(n log n + n k) time and O(n + k) memory)
  std::uint32_t refine_kk_max_bins = std::numeric_limits<std::uint32_t>::max();
  /// ... and items <= this (default: always) ...
  std::uint32_t refine_kk_max_items = std::numeric_limits<std::uint32_t>::max();
  /// ... unless LPT + local search is already within this fraction of the
  /// lower bound max(mean load, largest item), which KK cannot beat (0: KK
  /// always runs, and `refined` is never worse than KK at all).
  double refine_kk_skip_gap = 0.0;
  /// `refined` then runs MULTIFIT (first-fit-decreasing packings, bisecting
  /// the bin capacity; not in equal-count mode), with local search on its
  /// packing, when the result so far is more than this fraction above the
  /// lower bound max(mean load, largest item) ...
  double refine_fit_gap = 5e-3;
  /// ... with at most this many packings (0: never; each O(n log k)).
  std::uint32_t refine_fit_steps = 6;
  /// `refined` finishes small problems (items <= exact_max_items, bins <=
  /// exact_max_bins) with a branch-and-bound search seeded by the heuristic result ...
  std::uint32_t exact_max_items = 24;
  /// ... (bins limit of the branch and bound) ...
  std::uint32_t exact_max_bins = 16;
  /// ... that visits at most this many search nodes (exact when it completes).
  std::uint32_t exact_node_budget = 50000;

  /// @brief Assigns every item to a bin; returns the largest bin load.
  ///
  /// @param costs        item costs, finite and >= 0, with a finite sum
  /// @param bins         number of bins, 1..max_partition_bins
  /// @param equal_count  every bin gets floor(n/k) or ceil(n/k) items
  /// @param method       algorithm
  /// @param bin_of       output, one entry per item
  /// @param hint         optional: the items' ranking (cost descending, index
  ///                     ascending), e.g. `ranking()` after an earlier call on
  ///                     the same costs; used (not re-sorted) when it is that
  ///                     ranking, which is checked in O(n), else ignored
  /// Throws `errc::invalid_argument` at `bins` for zero or more than
  /// `max_partition_bins` bins, at `bin_of` for a size mismatch, at `costs[i]`
  /// for a negative or non-finite cost, at `costs` when their sum overflows;
  /// `errc::infeasible` at `bins` when `equal_count` and there are fewer items than bins.
  double partition(std::span<const double> costs, std::uint32_t bins, bool equal_count,
                   balance_method method, std::span<std::uint32_t> bin_of,
                   std::span<const std::uint32_t> hint = {}) {
    return partition(costs, bins, equal_count, method, bin_of, hint, exact_node_budget);
  }

  /// @brief As `partition`, with `exact_nodes` in place of `exact_node_budget`
  /// for `refined`'s branch-and-bound finish (0: no finish). The reorderer
  /// splits every candidate so and finishes only the chosen plan's cells
  /// (`finish`) within a budget for the whole batch.
  double partition(std::span<const double> costs, std::uint32_t bins, bool equal_count,
                   balance_method method, std::span<std::uint32_t> bin_of,
                   std::span<const std::uint32_t> hint, std::uint32_t exact_nodes) {
    require(bins > 0, "bins", "number of bins must be > 0, got ", bins);
    require(bins <= max_partition_bins, "bins", "number of bins ", bins, " exceeds the limit ",
            max_partition_bins);
    require(bin_of.size() == costs.size(), "bin_of", "output has ", bin_of.size(),
            " entries, need ", costs.size());
    if (equal_count && costs.size() < bins) {
      fail(errc::infeasible, "bins", "equal_count needs at least one item per bin: ", costs.size(),
           " items for ", bins, " bins");
    }
    const std::size_t n = costs.size();
    if (n == 0) {
      ws_.order.clear();
      return 0.0;
    }
    const double total = detail::partition_workspace::check_costs(costs);
    reserve(n, bins, method);
    ws_.costs = costs;
    ws_.k = bins;
    ws_.equal = equal_count;
    if (method == balance_method::none || method == balance_method::arrival) {
      ws_.order.clear();  // not ranked: ranking() is empty
      ws_.chunk(bin_of);
      return ws_.max_load(bin_of);
    }
    ws_.sort_items(hint);
    if (method == balance_method::lpt) {
      lpt_.run(ws_, bin_of);
      return ws_.max_load(bin_of);
    }
    if (method == balance_method::karmarkar_karp) {
      kk_.run(ws_, bin_of);
      return ws_.max_load(bin_of);
    }
    // refined
    lpt_.run(ws_, bin_of);
    double best = refine(bin_of, false);
    lower_ = lower_bound(total);
    if (ws_.k <= refine_kk_max_bins && n <= refine_kk_max_items) best = try_kk(bin_of, best, false);
    best = try_fit(bin_of, best, false);
    if (exact_applies() && exact_nodes != 0) exact_.run(ws_, bin_of, best, exact_nodes);
    // Summed afresh: the steps' running loads can differ from it in the last bits.
    return ws_.max_load(bin_of);
  }

  /// @brief True when `refined` finishes a problem of `items` items in `bins`
  /// bins with the branch and bound (`exact_max_items`, `exact_max_bins`).
  [[nodiscard]] bool exact_applies(std::size_t items, std::uint32_t bins) const noexcept {
    return items <= exact_max_items && bins > 1 && bins <= exact_max_bins;
  }

  /// @brief What `finish` did: the max load after it, and the search nodes it visited.
  struct finish_result {
    double max_load = 0.0;    ///< never above the seed's
    std::uint64_t nodes = 0;  ///< branch-and-bound nodes visited (0: not a small problem)
  };

  /// @brief `refined`'s last step alone on an existing assignment `bin_of`:
  /// on a problem of at most `exact_max_items` items and 2..`exact_max_bins`
  /// bins, the branch and bound seeded with `bin_of`, within `node_budget`
  /// nodes (exact when it completes); other problems are left as they are.
  /// `hint` as in `partition`. Errors as `improve`.
  finish_result finish(std::span<const double> costs, std::uint32_t bins, bool equal_count,
                       std::span<std::uint32_t> bin_of, std::span<const std::uint32_t> hint,
                       std::uint32_t node_budget) {
    check_assignment(costs, bins, bin_of);
    if (costs.empty()) {
      ws_.order.clear();
      return {};
    }
    (void)detail::partition_workspace::check_costs(costs);
    reserve(costs.size(), bins, balance_method::lpt);
    ws_.costs = costs;
    ws_.k = bins;
    ws_.equal = equal_count;
    ws_.sort_items(hint);
    const double seed = ws_.max_load(bin_of);
    if (!exact_applies() || node_budget == 0) return {seed, 0};
    exact_.run(ws_, bin_of, seed, node_budget);
    return {ws_.max_load(bin_of), exact_.nodes()};
  }

  /// @brief `refined`'s later steps on an existing assignment `bin_of` (e.g.
  /// one found with them disabled, as the reorderer's screening does): local
  /// search from `bin_of` (with the wide pass and, while the heaviest bin is
  /// still more than refine_wide_gap above the bound, two-for-one exchanges:
  /// two items of the heaviest bin for one of another, or one for two; not in
  /// equal-count mode), KK (unless within
  /// refine_kk_skip_gap of the lower bound; kept, with local search when KK
  /// alone is better, if that lowers the max load), then MULTIFIT (when still
  /// more than refine_fit_gap above the bound; not in equal-count mode).
  /// Returns the max load, never above `bin_of`'s. `hint` as
  /// in `partition`. Errors as `partition`, plus `invalid_argument` at
  /// `bin_of[i]` for a bin out of range.
  double improve(std::span<const double> costs, std::uint32_t bins, bool equal_count,
                 std::span<std::uint32_t> bin_of, std::span<const std::uint32_t> hint = {}) {
    check_assignment(costs, bins, bin_of);
    const std::size_t n = costs.size();
    if (n == 0) {
      ws_.order.clear();
      return 0.0;
    }
    const double total = detail::partition_workspace::check_costs(costs);
    reserve(n, bins, balance_method::karmarkar_karp);
    ws_.costs = costs;
    ws_.k = bins;
    ws_.equal = equal_count;
    ws_.sort_items(hint);
    double best = ws_.max_load(bin_of);
    // The wide pass, where it can apply (bin_of is taken to be stuck for the
    // narrow one: it comes from LPT + local search).
    lower_ = lower_bound(total);
    if (best > lower_ * (1 + refine_wide_gap)) best = refine(bin_of, true);
    if (ws_.k <= refine_kk_max_bins && n <= refine_kk_max_items) best = try_kk(bin_of, best, true);
    try_fit(bin_of, best, true);
    // Summed afresh, as `best` was at the start: never above it.
    return ws_.max_load(bin_of);
  }

  /// @brief The ranking of the items of the last call (indexes by cost
  /// descending, index ascending), to pass back as a `hint` for the same
  /// costs; empty after `none` / `arrival` and calls without items.
  [[nodiscard]] std::span<const std::uint32_t> ranking() const noexcept { return ws_.order; }

 private:
  // improve() / finish(): the bin count and an existing assignment.
  static void check_assignment(std::span<const double> costs, std::uint32_t bins,
                               std::span<const std::uint32_t> bin_of) {
    require(bins > 0 && bins <= max_partition_bins, "bins", "number of bins must be in [1, ",
            max_partition_bins, "], got ", bins);
    require(bin_of.size() == costs.size(), "bin_of", "output has ", bin_of.size(),
            " entries, need ", costs.size());
    for (std::size_t i = 0; i < bin_of.size(); ++i)
      if (bin_of[i] >= bins)
        fail(errc::invalid_argument, cat("bin_of[", i, "]"), "bin ", bin_of[i], " >= bins ", bins);
  }

  [[nodiscard]] bool exact_applies() const noexcept {
    return exact_applies(ws_.costs.size(), ws_.k);
  }

  // `refined`'s KK step: KK cannot beat max(mean, largest item), so it is
  // skipped once `best` is within refine_kk_skip_gap of that bound; otherwise
  // KK runs and replaces bin_of when better. Small problems always refine
  // KK's result; larger ones only when KK alone already beats `best`
  // (refining costs about as much as KK). Returns the max load.
  double try_kk(std::span<std::uint32_t> bin_of, double best, bool pairs) {
    const std::size_t n = ws_.costs.size();
    if (ws_.k <= 1) return best;
    if (!(best > lower_ * (1 + refine_kk_skip_gap))) return best;
    alt_.resize(n);
    kk_.run(ws_, alt_);
    const bool small = ws_.k <= 16 && n <= 64;
    double kk = small ? refine(alt_, pairs) : ws_.max_load(alt_);
    if (!small && kk < best) kk = refine(alt_, pairs);
    if (kk < best) {
      best = kk;
      std::copy(alt_.begin(), alt_.end(), bin_of.begin());
    }
    return best;
  }

  // `refined`'s MULTIFIT step: when `best` is more than refine_fit_gap above
  // max(mean, largest item), bisect a capacity between that bound and `best`
  // with first-fit-decreasing packings; the best packing, after local search,
  // replaces bin_of when better. Returns the max load.
  double try_fit(std::span<std::uint32_t> bin_of, double best, bool pairs) {
    const std::size_t n = ws_.costs.size();
    if (ws_.equal || n <= ws_.k || refine_fit_steps == 0) return best;
    if (!(best > lower_ * (1 + refine_fit_gap))) return best;
    // MULTIFIT writes only packings below bin_of's max load into it.
    const double fit = fit_.run(ws_, bin_of, lower_, refine_fit_steps);
    return fit < best ? std::min(fit, refine(bin_of, pairs)) : best;
  }

  // max(mean load, largest item) of the current problem (ranked), given its total.
  [[nodiscard]] double lower_bound(double total) const noexcept {
    return std::max(total / static_cast<double>(ws_.k), ws_.costs[ws_.order[0]]);
  }

  // Local search (`refined`) with this partitioner's knobs; returns the max
  // load. `pairs` (improve() only): also two-for-one exchanges once the wide
  // pass is stuck.
  double refine(std::span<std::uint32_t> bin_of, bool pairs) {
    return refine_.run(ws_, bin_of, refine_steps_per_item, refine_min_gain, refine_width,
                       refine_wide_gap, pairs);
  }

  // Grows every buffer any path may use for (n, k), so that a later call of at
  // most this size allocates nothing, whichever path it takes.
  void reserve(std::size_t n, std::uint32_t k, balance_method method) {
    const std::size_t cand =
        k <= exact_max_bins ? k * (std::min<std::size_t>(n, exact_max_items) + 1) : k;
    ws_.reserve(n, k, cand);
    if (alt_.capacity() < n + 1) alt_.reserve(n + 1);
    lpt_.reserve(k);
    fit_.reserve(n, k);
    refine_.reserve(n, k);
    exact_.reserve(n);
    const bool kk =
        method == balance_method::karmarkar_karp ||
        (method == balance_method::refined && k <= refine_kk_max_bins && n <= refine_kk_max_items);
    if (kk) kk_.reserve(n);  // O(n) in all: nodes, states, merge scratch; the pool 2 x 4n ids
  }

  detail::partition_workspace ws_;  // the problem, the ranking, shared scratch
  detail::lpt_partition lpt_;
  detail::multifit_partition fit_;
  detail::karmarkar_karp_partition kk_;
  detail::local_search refine_;
  detail::branch_and_bound exact_;
  double lower_ = 0.0;              // max(mean load, largest item) of the current call
  std::vector<std::uint32_t> alt_;  // try_kk(): KK's assignment
};

}  // namespace disttrain
