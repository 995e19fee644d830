#pragma once
/// @file format.hpp
/// @brief Readable summaries of specs (host-only: uses fmt).
///
/// @snippet model.cpp format

#include "disttrain/core/config.hpp"
DISTTRAIN_HOST_ONLY_HEADER("disttrain/model/format.hpp");

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_shape.hpp"

template <>
struct fmt::formatter<disttrain::module_role> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(disttrain::module_role r, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(disttrain::to_string(r), ctx);
  }
};

namespace disttrain {

/// @brief Short architecture tag: "vit", "llm", "unet" or "dit".
[[nodiscard]] inline std::string_view arch_tag(const module_spec& m) {
  if (std::holds_alternative<vit_encoder_arch>(m.arch)) return "vit";
  if (std::holds_alternative<decoder_llm_arch>(m.arch)) return "llm";
  return to_string(std::get<diffusion_arch>(m.arch).kind);
}

/// @brief One line per module: index, name, role, architecture, layers, hidden, parameters, flags.
[[nodiscard]] inline std::string format_model(const model_spec& m) {
  std::string out = fmt::format("model {}: {} modules\n", m.name, m.modules.size());
  out += fmt::format("  {:>2}  {:<14} {:<10} {:<5} {:>7} {:>7} {:>9}  {}\n", "#", "name", "role",
                     "arch", "layers", "hidden", "params", "flags");
  for (std::size_t i = 0; i < m.modules.size(); ++i) {
    const auto& mod = m.modules[i];
    const auto sh = shape_of(mod);
    std::string flags;
    if (mod.frozen) flags += "frozen ";
    if (mod.recompute) flags += "recompute";
    out += fmt::format("  {:>2}  {:<14} {:<10} {:<5} {:>7} {:>7} {:>8.2f}B  {}\n", i, mod.name,
                       to_string(mod.role), arch_tag(mod), sh.layers, sh.hidden,
                       sh.total_params() / 1e9, flags);
  }
  return out;
}

/// @brief One line: GPUs, nodes, GPU type, peak, HBM and links.
[[nodiscard]] inline std::string format_cluster(const cluster_spec& c) {
  return fmt::format(
      "cluster {}: {} x {} ({} nodes of {}), {:.0f} TFLOP/s bf16, {:.0f} GB HBM, NVLink {:.0f} "
      "GB/s, "
      "NIC {:.0f} GB/s per GPU\n",
      c.name, c.num_gpus, c.gpu.name, c.num_nodes(), c.gpus_per_node, c.gpu.peak_bf16_tflops,
      c.gpu.hbm_bytes / 1e9, c.intra_node_bandwidth_bytes_per_s / 1e9,
      c.inter_node_bandwidth_bytes_per_s / 1e9);
}

}  // namespace disttrain
