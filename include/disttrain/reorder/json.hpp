#pragma once
/// @file json.hpp
/// @brief JSON input/output of the reorder part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/reorder.hpp` does not).

#include <tuple>

#include "disttrain/core/json.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/reorder/options.hpp"

namespace disttrain {

// ---- reorder_options (options.hpp) ----
NLOHMANN_JSON_SERIALIZE_ENUM(balance_method, {{balance_method::none, "none"},
                                              {balance_method::lpt, "lpt"},
                                              {balance_method::karmarkar_karp, "karmarkar_karp"},
                                              {balance_method::refined, "refined"},
                                              {balance_method::arrival, "arrival"}})
NLOHMANN_JSON_SERIALIZE_ENUM(order_method, {{order_method::identity, "identity"},
                                            {order_method::paper, "paper"},
                                            {order_method::search, "search"}})
NLOHMANN_JSON_SERIALIZE_ENUM(slot_policy, {{slot_policy::arrival, "arrival"},
                                           {slot_policy::size_sorted, "size_sorted"},
                                           {slot_policy::balanced, "balanced"},
                                           {slot_policy::best, "best"},
                                           {slot_policy::objective, "objective"}})

namespace detail {
// JSON descriptor (core/json.hpp, `json_field`): the scalars of the options
// (`modules` and `stages` are lists, read apart); enums by name.
inline constexpr auto reorder_options_fields =
    std::tuple{required_field("microbatches", &reorder_options::microbatches),
               optional_field("microbatch_group", &reorder_options::microbatch_group),
               optional_field("equal_count", &reorder_options::equal_count),
               optional_field("slots", &reorder_options::slots),
               optional_field("balance", &reorder_options::balance),
               optional_field("order", &reorder_options::order),
               optional_field("order_budget", &reorder_options::order_budget),
               optional_field("slot_search_budget", &reorder_options::slot_search_budget),
               optional_field("slot_search_below", &reorder_options::slot_search_below),
               optional_field("cut_search_budget", &reorder_options::cut_search_budget),
               optional_field("exact_search_budget", &reorder_options::exact_search_budget)};
// reorder_result and a sample's place: their scalars (`dp`, `imbalance` and a
// sample's `replica`/`offset` are arrays over the modules, written apart).
inline constexpr auto reorder_result_fields =
    std::tuple{required_field("modules", &reorder_result::modules),
               required_field("microbatches", &reorder_result::microbatches),
               optional_field("equal_count", &reorder_result::equal_count),
               optional_field("load", &reorder_result::load),
               optional_field("iteration_time", &reorder_result::iteration_time)};
inline constexpr auto sample_place_fields =
    std::tuple{required_field("id", &sample_place::id),
               required_field("microbatch", &sample_place::microbatch)};
}  // namespace detail

/// @brief JSON form of the options (enums as their names).
inline void to_json(json& j, const reorder_options& o) {
  j = detail::fields_to_json(o, detail::reorder_options_fields);
  json mods = json::array();
  for (const auto& m : o.modules) {
    json jm{{"name", m.name}, {"dp", m.dp}};
    if (m.max_samples != 0) jm["max_samples"] = m.max_samples;
    if (m.max_tokens != 0) jm["max_tokens"] = m.max_tokens;
    mods.push_back(std::move(jm));
  }
  j["modules"] = std::move(mods);
  json st = json::array();
  for (const auto& s : o.stages)
    st.push_back({{"module", s.module},
                  {"forward_scale", s.forward_scale},
                  {"backward_scale", s.backward_scale}});
  j["stages"] = std::move(st);
}

/// @brief Reads options (missing optional fields keep their defaults) and validates them.
inline void from_json(const json& j, reorder_options& o) {
  const std::string_view p = "reorder_options";
  o = reorder_options{};
  const json& mods = json_get<json>(j, "modules", p);
  require(mods.is_array(), "reorder_options.modules", "must be an array");
  for (std::size_t k = 0; k < mods.size(); ++k) {
    const std::string mp = cat("reorder_options.modules[", k, "]");
    check_keys(mods[k], {"name", "dp", "max_samples", "max_tokens"}, mp);
    o.modules.push_back({json_get_or<std::string>(mods[k], "name", cat("module", k), mp),
                         json_get<std::uint32_t>(mods[k], "dp", mp),
                         json_get_or<std::uint32_t>(mods[k], "max_samples", 0, mp),
                         json_get_or<std::uint64_t>(mods[k], "max_tokens", 0, mp)});
  }
  detail::read_fields(j, o, detail::reorder_options_fields, p, {"modules", "stages"});
  if (j.contains("stages")) {
    const json& st = j.at("stages");
    require(st.is_array(), "reorder_options.stages", "must be an array, got ", st.type_name());
    for (std::size_t s = 0; s < st.size(); ++s) {
      const std::string sp = cat("reorder_options.stages[", s, "]");
      o.stages.push_back({json_get<std::uint32_t>(st[s], "module", sp),
                          json_get_or<double>(st[s], "forward_scale", 1.0, sp),
                          json_get_or<double>(st[s], "backward_scale", 2.0, sp)});
    }
  }
  o.validate();
}

// ---- reorder_result (assignment.hpp) ----
/// @brief JSON form: header, per-sample placements, loads and figures.
inline void to_json(json& j, const reorder_result& r) {
  j = detail::fields_to_json(r, detail::reorder_result_fields);
  j["dp"] = std::vector<std::uint32_t>(r.dp.begin(), r.dp.begin() + r.modules);
  json s = json::array();
  for (const sample_place& p : r.samples) {
    json e = detail::fields_to_json(p, detail::sample_place_fields);
    json rep = json::array(), off = json::array();
    for (std::size_t k = 0; k < r.modules; ++k) {
      rep.push_back(p.module[k].replica);
      off.push_back(p.module[k].offset);
    }
    e["replica"] = std::move(rep);
    e["offset"] = std::move(off);
    s.push_back(std::move(e));
  }
  j["samples"] = std::move(s);
  j["imbalance"] = std::vector<double>(r.imbalance.begin(), r.imbalance.begin() + r.modules);
}

/// @brief Reads the JSON form, rebuilds the cells and validates the result.
inline void from_json(const json& j, reorder_result& r) {
  r = reorder_result{};
  detail::read_fields(j, r, detail::reorder_result_fields, "reorder_result",
                      {"dp", "samples", "imbalance"});
  require_in_range<std::uint32_t>(r.modules, 1, static_cast<std::uint32_t>(max_reorder_modules),
                                  "reorder_result.modules");
  const auto dp = json_get<std::vector<std::uint32_t>>(j, "dp", "reorder_result");
  require(dp.size() == r.modules, "reorder_result.dp", "has ", dp.size(),
          " entries, modules=", r.modules);
  std::copy(dp.begin(), dp.end(), r.dp.begin());
  const json& s = json_get<json>(j, "samples", "reorder_result");
  require(s.is_array(), "reorder_result.samples", "must be an array");
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::string path = cat("reorder_result.samples[", i, "]");
    sample_place& p = r.samples.emplace_back();
    detail::read_fields(s[i], p, detail::sample_place_fields, path, {"replica", "offset"});
    const auto rep = json_get<std::vector<std::uint32_t>>(s[i], "replica", path);
    const auto off = json_get<std::vector<std::uint32_t>>(s[i], "offset", path);
    require(rep.size() == r.modules && off.size() == r.modules, path,
            "replica/offset need one entry per module (", r.modules, ")");
    for (std::size_t k = 0; k < r.modules; ++k) p.module[k] = module_place{rep[k], off[k]};
  }
  const auto imb = json_get_or<std::vector<double>>(j, "imbalance", {}, "reorder_result");
  for (std::size_t k = 0; k < imb.size() && k < max_reorder_modules; ++k) r.imbalance[k] = imb[k];
  rebuild_cells(r);
  validate(r);
}

}  // namespace disttrain
