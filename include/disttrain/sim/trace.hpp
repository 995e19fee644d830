#pragma once
/// @file trace.hpp
/// @brief Chrome / Perfetto trace JSON of a simulated (or measured) iteration.
///
/// One process track per schedule rank (pid = rank, named "rank 3 · backbone
/// stage 1 replica 0"), with three threads: "compute" (F, B, W, optimizer,
/// and the time spent waiting in receives / gradient sync, category "wait"),
/// "send" (transfers on the rank's outgoing links) and "grad sync" (bucket
/// reductions). F, B, W and communication differ by name ("F3", "B3c1",
/// "send_act 3 -> r2"), category and colour (`cname`). Times are in
/// microseconds as the format requires (`sim_result` times are seconds).
/// Open the file in https://ui.perfetto.dev or chrome://tracing.
///
/// A simulated bound world (sim/simulator.hpp) exports the same way,
/// one track per global rank, messages with their bytes and tags.
///
/// @snippet sim.cpp trace_file

#include <cstddef>
#include <string>

#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/labels.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

namespace detail {
/// @brief Appends one process track to a trace: its name, three threads
/// ("compute", "send", "grad sync") and one event per op. `op(i)` gives op i
/// of the track, `interval(i)` its interval, `args(i, a)` adds fields to its
/// `args` (kept by both the schedule's and the bound world's trace).
template <class Op, class Interval, class Args>
void append_trace_track(json& events, int pid, const std::string& name, std::size_t n, const Op& op,
                        const Interval& interval, const Args& args) {
  constexpr double us = 1e6;
  static const char* thread_names[] = {"compute", "send", "grad sync"};
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
  events.push_back(
      {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  for (int t = 0; t < 3; ++t)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", t},
                      {"args", {{"name", thread_names[t]}}}});
  for (std::size_t i = 0; i < n; ++i) {
    const schedule_op& o = op(i);
    const op_interval& iv = interval(i);
    const double dur = iv.end - iv.start;
    int tid = 0;
    if (is_send(o.kind))
      tid = 1;
    else if (o.kind == op_kind::grad_sync_start)
      tid = 2;
    else if (!is_compute(o.kind) && !(dur > 0.0))
      continue;  // zero-length waits say nothing
    json e{{"name", short_label(o)},
           {"cat", trace_category(o.kind)},
           {"ph", "X"},
           {"ts", iv.start * us},
           {"dur", dur * us},
           {"pid", pid},
           {"tid", tid},
           {"cname", trace_color(o.kind)}};
    json a{{"op", describe(o)}, {"index", i}};
    if (o.microbatch >= 0) a["microbatch"] = o.microbatch;
    a["stage"] = o.stage;
    a["chunk"] = o.chunk;
    if (o.peer >= 0) a["peer"] = o.peer;
    if (o.bucket >= 0) a["bucket"] = o.bucket;
    args(i, a);
    e["args"] = std::move(a);
    events.push_back(std::move(e));
  }
}
}  // namespace detail

/// @brief Builds the trace (`{"traceEvents": [...], "displayTimeUnit": "ms"}`).
/// Throws `invalid_argument` if `res` does not belong to `s` (op counts differ).
[[nodiscard]] inline json to_trace_json(const pipeline_schedule& s, const sim_result& res) {
  require(res.rank_begin.size() == s.ranks.size() + 1 && res.times.size() == s.num_ops(),
          "trace.result", "simulation result has ", res.times.size(), " ops, schedule has ",
          s.num_ops());
  json events = json::array();
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& info = s.ranks[r];
    const auto& seg = s.segments.at(static_cast<std::size_t>(info.segment));
    detail::append_trace_track(
        events, static_cast<int>(r),
        cat("rank ", r, " \xC2\xB7 ", seg.name, " stage ", info.stage, " replica ", info.replica),
        s.ops[r].size(), [&](std::size_t i) -> const schedule_op& { return s.ops[r][i]; },
        [&](std::size_t i) -> const op_interval& { return res.times[res.rank_begin[r] + i]; },
        [](std::size_t, json&) {});
  }
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData", {{"schedule", s.name}, {"iteration_time_s", res.iteration_time}}}};
}

/// @brief The trace of a simulated bound world (`simulate_bound`): one track
/// per global rank, named from `t` when given; each message's event carries
/// its bytes, tag, link and route phase. Throws `invalid_argument` at
/// `trace.result` if `res` does not belong to `w` (or `t` to `w`).
/// @snippet sim.cpp trace_bound
[[nodiscard]] inline json to_trace_json(const bound_world& w, const sim_result& res,
                                        const topology* t = nullptr) {
  detail::require_bound_result(w, res, t, "trace.result");
  json events = json::array();
  for (std::size_t r = 0; r < w.programs.size(); ++r) {
    const auto& ops = w.programs[r].ops;
    detail::append_trace_track(
        events, static_cast<int>(r), detail::bound_track_name(w, t, r), ops.size(),
        [&](std::size_t i) -> const schedule_op& { return ops[i].op; },
        [&](std::size_t i) -> const op_interval& { return res.interval(static_cast<int>(r), i); },
        [&](std::size_t i, json& a) {
          const bound_op& b = ops[i];
          if (!is_p2p(b.op.kind)) return;
          a["bytes"] = b.bytes;
          a["tag"] = b.tag;
          a["link"] = b.link;
          a["phase"] = b.phase;
        });
  }
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"schedule", w.name},
                {"ranks", w.world_size()},
                {"iteration_time_s", res.iteration_time}}}};
}

}  // namespace disttrain
