#pragma once
/// @file search_space.hpp
/// @brief What the planner search enumerates: the GPU budget, the modules'
/// TP candidates, the recompute choices and the backbone's pipeline-depth
/// range, checked and derived from the request and the planner options
/// (`search_space`); and the divisor / per-replica-load enumerations.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/model/module_shape.hpp"
#include "disttrain/plan/detail/stage_cost.hpp"
#include "disttrain/plan/detail/stage_time_cache.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain {

namespace detail {

/// @brief Divisors of `x`, ascending.
[[nodiscard]] inline std::vector<int> divisors(int x) {
  std::vector<int> lo, hi;
  for (int d = 1; static_cast<long long>(d) * d <= x; ++d)
    if (x % d == 0) {
      lo.push_back(d);
      if (d != x / d) hi.push_back(x / d);
    }
  for (std::size_t i = hi.size(); i-- > 0;) lo.push_back(hi[i]);
  return lo;
}

/// @brief Distinct values of ceil(n / d) for d in [1, n], ascending.
[[nodiscard]] inline std::vector<int> replica_loads(int n) {
  std::vector<int> ks;
  for (int d = 1; d <= n;) {
    const int k = (n + d - 1) / d;
    ks.push_back(k);
    d = k == 1 ? n + 1 : (n - 1) / (k - 1) + 1;
  }
  std::reverse(ks.begin(), ks.end());
  return ks;
}

/// @brief A module as the search sees it.
struct module_info {
  int layers = 0;
  double dirs = 2;                 ///< transfer directions of its hops
  std::vector<int> tps;            ///< TP candidates the module supports
  std::vector<int> colocated_tps;  ///< powers of two it supports, for colocation
};

/// @brief The search space of `plan_search` (see search.hpp's file comment):
/// the options checked, the GPU budget, the modules' roles and their TP
/// candidates, the recompute choices and the backbone's range of stages.
struct search_space {
  /// @brief Checks `req` and `opt` against `cost`'s model and cluster
  /// (throws `errc::invalid` / `errc::unsupported`) and derives the space.
  template <cost_model C>
  search_space(const C& cost, const plan_request& req, const planner_options& opt) {
    const model_spec& model = cost.model();
    check_request(req, model);
    const auto& cl = cost.cluster();
    require(opt.max_gpus >= 0, "planner.max_gpus", "must be >= 0, got ", opt.max_gpus);
    N_ = opt.max_gpus > 0 ? std::min<long long>(cl.num_gpus, opt.max_gpus) : cl.num_gpus;
    g_ = cl.gpus_per_node;
    S_ = req.global_batch;
    limit_ = cost.memory_limit();
    require(opt.max_side_pp >= 1, "planner.max_side_pp", "must be >= 1, got ", opt.max_side_pp);
    require(opt.max_virtual_stages >= 1, "planner.max_virtual_stages", "must be >= 1, got ",
            opt.max_virtual_stages);
    require(opt.max_backbone_pp >= 0, "planner.max_backbone_pp", "must be >= 0, got ",
            opt.max_backbone_pp);
    require(!opt.tp_candidates.empty(), "planner.tp_candidates", "must not be empty");
    for (int t : opt.tp_candidates)
      require(t >= 1 && (t & (t - 1)) == 0, "planner.tp_candidates",
              "TP degrees are powers of two, got ", t);
    require(opt.include_monolithic || opt.include_disaggregated, "planner",
            "no layout family enabled");
    require(!opt.include_monolithic || !opt.monolithic_splits.empty(), "planner.monolithic_splits",
            "must not be empty when monolithic layouts are searched");
    static_assert(max_modules <= 32, "side-module masks are 32-bit");
    bi_ = model.backbone_index();
    for (std::size_t i = 0; i < model.modules.size(); ++i)
      if (i != bi_) {
        side_modules_.push_back(i);
        all_sides_ |= 1U << i;
      }
    for (std::size_t i = 0; i < model.modules.size(); ++i) {
      mods_.push_back(module_info{});
      auto& mi = mods_.back();
      mi.layers = model.modules[i].layers();
      mi.dirs = transfer_directions(model, i);
      const module_shape sh = shape_of(model.modules[i]);
      for (int t : opt.tp_candidates)
        if (t <= g_ && g_ % t == 0 && sh.tp_supported(t)) mi.tps.push_back(t);
      std::sort(mi.tps.begin(), mi.tps.end());
      mi.tps.erase(std::unique(mi.tps.begin(), mi.tps.end()), mi.tps.end());
      for (int t = 1; t <= g_; t *= 2)
        if (g_ % t == 0 && sh.tp_supported(t)) mi.colocated_tps.push_back(t);
    }
    rcs_ = {recompute_mode::none};
    if (opt.search_selective_recompute) rcs_.push_back(recompute_mode::selective);
    if (opt.search_recompute) rcs_.push_back(recompute_mode::full);
    max_pp_b_ = opt.max_backbone_pp > 0 ? std::min(opt.max_backbone_pp, mods_[bi_].layers)
                                        : mods_[bi_].layers;
    max_pp_b_ = std::min(max_pp_b_, 65535);
    require(opt.min_backbone_pp >= 1, "planner.min_backbone_pp", "must be >= 1, got ",
            opt.min_backbone_pp);
    require(opt.min_backbone_pp <= max_pp_b_, "planner.min_backbone_pp", "is ", opt.min_backbone_pp,
            ", above the most backbone stages ", max_pp_b_,
            " (max_backbone_pp, or the backbone's layer count)");
    min_pp_b_ = opt.min_backbone_pp;
  }

  long long N_ = 0;                        ///< GPUs the plan may use
  int g_ = 8;                              ///< GPUs per node
  int S_ = 1;                              ///< global batch (samples)
  double limit_ = 0;                       ///< usable bytes per GPU
  std::size_t bi_ = 0;                     ///< backbone's module index
  std::vector<std::size_t> side_modules_;  ///< encoders and generators, in model order
  std::uint32_t all_sides_ = 0;            ///< bit i set for every side module i
  int max_pp_b_ = 1;                       ///< most backbone stages
  int min_pp_b_ = 1;                       ///< fewest backbone stages
  std::vector<module_info> mods_;          ///< by model-module index
  std::vector<recompute_mode> rcs_;        ///< recompute choices searched
};

}  // namespace detail
}  // namespace disttrain
