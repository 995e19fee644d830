#pragma once
/// @file closed_form.hpp
/// @brief The 1F1B closed form shared by `evaluate` and the planner, written
/// once so that both compute bit-identical iteration times.
///
/// Every module contributes
/// - `max_stage_s`: its slowest stage's forward+backward time per microbatch,
/// - `path_s`: the sum of its stage times plus the point-to-point transfers on
///   the fill/drain path (between its stages, and the boundary to the backbone
///   for a side module), accumulated in stage order by `accumulate_path`,
/// - `sync_s`: the largest per-iteration DP gradient sync + optimizer step of
///   its stages (not overlapped with compute),
/// - `stages`: its pipeline stages.
///
///     period    = max(max_i max_stage_i, sum_i path_i / P)     (P = sum_i stages_i)
///     pipeline  = (m - 1) * period + sum_i path_i               (modules in pipeline order)
///     iteration = pipeline + max_i sync_i
///
/// The period is 1F1B's steady-state time per microbatch: at least the slowest
/// stage, and at least path / P because F_0(i) -> ... -> B_0(i) -> F_0(i + P)
/// is a dependency cycle through every stage's F and B and every transfer that
/// spans P microbatch slots (it binds when transfers are not small next to
/// the stages).
///
/// All operations are monotone in every term, so `combine` applied to lower
/// bounds of the terms (with the true stage counts) is a lower bound of the
/// iteration time, and `combine_bound` (period = max stage only) is one for
/// any stage counts; the planner's pruning relies on this, also in floating
/// point (IEEE addition, division and multiplication by positive numbers and
/// max are monotone).

#include <algorithm>
#include <cstddef>
#include <span>

namespace disttrain::detail {

/// @brief One module's terms of the closed form (see the file comment).
struct module_terms {
  double max_stage_s = 0;
  double path_s = 0;
  double sync_s = 0;
  int stages = 0;
};

/// @brief Result of the closed form.
struct closed_form_time {
  double pipeline_s = 0;   ///< (m-1) * max + sum of paths
  double sync_s = 0;       ///< max over modules of the non-overlapped sync
  double iteration_s = 0;  ///< pipeline + sync
};

namespace closed_form_detail {
inline closed_form_time combine(int m, std::span<const module_terms> t, bool loop) noexcept {
  double mx = 0, path = 0, sync = 0;
  int stages = 0;
  for (const auto& x : t) {
    mx = std::max(mx, x.max_stage_s);
    path += x.path_s;
    sync = std::max(sync, x.sync_s);
    stages += x.stages;
  }
  const double period = loop && stages > 0 ? std::max(mx, path / static_cast<double>(stages)) : mx;
  closed_form_time r;
  r.pipeline_s = static_cast<double>(m - 1) * period + path;
  r.sync_s = sync;
  r.iteration_s = r.pipeline_s + sync;
  return r;
}
}  // namespace closed_form_detail

/// @brief Combines module terms (in pipeline order) for `m` microbatches.
[[nodiscard]] inline closed_form_time combine(int m, std::span<const module_terms> t) noexcept {
  return closed_form_detail::combine(m, t, true);
}

/// @brief A lower bound of `combine` that holds whatever the stage counts
/// (period = the slowest stage only).
[[nodiscard]] inline closed_form_time combine_bound(int m,
                                                    std::span<const module_terms> t) noexcept {
  return closed_form_detail::combine(m, t, false);
}

/// @brief The fill/drain path of one module: stage times and the transfers
/// between consecutive stages, in stage order (`hop[j]` follows stage j; the
/// last entry is unused), then `boundary`.
[[nodiscard]] inline double accumulate_path(std::span<const double> stage,
                                            std::span<const double> hop, double boundary) noexcept {
  double acc = 0;
  for (std::size_t j = 0; j < stage.size(); ++j) {
    acc += stage[j];
    if (j + 1 < stage.size()) acc += hop[j];
  }
  return acc + boundary;
}

/// @brief Microbatches a stage at chain position `pos` of a `stages`-deep 1F1B
/// pipeline keeps in flight: min(stages - pos, m).
[[nodiscard]] constexpr int one_f_one_b_in_flight(int stages, int pos, int m) noexcept {
  return std::min(stages - pos, m);
}

}  // namespace disttrain::detail
