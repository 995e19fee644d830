#pragma once
/// @file json.hpp
/// @brief JSON input/output of the bind part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/bind.hpp` does not).

#include <tuple>

#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/plan/json.hpp"

namespace disttrain {

namespace detail {
// JSON descriptors (core/json.hpp, `json_field`): each field named once.
inline constexpr auto iteration_time_stats_fields =
    std::tuple{optional_field("mean_s", &iteration_time_stats::mean_s),
               optional_field("median_s", &iteration_time_stats::median_s),
               optional_field("p90_s", &iteration_time_stats::p90_s),
               optional_field("min_s", &iteration_time_stats::min_s),
               optional_field("max_s", &iteration_time_stats::max_s),
               optional_field("seconds", &iteration_time_stats::seconds)};
inline constexpr auto heterogeneity_result_fields =
    std::tuple{optional_field("iterations", &heterogeneity_result::iterations),
               optional_field("seed", &heterogeneity_result::seed),
               optional_field("global_batch", &heterogeneity_result::global_batch),
               optional_field("baseline_arrival", &heterogeneity_result::baseline_arrival),
               optional_field("plan_arrival", &heterogeneity_result::plan_arrival),
               optional_field("plan_reordered", &heterogeneity_result::plan_reordered),
               optional_field("orchestration_gain", &heterogeneity_result::orchestration_gain),
               optional_field("reordering_gain", &heterogeneity_result::reordering_gain),
               optional_field("total_gain", &heterogeneity_result::total_gain)};
}  // namespace detail

// ---- heterogeneity.hpp ----
/// @brief JSON form of the statistics.
inline void to_json(json& j, const iteration_time_stats& s) {
  j = detail::fields_to_json(s, detail::iteration_time_stats_fields);
}

/// @brief JSON form of one case.
inline void to_json(json& j, const heterogeneity_case& c) {
  j = json(c.times);
  j["expected_batch_s"] = c.expected_s;
  j["mfu"] = c.mfu;
  j["gpus"] = c.gpus;
}

/// @brief JSON form: `{"iterations", "seed", "global_batch", "baseline_arrival",
/// "plan_arrival", "plan_reordered", "orchestration_gain", "reordering_gain",
/// "total_gain"}`.
inline void to_json(json& j, const heterogeneity_result& r) {
  j = detail::fields_to_json(r, detail::heterogeneity_result_fields);
}

}  // namespace disttrain
