#pragma once
/// @file gpipe.hpp
/// @brief GPipe: every rank runs all forwards, then all backwards.
///
/// With uniform stage times the bubble fraction is (p-1)/(m+p-1), like 1F1B,
/// but every stage holds all m microbatches' activations at the peak (1F1B: p-s).
///
/// @snippet schedule.cpp gpipe

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief Compute-only GPipe schedule on `num_stages` ranks for `num_microbatches`.
[[nodiscard]] inline pipeline_schedule make_gpipe(int num_stages, int num_microbatches) {
  require_positive(num_stages, "gpipe.num_stages");
  require_positive(num_microbatches, "gpipe.num_microbatches");
  auto s = detail::single_pipeline("gpipe", num_stages, num_microbatches);
  for (int r = 0; r < num_stages; ++r) {
    auto& ops = s.ops[static_cast<std::size_t>(r)];
    for (int i = 0; i < num_microbatches; ++i) ops.push_back(schedule_op::forward(r, 0, i));
    for (int i = 0; i < num_microbatches; ++i) ops.push_back(schedule_op::backward(r, 0, i));
  }
  return s;
}

}  // namespace disttrain
