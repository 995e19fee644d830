#pragma once
/// @file cluster_spec.hpp
/// @brief GPU and cluster descriptions: peak compute, memory, links.
///
/// Units are SI and named in the field: FLOP/s as TFLOP/s (`_tflops`), bytes,
/// bytes per second (`_bytes_per_s`, one direction, per GPU), seconds (`_s`).

#include <string>
#include <string_view>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief One GPU type.
///
/// @snippet model.cpp gpu_spec
struct gpu_spec {
  std::string name{};
  double peak_bf16_tflops = 0;           ///< dense bf16 tensor-core peak
  double peak_fp32_tflops = 0;           ///< dense fp32 (non-tensor) peak
  double hbm_bytes = 0;                  ///< device memory
  double hbm_bandwidth_bytes_per_s = 0;  ///< device memory bandwidth

  /// @brief Dense bf16 peak in FLOP/s.
  [[nodiscard]] double peak_bf16_flops() const noexcept { return peak_bf16_tflops * 1e12; }

  void validate(std::string_view path) const {
    using detail::join_path;
    require(!name.empty(), join_path(path, "name"), "must not be empty");
    require_positive(peak_bf16_tflops, join_path(path, "peak_bf16_tflops"));
    require_positive(peak_fp32_tflops, join_path(path, "peak_fp32_tflops"));
    require_positive(hbm_bytes, join_path(path, "hbm_bytes"));
    require_positive(hbm_bandwidth_bytes_per_s, join_path(path, "hbm_bandwidth_bytes_per_s"));
  }
};

/// @brief A homogeneous cluster: `num_gpus` GPUs in nodes of `gpus_per_node`
/// (the last node may be partial), an intra-node fabric (NVLink) and per-GPU
/// inter-node bandwidth (one NIC per GPU). Rank r lives on node r / gpus_per_node.
///
/// @snippet model.cpp cluster_spec
struct cluster_spec {
  std::string name{};
  gpu_spec gpu{};
  int num_gpus = 0;
  int gpus_per_node = 8;
  double intra_node_bandwidth_bytes_per_s = 0;  ///< per GPU, one direction (NVLink)
  double intra_node_latency_s = 0;              ///< per message / ring step
  double inter_node_bandwidth_bytes_per_s = 0;  ///< per GPU, one direction (its NIC)
  double inter_node_latency_s = 0;              ///< per message / ring step

  /// @brief Nodes, counting a partial last node.
  [[nodiscard]] int num_nodes() const noexcept {
    return gpus_per_node > 0 ? (num_gpus + gpus_per_node - 1) / gpus_per_node : 0;
  }
  /// @brief Node of global rank `rank`.
  [[nodiscard]] int node_of(int rank) const noexcept {
    return gpus_per_node > 0 ? rank / gpus_per_node : 0;
  }

  void validate(std::string_view path = "cluster") const {
    using detail::join_path;
    gpu.validate(join_path(path, "gpu"));
    require_positive(num_gpus, join_path(path, "num_gpus"));
    require_positive(gpus_per_node, join_path(path, "gpus_per_node"));
    require_positive(intra_node_bandwidth_bytes_per_s,
                     join_path(path, "intra_node_bandwidth_bytes_per_s"));
    require_non_negative(intra_node_latency_s, join_path(path, "intra_node_latency_s"));
    require_positive(inter_node_bandwidth_bytes_per_s,
                     join_path(path, "inter_node_bandwidth_bytes_per_s"));
    require_non_negative(inter_node_latency_s, join_path(path, "inter_node_latency_s"));
  }
};

}  // namespace disttrain
