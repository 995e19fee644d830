#pragma once
/// @file planner_options.hpp
/// @brief The planner's search space switches and its counters.

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief How a monolithic (Megatron-style) layout splits the backbone's layers.
/// - `balanced`: the planner's rule (`detail::balanced_split`): minimise the
///   slowest stage, counting the encoder on stage 0, the generator and the LM
///   head on the last stage;
/// - `even`: Megatron-LM's default: every stage gets layers / pp (pp must divide
///   the layer count).
/// @snippet plan.cpp layer_split_rule
enum class layer_split_rule { balanced, even };

/// @brief What the planner minimises.
/// - `time`: the iteration time (ties: fewer GPUs);
/// - `throughput_per_gpu`: iteration time x GPUs used (samples/s per GPU; ties:
///   fewer GPUs), so GPUs that add little are left free;
/// - `min_gpus_within`: the fewest GPUs whose best plan is within
///   `planner_options::within` of the best time on all GPUs.
/// The last two walk the exact time-vs-GPUs frontier (one exact search per
/// frontier point, at most `max_frontier_plans`), so they are exact as well.
/// @snippet plan.cpp plan_objective
enum class plan_objective { time, throughput_per_gpu, min_gpus_within };

/// @brief Name of an objective: "time", "throughput_per_gpu", "min_gpus_within".
constexpr std::string_view to_string(plan_objective o) noexcept {
  switch (o) {
    case plan_objective::throughput_per_gpu: return "throughput_per_gpu";
    case plan_objective::min_gpus_within: return "min_gpus_within";
    case plan_objective::time: break;
  }
  return "time";
}

/// @brief The objective named `name` ("time", "throughput_per_gpu",
/// "min_gpus_within"); anything else is `errc::parse_error` at `where`.
[[nodiscard]] inline plan_objective parse_objective(std::string_view name, std::string_view where) {
  for (auto o :
       {plan_objective::time, plan_objective::throughput_per_gpu, plan_objective::min_gpus_within})
    if (name == to_string(o)) return o;
  fail(errc::parse_error, where, "unknown objective '", name,
       "' (expected time, throughput_per_gpu or min_gpus_within)");
}

/// @brief The planner's search space and switches.
///
/// @snippet plan.cpp planner_options
struct planner_options {
  std::vector<int> tp_candidates{1, 2, 4,
                                 8};  ///< TP degrees tried (powers of two dividing the node size)
  bool search_recompute = true;       ///< try full recompute on and off (else off only)
  /// Also try selective (attention-core) recompute (`module_plan::
  /// selective_recompute`). Off by default: with fused attention, as the
  /// analytic model assumes, it saves no memory and costs the attention
  /// FLOPs again, so it never wins there; a cost model that keeps the
  /// attention scores may gain from it.
  bool search_selective_recompute = false;
  int max_backbone_pp = 0;            ///< most backbone stages (0: its layer count)
  int min_backbone_pp = 1;            ///< fewest backbone stages (> 1: force pipelining)
  int max_side_pp = 2;                ///< most encoder / generator stages
  bool include_monolithic = true;     ///< also consider the Megatron-style layouts
  bool include_disaggregated = true;  ///< consider disaggregated layouts (off: the baseline)
  /// With disaggregated layouts, also those colocating one side module (encoder
  /// on the backbone's first stage and the generator on its own GPUs, or the
  /// reverse): per-side-module colocation.
  bool include_mixed = true;
  /// Layer splits tried for monolithic layouts (the baseline uses `even` only,
  /// the planner both, so its space contains the baseline's).
  std::vector<layer_split_rule> monolithic_splits{layer_split_rule::balanced,
                                                  layer_split_rule::even};
  plan_objective objective = plan_objective::time;  ///< what the planner minimises
  double within = 0.05;    ///< min_gpus_within: allowed fraction over the best time (>= 0)
  long long max_gpus = 0;  ///< use at most this many GPUs (0: the cluster's GPU count)
  /// throughput_per_gpu / min_gpus_within: most exact searches along the
  /// frontier before the planner refuses (errc::infeasible, naming the option).
  int max_frontier_plans = 2048;
  /// Most interleaved model chunks per backbone device (Megatron-LM's virtual
  /// pipeline stages) tried; 1 searches plain 1F1B only. Interleaving needs
  /// pp >= 2, microbatches a multiple of pp and chunks of equal layer counts.
  int max_virtual_stages = 4;
  /// Megatron-LM `--overlap-grad-reduce`: plans (and the baseline) overlap the
  /// gradient reduce-scatter with the last microbatch's backward, in DDP buckets.
  bool overlap_grad_reduce = true;
  /// Megatron-LM `--overlap-param-gather`: plans (and the baseline) overlap the
  /// distributed optimizer's parameter all-gather with the first forward.
  bool overlap_param_gather = true;
  /// Megatron-LM `--sequence-parallel` on every module of every plan (and the
  /// baseline). Not searched: it moves the same bytes as plain TP and never
  /// needs more memory, so it is off only to model runs without it.
  bool sequence_parallel = true;
  /// Also consider ZB-H1 (`plan_schedule::zb_h1`) for every plain (not
  /// interleaved) layout: the backward split into B and W, the Ws deferred
  /// into the cool-down bubbles, every stage holding min(P, m) microbatches.
  /// Off by default: Megatron-LM does not run it, and the baseline never does.
  bool zero_bubble = false;
};

/// @brief Counters of one search (for benchmarks and docs).
struct planner_stats {
  long long backbone_configs = 0;    ///< (n, tp, recompute, dp, pp) of the backbone generated
  long long backbone_expanded = 0;   ///< of those, not pruned by their bound
  long long side_lists = 0;          ///< encoder/generator option lists built
  long long side_options = 0;        ///< options in those lists
  long long pairs_evaluated = 0;     ///< full objective evaluations of disaggregated candidates
  long long monolithic_configs = 0;  ///< monolithic candidates scored
  long long capped_splits = 0;  ///< backbone splits capped by memory (the balanced one did not fit)
  long long frontier_plans = 0;  ///< exact searches along the GPU frontier (objectives)
};

}  // namespace disttrain
