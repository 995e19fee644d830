#pragma once
/// @file stage_cost.hpp
/// @brief The per-stage cost formulas shared by `evaluate` and the planner
/// (one definition, so both produce bit-identical numbers).
///
/// Placement rules (the rank numbering of `topology_of`: the disaggregated
/// modules on contiguous rank blocks in pipeline order, a module's stage `j`
/// on ranks [base + j s, base + (j + 1) s) with `s = tp * dp`, nodes of
/// `gpus_per_node` consecutive ranks):
/// - a stage's DP groups run on NVLink iff the stage's block sits in one node
///   (with TP groups inside nodes, that is iff every DP group does), else on
///   the NIC;
/// - a transfer between two stages (consecutive stages of a module, or the
///   stages on either side of a module boundary) runs on NVLink iff both
///   stages' blocks sit in one node (then every sender / receiver pair
///   shares it), else on the NIC.
/// The planner's bounds use `may_share_node` (the cheapest class any placement
/// could give), its exact scores the same functions as `evaluate`.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/detail/chain_cut.hpp"

namespace disttrain::detail {

/// @brief Whether ranks [first, first + count) sit in one node of `gpus_per_node` ranks.
[[nodiscard]] constexpr bool in_one_node(long long first, long long count,
                                         int gpus_per_node) noexcept {
  return count >= 1 && count <= gpus_per_node &&
         first / gpus_per_node == (first + count - 1) / gpus_per_node;
}
/// @brief Whether two rank blocks [a, a + na) and [b, b + nb) all sit in one node.
[[nodiscard]] constexpr bool blocks_in_one_node(long long a, long long na, long long b,
                                                long long nb, int gpus_per_node) noexcept {
  return in_one_node(a, na, gpus_per_node) && in_one_node(b, nb, gpus_per_node) &&
         a / gpus_per_node == b / gpus_per_node;
}
/// @brief Whether some placement could put rank blocks of `na` and `nb` ranks
/// together in one node (the best case of a link's class, for the planner's
/// bounds); `nb = 0` for a single block.
[[nodiscard]] constexpr bool may_share_node(long long na, long long nb,
                                            int gpus_per_node) noexcept {
  return na + nb <= gpus_per_node;
}

/// @brief Memory of one GPU of a pipeline stage `s`. With `v > 1` chunks
/// (interleaved 1F1B) the device holds the whole stage's parameters, gradients
/// and optimizer state, but activations of `in_flight` *chunk*-microbatches of
/// `s.num_layers / v` layers each (the chunk of the stage's type, so the first
/// keeps the embeddings' and the last the logits' share); `v == 1` is
/// `stage_memory(s, w, in_flight)`.
template <cost_model C>
[[nodiscard]] memory_breakdown device_memory(const C& c, const stage_config& s,
                                             const module_workload& w, int in_flight, int v) {
  if (v <= 1) return c.stage_memory(s, w, in_flight);
  memory_breakdown m = c.stage_memory(s, w, 0);
  stage_config chunk = s;
  chunk.num_layers = s.num_layers / v;
  if (s.first_layer > 0) chunk.first_layer = s.first_layer + s.num_layers - chunk.num_layers;
  m.activations = c.stage_memory(chunk, w, in_flight).activations;
  return m;
}

/// @brief Megatron-LM's default DDP bucket: max(40M, 1M x dp) parameters
/// (`DistributedDataParallelConfig.bucket_size` left unset).
[[nodiscard]] constexpr double ddp_bucket_params(int dp) noexcept {
  return std::max(40e6, 1e6 * static_cast<double>(dp));
}

/// @brief Seconds of a bucketed collective of `x` seconds in all that stay
/// exposed when it is issued bucket by bucket during `window` seconds of
/// compute: bucket i of `k` is ready at `i * window / k` and the buckets go
/// one after another on the communication stream, so the last one ends at
/// max(window / k + x, window + x / k); minus the window. `k <= 1` (one
/// bucket) hides nothing.
[[nodiscard]] inline double exposed_behind(double x, double window, double k) noexcept {
  if (!(x > 0)) return 0.0;
  if (!(k > 1)) return x;
  return std::max(x / k, x - window * (k - 1.0) / k);
}

/// @brief The per-iteration synchronisation of one pipeline stage (all its
/// parts: a colocated module adds its own), and the compute it can hide
/// behind: the forward and the backward (B + W) of one microbatch of the
/// stage's busiest replica. Parts are added in model-module order, field by
/// field, by `evaluate` and the planner alike, so both get identical bits.
struct stage_sync {
  double reduce_scatter_s = 0;
  double all_gather_s = 0;
  double optimizer_s = 0;
  double forward_s = 0;   ///< first microbatch's forward (hides the all-gather)
  double backward_s = 0;  ///< last microbatch's backward (hides the reduce-scatter)
  double buckets = 0;     ///< DDP buckets of all parts

  void add(const stage_sync& x) noexcept {
    reduce_scatter_s += x.reduce_scatter_s;
    all_gather_s += x.all_gather_s;
    optimizer_s += x.optimizer_s;
    forward_s += x.forward_s;
    backward_s += x.backward_s;
    buckets += x.buckets;
  }

  /// @brief Seconds the iteration pays after the pipeline: the collectives'
  /// exposed parts (all of them when not overlapped) + the optimizer step.
  [[nodiscard]] double exposed_s(bool overlap_grad_reduce,
                                 bool overlap_param_gather) const noexcept {
    const double rs = overlap_grad_reduce ? exposed_behind(reduce_scatter_s, backward_s, buckets)
                                          : reduce_scatter_s;
    const double ag =
        overlap_param_gather ? exposed_behind(all_gather_s, forward_s, buckets) : all_gather_s;
    return (rs + ag) + optimizer_s;
  }
  /// @brief All sync work, overlapped or not (collectives + optimizer step).
  [[nodiscard]] double total_s() const noexcept {
    return (reduce_scatter_s + all_gather_s) + optimizer_s;
  }
};

/// @brief One stage part's sync (`dp_sync_of` + optimizer step) and its
/// compute windows for workload `w` (the part's samples of one microbatch);
/// the buckets follow Megatron's default size for the part's dp.
template <cost_model C>
[[nodiscard]] stage_sync part_sync(const C& c, const stage_config& s, const module_workload& w,
                                   bool spans_nodes) {
  const dp_sync_times d = dp_sync_of(c, s, spans_nodes);
  const stage_times t = c.stage_time(s, w);
  stage_sync r;
  r.reduce_scatter_s = d.reduce_scatter_s;
  r.all_gather_s = d.all_gather_s;
  r.optimizer_s = c.optimizer_time(s);
  r.forward_s = t.forward_s;
  r.backward_s = t.backward_s + t.weight_grad_s;
  r.buckets = d.params > 0 ? std::ceil(d.params / ddp_bucket_params(s.dp)) : 0.0;
  return r;
}

/// @brief `part_sync(c, s, w, false)` and `part_sync(c, s, w, true)` (DP
/// group inside one node, across nodes), bit for bit, with one `stage_time`.
template <cost_model C>
[[nodiscard]] std::array<stage_sync, 2> part_sync_both(const C& c, const stage_config& s,
                                                       const module_workload& w) {
  std::array<stage_sync, 2> r{part_sync(c, s, w, false), stage_sync{}};
  const dp_sync_times d = dp_sync_of(c, s, true);
  r[1] = r[0];
  r[1].reduce_scatter_s = d.reduce_scatter_s;
  r[1].all_gather_s = d.all_gather_s;
  r[1].buckets = d.params > 0 ? std::ceil(d.params / ddp_bucket_params(s.dp)) : 0.0;
  return r;
}

}  // namespace disttrain::detail
