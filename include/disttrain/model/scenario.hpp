#pragma once
/// @file scenario.hpp
/// @brief A complete planning problem: model + cluster + data + global batch.
/// This is what `disttrain-plan` reads (`--preset NAME` or a JSON config).

#include <string>
#include <string_view>

#include "disttrain/core/check.hpp"
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

}  // namespace disttrain
