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
/// @brief JSON: `{"kind":"F","stage":1,"chunk":0,"mb":3}` plus `peer`/`bucket` when set.
inline void to_json(json& j, const schedule_op& o) {
  j = json{{"kind", std::string(to_string(o.kind))}, {"stage", o.stage}, {"chunk", o.chunk}};
  if (o.microbatch >= 0) j["mb"] = o.microbatch;
  if (o.peer >= 0) j["peer"] = o.peer;
  if (o.bucket >= 0) j["bucket"] = o.bucket;
}

/// @brief Reads an op written by `to_json`; field errors name the field.
inline void from_json(const json& j, schedule_op& o) {
  const auto kind = detail::json_get<std::string>(j, "kind");
  o.kind = parse_op_kind(kind, "kind");
  o.stage = detail::json_get<int>(j, "stage");
  o.chunk = detail::json_get_or<int>(j, "chunk", 0);
  o.microbatch = detail::json_get_or<int>(j, "mb", -1);
  o.peer = detail::json_get_or<int>(j, "peer", -1);
  o.bucket = detail::json_get_or<int>(j, "bucket", -1);
}

// ---- segment_info, pipeline_schedule (schedule.hpp) ----
namespace detail {
// JSON descriptor (core/json.hpp, `json_field`): each field named once.
inline constexpr auto segment_info_fields = std::tuple{
    required_field("name", &segment_info::name),
    required_field("first_stage", &segment_info::first_stage),
    required_field("num_stages", &segment_info::num_stages),
    optional_field("dp", &segment_info::dp), optional_field("trainable", &segment_info::trainable)};
}  // namespace detail
/// @brief JSON of a segment.
inline void to_json(json& j, const segment_info& g) {
  j = detail::fields_to_json(g, detail::segment_info_fields);
}
/// @brief Reads a segment (`dp` defaults to 1, `trainable` to true).
inline void from_json(const json& j, segment_info& g) {
  g = segment_info{};
  detail::read_fields(j, g, detail::segment_info_fields, "segment");
}

/// @brief JSON of a schedule:
/// `{"name", "num_stages", "num_chunks", "num_microbatches", "split_backward",
///   "segments": [...], "ranks": [{"segment","stage","replica","ops":[...]}]}`.
inline void to_json(json& j, const pipeline_schedule& s) {
  j = json{{"name", s.name},
           {"num_stages", s.num_stages},
           {"num_chunks", s.num_chunks},
           {"num_microbatches", s.num_microbatches},
           {"split_backward", s.split_backward},
           {"segments", s.segments}};
  json ranks = json::array();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    json jr{{"segment", s.ranks[r].segment},
            {"stage", s.ranks[r].stage},
            {"replica", s.ranks[r].replica}};
    jr["ops"] = r < s.ops.size() ? json(s.ops[r]) : json::array();
    ranks.push_back(std::move(jr));
  }
  j["ranks"] = std::move(ranks);
}

/// @brief Reads a schedule written by `to_json` and checks its shape
/// (`check_schedule_shape`); field errors are `parse_error` naming the path.
inline void from_json(const json& j, pipeline_schedule& s) {
  s.name = detail::json_get_or<std::string>(j, "name", "", "schedule");
  s.num_stages = detail::json_get<int>(j, "num_stages", "schedule");
  s.num_chunks = detail::json_get_or<int>(j, "num_chunks", 1, "schedule");
  s.num_microbatches = detail::json_get<int>(j, "num_microbatches", "schedule");
  s.split_backward = detail::json_get_or<bool>(j, "split_backward", false, "schedule");
  const auto segs = detail::json_get<json>(j, "segments", "schedule");
  if (!segs.is_array()) fail(errc::parse_error, "schedule.segments", "expected an array");
  s.segments.clear();
  for (std::size_t i = 0; i < segs.size(); ++i) {
    try {
      s.segments.push_back(segs[i].get<segment_info>());
    } catch (const error& e) {
      fail(errc::parse_error, cat("schedule.segments[", i, "].", e.where()), e.message());
    }
  }
  const auto ranks = detail::json_get<json>(j, "ranks", "schedule");
  if (!ranks.is_array()) fail(errc::parse_error, "schedule.ranks", "expected an array");
  s.ranks.clear();
  s.ops.clear();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string path = cat("schedule.ranks[", r, "]");
    const auto& jr = ranks[r];
    s.ranks.push_back({detail::json_get<int>(jr, "segment", path),
                       detail::json_get<int>(jr, "stage", path),
                       detail::json_get_or<int>(jr, "replica", 0, path)});
    const auto jops = detail::json_get<json>(jr, "ops", path);
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
