#pragma once
/// @file format.hpp
/// @brief Compact per-rank text table of a schedule (host-only: uses fmt).
///
/// One line per rank: its module, stage and replica, the forwards it runs
/// before its first backward (Megatron's warm-up count plus the first steady
/// forward; where interleaved schedules differ from 1F1B) and its op sequence. Compute ops read `F3`, `B3`, `W3`, with `c1` for chunk
/// 1; with `with_comm`, communication reads `ra3<1` / `sa3>2` (receive/send
/// activation of microbatch 3 from/to rank 1/2), `rg`/`sg` for gradients,
/// `gs0`/`gf0` for bucket 0's sync start/finish and `opt` for the step.
///
/// @snippet schedule.cpp format

#include "disttrain/core/config.hpp"
DISTTRAIN_HOST_ONLY_HEADER("disttrain/schedule/format.hpp");

#include <fmt/format.h>

#include <cstddef>
#include <string>

#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief The token of one op in `format_schedule` ("F3", "B0c1", "sa3>2", ...).
[[nodiscard]] inline std::string format_op_token(const schedule_op& o) {
  const std::string chunk = o.chunk > 0 ? fmt::format("c{}", o.chunk) : std::string();
  switch (o.kind) {
    case op_kind::forward: return fmt::format("F{}{}", o.microbatch, chunk);
    case op_kind::backward: return fmt::format("B{}{}", o.microbatch, chunk);
    case op_kind::weight: return fmt::format("W{}{}", o.microbatch, chunk);
    case op_kind::send_act: return fmt::format("sa{}{}>{}", o.microbatch, chunk, o.peer);
    case op_kind::recv_act: return fmt::format("ra{}{}<{}", o.microbatch, chunk, o.peer);
    case op_kind::send_grad: return fmt::format("sg{}{}>{}", o.microbatch, chunk, o.peer);
    case op_kind::recv_grad: return fmt::format("rg{}{}<{}", o.microbatch, chunk, o.peer);
    case op_kind::grad_sync_start: return fmt::format("gs{}", o.bucket);
    case op_kind::grad_sync_finish: return fmt::format("gf{}", o.bucket);
    case op_kind::optimizer_step: return "opt";
  }
  return "?";
}

/// @brief Forwards before the first backward on `rank` (all of them if it has none).
[[nodiscard]] inline int warmup_forwards(const pipeline_schedule& s, int rank) {
  int n = 0;
  for (const auto& o : s.ops.at(static_cast<std::size_t>(rank))) {
    if (o.kind == op_kind::backward) return n;
    n += o.kind == op_kind::forward ? 1 : 0;
  }
  return n;
}

/// @brief The per-rank table described in the file comment. `max_ops` caps the
/// ops shown per rank (0: all), ending the line with "... (+N)".
[[nodiscard]] inline std::string format_schedule(const pipeline_schedule& s, bool with_comm = false,
                                                 std::size_t max_ops = 0) {
  std::string out = fmt::format("{}: {} ranks, {} stages", s.name.empty() ? "schedule" : s.name,
                                s.ranks.size(), s.num_stages);
  if (s.num_chunks > 1) out += fmt::format(" x {} chunks", s.num_chunks);
  out += fmt::format(", {} microbatches{}\n", s.num_microbatches,
                     s.split_backward ? ", split backward" : "");
  std::size_t where_w = 5;
  std::vector<std::string> wheres;
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& info = s.ranks[r];
    wheres.push_back(fmt::format("{} s{} r{}",
                                 s.segments.at(static_cast<std::size_t>(info.segment)).name,
                                 info.stage, info.replica));
    where_w = std::max(where_w, wheres.back().size());
  }
  out += fmt::format("{:>4}  {:<{}}  {:>7}  ops\n", "rank", "where", where_w, "F<1st B");
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    out += fmt::format("{:>4}  {:<{}}  {:>7}  ", r, wheres[r], where_w,
                       warmup_forwards(s, static_cast<int>(r)));
    std::size_t shown = 0, total = 0;
    for (const auto& o : s.ops[r]) {
      if (!with_comm && !is_compute(o.kind)) continue;
      if (!with_comm && o.kind == op_kind::optimizer_step) continue;
      ++total;
      if (max_ops != 0 && shown >= max_ops) continue;
      if (shown++ > 0) out += ' ';
      out += format_op_token(o);
    }
    if (total > shown) out += fmt::format(" ... (+{})", total - shown);
    out += '\n';
  }
  return out;
}

}  // namespace disttrain

/// @brief `fmt::format("{}", op_kind::forward)` prints "F".
template <>
struct fmt::formatter<disttrain::op_kind> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(disttrain::op_kind k, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(disttrain::to_string(k), ctx);
  }
};

/// @brief `fmt::format("{}", op)` prints `describe(op)`.
template <>
struct fmt::formatter<disttrain::schedule_op> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const disttrain::schedule_op& o, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(disttrain::describe(o), ctx);
  }
};
