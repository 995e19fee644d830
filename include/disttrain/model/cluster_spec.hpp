#pragma once
/// @file cluster_spec.hpp
/// @brief GPU and cluster descriptions: peak compute, memory, links.
///
/// Units are SI and named in the field: FLOP/s as TFLOP/s (`_tflops`), bytes,
/// bytes per second (`_bytes_per_s`, one direction, per GPU), seconds (`_s`).

#include <string>
#include <string_view>

#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"

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

inline void to_json(json& j, const gpu_spec& g) {
  j = json{{"name", g.name},
           {"peak_bf16_tflops", g.peak_bf16_tflops},
           {"peak_fp32_tflops", g.peak_fp32_tflops},
           {"hbm_bytes", g.hbm_bytes},
           {"hbm_bandwidth_bytes_per_s", g.hbm_bandwidth_bytes_per_s}};
}
inline void to_json(json& j, const cluster_spec& c) {
  json g;
  to_json(g, c.gpu);
  j = json{{"name", c.name},
           {"gpu", g},
           {"num_gpus", c.num_gpus},
           {"gpus_per_node", c.gpus_per_node},
           {"intra_node_bandwidth_bytes_per_s", c.intra_node_bandwidth_bytes_per_s},
           {"intra_node_latency_s", c.intra_node_latency_s},
           {"inter_node_bandwidth_bytes_per_s", c.inter_node_bandwidth_bytes_per_s},
           {"inter_node_latency_s", c.inter_node_latency_s}};
}

namespace detail {
[[nodiscard]] inline gpu_spec read_gpu_spec(const json& j, std::string_view path) {
  check_keys(
      j, {"name", "peak_bf16_tflops", "peak_fp32_tflops", "hbm_bytes", "hbm_bandwidth_bytes_per_s"},
      path);
  gpu_spec g;
  g.name = json_get<std::string>(j, "name", path);
  g.peak_bf16_tflops = json_get<double>(j, "peak_bf16_tflops", path);
  g.peak_fp32_tflops = json_get<double>(j, "peak_fp32_tflops", path);
  g.hbm_bytes = json_get<double>(j, "hbm_bytes", path);
  g.hbm_bandwidth_bytes_per_s = json_get<double>(j, "hbm_bandwidth_bytes_per_s", path);
  g.validate(path);
  return g;
}
/// @brief Reads a cluster at `path` and validates it.
[[nodiscard]] inline cluster_spec read_cluster_spec(const json& j, std::string_view path) {
  check_keys(j,
             {"name", "gpu", "num_gpus", "gpus_per_node", "intra_node_bandwidth_bytes_per_s",
              "intra_node_latency_s", "inter_node_bandwidth_bytes_per_s", "inter_node_latency_s"},
             path);
  cluster_spec c;
  c.name = json_get_or<std::string>(j, "name", "", path);
  const std::string gp = join_path(path, "gpu");
  if (!j.is_object() || !j.contains("gpu"))
    fail(errc::parse_error, gp, "required field is missing");
  c.gpu = read_gpu_spec(j.at("gpu"), gp);
  c.num_gpus = json_get<int>(j, "num_gpus", path);
  c.gpus_per_node = json_get<int>(j, "gpus_per_node", path);
  c.intra_node_bandwidth_bytes_per_s =
      json_get<double>(j, "intra_node_bandwidth_bytes_per_s", path);
  c.intra_node_latency_s = json_get<double>(j, "intra_node_latency_s", path);
  c.inter_node_bandwidth_bytes_per_s =
      json_get<double>(j, "inter_node_bandwidth_bytes_per_s", path);
  c.inter_node_latency_s = json_get<double>(j, "inter_node_latency_s", path);
  c.validate(path);
  return c;
}
}  // namespace detail

inline void from_json(const json& j, gpu_spec& g) { g = detail::read_gpu_spec(j, "gpu"); }
inline void from_json(const json& j, cluster_spec& c) {
  c = detail::read_cluster_spec(j, "cluster");
}

}  // namespace disttrain
