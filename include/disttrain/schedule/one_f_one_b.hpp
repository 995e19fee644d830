#pragma once
/// @file one_f_one_b.hpp
/// @brief 1F1B (PipeDream-flush / Megatron's non-interleaved schedule).
///
/// Rank r runs `w = min(p-r-1, m)` warm-up forwards, then `m-w` pairs
/// (F, B), then `w` cool-down backwards. With uniform stage times the bubble
/// fraction is (p-1)/(m+p-1) and rank r holds at most min(p-r, m)
/// microbatches' activations.
///
/// @snippet schedule.cpp one_f_one_b

#include <algorithm>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief Warm-up forwards of rank `rank` in 1F1B: min(p - rank - 1, m).
[[nodiscard]] constexpr int one_f_one_b_warmup(int num_stages, int rank,
                                               int num_microbatches) noexcept {
  return std::min(num_stages - rank - 1, num_microbatches);
}

/// @brief Compute-only 1F1B schedule on `num_stages` ranks for `num_microbatches`.
[[nodiscard]] inline pipeline_schedule make_1f1b(int num_stages, int num_microbatches) {
  require_positive(num_stages, "1f1b.num_stages");
  require_positive(num_microbatches, "1f1b.num_microbatches");
  auto s = detail::single_pipeline("1f1b", num_stages, num_microbatches);
  for (int r = 0; r < num_stages; ++r) {
    auto& ops = s.ops[static_cast<std::size_t>(r)];
    const int w = one_f_one_b_warmup(num_stages, r, num_microbatches);
    for (int i = 0; i < w; ++i) ops.push_back(schedule_op::forward(r, 0, i));
    for (int i = 0; i < num_microbatches - w; ++i) {
      ops.push_back(schedule_op::forward(r, 0, w + i));
      ops.push_back(schedule_op::backward(r, 0, i));
    }
    for (int i = num_microbatches - w; i < num_microbatches; ++i)
      ops.push_back(schedule_op::backward(r, 0, i));
  }
  return s;
}

}  // namespace disttrain
