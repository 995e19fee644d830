#pragma once
/// @file partition_workspace.hpp
/// @brief Internal: the problem and the scratch shared by the partition
/// algorithms of `partitioner` (detail/lpt.hpp, karmarkar_karp.hpp,
/// local_search.hpp, branch_and_bound.hpp): the item costs, the bin count, the
/// ranking of the items, per-bin loads and counts, and the steps every method
/// shares (input check, ranking, contiguous chunks, max load).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/detail/radix_sort.hpp"

namespace disttrain::detail {

/// @brief One partition problem (costs, bins, equal-count mode) and the
/// buffers the algorithms share. Filled by `partitioner` per call.
struct partition_workspace {
  /// Sorting the items: below this many items std::sort is faster than radix.
  static constexpr std::size_t radix_min_items = 128;

  std::span<const double> costs;             ///< item costs
  std::uint32_t k = 1;                       ///< number of bins
  bool equal = false;                        ///< equal item counts per bin
  std::vector<std::uint32_t> order;          ///< items by (cost descending, index ascending)
  std::vector<double> load;                  ///< per-bin load (scratch of every algorithm)
  std::vector<std::uint32_t> count;          ///< per-bin item count (scratch)
  std::vector<std::uint32_t> cand;           ///< candidate bins (local search, branch and bound)
  std::vector<radix_item> keyed, keyed_tmp;  ///< sort_items() scratch

  /// @brief Every cost finite and >= 0 (NaN fails both tests), their sum
  /// finite: then every bin load is finite too. Returns the sum.
  static double check_costs(std::span<const double> costs_in) {
    constexpr double top = std::numeric_limits<double>::max();
    double total = 0.0;
    for (std::size_t i = 0; i < costs_in.size(); ++i) {
      const double c = costs_in[i];
      if (!(c >= 0.0 && c <= top))
        fail(errc::invalid_argument, cat("costs[", i, "]"), "cost must be finite and >= 0, got ",
             c);
      total += c;
    }
    if (!(total <= top))
      fail(errc::invalid_argument, "costs", "the sum of the ", costs_in.size(),
           " costs overflows (exceeds ", top, ")");
    return total;
  }

  /// @brief Grows the shared buffers for n items and k bins (`cand_size`
  /// candidate entries) so a later call of at most this size allocates nothing.
  void reserve(std::size_t n, std::size_t bins, std::size_t cand_size) {
    if (order.capacity() < n + 1) order.reserve(n + 1);
    if (count.capacity() < bins) count.reserve(bins);
    if (cand.capacity() < cand_size) cand.reserve(cand_size);
    if (load.capacity() < bins) load.reserve(bins);
    if (keyed.capacity() < n) keyed.reserve(n);
    if (n >= radix_min_items && keyed_tmp.capacity() < n) keyed_tmp.reserve(n);
  }

  /// @brief Largest bin load of an assignment (fills `load`).
  double max_load(std::span<const std::uint32_t> bin_of) {
    load.assign(k, 0.0);
    // Summed in item index order, so the value depends only on the input.
    for (std::size_t i = 0; i < costs.size(); ++i) load[bin_of[i]] += costs[i];
    return *std::max_element(load.begin(), load.end());
  }

  [[nodiscard]] std::uint32_t capacity_of(std::uint32_t i) const noexcept {
    const std::uint32_t n = static_cast<std::uint32_t>(costs.size());
    return n / k + (i < n % k ? 1u : 0u);
  }

  void chunk(std::span<std::uint32_t> bin_of) const {
    std::uint32_t b = 0, used = 0;
    for (std::size_t i = 0; i < costs.size(); ++i) {
      while (used == capacity_of(b)) {
        ++b;
        used = 0;
      }
      bin_of[i] = b;
      ++used;
    }
  }

  /// @brief Whether `ranked` is the ranking of the items, i.e. the n items
  /// by (cost descending, index ascending): O(n), no scratch (n strictly
  /// ordered entries below n are all the items).
  [[nodiscard]] bool is_ranking(std::span<const std::uint32_t> ranked) const noexcept {
    const std::size_t n = costs.size();
    if (ranked.size() != n || (n > 0 && ranked[0] >= n)) return false;
    for (std::size_t r = 1; r < n; ++r) {
      const std::uint32_t x = ranked[r - 1], y = ranked[r];
      if (y >= n || !(costs[x] > costs[y] || (costs[x] == costs[y] && x < y))) return false;
    }
    return true;
  }

  // order = items by (cost descending, index ascending). A `hint` (e.g. the
  // order a previous call found for the same costs) is taken when
  // is_ranking() confirms it; already ordered input (the reorderer hands
  // slots in rank order) is detected in O(n); large inputs use a stable radix
  // sort, small ones a comparison sort: all give this unique order.
  void sort_items(std::span<const std::uint32_t> hint = {}) {
    const std::size_t n = costs.size();
    if (n > 1 && is_ranking(hint)) {
      order.assign(hint.begin(), hint.end());
      return;
    }
    order.resize(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
    bool sorted = true;
    for (std::size_t i = 1; i < n && sorted; ++i) sorted = !(costs[i - 1] < costs[i]);
    if (sorted) return;
    keyed.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      keyed[i] = radix_item{detail::descending_key(costs[i]), static_cast<std::uint32_t>(i)};
    if (n >= radix_min_items) {
      keyed_tmp.resize(n);
      radix_sort(keyed, keyed_tmp);
    } else {
      std::sort(keyed.begin(), keyed.end(), [](const radix_item& x, const radix_item& y) {
        return x.key < y.key || (x.key == y.key && x.index < y.index);
      });
    }
    for (std::size_t i = 0; i < n; ++i) order[i] = keyed[i].index;
  }
};

}  // namespace disttrain::detail
