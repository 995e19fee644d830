#pragma once
/// @file json.hpp
/// @brief JSON input/output of the cost part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/cost.hpp` includes it.

#include "disttrain/core/json.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/json.hpp"

namespace disttrain {

// ---- efficiency.hpp ----
inline void to_json(json& j, const efficiency_params& e) {
  j = json{{"e_max", e.e_max}, {"flops_half", e.flops_half}, {"tp_penalty", e.tp_penalty}};
}
namespace detail {
[[nodiscard]] inline efficiency_params read_efficiency_params(const json& j,
                                                              std::string_view path) {
  check_keys(j, {"e_max", "flops_half", "tp_penalty"}, path);
  efficiency_params e;
  e.e_max = json_get<double>(j, "e_max", path);
  e.flops_half = json_get<double>(j, "flops_half", path);
  e.tp_penalty = json_get_or<double>(j, "tp_penalty", 0.0, path);
  e.validate(path);
  return e;
}
}  // namespace detail
inline void from_json(const json& j, efficiency_params& e) {
  e = detail::read_efficiency_params(j, "efficiency");
}

// ---- stage.hpp ----
inline void to_json(json& j, const stage_config& s) {
  j = json{{"module", s.module},
           {"first_layer", s.first_layer},
           {"num_layers", s.num_layers},
           {"tp", s.tp},
           {"dp", s.dp},
           {"recompute", s.recompute},
           {"selective_recompute", s.selective_recompute},
           {"sequence_parallel", s.sequence_parallel}};
}
inline void to_json(json& j, const stage_times& t) {
  j = json{
      {"forward_s", t.forward_s}, {"backward_s", t.backward_s}, {"weight_grad_s", t.weight_grad_s}};
}
inline void to_json(json& j, const memory_breakdown& m) {
  j = json{{"params", m.params},
           {"grads", m.grads},
           {"optimizer", m.optimizer},
           {"activations", m.activations},
           {"total", m.total()}};
}

// ---- cost_params.hpp ----
inline void to_json(json& j, const cost_params& p) {
  json e;
  to_json(e["encoder"], p.efficiency[0]);
  to_json(e["backbone"], p.efficiency[1]);
  to_json(e["generator"], p.efficiency[2]);
  j = json{{"efficiency", e},
           {"intra_node_bw_efficiency", p.intra_node_bw_efficiency},
           {"inter_node_bw_efficiency", p.inter_node_bw_efficiency},
           {"memory_bw_efficiency", p.memory_bw_efficiency},
           {"param_bytes", p.param_bytes},
           {"grad_bytes", p.grad_bytes},
           {"optimizer_bytes", p.optimizer_bytes},
           {"memory_reserve_bytes", p.memory_reserve_bytes},
           {"attention_score_bytes", p.attention_score_bytes}};
}

namespace detail {
/// @brief Reads cost parameters at `path`; every field optional (`base`'s value kept).
[[nodiscard]] inline cost_params read_cost_params(const json& j, std::string_view path,
                                                  const cost_params& base = {}) {
  cost_params p = base;
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  check_keys(j,
             {"efficiency", "intra_node_bw_efficiency", "inter_node_bw_efficiency",
              "memory_bw_efficiency", "param_bytes", "grad_bytes", "optimizer_bytes",
              "memory_reserve_bytes", "attention_score_bytes"},
             path);
  if (j.contains("efficiency")) {
    const json& e = j.at("efficiency");
    const std::string ep = join_path(path, "efficiency");
    static constexpr const char* names[3] = {"encoder", "backbone", "generator"};
    if (!e.is_object()) fail(errc::parse_error, ep, "expected a JSON object, got ", e.type_name());
    check_keys(e, {"encoder", "backbone", "generator"}, ep);
    for (std::size_t i = 0; i < 3; ++i)
      if (e.contains(names[i]))
        p.efficiency[i] = read_efficiency_params(e.at(names[i]), join_path(ep, names[i]));
  }
  p.intra_node_bw_efficiency =
      json_get_or<double>(j, "intra_node_bw_efficiency", p.intra_node_bw_efficiency, path);
  p.inter_node_bw_efficiency =
      json_get_or<double>(j, "inter_node_bw_efficiency", p.inter_node_bw_efficiency, path);
  p.memory_bw_efficiency =
      json_get_or<double>(j, "memory_bw_efficiency", p.memory_bw_efficiency, path);
  p.param_bytes = json_get_or<double>(j, "param_bytes", p.param_bytes, path);
  p.grad_bytes = json_get_or<double>(j, "grad_bytes", p.grad_bytes, path);
  p.optimizer_bytes = json_get_or<double>(j, "optimizer_bytes", p.optimizer_bytes, path);
  p.memory_reserve_bytes =
      json_get_or<double>(j, "memory_reserve_bytes", p.memory_reserve_bytes, path);
  p.attention_score_bytes =
      json_get_or<double>(j, "attention_score_bytes", p.attention_score_bytes, path);
  p.validate(path);
  return p;
}
}  // namespace detail
inline void from_json(const json& j, cost_params& p) { p = detail::read_cost_params(j, "cost"); }

}  // namespace disttrain
