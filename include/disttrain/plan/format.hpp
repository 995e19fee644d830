#pragma once
/// @file format.hpp
/// @brief Readable tables of plans and their evaluations (host-only: fmt does
/// not compile under nvcc in C++20 mode, see docs/errors.md).
///
/// @snippet plan.cpp format

#include "disttrain/core/config.hpp"
DISTTRAIN_HOST_ONLY_HEADER("disttrain/plan/format.hpp");

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <vector>

#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"

namespace disttrain {

/// @brief Layers per stage with runs compressed: {2,5,5,5,3} -> "2, 5x3, 3".
[[nodiscard]] inline std::string format_layers(const std::vector<int>& layers) {
  std::string out;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j < layers.size() && layers[j] == layers[i]) ++j;
    if (!out.empty()) out += ", ";
    out += j - i > 1 ? fmt::format("{}x{}", layers[i], j - i) : fmt::format("{}", layers[i]);
    i = j;
  }
  return out;
}

/// @brief The plan's DP-sync overlap as Megatron-LM's flags: "grad reduce + param gather",
/// "grad reduce", "param gather" or "none".
[[nodiscard]] inline std::string overlap_name(const parallel_plan& p) {
  if (p.overlap_grad_reduce && p.overlap_param_gather) return "grad reduce + param gather";
  if (p.overlap_grad_reduce) return "grad reduce";
  if (p.overlap_param_gather) return "param gather";
  return "none";
}

/// @brief One line per module: role, GPUs, TP/PP/DP, samples per replica and
/// microbatch, recompute (on, selective, off), layers per stage (and whether a
/// TP module runs without sequence parallelism); a header with the batch split.
[[nodiscard]] inline std::string format_plan(const parallel_plan& p) {
  std::string out;
  int stages = 0;
  for (const auto& m : p.modules)
    if (!m.colocated) stages += m.pp;
  fmt::format_to(
      std::back_inserter(out),
      "{} GPUs, global batch {} = {} microbatches x {} samples, {} schedule, {} pipeline "
      "stages, DP sync overlap: {}\n",
      p.total_gpus(), p.global_batch, p.num_microbatches, p.microbatch_samples(),
      to_string(p.schedule), stages, overlap_name(p));
  fmt::format_to(std::back_inserter(out),
                 "  {:<14} {:<10} {:>6} {:>3} {:>3} {:>5} {:>8} {:>9}  {}\n", "module", "role",
                 "GPUs", "TP", "PP", "DP", "mb/rep", "recompute", "layers per stage");
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const auto& m = p.modules[i];
    const std::string gpus = m.colocated ? std::string("shared") : fmt::format("{}", m.gpus());
    std::string layers = format_layers(m.layers);
    if (m.colocated)
      layers += m.role == "encoder" ? "  (on the backbone's first stage)"
                                    : "  (on the backbone's last stage)";
    if (m.virtual_stages > 1)
      layers += fmt::format("  (interleaved: {} chunks per device)", m.virtual_stages);
    if (m.tp > 1 && !m.sequence_parallel) layers += "  (no sequence parallelism)";
    const char* recompute = m.recompute ? "on" : m.selective_recompute ? "selective" : "off";
    fmt::format_to(std::back_inserter(out),
                   "  {:<14} {:<10} {:>6} {:>3} {:>3} {:>5} {:>8} {:>9}  {}\n", m.name, m.role,
                   gpus, m.tp, m.pp, m.dp, p.replica_samples(i), recompute, layers);
  }
  return out;
}

/// @brief Iteration time, MFU, bubble, memory; with `per_stage`, one line per stage.
[[nodiscard]] inline std::string format_evaluation(const plan_evaluation& e,
                                                   bool per_stage = false) {
  std::string out;
  fmt::format_to(
      std::back_inserter(out),
      "iteration {:.4f} s (pipeline {:.4f} s + exposed sync {:.4f} s), MFU {:.1f}%, bubble "
      "{:.1f}%, {:.1f} samples/s\n",
      e.iteration_time_s, e.pipeline_time_s, e.sync_time_s, 100.0 * e.mfu,
      100.0 * e.bubble_fraction, e.samples_per_s);
  const stage_report* worst = nullptr;
  for (const auto& s : e.stages)
    if (!worst || s.memory_bytes > worst->memory_bytes) worst = &s;
  if (worst)
    fmt::format_to(std::back_inserter(out),
                   "memory: peak {:.1f} GB of {:.1f} GB usable per GPU ({}/stage {})\n",
                   worst->memory_bytes / 1e9, e.memory_limit_bytes / 1e9, worst->module,
                   worst->stage);
  if (per_stage) {
    fmt::format_to(std::back_inserter(out),
                   "  {:>5} {:<14} {:>5} {:>6} {:>9} {:>9} {:>8} {:>9}  {}\n", "stage", "module",
                   "local", "layers", "time ms", "sync ms", "inflight", "mem GB", "colocated");
    for (const auto& s : e.stages) {
      std::string col;
      for (const auto& c : s.colocated) col += (col.empty() ? "" : ", ") + c;
      fmt::format_to(std::back_inserter(out),
                     "  {:>5} {:<14} {:>5} {:>6} {:>9.2f} {:>9.2f} {:>8} {:>9.1f}  {}\n",
                     s.chain_stage, s.module, s.stage, s.num_layers, 1e3 * s.time_s, 1e3 * s.sync_s,
                     s.in_flight, s.memory_bytes / 1e9, col);
    }
  }
  return out;
}

}  // namespace disttrain

template <>
struct fmt::formatter<disttrain::plan_schedule> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(disttrain::plan_schedule s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(disttrain::to_string(s), ctx);
  }
};
