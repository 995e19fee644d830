#pragma once
/// @file labels.hpp
/// @brief Names and colours of timeline events, shared by the trace JSON
/// (`sim/trace.hpp`) and the SVG timeline (`sim/svg.hpp`); no JSON here.

#include <cstddef>
#include <string>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/schedule/bound_program.hpp"
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

/// @brief Track name of rank `r` of a bound world: "rank 9 · llm stage 0
/// replica 2 tp 1" with a topology, else "rank 9 · chain stage 1".
inline std::string bound_track_name(const bound_world& w, const topology* t, std::size_t r) {
  if (t == nullptr) return cat("rank ", r, " \xC2\xB7 chain stage ", w.programs[r].chain_stage);
  const topology_coord c = t->coord(static_cast<int>(r));
  return cat("rank ", r, " \xC2\xB7 ", t->module(c.module).name, " stage ", c.stage.value,
             " replica ", c.replica.value, " tp ", c.tp_rank);
}
/// @brief Throws `invalid_argument` at `where` unless `res` simulated `w`.
inline void require_bound_result(const bound_world& w, const sim_result& res, const topology* t,
                                 const char* where) {
  bool ok = res.rank_begin.size() == w.programs.size() + 1;
  for (std::size_t r = 0; ok && r < w.programs.size(); ++r)
    ok = res.num_ops(static_cast<int>(r)) == w.programs[r].ops.size();
  require(ok, where, "the simulation result does not belong to this bound world (",
          res.world_size(), " ranks simulated, ", w.programs.size(), " in the world)");
  require(t == nullptr || t->world_size() == w.world_size(), where, "the topology has ",
          t ? t->world_size() : 0, " ranks, the bound world ", w.world_size());
}
}  // namespace detail

}  // namespace disttrain
