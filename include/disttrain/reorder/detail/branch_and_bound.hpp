#pragma once
/// @file branch_and_bound.hpp
/// @brief Internal: the budgeted branch and bound with which the `refined`
/// balance method of `partitioner` finishes small problems, seeded by the
/// heuristic result (exact when it completes within its node budget).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "disttrain/reorder/detail/partition_workspace.hpp"

namespace disttrain::detail {

/// @brief Branch and bound over bin assignments; owns the search path.
class branch_and_bound {
 public:
  /// @brief Grows the search path for n items.
  void reserve(std::size_t n) {
    for (auto* v : {&path_, &best_path_})
      if (v->capacity() < n + 1) v->reserve(n + 1);
  }

  // Branch and bound over assignments in ranked order, seeded with the
  // incumbent `best`; stops at the lower bound max(largest item, total / k) or
  // after exact_node_budget nodes. Returns the (possibly improved) max load.
  double run(partition_workspace& ws, std::span<std::uint32_t> bin_of, double best,
             std::uint32_t exact_node_budget) {
    const std::size_t n = ws.costs.size();
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) total += ws.costs[i];
    const double lower = std::max(ws.costs[ws.order[0]], total / static_cast<double>(ws.k));
    const double tol = best * 1e-12;
    nodes_ = 0;
    if (best <= lower + tol) return best;
    ws.load.assign(ws.k, 0.0);
    ws.count.assign(ws.k, 0);
    path_.assign(n, 0);
    ws.cand.resize(static_cast<std::size_t>(ws.k) * n);
    nodes_ = 0;
    budget_ = exact_node_budget;
    best_ = best;
    found_ = false;
    lower_ = lower;
    branch(ws, 0, 0.0, 0);
    nodes_ = std::min(nodes_, budget_);  // the node that found the budget spent was not visited
    if (found_) {
      for (std::size_t d = 0; d < n; ++d) bin_of[ws.order[d]] = best_path_[d];
    }
    return best_;
  }

  /// @brief Search nodes the last run visited (0 when the seed was at the bound).
  [[nodiscard]] std::size_t nodes() const noexcept { return nodes_; }

 private:
  void branch(partition_workspace& ws, std::size_t depth, double cur_max, std::uint32_t big) {
    const std::size_t n = ws.costs.size();
    if (++nodes_ > budget_ || best_ <= lower_ + best_ * 1e-12) return;
    if (depth == n) {
      best_ = cur_max;
      best_path_.assign(path_.begin(), path_.end());
      found_ = true;
      return;
    }
    const std::uint32_t q = static_cast<std::uint32_t>(n / ws.k),
                        rem = static_cast<std::uint32_t>(n % ws.k);
    const double c = ws.costs[ws.order[depth]];
    // Candidate bins, lightest first; bins with equal (load, count) are interchangeable.
    std::uint32_t* cand = ws.cand.data() + depth * ws.k;
    std::uint32_t nc = 0;
    for (std::uint32_t b = 0; b < ws.k; ++b) {
      if (ws.equal && (ws.count[b] > q || (ws.count[b] == q && big >= rem))) continue;
      bool twin = false;
      for (std::uint32_t x = 0; x < nc && !twin; ++x)
        twin = ws.load[cand[x]] == ws.load[b] && ws.count[cand[x]] == ws.count[b];
      if (!twin) cand[nc++] = b;
    }
    std::sort(cand, cand + nc, [&ws](std::uint32_t x, std::uint32_t y) {
      return ws.load[x] < ws.load[y] || (ws.load[x] == ws.load[y] && x < y);
    });
    for (std::uint32_t x = 0; x < nc; ++x) {
      const std::uint32_t b = cand[x];
      const double nl = ws.load[b] + c;
      if (nl >= best_ - best_ * 1e-12) break;  // later candidates are heavier still
      ws.load[b] = nl;
      ++ws.count[b];
      path_[depth] = b;
      branch(ws, depth + 1, std::max(cur_max, nl),
             big + (ws.equal && ws.count[b] == q + 1 ? 1u : 0u));
      --ws.count[b];
      ws.load[b] -= c;
      if (nodes_ > budget_ || best_ <= lower_ + best_ * 1e-12) return;
    }
  }
  std::vector<std::uint32_t> path_, best_path_;  // bin per ranked item: current, best
  std::size_t nodes_ = 0, budget_ = 0;           // nodes visited, node budget
  double best_ = 0.0, lower_ = 0.0;              // incumbent max load, lower bound
  bool found_ = false;                           // the search improved on the seed
};

}  // namespace disttrain::detail
