#pragma once
/// @file json.hpp
/// @brief JSON input/output of the comm part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/comm.hpp` does not).

#include <tuple>

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
  p = sample_placement(json_get<std::vector<std::vector<int>>>(j, "replicas", "sample_placement"));
}
namespace detail {
// JSON descriptors (core/json.hpp, `json_field`): each field named once.
inline constexpr auto activation_shape_fields =
    std::tuple{required_field("rows", &activation_shape::rows),
               required_field("hidden", &activation_shape::hidden),
               required_field("elem_size", &activation_shape::elem_size)};
inline constexpr auto route_piece_fields = std::tuple{
    optional_field("sample", &route_piece::sample), optional_field("slice", &route_piece::slice),
    optional_field("row0", &route_piece::row0),     optional_field("rows", &route_piece::rows),
    optional_field("col0", &route_piece::col0),     optional_field("cols", &route_piece::cols)};
}  // namespace detail
/// @brief `{"rows": [...], "hidden", "elem_size"}`.
inline void to_json(json& j, const activation_shape& a) {
  j = detail::fields_to_json(a, detail::activation_shape_fields);
}
inline void from_json(const json& j, activation_shape& a) {
  detail::read_fields(j, a, detail::activation_shape_fields, "activation_shape");
  a.validate();
}

// ---- route_piece, route_plan (route.hpp): output only ----
/// @brief `{"sample", "slice", "row0", "rows", "col0", "cols"}`.
inline void to_json(json& j, const route_piece& p) {
  j = detail::fields_to_json(p, detail::route_piece_fields);
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
  j = json{{"from", {{"module", p.from().module.value}, {"stage", p.from().stage.value}}},
           {"to", {{"module", p.to().module.value}, {"stage", p.to().stage.value}}},
           {"hidden", p.hidden()},
           {"elem_size", p.elem_size()},
           {"slices", p.slices()},
           {"crossing_elements", p.phase_elements(0)},
           {"fan_out_elements", p.phase_elements(1)},
           {"minimum_crossing_elements", p.minimum_crossing_elements()},
           {"messages", std::move(ms)}};
}

}  // namespace disttrain
