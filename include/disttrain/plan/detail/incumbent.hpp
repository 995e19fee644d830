#pragma once
/// @file incumbent.hpp
/// @brief The planner search's incumbent: the best plan found so far, and the
/// total order (iteration time, GPUs, `tie_key`) that ranks plans.

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include "disttrain/plan/parallel_plan.hpp"

namespace disttrain {

namespace detail {

/// @brief Tie-break key of a plan: [any colocated, n, backbone tp, recompute
/// (none 0, selective 1, full 2), dp, pp, virtual stages, ZB-H1 (1F1B first:
/// less memory), then per side module: colocated, pp, tp, recompute, dp, then
/// every module's layers per stage].
[[nodiscard]] inline std::vector<long long> tie_key(const parallel_plan& p) {
  std::vector<long long> k;
  bool col = false;
  for (const auto& m : p.modules) col = col || m.colocated;
  k.push_back(col ? 1 : 0);
  k.push_back(p.microbatch_samples());
  const module_plan& b = p.modules[p.backbone_index()];
  auto rc = [](const module_plan& m) { return m.recompute ? 2 : m.selective_recompute ? 1 : 0; };
  auto add = [&k](std::initializer_list<long long> xs) {
    for (const long long x : xs) k.push_back(x);
  };
  add({b.tp, rc(b), b.dp, b.pp, b.virtual_stages, p.schedule == plan_schedule::zb_h1 ? 1 : 0});
  for (const auto& m : p.modules)
    if (m.role != "backbone") add({m.colocated ? 1 : 0, m.pp, m.tp, rc(m), m.dp});
  for (const auto& m : p.modules)
    for (const auto l : m.layers) k.push_back(l);
  return k;
}

/// @brief A scored plan and the total order the planner minimises.
struct ranked_plan {
  double time = std::numeric_limits<double>::infinity();
  long long gpus = 0;
  std::vector<long long> key;
  parallel_plan plan;
};
/// @brief (time, gpus, key) lexicographic.
[[nodiscard]] inline bool ranks_before(double t, long long g, const std::vector<long long>& k,
                                       const ranked_plan& b) {
  if (t != b.time) return t < b.time;
  if (g != b.gpus) return g < b.gpus;
  // Not `k < b.key`: that instantiates vector's three-way comparison in every
  // translation unit (docs/header_cost.md).
  return std::lexicographical_compare(k.begin(), k.end(), b.key.begin(), b.key.end());
}

/// @brief The best plan found so far. Its time prunes the search: a branch
/// whose lower bound exceeds `time()` cannot hold a better plan.
class incumbent {
 public:
  /// @brief Iteration time of the best plan so far (+inf before the first).
  [[nodiscard]] double time() const noexcept { return best_.time; }
  /// @brief Whether no plan has been found yet.
  [[nodiscard]] bool empty() const noexcept { return best_.plan.modules.empty(); }
  /// @brief The best plan so far.
  [[nodiscard]] const ranked_plan& best() const noexcept { return best_; }

  /// @brief Whether a plan of `time` on `gpus` GPUs could rank before the
  /// incumbent (equal time and GPUs: the tie key decides, so maybe).
  [[nodiscard]] bool may_improve(double time, long long gpus) const noexcept {
    return time < best_.time || (time == best_.time && gpus <= best_.gpus);
  }

  /// @brief Makes `p` (scored `time`, `gpus`) the incumbent if it ranks before it.
  void consider(double time, long long gpus, parallel_plan&& p) {
    if (!may_improve(time, gpus)) return;
    auto key = tie_key(p);
    if (!ranks_before(time, gpus, key, best_)) return;
    best_.time = time;
    best_.gpus = gpus;
    best_.key = std::move(key);
    best_.plan = std::move(p);
  }

 private:
  ranked_plan best_;
};

}  // namespace detail
}  // namespace disttrain
