#pragma once
/// @file calibration.hpp
/// @brief Fit the efficiency curve (efficiency.hpp) to measured (shape, time)
/// samples by least squares with Eigen; profiles as JSON; fit quality.
///
/// The model `time = (f (1 + k (tp-1)) + f_half) / (peak e_max)` is linear in
/// `u = (1/e_max, k/e_max, f_half/e_max)`:
///
///     peak * time = f * u1 + f (tp-1) * u2 + u3
///
/// so we solve a weighted linear least-squares problem that minimises the sum
/// of squared *relative* errors (rows divided by the measured time), with column
/// scaling and a column-pivoting QR. If a coefficient comes out negative (noise,
/// or no TP > 1 samples), it is fixed to 0 and the rest refitted. Then
/// `e_max = 1/u1`, `tp_penalty = u2/u1`, `flops_half = u3/u1`.
///
/// @snippet cost.cpp calibration

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/cost/json.hpp"

namespace disttrain {

/// @brief One measurement: an op of `flops` FLOPs per GPU at TP degree `tp` took `seconds`.
/// `kind` is a free label (e.g. "backbone.layer.fwd"), kept in profiles, unused by the fit.
struct profile_sample {
  double flops = 0;
  int tp = 1;
  double seconds = 0;
  std::string kind{};
};

/// @brief A set of measurements on one GPU type.
/// JSON: `{"gpu": "H800", "peak_flops": 9.89e14, "samples": [{"flops": .., "tp": .., "seconds": .., "kind": ..}]}`.
struct profile {
  std::string gpu{};
  double peak_flops = 0;
  std::vector<profile_sample> samples{};
};

/// @brief Fitted parameters and fit quality.
struct fit_result {
  efficiency_params params{};     ///< the fitted curve
  double r_squared = 0;           ///< 1 - SS_res / SS_tot on seconds
  double max_relative_error = 0;  ///< max |predicted - measured| / measured
  double rms_relative_error = 0;  ///< sqrt(mean(((predicted - measured) / measured)^2))
  std::size_t samples = 0;        ///< samples used
  bool tp_penalty_fitted =
      false;  ///< false when fixed to 0 (no TP > 1 samples, or it came out negative)
  bool flops_half_fitted = false;  ///< false when fixed to 0 (it came out negative)
};

/// @brief FLOPs of an `m x k` by `k x n` matrix product: `2 m n k`.
[[nodiscard]] constexpr double gemm_flops(double m, double n, double k) noexcept {
  return 2.0 * m * n * k;
}

/// @brief Fits `efficiency_params` to `samples` measured on a GPU of `peak_flops`.
///
/// Errors (`invalid_argument`): non-positive peak; a sample with non-positive
/// flops, seconds or tp (where = "samples[i].<field>"); fewer than 2 distinct
/// sizes; data implying a negative or > 1 efficiency ("samples": times that do
/// not grow with FLOPs, or a peak set too low).
[[nodiscard]] inline fit_result fit_efficiency(std::span<const profile_sample> samples,
                                               double peak_flops) {
  require_positive(peak_flops, "peak_flops");
  const std::size_t n = samples.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = samples[i];
    const std::string p = cat("samples[", i, "]");
    require(s.flops > 0 && std::isfinite(s.flops), detail::join_path(p, "flops"),
            "must be > 0, got ", s.flops);
    require(s.seconds > 0 && std::isfinite(s.seconds), detail::join_path(p, "seconds"),
            "must be > 0, got ", s.seconds);
    require_positive(s.tp, detail::join_path(p, "tp"));
  }
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < n && distinct < 2; ++i)
    if (i == 0 || samples[i].flops != samples[0].flops) ++distinct;
  require(distinct >= 2, "samples", "need samples of at least 2 distinct sizes, got ", n,
          " samples");

  // Columns: 0 = f, 1 = f (tp-1), 2 = 1. Active set: drop columns whose coefficient is negative.
  bool use[3] = {true, false, true};
  for (std::size_t i = 0; i < n; ++i) use[1] = use[1] || samples[i].tp > 1;
  double u[3] = {0, 0, 0};
  for (int attempt = 0; attempt < 3; ++attempt) {
    Eigen::Index cols = 0;
    int map[3];
    for (int c = 0; c < 3; ++c) map[c] = use[c] ? static_cast<int>(cols++) : -1;
    Eigen::MatrixXd a(static_cast<Eigen::Index>(n), cols);
    Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(n));
    for (std::size_t i = 0; i < n; ++i) {
      const auto r = static_cast<Eigen::Index>(i);
      const double w = 1.0 / (peak_flops * samples[i].seconds);
      const double f = samples[i].flops;
      if (map[0] >= 0) a(r, map[0]) = f * w;
      if (map[1] >= 0) a(r, map[1]) = f * static_cast<double>(samples[i].tp - 1) * w;
      if (map[2] >= 0) a(r, map[2]) = w;
    }
    Eigen::VectorXd scale = a.colwise().norm().transpose();
    for (Eigen::Index c = 0; c < cols; ++c) {
      if (!(scale(c) > 0)) scale(c) = 1;
      a.col(c) /= scale(c);
    }
    Eigen::VectorXd x = a.colPivHouseholderQr().solve(b);
    for (int c = 0; c < 3; ++c) u[c] = map[c] >= 0 ? x(map[c]) / scale(map[c]) : 0.0;
    bool changed = false;
    for (int c = 1; c < 3; ++c)
      if (use[c] && u[c] < 0) {
        use[c] = false;
        changed = true;
      }
    if (!changed) break;
  }
  for (int c = 1; c < 3; ++c)
    if (!use[c]) u[c] = 0;
  require(u[0] > 0 && std::isfinite(u[0]), "samples",
          "measured times do not grow with FLOPs (fitted 1/e_max = ", u[0], ")");
  fit_result r;
  r.samples = n;
  r.tp_penalty_fitted = use[1];
  r.flops_half_fitted = use[2];
  r.params.e_max = 1.0 / u[0];
  r.params.tp_penalty = u[1] / u[0];
  r.params.flops_half = u[2] / u[0];
  require(r.params.e_max <= 1.0, "samples", "fitted e_max ", r.params.e_max,
          " exceeds 1: measured times beat the peak; check peak_flops (", peak_flops, ")");

  double mean = 0;
  for (const auto& s : samples) mean += s.seconds;
  mean /= static_cast<double>(n);
  double ss_res = 0, ss_tot = 0, rel2 = 0;
  for (const auto& s : samples) {
    const double pred = compute_time(s.flops, s.tp, peak_flops, r.params);
    const double rel = std::abs(pred - s.seconds) / s.seconds;
    ss_res += (pred - s.seconds) * (pred - s.seconds);
    ss_tot += (s.seconds - mean) * (s.seconds - mean);
    rel2 += rel * rel;
    if (rel > r.max_relative_error) r.max_relative_error = rel;
  }
  r.r_squared = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  r.rms_relative_error = std::sqrt(rel2 / static_cast<double>(n));
  return r;
}

/// @brief Fits a profile (its `peak_flops` and `samples`).
[[nodiscard]] inline fit_result fit_efficiency(const profile& p) {
  return fit_efficiency(p.samples, p.peak_flops);
}

inline void to_json(json& j, const profile_sample& s) {
  j = json{{"flops", s.flops}, {"tp", s.tp}, {"seconds", s.seconds}};
  if (!s.kind.empty()) j["kind"] = s.kind;
}
inline void to_json(json& j, const profile& p) {
  json arr = json::array();
  for (const auto& s : p.samples) {
    json e;
    to_json(e, s);
    arr.push_back(std::move(e));
  }
  j = json{{"gpu", p.gpu}, {"peak_flops", p.peak_flops}, {"samples", arr}};
}
inline void to_json(json& j, const fit_result& r) {
  json e;
  to_json(e, r.params);
  j = json{{"params", e},
           {"r_squared", r.r_squared},
           {"max_relative_error", r.max_relative_error},
           {"rms_relative_error", r.rms_relative_error},
           {"samples", r.samples},
           {"tp_penalty_fitted", r.tp_penalty_fitted},
           {"flops_half_fitted", r.flops_half_fitted}};
}

namespace detail {
/// @brief Reads a profile at `path`; errors name `path.samples[i].<field>`.
[[nodiscard]] inline profile read_profile(const json& j, std::string_view path) {
  profile p;
  p.gpu = json_get_or<std::string>(j, "gpu", "", path);
  p.peak_flops = json_get<double>(j, "peak_flops", path);
  require_positive(p.peak_flops, join_path(path, "peak_flops"));
  const std::string sp = join_path(path, "samples");
  if (!j.contains("samples") || !j.at("samples").is_array())
    fail(errc::parse_error, sp, "required array is missing");
  const json& arr = j.at("samples");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string p_i = cat(sp, "[", i, "]");
    profile_sample s;
    s.flops = json_get<double>(arr[i], "flops", p_i);
    s.tp = json_get_or<int>(arr[i], "tp", 1, p_i);
    s.seconds = json_get<double>(arr[i], "seconds", p_i);
    s.kind = json_get_or<std::string>(arr[i], "kind", "", p_i);
    require(s.flops > 0, join_path(p_i, "flops"), "must be > 0, got ", s.flops);
    require(s.seconds > 0, join_path(p_i, "seconds"), "must be > 0, got ", s.seconds);
    require_positive(s.tp, join_path(p_i, "tp"));
    p.samples.push_back(std::move(s));
  }
  return p;
}
}  // namespace detail

inline void from_json(const json& j, profile& p) { p = detail::read_profile(j, "profile"); }

}  // namespace disttrain
