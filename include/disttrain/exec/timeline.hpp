#pragma once
/// @file timeline.hpp
/// @brief What the executor records about one iteration: per-op events
/// (`exec_event`), the iteration's figures (`exec_stats`), gathering every
/// rank's events on all ranks, and export as a Chrome/Perfetto trace.
///
/// Each event is one executed op on one rank with its start and end in
/// seconds from the iteration's start on that rank. `blocked` events are time
/// the rank spent waiting for communication (a receive whose data had not yet
/// arrived, a bucket reduction still in flight, the end-of-iteration drain of
/// sends): the exposed communication. In the trace each rank has a compute
/// track (F, B, W, step, posting and unpacking) and a communication track
/// (the waits), named like the simulator's tracks (`rank R`), so a real
/// iteration and a simulated one open side by side in ui.perfetto.dev.
///
/// @code
/// disttrain::exec_stats st = exec.run(program, host);
/// auto all = disttrain::gather_events(backend, st.events);   // every rank's events
/// if (backend.rank() == 0) disttrain::write_json_file("iter.trace.json", disttrain::exec_trace_json(all));
/// @endcode

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/schedule/op.hpp"

namespace disttrain {

/// @brief One executed op (or one wait for communication) on one rank.
///
/// @code
/// disttrain::exec_event e{disttrain::schedule_op::forward(0, 0, 2), /*rank*/ 1, 0.010, 0.012, false};
/// @endcode
struct exec_event {
  schedule_op op;        ///< the op
  int rank = 0;          ///< global rank that ran it
  double start = 0.0;    ///< seconds from the iteration's start on that rank
  double end = 0.0;      ///< seconds from the iteration's start
  bool blocked = false;  ///< time waiting for communication (exposed), not compute
};
static_assert(std::is_trivially_copyable_v<exec_event>);

/// @brief Figures of one executed iteration on one rank.
struct exec_stats {
  double iteration_seconds = 0.0;     ///< wall time of `run`
  double compute_seconds = 0.0;       ///< in host callbacks (F, B, W, step, pack, unpack)
  double exposed_comm_seconds = 0.0;  ///< blocked waiting for receives, reductions and sends
  std::size_t messages_sent = 0;
  std::size_t bytes_sent = 0;         ///< point-to-point and bucket reductions
  std::size_t messages_received = 0;
  std::size_t bytes_received = 0;
  std::vector<exec_event> events;     ///< in execution order (empty unless recording)
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
  b.allgather(std::as_bytes(std::span<const exec_event>(padded)), std::as_writable_bytes(std::span(all)));
  std::vector<exec_event> out;
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < counts[r]; ++i) out.push_back(all[r * static_cast<std::size_t>(most) + i]);
  std::stable_sort(out.begin(), out.end(), [](const exec_event& x, const exec_event& y) {
    return x.rank < y.rank || (x.rank == y.rank && x.start < y.start);
  });
  return out;
}

/// @brief Chrome/Perfetto trace JSON (`{"traceEvents": [...]}`) of `events`:
/// one process per rank (`pid` = rank, named `rank R`) with a compute thread
/// (tid 0) and a communication thread (tid 1, the waits); complete events
/// (`"ph": "X"`) in microseconds, category = the op kind (`F`, `B`, `W`,
/// `recv_act`, ...), plus `"wait"` for blocked time.
[[nodiscard]] inline json exec_trace_json(std::span<const exec_event> events) {
  json ev = json::array();
  std::vector<int> ranks;
  for (const auto& e : events) ranks.push_back(e.rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (int r : ranks) {
    ev.push_back(json{{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", detail::cat("rank ", r)}}}});
    ev.push_back(json{{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    ev.push_back(json{{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", 1}, {"args", {{"name", "comm wait"}}}});
  }
  for (const auto& e : events) {
    json args{{"stage", e.op.stage}, {"chunk", e.op.chunk}};
    if (e.op.microbatch >= 0) args["mb"] = e.op.microbatch;
    if (e.op.peer >= 0) args["peer"] = e.op.peer;
    if (e.op.bucket >= 0) args["bucket"] = e.op.bucket;
    ev.push_back(json{{"name", e.blocked ? "wait " + describe(e.op) : describe(e.op)},
                      {"cat", e.blocked ? std::string("wait") : std::string(to_string(e.op.kind))},
                      {"ph", "X"},
                      {"ts", e.start * 1e6},
                      {"dur", std::max(0.0, e.end - e.start) * 1e6},
                      {"pid", e.rank},
                      {"tid", e.blocked ? 1 : 0},
                      {"args", std::move(args)}});
  }
  return json{{"traceEvents", std::move(ev)}, {"displayTimeUnit", "ms"}};
}

}  // namespace disttrain
