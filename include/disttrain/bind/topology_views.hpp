#pragma once
/// @file topology_views.hpp
/// @brief Every per-part view of a pipeline, derived from its one `topology`
/// (core/topology.hpp):
///
/// | view                     | for                         | function          |
/// |--------------------------|-----------------------------|-------------------|
/// | chain schedule           | bind step (schedule/)       | `chain_program`   |
/// | `reorder_options`        | the reorderer (reorder/)    | `reorder_options_of` |
///
/// The routes (comm/) take the topology itself, and a plan converts to one
/// with `topology_of` (plan/layout.hpp). The reorderer's module k is the
/// topology's k-th module that owns ranks (`topology::owning_modules`), so a
/// sample map indexes the same modules as the routes and the schedule.
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
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/interleaved.hpp"
#include "disttrain/schedule/multi_module.hpp"
#include "disttrain/schedule/validate.hpp"
#include "disttrain/schedule/zero_bubble.hpp"

namespace disttrain {

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
/// A module with `chunks` > 1 runs Megatron-LM's interleaved 1F1B on its
/// stages (`make_multi_module`; microbatches a multiple of its pp; no split
/// backward): its chain stages' ops carry the chunk.
/// With `zero_bubble`, each stage keeps the passes `make_multi_module` gives
/// it (a frozen stage no W, a forward-only one no B) in ZB-H1's order: every
/// stage then holds up to min(stages, microbatches) microbatches' activations.
[[nodiscard]] inline pipeline_schedule chain_program(const topology& t, const chain_options& o) {
  require_positive(o.microbatches, "chain_options.microbatches");
  require_positive(o.buckets, "chain_options.buckets");
  multi_module_spec spec;
  for (const module_id m : t.owning_modules()) {
    const topology_module& g = t.module(m);
    spec.segments.push_back(schedule_segment(g));
    spec.segments.back().dp = 1;  // the chain: one replica per module
    if (g.chunks > 1) {
      require(!o.zero_bubble && !o.split_backward, "chain_options.zero_bubble", "module '", g.name,
              "' is interleaved (", g.chunks,
              " chunks): interleaved 1F1B does not split the backward pass");
      check_interleaved(g.pp, o.microbatches, g.chunks, cat("chain_options (", g.name, ")"));
    }
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

}  // namespace disttrain
