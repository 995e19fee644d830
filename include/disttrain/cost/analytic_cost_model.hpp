#pragma once
/// @file analytic_cost_model.hpp
/// @brief The default `cost_model`: closed-form FLOPs, an efficiency curve,
/// alpha-beta communication and a mixed-precision memory model.
///
/// Every query is O(1): per-module coefficients (`module_shape`) are computed
/// once in the constructor and a stage of `n` identical layers costs `n` times
/// one layer (the closed form of the per-layer sum). No allocation on success.
/// Formulas, assumptions and sources: docs/cost_model.md.

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/collectives.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_shape.hpp"
#include "disttrain/model/workload.hpp"

namespace disttrain {

namespace detail {
/// @brief Bytes as "12.34 GB" (decimal GB, two decimals).
[[nodiscard]] inline std::string gb(double bytes) {
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}
}  // namespace detail

/// @brief Throws `errc::infeasible` at `"<module_name>/stage <stage_index>"` when
/// `m.total()` exceeds `limit_bytes`; the message gives the bytes needed (with
/// the breakdown), the limit and the bytes over.
/// @snippet cost.cpp require_fits
inline void require_fits(const memory_breakdown& m, double limit_bytes,
                         std::string_view module_name, int stage_index) {
  const double total = m.total();
  if (total <= limit_bytes) return;
  fail(errc::infeasible, cat(module_name, "/stage ", stage_index), "needs ", detail::gb(total),
       " per GPU (params ", detail::gb(m.params), ", grads ", detail::gb(m.grads), ", optimizer ",
       detail::gb(m.optimizer), ", activations ", detail::gb(m.activations), "), limit ",
       detail::gb(limit_bytes), ", over by ", detail::gb(total - limit_bytes));
}

/// @brief Closed-form cost model of a model on a cluster (see the file comment).
///
/// Time of one layer op on one GPU: `compute_time(flops / tp, tp, peak, eff[role])`.
/// Per layer and microbatch with `T = tokens`, `S = tokens_sq`, linear FLOPs
/// `L = flops_per_token * T`, attention FLOPs `A = flops_per_token_sq * S`:
/// - forward F = op(L + A) + TP comm;
/// - backward B (activation grads) = op(L + 2A) + TP comm when the module is
///   trainable or an upstream module needs gradients, else 0; plus F when recomputing;
/// - weight grads W = op(L) for trainable modules, else 0.
/// TP comm per layer and pass: `tp_collectives_per_layer` ring all-reduces of
/// `2 * hidden * T` bytes over NVLink (Megatron TP with sequence parallelism).
///
/// @snippet cost.cpp analytic_cost_model
class analytic_cost_model {
 public:
  /// @brief With the shipped parameters of the cluster's GPU:
  /// `calibrated_cost_params(cluster.gpu.name)` (the curve fitted to published
  /// runs on A100 and H100/H800; `cost_params{}` for other GPUs), as
  /// `disttrain-plan` uses them.
  analytic_cost_model(model_spec model, cluster_spec cluster)
      : analytic_cost_model(std::move(model), cluster, calibrated_cost_params(cluster.gpu.name)) {}

  /// @brief Validates the specs and parameters and precomputes every module's shape.
  analytic_cost_model(model_spec model, cluster_spec cluster, cost_params params)
      : model_(std::move(model)), cluster_(std::move(cluster)), params_(params) {
    model_.validate("model");
    cluster_.validate("cluster");
    params_.validate("cost");
    peak_ = cluster_.gpu.peak_bf16_flops();
    intra_ = group_link(cluster_, false, params_.intra_node_bw_efficiency,
                        params_.inter_node_bw_efficiency);
    inter_ = group_link(cluster_, true, params_.intra_node_bw_efficiency,
                        params_.inter_node_bw_efficiency);
    edges_ = model_.edges();
    modules_.reserve(model_.modules.size());
    for (std::size_t i = 0; i < model_.modules.size(); ++i) {
      const auto& m = model_.modules[i];
      module_entry e;
      e.shape = shape_of(m);
      e.trainable = !m.frozen;
      e.needs_backward = model_.runs_backward(i);
      e.role = m.role;
      modules_.push_back(e);
    }
  }

  [[nodiscard]] const model_spec& model() const noexcept { return model_; }
  [[nodiscard]] const cluster_spec& cluster() const noexcept { return cluster_; }
  [[nodiscard]] const cost_params& params() const noexcept { return params_; }
  /// @brief Precomputed coefficients of module `i`.
  [[nodiscard]] const module_shape& shape(std::size_t i) const { return entry(i, "module").shape; }
  /// @brief Whether module `i` runs a backward pass at all (trainable, or upstream needs grads).
  [[nodiscard]] bool needs_backward(std::size_t i) const {
    return entry(i, "module").needs_backward;
  }
  /// @brief Per-GPU peak FLOP/s (dense bf16).
  [[nodiscard]] double peak_flops() const noexcept { return peak_; }
  /// @brief Usable bytes per GPU: HBM minus `memory_reserve_bytes`.
  [[nodiscard]] double memory_limit() const noexcept {
    return cluster_.gpu.hbm_bytes - params_.memory_reserve_bytes;
  }

  /// @brief Per-GPU seconds of one microbatch of workload `w` on stage `s`.
  [[nodiscard]] stage_times stage_time(const stage_config& s, const module_workload& w) const {
    const module_entry& e = check(s);
    stage_times t;
    if (w.empty()) return t;
    const auto& sh = e.shape;
    const auto& eff = params_.efficiency_for(e.role);
    const double tp = static_cast<double>(s.tp);
    const double n = static_cast<double>(s.num_layers);
    auto op = [&](double flops) { return compute_time(flops / tp, s.tp, peak_, eff); };
    const double lin = sh.layer.flops_per_token * w.tokens;
    const double att = sh.layer.flops_per_token_sq * w.tokens_sq;
    const double comm = tp_layer_comm(sh, s.tp, w.tokens);
    const bool pre = s.first_layer == 0;
    const bool post = s.first_layer + s.num_layers == sh.layers;
    const double pre_f = pre ? sh.pre.flops_per_token * w.tokens : 0.0;
    const double post_f = post ? sh.post.flops_per_token * w.tokens : 0.0;

    const double score = score_time(sh, s.tp, w.tokens_sq);
    const double fwd_layers = n * (op(lin + att) + comm + score);
    t.forward_s = fwd_layers + op(pre_f) + op(post_f);
    if (e.needs_backward) {
      t.backward_s = n * (op(lin + 2.0 * att) + comm + 2.0 * score) + op(post_f);
      if (s.recompute)
        t.backward_s += fwd_layers;
      else if (s.selective_recompute)
        t.backward_s += n * (op(att) + score);
    }
    if (e.trainable) t.weight_grad_s = n * op(lin) + op(pre_f) + op(post_f);
    return t;
  }

  /// @brief Model FLOPs (all TP ranks of one replica) of one microbatch, no recompute.
  [[nodiscard]] stage_flops flops(const stage_config& s, const module_workload& w) const {
    const module_entry& e = check(s);
    const auto& sh = e.shape;
    const double n = static_cast<double>(s.num_layers);
    const double lin = sh.layer.flops_per_token * w.tokens;
    const double att = sh.layer.flops_per_token_sq * w.tokens_sq;
    const double pre_f = s.first_layer == 0 ? sh.pre.flops_per_token * w.tokens : 0.0;
    const double post_f =
        s.first_layer + s.num_layers == sh.layers ? sh.post.flops_per_token * w.tokens : 0.0;
    stage_flops f;
    f.forward = n * (lin + att) + pre_f + post_f;
    if (e.needs_backward) f.backward = n * (lin + 2.0 * att) + post_f;
    if (e.trainable) f.weight_grad = n * lin + pre_f + post_f;
    return f;
  }

  /// @brief Parameters of stage `s` (all TP ranks together).
  [[nodiscard]] double stage_params(const stage_config& s) const {
    const module_entry& e = check(s);
    return stage_params_of(e.shape, s);
  }

  /// @brief Per-GPU bytes of stage `s` holding `in_flight` microbatches of workload `w`.
  ///
  /// params = P/tp * param_bytes; grads = P/tp * grad_bytes (trainable);
  /// optimizer = P/tp * optimizer_bytes / dp (trainable, ZeRO-1);
  /// activations = in_flight * n * a * T / tp + transient, where a is the
  /// layer's saved bytes per token (or the 2*hidden checkpoint under recompute;
  /// without sequence parallelism the checkpoint and the layer's replicated
  /// bytes are not divided by tp),
  /// and transient = one layer's full activations when recomputing + the LM
  /// head's logits on the last stage. A module that runs no backward keeps no
  /// activations (transient: one layer's).
  [[nodiscard]] memory_breakdown stage_memory(const stage_config& s, const module_workload& w,
                                              int in_flight) const {
    const module_entry& e = check(s);
    if (in_flight < 0) fail(errc::invalid_argument, "in_flight", "must be >= 0, got ", in_flight);
    const auto& sh = e.shape;
    const double tp = static_cast<double>(s.tp);
    const double p = stage_params_of(sh, s) / tp;
    memory_breakdown m;
    m.params = p * params_.param_bytes;
    if (e.trainable) {
      m.grads = p * params_.grad_bytes;
      m.optimizer = p * params_.optimizer_bytes / static_cast<double>(s.dp);
    }
    // Without sequence parallelism the replicated part (and the checkpoint, the
    // layer input) is whole on every TP rank.
    const double act = sh.layer.activation_bytes_per_token;
    const double whole = sh.layer.replicated_bytes_per_token;
    const double layer_act = s.sequence_parallel ? act * w.tokens / tp
                                                 : (act - whole) * w.tokens / tp + whole * w.tokens;
    const bool post = s.first_layer + s.num_layers == sh.layers;
    const double logits = post ? sh.post.activation_bytes_per_token * w.tokens / tp : 0.0;
    if (e.needs_backward) {
      const double kept_scores = s.selective_recompute ? 0.0 : score_bytes(sh, s.tp, w.tokens_sq);
      const double checkpoint = s.sequence_parallel ? sh.checkpoint_bytes_per_token * w.tokens / tp
                                                    : sh.checkpoint_bytes_per_token * w.tokens;
      const double per_layer = s.recompute ? checkpoint : layer_act + kept_scores;
      m.activations =
          static_cast<double>(in_flight) * static_cast<double>(s.num_layers) * per_layer +
          (s.recompute ? layer_act + score_bytes(sh, s.tp, w.tokens_sq) : 0.0) + logits;
    } else {
      m.activations = layer_act + logits;
    }
    return m;
  }

  /// @brief Throws `errc::infeasible` at "<module>/stage <stage_index>" when
  /// `stage_memory(s, w, in_flight)` exceeds `memory_limit()`; returns the breakdown.
  memory_breakdown check_stage_memory(const stage_config& s, const module_workload& w,
                                      int in_flight, int stage_index) const {
    const auto m = stage_memory(s, w, in_flight);
    require_fits(m, memory_limit(), model_.modules[s.module].name, stage_index);
    return m;
  }

  /// @brief Activation bytes one replica of stage `s` sends to the next stage of
  /// the same module per microbatch (`output_bytes_per_token * tokens`; with
  /// sequence parallelism each TP rank sends 1/tp of it in parallel).
  [[nodiscard]] double stage_output_bytes(const stage_config& s, const module_workload& w) const {
    const module_entry& e = check(s);
    return e.shape.output_bytes_per_token * w.tokens;
  }

  /// @brief Seconds to send stage `s`'s output to the next stage (each TP rank
  /// sends its 1/tp share over its own link).
  [[nodiscard]] double stage_p2p_time(const stage_config& s, const module_workload& w,
                                      bool same_node) const {
    return p2p_time(stage_output_bytes(s, w) / static_cast<double>(s.tp), same_node);
  }

  /// @brief Bytes crossing the module boundary `from -> to` for a microbatch:
  /// encoder -> backbone: projected image tokens x backbone hidden x 2 bytes
  /// (projected tokens = images x `projector_tokens_per_image`, or encoder tokens /
  /// `projector_patch_ratio`); backbone -> generator: generated images x
  /// `generator_condition_tokens` x backbone hidden x 2 bytes; any other edge:
  /// the sender's tokens x its output bytes per token.
  [[nodiscard]] double transfer_bytes(std::size_t from, std::size_t to,
                                      const model_workload& w) const {
    bool edge = false;
    for (const auto& c : edges_) edge = edge || (c.from == from && c.to == to);
    if (!edge)
      fail(errc::invalid_argument, "transfer", "modules ", from, " -> ", to, " are not connected");
    const auto& src = modules_[from];
    const auto& dst = modules_[to];
    if (src.role == module_role::encoder && dst.role == module_role::backbone) {
      const double tokens =
          model_.projector_tokens_per_image > 0
              ? w[from].sequences * model_.projector_tokens_per_image
              : w[from].tokens / static_cast<double>(model_.projector_patch_ratio);
      return tokens * 2.0 * dst.shape.hidden;
    }
    if (src.role == module_role::backbone && dst.role == module_role::generator)
      return w[to].sequences * model_.generator_condition_tokens * 2.0 * src.shape.hidden;
    return w[from].tokens * src.shape.output_bytes_per_token;
  }

  /// @brief One message of `bytes` between two GPUs (NVLink if `same_node`, else NIC).
  [[nodiscard]] double p2p_time(double bytes, bool same_node) const noexcept {
    return disttrain::p2p_time(bytes, same_node ? intra_ : inter_);
  }

  /// @brief One ring all-reduce of `bytes` over a TP group of `tp` GPUs in a node.
  [[nodiscard]] double tp_comm_time(double bytes, int tp) const noexcept {
    return all_reduce_time(bytes, tp, intra_);
  }

  /// @brief ZeRO-1 gradient synchronisation of stage `s` per iteration, by
  /// collective: ring reduce-scatter of the gradients (P/tp * grad_bytes) and
  /// ring all-gather of the updated parameters (P/tp * param_bytes) over `dp`
  /// ranks, on NVLink or (when the DP group `spans_nodes`) the per-GPU NIC;
  /// `params` = P/tp. Zero times for frozen modules or dp = 1.
  [[nodiscard]] dp_sync_times dp_sync(const stage_config& s, bool spans_nodes) const {
    const module_entry& e = check(s);
    dp_sync_times t;
    if (!e.trainable || s.dp <= 1) return t;
    const double p = stage_params_of(e.shape, s) / static_cast<double>(s.tp);
    const link_spec& l = spans_nodes ? inter_ : intra_;
    t.reduce_scatter_s = reduce_scatter_time(p * params_.grad_bytes, s.dp, l);
    t.all_gather_s = all_gather_time(p * params_.param_bytes, s.dp, l);
    t.params = p;
    return t;
  }

  /// @brief `dp_sync(s, spans_nodes).total_s()`: reduce-scatter + all-gather.
  [[nodiscard]] double dp_sync_time(const stage_config& s, bool spans_nodes) const {
    return dp_sync(s, spans_nodes).total_s();
  }

  /// @brief Adam step of stage `s`'s optimizer shard per iteration, memory bound:
  /// P/(tp*dp) parameters x (read+write optimizer state + read grad + write param)
  /// bytes / (HBM bandwidth x memory_bw_efficiency). 0 for frozen modules.
  [[nodiscard]] double optimizer_time(const stage_config& s) const {
    const module_entry& e = check(s);
    if (!e.trainable) return 0.0;
    const double p =
        stage_params_of(e.shape, s) / static_cast<double>(s.tp) / static_cast<double>(s.dp);
    const double bytes =
        p * (2.0 * params_.optimizer_bytes + params_.grad_bytes + params_.param_bytes);
    return bytes / (cluster_.gpu.hbm_bandwidth_bytes_per_s * params_.memory_bw_efficiency);
  }

 private:
  struct module_entry {
    module_shape shape;
    module_role role = module_role::backbone;
    bool trainable = true;
    bool needs_backward = true;
  };

  const module_entry& entry(std::size_t i, std::string_view where) const {
    if (i >= modules_.size())
      fail(errc::invalid_argument, where, "module index ", i, " out of range (", modules_.size(),
           " modules)");
    return modules_[i];
  }

  // Checks a stage query; cheap comparisons on success, a named error otherwise.
  const module_entry& check(const stage_config& s) const {
    const module_entry& e = entry(s.module, "stage.module");
    if (s.tp < 1 || s.tp > cluster_.gpus_per_node || !e.shape.tp_supported(s.tp)) bad_tp(s, e);
    if (s.dp < 1) fail(errc::invalid_argument, where(s, "dp"), "must be >= 1, got ", s.dp);
    if (s.first_layer < 0 || s.num_layers < 1 || s.first_layer + s.num_layers > e.shape.layers)
      fail(errc::invalid_argument, where(s, "layers"), "layer range [", s.first_layer, ", ",
           s.first_layer + s.num_layers, ") is not a non-empty part of [0, ", e.shape.layers, ")");
    return e;
  }

  [[noreturn]] void bad_tp(const stage_config& s, const module_entry& e) const {
    if (s.tp < 1) fail(errc::invalid_argument, where(s, "tp"), "must be >= 1, got ", s.tp);
    if (s.tp > cluster_.gpus_per_node)
      fail(errc::invalid_argument, where(s, "tp"), "tp ", s.tp, " exceeds gpus_per_node ",
           cluster_.gpus_per_node, " (TP groups stay inside a node)");
    fail(errc::invalid_argument, where(s, "tp"), "tp ", s.tp,
         " does not split the module evenly (hidden ", e.shape.hidden, ", heads ", e.shape.heads,
         ", kv_heads ", e.shape.kv_heads, ", mlp ", e.shape.mlp, ")");
  }

  std::string where(const stage_config& s, std::string_view field) const {
    return cat(model_.modules[s.module].name, ".", field);
  }

  static double stage_params_of(const module_shape& sh, const stage_config& s) noexcept {
    double p = static_cast<double>(s.num_layers) * sh.layer.params;
    if (s.first_layer == 0) p += sh.pre.params;
    if (s.first_layer + s.num_layers == sh.layers) p += sh.post.params;
    return p;
  }

  // Unfused attention core (cost_params::attention_score_bytes > 0): HBM time of
  // one layer's forward score traffic on one GPU (heads / tp heads, sum s^2 scores each).
  double score_time(const module_shape& sh, int tp, double tokens_sq) const noexcept {
    if (!(params_.attention_score_bytes > 0) || sh.heads <= 0) return 0.0;
    return params_.attention_score_bytes * static_cast<double>(sh.heads) / static_cast<double>(tp) *
           tokens_sq / (cluster_.gpu.hbm_bandwidth_bytes_per_s * params_.memory_bw_efficiency);
  }
  // Bytes of one layer's kept score matrices on one GPU (5 per element) when unfused.
  double score_bytes(const module_shape& sh, int tp, double tokens_sq) const noexcept {
    if (!(params_.attention_score_bytes > 0) || sh.heads <= 0) return 0.0;
    return 5.0 * static_cast<double>(sh.heads) / static_cast<double>(tp) * tokens_sq;
  }

  double tp_layer_comm(const module_shape& sh, int tp, double tokens) const noexcept {
    if (tp <= 1) return 0.0;
    return static_cast<double>(sh.tp_collectives_per_layer) *
           all_reduce_time(sh.tp_collective_bytes_per_token * tokens, tp, intra_);
  }

  model_spec model_;
  cluster_spec cluster_;
  cost_params params_;
  double peak_ = 0;
  link_spec intra_{};
  link_spec inter_{};
  std::vector<connection> edges_;
  std::vector<module_entry> modules_;
};

static_assert(cost_model<analytic_cost_model>);
static_assert(splits_dp_sync<analytic_cost_model>);

}  // namespace disttrain
