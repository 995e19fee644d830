#pragma once
/// @file distribution.hpp
/// @brief A scalar distribution (constant, uniform integer, clamped log-normal,
/// histogram) with its own, fully specified sampling algorithms.
///
/// Used by `data_spec` for text lengths, image counts and image sides. Every draw
/// uses `splitmix64` and the transforms written below (no `std::` distribution),
/// so the same seed draws the same values with every standard library.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/rng.hpp"
#include "disttrain/core/visit_held.hpp"

namespace disttrain {

/// @brief Always `value`.
/// @snippet model.cpp constant_dist
struct constant_dist {
  double value = 0;
};

/// @brief An integer uniform on [min, max] inclusive.
/// @snippet model.cpp uniform_int_dist
struct uniform_int_dist {
  std::int64_t min = 0;
  std::int64_t max = 0;
};

/// @brief `clamp(median * exp(sigma * Z), min, max)` with Z standard normal
/// (drawn by Box–Muller from two `uniform01` values; the cosine branch).
/// @snippet model.cpp lognormal_dist
struct lognormal_dist {
  double median = 1;
  double sigma = 0;
  double min = 0;
  double max = 1e300;
};

/// @brief `values[i]` with probability `weights[i] / sum(weights)`
/// (inverse CDF over the cumulative weights; ties go to the lower index).
/// @snippet model.cpp histogram_dist
struct histogram_dist {
  std::vector<double> values{};
  std::vector<double> weights{};
};

/// @brief One of the scalar distributions above, validated, with `draw` and `mean`.
///
/// @snippet model.cpp distribution
class distribution {
 public:
  using variant_type =
      std::variant<constant_dist, uniform_int_dist, lognormal_dist, histogram_dist>;

  distribution() = default;
  distribution(constant_dist d) : v_(d) {}              // NOLINT implicit on purpose
  distribution(uniform_int_dist d) : v_(d) {}           // NOLINT
  distribution(lognormal_dist d) : v_(d) {}             // NOLINT
  distribution(histogram_dist d) : v_(std::move(d)) {}  // NOLINT

  /// @brief The underlying alternative.
  [[nodiscard]] const variant_type& get() const noexcept { return v_; }

  /// @brief Throws `invalid_argument` at `path` (e.g. "data.text_tokens.sigma")
  /// for negative spreads, empty ranges, empty or negative histograms.
  void validate(std::string_view path) const {
    visit_held(
        [&](const auto& d) {
          using T = std::decay_t<decltype(d)>;
          if constexpr (std::is_same_v<T, constant_dist>) {
            require(std::isfinite(d.value), detail::join_path(path, "value"),
                    "must be finite, got ", d.value);
          } else if constexpr (std::is_same_v<T, uniform_int_dist>) {
            require(d.min <= d.max, detail::join_path(path, "max"), "must be >= min (", d.min,
                    "), got ", d.max);
          } else if constexpr (std::is_same_v<T, lognormal_dist>) {
            require(d.median > 0 && std::isfinite(d.median), detail::join_path(path, "median"),
                    "must be > 0, got ", d.median);
            require(d.sigma >= 0 && std::isfinite(d.sigma), detail::join_path(path, "sigma"),
                    "must be >= 0, got ", d.sigma);
            require(d.min <= d.max, detail::join_path(path, "max"), "must be >= min (", d.min,
                    "), got ", d.max);
          } else {
            require(!d.values.empty(), detail::join_path(path, "values"), "histogram is empty");
            require(d.values.size() == d.weights.size(), detail::join_path(path, "weights"), "has ",
                    d.weights.size(), " entries, values has ", d.values.size());
            double total = 0;
            for (std::size_t i = 0; i < d.weights.size(); ++i) {
              require(d.weights[i] >= 0 && std::isfinite(d.weights[i]),
                      cat(detail::join_path(path, "weights"), "[", i, "]"), "must be >= 0, got ",
                      d.weights[i]);
              require(std::isfinite(d.values[i]),
                      cat(detail::join_path(path, "values"), "[", i, "]"), "must be finite, got ",
                      d.values[i]);
              total += d.weights[i];
            }
            require(total > 0, detail::join_path(path, "weights"), "sum to 0");
          }
        },
        v_);
  }

  /// @brief Draws one value (consumes a fixed number of `rng` outputs per kind:
  /// constant 0, uniform_int >= 1, lognormal 2, histogram 1).
  [[nodiscard]] double draw(splitmix64& rng) const {
    return visit_held(
        [&](const auto& d) -> double {
          using T = std::decay_t<decltype(d)>;
          if constexpr (std::is_same_v<T, constant_dist>) {
            return d.value;
          } else if constexpr (std::is_same_v<T, uniform_int_dist>) {
            const auto span = static_cast<std::uint64_t>(d.max - d.min) + 1;
            return static_cast<double>(d.min + static_cast<std::int64_t>(rng.below(span)));
          } else if constexpr (std::is_same_v<T, lognormal_dist>) {
            const double u1 = rng.uniform01();
            const double u2 = rng.uniform01();
            const double z = std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
            const double x = d.median * std::exp(d.sigma * z);
            return x < d.min ? d.min : (x > d.max ? d.max : x);
          } else {
            double total = 0;
            for (double w : d.weights) total += w;
            const double target = rng.uniform01() * total;
            double acc = 0;
            for (std::size_t i = 0; i < d.weights.size(); ++i) {
              acc += d.weights[i];
              if (target < acc) return d.values[i];
            }
            // Rounding can leave target == total: return the last value with weight.
            for (std::size_t i = d.weights.size(); i-- > 0;)
              if (d.weights[i] > 0) return d.values[i];
            return d.values.back();
          }
        },
        v_);
  }

  /// @brief The smallest value `draw` can return (for a log-normal without a
  /// positive `min`: 0, approached but never drawn). Call after `validate`.
  [[nodiscard]] double lowest() const { return bound(false); }

  /// @brief The largest value `draw` can return (1e300 for an unbounded
  /// log-normal). Call after `validate`.
  [[nodiscard]] double highest() const { return bound(true); }

  /// @brief Exact mean (the clamped log-normal's through the normal CDF).
  [[nodiscard]] double mean() const {
    return visit_held(
        [&](const auto& d) -> double {
          using T = std::decay_t<decltype(d)>;
          if constexpr (std::is_same_v<T, constant_dist>) {
            return d.value;
          } else if constexpr (std::is_same_v<T, uniform_int_dist>) {
            return (static_cast<double>(d.min) + static_cast<double>(d.max)) / 2.0;
          } else if constexpr (std::is_same_v<T, lognormal_dist>) {
            if (d.sigma == 0)
              return d.median < d.min ? d.min : (d.median > d.max ? d.max : d.median);
            const double mu = std::log(d.median), s = d.sigma;
            auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
            const double la = d.min > 0 ? (std::log(d.min) - mu) / s : -1e300;
            const double lb = d.max < 1e300 ? (std::log(d.max) - mu) / s : 1e300;
            const double body = std::exp(mu + s * s / 2) * (phi(lb - s) - phi(la - s));
            return body + d.min * phi(la) + (d.max < 1e300 ? d.max * (1 - phi(lb)) : 0.0);
          } else {
            double total = 0, acc = 0;
            for (std::size_t i = 0; i < d.values.size(); ++i) {
              total += d.weights[i];
              acc += d.weights[i] * d.values[i];
            }
            return acc / total;
          }
        },
        v_);
  }

 private:
  // Smallest / largest value of a histogram with a positive weight.
  // lowest() / highest(): the range `draw` can return.
  [[nodiscard]] double bound(bool largest) const {
    return visit_held(
        [&](const auto& d) -> double {
          using T = std::decay_t<decltype(d)>;
          if constexpr (std::is_same_v<T, constant_dist>) {
            return d.value;
          } else if constexpr (std::is_same_v<T, uniform_int_dist>) {
            return static_cast<double>(largest ? d.max : d.min);
          } else if constexpr (std::is_same_v<T, lognormal_dist>) {
            if (d.sigma == 0)
              return d.median < d.min ? d.min : (d.median > d.max ? d.max : d.median);
            if (largest) return d.max;
            return d.min > 0 ? d.min : (d.max < 0 ? d.max : 0.0);
          } else {
            return extreme(d, largest);
          }
        },
        v_);
  }

  static double extreme(const histogram_dist& d, bool largest) {
    bool any = false;
    double x = 0;
    for (std::size_t i = 0; i < d.values.size() && i < d.weights.size(); ++i) {
      if (!(d.weights[i] > 0)) continue;
      if (!any || (largest ? d.values[i] > x : d.values[i] < x)) x = d.values[i];
      any = true;
    }
    return x;
  }

  variant_type v_ = constant_dist{};
};

}  // namespace disttrain
