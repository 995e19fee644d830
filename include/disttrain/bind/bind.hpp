#pragma once
/// @file bind.hpp
/// @brief The bind step: (topology, chain schedule, the batch's sample map,
/// activation shapes) -> the program of each global rank, with every message's
/// real peer, bytes and tag (schedule/bound_program.hpp).
///
/// ## The split-microbatch model
/// Microbatch j is split over *all* replicas of every module (the
/// reorderer's cells): every replica, and every TP rank of it, runs every
/// microbatch of its chain stage's program on its share of the samples
/// (possibly none). Each link between chain stages c and c + 1 is, per
/// microbatch, a route (comm/route.hpp) between the two stages' placements
/// of microbatch j (bind/placement.hpp): the crossing (phase 0) and the TP
/// fan-out among the receiving replica's TP ranks (phase 1). Gradients flow
/// back along the reversed route (`route_options::backward`), fan-out
/// included, so every TP rank of the upstream replica gets the full gradient.
/// (The round-robin model, where a microbatch visits one replica per module,
/// is the special case of a map whose microbatch j lists samples in one
/// replica only: the other replicas' ops then move no bytes.)
///
/// ## Cost
/// `bind_rank` plans only the rank's part (`route_options::for_rank`) of the
/// routes of its own two links (4 per microbatch), from the placements of the
/// modules around it: its cost grows with its own messages, not the world's.
/// `bind_world` plans every route once, headers only (no pieces: its routes
/// are not kept), and hands each message to its two ranks through one flat
/// index. A message's `bound_op::message` is its index in the whole route
/// either way, so `bind_rank(..., r).program == bind_world(...).programs[r]`.
///
/// @code
/// auto topo = disttrain::topology_of(plan, model);
/// auto chain = disttrain::chain_program(topo, {.microbatches = 8});
/// std::vector<disttrain::link_shape> shapes = ...;   // one per link: hidden, bytes, rows per sample
/// disttrain::bound_rank mine = disttrain::bind_rank(topo, chain, map, shapes, my_rank);
/// executor.run(mine.program, host);                  // host packs with mine.route_of(op)
/// @endcode

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/bind/placement.hpp"
#include "disttrain/bind/topology_views.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/core/error.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/exec/message_tags.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief The activation crossing one link (chain stage c -> c + 1).
struct link_shape {
  std::int64_t hidden = 1;         ///< elements per row
  std::size_t elem_size = 4;       ///< bytes per element
  std::vector<std::int64_t> rows;  ///< per sample of the map (index into reorder_result::samples)
  split_axis split = split_axis::hidden;  ///< how a sample is sliced across TP ranks
};

/// @brief A rank's bound program and the routes its messages belong to.
struct bound_rank {
  bound_program program;
  /// Per microbatch j, slot `j * 4 + k`: k = 0 the forward route into the
  /// rank's stage, 1 the backward route out of it (input gradient), 2 the
  /// forward route out of it, 3 the backward route into it (output gradient);
  /// each the rank's part of the route (`route_plan::for_rank`). Routes a
  /// stage has no link for are empty.
  std::vector<route_plan> routes;

  /// @brief The route a point-to-point op of the program belongs to.
  [[nodiscard]] const route_plan& route_of(const bound_op& b) const {
    detail::require(is_p2p(b.op.kind) && b.op.microbatch >= 0, "bound_rank.route_of", "op ",
                    describe(b.op), " is not point-to-point");
    const bool grad = b.op.kind == op_kind::send_grad || b.op.kind == op_kind::recv_grad;
    const bool out = b.link == program.chain_stage;
    const auto k = static_cast<std::size_t>((out ? 2 : 0) + (grad ? 1 : 0));
    return routes.at(static_cast<std::size_t>(b.op.microbatch) * 4 + k);
  }
  /// @brief The message of a point-to-point op (by its index in the whole route).
  [[nodiscard]] const route_message& message_of(const bound_op& b) const {
    return route_of(b).message(b.message);
  }
};

namespace detail {

// Everything bind needs, checked once.
struct bind_context {
  const topology& topo;
  const pipeline_schedule& chain;
  const reorder_result& map;
  const std::vector<link_shape>& shapes;
  rank_layout layout;
  message_tags tags;
  int stages = 0;

  bind_context(const topology& t, const pipeline_schedule& c, const reorder_result& m,
               const std::vector<link_shape>& s)
      : topo(t),
        chain(c),
        map(m),
        shapes(s),
        layout(layout_of(t)),
        tags(t.num_chain_stages(), 1, c.num_microbatches, 1),
        stages(t.num_chain_stages()) {
    require(c.num_stages == stages && c.num_chunks == 1 && c.num_ranks() == stages, "bind.chain",
            "is not the chain of this topology (", stages,
            " stages, one rank each; build it with chain_program)");
    require(m.modules == t.owning_modules().size(), "bind.map.modules", "the sample map has ",
            m.modules, " modules, the topology ", t.owning_modules().size(),
            " that own ranks (colocated modules are not reorder "
            "modules: derive the options with reorder_options_of)");
    for (std::size_t k = 0; k < m.modules; ++k)
      require(k < m.dp.size() &&
                  m.dp[k] == static_cast<std::uint32_t>(t.module(t.owning_modules()[k]).dp),
              cat("bind.map.dp[", k, "]"), "the sample map's DP differs from module '",
              t.module(t.owning_modules()[k]).name, "'s");
    require(m.microbatches == static_cast<std::uint32_t>(c.num_microbatches),
            "bind.map.microbatches", "the sample map has ", m.microbatches,
            " microbatches, the chain ", c.num_microbatches);
    require(s.size() == static_cast<std::size_t>(stages > 0 ? stages - 1 : 0), "bind.shapes",
            "has ", s.size(), " entries, need one per link (", stages - 1, ")");
    for (std::size_t l = 0; l < s.size(); ++l)
      require(s[l].rows.size() == m.samples.size(), cat("bind.shapes[", l, "].rows"), "has ",
              s[l].rows.size(), " entries, the map has ", m.samples.size(), " samples");
  }

  [[nodiscard]] route_endpoint endpoint(int c) const {
    const auto [m, s] = topo.chain_at(c);
    return {topo.owning_index(m), s.value};
  }
  // The route of `link` in microbatch j, forward or backward; `o` gives
  // for_rank and headers_only.
  [[nodiscard]] route_plan route(int link, const microbatch_placement& mp, bool backward,
                                 route_options o) const {
    const link_shape& ls = shapes[static_cast<std::size_t>(link)];
    activation_shape a;
    a.hidden = ls.hidden;
    a.elem_size = ls.elem_size;
    a.rows.reserve(mp.samples.size());
    for (const std::uint32_t idx : mp.samples) a.rows.push_back(ls.rows[idx]);
    const route_endpoint up = endpoint(link), down = endpoint(link + 1);
    const sample_placement& pu = mp.module[static_cast<std::size_t>(up.segment)];
    const sample_placement& pd = mp.module[static_cast<std::size_t>(down.segment)];
    o.split = ls.split;
    o.fan_out = true;
    o.backward = backward;
    return backward ? plan_route(layout, down, pd, up, pu, a, o)
                    : plan_route(layout, up, pu, down, pd, a, o);
  }
};

// The messages one rank takes part in on one route, by role: positions
// into the route's messages().
struct rank_messages {
  std::span<const int> recv0, send1, recv1, send0;
};

// Every indexed rank's messages on each of its route slots (bound_rank::routes),
// by role, in one flat array: entry ((rank * slots + slot) * 4 + role) of
// `begin` starts its list in `ids` (roles in rank_messages order).
struct message_lists {
  std::size_t slots = 0;
  std::vector<std::size_t> begin;
  std::vector<int> ids;

  [[nodiscard]] rank_messages at(std::size_t rank, std::size_t slot) const {
    const std::size_t b = (rank * slots + slot) * 4;
    const auto list = [&](std::size_t role) {
      return std::span<const int>(ids).subspan(begin[b + role],
                                               begin[b + role + 1] - begin[b + role]);
    };
    return {list(0), list(1), list(2), list(3)};
  }
  // Messages of `rank` on all its slots.
  [[nodiscard]] std::size_t count(std::size_t rank) const {
    return begin[(rank + 1) * slots * 4] - begin[rank * slots * 4];
  }
};

// Indexes the messages of the routes `for_each_route` visits (as
// fn(microbatch, link, backward, route)) for the ranks `local_of` maps to
// 0..ranks-1 (-1: not indexed), whose chain stages are `stage_of`.
template <class ForEachRoute, class LocalOf>
message_lists index_messages(std::size_t ranks, std::size_t microbatches,
                             const std::vector<int>& stage_of, const ForEachRoute& for_each_route,
                             const LocalOf& local_of) {
  message_lists out;
  out.slots = microbatches * 4;
  out.begin.assign(ranks * out.slots * 4 + 1, 0);
  // Calls fn(entry, position) for each (indexed rank, message) pair, in route order.
  const auto visit = [&](const auto& fn) {
    for_each_route([&](std::size_t j, int link, bool bwd, const route_plan& rp) {
      const auto& ms = rp.messages();
      for (std::size_t i = 0; i < ms.size(); ++i) {
        const route_message& m = ms[i];
        for (const bool sending : {true, false}) {
          const int r = local_of(sending ? m.src : m.dst);
          if (r < 0) continue;
          // Slot of this route for the rank: into its stage (0/3) or out of it (1/2).
          const int c = stage_of[static_cast<std::size_t>(r)];
          const bool into = bwd ? c == link : c == link + 1;
          const int k = bwd ? (into ? 3 : 1) : (into ? 0 : 2);
          const int role = m.phase == 0 ? (sending ? 3 : 0) : (sending ? 1 : 2);
          fn(((static_cast<std::size_t>(r) * out.slots + j * 4 + static_cast<std::size_t>(k)) * 4 +
              static_cast<std::size_t>(role)),
             static_cast<int>(i));
        }
      }
    });
  };
  visit([&](std::size_t e, int) { ++out.begin[e + 1]; });
  for (std::size_t e = 1; e < out.begin.size(); ++e) out.begin[e] += out.begin[e - 1];
  out.ids.resize(out.begin.back());
  std::vector<std::size_t> next(out.begin.begin(), out.begin.end() - 1);
  visit([&](std::size_t e, int i) { out.ids[next[e]++] = i; });
  return out;
}

// Appends one bound op per message of `ids` (positions in `r`'s messages()).
inline void emit_messages(std::vector<bound_op>& out, const route_plan& r, std::span<const int> ids,
                          op_kind kind, int stage, int mb, int link, int tag, bool sending) {
  for (const int i : ids) {
    const route_message& m = r.messages()[static_cast<std::size_t>(i)];
    bound_op b;
    b.op = schedule_op::send(kind, stage, 0, mb, sending ? m.dst : m.src);
    b.bytes = checked_mul(m.elements, static_cast<std::int64_t>(r.elem_size()), "bind.bytes");
    b.tag = tag;
    b.link = link;
    b.phase = m.phase;
    b.message = m.index;
    out.push_back(b);
  }
}

// The bound program of `rank`, of chain stage `c`, with `messages` messages;
// `route(j, k)` gives its route slot k of microbatch j (see
// bound_rank::routes), `msgs(j, k)` its messages there.
template <class Routes, class Msgs>
bound_program emit_program(const bind_context& cx, int rank, int c, std::vector<int> dp_group,
                           std::size_t messages, const Routes& route, const Msgs& msgs) {
  bound_program p;
  p.rank = rank;
  p.chain_stage = c;
  p.dp_group = std::move(dp_group);
  p.ops.reserve(cx.chain.ops[static_cast<std::size_t>(c)].size() + messages);
  const auto M = static_cast<std::size_t>(cx.chain.num_microbatches);
  p.input_elements.assign(M, 0);
  p.output_elements.assign(M, 0);
  for (std::size_t j = 0; j < M; ++j) {
    if (c > 0) p.input_elements[j] = route(j, 0).destination_elements(rank);
    if (c + 1 < cx.stages) p.output_elements[j] = route(j, 2).source_elements(rank);
  }
  const bool upstream_backward = c > 0 && cx.chain.has_backward(c - 1);
  for (const schedule_op& o : cx.chain.ops[static_cast<std::size_t>(c)]) {
    const auto j = static_cast<std::size_t>(o.microbatch);
    const int mb = o.microbatch;
    if (o.kind == op_kind::forward) {
      if (c > 0) {
        const int tag = cx.tags.p2p(schedule_op::send(op_kind::send_act, c - 1, 0, mb, 0));
        const rank_messages in = msgs(j, 0);
        emit_messages(p.ops, route(j, 0), in.recv0, op_kind::recv_act, c - 1, mb, c - 1, tag,
                      false);
        emit_messages(p.ops, route(j, 0), in.send1, op_kind::send_act, c - 1, mb, c - 1, tag, true);
        emit_messages(p.ops, route(j, 0), in.recv1, op_kind::recv_act, c - 1, mb, c - 1, tag,
                      false);
      }
      p.ops.push_back({o});
      if (c + 1 < cx.stages) {
        const int tag = cx.tags.p2p(schedule_op::send(op_kind::send_act, c, 0, mb, 0));
        emit_messages(p.ops, route(j, 2), msgs(j, 2).send0, op_kind::send_act, c, mb, c, tag, true);
      }
    } else if (o.kind == op_kind::backward) {
      if (c + 1 < cx.stages) {
        const int tag = cx.tags.p2p(schedule_op::send(op_kind::send_grad, c + 1, 0, mb, 0));
        const rank_messages in = msgs(j, 3);
        emit_messages(p.ops, route(j, 3), in.recv0, op_kind::recv_grad, c + 1, mb, c, tag, false);
        emit_messages(p.ops, route(j, 3), in.send1, op_kind::send_grad, c + 1, mb, c, tag, true);
        emit_messages(p.ops, route(j, 3), in.recv1, op_kind::recv_grad, c + 1, mb, c, tag, false);
      }
      p.ops.push_back({o});
      if (upstream_backward) {
        const int tag = cx.tags.p2p(schedule_op::send(op_kind::send_grad, c, 0, mb, 0));
        emit_messages(p.ops, route(j, 1), msgs(j, 1).send0, op_kind::send_grad, c, mb, c - 1, tag,
                      true);
      }
    } else if (o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish) {
      bound_op b{o};
      b.tag = cx.tags.bucket(o.bucket);
      p.ops.push_back(b);
    } else {
      p.ops.push_back({o});
    }
  }
  return p;
}

}  // namespace detail

/// @brief The program of global rank `rank` (see the file comment). Throws
/// `invalid_argument` naming the field when the chain, the map or the shapes
/// do not fit the topology (`bind.map.modules`, `bind.shapes[2].rows`, ...)
/// and for a colocated module (bind covers modules that own ranks).
[[nodiscard]] inline bound_rank bind_rank(const topology& topo, const pipeline_schedule& chain,
                                          const reorder_result& map,
                                          const std::vector<link_shape>& shapes, int rank) {
  const detail::bind_context cx(topo, chain, map, shapes);
  detail::require_in_range(rank, 0, topo.world_size() - 1, "bind.rank");
  const topology_coord me = topo.coord(rank);
  const int c = topo.chain_stage(me.module, me.stage);
  const auto M = static_cast<std::size_t>(chain.num_microbatches);
  // The modules at the ends of the rank's links: only their placements are built.
  std::vector<std::size_t> modules;
  for (int e = std::max(c - 1, 0); e <= std::min(c + 1, cx.stages - 1); ++e) {
    const auto m = static_cast<std::size_t>(cx.endpoint(e).segment);
    if (std::find(modules.begin(), modules.end(), m) == modules.end()) modules.push_back(m);
  }
  route_options part;
  part.for_rank = rank;
  bound_rank out;
  out.routes.resize(M * 4);
  for (std::size_t j = 0; j < M; ++j) {
    if (cx.stages < 2) break;
    const microbatch_placement mp = microbatch_placements(map, j, modules);
    for (int k = 0; k < 4; ++k) {
      const int link = k < 2 ? c - 1 : c;
      if (link < 0 || link + 1 >= cx.stages) continue;
      out.routes[j * 4 + static_cast<std::size_t>(k)] = cx.route(link, mp, (k & 1) != 0, part);
    }
  }
  const detail::message_lists msgs = detail::index_messages(
      1, M, {c},
      [&](const auto& fn) {
        for (std::size_t j = 0; j < M; ++j)
          for (int k = 0; k < 4; ++k)
            fn(j, k < 2 ? c - 1 : c, (k & 1) != 0, out.routes[j * 4 + static_cast<std::size_t>(k)]);
      },
      [rank](int r) { return r == rank ? 0 : -1; });
  out.program = detail::emit_program(
      cx, rank, c, topo.dp_group(me.module, me.stage, me.tp_rank), msgs.count(0),
      [&](std::size_t j, int k) -> const route_plan& {
        return out.routes[j * 4 + static_cast<std::size_t>(k)];
      },
      [&](std::size_t j, int k) { return msgs.at(0, j * 4 + static_cast<std::size_t>(k)); });
  return out;
}

/// @brief The programs of every rank (for `validate_bound`, `simulate_bound`
/// and traces); each route is planned once, headers only. Throws like `bind_rank`.
[[nodiscard]] inline bound_world bind_world(const topology& topo, const pipeline_schedule& chain,
                                            const reorder_result& map,
                                            const std::vector<link_shape>& shapes) {
  const detail::bind_context cx(topo, chain, map, shapes);
  const auto M = static_cast<std::size_t>(chain.num_microbatches);
  const auto L = static_cast<std::size_t>(cx.stages > 0 ? cx.stages - 1 : 0);
  // routes[(j * L + link) * 2 + backward]
  std::vector<route_plan> routes(M * L * 2);
  route_options headers;
  headers.headers_only = true;
  for (std::size_t j = 0; j < M && L > 0; ++j) {
    const microbatch_placement mp = microbatch_placements(map, j);
    for (std::size_t l = 0; l < L; ++l)
      for (int bwd = 0; bwd < 2; ++bwd)
        routes[(j * L + l) * 2 + static_cast<std::size_t>(bwd)] =
            cx.route(static_cast<int>(l), mp, bwd != 0, headers);
  }
  const auto R = static_cast<std::size_t>(topo.world_size());
  // Each rank's coordinates and chain stage, computed once.
  std::vector<int> stage_of(R);
  std::vector<topology_coord> coord_of;
  coord_of.reserve(R);
  for (std::size_t r = 0; r < R; ++r) {
    coord_of.push_back(topo.coord(static_cast<int>(r)));
    stage_of[r] = topo.chain_stage(coord_of[r].module, coord_of[r].stage);
  }
  const detail::message_lists msgs = detail::index_messages(
      R, M, stage_of,
      [&](const auto& fn) {
        for (std::size_t j = 0; j < M; ++j)
          for (std::size_t l = 0; l < L; ++l)
            for (int bwd = 0; bwd < 2; ++bwd)
              fn(j, static_cast<int>(l), bwd != 0,
                 routes[(j * L + l) * 2 + static_cast<std::size_t>(bwd)]);
      },
      [](int r) { return r; });
  bound_world w;
  w.name = chain.name;
  w.num_microbatches = chain.num_microbatches;
  w.programs.reserve(R);
  const route_plan none;
  for (std::size_t r = 0; r < R; ++r) {
    const topology_coord& me = coord_of[r];
    const int c = stage_of[r];
    w.programs.push_back(detail::emit_program(
        cx, static_cast<int>(r), c, topo.dp_group(me.module, me.stage, me.tp_rank), msgs.count(r),
        [&](std::size_t j, int k) -> const route_plan& {
          const int link = k < 2 ? c - 1 : c;
          if (link < 0 || static_cast<std::size_t>(link) >= L) return none;
          return routes[(j * L + static_cast<std::size_t>(link)) * 2 +
                        static_cast<std::size_t>(k & 1)];
        },
        [&](std::size_t j, int k) { return msgs.at(r, j * 4 + static_cast<std::size_t>(k)); }));
  }
  return w;
}

/// @brief A bound world as a `pipeline_schedule` whose rank r is global rank
/// r (segment = the module's index among those owning ranks, its stage and
/// replica; TP ranks of a replica share that triple), with each rank's ops.
/// For the views written over schedules: `exec_trace_json` of executed
/// events, `to_trace_json`, the SVG. Not a program to validate or run:
/// `validate_bound` and the executor take the bound world itself.
[[nodiscard]] inline pipeline_schedule as_schedule(const bound_world& w, const topology& t) {
  detail::require(w.world_size() == t.world_size(), "as_schedule", "world of ", w.world_size(),
                  " programs, the topology has ", t.world_size(), " ranks");
  pipeline_schedule s;
  s.name = w.name;
  s.num_stages = t.num_chain_stages();
  s.num_microbatches = w.num_microbatches;
  int first = 0;
  for (const module_id m : t.owning_modules()) {
    const topology_module& g = t.module(m);
    s.segments.push_back({g.name, first, g.pp, g.dp, g.trainable});
    first += g.pp;
  }
  for (const bound_program& p : w.programs) {
    const topology_coord c = t.coord(p.rank);
    s.ranks.push_back({t.owning_index(c.module), p.chain_stage, c.replica.value});
    std::vector<schedule_op> ops;
    ops.reserve(p.ops.size());
    for (const bound_op& b : p.ops) ops.push_back(b.op);
    s.ops.push_back(std::move(ops));
  }
  return s;
}

}  // namespace disttrain
