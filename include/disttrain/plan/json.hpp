#pragma once
/// @file json.hpp
/// @brief JSON input/output of the plan part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/plan.hpp` does not).

#include <tuple>

#include "disttrain/core/json.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/planner_options.hpp"

namespace disttrain {

// ---- parallel_plan.hpp ----
namespace detail {
// module_plan: every field but `name` (read first: it names the others'
// path), `recompute` (true/false or a mode name) and the informative `gpus`.
inline constexpr auto module_plan_fields =
    std::tuple{required_field("role", &module_plan::role),
               required_field("tp", &module_plan::tp),
               optional_field("pp", &module_plan::pp),
               required_field("dp", &module_plan::dp),
               required_field("layers", &module_plan::layers),
               optional_field("colocated", &module_plan::colocated),
               optional_field("virtual_stages", &module_plan::virtual_stages),
               optional_field("sequence_parallel", &module_plan::sequence_parallel)};
// parallel_plan: its scalars (`schedule` by name, `modules` and the
// informative `total_gpus` apart).
inline constexpr auto parallel_plan_fields =
    std::tuple{required_field("global_batch", &parallel_plan::global_batch),
               required_field("num_microbatches", &parallel_plan::num_microbatches),
               optional_field("gpus_per_node", &parallel_plan::gpus_per_node),
               optional_field("overlap_grad_reduce", &parallel_plan::overlap_grad_reduce),
               optional_field("overlap_param_gather", &parallel_plan::overlap_param_gather)};
}  // namespace detail

/// @brief `{"name","role","tp","pp","dp","layers","recompute","colocated","virtual_stages",
/// "sequence_parallel","gpus"}` ("gpus" is informative).
inline void to_json(json& j, const module_plan& m) {
  j = detail::fields_to_json(m, detail::module_plan_fields);
  j["name"] = m.name;
  j["recompute"] = m.selective_recompute ? json("selective") : json(m.recompute);
  j["gpus"] = m.gpus();
}
/// @brief Reads a module plan; `recompute` (true/false, or "off", "selective",
/// "full") and `colocated` default false, `pp` and `virtual_stages` 1,
/// `sequence_parallel` true;
/// `layers` is required. Errors name `plan.<module>.<field>`.
inline void from_json(const json& j, module_plan& m) {
  m = module_plan{};
  m.name = json_get<std::string>(j, "name", "plan.modules[]");
  const std::string p = "plan." + m.name;
  detail::read_fields(j, m, detail::module_plan_fields, p, {"name", "recompute", "gpus"});
  if (j.contains("recompute") && j.at("recompute").is_string()) {
    const auto mode = j.at("recompute").get<std::string>();
    if (mode != "off" && mode != "selective" && mode != "full")
      fail(errc::parse_error, p + ".recompute",
           "expected true, false, \"off\", \"selective\" or \"full\", got \"", mode, "\"");
    m.recompute = mode == "full";
    m.selective_recompute = mode == "selective";
  } else {
    m.recompute = json_get_or<bool>(j, "recompute", false, p);
  }
}

/// @brief `{"global_batch","num_microbatches","schedule","gpus_per_node",
/// "overlap_grad_reduce","overlap_param_gather","total_gpus","modules"}`.
inline void to_json(json& j, const parallel_plan& p) {
  j = detail::fields_to_json(p, detail::parallel_plan_fields);
  j["schedule"] = std::string(to_string(p.schedule));
  j["total_gpus"] = p.total_gpus();
  j["modules"] = p.modules;
}
/// @brief Reads and validates a plan (`schedule` defaults to "1f1b",
/// `gpus_per_node` to 8, the overlap switches to false). Structure errors are `invalid_argument`, missing or
/// mistyped fields `parse_error`, both naming the field.
inline void from_json(const json& j, parallel_plan& p) {
  p = parallel_plan{};
  detail::read_fields(j, p, detail::parallel_plan_fields, "plan",
                      {"schedule", "total_gpus", "modules"});
  const auto s = json_get_or<std::string>(j, "schedule", "1f1b", "plan");
  bool known = false;
  for (plan_schedule x : {plan_schedule::one_f_one_b, plan_schedule::gpipe, plan_schedule::zb_h1})
    if (s == to_string(x)) {
      p.schedule = x;
      known = true;
    }
  if (!known) detail::fail_unknown_name("plan.schedule", "schedule", s, {"1f1b", "gpipe", "zb_h1"});
  const json mods = json_get<json>(j, "modules", "plan");
  if (!mods.is_array()) fail(errc::parse_error, "plan.modules", "expected an array");
  p.modules.clear();
  for (const json& e : mods) p.modules.push_back(e.get<module_plan>());
  validate(p);
}

namespace detail {
// JSON descriptors (core/json.hpp, `json_field`): each field named once.
// planner_options: every field but `objective` (read by name) and
// `monolithic_splits` (a code-level switch, not read).
inline constexpr auto planner_options_fields = std::tuple{
    optional_field("tp_candidates", &planner_options::tp_candidates),
    optional_field("search_recompute", &planner_options::search_recompute),
    optional_field("search_selective_recompute", &planner_options::search_selective_recompute),
    optional_field("max_backbone_pp", &planner_options::max_backbone_pp),
    optional_field("min_backbone_pp", &planner_options::min_backbone_pp),
    optional_field("max_side_pp", &planner_options::max_side_pp),
    optional_field("include_monolithic", &planner_options::include_monolithic),
    optional_field("include_disaggregated", &planner_options::include_disaggregated),
    optional_field("include_mixed", &planner_options::include_mixed),
    optional_field("max_virtual_stages", &planner_options::max_virtual_stages),
    optional_field("overlap_grad_reduce", &planner_options::overlap_grad_reduce),
    optional_field("overlap_param_gather", &planner_options::overlap_param_gather),
    optional_field("sequence_parallel", &planner_options::sequence_parallel),
    optional_field("zero_bubble", &planner_options::zero_bubble),
    optional_field("within", &planner_options::within),
    optional_field("max_gpus", &planner_options::max_gpus),
    optional_field("max_frontier_plans", &planner_options::max_frontier_plans)};
inline constexpr auto stage_report_fields =
    std::tuple{optional_field("module", &stage_report::module),
               optional_field("stage", &stage_report::stage),
               optional_field("chain_stage", &stage_report::chain_stage),
               optional_field("first_layer", &stage_report::first_layer),
               optional_field("num_layers", &stage_report::num_layers),
               optional_field("tp", &stage_report::tp),
               optional_field("dp", &stage_report::dp),
               optional_field("replica_samples", &stage_report::replica_samples),
               optional_field("in_flight", &stage_report::in_flight),
               optional_field("virtual_stages", &stage_report::virtual_stages),
               optional_field("colocated", &stage_report::colocated),
               optional_field("time_s", &stage_report::time_s),
               optional_field("sync_s", &stage_report::sync_s),
               optional_field("sync_total_s", &stage_report::sync_total_s),
               optional_field("memory_bytes", &stage_report::memory_bytes),
               optional_field("memory", &stage_report::memory)};
inline constexpr auto plan_evaluation_fields =
    std::tuple{optional_field("iteration_time_s", &plan_evaluation::iteration_time_s),
               optional_field("pipeline_time_s", &plan_evaluation::pipeline_time_s),
               optional_field("sync_time_s", &plan_evaluation::sync_time_s),
               optional_field("bubble_fraction", &plan_evaluation::bubble_fraction),
               optional_field("mfu", &plan_evaluation::mfu),
               optional_field("model_flops", &plan_evaluation::model_flops),
               optional_field("samples_per_s", &plan_evaluation::samples_per_s),
               optional_field("gpus", &plan_evaluation::gpus),
               optional_field("num_stages", &plan_evaluation::num_stages),
               optional_field("max_memory_bytes", &plan_evaluation::max_memory_bytes),
               optional_field("memory_limit_bytes", &plan_evaluation::memory_limit_bytes),
               optional_field("stages", &plan_evaluation::stages)};
inline constexpr auto planner_stats_fields =
    std::tuple{optional_field("backbone_configs", &planner_stats::backbone_configs),
               optional_field("backbone_expanded", &planner_stats::backbone_expanded),
               optional_field("side_lists", &planner_stats::side_lists),
               optional_field("side_options", &planner_stats::side_options),
               optional_field("pairs_evaluated", &planner_stats::pairs_evaluated),
               optional_field("monolithic_configs", &planner_stats::monolithic_configs),
               optional_field("capped_splits", &planner_stats::capped_splits),
               optional_field("frontier_plans", &planner_stats::frontier_plans)};
// plan_result: its parts (the headline figures are copied from "evaluation").
inline constexpr auto plan_result_fields =
    std::tuple{optional_field("plan", &plan_result::plan),
               optional_field("evaluation", &plan_result::evaluation),
               optional_field("solve_ms", &plan_result::solve_ms),
               optional_field("stats", &plan_result::stats)};
}  // namespace detail

// ---- planner_options.hpp ----
/// @brief Reads planner options from a JSON object whose keys are the field
/// names above (`objective` as its name), over the defaults in `o`. Unknown
/// keys, fractions for integers and unknown objectives are `errc::parse_error`
/// naming `<path>.<key>`. `monolithic_splits` is not read (a code-level switch).
/// @snippet plan.cpp read_planner_options
[[nodiscard]] inline planner_options read_planner_options(const json& j,
                                                          std::string_view path = "planner",
                                                          planner_options o = {}) {
  if (j.is_null()) return o;
  detail::read_fields(j, o, detail::planner_options_fields, path, {"objective"});
  if (j.contains("objective")) {
    const auto name = json_get<std::string>(j, "objective", path);
    o.objective = parse_objective(name, detail::join_path(path, "objective"));
  }
  return o;
}

// ---- evaluate.hpp ----

inline void to_json(json& j, const stage_report& s) {
  j = detail::fields_to_json(s, detail::stage_report_fields);
}
inline void to_json(json& j, const plan_evaluation& e) {
  j = detail::fields_to_json(e, detail::plan_evaluation_fields);
}

// ---- planner.hpp ----
inline void to_json(json& j, const planner_stats& s) {
  j = detail::fields_to_json(s, detail::planner_stats_fields);
}

/// @brief `{"plan", "iteration_time_s", "mfu", "gpus", "bubble_fraction",
/// "max_memory_bytes", "samples_per_s", "solve_ms", "stats", "evaluation"}`: the
/// headline figures at the top level, the full evaluation (per stage) under
/// "evaluation". What `disttrain-plan --json` and the Python `plan()` return.
inline void to_json(json& j, const plan_result& r) {
  j = detail::fields_to_json(r, detail::plan_result_fields);
  for (const char* key :
       {"iteration_time_s", "mfu", "gpus", "bubble_fraction", "max_memory_bytes", "samples_per_s"})
    j[key] = j["evaluation"][key];
}

}  // namespace disttrain
