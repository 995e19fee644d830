#pragma once
/// @file stage_cost.hpp
/// @brief The per-stage cost formulas shared by `evaluate` and the planner
/// (one definition, so both produce bit-identical numbers).
///
/// Placement rules (the planner cannot see node boundaries of a rank layout
/// that depends on the other modules' sizes, so it uses these conservative,
/// layout-independent rules):
/// - a stage's DP group spans nodes iff `tp * dp > gpus_per_node`;
/// - two consecutive stages of a module talk over NVLink iff
///   `2 * tp * dp <= gpus_per_node`, else over the NIC;
/// - module boundaries (encoder -> backbone -> generator) use the NIC.

#include <algorithm>
#include <cstddef>

#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/workload.hpp"

namespace disttrain::detail {

/// @brief Whether a stage of `tp * dp` GPUs has a DP group spanning nodes.
[[nodiscard]] constexpr bool dp_spans_nodes(int tp, int dp, int gpus_per_node) noexcept {
  return static_cast<long long>(tp) * dp > gpus_per_node;
}
/// @brief Whether consecutive stages of `tp * dp` GPUs each share a node.
[[nodiscard]] constexpr bool hop_same_node(int tp, int dp, int gpus_per_node) noexcept {
  return 2LL * tp * dp <= gpus_per_node;
}

/// @brief 2 when module `i` runs a backward pass (gradients flow back over
/// its input edges and between its stages), else 1.
[[nodiscard]] inline double transfer_directions(const model_spec& m, std::size_t i) {
  return (!m.modules[i].frozen || m.input_grad_required(i)) ? 2.0 : 1.0;
}

/// @brief Transfer from a stage to the next stage of its module per microbatch
/// (each TP rank sends its 1/tp share), times `dirs`.
template <cost_model C>
[[nodiscard]] double hop_time(const C& c, const stage_config& s, const module_workload& w,
                              int gpus_per_node, double dirs) {
  return dirs * c.p2p_time(c.stage_output_bytes(s, w) / static_cast<double>(s.tp),
                           hop_same_node(s.tp, s.dp, gpus_per_node));
}

/// @brief Module-boundary transfer per microbatch: the busiest replica on
/// either side moves the bytes of its own samples (`k_from` resp. `k_to`),
/// each TP rank 1/tp of them, over the NIC; times `dirs`.
template <cost_model C>
[[nodiscard]] double boundary_time(const C& c, std::size_t from, std::size_t to,
                                   const model_workload& per_sample, int k_from, int tp_from,
                                   int k_to, int tp_to, double dirs) {
  const double a = c.p2p_time(c.transfer_bytes(from, to, per_sample * static_cast<double>(k_from)) /
                                  static_cast<double>(tp_from),
                              false);
  const double b = c.p2p_time(c.transfer_bytes(from, to, per_sample * static_cast<double>(k_to)) /
                                  static_cast<double>(tp_to),
                              false);
  return dirs * std::max(a, b);
}

/// @brief Non-overlapped per-iteration work of one stage part: DP gradient
/// sync (ZeRO-1) + optimizer step.
template <cost_model C>
[[nodiscard]] double sync_time(const C& c, const stage_config& s, bool spans_nodes) {
  return c.dp_sync_time(s, spans_nodes) + c.optimizer_time(s);
}

}  // namespace disttrain::detail
