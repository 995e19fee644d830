#pragma once
/// @file ordering.hpp
/// @brief Inter-microbatch ordering: choose the execution order of a global
/// batch's microbatches that minimises an `order_objective` (by default the
/// exact 1F1B iteration time of `pipeline_time`).
///
/// Methods:
/// - `identity`: keep the given order (the baseline);
/// - `paper`: DistTrain's rule: the smallest microbatch first, the next S-1
///   smallest at the tail (decreasing, so the cool-down drains fast), the rest
///   in the middle best-fit: position i takes the remaining microbatch whose
///   size is closest to that of position i-(S-1), whose backward it pairs with
///   in the 1F1B steady state (the first S-1 middle positions take the smallest
///   remaining). Size = sum over stages of forward + backward. O(m^2).
/// - `search` (default): the best of {identity, paper, both-ends-small} by the
///   objective, then first-improvement local search over pairwise swaps and
///   single moves (remove one microbatch, reinsert elsewhere), each candidate
///   scored exactly, until a full pass finds nothing or `budget` objective
///   evaluations are spent. Never worse than `paper` or `identity`.
///
/// Tie rule: sizes tie by original index; an order replaces the incumbent only
/// if its time is lower by more than a relative 1e-12.
///
/// @snippet reorder.cpp ordering

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/pipeline_time.hpp"

namespace disttrain {

/// @brief How microbatches are ordered.
/// @snippet reorder.cpp order_method
enum class order_method : std::uint8_t {
  identity,  ///< keep the slot order (baseline)
  paper,     ///< DistTrain's smallest-first / small-tail / best-fit rule
  search,    ///< best seed + local search scored by the objective (default)
};

/// @brief Name of an order method ("identity", "paper", "search").
constexpr std::string_view to_string(order_method m) noexcept {
  switch (m) {
    case order_method::identity: return "identity";
    case order_method::paper: return "paper";
    case order_method::search: return "search";
  }
  return "unknown";
}

/// @brief Orders microbatches; owns scratch buffers (no allocation after
/// warm-up for a given size). Not thread-safe.
/// @snippet reorder.cpp microbatch_orderer
class microbatch_orderer {
 public:
  /// Most objective evaluations the local search may spend per call.
  std::uint32_t budget = 4000;

  /// @brief Writes the order into `perm` (`perm[pos]` = row of `t` run at
  /// `pos`) and returns its objective value.
  ///
  /// Throws `errc::invalid_argument` at `perm` when `perm.size() != t.microbatches`
  /// and whatever `t.validate()` throws.
  template <order_objective Objective>
  double order(const microbatch_times& t, Objective& objective, order_method method,
               std::span<std::uint32_t> perm) {
    t.validate();
    const std::size_t m = t.microbatches;
    require(perm.size() == m, "perm", "has ", perm.size(), " entries, need ", m);
    t_ = t;
    size_.assign(m, 0.0);
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t s = 0; s < t.stages; ++s)
        size_[j] += t.forward_at(j, s) + t.backward_at(j, s);
    pf_.resize(m * t.stages);
    pb_.resize(m * t.stages);
    cur_.resize(m);
    best_.resize(m);

    for (std::size_t j = 0; j < m; ++j) cur_[j] = static_cast<std::uint32_t>(j);
    if (method == order_method::identity) {
      std::copy(cur_.begin(), cur_.end(), perm.begin());
      return score(objective, cur_);
    }
    paper_order(cur_);
    double best = score(objective, cur_);
    std::copy(cur_.begin(), cur_.end(), best_.begin());
    if (method == order_method::search) {
      // Other seeds: the given order and "small at both ends".
      for (std::size_t j = 0; j < m; ++j) cur_[j] = static_cast<std::uint32_t>(j);
      consider(objective, best);
      both_ends_order(cur_);
      consider(objective, best);
      best = local_search(objective, best);
    }
    std::copy(best_.begin(), best_.end(), perm.begin());
    return best;
  }

 private:
  template <class Objective>
  double score(Objective& objective, std::span<const std::uint32_t> order) {
    const std::size_t S = t_.stages;
    for (std::size_t p = 0; p < order.size(); ++p) {
      const std::size_t j = order[p];
      std::copy_n(t_.forward.begin() + static_cast<std::ptrdiff_t>(j * S), S,
                  pf_.begin() + static_cast<std::ptrdiff_t>(p * S));
      std::copy_n(t_.backward.begin() + static_cast<std::ptrdiff_t>(j * S), S,
                  pb_.begin() + static_cast<std::ptrdiff_t>(p * S));
    }
    const double v = static_cast<double>(objective(microbatch_times{order.size(), S, pf_, pb_}));
    if (!std::isfinite(v))
      fail(errc::invalid_argument, "order_objective", "returned non-finite ", v);
    return v;
  }

  static bool better(double candidate, double incumbent) noexcept {
    return candidate < incumbent - std::abs(incumbent) * 1e-12;
  }

  template <class Objective>
  void consider(Objective& objective, double& best) {
    const double v = score(objective, cur_);
    if (better(v, best)) {
      best = v;
      std::copy(cur_.begin(), cur_.end(), best_.begin());
    }
  }

  void ascending(std::vector<std::uint32_t>& idx) const {
    idx.resize(size_.size());
    for (std::size_t j = 0; j < idx.size(); ++j) idx[j] = static_cast<std::uint32_t>(j);
    std::sort(idx.begin(), idx.end(), [this](std::uint32_t a, std::uint32_t b) {
      return size_[a] < size_[b] || (size_[a] == size_[b] && a < b);
    });
  }

  void paper_order(std::vector<std::uint32_t>& out) {
    const std::size_t m = size_.size();
    ascending(idx_);
    if (m <= 2) {
      std::copy(idx_.begin(), idx_.end(), out.begin());
      return;
    }
    const std::size_t S = t_.stages;
    const std::size_t tail = std::min(S - 1, m - 1);
    out[0] = idx_[0];
    for (std::size_t i = 1; i <= tail; ++i) out[m - i] = idx_[i];  // idx_[1] runs last
    // Middle: positions 1 .. m-tail-1 from idx_[tail+1 ..] (ascending).
    used_.assign(m, 0);
    std::size_t lo = tail + 1;  // smallest unused in idx_
    for (std::size_t p = 1; p + tail < m; ++p) {
      while (lo < m && used_[lo]) ++lo;
      std::size_t pick = lo;
      if (p >= S - 1 && S > 1) {
        const double target = size_[out[p - (S - 1)]];
        double bestd = std::abs(size_[idx_[lo]] - target);
        for (std::size_t r = lo + 1; r < m; ++r) {
          if (used_[r]) continue;
          const double d = std::abs(size_[idx_[r]] - target);
          if (d < bestd) {
            bestd = d;
            pick = r;
          }
        }
      }
      used_[pick] = 1;
      out[p] = idx_[pick];
    }
  }

  // Ascending sizes dealt alternately to the front and the back: the smallest
  // microbatches sit at both ends, the largest in the middle.
  void both_ends_order(std::vector<std::uint32_t>& out) {
    const std::size_t m = size_.size();
    ascending(idx_);
    std::size_t front = 0, back = m;
    for (std::size_t i = 0; i < m; ++i) {
      if (i % 2 == 0)
        out[front++] = idx_[i];
      else
        out[--back] = idx_[i];
    }
  }

  template <class Objective>
  double local_search(Objective& objective, double best) {
    const std::size_t m = best_.size();
    if (m < 2) return best;
    std::uint32_t spent = 0;
    bool improved = true;
    while (improved && spent < budget) {
      improved = false;
      // Pairwise swaps.
      for (std::size_t i = 0; i + 1 < m && spent < budget; ++i) {
        for (std::size_t j = i + 1; j < m && spent < budget; ++j) {
          std::copy(best_.begin(), best_.end(), cur_.begin());
          std::swap(cur_[i], cur_[j]);
          ++spent;
          const double v = score(objective, cur_);
          if (better(v, best)) {
            best = v;
            std::copy(cur_.begin(), cur_.end(), best_.begin());
            improved = true;
          }
        }
      }
      // Single moves: take position i out and reinsert it at position j.
      for (std::size_t i = 0; i < m && spent < budget; ++i) {
        for (std::size_t j = 0; j < m && spent < budget; ++j) {
          if (j == i || j + 1 == i) continue;  // no-op or same as a swap
          std::copy(best_.begin(), best_.end(), cur_.begin());
          const std::uint32_t x = cur_[i];
          if (j > i)
            std::copy(cur_.begin() + static_cast<std::ptrdiff_t>(i + 1),
                      cur_.begin() + static_cast<std::ptrdiff_t>(j + 1),
                      cur_.begin() + static_cast<std::ptrdiff_t>(i));
          else
            std::copy_backward(cur_.begin() + static_cast<std::ptrdiff_t>(j),
                               cur_.begin() + static_cast<std::ptrdiff_t>(i),
                               cur_.begin() + static_cast<std::ptrdiff_t>(i + 1));
          cur_[j] = x;
          ++spent;
          const double v = score(objective, cur_);
          if (better(v, best)) {
            best = v;
            std::copy(cur_.begin(), cur_.end(), best_.begin());
            improved = true;
          }
        }
      }
    }
    return best;
  }

  microbatch_times t_;
  std::vector<double> size_, pf_, pb_;
  std::vector<std::uint32_t> cur_, best_, idx_;
  std::vector<char> used_;
};

}  // namespace disttrain
