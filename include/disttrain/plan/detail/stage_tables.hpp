#pragma once
/// @file stage_tables.hpp
/// @brief Internal: the planner search's stage times and layer splits
/// (`stage_tables`): each module's forward+backward stage time per (stage
/// type, layer count) at a (tp, recompute, samples per replica) filled on
/// demand, and the splits built from them, both cached for the whole search
/// (keys and tables in stage_time_cache.hpp).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/detail/layer_split.hpp"
#include "disttrain/plan/detail/search_space.hpp"
#include "disttrain/plan/detail/stage_cost.hpp"
#include "disttrain/plan/detail/stage_time_cache.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain::detail {

/// @brief Which part of a stage's time a split function reads: all of it, or its W.
enum class stage_part : std::uint8_t { time, weight };

/// @brief Stage times and layer splits of one search (above).
template <cost_model C>
class stage_tables {
 public:
  stage_tables(const C& cost, const search_space& space, const plan_request& req,
               const planner_options& opt)
      : cost_(cost), space_(space), req_(req), opt_(opt) {}

  /// @brief The table of module i at (tp, rc, k), created empty on first use.
  time_table& table(std::size_t i, int tp, recompute_mode rc, int k) {
    const time_table_key key{i, tp, rc, k};
    auto it = tables_.find(key);
    if (it != tables_.end()) return it->second;
    time_table t;
    t.module = i;
    t.tp = tp;
    t.rc = rc;
    t.k = k;
    t.layers = space_.mods_[i].layers;
    t.v.assign(4 * static_cast<std::size_t>(t.layers + 1), nan_);
    if (opt_.zero_bubble) t.w.assign(t.v.size(), nan_);  // W parts: ZB-H1 searches only
    return tables_.emplace(key, std::move(t)).first->second;
  }

  /// @brief min over stage types and layer counts of time / layers: every
  /// stage of c layers takes at least rho * c, so any split into pp stages has
  /// sum >= rho * L and max >= rho * L / pp (the cheap bound that orders the
  /// backbone configurations before their split is computed).
  double rho(time_table& t) {
    if (!std::isnan(t.rho)) return t.rho;
    double r = inf_;
    for (stage_type ty :
         {stage_type::first, stage_type::middle, stage_type::last, stage_type::whole})
      for (int c = 1; c <= t.layers; ++c) r = std::min(r, tt(t, ty, c) / static_cast<double>(c));
    return t.rho = r;
  }

  /// @brief ZB-H1's `rho`: min over stage types and layer counts of (time -
  /// 2 W) / layers, so every split's sum of (time - 2 W) is at least rho_zb * L.
  double rho_zb(time_table& t) {
    if (!std::isnan(t.rho_zb)) return t.rho_zb;
    double r = inf_;
    for (stage_type ty :
         {stage_type::first, stage_type::middle, stage_type::last, stage_type::whole})
      for (int c = 1; c <= t.layers; ++c)
        r = std::min(r, (tt(t, ty, c) - 2.0 * tw(t, ty, c)) / static_cast<double>(c));
    return t.rho_zb = r;
  }

  /// @brief Forward+backward seconds of a stage of `type` with `c` layers (+inf if impossible).
  double tt(time_table& t, stage_type type, int c) {
    const std::size_t i = static_cast<std::size_t>(type) * static_cast<std::size_t>(t.layers + 1) +
                          static_cast<std::size_t>(c);
    const double slot = t.v[i];
    return std::isnan(slot) ? fill(t, i, type, c) : slot;
  }

  /// @brief The W (weight-gradient) seconds of the stage `tt` prices (ZB-H1
  /// searches only: the tables keep W when `planner_options::zero_bubble`).
  double tw(time_table& t, stage_type type, int c) {
    (void)tt(t, type, c);
    return t.w[static_cast<std::size_t>(type) * static_cast<std::size_t>(t.layers + 1) +
               static_cast<std::size_t>(c)];
  }

  /// @brief Module i's workload of `k` samples.
  [[nodiscard]] module_workload workload(std::size_t i, int k) const {
    return req_.sample_workload[i] * static_cast<double>(k);
  }

  /// @brief A stage's exposed sync under the options' overlap switches, the
  /// parts added to an empty `stage_sync` in model-module order (as `evaluate`).
  [[nodiscard]] double exposed_sync(const stage_sync& part) const noexcept {
    stage_sync s;
    s.add(part);
    return s.exposed_s(opt_.overlap_grad_reduce, opt_.overlap_param_gather);
  }

  /// @brief The cost query of a stage of this search (with its sequence-parallel switch).
  [[nodiscard]] stage_config stage(std::size_t i, int first, int layers, int tp, int dp,
                                   recompute_mode rc) const {
    return stage_config{i,
                        first,
                        layers,
                        tp,
                        dp,
                        rc == recompute_mode::full,
                        rc == recompute_mode::selective,
                        opt_.sequence_parallel};
  }

  /// @brief The TP degree of side module `i` colocated on a backbone of
  /// `tp_b`: its largest supported power of two dividing `tp_b`.
  [[nodiscard]] int colocated_tp(std::size_t i, int tp_b) const {
    int best = 1;
    for (int t : space_.mods_[i].colocated_tps)
      if (tp_b % t == 0) best = std::max(best, t);
    return best;
  }
  /// @brief The whole side module `i` colocated on a backbone stage (tp_b, dp, rc).
  [[nodiscard]] stage_config colocated_cfg(std::size_t i, int tp_b, int dp,
                                           recompute_mode rc) const {
    return stage(i, 0, space_.mods_[i].layers, colocated_tp(i, tp_b), dp, rc);
  }

  /// @brief Time of the side modules of `colocated` (bit i: model module i)
  /// before (`encoders`) or after the backbone, each whole on a backbone stage
  /// of (tp_b, rc) with k samples per replica, summed in model-module order
  /// from 0 (as `evaluate`).
  double colocated_time(std::uint32_t colocated, bool encoders, int tp_b, recompute_mode rc,
                        int k) {
    return colocated_part<stage_part::time>(colocated, encoders, tp_b, rc, k, 0.0);
  }

  /// @brief Calls `use(fn)` with the stage-time function `fn(type, c)` of the
  /// splits cached under `key`: the module's own stage times (`plain`), or the
  /// backbone's with its colocated parts' whole time added to its first
  /// (encoder) / last (generator) stage, in model-module order from 0 (as
  /// `evaluate` sums them).
  template <class Use>
  void split_times(const split_key& key, const Use& use) {
    split_values<stage_part::time>(key, use);
  }

  /// @brief Fills `sp.weights` (split `sp` of `key`, one chunk per stage; ZB-H1 searches only):
  /// each stage's W, its parts summed as `split_times` sums their times.
  void fill_weights(const split_key& key, split_info& sp) {
    sp.weights.clear();
    if (key.v > 1 || !opt_.zero_bubble) return;
    split_values<stage_part::weight>(key, [&](const auto& fn) {
      const int pp = static_cast<int>(sp.layers.size());
      for (int j = 0; j < pp; ++j) sp.weights.push_back(fn(type_of_stage(j, pp), at(sp.layers, j)));
    });
  }

  /// @brief The split cached under `key` (`make_split`, with its weights: the even rule for
  /// `all_colocated_even`, else the balanced rule; no memory caps).
  const split_info& get_split(const split_key& key) {
    auto it = splits_.find(key);
    if (it != splits_.end()) return *it->second;
    auto s = std::make_unique<split_info>();
    const layer_split_rule rule = key.family == split_family::colocated_even
                                      ? layer_split_rule::even
                                      : layer_split_rule::balanced;
    split_times(key, [&](const auto& fn) {
      make_split(*s, key.v, space_.mods_[key.module].layers, key.pp, rule, fn);
    });
    fill_weights(key, *s);
    return *splits_.emplace(key, std::move(s)).first->second;
  }

  /// @brief Split of a disaggregated module (no colocated parts), `v` chunks per stage.
  const split_info& plain_split(std::size_t i, int tp, recompute_mode rc, int k, int pp,
                                int v = 1) {
    return get_split(split_key{split_family::plain, i, tp, rc, pp, k, v});
  }

  /// @brief Key of the backbone's splits with the side modules of `colocated`
  /// (bit i: model module i) on its first (encoders) / last (generators)
  /// stage, by `rule` (the even rule: monolithic layouts only).
  [[nodiscard]] split_key mono_key(layer_split_rule rule, int tp, recompute_mode rc, int k, int pp,
                                   int v, std::uint32_t colocated) const {
    const split_family family = rule == layer_split_rule::even ? split_family::colocated_even
                                                               : split_family::colocated_balanced;
    return split_key{family, space_.bi_, tp, rc, pp, k, v, colocated};
  }

 private:
  /// @brief Computes table entry `i` (type `type`, `c` layers) and its W part; `tt`'s miss path.
  double fill(time_table& t, std::size_t i, stage_type type, int c) {
    const bool keep_w = !t.w.empty();
    const int first = first_layer_of(type, c, t.layers);
    if (first < 0) {
      if (keep_w) t.w[i] = 0.0;
      return t.v[i] = inf_;
    }
    const stage_config cfg = stage(t.module, first, c, t.tp, 1, t.rc);
    const stage_times st = cost_.stage_time(cfg, workload(t.module, t.k));
    if (keep_w) t.w[i] = st.weight_grad_s;
    return t.v[i] = st.total_s();
  }

  /// @brief `split_times` for the stage times (`tt`) or their W parts (`tw`).
  template <stage_part Part, class Use>
  void split_values(const split_key& key, const Use& use) {
    auto part = [this](time_table& tab, stage_type t, int c) {
      if constexpr (Part == stage_part::time)
        return tt(tab, t, c);
      else
        return tw(tab, t, c);
    };
    time_table& T = table(key.module, key.tp, key.rc, key.k);
    if (key.family == split_family::plain || key.colocated == 0) {
      use([&](stage_type t, int c) { return 0.0 + part(T, t, c); });
      return;
    }
    const double te = colocated_part<Part>(key.colocated, true, key.tp, key.rc, key.k, 0.0);
    const std::vector<double> tg =
        colocated_parts<Part>(key.colocated, false, key.tp, key.rc, key.k);
    // The generators' parts are added one by one after the stage's own (as `evaluate`).
    const auto after = [&tg](double acc) {
      for (const double x : tg) acc += x;
      return acc;
    };
    use([&](stage_type t, int c) {
      const double x = part(T, t, c);
      switch (t) {
        case stage_type::first: return (0.0 + te) + x;
        case stage_type::last: return after(0.0 + x);
        case stage_type::whole: return after((0.0 + te) + x);
        case stage_type::middle: break;
      }
      return 0.0 + x;
    });
  }

  /// @brief The time (or W) of each side module of `colocated` before
  /// (`encoders`) or after the backbone, whole on a backbone stage of (tp_b,
  /// rc, k), in model-module order.
  template <stage_part Part>
  std::vector<double> colocated_parts(std::uint32_t colocated, bool encoders, int tp_b,
                                      recompute_mode rc, int k) {
    std::vector<double> out;
    for (const std::size_t i : space_.side_modules_) {
      if (!((colocated >> i) & 1U) || (i < space_.bi_) != encoders) continue;
      time_table& t = table(i, colocated_tp(i, tp_b), rc, k);
      if constexpr (Part == stage_part::time)
        out.push_back(tt(t, stage_type::whole, space_.mods_[i].layers));
      else
        out.push_back(tw(t, stage_type::whole, space_.mods_[i].layers));
    }
    return out;
  }
  /// @brief `acc` plus `colocated_parts`, added one by one.
  template <stage_part Part>
  double colocated_part(std::uint32_t colocated, bool encoders, int tp_b, recompute_mode rc, int k,
                        double acc) {
    for (const double x : colocated_parts<Part>(colocated, encoders, tp_b, rc, k)) acc += x;
    return acc;
  }

  static constexpr double nan_ = std::numeric_limits<double>::quiet_NaN();
  static constexpr double inf_ = std::numeric_limits<double>::infinity();

  const C& cost_;
  const search_space& space_;
  const plan_request& req_;
  const planner_options& opt_;
  // Caches (looked up, never iterated, so their order cannot leak into results).
  std::unordered_map<time_table_key, time_table, time_table_key_hash> tables_;
  std::unordered_map<split_key, std::unique_ptr<split_info>, split_key_hash> splits_;
};

}  // namespace disttrain::detail
