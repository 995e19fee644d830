#pragma once
/// @file trace.hpp
/// @brief `exec_trace_json`: a measured iteration (`exec_stats::events`) as a
/// Chrome/Perfetto trace, through the simulator's trace writer.
///
/// Apart from timeline.hpp so that the executor's headers parse no JSON
/// library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/exec.hpp` does not).

#include <span>

#include "disttrain/exec/timeline.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/trace.hpp"

namespace disttrain {

/// @brief Chrome/Perfetto trace JSON of a measured iteration, written by the
/// simulator's writer (`to_trace_json`): the same tracks, names and colours
/// as a simulated iteration of `s`, so both open side by side in
/// ui.perfetto.dev.
[[nodiscard]] inline json exec_trace_json(const pipeline_schedule& s,
                                          std::span<const exec_event> events) {
  return to_trace_json(s, measured_result(s, events));
}

}  // namespace disttrain
