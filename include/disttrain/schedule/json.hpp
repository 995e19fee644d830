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
inline constexpr auto segment_info_fields =
    std::tuple{required_field("name", &segment_info::name),
               required_field("first_stage", &segment_info::first_stage),
               required_field("num_stages", &segment_info::num_stages),
               optional_field("dp", &segment_info::dp),
               optional_field("trainable", &segment_info::trainable),
               optional_field("chunks", &segment_info::chunks)};
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

// ---- segment_info, pipeline_schedule (schedule.hpp) ----
/// @brief JSON of a segment.
inline void to_json(json& j, const segment_info& g) {
  j = detail::fields_to_json(g, detail::segment_info_fields);
}
/// @brief Reads a segment (`dp` and `chunks` default to 1, `trainable` to true).
inline void from_json(const json& j, segment_info& g) {
  g = segment_info{};
  detail::read_fields(j, g, detail::segment_info_fields, "segment");
}

/// @brief JSON of a schedule:
/// `{"name", "num_stages", "num_chunks", "num_microbatches", "split_backward",
///   "segments": [...], "ranks": [{"segment","stage","replica","ops":[...]}]}`.
inline void to_json(json& j, const pipeline_schedule& s) {
  j = detail::fields_to_json(s, detail::pipeline_schedule_fields);
  j["segments"] = s.segments;
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
  for (std::size_t i = 0; i < segs.size(); ++i) {
    try {
      s.segments.push_back(segs[i].get<segment_info>());
    } catch (const error& e) {
      fail(errc::parse_error, cat("schedule.segments[", i, "].", e.where()), e.message());
    }
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
