#pragma once
/// @file cost_params.hpp
/// @brief The tunable constants of `analytic_cost_model`: efficiency curves per
/// module role, achievable link and memory bandwidth fractions, byte sizes of
/// mixed-precision training state, and the per-GPU memory reserve.

#include <array>
#include <string_view>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/module_spec.hpp"

namespace disttrain {

/// @brief Constants of the analytic cost model (defaults documented in docs/cost_model.md).
///
/// Mixed-precision Adam as Megatron-LM trains in bf16 with its distributed
/// optimizer (ZeRO-1): bf16 parameters (2 bytes) and fp32 gradient buffers
/// (4 bytes: Megatron accumulates and reduce-scatters bf16 gradients in fp32)
/// on every DP rank; fp32 master weights, momentum and variance (12 bytes)
/// sharded over DP. That is Megatron's "6 + 12/d bytes per parameter".
///
/// @snippet cost.cpp cost_params
struct cost_params {
  std::array<efficiency_params, 3> efficiency{};  ///< indexed by module_role
  double intra_node_bw_efficiency = 0.80;         ///< achievable fraction of NVLink bandwidth
  double inter_node_bw_efficiency = 0.85;         ///< achievable fraction of NIC bandwidth
  double memory_bw_efficiency = 0.80;  ///< achievable fraction of HBM bandwidth (optimizer step)
  double param_bytes = 2;              ///< bytes per parameter held by every rank (bf16)
  double grad_bytes = 4;  ///< bytes per gradient held and reduce-scattered by every rank (fp32)
  double optimizer_bytes = 12;        ///< bytes of optimizer state per parameter, sharded by ZeRO-1
  double memory_reserve_bytes = 4e9;  ///< per GPU: CUDA context, NCCL buffers, fragmentation
  /// HBM bytes moved per attention-score element (one head, one query-key pair)
  /// in a forward pass by an unfused attention core (QK^T written, scaled,
  /// masked, softmaxed, dropped out, read by AV); the backward pass moves twice
  /// that. 0 (the default) models fused flash attention, which keeps no score
  /// matrix. When > 0 the scores are also kept for backward: 5 bytes per
  /// element (Korthikanti et al. 2022: fp16 QK^T and softmax, 1-byte dropout
  /// mask), unless the layer recomputes (full or selective).
  double attention_score_bytes = 0;

  [[nodiscard]] efficiency_params& efficiency_for(module_role r) noexcept {
    return efficiency[static_cast<std::size_t>(r)];
  }
  [[nodiscard]] const efficiency_params& efficiency_for(module_role r) const noexcept {
    return efficiency[static_cast<std::size_t>(r)];
  }

  void validate(std::string_view path = "cost") const {
    using detail::join_path;
    static constexpr const char* names[3] = {"encoder", "backbone", "generator"};
    for (std::size_t i = 0; i < 3; ++i)
      efficiency[i].validate(join_path(join_path(path, "efficiency"), names[i]));
    require(intra_node_bw_efficiency > 0 && intra_node_bw_efficiency <= 1,
            join_path(path, "intra_node_bw_efficiency"), "must be in (0, 1], got ",
            intra_node_bw_efficiency);
    require(inter_node_bw_efficiency > 0 && inter_node_bw_efficiency <= 1,
            join_path(path, "inter_node_bw_efficiency"), "must be in (0, 1], got ",
            inter_node_bw_efficiency);
    require(memory_bw_efficiency > 0 && memory_bw_efficiency <= 1,
            join_path(path, "memory_bw_efficiency"), "must be in (0, 1], got ",
            memory_bw_efficiency);
    require_positive(param_bytes, join_path(path, "param_bytes"));
    require_non_negative(grad_bytes, join_path(path, "grad_bytes"));
    require_non_negative(optimizer_bytes, join_path(path, "optimizer_bytes"));
    require_non_negative(memory_reserve_bytes, join_path(path, "memory_reserve_bytes"));
    require_non_negative(attention_score_bytes, join_path(path, "attention_score_bytes"));
  }

  /// @brief `validate`, and the memory reserve must leave room on `gpu`:
  /// `memory_reserve_bytes < gpu.hbm_bytes` (else every plan is infeasible
  /// for a reason no module can fix).
  void validate_for(const gpu_spec& gpu, std::string_view path = "cost") const {
    validate(path);
    require(memory_reserve_bytes < gpu.hbm_bytes, detail::join_path(path, "memory_reserve_bytes"),
            "reserves ", memory_reserve_bytes, " bytes per GPU, but the ", gpu.name, " has only ",
            gpu.hbm_bytes, " bytes of HBM (must be less)");
  }
};

/// @brief The shipped cost parameters for a GPU type: `cost_params{}` with the
/// efficiency curve (every role) fitted to published runs on that hardware by
/// `disttrain-calibrate` (docs/cost_model.md, "Fidelity against published
/// runs"). `hardware` is a cluster preset name ("a100", "h100", "h800") or a
/// GPU name from the presets ("A100-SXM-80GB", ...). The H800 gets the H100's
/// curve: it is an H100 with NVLink cut to 400 GB/s, and links are priced
/// separately from the compute curve. Other names keep the uncalibrated defaults.
/// @snippet cost.cpp calibrated_cost_params
[[nodiscard]] inline cost_params calibrated_cost_params(std::string_view hardware) {
  // Fitted on data/published_runs.json (the runs marked "fit") by
  // `disttrain-calibrate --hardware <name>`, e_max and tp_penalty free, flops_half
  // kept at its prior (the runs' ops do not pin it: a free one runs to its bound).
  // A100: 7 runs; H100: 4 runs (TP 2, 4 and 8).
  const efficiency_params a100{.e_max = 0.9621, .flops_half = 3e10, .tp_penalty = 0.0494};
  const efficiency_params h100{.e_max = 0.7141, .flops_half = 3e10, .tp_penalty = 0.0062};
  cost_params p;
  const efficiency_params* fitted = nullptr;
  if (hardware == "a100" || hardware == "A100-SXM-80GB") fitted = &a100;
  if (hardware == "h100" || hardware == "H100-SXM-80GB" || hardware == "h800" ||
      hardware == "H800-SXM-80GB")
    fitted = &h100;
  if (fitted != nullptr)
    for (auto& e : p.efficiency) e = *fitted;
  return p;
}

}  // namespace disttrain
