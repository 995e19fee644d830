#pragma once
/// @file json.hpp
/// @brief JSON input/output of the comm part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/comm.hpp` includes it.

#include "disttrain/comm/route.hpp"
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/json.hpp"

namespace disttrain {

// ---- sample_placement, activation_shape (sample_placement.hpp) ----
/// @brief `{"replicas": [[ids...], ...]}`.
inline void to_json(json& j, const sample_placement& p) {
  json r = json::array();
  for (int d = 0; d < p.dp(); ++d) r.push_back(p.samples(d));
  j = json{{"replicas", std::move(r)}};
}
inline void from_json(const json& j, sample_placement& p) {
  p = sample_placement(
      detail::json_get<std::vector<std::vector<int>>>(j, "replicas", "sample_placement"));
}
/// @brief `{"rows": [...], "hidden", "elem_size"}`.
inline void to_json(json& j, const activation_shape& a) {
  j = json{{"rows", a.rows}, {"hidden", a.hidden}, {"elem_size", a.elem_size}};
}
inline void from_json(const json& j, activation_shape& a) {
  a.rows = detail::json_get<std::vector<std::int64_t>>(j, "rows", "activation_shape");
  a.hidden = detail::json_get<std::int64_t>(j, "hidden", "activation_shape");
  a.elem_size = detail::json_get<std::size_t>(j, "elem_size", "activation_shape");
  a.validate();
}

// ---- route_piece, route_plan (route.hpp): output only ----
/// @brief `{"sample", "slice", "row0", "rows", "col0", "cols"}`.
inline void to_json(json& j, const route_piece& p) {
  j = json{{"sample", p.sample}, {"slice", p.slice}, {"row0", p.row0},
           {"rows", p.rows},     {"col0", p.col0},   {"cols", p.cols}};
}
/// @brief Summary of a plan for tools: messages with their pieces and element counts.
inline void to_json(json& j, const route_plan& p) {
  json ms = json::array();
  for (const auto& m : p.messages())
    ms.push_back(json{{"src", m.src},
                      {"dst", m.dst},
                      {"phase", m.phase},
                      {"elements", m.elements},
                      {"pieces", m.pieces}});
  j = json{{"from", {{"segment", p.from().segment}, {"stage", p.from().stage}}},
           {"to", {{"segment", p.to().segment}, {"stage", p.to().stage}}},
           {"hidden", p.hidden()},
           {"elem_size", p.elem_size()},
           {"slices", p.slices()},
           {"crossing_elements", p.phase_elements(0)},
           {"fan_out_elements", p.phase_elements(1)},
           {"minimum_crossing_elements", p.minimum_crossing_elements()},
           {"messages", std::move(ms)}};
}

}  // namespace disttrain
