#pragma once
/// @file json.hpp
/// @brief JSON input/output of the bind part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/bind.hpp` does not).

#include <tuple>

#include "disttrain/bind/data_plan.hpp"
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
               optional_field("baseline_reordered", &heterogeneity_result::baseline_reordered),
               optional_field("orchestration_gain", &heterogeneity_result::orchestration_gain),
               optional_field("reordering_gain", &heterogeneity_result::reordering_gain),
               optional_field("total_gain", &heterogeneity_result::total_gain),
               optional_field("orchestration_gain_arrival",
                              &heterogeneity_result::orchestration_gain_arrival)};
inline constexpr auto data_plan_stats_fields =
    std::tuple{optional_field("classes", &data_plan_stats::classes),
               optional_field("screened", &data_plan_stats::screened),
               optional_field("cut_early", &data_plan_stats::cut_early),
               optional_field("simulated", &data_plan_stats::simulated),
               optional_field("below_closed", &data_plan_stats::below_closed)};
inline constexpr auto data_plan_finalist_fields =
    std::tuple{optional_field("plan", &data_plan_finalist::plan),
               optional_field("closed_form_s", &data_plan_finalist::closed_form_s),
               optional_field("modelled_s", &data_plan_finalist::modelled_s),
               optional_field("simulated_s", &data_plan_finalist::simulated_s)};
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
/// "plan_arrival", "plan_reordered", "baseline_reordered", "orchestration_gain",
/// "reordering_gain", "total_gain", "orchestration_gain_arrival"}`.
inline void to_json(json& j, const heterogeneity_result& r) {
  j = detail::fields_to_json(r, detail::heterogeneity_result_fields);
}

// ---- data_plan.hpp ----
/// @brief JSON form of the counters.
inline void to_json(json& j, const data_plan_stats& s) {
  j = detail::fields_to_json(s, detail::data_plan_stats_fields);
}

/// @brief JSON form of a finalist.
inline void to_json(json& j, const data_plan_finalist& f) {
  j = detail::fields_to_json(f, detail::data_plan_finalist_fields);
}

/// @brief JSON form of the data objective's side of a `data_plan_result`
/// (the plan itself is `result`'s JSON): `{"objective", "batches",
/// "first_sample", "predicted", "predicted_mfu", "expected_optimum_s",
/// "stats", "finalists"}`.
inline void to_json(json& j, const data_plan_result& d) {
  j = json{{"objective", std::string(to_string(d.objective))},
           {"batches", d.batches},
           {"first_sample", d.first_sample},
           {"predicted", d.predicted},
           {"predicted_mfu", d.predicted_mfu},
           {"expected_optimum_s", d.expected_optimum_s},
           {"stats", d.stats},
           {"finalists", d.finalists}};
}

}  // namespace disttrain
