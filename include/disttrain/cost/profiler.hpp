#pragma once
/// @file profiler.hpp
/// @brief Collects (FLOPs, TP, seconds) samples around a host's own kernels, for
/// `fit_efficiency` (calibration.hpp).
///
/// The scope measures host wall-clock time (`std::chrono::steady_clock`): for
/// GPU work, synchronise (stream or event) before the scope ends, or measure
/// with CUDA events yourself and call `record`. Not thread-safe: use one
/// profiler per thread and concatenate `samples()`.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/calibration.hpp"

namespace disttrain {

/// @brief Records timing samples.
///
/// @snippet cost.cpp profiler
class profiler {
 public:
  /// @brief RAII timer: records `(flops, tp, elapsed)` when destroyed unless cancelled.
  class scope {
   public:
    scope(profiler& p, double flops, int tp, std::string kind)
        : p_(&p),
          flops_(flops),
          tp_(tp),
          kind_(std::move(kind)),
          start_(std::chrono::steady_clock::now()) {}
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    scope(scope&& o) noexcept
        : p_(std::exchange(o.p_, nullptr)),
          flops_(o.flops_),
          tp_(o.tp_),
          kind_(std::move(o.kind_)),
          start_(o.start_) {}
    scope& operator=(scope&&) = delete;
    ~scope() {
      if (p_ == nullptr) return;
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      try {
        p_->record(flops_, tp_, s > 0 ? s : 1e-12, kind_);
      } catch (...) {  // a destructor must not throw; bad inputs were checked in time()
      }
    }
    /// @brief Do not record this measurement (e.g. a warm-up run).
    void cancel() noexcept { p_ = nullptr; }

   private:
    profiler* p_;
    double flops_;
    int tp_;
    std::string kind_;
    std::chrono::steady_clock::time_point start_;
  };

  /// @brief Starts timing an op of `flops` FLOPs per GPU at TP degree `tp`.
  [[nodiscard]] scope time(double flops, int tp = 1, std::string_view kind = {}) {
    check(flops, tp);
    return scope(*this, flops, tp, std::string(kind));
  }

  /// @brief Adds a measurement taken elsewhere (e.g. with CUDA events).
  void record(double flops, int tp, double seconds, std::string_view kind = {}) {
    check(flops, tp);
    require(seconds > 0, "profiler.seconds", "must be > 0, got ", seconds);
    samples_.push_back(profile_sample{flops, tp, seconds, std::string(kind)});
  }

  [[nodiscard]] const std::vector<profile_sample>& samples() const noexcept { return samples_; }
  void clear() noexcept { samples_.clear(); }

  /// @brief The samples as a profile for GPU `gpu` of peak `peak_flops`.
  [[nodiscard]] profile to_profile(std::string gpu, double peak_flops) const {
    return profile{std::move(gpu), peak_flops, samples_};
  }

 private:
  static void check(double flops, int tp) {
    require(flops > 0, "profiler.flops", "must be > 0, got ", flops);
    require_positive(tp, "profiler.tp");
  }
  std::vector<profile_sample> samples_;
};

}  // namespace disttrain
