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
/// @snippet bind.cpp workload_cost_file

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
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
///
/// Cost index: by default one column per *model* module (column k = model
/// module k). `column_of[k]` instead sends model module k's seconds to column
/// `column_of[k]`, summing modules that share a column: the reorderer's modules
/// are a plan's pipeline segments, and a colocated module runs on its host
/// segment's replicas (`reorder_for_plan` in bind/ derives both from a plan).
/// `describe_batch` records the column count in `sample_meta::modules`, so
/// costs indexed over other modules than the reorder options are an error.
/// @snippet bind.cpp workload_cost
template <cost_model C>
class workload_cost {
 public:
  /// @param cost       the cost model (its `model()` gives the modules)
  /// @param tp         TP degree per module (empty: 1 for all); one entry per model module
  /// @param column_of  output column per model module (empty: column k = module k); the
  ///                   columns used must be exactly 0..c-1
  explicit workload_cost(const C& cost, std::vector<int> tp = {},
                         std::vector<std::size_t> column_of = {})
      : cost_(&cost), column_of_(std::move(column_of)) {
    const auto& mods = cost.model().modules;
    if (tp.empty()) tp.assign(mods.size(), 1);
    require(tp.size() == mods.size(), "workload_cost.tp", "has ", tp.size(),
            " entries, the model has ", mods.size(), " modules");
    if (column_of_.empty())
      for (std::size_t k = 0; k < mods.size(); ++k) column_of_.push_back(k);
    require(column_of_.size() == mods.size(), "workload_cost.column_of", "has ", column_of_.size(),
            " entries, the model has ", mods.size(), " modules");
    std::array<bool, max_reorder_modules> used{};
    for (std::size_t k = 0; k < mods.size(); ++k) {
      require(
          column_of_[k] < max_reorder_modules,
          [&] { return cat("workload_cost.column_of[", k, "]"); }, "column ", column_of_[k],
          " of module '", mods[k].name, "' exceeds the limit ", max_reorder_modules);
      used[column_of_[k]] = true;
      columns_ = std::max(columns_, column_of_[k] + 1);
    }
    for (std::size_t c = 0; c < columns_; ++c)
      require(used[c], "workload_cost.column_of", "no module maps to column ", c,
              " (columns must be 0..", columns_ - 1, ")");
    for (std::size_t k = 0; k < mods.size(); ++k) {
      require_positive(tp[k], cat("workload_cost.tp[", k, "]"));
      stage_config s;
      s.module = k;
      s.first_layer = 0;
      s.num_layers = mods[k].layers();
      s.tp = tp[k];
      configs_.push_back(s);
    }
  }

  /// @brief Seconds per column (default: per model module); `size() == columns()`.
  [[nodiscard]] module_costs operator()(const sample& s) const {
    const model_workload w = workload_of(cost_->model(), s);
    module_costs out;
    out.count = columns_;
    for (std::size_t k = 0; k < configs_.size(); ++k)
      out[column_of_[k]] += cost_->stage_time(configs_[k], w[k]).total_s();
    return out;
  }

  /// @brief The whole-module stage configuration used for module `k`.
  [[nodiscard]] const stage_config& config(std::size_t k) const { return configs_.at(k); }
  /// @brief Number of cost columns (the reorder modules they index).
  [[nodiscard]] std::size_t columns() const noexcept { return columns_; }
  /// @brief The column model module `k`'s seconds go to.
  [[nodiscard]] std::size_t column_of(std::size_t k) const { return column_of_.at(k); }

 private:
  const C* cost_;
  std::vector<std::size_t> column_of_;
  std::size_t columns_ = 0;
  std::vector<stage_config> configs_;
};

}  // namespace disttrain
