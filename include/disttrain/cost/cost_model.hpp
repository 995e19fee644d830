#pragma once
/// @file cost_model.hpp
/// @brief The `cost_model` concept: what the planner, the reorderer and the
/// simulator ask of a cost model. `analytic_cost_model` is the default; a host
/// can plug in its own (e.g. measured tables) by providing these members.

#include <concepts>
#include <cstddef>

#include "disttrain/cost/stage.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/workload.hpp"

namespace disttrain {

/// @brief Requirements of a cost model `C` (all queries `const`, cheap, and
/// deterministic; bad queries throw `disttrain::error`):
///
/// | member | meaning |
/// |---|---|
/// | `model()`, `cluster()` | the specs it costs |
/// | `stage_time(stage_config, module_workload) -> stage_times` | per-GPU seconds for one microbatch |
/// | `stage_memory(stage_config, module_workload, int in_flight) -> memory_breakdown` | per-GPU bytes with `in_flight` microbatches' activations held |
/// | `flops(stage_config, module_workload) -> stage_flops` | model FLOPs of the stage replica (for MFU) |
/// | `stage_output_bytes(stage_config, module_workload) -> double` | activation bytes a stage replica sends to the next stage of its module |
/// | `transfer_bytes(from, to, model_workload) -> double` | bytes crossing a module boundary for a microbatch |
/// | `p2p_time(bytes, same_node) -> double` | one point-to-point message |
/// | `dp_sync_time(stage_config, spans_nodes) -> double` | ZeRO-1 gradient reduce-scatter + parameter all-gather per iteration |
/// | `optimizer_time(stage_config) -> double` | optimizer step per iteration |
/// | `memory_limit() -> double` | usable bytes per GPU |
/// | *optional* `dp_sync(stage_config, spans_nodes) -> dp_sync_times` | the sync by collective, with the parameters per GPU; without it the sync is one bucket and never overlaps compute |
/// | `peak_flops() -> double` | per-GPU peak FLOP/s (MFU denominator) |
///
/// @snippet cost.cpp cost_model
template <class C>
concept cost_model = requires(const C& c, const stage_config& s, const module_workload& w,
                              const model_workload& mw, std::size_t module, double bytes,
                              int in_flight, bool flag) {
  { c.model() } -> std::convertible_to<const model_spec&>;
  { c.cluster() } -> std::convertible_to<const cluster_spec&>;
  { c.stage_time(s, w) } -> std::convertible_to<stage_times>;
  { c.stage_memory(s, w, in_flight) } -> std::convertible_to<memory_breakdown>;
  { c.flops(s, w) } -> std::convertible_to<stage_flops>;
  { c.stage_output_bytes(s, w) } -> std::convertible_to<double>;
  { c.transfer_bytes(module, module, mw) } -> std::convertible_to<double>;
  { c.p2p_time(bytes, flag) } -> std::convertible_to<double>;
  { c.dp_sync_time(s, flag) } -> std::convertible_to<double>;
  { c.optimizer_time(s) } -> std::convertible_to<double>;
  { c.memory_limit() } -> std::convertible_to<double>;
  { c.peak_flops() } -> std::convertible_to<double>;
};

/// @brief Whether `C` answers the optional `dp_sync` query (the sync split by
/// collective, needed to model its overlap with compute).
template <class C>
concept splits_dp_sync = requires(const C& c, const stage_config& s, bool flag) {
  { c.dp_sync(s, flag) } -> std::convertible_to<dp_sync_times>;
};

/// @brief The sync of stage `s` by collective: `c.dp_sync` where `C` has it,
/// else all of `dp_sync_time` as one reduce-scatter bucket (no overlap credit).
/// @snippet cost.cpp dp_sync_of
template <cost_model C>
[[nodiscard]] dp_sync_times dp_sync_of(const C& c, const stage_config& s, bool spans_nodes) {
  if constexpr (splits_dp_sync<C>) {
    return c.dp_sync(s, spans_nodes);
  } else {
    return dp_sync_times{static_cast<double>(c.dp_sync_time(s, spans_nodes)), 0.0, 0.0};
  }
}

}  // namespace disttrain
