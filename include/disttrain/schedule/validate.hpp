#pragma once
/// @file validate.hpp
/// @brief Checks that a schedule is complete, consistent and deadlock-free.
///
/// `validate_schedule` throws `errc::schedule_error` at the first problem, its
/// `where()` naming the rank and op (or the module/stage/microbatch) concerned:
/// - shape: segments, rank table, op fields in range;
/// - every microbatch's F runs exactly once per virtual stage, B exactly once
///   where a backward pass is needed (the stage or one before it is
///   trainable), W exactly once on trainable stages of split schedules, in
///   order F < B < W on one rank;
/// - every input produced on another rank is received before it is used, every
///   send has its receive and vice versa, and messages between two ranks are
///   received in the order they are sent (NCCL p2p matching);
/// - every DP replica of a stage starts, then finishes, each gradient bucket;
/// - no deadlock: a replay with blocking receives completes; otherwise the
///   message lists the first blocked op of every rank that cannot finish.
///
/// The schedule's own rules (the compute ops, their inputs, sends at their
/// producers, buckets) are checked on the schedule (`compile_schedule`, which
/// the simulator runs too); messages and deadlocks by the one validator of
/// programs, `validate_bound` (validate_bound.hpp), on the schedule's trivial
/// binding (`bind_schedule`), naming the schedule's ops.
///
/// It also reports the activations each rank holds at its peak (counted in
/// microbatch-chunks, held from F until B, or until W when split).
///
/// @snippet schedule.cpp validate_file

#include <algorithm>
#include <cstddef>
#include <vector>

#include "disttrain/schedule/bind_schedule.hpp"
#include "disttrain/schedule/detail/compiled.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/schedule/validate_bound.hpp"

namespace disttrain {

/// @brief What `validate_schedule` measured on a valid schedule.
///
/// @snippet schedule.cpp validation_report
struct validation_report {
  std::vector<int> peak_inflight;   ///< per rank: microbatch-chunks of activations held at the peak
  std::size_t num_ops = 0;          ///< ops over all ranks
  std::size_t num_messages = 0;     ///< point-to-point messages (sends)
  std::size_t num_collectives = 0;  ///< gradient-bucket reductions (per DP group)

  /// @brief The largest per-rank peak.
  [[nodiscard]] int max_peak_inflight() const noexcept {
    return peak_inflight.empty() ? 0
                                 : *std::max_element(peak_inflight.begin(), peak_inflight.end());
  }
};

/// @brief Validates `s` (see the file comment); throws `schedule_error` if broken.
inline validation_report validate_schedule(const pipeline_schedule& s) {
  const auto c = detail::compile_schedule(s);
  // (bind_schedule keeps the schedule's op order: flat op i is the schedule's)
  (void)detail::validate_world(
      bind_schedule(s), {},
      [&](const detail::compiled_program&, std::size_t i) { return c.name_op(s.ops, i); });
  validation_report rep;
  rep.peak_inflight = c.peak_inflight;
  rep.num_ops = c.num_ops();
  for (const auto k : c.kind) rep.num_messages += is_send(k) ? 1U : 0U;
  rep.num_collectives = c.num_collectives();
  return rep;
}

}  // namespace disttrain
