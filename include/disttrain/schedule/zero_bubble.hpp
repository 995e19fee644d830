#pragma once
/// @file zero_bubble.hpp
/// @brief ZB-H1: a zero-bubble schedule with 1F1B's peak activation memory.
///
/// The backward pass is split into B (activation gradient, on the critical
/// path between stages) and W (weight gradient, needed only by the optimizer
/// step). Rank s runs 1F1B's order of F and B (w = min(p-s-1, m) warm-up
/// forwards, then (F, B) pairs, then the cool-down Bs) and defers W: in the
/// steady phase the i-th pair (F, B_i) is followed by W_{i-s}; in the
/// cool-down each B is followed by the oldest pending W, and the remaining Ws
/// close the iteration. At most p microbatches hold activations (F done, W
/// not yet) on every rank: 1F1B's peak (its first stage), so the largest
/// per-rank activation memory equals 1F1B's. The deferred Ws fill what would
/// be 1F1B's cool-down bubbles: with T_F = T_B = T_W = T and m >= p the
/// iteration takes (3m + p - 1) T, a bubble fraction of (p-1)/(3m+p-1)
/// against 1F1B's (p-1)/(m+p-1) (Qi et al., "Zero Bubble Pipeline
/// Parallelism", ICLR 2024, schedule ZB-H1).
///
/// @snippet schedule.cpp zero_bubble

#include <cstddef>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/one_f_one_b.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief One stage of a ZB-H1 pipeline, for `zb_h1_ops` (named fields: four
/// adjacent ints would be easy to swap).
struct zb_h1_stage {
  int stages = 1;        ///< pipeline stages (P)
  int position = 0;      ///< this stage's position in [0, P)
  int microbatches = 1;  ///< microbatches of the iteration (m)
  int op_stage = 0;      ///< the stage its ops name (e.g. a chain stage)
  bool backward = true;  ///< B ops (false: a forward-only stage)
  bool weight = true;    ///< W ops (false: a frozen stage)
};

/// @brief The compute ops of stage `s` under ZB-H1 (see the file comment). A
/// stage without W runs 1F1B's order of F and B; a stage without B runs its
/// forwards in order.
[[nodiscard]] inline std::vector<schedule_op> zb_h1_ops(const zb_h1_stage& s) {
  const int m = s.microbatches;
  std::vector<schedule_op> ops;
  if (!s.backward) {
    for (int i = 0; i < m; ++i) ops.push_back(schedule_op::forward(s.op_stage, 0, i));
    return ops;
  }
  const int w = one_f_one_b_warmup(s.stages, s.position, m);
  int next_w = 0;
  auto weight = [&] {
    if (s.weight) ops.push_back(schedule_op::weight(s.op_stage, 0, next_w));
    ++next_w;
  };
  for (int i = 0; i < w; ++i) ops.push_back(schedule_op::forward(s.op_stage, 0, i));
  for (int i = 0; i < m - w; ++i) {
    ops.push_back(schedule_op::forward(s.op_stage, 0, w + i));
    ops.push_back(schedule_op::backward(s.op_stage, 0, i));
    if (i - s.position >= 0) weight();
  }
  for (int i = m - w; i < m; ++i) {
    ops.push_back(schedule_op::backward(s.op_stage, 0, i));
    weight();
  }
  while (next_w < m) weight();
  return ops;
}

/// @brief Compute-only ZB-H1 on `num_stages` ranks for `num_microbatches`.
[[nodiscard]] inline pipeline_schedule make_zb_h1(int num_stages, int num_microbatches) {
  require_positive(num_stages, "zb_h1.num_stages");
  require_positive(num_microbatches, "zb_h1.num_microbatches");
  auto s = detail::single_pipeline("zb_h1", num_stages, num_microbatches);
  s.split_backward = true;
  for (int r = 0; r < num_stages; ++r)
    s.ops[static_cast<std::size_t>(r)] = zb_h1_ops(
        {.stages = num_stages, .position = r, .microbatches = num_microbatches, .op_stage = r});
  return s;
}

}  // namespace disttrain
