#pragma once
/// @file incumbent.hpp
/// @brief The planner search's incumbent: the best plan found so far, and the
/// total order (iteration time, GPUs, `tie_key`) that ranks plans.

#include <algorithm>
#include <array>
#include <initializer_list>
#include <limits>
#include <map>
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

/// @brief A class of plans that share what data heterogeneity acts on: the
/// samples per microbatch n (so the microbatch count), the backbone's dp and
/// pp (so its samples per cell n / dp and the pipeline depth), its virtual
/// stages, ZB-H1, and which side modules are colocated (bit 0 encoder, bit 1
/// generator). `plan_for_data` re-ranks the best plan of each class on
/// sampled batches (docs/planner.md, "Planning for the data").
using plan_class = std::array<long long, 6>;

/// @brief The best plan found so far, or (pool mode, `keep_classes`) the best
/// plan of every `plan_class` at most `limit`. Its time prunes the search: a
/// branch whose lower bound exceeds `time()` cannot hold a better plan (of
/// the class entered last, in pool mode), and the search stops at the first
/// backbone configuration whose bound exceeds `limit()`.
class incumbent {
 public:
  /// @brief Pool mode: keep the best plan of every class whose time is at
  /// most `limit` (the search then prunes per class, and globally by `limit`).
  void keep_classes(double limit) {
    pool_ = true;
    limit_ = limit;
  }
  /// @brief Pool mode: the class the next `may_improve` / `consider` /
  /// `time` calls are about (a no-op otherwise).
  void enter(const plan_class& c) {
    if (pool_) cur_ = &classes_[c];
  }
  /// @brief The pruning threshold of the current class: the best time so
  /// far (+inf before the first), never above `limit()`.
  [[nodiscard]] double time() const noexcept {
    if (!pool_) return best_.time;
    return cur_ == nullptr ? limit_ : std::min(limit_, cur_->time);
  }
  /// @brief The threshold of the whole search (`time()` outside pool mode).
  [[nodiscard]] double limit() const noexcept { return pool_ ? limit_ : best_.time; }
  /// @brief Whether no plan has been found yet.
  [[nodiscard]] bool empty() const noexcept {
    if (!pool_) return best_.plan.modules.empty();
    for (const auto& [c, r] : classes_)
      if (!r.plan.modules.empty()) return false;
    return true;
  }
  /// @brief The best plan so far (not in pool mode).
  [[nodiscard]] const ranked_plan& best() const noexcept { return best_; }

  /// @brief Pool mode: the best plan of every class, in the order
  /// (time, GPUs, `tie_key`); the incumbent is left empty.
  [[nodiscard]] std::vector<ranked_plan> take_classes() {
    std::vector<ranked_plan> out;
    for (auto& [c, r] : classes_)
      if (!r.plan.modules.empty()) out.push_back(std::move(r));
    classes_.clear();
    cur_ = nullptr;
    std::sort(out.begin(), out.end(), [](const ranked_plan& a, const ranked_plan& b) {
      return ranks_before(a.time, a.gpus, a.key, b);
    });
    return out;
  }

  /// @brief Whether a plan of `time` on `gpus` GPUs could rank before the
  /// incumbent (equal time and GPUs: the tie key decides, so maybe).
  [[nodiscard]] bool may_improve(double time, long long gpus) const noexcept {
    if (pool_ && time > limit_) return false;
    const ranked_plan& b = current();
    return time < b.time || (time == b.time && gpus <= b.gpus);
  }

  /// @brief Makes `p` (scored `time`, `gpus`) the incumbent (of the current
  /// class) if it ranks before it.
  void consider(double time, long long gpus, parallel_plan&& p) {
    if (!may_improve(time, gpus)) return;
    auto key = tie_key(p);
    ranked_plan& b = current();
    if (!ranks_before(time, gpus, key, b)) return;
    b.time = time;
    b.gpus = gpus;
    b.key = std::move(key);
    b.plan = std::move(p);
  }

 private:
  [[nodiscard]] const ranked_plan& current() const noexcept {
    return pool_ && cur_ != nullptr ? *cur_ : best_;
  }
  [[nodiscard]] ranked_plan& current() noexcept { return pool_ && cur_ != nullptr ? *cur_ : best_; }

  ranked_plan best_;
  bool pool_ = false;
  double limit_ = std::numeric_limits<double>::infinity();
  std::map<plan_class, ranked_plan> classes_;
  ranked_plan* cur_ = nullptr;
};

}  // namespace detail
}  // namespace disttrain
