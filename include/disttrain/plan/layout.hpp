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
#include <cstdint>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/plan/detail/chain_cut.hpp"
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

/// @brief What the links of module `i` of plan `p` carry, as `model`'s data
/// edges (`model_spec::edges`). The pipeline is a chain of the modules that
/// own ranks; an edge whose ends are not neighbours in it is forwarded by
/// every module in between (two encoders feeding the backbone run encoder 1
/// -> encoder 2 -> backbone; docs/planner.md, "Several encoders or
/// generators"). With one encoder and one generator every link carries its
/// one edge and nothing is forwarded.
struct module_links {
  std::vector<connection> after;    ///< the link from its last stage to the next module's first
  std::vector<connection> through;  ///< the hops between its own stages (edges it forwards)
};

namespace detail {
/// @brief The modules of `p` that are colocated, as a mask (bit i: module i).
[[nodiscard]] inline std::uint32_t colocated_mask(const parallel_plan& p) {
  static_assert(max_modules <= 32, "module masks are 32-bit");
  std::uint32_t out = 0;
  for (std::size_t j = 0; j < p.modules.size() && j < 32; ++j)
    if (p.modules[j].colocated) out |= 1U << j;
  return out;
}
}  // namespace detail

/// @brief `module_links` of module `i` (owning ranks) of plan `p` for
/// `model` (the plan's modules in the model's order, as `evaluate` checks).
/// Throws `invalid_argument` for a colocated module or an index out of range.
/// @snippet plan.cpp links_of
[[nodiscard]] inline module_links links_of(const parallel_plan& p, const model_spec& model,
                                           std::size_t i) {
  require(p.modules.size() == model.modules.size(), "plan.modules", "has ", p.modules.size(),
          " modules, the model ", model.modules.size());
  require(i < p.modules.size(), "module", "index ", i, " out of range (", p.modules.size(),
          " modules)");
  const detail::chain_cut cut(model, detail::colocated_mask(p));
  module_links out;
  auto pick = [&](std::uint64_t mask, std::vector<connection>& v) {
    for (std::size_t e = 0; e < cut.edges().size(); ++e)
      if ((mask >> e) & 1U) v.push_back(cut.edges()[e]);
  };
  pick(cut.after(i), out.after);
  pick(cut.through(i), out.through);
  return out;
}

}  // namespace disttrain
