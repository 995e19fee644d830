#pragma once
/// @file workload_cost.hpp
/// @brief `workload_cost`: a `sample_cost` backed by the cost model. A
/// `disttrain::sample` (model/sample.hpp) is turned into per-module workloads
/// (`workload_of`: patch tokens per image, sequence length, latent tokens, with
/// their squares for attention) and priced by a `cost_model` as one whole
/// module replica (all layers, the module's TP degree): forward + backward +
/// weight-gradient seconds per module.
///
/// The per-sample time is the cost model's time for a microbatch of that one
/// sample. The analytic model's efficiency curve grows with size, so a
/// microbatch costs a little less than the sum of its samples; balancing only
/// needs the ranking and proportions to be right, and the objective's stage
/// times scale with them.
///
/// @code
/// disttrain::analytic_cost_model cm(disttrain::presets::mllm_7b(), disttrain::presets::h800_cluster(64));
/// disttrain::workload_cost cost(cm, {/*tp per module*/ 1, 4, 1});
/// std::vector<disttrain::sample_meta> meta;
/// disttrain::describe_batch(sampler.draw_batch(0, 1024), cost, meta);
/// @endcode

#include <array>
#include <cstddef>
#include <vector>

#include "disttrain/core/error.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/sample.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain {

static_assert(max_reorder_modules == max_modules,
              "reorder and model/ must agree on the module limit");

/// @brief Per-module seconds of one sample from a `cost_model`; a `sample_cost` for `disttrain::sample`.
/// Keeps a reference to the cost model (which must outlive it).
/// @code
/// disttrain::workload_cost cost(cm);                    // TP 1 everywhere
/// std::array<double, disttrain::max_reorder_modules> c = cost(sample);
/// @endcode
template <cost_model C>
class workload_cost {
 public:
  /// @param cost  the cost model (its `model()` gives the modules)
  /// @param tp    TP degree per module (empty: 1 for all); one entry per module
  explicit workload_cost(const C& cost, std::vector<int> tp = {}) : cost_(&cost) {
    const auto& mods = cost.model().modules;
    if (tp.empty()) tp.assign(mods.size(), 1);
    detail::require(tp.size() == mods.size(), "workload_cost.tp", "has ", tp.size(),
                    " entries, the model has ", mods.size(), " modules");
    for (std::size_t k = 0; k < mods.size(); ++k) {
      detail::require_positive(tp[k], detail::cat("workload_cost.tp[", k, "]"));
      stage_config s;
      s.module = k;
      s.first_layer = 0;
      s.num_layers = mods[k].layers();
      s.tp = tp[k];
      configs_.push_back(s);
    }
  }

  /// @brief Seconds per module (index = model module); unused entries are 0.
  [[nodiscard]] std::array<double, max_reorder_modules> operator()(const sample& s) const {
    const model_workload w = workload_of(cost_->model(), s);
    std::array<double, max_reorder_modules> out{};
    for (std::size_t k = 0; k < configs_.size(); ++k)
      out[k] = cost_->stage_time(configs_[k], w[k]).total_s();
    return out;
  }

  /// @brief The whole-module stage configuration used for module `k`.
  [[nodiscard]] const stage_config& config(std::size_t k) const { return configs_.at(k); }

 private:
  const C* cost_;
  std::vector<stage_config> configs_;
};

}  // namespace disttrain
