#pragma once
/// @file request.hpp
/// @brief What the planner is asked: the global batch and the expected work of
/// one sample (the data distribution, summarised). The model and the cluster
/// come with the cost model.

#include <cstddef>

#include "disttrain/core/check.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/scenario.hpp"
#include "disttrain/model/workload.hpp"

namespace disttrain {

/// @brief A planning request: `global_batch` samples per iteration whose
/// expected per-module work is `sample_workload` (costs are affine in the
/// workload, so a replica holding k samples costs the cost of k times it).
///
/// @snippet plan.cpp plan_request
struct plan_request {
  int global_batch = 0;            ///< samples per iteration
  model_workload sample_workload;  ///< expected workload of one sample
};

/// @brief Request for `global_batch` samples of `data` (expected workload over
/// `draws` fixed, seeded draws).
/// @snippet plan.cpp make_request
[[nodiscard]] inline plan_request make_request(const model_spec& model, const data_spec& data,
                                               int global_batch, std::size_t draws = 4096) {
  require_positive(global_batch, "global_batch_size");
  return plan_request{global_batch, expected_workload(model, data, draws)};
}

/// @brief Request of a scenario (its model, data and global batch).
[[nodiscard]] inline plan_request make_request(const scenario& sc, std::size_t draws = 4096) {
  return make_request(sc.model, sc.data, sc.global_batch_size, draws);
}

namespace detail {
/// @brief Checks a request against a model: positive batch, one workload per module.
inline void check_request(const plan_request& r, const model_spec& m) {
  require_positive(r.global_batch, "request.global_batch");
  require(r.sample_workload.size == m.modules.size(), "request.sample_workload", "has ",
          r.sample_workload.size, " modules, the model has ", m.modules.size());
  for (std::size_t i = 0; i < r.sample_workload.size; ++i) {
    const auto& w = r.sample_workload[i];
    require(w.sequences >= 0 && w.tokens >= 0 && w.tokens_sq >= 0,
            cat("request.sample_workload[", i, "]"), "must be non-negative");
  }
}
}  // namespace detail

}  // namespace disttrain
