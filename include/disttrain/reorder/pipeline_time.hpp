#pragma once
/// @file pipeline_time.hpp
/// @brief Scoring microbatch orders: the `microbatch_times` view, the
/// `order_objective` concept, and `pipeline_time`, an exact evaluator of a
/// synchronous pipeline's iteration time (1F1B or GPipe) for per-microbatch,
/// per-stage forward and backward durations.
///
/// Model: stage `s` runs its ops in its schedule's fixed order; forward
/// F(j, s) starts when F(j, s-1) has finished (plus `p2p_latency`), backward
/// B(j, s) when B(j, s+1) has finished (plus latency), and B(j, S-1) after
/// F(j, S-1). Iteration time = the last op's finish. The ops are visited in one
/// topological order computed once per (microbatches, stages, schedule) and
/// cached, so an evaluation is O(m * S): one max and one add per op.
///
/// @snippet reorder.cpp pipeline_time_file

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Forward and backward durations of each microbatch (in execution
/// order) on each pipeline stage; row-major `[microbatch * stages + stage]`.
/// A non-owning view.
/// @snippet reorder.cpp microbatch_times
struct microbatch_times {
  std::size_t microbatches = 0;      ///< m
  std::size_t stages = 0;            ///< S
  std::span<const double> forward;   ///< m * S forward durations
  std::span<const double> backward;  ///< m * S backward durations (B and W together)

  [[nodiscard]] double forward_at(std::size_t mb, std::size_t stage) const {
    return forward[mb * stages + stage];
  }
  [[nodiscard]] double backward_at(std::size_t mb, std::size_t stage) const {
    return backward[mb * stages + stage];
  }

  /// @brief Throws `errc::invalid_argument` at `microbatch_times` for empty shapes,
  /// size mismatches and negative or non-finite durations.
  void validate() const {
    require(microbatches > 0, "microbatch_times.microbatches", "must be > 0, got ", microbatches);
    require(stages > 0, "microbatch_times.stages", "must be > 0, got ", stages);
    const std::size_t need = microbatches * stages;
    require(forward.size() == need, "microbatch_times.forward", "has ", forward.size(),
            " entries, need ", need);
    require(backward.size() == need, "microbatch_times.backward", "has ", backward.size(),
            " entries, need ", need);
    for (std::size_t i = 0; i < need; ++i) {
      if (!(std::isfinite(forward[i]) && forward[i] >= 0.0))
        fail(errc::invalid_argument, cat("microbatch_times.forward[", i, "]"),
             "must be finite and >= 0, got ", forward[i]);
      if (!(std::isfinite(backward[i]) && backward[i] >= 0.0))
        fail(errc::invalid_argument, cat("microbatch_times.backward[", i, "]"),
             "must be finite and >= 0, got ", backward[i]);
    }
  }
};

/// @brief Scores a microbatch order: `o(times)` returns the iteration time of
/// running the microbatches in the row order of `times`. Lower is better.
/// May keep mutable scratch state (called through a non-const reference).
/// @snippet reorder.cpp order_objective
template <class O>
concept order_objective = requires(O& o, const microbatch_times& t) {
  { o(t) } -> std::convertible_to<double>;
};

/// @brief Pipeline schedule evaluated by `pipeline_time`.
enum class pipeline_kind : std::uint8_t {
  one_f_one_b,  ///< 1F1B: stage s warms up with min(S-1-s, m) forwards, then alternates
  gpipe,        ///< all forwards, then all backwards
};

/// @brief Name of a schedule ("1f1b", "gpipe").
constexpr std::string_view to_string(pipeline_kind s) noexcept {
  return s == pipeline_kind::gpipe ? "gpipe" : "1f1b";
}

/// @brief Exact iteration time of a synchronous pipeline; an `order_objective`.
///
/// Reuses its buffers: after the first call for a shape, calls for the same or
/// smaller shapes do not allocate. Not thread-safe (one per thread).
/// @snippet reorder.cpp pipeline_time
class pipeline_time {
 public:
  explicit pipeline_time(pipeline_kind schedule = pipeline_kind::one_f_one_b,
                         double p2p_latency = 0.0)
      : schedule_(schedule), latency_(p2p_latency) {
    if (!(std::isfinite(p2p_latency) && p2p_latency >= 0.0))
      fail(errc::invalid_argument, "pipeline_time.p2p_latency", "must be finite and >= 0, got ",
           p2p_latency);
  }

  /// @brief Schedule this evaluator models.
  [[nodiscard]] pipeline_kind schedule() const noexcept { return schedule_; }

  /// @brief Iteration time of running the rows of `t` in order.
  double operator()(const microbatch_times& t) {
    t.validate();
    const std::size_t m = t.microbatches, S = t.stages;
    if (m != m_ || S != s_) build(m, S);
    std::fill(free_.begin(), free_.end(), 0.0);
    const std::size_t per_stage = 2 * m;
    double end = 0.0;
    for (std::uint32_t code : topo_) {
      const std::size_t s = code / per_stage;
      const std::uint32_t op = ops_[code];
      const std::size_t j = op >> 1;
      const std::size_t cell = j * S + s;
      double ready;
      double fin;
      if ((op & 1u) == 0u) {  // forward
        ready = s > 0 ? ffin_[cell - 1] + latency_ : 0.0;
        fin = std::max(free_[s], ready) + t.forward[cell];
        ffin_[cell] = fin;
      } else {
        ready = s + 1 < S ? bfin_[cell + 1] + latency_ : ffin_[cell];
        fin = std::max(free_[s], ready) + t.backward[cell];
        bfin_[cell] = fin;
      }
      free_[s] = fin;
      end = std::max(end, fin);
    }
    return end;
  }

 private:
  // Per stage, its op sequence: op = (microbatch << 1) | is_backward.
  void build(std::size_t m, std::size_t S) {
    m_ = m;
    s_ = S;
    const std::size_t per_stage = 2 * m;
    ops_.assign(S * per_stage, 0);
    for (std::size_t s = 0; s < S; ++s) {
      std::uint32_t* o = ops_.data() + s * per_stage;
      std::size_t w = 0;
      const auto F = [&](std::size_t j) { o[w++] = static_cast<std::uint32_t>(j << 1); };
      const auto B = [&](std::size_t j) { o[w++] = static_cast<std::uint32_t>((j << 1) | 1u); };
      if (schedule_ == pipeline_kind::gpipe) {
        for (std::size_t j = 0; j < m; ++j) F(j);
        for (std::size_t j = 0; j < m; ++j) B(j);
      } else {
        const std::size_t warm = std::min(S - 1 - s, m);
        for (std::size_t j = 0; j < warm; ++j) F(j);
        for (std::size_t i = 0; i + warm < m; ++i) {
          F(warm + i);
          B(i);
        }
        for (std::size_t j = m - warm; j < m; ++j) B(j);
      }
    }
    // One topological order, independent of durations: repeatedly run every
    // stage as far as its dependencies allow.
    ffin_.assign(m * S, 0.0);
    bfin_.assign(m * S, 0.0);
    free_.assign(S, 0.0);
    std::vector<char> fdone(m * S, 0), bdone(m * S, 0);
    std::vector<std::size_t> ptr(S, 0);
    topo_.clear();
    topo_.reserve(S * per_stage);
    while (topo_.size() < S * per_stage) {
      bool progress = false;
      for (std::size_t s = 0; s < S; ++s) {
        while (ptr[s] < per_stage) {
          const std::uint32_t op = ops_[s * per_stage + ptr[s]];
          const std::size_t j = op >> 1;
          const std::size_t cell = j * S + s;
          const bool bwd = (op & 1u) != 0u;
          const bool ready = bwd ? (s + 1 < S ? bdone[cell + 1] != 0 : fdone[cell] != 0)
                                 : (s == 0 || fdone[cell - 1] != 0);
          if (!ready) break;
          (bwd ? bdone : fdone)[cell] = 1;
          topo_.push_back(static_cast<std::uint32_t>(s * per_stage + ptr[s]));
          ++ptr[s];
          progress = true;
        }
      }
      ensure(progress, "pipeline_time", "schedule deadlocks for m=", m, " S=", S);
    }
  }

  pipeline_kind schedule_;
  double latency_;
  std::size_t m_ = 0, s_ = 0;
  std::vector<std::uint32_t> ops_, topo_;
  std::vector<double> ffin_, bfin_, free_;
};

}  // namespace disttrain
