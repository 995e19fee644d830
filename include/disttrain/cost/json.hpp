#pragma once
/// @file json.hpp
/// @brief JSON input/output of the cost part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/cost.hpp` does not).

#include <tuple>

#include "disttrain/core/json.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/json.hpp"

namespace disttrain {

namespace detail {
// JSON descriptors (core/json.hpp, `json_field`): each field named once.
inline constexpr auto efficiency_params_fields =
    std::tuple{required_field("e_max", &efficiency_params::e_max),
               required_field("flops_half", &efficiency_params::flops_half),
               optional_field("tp_penalty", &efficiency_params::tp_penalty)};
inline constexpr auto stage_config_fields =
    std::tuple{optional_field("module", &stage_config::module),
               optional_field("first_layer", &stage_config::first_layer),
               optional_field("num_layers", &stage_config::num_layers),
               optional_field("tp", &stage_config::tp),
               optional_field("dp", &stage_config::dp),
               optional_field("recompute", &stage_config::recompute),
               optional_field("selective_recompute", &stage_config::selective_recompute),
               optional_field("sequence_parallel", &stage_config::sequence_parallel)};
inline constexpr auto stage_times_fields =
    std::tuple{optional_field("forward_s", &stage_times::forward_s),
               optional_field("backward_s", &stage_times::backward_s),
               optional_field("weight_grad_s", &stage_times::weight_grad_s)};
inline constexpr auto memory_breakdown_fields =
    std::tuple{optional_field("params", &memory_breakdown::params),
               optional_field("grads", &memory_breakdown::grads),
               optional_field("optimizer", &memory_breakdown::optimizer),
               optional_field("activations", &memory_breakdown::activations)};
// Every scalar of cost_params (all optional; "efficiency" is read apart).
inline constexpr auto cost_params_fields =
    std::tuple{optional_field("intra_node_bw_efficiency", &cost_params::intra_node_bw_efficiency),
               optional_field("inter_node_bw_efficiency", &cost_params::inter_node_bw_efficiency),
               optional_field("memory_bw_efficiency", &cost_params::memory_bw_efficiency),
               optional_field("param_bytes", &cost_params::param_bytes),
               optional_field("grad_bytes", &cost_params::grad_bytes),
               optional_field("optimizer_bytes", &cost_params::optimizer_bytes),
               optional_field("memory_reserve_bytes", &cost_params::memory_reserve_bytes),
               optional_field("attention_score_bytes", &cost_params::attention_score_bytes)};
}  // namespace detail

// ---- efficiency.hpp ----
inline void to_json(json& j, const efficiency_params& e) {
  j = detail::fields_to_json(e, detail::efficiency_params_fields);
}
namespace detail {
[[nodiscard]] inline efficiency_params read_efficiency_params(const json& j,
                                                              std::string_view path) {
  efficiency_params e;
  e.tp_penalty = 0.0;  // a curve given without a TP penalty has none (not the default's)
  read_fields(j, e, efficiency_params_fields, path);
  e.validate(path);
  return e;
}
}  // namespace detail
inline void from_json(const json& j, efficiency_params& e) {
  e = detail::read_efficiency_params(j, "efficiency");
}

// ---- stage.hpp ----
inline void to_json(json& j, const stage_config& s) {
  j = detail::fields_to_json(s, detail::stage_config_fields);
}
inline void to_json(json& j, const stage_times& t) {
  j = detail::fields_to_json(t, detail::stage_times_fields);
}
/// @brief The fields and their `total`.
inline void to_json(json& j, const memory_breakdown& m) {
  j = detail::fields_to_json(m, detail::memory_breakdown_fields);
  j["total"] = m.total();
}

// ---- cost_params.hpp ----
/// @brief `{"efficiency": {"encoder", "backbone", "generator"}, ...}` and the scalars.
inline void to_json(json& j, const cost_params& p) {
  json e;
  to_json(e["encoder"], p.efficiency[0]);
  to_json(e["backbone"], p.efficiency[1]);
  to_json(e["generator"], p.efficiency[2]);
  j = detail::fields_to_json(p, detail::cost_params_fields);
  j["efficiency"] = std::move(e);
}

/// @brief Reads cost parameters at `path`; every field is optional (`base`'s
/// value kept), so a configuration overrides, e.g., a GPU's calibrated defaults.
[[nodiscard]] inline cost_params read_cost_params(const json& j, std::string_view path,
                                                  const cost_params& base = {}) {
  cost_params p = base;
  detail::read_fields(j, p, detail::cost_params_fields, path, {"efficiency"});
  if (j.contains("efficiency")) {
    const json& e = j.at("efficiency");
    const std::string ep = detail::join_path(path, "efficiency");
    static constexpr const char* names[3] = {"encoder", "backbone", "generator"};
    if (!e.is_object()) fail(errc::parse_error, ep, "expected a JSON object, got ", e.type_name());
    check_keys(e, {"encoder", "backbone", "generator"}, ep);
    for (std::size_t i = 0; i < 3; ++i)
      if (e.contains(names[i]))
        p.efficiency[i] =
            detail::read_efficiency_params(e.at(names[i]), detail::join_path(ep, names[i]));
  }
  p.validate(path);
  return p;
}

inline void from_json(const json& j, cost_params& p) { p = read_cost_params(j, "cost"); }

}  // namespace disttrain
