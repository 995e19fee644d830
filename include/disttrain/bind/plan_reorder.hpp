#pragma once
/// @file plan_reorder.hpp
/// @brief The reorderer's settings and the matching sample cost, both derived
/// from a `parallel_plan`, so no trainer copies modules, DP degrees or TP
/// degrees by hand and the cost index always matches the options' modules.
///
/// The reorderer balances *pipeline segments*: every module of the plan that
/// owns GPUs (`colocated == false`) is one reorder module, in plan order, with
/// its DP degree. A colocated module runs on the GPUs of the backbone's first
/// (encoder) or last (generator) stage, on the backbone's replicas, so a
/// sample goes to the same replica for both and its seconds are added to the
/// backbone segment's cost (`workload_cost`'s `column_of`). Costs per *model*
/// module fed to options per segment are rejected by the reorderer
/// (`sample_meta::modules`), never silently mixed up.
///
/// Scoring pipeline: segment k is split into its `pp` stages, stage s running
/// `layers[s] / sum(layers)` of the segment's forward (x1) and backward (x2)
/// load: the options are `reorder_options_of(topology_of(plan))`, the one
/// derivation, so a sampler built from the plan's topology scores orders as
/// `simulate_plan` does. (A colocated module's time is spread over the host's stages in the
/// same proportion, not put on the first/last stage alone.)
///
/// @snippet bind.cpp plan_reorder_file

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/bind/topology_views.hpp"
#include "disttrain/bind/workload_cost.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain {

/// @brief A plan's segments as the reorderer sees them.
/// @snippet bind.cpp plan_segments
struct plan_segments {
  reorder_options options;  ///< one module per segment, stages, microbatches
  std::vector<std::uint32_t>
      segment_of;  ///< plan module i -> reorder module (its host if colocated)
};

/// @brief Derives `reorder_options` from a plan (see the file comment):
/// modules = the non-colocated plan modules with their DP, `microbatches =
/// num_microbatches`, stages weighted by layers. Other fields keep their
/// defaults. Validates the plan (`invalid_argument` naming `plan....`).
/// @snippet bind.cpp reorder_segments
inline plan_segments reorder_segments(const parallel_plan& p) {
  validate(p);
  const topology t = topology_of(p);
  require(t.owning_modules().size() <= max_reorder_modules, "plan.modules", "has more than ",
          max_reorder_modules, " segments, the reorderer's limit");
  plan_segments out;
  out.options = reorder_options_of(t, static_cast<std::uint32_t>(p.num_microbatches));
  // A colocated module runs on its host's ranks: the backbone's segment.
  const auto host = static_cast<std::uint32_t>(t.owning_index(t.backbone()));
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_id m{static_cast<int>(i)};
    out.segment_of.push_back(t.module(m).colocated ? host
                                                   : static_cast<std::uint32_t>(t.owning_index(m)));
  }
  return out;
}

/// @brief Reorder options and the cost that matches them, from one plan.
/// Keeps a reference to the cost model (which must outlive it).
template <cost_model C>
struct plan_reorder {
  reorder_options options;                ///< as `reorder_segments(plan).options`
  std::vector<std::uint32_t> segment_of;  ///< plan module i -> reorder module
  workload_cost<C> cost;                  ///< seconds per reorder module (segment), plan TP
};

/// @brief `reorder_segments(plan)` plus a `workload_cost` over the same
/// segments: model module k is priced at its plan module's TP and its seconds
/// go to that module's segment (a colocated module's to the backbone's).
/// Throws `invalid_argument` at `plan.modules[i].name` for a plan module the
/// model does not have, and at `plan.modules` for a model module the plan
/// leaves out.
/// @snippet bind.cpp reorder_for_plan
template <cost_model C>
plan_reorder<C> reorder_for_plan(const parallel_plan& p, const C& cm) {
  plan_segments seg = reorder_segments(p);
  const auto& mods = cm.model().modules;
  std::vector<int> tp(mods.size(), 0);
  std::vector<std::size_t> column_of(mods.size(), 0);
  std::vector<char> seen(mods.size(), 0);
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    std::size_t k = 0;
    while (k < mods.size() && mods[k].name != p.modules[i].name) ++k;
    require(
        k < mods.size(), [&] { return cat("plan.modules[", i, "].name"); }, "module '",
        p.modules[i].name, "' is not a module of the cost model's model");
    seen[k] = 1;
    tp[k] = p.modules[i].tp;
    column_of[k] = seg.segment_of[i];
  }
  for (std::size_t k = 0; k < mods.size(); ++k)
    require(seen[k], "plan.modules", "the model's module '", mods[k].name, "' is not in the plan");
  return plan_reorder<C>{std::move(seg.options), std::move(seg.segment_of),
                         workload_cost<C>(cm, std::move(tp), std::move(column_of))};
}

}  // namespace disttrain
