#pragma once
/// @file topology_views.hpp
/// @brief Every per-part view of a pipeline, derived from its one `topology`
/// (core/topology.hpp), and the conversion of a plan into a topology:
///
/// | view                     | for                         | function          |
/// |--------------------------|-----------------------------|-------------------|
/// | `rank_layout`            | routes, groups (comm/)      | `layout_of`       |
/// | chain schedule           | bind step (schedule/)       | `chain_program`   |
/// | `reorder_options`        | the reorderer (reorder/)    | `reorder_options_of` |
/// | `topology`               | from a `parallel_plan`      | `topology_of`     |
///
/// The rank layout numbers ranks exactly as the topology does, and the
/// reorderer's module k is the topology's k-th module that owns ranks
/// (`topology::owning_modules`), so a sample map indexes the same modules as
/// the routes and the schedule.
///
/// @snippet bind.cpp topology_views

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/rank_layout.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/multi_module.hpp"
#include "disttrain/schedule/validate.hpp"
#include "disttrain/schedule/zero_bubble.hpp"

namespace disttrain {

/// @brief The communicator's rank layout: one segment per module that owns
/// ranks, numbered as the topology numbers them.
[[nodiscard]] inline rank_layout layout_of(const topology& t) {
  std::vector<segment_spec> segs;
  for (const module_id m : t.owning_modules()) {
    const topology_module& g = t.module(m);
    segs.push_back({g.name, std::string(to_string(g.role)), g.tp, g.pp, g.dp});
  }
  return rank_layout(std::move(segs));
}

/// @brief Settings of `chain_program`.
struct chain_options {
  int microbatches = 1;         ///< microbatches of the iteration
  bool split_backward = false;  ///< B and W as separate ops
  int buckets = 1;              ///< gradient buckets per rank
  /// ZB-H1's order on every chain stage (`zb_h1_ops`; implies `split_backward`):
  /// the Ws are deferred into 1F1B's cool-down bubbles. Off: the greedy order
  /// of `make_multi_module`.
  bool zero_bubble = false;
};

/// @brief The split-microbatch program of every chain stage: the
/// single-replica chain of the modules that own ranks
/// (`make_multi_module` with DP 1 and each module's stages and trainable
/// flag), with gradient buckets and the optimizer step, no communication.
/// Every replica (and TP rank) of a chain stage runs that stage's program on
/// its share of each microbatch; `bind_rank` adds the messages. The chain
/// with communication is validated here (order, matching, no deadlock).
/// With `zero_bubble`, each stage keeps the passes `make_multi_module` gives
/// it (a frozen stage no W, a forward-only one no B) in ZB-H1's order: every
/// stage then holds up to min(stages, microbatches) microbatches' activations.
[[nodiscard]] inline pipeline_schedule chain_program(const topology& t, const chain_options& o) {
  require_positive(o.microbatches, "chain_options.microbatches");
  require_positive(o.buckets, "chain_options.buckets");
  multi_module_spec spec;
  for (const module_id m : t.owning_modules()) {
    const topology_module& g = t.module(m);
    spec.segments.emplace_back(g.name, g.pp, 1, g.trainable);
  }
  spec.num_microbatches = o.microbatches;
  spec.split_backward = o.split_backward || o.zero_bubble;
  pipeline_schedule c = make_multi_module(spec);
  if (o.zero_bubble)
    for (std::size_t r = 0; r < c.ops.size(); ++r) {
      const int stage = c.ranks[r].stage;
      zb_h1_stage z{.stages = c.num_stages,
                    .position = stage,
                    .microbatches = o.microbatches,
                    .op_stage = stage,
                    .backward = false,
                    .weight = false};
      for (const schedule_op& x : c.ops[r]) {
        z.backward = z.backward || x.kind == op_kind::backward;
        z.weight = z.weight || x.kind == op_kind::weight;
      }
      c.ops[r] = zb_h1_ops(z);
    }
  pipeline_schedule s = add_grad_sync(std::move(c), o.buckets);
  (void)validate_schedule(add_communication(s));
  s.name = "chain";
  return s;
}

/// @brief The reorderer's options, the one derivation (plans go through it
/// too: `reorder_segments`): module k = the k-th module that owns ranks, with
/// its DP degree; the scoring pipeline has each module's stages, stage s of a
/// module scaled by `stage_share` (forward share, backward 2 x share: the
/// module's layers per stage when the topology has them, else equal stages as
/// `chain_stages`). Other fields keep their defaults. Throws
/// `invalid_argument` at `reorder_options.modules` beyond `max_reorder_modules`
/// modules that own ranks (`reorder_options::validate`).
[[nodiscard]] inline reorder_options reorder_options_of(const topology& t,
                                                        std::uint32_t microbatches) {
  reorder_options o;
  for (const module_id m : t.owning_modules()) {
    const topology_module& g = t.module(m);
    const auto k = static_cast<std::uint32_t>(o.modules.size());
    o.modules.push_back({g.name, static_cast<std::uint32_t>(g.dp)});
    for (int s = 0; s < g.pp; ++s) {
      const double share = stage_share(g, stage_id{s});
      o.stages.push_back({k, share, 2.0 * share});
    }
  }
  o.microbatches = microbatches;
  o.validate();
  return o;
}

/// @brief The topology of a plan: its modules, degrees, colocation and
/// layers per stage, all trainable. Validates the plan (`invalid_argument`
/// naming `plan....`).
[[nodiscard]] inline topology topology_of(const parallel_plan& p) {
  validate(p);
  std::vector<topology_module> mods;
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_plan& m = p.modules[i];
    mods.push_back({m.name, parse_module_role(m.role, cat("plan.modules[", i, "].role")), m.tp,
                    m.pp, m.dp, true, m.colocated, m.layers});
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
    require(found, cat("plan.modules[", i, "].name"), "module '", mods[i].name,
            "' is not in model '", model.name, "'");
  }
  return topology(std::move(mods));
}

}  // namespace disttrain
