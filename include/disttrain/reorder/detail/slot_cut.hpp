#pragma once
/// @file slot_cut.hpp
/// @brief Internal: step 2 of the `reorderer` (reorderer.hpp), cutting a
/// ranked batch into m slots (the future microbatches) of floor/ceil(n/m)
/// samples, larger slots first: in arrival order, by rank (size-sorted), by
/// id, by one module's cost, ranks dealt round-robin, or balanced (every
/// module's slot totals near total / m).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "disttrain/reorder/detail/batch_ranking.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/partition.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain::detail {

/// @brief n samples cut into m slots of floor/ceil(n/m), the larger ones first.
struct slot_layout {
  std::size_t n = 0;  ///< samples
  std::size_t m = 1;  ///< slots
  /// @brief First sample position of slot j (j = m: n).
  [[nodiscard]] std::size_t begin(std::size_t j) const noexcept {
    return j * (n / m) + std::min(j, n % m);
  }
  /// @brief Samples in slot j.
  [[nodiscard]] std::size_t size(std::size_t j) const noexcept { return begin(j + 1) - begin(j); }
};

/// @brief Ways to cut the batch into slots: the public policies plus the
/// slot search's extra starting points.
enum class slot_start : std::uint8_t { arrival, size_sorted, balanced, by_id, dealt, by_module };

/// @brief One cut: how, and the module whose cost orders `by_module`.
struct slot_cut {
  slot_start how = slot_start::balanced;
  std::size_t module = 0;
};

/// @brief Cuts batches into slots (above); owns its scratch, reused across batches.
class slot_cutter {
 public:
  /// @brief Grows the scratch for n samples under `options`.
  void reserve(std::size_t n, const reorder_options& options) {
    const std::size_t m = options.microbatches, K = options.modules.size();
    for (auto* v : {&bins_, &fill_})
      if (v->capacity() < std::max(n, m)) v->reserve(std::max(n, m));
    if (relabel_.capacity() < m) relabel_.reserve(m);
    if (vec_load_.capacity() < m * K) vec_load_.reserve(m * K);
    if (costs_.capacity() < n) costs_.reserve(n);
  }

  /// @brief `seq` (n entries) = the batch's input indices slot by slot, for
  /// `options.microbatches` slots (slot j at `slot_layout::begin(j)`).
  void cut(const reorder_options& options, std::span<const sample_meta> batch,
           const batch_ranking& ranking, slot_cut c, std::span<std::uint32_t> seq) {
    const std::size_t n = batch.size();
    const slot_layout slots{n, options.microbatches};
    const std::span<const std::uint32_t> ranked = ranking.by_rank();
    switch (c.how) {
      case slot_start::arrival:
        for (std::size_t i = 0; i < n; ++i) seq[i] = static_cast<std::uint32_t>(i);
        break;
      case slot_start::size_sorted: std::copy(ranked.begin(), ranked.end(), seq.begin()); break;
      case slot_start::by_id: {
        const std::span<const std::uint32_t> ids = ranking.by_id();
        std::copy(ids.begin(), ids.end(), seq.begin());
        break;
      }
      case slot_start::by_module:  // consecutive by one module's cost (descending, ties by rank)
        std::copy(ranked.begin(), ranked.end(), seq.begin());
        std::sort(seq.begin(), seq.end(), [&](std::uint32_t x, std::uint32_t y) {
          const double cx = batch[x].cost[c.module], cy = batch[y].cost[c.module];
          if (cx != cy) return cx > cy;
          return ranking.ranks_before(batch, x, y);
        });
        break;
      case slot_start::dealt: {
        // Ranks dealt round-robin: slot j gets ranks j, j + m, ... (as counts allow).
        fill_.assign(slots.m, 0);
        std::size_t j = 0;
        for (std::size_t r = 0; r < n; ++r) {
          while (fill_[j] == slots.size(j)) j = (j + 1) % slots.m;
          seq[slots.begin(j) + fill_[j]++] = ranked[r];
          j = (j + 1) % slots.m;
        }
        break;
      }
      case slot_start::balanced: {
        // Equal-count bins with equal totals for every module, then each bin's
        // members in rank order.
        bins_.resize(n);
        balance(options, batch, ranking);
        // Bins holding ceil(n/m) samples become the first slots (slot_layout's
        // order), each group in bin order.
        fill_.assign(slots.m, 0);
        for (std::size_t r = 0; r < n; ++r) ++fill_[bins_[r]];
        relabel_.resize(slots.m);
        std::uint32_t next = 0;
        for (const bool big : {true, false})
          for (std::size_t x = 0; x < slots.m; ++x)
            if ((fill_[x] > n / slots.m) == big) relabel_[x] = next++;
        fill_.assign(slots.m, 0);
        for (std::size_t r = 0; r < n; ++r) {
          const std::uint32_t j = relabel_[bins_[r]];
          seq[slots.begin(j) + fill_[j]++] = ranked[r];
        }
        break;
      }
    }
  }

 private:
  // bins_[r] = slot of rank r such that every module's slot totals are near
  // total/m. One module: the 1-D refined partitioner on its costs. Several:
  // vector LPT: ranks in order, each to the open slot minimising the largest
  // normalised module load after adding it (ties: smaller sum, lower slot).
  void balance(const reorder_options& options, std::span<const sample_meta> batch,
               const batch_ranking& ranking) {
    const std::size_t n = batch.size();
    const std::size_t K = options.modules.size();
    const std::size_t m = options.microbatches;
    const std::span<const std::uint32_t> ranked = ranking.by_rank();
    if (K == 1) {
      costs_.resize(n);
      for (std::size_t r = 0; r < n; ++r) costs_[r] = batch[ranked[r]].cost[0];
      partitioner_.partition(costs_, static_cast<std::uint32_t>(m), true, balance_method::refined,
                             bins_);
      return;
    }
    std::array<double, max_reorder_modules> scale{};
    for (std::size_t k = 0; k < K; ++k)
      scale[k] = ranking.total(k) > 0.0 ? static_cast<double>(m) / ranking.total(k) : 0.0;
    vec_load_.assign(m * K, 0.0);
    fill_.assign(m, 0);
    const std::size_t q = n / m, rem = n % m;
    std::size_t big = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const sample_meta& smp = batch[ranked[r]];
      std::array<double, max_reorder_modules> add{};  // the sample's normalised costs
      for (std::size_t k = 0; k < K; ++k) add[k] = smp.cost[k] * scale[k];
      std::size_t best = m;
      double best_max = 0.0, best_sum = 0.0;
      for (std::size_t j = 0; j < m; ++j) {
        if (fill_[j] == q + 1 || (fill_[j] == q && big == rem)) continue;
        double mx = 0.0, sm = 0.0;
        for (std::size_t k = 0; k < K; ++k) {
          const double v = vec_load_[j * K + k] + add[k];
          mx = std::max(mx, v);
          sm += v;
        }
        if (best == m || mx < best_max || (mx == best_max && sm < best_sum)) {
          best = j;
          best_max = mx;
          best_sum = sm;
        }
      }
      for (std::size_t k = 0; k < K; ++k) vec_load_[best * K + k] += add[k];
      if (++fill_[best] == q + 1) ++big;
      bins_[r] = static_cast<std::uint32_t>(best);
    }
  }

  partitioner partitioner_;  // one module: the balanced cut's equal-count split
  std::vector<std::uint32_t> bins_, fill_, relabel_;
  std::vector<double> vec_load_, costs_;
};

}  // namespace disttrain::detail
