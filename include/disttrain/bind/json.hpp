#pragma once
/// @file json.hpp
/// @brief JSON input/output of the bind part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/bind.hpp` includes it.

#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/plan/json.hpp"

namespace disttrain {

// ---- heterogeneity.hpp ----
/// @brief JSON form of the statistics.
inline void to_json(json& j, const iteration_time_stats& s) {
  j = json{{"mean_s", s.mean_s}, {"median_s", s.median_s}, {"p90_s", s.p90_s},
           {"min_s", s.min_s},   {"max_s", s.max_s},       {"seconds", s.seconds}};
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
  j = json{{"iterations", r.iterations},
           {"seed", r.seed},
           {"global_batch", r.global_batch},
           {"baseline_arrival", r.baseline_arrival},
           {"plan_arrival", r.plan_arrival},
           {"plan_reordered", r.plan_reordered},
           {"orchestration_gain", r.orchestration_gain},
           {"reordering_gain", r.reordering_gain},
           {"total_gain", r.total_gain}};
}

}  // namespace disttrain
