#pragma once
/// @file sample_meta.hpp
/// @brief Per-sample metadata the reorderer works on, and the `sample_cost`
/// concept that turns a host's samples into it.
///
/// A sample is processed by one replica of every module (encoder, backbone,
/// generator, ...). The reorderer only needs, per sample, a unique id and one
/// non-negative cost per module, in the units the schedule is scored in
/// (seconds, or anything proportional to them). Costs come from a host functor
/// that satisfies `sample_cost` (see `multimodal_cost` for the built-in one) or
/// from the cost model.
///
/// @snippet reorder.cpp sample_meta_file

#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Most modules a sample can pass through (encoders, backbone,
/// generators); equal to the model specs' `max_modules`, kept separate so the
/// reorderer does not depend on model/.
inline constexpr std::size_t max_reorder_modules = 8;

/// @brief One sample as the reorderer sees it: a unique id and a cost per module.
///
/// `cost[k]` belongs to module `k` of the `reorder_options::modules` list.
/// `modules` records how many modules the costs are indexed over
/// (`describe_batch` sets it to the size of the cost functor's vector; 0:
/// unknown). The reorderer rejects a sample whose `modules` is set and differs
/// from the options' module count (e.g. costs per *model* module fed to options
/// listing pipeline *segments*), and a non-zero cost past the options' modules.
///
/// `tokens[k]` is the sample's size in module k's memory unit (tokens, image
/// patches, latent tokens): only read for a module with a token limit
/// (`reorder_module::max_tokens`); the host fills it, e.g. after `describe_batch`.
/// @snippet reorder.cpp sample_meta
struct sample_meta {
  std::uint64_t id = 0;                            ///< unique within a global batch
  std::array<double, max_reorder_modules> cost{};  ///< non-negative cost per module
  std::uint32_t modules = 0;  ///< modules `cost` is indexed over (0: unknown, not checked)
  std::array<std::uint32_t, max_reorder_modules> tokens{};  ///< size per module (token limits)
  friend bool operator==(const sample_meta&, const sample_meta&) = default;
};

/// @brief A fixed-capacity cost vector of `size()` modules: what a
/// `sample_cost` whose module count is known at run time returns (e.g.
/// `workload_cost`). Allocation-free; a `module_cost_vector`.
/// @snippet reorder.cpp module_costs
struct module_costs {
  std::array<double, max_reorder_modules> value{};  ///< entries past `count` are 0
  std::size_t count = 0;                            ///< modules, <= max_reorder_modules
  [[nodiscard]] constexpr std::size_t size() const noexcept { return count; }
  [[nodiscard]] constexpr double operator[](std::size_t k) const noexcept { return value[k]; }
  [[nodiscard]] constexpr double& operator[](std::size_t k) noexcept { return value[k]; }
  friend bool operator==(const module_costs&, const module_costs&) = default;
};

/// @brief A per-module cost vector: `std::array<double, K>`, `std::vector<double>`,
/// or anything with `std::size(v)` and `v[i]` convertible to double.
/// @snippet reorder.cpp module_cost_vector
template <class V>
concept module_cost_vector = requires(const V& v, std::size_t i) {
  { std::size(v) } -> std::convertible_to<std::size_t>;
  { v[i] } -> std::convertible_to<double>;
};

/// @brief A host functor mapping a sample to its per-module costs.
///
/// `f(sample)` returns a `module_cost_vector` with at most `max_reorder_modules` entries.
/// @snippet reorder.cpp sample_cost
template <class F, class Sample>
concept sample_cost = std::regular_invocable<const F&, const Sample&> &&
    module_cost_vector<std::invoke_result_t<const F&, const Sample&>>;

/// @brief The default id of a sample: its `id` member if it has one, else its
/// position in the batch.
/// @snippet reorder.cpp default_sample_id
struct default_sample_id {
  template <class Sample>
  [[nodiscard]] std::uint64_t operator()(const Sample& s, std::size_t index) const {
    if constexpr (requires {
                    { s.id } -> std::convertible_to<std::uint64_t>;
                  }) {
      return static_cast<std::uint64_t>(s.id);
    } else {
      return static_cast<std::uint64_t>(index);
    }
  }
};

/// @brief Checks one sample's costs against `modules` configured modules:
/// finite and non-negative for the first `modules` entries (errors name
/// `batch[index].cost[k]`); zero past them and, when `s.modules` is set, equal
/// to `modules` (errors name `batch[index].cost`: the costs are indexed over
/// other modules than the options, e.g. model modules against segments).
/// Allocation-free unless it throws.
/// @snippet reorder.cpp validate_sample_costs
inline void validate_sample_costs(const sample_meta& s, std::size_t modules, std::size_t index) {
  if (s.modules != 0 && s.modules != modules) {
    fail(errc::invalid_argument, cat("batch[", index, "].cost"), "sample id ", s.id,
         ": costs are indexed over ", s.modules, " modules, reorder_options.modules lists ",
         modules,
         " (cost index k must be reorder_options.modules[k]; a plan's colocated module "
         "belongs to its host segment, see reorder_for_plan)");
  }
  for (std::size_t k = modules; k < max_reorder_modules; ++k) {
    if (s.cost[k] != 0.0) {
      fail(errc::invalid_argument, cat("batch[", index, "].cost[", k, "]"), "sample id ", s.id,
           ": cost ", s.cost[k], " for module ", k, ", but reorder_options.modules lists only ",
           modules, " (cost index k must be reorder_options.modules[k])");
    }
  }
  for (std::size_t k = 0; k < modules && k < max_reorder_modules; ++k) {
    const double c = s.cost[k];
    if (!std::isfinite(c) || c < 0.0) {
      fail(errc::invalid_argument, cat("batch[", index, "].cost[", k, "]"), "sample id ", s.id,
           ": cost must be finite and >= 0, got ", c);
    }
  }
}

/// @brief Fills `out` (reusing its capacity) with the metadata of `samples`:
/// `out[i].id = id(samples[i], i)`, `out[i].cost = cost(samples[i])`.
///
/// Throws `errc::invalid_argument` at `batch[i].cost[k]` for a negative or
/// non-finite cost, and at `batch[i].cost` when the functor returns more than
/// `max_reorder_modules` entries.
/// @snippet reorder.cpp describe_batch
template <std::ranges::input_range R, class Cost, class IdFn = default_sample_id>
requires sample_cost<Cost, std::ranges::range_value_t<R>>
void describe_batch(R&& samples, const Cost& cost, std::vector<sample_meta>& out, IdFn id = {}) {
  out.clear();
  std::size_t i = 0;
  for (const auto& s : samples) {
    const auto c = std::invoke(cost, s);
    const std::size_t k = static_cast<std::size_t>(std::size(c));
    if (k > max_reorder_modules) {
      fail(errc::invalid_argument, cat("batch[", i, "].cost"), "cost functor returned ", k,
           " module costs, limit ", max_reorder_modules);
    }
    sample_meta m;
    m.id = id(s, i);
    m.modules = static_cast<std::uint32_t>(k);
    for (std::size_t j = 0; j < k; ++j) m.cost[j] = static_cast<double>(c[j]);
    validate_sample_costs(m, k, i);
    out.push_back(m);
    ++i;
  }
}

}  // namespace disttrain
