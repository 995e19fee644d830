#pragma once
/// @file timeline.hpp
/// @brief What the executor records about one iteration: per-op events
/// (`exec_event`), the iteration's figures (`exec_stats`), gathering every
/// rank's events on all ranks, and export as a Chrome/Perfetto trace.
///
/// Each event is one executed op on one rank with its start and end in
/// seconds from the iteration's start on that rank. `wait` events are time
/// the rank spent waiting for communication (a receive whose data had not yet
/// arrived, a bucket reduction still in flight, the end-of-iteration drain of
/// sends): the exposed communication. `transfer` events span a send or a
/// bucket reduction from its post to its completion. `measured_result` turns
/// the events into the simulator's `sim_result`, so a real iteration is
/// exported by the simulator's own trace writer (`exec_trace_json`, in
/// exec/trace.hpp) and opens side by side with a simulated one in
/// ui.perfetto.dev.
///
/// @snippet exec.cpp timeline

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

/// @brief What an event's interval measures.
enum class exec_track : std::uint8_t {
  compute,   ///< host work: F, B, W, step, posting, packing, unpacking
  wait,      ///< blocked waiting for communication (exposed)
  transfer,  ///< a send or a bucket reduction in flight (post to completion), overlapping the rest
};

/// @brief One interval of one op on one rank.
///
/// @snippet exec.cpp exec_event
struct exec_event {
  schedule_op op;                          ///< the op
  int rank = 0;                            ///< global rank that ran it
  int index = -1;                          ///< position of the op in the rank's program (-1: none)
  double start = 0.0;                      ///< seconds from the iteration's start on that rank
  double end = 0.0;                        ///< seconds from the iteration's start
  exec_track track = exec_track::compute;  ///< what the interval measures
};
static_assert(std::is_trivially_copyable_v<exec_event>);

/// @brief Figures of one executed iteration on one rank.
struct exec_stats {
  double iteration_seconds = 0.0;     ///< wall time of `run`
  double compute_seconds = 0.0;       ///< in host callbacks (F, B, W, step, pack, unpack)
  double exposed_comm_seconds = 0.0;  ///< blocked waiting for receives, reductions and sends
  std::size_t messages_sent = 0;
  std::size_t bytes_sent = 0;  ///< point-to-point and bucket reductions
  std::size_t messages_received = 0;
  std::size_t bytes_received = 0;
  std::vector<exec_event> events;  ///< in execution order (empty unless recording)
};

/// @brief Every rank's events on every rank (an allgather of counts, then of
/// the padded event arrays), sorted by (rank, start). Collective: every rank
/// of the backend's world must call it.
template <comm_backend B>
[[nodiscard]] std::vector<exec_event> gather_events(B& b, std::span<const exec_event> mine) {
  static_assert(B::memory == memory_space::host, "gather_events exchanges host memory");
  const auto n = static_cast<std::size_t>(b.size());
  std::uint64_t count = mine.size();
  std::vector<std::uint64_t> counts(n);
  b.allgather(std::as_bytes(std::span(&count, 1)), std::as_writable_bytes(std::span(counts)));
  const std::uint64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<exec_event> padded(static_cast<std::size_t>(most));
  std::copy(mine.begin(), mine.end(), padded.begin());
  std::vector<exec_event> all(static_cast<std::size_t>(most) * n);
  b.allgather(std::as_bytes(std::span<const exec_event>(padded)),
              std::as_writable_bytes(std::span(all)));
  std::vector<exec_event> out;
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < counts[r]; ++i)
      out.push_back(all[r * static_cast<std::size_t>(most) + i]);
  std::stable_sort(out.begin(), out.end(), [](const exec_event& x, const exec_event& y) {
    return x.rank < y.rank || (x.rank == y.rank && x.start < y.start);
  });
  return out;
}

/// @brief A measured iteration in the simulator's result form, so that
/// measured and simulated iterations share every view (trace, SVG, text).
/// `s` is the schedule whose rank r ran program `s.ops[r]` on global rank r.
/// Per op: compute ops their compute interval; a send or a bucket reduction
/// (grad_sync_start) its transfer from post to completion; a receive or
/// grad_sync_finish the time blocked waiting (zero-length if the data was
/// already there). Throws `invalid_argument` naming the event that does not
/// fit the schedule.
[[nodiscard]] inline sim_result measured_result(const pipeline_schedule& s,
                                                std::span<const exec_event> events) {
  sim_result res;
  res.rank_begin.assign(s.ops.size() + 1, 0);
  for (std::size_t r = 0; r < s.ops.size(); ++r)
    res.rank_begin[r + 1] = res.rank_begin[r] + s.ops[r].size();
  res.times.assign(res.rank_begin.back(), op_interval{});
  std::vector<char> have(res.times.size(), 0);  // 0 none, 1 fallback, 2 preferred
  for (std::size_t i = 0; i < events.size(); ++i) {
    const exec_event& e = events[i];
    res.iteration_time = std::max(res.iteration_time, e.end);
    if (e.index < 0) continue;
    require(e.rank >= 0 && static_cast<std::size_t>(e.rank) < s.ops.size(),
            cat("events[", i, "].rank"), "rank ", e.rank, " is not a rank of schedule '", s.name,
            "' (", s.ops.size(), " ranks)");
    const auto& prog = s.ops[static_cast<std::size_t>(e.rank)];
    require(static_cast<std::size_t>(e.index) < prog.size() &&
                prog[static_cast<std::size_t>(e.index)] == e.op,
            cat("events[", i, "].index"), "op #", e.index, " of rank ", e.rank, " is not ",
            describe(e.op));
    const std::size_t slot =
        res.rank_begin[static_cast<std::size_t>(e.rank)] + static_cast<std::size_t>(e.index);
    const op_kind k = e.op.kind;
    char rank_of = 0;
    op_interval iv{e.start, e.end};
    if (is_send(k) || k == op_kind::grad_sync_start) {
      rank_of = e.track == exec_track::transfer ? 2 : 1;
    } else if (is_recv(k) || k == op_kind::grad_sync_finish) {
      rank_of = e.track == exec_track::wait ? 2 : 1;
      if (e.track != exec_track::wait) iv.end = iv.start;  // arrived before it was needed
    } else {
      rank_of = e.track == exec_track::compute ? 2 : 0;
    }
    if (rank_of > have[slot]) {
      have[slot] = rank_of;
      res.times[slot] = iv;
    }
  }
  return res;
}

}  // namespace disttrain
