#pragma once
/// @file layout.hpp
/// @brief From a plan to its topology (core/topology.hpp): the one layout
/// vocabulary and rank numbering that the communicator, the reorderer, the
/// binder and the executor use.
///
/// Every module keeps its plan entry's name, role, degrees, colocation and
/// layers per stage; disaggregated modules own contiguous rank blocks in
/// pipeline order, colocated ones run on the ranks of the backbone's first
/// (encoder) or last (generator) stage. The planner's plans keep every TP
/// group inside a node (each module's first rank a multiple of its TP
/// degree); `require_tp_in_nodes(topology_of(p), p.gpus_per_node, "plan")`
/// checks a hand-written plan (a TP group across nodes runs, slowly).

#include <cstddef>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/plan/parallel_plan.hpp"

namespace disttrain {

/// @brief The topology of a plan: its modules, degrees, colocation, layers
/// per stage and chunks (`virtual_stages`), all trainable. Validates the plan (`invalid_argument`
/// naming `plan....`).
/// @snippet plan.cpp topology_of
[[nodiscard]] inline topology topology_of(const parallel_plan& p) {
  validate(p);
  std::vector<topology_module> mods;
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_plan& m = p.modules[i];
    mods.push_back({m.name, parse_module_role(m.role, cat("plan.modules[", i, "].role")), m.tp,
                    m.pp, m.dp, true, m.colocated, m.layers, m.virtual_stages});
  }
  return topology(std::move(mods));
}

/// @brief The topology of a plan for `model`: as `topology_of(plan)`, with
/// each module trainable unless the model freezes it. Throws
/// `invalid_argument` at `plan.modules[i].name` for a module the model lacks.
[[nodiscard]] inline topology topology_of(const parallel_plan& p, const model_spec& model) {
  topology base = topology_of(p);
  std::vector<topology_module> mods = base.modules();
  for (std::size_t i = 0; i < mods.size(); ++i) {
    bool found = false;
    for (const auto& ms : model.modules)
      if (ms.name == mods[i].name) {
        mods[i].trainable = !ms.frozen;
        found = true;
      }
    require(
        found, [&] { return cat("plan.modules[", i, "].name"); }, "module '", mods[i].name,
        "' is not in model '", model.name, "'");
  }
  return topology(std::move(mods));
}

}  // namespace disttrain
