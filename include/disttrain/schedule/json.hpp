#pragma once
/// @file json.hpp
/// @brief JSON input/output of the schedule part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/schedule.hpp` does not).

#include <tuple>

#include "disttrain/core/json.hpp"
#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

// ---- schedule_op (op.hpp) ----
namespace detail {
// JSON descriptors (core/json.hpp, `json_field`): each field named once.
// schedule_op: all but `kind` (by its `to_string` name); unset ids (-1) are not written.
inline constexpr auto schedule_op_fields = std::tuple{
    required_field("stage", &schedule_op::stage), optional_field("chunk", &schedule_op::chunk),
    optional_field("mb", &schedule_op::microbatch), optional_field("peer", &schedule_op::peer),
    optional_field("bucket", &schedule_op::bucket)};
// A schedule's segment: the fields of its topology_module a schedule reads.
inline constexpr auto schedule_segment_fields =
    std::tuple{required_field("name", &topology_module::name),
               optional_field("role", &topology_module::role, read_module_role),
               optional_field("pp", &topology_module::pp),
               optional_field("dp", &topology_module::dp),
               optional_field("trainable", &topology_module::trainable),
               optional_field("chunks", &topology_module::chunks)};
inline constexpr auto schedule_rank_fields =
    std::tuple{required_field("segment", &schedule_rank::segment),
               required_field("stage", &schedule_rank::stage),
               optional_field("replica", &schedule_rank::replica)};
// pipeline_schedule: its scalars (`segments` and `ranks` are read apart, at their paths).
inline constexpr auto pipeline_schedule_fields =
    std::tuple{optional_field("name", &pipeline_schedule::name),
               required_field("num_stages", &pipeline_schedule::num_stages),
               optional_field("num_chunks", &pipeline_schedule::num_chunks),
               required_field("num_microbatches", &pipeline_schedule::num_microbatches),
               optional_field("split_backward", &pipeline_schedule::split_backward)};
}  // namespace detail

/// @brief JSON: `{"kind":"F","stage":1,"chunk":0,"mb":3}` plus `peer`/`bucket` when set.
inline void to_json(json& j, const schedule_op& o) {
  j = detail::fields_to_json(o, detail::schedule_op_fields);
  j["kind"] = std::string(to_string(o.kind));
  for (const char* id : {"mb", "peer", "bucket"})
    if (j[id] == -1) j.erase(id);
}

/// @brief Reads an op written by `to_json`; field errors name the field.
inline void from_json(const json& j, schedule_op& o) {
  o = schedule_op{};
  o.kind = parse_op_kind(json_get<std::string>(j, "kind"), "kind");
  detail::read_fields(j, o, detail::schedule_op_fields, "", {"kind"});
}

// ---- pipeline_schedule (schedule.hpp) ----
namespace detail {
// Reads segment `i` of a schedule (first stage `first`): the schedule fields
// of a topology_module (`role` defaults to backbone, `pp`, `dp` and `chunks`
// to 1, `trainable` to true). Older files wrote
// "num_stages" for `pp` and each segment's "first_stage": both are still read,
// the first stage checked against the segments before it.
inline topology_module schedule_segment_from_json(const json& j, int first, std::string_view path) {
  topology_module g;
  read_fields(j, g, schedule_segment_fields, path, {"num_stages", "first_stage"});
  if (const auto it = j.find("num_stages"); it != j.end()) {
    if (j.contains("pp"))
      fail(errc::parse_error, join_path(path, "num_stages"),
           "give the stages once: \"pp\" (\"num_stages\" is its old name)");
    g.pp = json_get<int>(j, "num_stages", path);
  }
  if (j.contains("first_stage")) {
    const int f = json_get<int>(j, "first_stage", path);
    if (f != first)
      fail(errc::parse_error, join_path(path, "first_stage"), "is ", f,
           ", the segments before it end at ", first, " (segments are consecutive)");
  }
  return g;
}
}  // namespace detail

/// @brief JSON of a schedule:
/// `{"name", "num_stages", "num_chunks", "num_microbatches", "split_backward",
///   "segments": [...], "ranks": [{"segment","stage","replica","ops":[...]}]}`.
inline void to_json(json& j, const pipeline_schedule& s) {
  j = detail::fields_to_json(s, detail::pipeline_schedule_fields);
  json segs = json::array();
  for (const topology_module& g : s.segments)
    segs.push_back(detail::fields_to_json(g, detail::schedule_segment_fields));
  j["segments"] = std::move(segs);
  json ranks = json::array();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    json jr = detail::fields_to_json(s.ranks[r], detail::schedule_rank_fields);
    jr["ops"] = r < s.ops.size() ? json(s.ops[r]) : json::array();
    ranks.push_back(std::move(jr));
  }
  j["ranks"] = std::move(ranks);
}

/// @brief Reads a schedule written by `to_json` and checks its shape
/// (`check_schedule_shape`); field errors are `parse_error` naming the path.
inline void from_json(const json& j, pipeline_schedule& s) {
  s = pipeline_schedule{};
  detail::read_fields(j, s, detail::pipeline_schedule_fields, "schedule", {"segments", "ranks"});
  const auto segs = json_get<json>(j, "segments", "schedule");
  if (!segs.is_array()) fail(errc::parse_error, "schedule.segments", "expected an array");
  int first = 0;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    s.segments.push_back(
        detail::schedule_segment_from_json(segs[i], first, cat("schedule.segments[", i, "]")));
    first += s.segments.back().pp;
    // A one-segment schedule may leave its chunks to `num_chunks`.
    if (segs.size() == 1 && !segs[i].contains("chunks")) s.segments.back().chunks = s.num_chunks;
  }
  const auto ranks = json_get<json>(j, "ranks", "schedule");
  if (!ranks.is_array()) fail(errc::parse_error, "schedule.ranks", "expected an array");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string path = cat("schedule.ranks[", r, "]");
    const auto& jr = ranks[r];
    detail::read_fields(jr, s.ranks.emplace_back(), detail::schedule_rank_fields, path, {"ops"});
    const auto jops = json_get<json>(jr, "ops", path);
    if (!jops.is_array()) fail(errc::parse_error, path + ".ops", "expected an array");
    std::vector<schedule_op> ops;
    ops.reserve(jops.size());
    for (std::size_t i = 0; i < jops.size(); ++i) {
      try {
        ops.push_back(jops[i].get<schedule_op>());
      } catch (const error& e) {
        fail(errc::parse_error, cat(path, ".ops[", i, "].", e.where()), e.message());
      }
    }
    s.ops.push_back(std::move(ops));
  }
  check_schedule_shape(s);
}

}  // namespace disttrain
