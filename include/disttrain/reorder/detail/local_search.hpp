#pragma once
/// @file local_search.hpp
/// @brief Internal: the local search of the `refined` balance method of
/// `partitioner`: moves and pairwise swaps between the heaviest bin and the
/// lightest ones (every other bin once those are exhausted and the heaviest is
/// still well above the lower bound, and then two-for-one exchanges) while that
/// lowers the heavier of the two.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "disttrain/reorder/detail/partition_workspace.hpp"

namespace disttrain::detail {

/// @brief Local search on an assignment; owns the items grouped by bin and
/// the bins sorted by load.
class local_search {
 public:
  /// @brief Grows the buffers for n items and k bins.
  void reserve(std::size_t n, std::size_t bins) {
    if (flat_.capacity() < n + 1) flat_.reserve(n + 1);
    if (start_.capacity() < bins + 1) start_.reserve(bins + 1);
    if (by_load_.capacity() < bins) by_load_.reserve(bins);
  }

  // Local search on an assignment; returns its max load. `pairs`: with the
  // two-for-one pass. Each bin keeps its items sorted by (cost ascending,
  // index descending), so the best partner of an item is found by binary search.
  double run(partition_workspace& ws, std::span<std::uint32_t> bin_of,
             std::uint32_t refine_steps_per_item, double refine_min_gain,
             std::uint32_t refine_width, double wide_gap, bool pairs) {
    const std::size_t n = ws.costs.size();
    if (ws.k == 1) return ws.max_load(bin_of);
    // Items grouped by bin in flat_ (bin b = flat_[start_[b] .. start_[b+1])),
    // each group in before() order: a counting sort of the ascending ranking.
    ws.load.assign(ws.k, 0.0);
    start_.assign(ws.k + 1, 0);
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      ++start_[bin_of[i] + 1];
      ws.load[bin_of[i]] += ws.costs[i];
      total += ws.costs[i];
    }
    // Nothing beats max(mean load, largest item): stop once there (at once
    // when the start is there already, e.g. one item per bin: no O(k log k)
    // sort of the bins).
    const double lower = std::max(total / static_cast<double>(ws.k), ws.costs[ws.order[0]]);
    const double start_max = *std::max_element(ws.load.begin(), ws.load.end());
    if (start_max <= lower * (1 + 1e-9)) return start_max;
    for (std::uint32_t b = 0; b < ws.k; ++b) start_[b + 1] += start_[b];
    flat_.resize(n);
    ws.count.assign(ws.k, 0);
    for (std::size_t r = n; r-- > 0;) {
      const std::uint32_t item = ws.order[r];
      const std::uint32_t b = bin_of[item];
      flat_[start_[b] + ws.count[b]++] = item;
    }
    // Bins by (load, index) ascending, kept sorted across steps (a step
    // changes two loads): the heaviest bin and the lightest candidates are read
    // off its ends instead of being searched for.
    const auto lighter = [&ws](std::uint32_t x, std::uint32_t y) {
      return ws.load[x] < ws.load[y] || (ws.load[x] == ws.load[y] && x < y);
    };
    by_load_.resize(ws.k);
    for (std::uint32_t b = 0; b < ws.k; ++b) by_load_[b] = b;
    std::sort(by_load_.begin(), by_load_.end(), lighter);
    const std::size_t max_steps = static_cast<std::size_t>(refine_steps_per_item) * (n + ws.k);
    const std::size_t width = std::min<std::size_t>(refine_width, ws.k - 1);
    const auto cost_below = [&ws](std::uint32_t item, double v) { return ws.costs[item] < v; };
    for (std::size_t step = 0; step < max_steps; ++step) {
      // Heaviest: the lowest index among the bins of maximal load.
      std::size_t top = ws.k - 1;
      while (top > 0 && ws.load[by_load_[top - 1]] == ws.load[by_load_[ws.k - 1]]) --top;
      const std::uint32_t a = by_load_[top];
      const double la = ws.load[a];
      if (la <= lower * (1 + 1e-9)) break;
      const double tol = la * refine_min_gain;
      const std::span<const std::uint32_t> A(flat_.data() + start_[a], start_[a + 1] - start_[a]);
      // Tries the bins of ranks [from, to) among the others, lightest first
      // (rank x is by_load_[x], or [x + 1] past the heaviest): the best move
      // or swap (with `two_for_one`: two-for-one exchange) with the first bin
      // that has one is taken.
      const auto step_with = [&](std::size_t from, std::size_t to, bool two_for_one) {
        for (std::size_t x = from; x < to; ++x) {
          const std::size_t pos = x < top ? x : x + 1;
          const std::uint32_t b = by_load_[pos];
          const double lb = ws.load[b];
          const double gap = la - lb;
          if (gap <= tol) return false;  // heavier bins have smaller gaps still
          double best = la - tol;
          exchange ex;  // the best one found: items of `a` to `b` and of `b` to `a`
          const std::span<const std::uint32_t> B(flat_.data() + start_[b],
                                                 start_[b + 1] - start_[b]);
          const auto consider = [&](const exchange& e, double d) {
            if (d > tol && d < gap) {
              const double nm = std::max(la - d, lb + d);
              if (nm < best) {
                best = nm;
                ex = e;
              }
            }
          };
          // The item of `items` whose cost is closest to `target`, on each side
          // of it: f(item, its cost) for both neighbours.
          const auto near = [&](std::span<const std::uint32_t> items, double target, auto&& f) {
            const auto it = std::lower_bound(items.begin(), items.end(), target, cost_below);
            if (it != items.end()) f(*it, ws.costs[*it]);
            if (it != items.begin()) f(*(it - 1), ws.costs[*(it - 1)]);
          };
          if (!two_for_one) {
            if (!ws.equal)  // move the item of `a` closest to gap / 2
              near(A, gap / 2, [&](std::uint32_t i, double c) {
                consider({{i, nil}, {nil, nil}}, c);
              });
            for (std::uint32_t i : A) {  // swap i with the item of `b` closest to cost(i) - gap / 2
              const double ci = ws.costs[i];
              near(B, ci - gap / 2, [&](std::uint32_t j, double c) {
                consider({{i, nil}, {j, nil}}, ci - c);
              });
            }
          } else if (!ws.equal) {
            // Two items of `a` for the item of `b` closest to their sum - gap / 2.
            for (std::size_t u = 0; u < A.size(); ++u) {
              for (std::size_t v = u + 1; v < A.size(); ++v) {
                const double s = ws.costs[A[u]] + ws.costs[A[v]];
                near(B, s - gap / 2, [&](std::uint32_t j, double c) {
                  consider({{A[u], A[v]}, {j, nil}}, s - c);
                });
              }
            }
            // One item of `a` for the two of `b` whose sum is closest to its
            // cost - gap / 2 (two pointers over B's ascending costs).
            for (std::uint32_t i : A) {
              const double ci = ws.costs[i];
              const double target = ci - gap / 2;
              std::size_t lo = 0, hi = B.size();
              while (lo + 1 < hi) {
                const double s = ws.costs[B[lo]] + ws.costs[B[hi - 1]];
                consider({{i, nil}, {B[lo], B[hi - 1]}}, ci - s);
                if (s < target)
                  ++lo;
                else
                  --hi;
              }
            }
          }
          if (ex.to_b[0] != nil) {
            for (const std::uint32_t i : ex.to_b)
              if (i != nil) move(ws, i, a, b, bin_of);
            for (const std::uint32_t j : ex.to_a)
              if (j != nil) move(ws, j, b, a, bin_of);
            resort_bins(ws, top, pos);
            return true;
          }
        }
        return false;
      };
      // The `width` lightest bins first; when none helps and the heaviest is
      // still more than wide_gap above the bound, every other bin, then (with
      // `pairs`, not in equal-count mode) every other bin with two-for-one
      // exchanges.
      bool improved = step_with(0, width, false);
      const bool wide = la > lower * (1 + wide_gap);
      if (!improved && width < ws.k - 1 && wide) improved = step_with(width, ws.k - 1, false);
      if (!improved && wide && pairs && !ws.equal) improved = step_with(0, ws.k - 1, true);
      if (!improved) break;
    }
    return *std::max_element(ws.load.begin(), ws.load.end());
  }

 private:
  static constexpr std::uint32_t nil = std::numeric_limits<std::uint32_t>::max();
  // A step: up to two items from the heaviest bin to another, and up to two
  // back (nil: none); a move sends one and takes none.
  struct exchange {
    std::array<std::uint32_t, 2> to_b{nil, nil}, to_a{nil, nil};
  };

  // Restores by_load_'s order after the loads of the bins at positions ia and
  // ib changed: both are taken out, then put back at their places (O(k)
  // block moves, k = bins).
  void resort_bins(const partition_workspace& ws, std::size_t ia, std::size_t ib) {
    const auto lighter = [&ws](std::uint32_t x, std::uint32_t y) {
      return ws.load[x] < ws.load[y] || (ws.load[x] == ws.load[y] && x < y);
    };
    const std::uint32_t a = by_load_[ia], b = by_load_[ib];
    const auto lo = by_load_.begin() + static_cast<std::ptrdiff_t>(std::min(ia, ib));
    const auto hi = by_load_.begin() + static_cast<std::ptrdiff_t>(std::max(ia, ib));
    std::copy(hi + 1, by_load_.end(), std::copy(lo + 1, hi, lo));
    by_load_.resize(by_load_.size() - 2);
    for (const std::uint32_t x : {a, b})
      by_load_.insert(std::lower_bound(by_load_.begin(), by_load_.end(), x, lighter), x);
  }

  // Bin order: cost ascending, then index descending (the reverse of the ranking).
  [[nodiscard]] static bool before(const partition_workspace& ws, std::uint32_t x,
                                   std::uint32_t y) noexcept {
    return ws.costs[x] < ws.costs[y] || (ws.costs[x] == ws.costs[y] && x > y);
  }
  // Moves `item` between bins in flat_, shifting the items in between: O(n).
  void move(partition_workspace& ws, std::uint32_t item, std::uint32_t from, std::uint32_t to,
            std::span<std::uint32_t> bin_of) {
    const auto cmp = [&ws](std::uint32_t x, std::uint32_t y) { return before(ws, x, y); };
    const auto base = flat_.begin();
    const auto pos = std::lower_bound(base + start_[from], base + start_[from + 1], item, cmp);
    const auto ins = std::lower_bound(base + start_[to], base + start_[to + 1], item, cmp);
    if (from < to) {
      std::copy(pos + 1, ins, pos);
      *(ins - 1) = item;
      for (std::uint32_t b = from + 1; b <= to; ++b) --start_[b];
    } else {
      std::copy_backward(ins, pos, pos + 1);
      *ins = item;
      for (std::uint32_t b = to + 1; b <= from; ++b) ++start_[b];
    }
    ws.load[from] -= ws.costs[item];
    ws.load[to] += ws.costs[item];
    bin_of[item] = to;
  }

  std::vector<std::uint32_t> flat_, start_;  // items grouped by bin, see before()
  std::vector<std::uint32_t> by_load_;       // bins by (load, index)
};

}  // namespace disttrain::detail
