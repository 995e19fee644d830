#pragma once
/// @file stage.hpp
/// @brief Vocabulary of cost queries: a stage configuration and what a cost
/// model answers about it (times, FLOPs, memory).

#include <cstddef>

namespace disttrain {

/// @brief A pipeline stage of one module: layers `[first_layer, first_layer +
/// num_layers)` of module `module`, split `tp` ways, replicated `dp` ways.
/// The stage holding layer 0 also holds the module's `pre` block (embeddings);
/// the stage holding the last layer holds `post` (final norm, LM head).
///
/// @snippet cost.cpp stage_config
struct stage_config {
  std::size_t module = 0;  ///< index in model_spec::modules
  int first_layer = 0;
  int num_layers = 1;
  int tp = 1;              ///< tensor-parallel degree (within a node)
  int dp = 1;              ///< data-parallel degree (ZeRO-1 shards optimizer state over it)
  bool recompute = false;  ///< full activation recomputation
  /// Selective recomputation (Korthikanti et al. 2022): only the attention core
  /// (scores, softmax, AV) is recomputed in backward; its score matrix is not
  /// kept. Ignored when `recompute` is on.
  bool selective_recompute = false;
  /// Sequence parallelism (Megatron-LM `--sequence-parallel`, Korthikanti et al.
  /// 2022): the norm and GEMM-input activations that plain TP keeps whole on
  /// every TP rank are split along the sequence, so all saved activations (and
  /// the full-recompute checkpoint) shrink by `tp`. Its collectives (reduce-scatter
  /// + all-gather) move the bytes of TP's all-reduce, so times do not change. No
  /// effect at tp = 1.
  bool sequence_parallel = true;
  friend bool operator==(const stage_config&, const stage_config&) = default;
};

/// @brief Seconds one GPU of a stage spends on one microbatch.
///
/// `backward_s` is the activation-gradient part B (plus the recomputed forward
/// when recompute is on); `weight_grad_s` is W. Schedules that do not split B
/// and W run `backward_s + weight_grad_s` together. TP collectives are included
/// (they are on the critical path of a layer).
struct stage_times {
  double forward_s = 0;
  double backward_s = 0;
  double weight_grad_s = 0;
  [[nodiscard]] constexpr double total_s() const noexcept {
    return forward_s + backward_s + weight_grad_s;
  }
  friend constexpr bool operator==(const stage_times&, const stage_times&) = default;
};

/// @brief Model FLOPs of a stage replica (all its TP ranks) for one microbatch,
/// without recomputation (the MFU convention).
struct stage_flops {
  double forward = 0;
  double backward = 0;
  double weight_grad = 0;
  [[nodiscard]] constexpr double total() const noexcept { return forward + backward + weight_grad; }
};

/// @brief One GPU's per-iteration data-parallel synchronisation of a stage,
/// by collective (ZeRO-1, Megatron-LM's distributed optimizer): the gradient
/// reduce-scatter and the all-gather of the updated parameters, and the
/// parameters the GPU holds (they decide how many DDP buckets the collectives
/// are issued in, and so how much of them can overlap compute).
/// @snippet cost.cpp dp_sync_times
struct dp_sync_times {
  double reduce_scatter_s = 0;  ///< gradient reduce-scatter over the DP group
  double all_gather_s = 0;      ///< updated-parameter all-gather over the DP group
  double params = 0;            ///< parameters per GPU (0: unknown, one bucket)
  [[nodiscard]] constexpr double total_s() const noexcept {
    return reduce_scatter_s + all_gather_s;
  }
  friend constexpr bool operator==(const dp_sync_times&, const dp_sync_times&) = default;
};

/// @brief Bytes one GPU of a stage holds.
struct memory_breakdown {
  double params = 0;       ///< bf16 weights (all modules)
  double grads = 0;        ///< gradients (trainable modules)
  double optimizer = 0;    ///< optimizer state shard (trainable modules, / dp)
  double activations = 0;  ///< saved activations x in-flight microbatches + transient buffers
  [[nodiscard]] constexpr double total() const noexcept {
    return params + grads + optimizer + activations;
  }
};

}  // namespace disttrain
