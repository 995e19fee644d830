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
/// - `stages`: its pipeline stages,
/// - `loop_s`: the transfers and stage times one microbatch's dependency cycle
///   passes through (= `path_s`, but for an interleaved module, below).
///
///     period    = max(max_i max_stage_i, sum_i loop_i / P)     (P = sum_i stages_i)
///     pipeline  = (m - 1) * period + sum_i path_i               (modules in pipeline order)
///     iteration = pipeline + max_i sync_i
///
/// Interleaved 1F1B (Megatron-LM's virtual pipeline, `v` model chunks per
/// device, Narayanan et al. 2021): the fill and drain pass through chunks of
/// 1/v of a stage, so a module of stage times t_j (max T at stage k, sum S)
/// and transfers H between its stages has
///
///     path = (S - T) / v + T + H + boundary      loop = S + v * H + boundary
///
/// which is 1F1B's `S + H + boundary` at v = 1; with p equal stages the
/// pipeline is m * T + (p - 1) * (T / v + h), the published bubble (p-1)/v.
/// Each microbatch crosses v times as many stage boundaries (the loop). A
/// stage's part e_j that does not split (a colocated encoder runs whole in
/// the first chunk, a generator in the last: `stage_chain::fixed_s`) is
/// passed whole: `(S - T)` becomes `sum_{j != k} (t_j - e_j) / v + e_j`, and
/// the period grows: chunk c of every device runs in one wave, so a round
/// of chunk ops costs up to `sum_c max_j t_{j,c}`, more than the slowest
/// device's `sum_c t_{j,c}` when a chunk holds a whole encoder; waves of
/// neighbouring devices overlap, so `(p - 1) / p` of that excess is charged
/// (a measured compromise, not a derivation). Against `simulate_plan` of the
/// same plan (expected batch): before this rule video-70b's planned layout
/// (4 chunks, colocated encoder and generator) simulated 1.24x its closed
/// form and the planner preferred it over plans that simulate 15% faster;
/// with it the presets' interleaved plans and baselines simulate 0.98-1.04x
/// their closed form, and small chains (test_interleave.cpp) 0.87-1.00x.
///
/// ZB-H1 (`plan_schedule::zb_h1`): each module also contributes `w_sum_s`
/// and `w_max_s`, the sum and the largest of its stages' W (weight-gradient)
/// times (0 under the other schedules), and
///
///     pipeline  = 1F1B's pipeline - f (sum_i w_sum_i - max_i w_max_i)
///     f         = 1 + (min(m, P) - 1) / (P - 1)          (2 once m >= P)
///
/// For P equal stages of F, B, W this is `simulate` of `make_zb_h1` exactly:
/// (m + P - 1)(F + B + W) less (min(m, P) + P - 2) W, i.e. ZB-H1's published
/// (P-1)(F+B-W) bubble once m >= P; with fewer microbatches than stages only
/// the last W is left outside the bubbles. For unequal stages it is an
/// estimate: against `make_zb_h1` on 4000 random chains (P = 2-41, m = 0.1 P
/// to 4 P, stage times +-15% or +-40%, W 20-50% of the backward, transfers
/// 0-10% of a stage), the simulated time is 0.864-1.005x of it (m < P:
/// 0.864-1.000x; 1F1B's closed form is an upper bound of `make_1f1b` on the
/// same kind of chains). Module terms with w = 0 give 1F1B's closed form
/// bit for bit. `combine_bound` takes f = 2, its largest value.
///
/// The period is 1F1B's steady-state time per microbatch: at least the slowest
/// stage, and at least path / P because F_0(i) -> ... -> B_0(i) -> F_0(i + P)
/// is a dependency cycle through every stage's F and B and every transfer that
/// spans P microbatch slots (it binds when transfers are not small next to
/// the stages).
///
/// All operations are monotone in every term, so `combine` applied to lower
/// bounds of the terms (with the true stage counts; of a ZB-H1 module, a
/// lower bound of `path_s - 2 w_sum_s` as `path_s` with no W terms, since
/// f <= 2) is a lower bound of the iteration time, and `combine_bound` (period = max stage only) is one for
/// any stage counts; the planner's pruning relies on this, also in floating
/// point (IEEE addition, division and multiplication by positive numbers and
/// max are monotone). A module left out of a bound must add a non-negative
/// `path_s - 2 w_sum_s`: every stage's W is at most its F + B (the weight
/// gradient never costs more than the rest of the stage).

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
  double loop_s = 0;   ///< see the file comment; `path_s` for non-interleaved modules
  double w_sum_s = 0;  ///< ZB-H1: sum of the stages' W times (else 0)
  double w_max_s = 0;  ///< ZB-H1: largest stage W time (else 0)
};

/// @brief Result of the closed form.
struct closed_form_time {
  double pipeline_s = 0;   ///< (m-1) * max + sum of paths
  double sync_s = 0;       ///< max over modules of the non-overlapped sync
  double iteration_s = 0;  ///< pipeline + sync
};

namespace closed_form_detail {
inline closed_form_time combine(int m, std::span<const module_terms> t, bool loop) noexcept {
  int stages = 0;
  for (const auto& x : t) stages += x.stages;
  // ZB-H1's credit factor (file comment); 2, its largest, for the bound.
  const double f = loop && stages > 1 ? 1.0 + static_cast<double>(std::min(m, stages) - 1) /
                                                  static_cast<double>(stages - 1)
                                      : 2.0;
  double mx = 0, path = 0, cycle = 0, sync = 0, w_max = 0;
  for (const auto& x : t) {
    mx = std::max(mx, x.max_stage_s);
    path += x.path_s - f * x.w_sum_s;
    cycle += x.loop_s;
    sync = std::max(sync, x.sync_s);
    w_max = std::max(w_max, x.w_max_s);
  }
  const double period = loop && stages > 0 ? std::max(mx, cycle / static_cast<double>(stages)) : mx;
  closed_form_time r;
  r.pipeline_s = static_cast<double>(m - 1) * period + (path + f * w_max);
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

/// @brief A module's stages in stage order: their times, and the transfer
/// after each (`hop_s[j]` follows stage j; the last entry is unused). Named
/// fields: two spans of seconds would be easy to swap.
struct stage_chain {
  std::span<const double> stage_s;
  std::span<const double> hop_s;
  /// Per stage, the part of its time that does not split into chunks (a
  /// colocated module: it runs whole in the device's first or last chunk);
  /// empty: none. Read by interleaved modules only.
  std::span<const double> fixed_s = {};
};

/// @brief The fill/drain path of one module: the stage times and the
/// transfers between consecutive stages of `c`, in stage order, then `boundary`.
[[nodiscard]] inline double accumulate_path(const stage_chain& c, double boundary) noexcept {
  double acc = 0;
  for (std::size_t j = 0; j < c.stage_s.size(); ++j) {
    acc += c.stage_s[j];
    if (j + 1 < c.stage_s.size()) acc += c.hop_s[j];
  }
  return acc + boundary;
}

/// @brief The fill/drain path and the loop of a module whose devices run `v`
/// interleaved chunks each (see the file comment); `v == 1` gives
/// `accumulate_path` for both, bit for bit.
[[nodiscard]] inline module_terms module_path(const stage_chain& c, double boundary,
                                              int v) noexcept {
  const std::span<const double> stage = c.stage_s, hop = c.hop_s;
  module_terms t;
  t.stages = static_cast<int>(stage.size());
  for (double x : stage) t.max_stage_s = std::max(t.max_stage_s, x);
  if (v <= 1) {
    t.path_s = t.loop_s = accumulate_path(c, boundary);
    return t;
  }
  // Chunked time l_j = t_j - e_j and whole (fixed) time e_j of every stage;
  // the slowest stage's (first of equals) are taken out.
  double sum = 0, fixed = 0, hops = 0, l_max = t.max_stage_s, e_max = 0;
  bool found = false;
  for (std::size_t j = 0; j < stage.size(); ++j) {
    const double e = c.fixed_s.empty() ? 0.0 : c.fixed_s[j];
    sum += stage[j] - e;
    fixed += e;
    if (!found && stage[j] == t.max_stage_s) {
      found = true;
      l_max = stage[j] - e;
      e_max = e;
    }
    if (j + 1 < stage.size()) hops += hop[j];
  }
  const double vv = static_cast<double>(v);
  t.path_s = ((((sum - l_max) / vv + (fixed - e_max)) + t.max_stage_s) + hops) + boundary;
  // The period: chunk c of every device runs in one wave, so a round costs up
  // to sum_c max_j t_{j,c}; the fixed parts sit in the first stage's first
  // chunk and the last stage's last chunk (the largest chunked part l stands
  // for the other chunks' v l / v). Waves of neighbouring devices overlap,
  // so only (P - 1) / P of the excess is charged (file comment).
  if (!c.fixed_s.empty()) {
    double l_all = 0;
    for (std::size_t j = 0; j < stage.size(); ++j) l_all = std::max(l_all, stage[j] - c.fixed_s[j]);
    const double lv = l_all / vv;
    const auto chunk_of = [&](std::size_t j) {
      return (stage[j] - c.fixed_s[j]) / vv + c.fixed_s[j];
    };
    const double extra =
        std::max(0.0, chunk_of(0) - lv) + std::max(0.0, chunk_of(stage.size() - 1) - lv);
    const double P = static_cast<double>(stage.size());
    t.max_stage_s = std::max(t.max_stage_s, l_all + extra * ((P - 1) / P));
  }
  sum += fixed;
  t.loop_s = (sum + vv * hops) + boundary;
  return t;
}

/// @brief The shape of an interleaved pipeline segment (named fields: five
/// adjacent ints would be easy to swap).
struct interleaved_segment {
  int pp = 1;            ///< devices (pipeline stages) of the segment
  int chunks = 1;        ///< model chunks per device (v)
  int microbatches = 1;  ///< microbatches of the iteration (m)
  int after = 0;         ///< chain stages after the segment
};

/// @brief Chunk-microbatches device `j` of interleaved segment `s` keeps in
/// flight: Megatron-LM's warm-up `2 (pp - j - 1) + (v - 1) pp` plus the one in
/// progress, plus `v` per chain stage after the segment, at most `m * v`.
[[nodiscard]] constexpr int interleaved_in_flight(const interleaved_segment& s, int j) noexcept {
  const long long f = 2LL * (s.pp - j - 1) + static_cast<long long>(s.chunks - 1) * s.pp + 1 +
                      static_cast<long long>(s.chunks) * s.after;
  return static_cast<int>(std::min(f, static_cast<long long>(s.microbatches) * s.chunks));
}

/// @brief Whole microbatches in `chunks` chunk-microbatches of `v` chunks each
/// (rounded up); `chunks` itself when `v <= 1`.
[[nodiscard]] constexpr int whole_microbatches(int chunks, int v) noexcept {
  return v <= 1 ? chunks : (chunks + v - 1) / v;
}

/// @brief Microbatches every stage of a `stages`-deep ZB-H1 pipeline keeps in
/// flight: min(stages, m) (1F1B's first-stage peak).
[[nodiscard]] constexpr int zb_h1_in_flight(int stages, int m) noexcept {
  return std::min(stages, m);
}

/// @brief Adds the stages' W times `w` (in stage order) to ZB-H1 terms `t`:
/// their sum and their largest, as `evaluate` and the planner sum them.
inline void add_weights(module_terms& t, std::span<const double> w) noexcept {
  for (double x : w) {
    t.w_sum_s += x;
    t.w_max_s = std::max(t.w_max_s, x);
  }
}

/// @brief Microbatches a stage at chain position `pos` of a `stages`-deep 1F1B
/// pipeline keeps in flight: min(stages - pos, m).
[[nodiscard]] constexpr int one_f_one_b_in_flight(int stages, int pos, int m) noexcept {
  return std::min(stages - pos, m);
}

}  // namespace disttrain::detail
