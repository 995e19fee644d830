#pragma once
/// @file batch_ranking.hpp
/// @brief Internal: step 1 of the `reorderer` (reorderer.hpp), the batch's
/// canonical order and ranking: input indices sorted by id (a duplicate id is
/// an error), module totals summed in that order, each sample's cost key
/// `sum_k cost_k / T_k`, and the ranking by (key descending, id ascending).
/// Every cut but the arrival cut reads only this ranking.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/detail/radix_sort.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain::detail {

/// @brief The ranking of one batch (above); owns its buffers, reused across batches.
class batch_ranking {
 public:
  /// @brief Grows the buffers for n samples.
  void reserve(std::size_t n) {
    for (auto* v : {&by_id_, &by_rank_})
      if (v->capacity() < n) v->reserve(n);
    if (key_.capacity() < n) key_.reserve(n);
    for (auto* v : {&radix_, &radix_tmp_})
      if (v->capacity() < n) v->reserve(n);
  }

  /// @brief Ranks `batch`, whose costs are indexed over `modules` modules.
  /// Throws `errc::invalid_argument` at `batch[i].id` for a duplicate id.
  void rank(std::span<const sample_meta> batch, std::size_t modules) {
    const std::size_t n = batch.size();
    by_id_.resize(n);
    for (std::size_t i = 0; i < n; ++i) by_id_[i] = static_cast<std::uint32_t>(i);
    bool ids_sorted = true;  // the common case: a loader hands ids in order
    for (std::size_t i = 1; i < n && ids_sorted; ++i) ids_sorted = batch[i - 1].id <= batch[i].id;
    if (!ids_sorted) {
      radix_.resize(n);
      radix_tmp_.resize(n);
      for (std::size_t i = 0; i < n; ++i)
        radix_[i] = radix_item{batch[i].id, static_cast<std::uint32_t>(i)};
      radix_sort(radix_, radix_tmp_);  // stable: equal ids keep input order
      for (std::size_t i = 0; i < n; ++i) by_id_[i] = radix_[i].index;
    }
    for (std::size_t r = 1; r < n; ++r) {
      if (batch[by_id_[r]].id == batch[by_id_[r - 1]].id) {
        const std::uint32_t a = std::min(by_id_[r], by_id_[r - 1]),
                            b = std::max(by_id_[r], by_id_[r - 1]);
        fail(errc::invalid_argument, cat("batch[", b, "].id"), "duplicate sample id ", batch[b].id,
             " (also batch[", a, "])");
      }
    }
    total_.fill(0.0);
    for (std::uint32_t i : by_id_)
      for (std::size_t k = 0; k < modules; ++k) total_[k] += batch[i].cost[k];
    key_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      double key = 0.0;
      for (std::size_t k = 0; k < modules; ++k)
        if (total_[k] > 0.0) key += batch[i].cost[k] / total_[k];
      key_[i] = key;
    }
    // by_rank_: (key descending, id ascending) = a stable sort by key of the id order.
    radix_.resize(n);
    radix_tmp_.resize(n);
    for (std::size_t r = 0; r < n; ++r)
      radix_[r] = radix_item{descending_key(key_[by_id_[r]]), by_id_[r]};
    radix_sort(radix_, radix_tmp_);
    by_rank_.resize(n);
    for (std::size_t r = 0; r < n; ++r) by_rank_[r] = radix_[r].index;
  }

  /// @brief Input indices by id.
  [[nodiscard]] std::span<const std::uint32_t> by_id() const noexcept { return by_id_; }
  /// @brief Input indices by (key descending, id ascending).
  [[nodiscard]] std::span<const std::uint32_t> by_rank() const noexcept { return by_rank_; }
  /// @brief Module k's total cost, summed in id order.
  [[nodiscard]] double total(std::size_t k) const noexcept { return total_[k]; }
  /// @brief Whether input index `lhs` ranks before `rhs` (key descending, id ascending).
  [[nodiscard]] bool ranks_before(std::span<const sample_meta> batch, std::uint32_t lhs,
                                  std::uint32_t rhs) const noexcept {
    return key_[lhs] > key_[rhs] || (key_[lhs] == key_[rhs] && batch[lhs].id < batch[rhs].id);
  }

 private:
  std::vector<std::uint32_t> by_id_, by_rank_;
  std::array<double, max_reorder_modules> total_{};
  std::vector<double> key_;  // cost key per input index
  std::vector<radix_item> radix_, radix_tmp_;
};

}  // namespace disttrain::detail
