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
#include <string>
#include <string_view>
#include <vector>

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
/// throws `invalid_argument` at `where` (`where.num_microbatches`, ...) naming
/// the value and the nearest valid counts.
inline void check_interleaved(int num_stages, int num_microbatches, int num_chunks,
                              std::string_view where = "interleaved") {
  require_positive(num_stages, cat(where, ".num_stages"));
  require_positive(num_microbatches, cat(where, ".num_microbatches"));
  require(num_chunks >= 2, cat(where, ".num_chunks"),
          "must be >= 2 (use make_1f1b for one chunk), got ", num_chunks);
  require(num_stages >= 2, cat(where, ".num_stages"), "interleaving needs >= 2 stages, got ",
          num_stages);
  if (num_microbatches % num_stages != 0) {
    const int lo = num_microbatches / num_stages * num_stages;
    fail(errc::invalid_argument, cat(where, ".num_microbatches"),
         "must be a multiple of the pipeline size ", num_stages,
         " for the interleaved schedule, got ", num_microbatches,
         " (nearest valid: ", lo > 0 ? cat(lo, " or ") : std::string(), lo + num_stages, ")");
  }
}

/// @brief One rank of an interleaved pipeline, for `interleaved_ops` (named
/// fields: adjacent ints would be easy to swap).
struct interleaved_rank {
  int stages = 2;                 ///< pipeline stages of the interleaved module (p >= 2)
  int position = 0;               ///< this rank's stage in [0, p)
  int chunks = 2;                 ///< model chunks per rank (v >= 2)
  std::vector<int> microbatches;  ///< the microbatches it runs, in order (a multiple of p)
  int op_stage = 0;               ///< the stage its ops name (e.g. a chain stage)
  /// Warm-up forwards added to Megatron-LM's count, for stages after the
  /// module that lengthen the round trip (multi_module.hpp); 0 alone.
  int extra_warmup = 0;
  bool backward = true;               ///< B ops (false: forward-only)
  std::string where = "interleaved";  ///< the field errors are named under
};

/// @brief The compute ops of one rank under interleaved 1F1B (see the file
/// comment), with chunk c of microbatch list entry e as (op_stage, c, mb).
/// Throws `invalid_argument` at `<where>.*` for an invalid combination.
[[nodiscard]] inline std::vector<schedule_op> interleaved_ops(const interleaved_rank& r) {
  const int p = r.stages;
  const int v = r.chunks;
  const int m = static_cast<int>(r.microbatches.size());
  check_interleaved(p, m, v, r.where);
  require_in_range(r.position, 0, p - 1, r.where + ".position");
  require_non_negative(r.extra_warmup, r.where + ".extra_warmup");
  const auto mb_of = [&](int k) {
    return r.microbatches[static_cast<std::size_t>((k / (p * v)) * p + k % p)];
  };
  const auto fchunk = [p, v](int k) { return (k % (p * v)) / p; };
  const auto bchunk = [p, v](int k) { return v - 1 - (k % (p * v)) / p; };
  const int total = v * m;
  std::vector<schedule_op> ops;
  const auto fwd = [&](int k) {
    ops.push_back(schedule_op::forward(r.op_stage, fchunk(k), mb_of(k)));
  };
  const auto bwd = [&](int k) {
    ops.push_back(schedule_op::backward(r.op_stage, bchunk(k), mb_of(k)));
  };
  if (!r.backward) {
    for (int k = 0; k < total; ++k) fwd(k);
    return ops;
  }
  const int w =
      m == p ? total : std::min(interleaved_warmup(p, r.position, m, v) + r.extra_warmup, total);
  for (int k = 0; k < w; ++k) fwd(k);
  for (int i = 0; i < total - w; ++i) {
    fwd(w + i);
    bwd(i);
  }
  for (int k = total - w; k < total; ++k) bwd(k);
  return ops;
}

/// @brief Compute-only interleaved 1F1B on `num_stages` ranks with `num_chunks` chunks per rank.
[[nodiscard]] inline pipeline_schedule make_interleaved_1f1b(int num_stages, int num_microbatches,
                                                             int num_chunks) {
  check_interleaved(num_stages, num_microbatches, num_chunks);
  auto s = detail::single_pipeline("interleaved_1f1b", num_stages, num_microbatches, num_chunks);
  interleaved_rank r;
  r.stages = num_stages;
  r.chunks = num_chunks;
  for (int mb = 0; mb < num_microbatches; ++mb) r.microbatches.push_back(mb);
  for (int i = 0; i < num_stages; ++i) {
    r.position = r.op_stage = i;
    s.ops[static_cast<std::size_t>(i)] = interleaved_ops(r);
  }
  return s;
}

}  // namespace disttrain
