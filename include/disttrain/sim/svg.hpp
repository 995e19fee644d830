#pragma once
/// @file svg.hpp
/// @brief A standalone SVG timeline of a simulated iteration (no fmt, no
/// scripts): one row per schedule rank, F blue, B green, W yellow, optimizer
/// grey, transfers as a thin purple strip under the row, gradient reductions
/// olive, waits left blank; each box has a tooltip (`<title>`) naming the op
/// and its times, and microbatch numbers are printed where a box is wide
/// enough. A time axis and a legend are included.
///
/// A simulated bound world renders the same way, one row per global rank.
///
/// @snippet sim.cpp svg_file

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/labels.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

/// @brief Layout of `to_svg`.
///
/// @snippet sim.cpp svg_options
struct svg_options {
  int width = 1200;       ///< total width in pixels
  int row_height = 22;    ///< pixels per rank
  int label_width = 230;  ///< pixels for the rank labels
  bool show_comm = true;  ///< draw transfers and reductions
  std::string title;      ///< heading (default: schedule name and iteration time)
};

namespace detail {
/// @brief Escapes `& < > " '` for XML text and attributes.
inline std::string xml_escape(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char ch : in) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += ch;
    }
  }
  return out;
}
inline const char* svg_color(op_kind k) {
  switch (k) {
    case op_kind::forward: return "#4a86e8";
    case op_kind::backward: return "#34a853";
    case op_kind::weight: return "#f4c20d";
    case op_kind::optimizer_step: return "#9e9e9e";
    case op_kind::send_act:
    case op_kind::send_grad: return "#9c27b0";
    case op_kind::grad_sync_start: return "#827717";
    default: return "#ffffff";
  }
}
/// @brief A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks over `span`.
inline double nice_step(double span, int n) {
  if (!(span > 0.0)) return 1.0;
  const double raw = span / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (raw <= f * p) return f * p;
  return 10.0 * p;
}
}  // namespace detail

namespace detail {
/// @brief Renders `rows` timeline rows (see the file comment). `label(r)` is
/// row r's label, `name(r)` the prefix of its tooltips, `size(r)` its op
/// count, `op(r, i)` / `interval(r, i)` op i and its interval. Shared by the
/// schedule's and the bound world's timeline.
template <class Label, class Name, class Size, class Op, class Interval>
std::string render_svg(const std::string& title, std::size_t rows, double iteration_time,
                       const svg_options& opt, const Label& label, const Name& name,
                       const Size& size, const Op& op, const Interval& interval) {
  require(opt.width > opt.label_width + 50, "svg.width", "must exceed label_width + 50, got ",
          opt.width);
  require_positive(opt.row_height, "svg.row_height");
  const double T = iteration_time > 0.0 ? iteration_time : 1.0;
  const double x0 = opt.label_width;
  const double plot = opt.width - opt.label_width - 20;
  const double top = 44.0;
  const double rh = opt.row_height;
  const double box = rh * 0.65;
  const double height = top + rh * static_cast<double>(rows) + 60.0;
  const auto X = [&](double t) { return x0 + plot * t / T; };
  std::ostringstream o;
  o.precision(6);
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << opt.width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << opt.width << ' ' << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << opt.width << "\" height=\"" << height
    << "\" fill=\"#ffffff\"/>\n";
  o << "<text x=\"8\" y=\"16\" font-size=\"14\" font-weight=\"bold\">"
    << xml_escape(opt.title.empty() ? title : opt.title) << "</text>\n";
  // Time axis.
  const double step = nice_step(T, 10);
  o << "<g stroke=\"#dddddd\">\n";
  for (double t = 0.0; t <= T * (1 + 1e-9); t += step)
    o << "<line x1=\"" << X(t) << "\" y1=\"" << top - 6 << "\" x2=\"" << X(t) << "\" y2=\""
      << top + rh * static_cast<double>(rows) << "\"/>\n";
  o << "</g>\n<g fill=\"#555555\" text-anchor=\"middle\">\n";
  for (double t = 0.0; t <= T * (1 + 1e-9); t += step)
    o << "<text x=\"" << X(t) << "\" y=\"" << top - 9 << "\">" << t << "</text>\n";
  o << "</g>\n";
  for (std::size_t r = 0; r < rows; ++r) {
    const double y = top + rh * static_cast<double>(r);
    o << "<g>\n<text x=\"8\" y=\"" << y + box * 0.8 << "\">" << xml_escape(label(r)) << "</text>\n";
    const std::string row_name = name(r);
    const std::size_t n = size(r);
    for (std::size_t i = 0; i < n; ++i) {
      const schedule_op& so = op(r, i);
      const op_interval& iv = interval(r, i);
      const bool comm = is_send(so.kind) || so.kind == op_kind::grad_sync_start;
      if (!is_compute(so.kind) && !(comm && opt.show_comm)) continue;
      const double w = std::max(X(iv.end) - X(iv.start), 0.5);
      const double yy = comm ? y + box + 1 : y;
      const double hh = comm ? std::max(rh - box - 3, 2.0) : box;
      o << "<rect x=\"" << X(iv.start) << "\" y=\"" << yy << "\" width=\"" << w << "\" height=\""
        << hh << "\" fill=\"" << svg_color(so.kind)
        << "\" stroke=\"#333333\" stroke-width=\"0.3\"><title>"
        << xml_escape(cat(row_name, ": ", describe(so), " [", iv.start, ", ", iv.end, "] s"))
        << "</title></rect>\n";
      if (is_compute(so.kind) && so.microbatch >= 0 && w >= 14.0)
        o << "<text x=\"" << X(iv.start) + w / 2 << "\" y=\"" << y + box * 0.78
          << "\" text-anchor=\"middle\" font-size=\"9\" fill=\""
          << (so.kind == op_kind::weight ? "#000000" : "#ffffff") << "\">" << so.microbatch
          << (so.chunk > 0 ? cat('.', so.chunk) : std::string()) << "</text>\n";
    }
    o << "</g>\n";
  }
  // Legend.
  const double ly = top + rh * static_cast<double>(rows) + 24;
  double lx = x0;
  for (const auto k : {op_kind::forward, op_kind::backward, op_kind::weight,
                       op_kind::optimizer_step, op_kind::send_act, op_kind::grad_sync_start}) {
    const char* legend = k == op_kind::send_act          ? "transfer"
                         : k == op_kind::grad_sync_start ? "grad reduce"
                                                         : trace_category(k);
    o << "<rect x=\"" << lx << "\" y=\"" << ly - 9 << "\" width=\"12\" height=\"10\" fill=\""
      << svg_color(k) << "\"/><text x=\"" << lx + 16 << "\" y=\"" << ly << "\">" << legend
      << "</text>\n";
    lx += 100;
  }
  o << "</svg>\n";
  return o.str();
}
}  // namespace detail

/// @brief Renders the timeline as an SVG document (see the file comment).
[[nodiscard]] inline std::string to_svg(const pipeline_schedule& s, const sim_result& res,
                                        const svg_options& opt = {}) {
  require(res.rank_begin.size() == s.ranks.size() + 1 && res.times.size() == s.num_ops(),
          "svg.result", "simulation result has ", res.times.size(), " ops, schedule has ",
          s.num_ops());
  const auto R = s.ranks.size();
  return detail::render_svg(
      cat(s.name, ": ", R, " ranks, ", s.num_microbatches, " microbatches, iteration ",
          res.iteration_time, " s"),
      R, res.iteration_time, opt,
      [&](std::size_t r) {
        const auto& info = s.ranks[r];
        const auto& seg = s.segments.at(static_cast<std::size_t>(info.segment));
        return cat("rank ", r, " ", seg.name, " s", info.stage, " r", info.replica, " (",
                   static_cast<int>(std::lround(100.0 * res.bubble_fraction.at(r))), "% idle)");
      },
      [&](std::size_t r) { return s.rank_name(static_cast<int>(r)); },
      [&](std::size_t r) { return s.ops[r].size(); },
      [&](std::size_t r, std::size_t i) -> const schedule_op& { return s.ops[r][i]; },
      [&](std::size_t r, std::size_t i) -> const op_interval& {
        return res.times[res.rank_begin[r] + i];
      });
}

/// @brief The timeline of a simulated bound world (`simulate_bound`): one row
/// per global rank, labelled from `t` when given, with its busy share. Throws
/// `invalid_argument` at `svg.result` if `res` does not belong to `w`.
/// @snippet sim.cpp svg_bound
[[nodiscard]] inline std::string to_svg(const bound_world& w, const sim_result& res,
                                        const topology* t = nullptr, const svg_options& opt = {}) {
  detail::require_bound_result(w, res, t, "svg.result");
  const auto R = w.programs.size();
  return detail::render_svg(
      cat(w.name, " (bound): ", R, " ranks, ", w.num_microbatches, " microbatches, iteration ",
          res.iteration_time, " s"),
      R, res.iteration_time, opt,
      [&](std::size_t r) {
        return cat(detail::bound_track_name(w, t, r), " (",
                   static_cast<int>(std::lround(100.0 * res.busy_fraction(static_cast<int>(r)))),
                   "% busy)");
      },
      [&](std::size_t r) { return cat("rank ", r); },
      [&](std::size_t r) { return w.programs[r].ops.size(); },
      [&](std::size_t r, std::size_t i) -> const schedule_op& { return w.programs[r].ops[i].op; },
      [&](std::size_t r, std::size_t i) -> const op_interval& {
        return res.interval(static_cast<int>(r), i);
      });
}

}  // namespace disttrain
