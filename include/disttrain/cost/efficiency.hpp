#pragma once
/// @file efficiency.hpp
/// @brief The fittable compute-efficiency curve: how fast a layer runs given its
/// FLOPs per GPU and its TP degree.
///
/// Model (one "layer op" = a layer's forward, or its backward part, on one GPU):
///
///     time(f, tp) = ( f * (1 + tp_penalty * (tp - 1)) + flops_half ) / (peak * e_max)
///     efficiency(f, tp) = f / (peak * time) = e_max * f / (f * (1 + k (tp-1)) + flops_half)
///
/// - `f` is the op's FLOPs on one GPU (already divided by tp);
/// - `e_max` is the efficiency large GEMMs reach (saturation);
/// - `flops_half` is the size at which a TP=1 op reaches half of `e_max`
///   (fixed launch / small-GEMM overheads expressed in FLOPs);
/// - `tp_penalty` is the extra slowdown per additional TP rank (thinner GEMMs,
///   sequence-parallel gathers that do not overlap perfectly).
/// The curve saturates in the GEMM size per GPU, falls with TP, and its time is
/// affine in f, so (a) expected times equal times of expected workloads and
/// (b) the parameters are fitted by *linear* least squares (calibration.hpp).

#include <string_view>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Parameters of the efficiency curve (see the file comment).
/// @snippet cost.cpp efficiency_params
struct efficiency_params {
  double e_max = 0.80;       ///< asymptotic fraction of peak, in (0, 1]
  double flops_half = 3e10;  ///< FLOPs per GPU at which a TP=1 op reaches e_max / 2
  double tp_penalty = 0.02;  ///< fractional slowdown per extra TP rank, >= 0

  void validate(std::string_view path) const {
    require(e_max > 0 && e_max <= 1, detail::join_path(path, "e_max"), "must be in (0, 1], got ",
            e_max);
    require_non_negative(flops_half, detail::join_path(path, "flops_half"));
    require_non_negative(tp_penalty, detail::join_path(path, "tp_penalty"));
  }
  friend bool operator==(const efficiency_params&, const efficiency_params&) = default;
};

/// @brief Seconds for an op of `flops_per_gpu` FLOPs at TP degree `tp` on a GPU of
/// `peak_flops` FLOP/s. Zero work takes zero time.
[[nodiscard]] constexpr double compute_time(double flops_per_gpu, int tp, double peak_flops,
                                            const efficiency_params& e) noexcept {
  if (!(flops_per_gpu > 0)) return 0.0;
  return (flops_per_gpu * (1.0 + e.tp_penalty * static_cast<double>(tp - 1)) + e.flops_half) /
         (peak_flops * e.e_max);
}

/// @brief Achieved fraction of peak for such an op.
[[nodiscard]] constexpr double efficiency(double flops_per_gpu, int tp,
                                          const efficiency_params& e) noexcept {
  if (!(flops_per_gpu > 0)) return 0.0;
  return e.e_max * flops_per_gpu /
         (flops_per_gpu * (1.0 + e.tp_penalty * static_cast<double>(tp - 1)) + e.flops_half);
}

}  // namespace disttrain
