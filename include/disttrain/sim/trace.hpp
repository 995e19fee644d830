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
/// @code
/// auto res = disttrain::simulate(s, durations);
/// disttrain::write_json_file("iteration.trace.json", disttrain::to_trace_json(s, res));
/// @endcode

#include <cstddef>
#include <string>

#include "disttrain/core/error.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

namespace detail {
/// @brief Short label of an op for timelines: "F3", "B3c1", "W0", "send_act 3 -> r2".
inline std::string short_label(const schedule_op& o) {
  std::string s(to_string(o.kind));
  if (o.kind == op_kind::optimizer_step) return "step";
  if (o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish)
    return cat("bucket ", o.bucket, o.kind == op_kind::grad_sync_start ? " reduce" : " wait");
  if (is_compute(o.kind))
    s += std::to_string(o.microbatch);
  else
    s += cat(' ', o.microbatch);
  if (o.chunk > 0) s += cat('c', o.chunk);
  if (is_send(o.kind)) s += cat(" -> r", o.peer);
  if (is_recv(o.kind)) s += cat(" <- r", o.peer);
  return s;
}
/// @brief Trace category of an op kind.
inline const char* trace_category(op_kind k) {
  switch (k) {
    case op_kind::forward: return "forward";
    case op_kind::backward: return "backward";
    case op_kind::weight: return "weight";
    case op_kind::optimizer_step: return "optimizer";
    case op_kind::send_act:
    case op_kind::send_grad: return "comm";
    case op_kind::grad_sync_start: return "grad_sync";
    default: return "wait";
  }
}
/// @brief Chrome's reserved colour names per op kind.
inline const char* trace_color(op_kind k) {
  switch (k) {
    case op_kind::forward: return "rail_response";  // blue
    case op_kind::backward: return "good";          // green
    case op_kind::weight: return "yellow";
    case op_kind::optimizer_step: return "grey";
    case op_kind::send_act:
    case op_kind::send_grad: return "rail_animation";  // purple
    case op_kind::grad_sync_start: return "olive";
    default: return "terrible";  // waits: red
  }
}
}  // namespace detail

/// @brief Builds the trace (`{"traceEvents": [...], "displayTimeUnit": "ms"}`).
/// Throws `invalid_argument` if `res` does not belong to `s` (op counts differ).
[[nodiscard]] inline json to_trace_json(const pipeline_schedule& s, const sim_result& res) {
  detail::require(res.rank_begin.size() == s.ranks.size() + 1 && res.times.size() == s.num_ops(),
                  "trace.result", "simulation result has ", res.times.size(), " ops, schedule has ",
                  s.num_ops());
  constexpr double us = 1e6;
  json events = json::array();
  static const char* thread_names[] = {"compute", "send", "grad sync"};
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const int pid = static_cast<int>(r);
    const auto& info = s.ranks[r];
    const auto& seg = s.segments.at(static_cast<std::size_t>(info.segment));
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"args",
                       {{"name", detail::cat("rank ", r, " \xC2\xB7 ", seg.name, " stage ",
                                             info.stage, " replica ", info.replica)}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"args", {{"sort_index", pid}}}});
    for (int t = 0; t < 3; ++t)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", t},
                        {"args", {{"name", thread_names[t]}}}});
    for (std::size_t i = 0; i < s.ops[r].size(); ++i) {
      const auto& o = s.ops[r][i];
      const auto& iv = res.times[res.rank_begin[r] + i];
      const double dur = iv.end - iv.start;
      int tid = 0;
      if (is_send(o.kind))
        tid = 1;
      else if (o.kind == op_kind::grad_sync_start)
        tid = 2;
      else if (!is_compute(o.kind) && !(dur > 0.0))
        continue;  // zero-length waits say nothing
      json e{{"name", detail::short_label(o)},
             {"cat", detail::trace_category(o.kind)},
             {"ph", "X"},
             {"ts", iv.start * us},
             {"dur", dur * us},
             {"pid", pid},
             {"tid", tid},
             {"cname", detail::trace_color(o.kind)}};
      json args{{"op", describe(o)}, {"index", i}};
      if (o.microbatch >= 0) args["microbatch"] = o.microbatch;
      args["stage"] = o.stage;
      args["chunk"] = o.chunk;
      if (o.peer >= 0) args["peer"] = o.peer;
      if (o.bucket >= 0) args["bucket"] = o.bucket;
      e["args"] = std::move(args);
      events.push_back(std::move(e));
    }
  }
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData", {{"schedule", s.name}, {"iteration_time_s", res.iteration_time}}}};
}

}  // namespace disttrain
