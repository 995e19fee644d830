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
///   objective, then an iterated local search: first-improvement descent over
///   pairwise swaps and single moves (remove one microbatch, reinsert
///   elsewhere), each candidate scored exactly, until a full pass finds
///   nothing; then 2-3 random swaps of the best order (a fixed-seed generator,
///   so deterministic) and another descent, until `patience` such restarts in
///   a row find nothing better or `budget` objective evaluations are spent.
///   Never worse than `paper` or `identity`.
///
/// An objective with `pipeline_time`'s incremental interface (`anchor`,
/// `try_order`, `accept`) is scored without copying rows: a candidate that
/// changes positions from p on recomputes only the ops from p's first one,
/// and stops once it provably cannot beat the incumbent. Any other objective
/// gets the rows copied into execution order for every candidate.
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
#include "disttrain/core/rng.hpp"
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
  /// Most objective evaluations the search may spend per call (seeds excluded).
  std::uint32_t budget = 8000;
  /// Perturbations in a row that may fail to improve the best order before
  /// the iterated search stops (0: one descent from the best seed only).
  std::uint32_t patience = 2;

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
    cur_.resize(m);
    best_.resize(m);
    if constexpr (requires(Objective & o, std::span<const std::uint32_t> ord, double c) {
                    { o.anchor(t, ord) } -> std::convertible_to<double>;
                    { o.try_order(ord, std::size_t{0}, c) } -> std::convertible_to<double>;
                    o.accept();
                  }) {
      incremental_scorer<Objective> sc{&objective, &t_};
      return run(sc, method, perm);
    } else {
      copying_scorer<Objective> sc{&objective, &t_, &pf_, &pb_};
      return run(sc, method, perm);
    }
  }

 private:
  // Scores orders for the search. `full(o)` scores `o` from scratch and makes
  // it the anchor; `trial(o, from, cutoff)` scores an order equal to the
  // anchor before position `from` (exactly if below `cutoff`, else any value
  // >= `cutoff`); `keep()` makes the last trial, one below its cutoff, the anchor.
  template <class Objective>
  struct copying_scorer {  // any objective: the rows are copied into execution order
    Objective* objective;
    const microbatch_times* t;
    std::vector<double>*pf, *pb;
    double full(std::span<const std::uint32_t> order) {
      const std::size_t S = t->stages;
      pf->resize(order.size() * S);
      pb->resize(order.size() * S);
      for (std::size_t p = 0; p < order.size(); ++p) {
        const auto row = static_cast<std::ptrdiff_t>(std::size_t{order[p]} * S);
        std::copy_n(t->forward.begin() + row, S, pf->begin() + static_cast<std::ptrdiff_t>(p * S));
        std::copy_n(t->backward.begin() + row, S, pb->begin() + static_cast<std::ptrdiff_t>(p * S));
      }
      return checked(
          static_cast<double>((*objective)(microbatch_times{order.size(), S, *pf, *pb})));
    }
    double trial(std::span<const std::uint32_t> order, std::size_t, double) { return full(order); }
    void keep() {}
  };
  template <class Objective>
  struct incremental_scorer {  // pipeline_time: only the ops from `from` on are recomputed
    Objective* objective;
    const microbatch_times* t;
    double full(std::span<const std::uint32_t> order) {
      return checked(static_cast<double>(objective->anchor(*t, order)));
    }
    double trial(std::span<const std::uint32_t> order, std::size_t from, double cutoff) {
      return checked(static_cast<double>(objective->try_order(order, from, cutoff)));
    }
    void keep() { objective->accept(); }
  };
  static double checked(double v) {
    if (!std::isfinite(v))
      fail(errc::invalid_argument, "order_objective", "returned non-finite ", v);
    return v;
  }

  static double cutoff(double incumbent) noexcept {
    return incumbent - std::abs(incumbent) * 1e-12;
  }
  static bool better(double candidate, double incumbent) noexcept {
    return candidate < cutoff(incumbent);
  }

  template <class Scorer>
  double run(Scorer& sc, order_method method, std::span<std::uint32_t> perm) {
    const std::size_t m = size_.size();
    for (std::size_t j = 0; j < m; ++j) cur_[j] = static_cast<std::uint32_t>(j);
    if (method == order_method::identity) {
      std::copy(cur_.begin(), cur_.end(), perm.begin());
      return sc.full(cur_);
    }
    paper_order(cur_);
    double best = sc.full(cur_);
    std::copy(cur_.begin(), cur_.end(), best_.begin());
    if (method == order_method::search) {
      // Other seeds: the given order and "small at both ends".
      for (std::size_t j = 0; j < m; ++j) cur_[j] = static_cast<std::uint32_t>(j);
      consider(sc, best);
      both_ends_order(cur_);
      consider(sc, best);
      best = iterated_search(sc, best);
    }
    std::copy(best_.begin(), best_.end(), perm.begin());
    return best;
  }

  template <class Scorer>
  void consider(Scorer& sc, double& best) {
    const double v = sc.full(cur_);
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

  // Iterated local search: descend from the best seed; then perturb the best
  // order (2-3 random swaps from a fixed-seed generator: deterministic) and
  // descend again, keeping the best, until `patience` perturbations in a row
  // fail or the budget is spent.
  template <class Scorer>
  double iterated_search(Scorer& sc, double best) {
    const std::size_t m = best_.size();
    if (m < 2 || budget == 0) return best;
    spent_ = 1;  // anchoring the best seed
    std::copy(best_.begin(), best_.end(), cur_.begin());
    best = descend(sc, sc.full(cur_));
    std::copy(cur_.begin(), cur_.end(), best_.begin());
    std::uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (std::size_t idle = 0; spent_ < budget && m > 2 && idle < patience; ++idle) {
      std::copy(best_.begin(), best_.end(), cur_.begin());
      const std::size_t kicks = 2 + next(rng) % 2;
      for (std::size_t k = 0; k < kicks; ++k) {
        const std::size_t i = next(rng) % m, j = next(rng) % m;
        std::swap(cur_[i], cur_[j]);
      }
      ++spent_;
      const double v = descend(sc, sc.full(cur_));
      if (better(v, best)) {
        best = v;
        std::copy(cur_.begin(), cur_.end(), best_.begin());
        idle = 0;
      }
    }
    return best;
  }
  static std::uint64_t next(std::uint64_t& x) noexcept {  // a SplitMix64 step
    return splitmix64::mix(x += 0x9e3779b97f4a7c15ull);
  }

  // First-improvement descent of cur_ (whose score `v` is the scorer's
  // anchor) over pairwise swaps and single moves (take position i out,
  // reinsert it at j), until a full pass finds nothing or the budget is spent.
  template <class Scorer>
  double descend(Scorer& sc, double v) {
    const std::size_t m = cur_.size();
    bool improved = true;
    while (improved && spent_ < budget) {
      improved = false;
      for (std::size_t i = 0; i + 1 < m && spent_ < budget; ++i) {
        for (std::size_t j = i + 1; j < m && spent_ < budget; ++j) {
          const auto swap = [&] { std::swap(cur_[i], cur_[j]); };
          if (attempt(sc, v, i, swap, swap)) improved = true;
        }
      }
      for (std::size_t i = 0; i < m && spent_ < budget; ++i) {
        for (std::size_t j = 0; j < m && spent_ < budget; ++j) {
          if (j == i || j + 1 == i) continue;  // no-op or same as a swap
          const auto out_in = [&] { move(i, j); };
          const auto back = [&] { move(j, i); };
          if (attempt(sc, v, std::min(i, j), out_in, back)) improved = true;
        }
      }
    }
    return v;
  }
  // Applies a step to cur_ (changing positions from `from` on) and scores it;
  // keeps it if it beats `v`, else undoes it.
  template <class Scorer, class Step, class Undo>
  bool attempt(Scorer& sc, double& v, std::size_t from, Step step, Undo undo) {
    step();
    ++spent_;
    const double w = sc.trial(cur_, from, cutoff(v));
    if (!better(w, v)) {
      undo();
      return false;
    }
    v = w;
    sc.keep();
    return true;
  }
  // Takes cur_[i] out and reinserts it at position j.
  void move(std::size_t i, std::size_t j) {
    const auto at = [this](std::size_t p) { return cur_.begin() + static_cast<std::ptrdiff_t>(p); };
    if (j > i)
      std::rotate(at(i), at(i + 1), at(j + 1));
    else
      std::rotate(at(j), at(i), at(i + 1));
  }

  microbatch_times t_;
  std::vector<double> size_, pf_, pb_;
  std::vector<std::uint32_t> cur_, best_, idx_;
  std::vector<char> used_;
  std::uint32_t spent_ = 0;
};

}  // namespace disttrain
