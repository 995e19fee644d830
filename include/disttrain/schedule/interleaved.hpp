#pragma once
/// @file interleaved.hpp
/// @brief Interleaved 1F1B with virtual chunks (Megatron-LM's schedule).
///
/// Each of the p ranks holds v model chunks; rank r's chunk c is virtual stage
/// c*p + r. Microbatches run in groups of p: the k-th forward of a rank is
/// chunk (k mod p*v) / p of microbatch (k / (p*v))*p + k mod p; backwards
/// visit chunks in reverse. Warm-up forwards on rank r:
///
///     w = min((p - r - 1) * 2 + (v - 1) * p, v*m)      (w = v*m when m == p)
///
/// then (v*m - w) pairs (F, B), then w backwards. Constraint (as Megatron's
/// original schedule): m must be a multiple of p. With uniform times the bubble
/// fraction is (p-1)/(v*m+p-1).
///
/// @snippet schedule.cpp interleaved

#include <algorithm>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief Warm-up forwards of rank `rank` in the interleaved schedule (see the file comment).
[[nodiscard]] constexpr int interleaved_warmup(int p, int rank, int m, int v) noexcept {
  const int total = v * m;
  if (m == p) return total;
  return std::min((p - rank - 1) * 2 + (v - 1) * p, total);
}

/// @brief Checks Megatron's constraint for interleaving: `m % p == 0`, `v >= 2`;
/// throws `invalid_argument` naming the field, the value and the nearest valid counts.
inline void check_interleaved(int num_stages, int num_microbatches, int num_chunks) {
  require_positive(num_stages, "interleaved.num_stages");
  require_positive(num_microbatches, "interleaved.num_microbatches");
  require(num_chunks >= 2, "interleaved.num_chunks",
          "must be >= 2 (use make_1f1b for one chunk), got ", num_chunks);
  if (num_microbatches % num_stages != 0) {
    const int lo = num_microbatches / num_stages * num_stages;
    fail(errc::invalid_argument, "interleaved.num_microbatches",
         "must be a multiple of the pipeline size ", num_stages,
         " for the interleaved schedule, got ", num_microbatches,
         " (nearest valid: ", lo > 0 ? cat(lo, " or ") : std::string(), lo + num_stages, ")");
  }
}

/// @brief Compute-only interleaved 1F1B on `num_stages` ranks with `num_chunks` chunks per rank.
[[nodiscard]] inline pipeline_schedule make_interleaved_1f1b(int num_stages, int num_microbatches,
                                                             int num_chunks) {
  check_interleaved(num_stages, num_microbatches, num_chunks);
  const int p = num_stages;
  const int v = num_chunks;
  const int m = num_microbatches;
  auto s = detail::single_pipeline("interleaved_1f1b", p, m, v);
  const auto mb_of = [p, v](int k) { return (k / (p * v)) * p + k % p; };
  const auto fchunk = [p, v](int k) { return (k % (p * v)) / p; };
  const auto bchunk = [p, v](int k) { return v - 1 - (k % (p * v)) / p; };
  const int total = v * m;
  for (int r = 0; r < p; ++r) {
    auto& ops = s.ops[static_cast<std::size_t>(r)];
    const int w = interleaved_warmup(p, r, m, v);
    for (int k = 0; k < w; ++k) ops.push_back(schedule_op::forward(r, fchunk(k), mb_of(k)));
    for (int i = 0; i < total - w; ++i) {
      ops.push_back(schedule_op::forward(r, fchunk(w + i), mb_of(w + i)));
      ops.push_back(schedule_op::backward(r, bchunk(i), mb_of(i)));
    }
    for (int k = total - w; k < total; ++k)
      ops.push_back(schedule_op::backward(r, bchunk(k), mb_of(k)));
  }
  return s;
}

}  // namespace disttrain
