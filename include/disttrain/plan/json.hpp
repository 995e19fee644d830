#pragma once
/// @file json.hpp
/// @brief JSON input/output of the plan part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/plan.hpp` includes it.

#include "disttrain/core/json.hpp"
#include "disttrain/plan/rank_layout.hpp"

namespace disttrain {

// ---- rank_layout (rank_layout.hpp) ----

/// @brief `{"name", "role", "tp", "pp", "dp"}`.
inline void to_json(json& j, const segment_spec& s) {
  j = json{{"name", s.name}, {"role", s.role}, {"tp", s.tp}, {"pp", s.pp}, {"dp", s.dp}};
}
/// @brief Reads a segment; `role` optional (default ""), tp/pp/dp default 1.
inline void from_json(const json& j, segment_spec& s) {
  s.name = detail::json_get<std::string>(j, "name", "segment");
  const std::string p = "segments." + s.name;
  s.role = detail::json_get_or<std::string>(j, "role", "", p);
  s.tp = detail::json_get_or<int>(j, "tp", 1, p);
  s.pp = detail::json_get_or<int>(j, "pp", 1, p);
  s.dp = detail::json_get_or<int>(j, "dp", 1, p);
}
/// @brief `{"segment", "stage", "replica", "tp_rank"}`.
inline void to_json(json& j, const rank_coord& c) {
  j = json{
      {"segment", c.segment}, {"stage", c.stage}, {"replica", c.replica}, {"tp_rank", c.tp_rank}};
}
inline void from_json(const json& j, rank_coord& c) {
  c.segment = detail::json_get<int>(j, "segment", "rank_coord");
  c.stage = detail::json_get<int>(j, "stage", "rank_coord");
  c.replica = detail::json_get<int>(j, "replica", "rank_coord");
  c.tp_rank = detail::json_get<int>(j, "tp_rank", "rank_coord");
}
/// @brief `{"gpus_per_node", "world_size", "segments": [...]}` (world_size and
/// each segment's "base" are informative; on input they are checked if present).
inline void to_json(json& j, const rank_layout& L) {
  json segs = json::array();
  for (int s = 0; s < L.num_segments(); ++s) {
    json js = L.segment(s);
    js["base"] = L.base(s);
    segs.push_back(std::move(js));
  }
  j = json{{"gpus_per_node", L.gpus_per_node()},
           {"world_size", L.world_size()},
           {"segments", std::move(segs)}};
}
inline void from_json(const json& j, rank_layout& L) {
  const json segs = detail::json_get<json>(j, "segments", "rank_layout");
  if (!segs.is_array()) fail(errc::parse_error, "rank_layout.segments", "expected an array");
  std::vector<segment_spec> v;
  for (const json& e : segs) v.push_back(e.get<segment_spec>());
  L = rank_layout(std::move(v), detail::json_get_or<int>(j, "gpus_per_node", 0, "rank_layout"));
  if (j.contains("world_size")) {
    const int w = detail::json_get<int>(j, "world_size", "rank_layout");
    require(w == L.world_size(), "rank_layout.world_size", "given ", w, " but the segments need ",
            L.world_size());
  }
  for (std::size_t i = 0; i < segs.size(); ++i)
    if (segs[i].contains("base")) {
      const int b = detail::json_get<int>(segs[i], "base", "rank_layout.segments");
      require(b == L.base(static_cast<int>(i)),
              cat("rank_layout.", L.segment(static_cast<int>(i)).name, ".base"), "given ", b,
              " but contiguous numbering gives ", L.base(static_cast<int>(i)));
    }
}

/// @brief Every group of every kind as JSON (`{"tp": [[..],..], "pp": .., "dp": .., "boundary": ..}`),
/// for tools and debugging.
[[nodiscard]] inline json groups_to_json(const rank_layout& L) {
  json j;
  for (group_kind k : {group_kind::tp, group_kind::pp, group_kind::dp, group_kind::boundary})
    j[std::string(to_string(k))] = L.groups(k);
  return j;
}

}  // namespace disttrain
