#pragma once
/// @file format.hpp
/// @brief Text views of a simulation (host-only: uses fmt): a per-rank summary
/// table and an ASCII timeline.
///
/// @snippet sim.cpp format

#include "disttrain/core/config.hpp"
DISTTRAIN_HOST_ONLY_HEADER("disttrain/sim/format.hpp");

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <string>

#include "disttrain/schedule/format.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

/// @brief Iteration time, then per rank: busy seconds, busy and bubble
/// percentages and peak activation bytes; then the critical path's length
/// and composition.
[[nodiscard]] inline std::string format_sim_summary(const pipeline_schedule& s,
                                                    const sim_result& res) {
  require(res.busy.size() == s.ranks.size(), "format_sim_summary.result", "result has ",
          res.busy.size(), " ranks, schedule has ", s.ranks.size());
  std::string out = fmt::format("{}: iteration {:.6g} s, mean bubble {:.1f}%\n",
                                s.name.empty() ? "schedule" : s.name, res.iteration_time,
                                100.0 * res.mean_bubble_fraction());
  out += fmt::format("{:>4}  {:<22} {:>12} {:>7} {:>7} {:>14}\n", "rank", "where", "busy s",
                     "busy%", "bubble%", "peak act");
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& info = s.ranks[r];
    out += fmt::format(
        "{:>4}  {:<22} {:>12.6g} {:>6.1f}% {:>6.1f}% {:>14.6g}\n", r,
        fmt::format("{} s{} r{}", s.segments.at(static_cast<std::size_t>(info.segment)).name,
                    info.stage, info.replica),
        res.busy[r], 100.0 * res.busy_fraction(static_cast<int>(r)), 100.0 * res.bubble_fraction[r],
        res.peak_activation_bytes[r]);
  }
  std::map<std::string, int> kinds;
  for (const auto& ref : res.critical_path)
    ++kinds[std::string(
        to_string(s.ops.at(static_cast<std::size_t>(ref.rank)).at(ref.index).kind))];
  out += fmt::format("critical path: {} ops", res.critical_path.size());
  for (const auto& [k, n] : kinds) out += fmt::format(", {} {}", n, k);
  out += '\n';
  return out;
}

/// @brief ASCII timeline, `columns` characters wide: each rank's compute
/// stream with F, B, W, O (optimizer) where the op covers the column's
/// midpoint and '.' where the rank is idle or waiting.
[[nodiscard]] inline std::string format_timeline(const pipeline_schedule& s, const sim_result& res,
                                                 int columns = 100) {
  require_positive(columns, "format_timeline.columns");
  require(res.rank_begin.size() == s.ranks.size() + 1 && res.times.size() == s.num_ops(),
          "format_timeline.result", "simulation result does not belong to this schedule");
  const double T = res.iteration_time > 0.0 ? res.iteration_time : 1.0;
  const auto cols = static_cast<std::size_t>(columns);
  std::string out;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    std::string line(cols, '.');
    for (std::size_t i = 0; i < s.ops[r].size(); ++i) {
      const auto& o = s.ops[r][i];
      if (!is_compute(o.kind)) continue;
      const auto& iv = res.times[res.rank_begin[r] + i];
      const char ch = o.kind == op_kind::forward    ? 'F'
                      : o.kind == op_kind::backward ? 'B'
                      : o.kind == op_kind::weight   ? 'W'
                                                    : 'O';
      for (std::size_t c = 0; c < cols; ++c) {
        const double mid = (static_cast<double>(c) + 0.5) * T / static_cast<double>(cols);
        if (mid >= iv.start && mid < iv.end) line[c] = ch;
      }
    }
    out += fmt::format("rank {:>3} |{}|\n", r, line);
  }
  return out;
}

}  // namespace disttrain
