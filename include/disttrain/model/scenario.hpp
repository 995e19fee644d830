#pragma once
/// @file scenario.hpp
/// @brief A complete planning problem: model + cluster + data + global batch.
/// This is what `disttrain-plan` reads (`--preset NAME` or a JSON config).

#include <string>
#include <string_view>

#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/model_spec.hpp"

namespace disttrain {

/// @brief Model, cluster, data distribution and global batch size (samples per iteration).
///
/// JSON: `{"name": ..., "description": ..., "model": {...}, "cluster": {...},
/// "data": {...}, "global_batch_size": 1024}`.
///
/// @snippet model.cpp scenario
struct scenario {
  std::string name{};
  std::string description{};
  model_spec model{};
  cluster_spec cluster{};
  data_spec data{};
  int global_batch_size = 0;

  void validate(std::string_view path = "") const {
    using detail::join_path;
    model.validate(join_path(path, "model"));
    cluster.validate(join_path(path, "cluster"));
    data.validate(join_path(path, "data"));
    require_positive(global_batch_size, join_path(path, "global_batch_size"));
  }
};

inline void to_json(json& j, const scenario& s) {
  json m, c, d;
  to_json(m, s.model);
  to_json(c, s.cluster);
  to_json(d, s.data);
  j = json{{"name", s.name}, {"description", s.description},
           {"model", m},     {"cluster", c},
           {"data", d},      {"global_batch_size", s.global_batch_size}};
}

namespace detail {
[[nodiscard]] inline const json& json_child(const json& j, std::string_view key,
                                            std::string_view path) {
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  auto it = j.find(std::string(key));
  if (it == j.end()) fail(errc::parse_error, join_path(path, key), "required field is missing");
  return *it;
}
/// @brief Reads a scenario at `path` (fields are `path.model...`, `path.cluster...`).
[[nodiscard]] inline scenario read_scenario(const json& j, std::string_view path) {
  check_keys(j, {"name", "description", "model", "cluster", "data", "global_batch_size"}, path);
  scenario s;
  s.name = json_get_or<std::string>(j, "name", "", path);
  s.description = json_get_or<std::string>(j, "description", "", path);
  s.model = read_model_spec(json_child(j, "model", path), join_path(path, "model"));
  s.cluster = read_cluster_spec(json_child(j, "cluster", path), join_path(path, "cluster"));
  s.data = read_data_spec(json_child(j, "data", path), join_path(path, "data"));
  s.global_batch_size = json_get<int>(j, "global_batch_size", path);
  s.validate(path);
  return s;
}
}  // namespace detail

inline void from_json(const json& j, scenario& s) { s = detail::read_scenario(j, ""); }

}  // namespace disttrain
