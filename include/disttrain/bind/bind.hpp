#pragma once
/// @file bind.hpp
/// @brief The bind step: (topology, chain schedule, the batch's sample map,
/// activation shapes) -> the program of each global rank, with every message's
/// real peer, bytes and tag (schedule/bound_program.hpp).
///
/// ## Interleaving
/// A module with `chunks` > 1 (topology.hpp, "Virtual stages") runs its chunks
/// as separate virtual stages: links join consecutive virtual stages (chunk c
/// on the module's last stage sends to chunk c + 1 on its first), a rank's
/// routes and buffers are per (microbatch, chunk), and message tags name the
/// producing virtual stage. Without chunks, virtual stages are chain stages
/// and everything below reads as written.
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
/// are not kept), records each message once and writes its two ops straight
/// into their programs, where a per-(rank, microbatch, slot, role) count put
/// them (bind/detail/bind_ranks.hpp). A message's `bound_op::message` is its
/// index in the whole route either way, so `bind_rank(..., r).program ==
/// bind_world(...).programs[r]`.
///
/// @snippet bind.cpp bind_file

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/bind/detail/bind_ranks.hpp"
#include "disttrain/bind/link_shape.hpp"
#include "disttrain/bind/topology_views.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/message_tags.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief A rank's bound program and the routes its messages belong to.
struct bound_rank {
  bound_program program;
  /// Per microbatch j and chunk c, slot `(j * chunks + c) * 4 + k`: k = 0
  /// the forward routes into the chunk's virtual stage, 1 the backward routes
  /// out of it (input gradient), 2 the forward routes out of it, 3 the
  /// backward routes into it (output gradient); one route per field of the
  /// link (`plan_routes`; a gradient route of a field that is not
  /// differentiable moves nothing), each the rank's part of the route
  /// (`route_plan::for_rank`). Slots a stage has no link for are empty.
  std::vector<std::vector<route_plan>> routes;

  /// @brief Slot in `routes` of microbatch j's route across `link` (forward
  /// or `backward`), for this rank at one of its ends.
  [[nodiscard]] std::size_t slot_of(std::size_t j, int link, bool backward) const {
    const auto [chunk, upstream] = program.chunk_at_link(link);
    const int k = backward ? (upstream ? 3 : 1) : (upstream ? 2 : 0);
    return (j * static_cast<std::size_t>(program.chunks()) + static_cast<std::size_t>(chunk)) * 4 +
           static_cast<std::size_t>(k);
  }
  /// @brief The routes (one per field of its link) a point-to-point op of
  /// the program belongs to.
  [[nodiscard]] std::span<const route_plan> routes_of(const bound_op& b) const {
    require(is_p2p(b.op.kind) && b.op.microbatch >= 0, "bound_rank.routes_of", "op ",
            describe(b.op), " is not point-to-point");
    const bool grad = b.op.kind == op_kind::send_grad || b.op.kind == op_kind::recv_grad;
    return routes.at(slot_of(static_cast<std::size_t>(b.op.microbatch), b.link, grad));
  }
  /// @brief The route of field `field` a point-to-point op belongs to.
  [[nodiscard]] const route_plan& route_of(const bound_op& b, std::size_t field = 0) const {
    const std::span<const route_plan> rs = routes_of(b);
    require(field < rs.size(), "bound_rank.field", "field ", field, " of op ", describe(b.op),
            ", whose link has ", rs.size(), " fields");
    return rs[field];
  }
  /// @brief Field `field`'s part of the message of a point-to-point op.
  [[nodiscard]] const route_message& message_of(const bound_op& b, std::size_t field = 0) const {
    return route_of(b, field).message(b.message);
  }
  /// @brief Byte offset of field `field`'s part in the message of `b`; for
  /// `field` equal to the link's field count, the message's bytes.
  [[nodiscard]] std::int64_t field_offset(const bound_op& b, std::size_t field) const;
};

inline std::int64_t bound_rank::field_offset(const bound_op& b, std::size_t field) const {
  const std::span<const route_plan> rs = routes_of(b);
  require_in_range(field, std::size_t{0}, rs.size(), "bound_rank.field");
  return detail::part_offset(rs, field,
                             [&](std::size_t f) { return rs[f].message(b.message).elements; });
}

/// @brief The program of global rank `rank` (see the file comment). Throws
/// `invalid_argument` naming the field when the chain, the map or the shapes
/// do not fit the topology (`bind.map.modules`, `bind.shapes[2].rows`, ...)
/// and for a colocated module (bind covers modules that own ranks).
[[nodiscard]] inline bound_rank bind_rank(const topology& topo, const pipeline_schedule& chain,
                                          const reorder_result& map,
                                          const std::vector<link_shape>& shapes, int rank) {
  const detail::bind_context cx(topo, chain, map, shapes);
  require_in_range(rank, 0, topo.world_size() - 1, "bind.rank");
  const topology_coord me = topo.coord(rank);
  const int c = topo.chain_stage(me.module, me.stage);
  const auto M = static_cast<std::size_t>(chain.num_microbatches);
  route_options part;
  part.for_rank = rank;
  bound_rank out;
  // The links into and out of each of the rank's virtual stages.
  std::vector<int> links;
  for (int k = 0; k < topo.chunks_of(c); ++k) {
    const int v = topo.virtual_stage(me.module, me.stage, k);
    if (v > 0) links.push_back(v - 1);
    if (v + 1 < cx.vstages) links.push_back(v);
  }
  std::sort(links.begin(), links.end());
  std::vector<bound_program> programs;
  detail::bind_ranks(
      cx, {rank}, links, part,
      [&](std::size_t j, int link, bool bwd, auto&& r) {  // a copied link's: const&
        out.routes[out.slot_of(j, link, bwd)] = std::forward<decltype(r)>(r);
      },
      [&](const bound_program& p) {
        out.program.virtual_stages = p.virtual_stages;
        out.routes.resize(M * p.virtual_stages.size() * 4);
      },
      programs);
  out.program = std::move(programs.front());
  return out;
}

/// @brief The programs of every rank (for `validate_bound`, `simulate_bound`
/// and traces) into `w`, reusing its storage: a training loop that binds
/// every iteration's batch into the same world allocates (and touches fresh
/// memory) only where a program grew. Each route is planned once, headers
/// only, and dropped after its microbatch. Throws like `bind_rank` (`w` is
/// then unspecified).
inline void bind_world(const topology& topo, const pipeline_schedule& chain,
                       const reorder_result& map, const std::vector<link_shape>& shapes,
                       bound_world& w) {
  const detail::bind_context cx(topo, chain, map, shapes);
  std::vector<int> ranks(static_cast<std::size_t>(topo.world_size()));
  for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  std::vector<int> links(static_cast<std::size_t>(std::max(topo.num_links(), 0)));
  for (std::size_t l = 0; l < links.size(); ++l) links[l] = static_cast<int>(l);
  route_options headers;
  headers.headers_only = true;
  w.name = chain.name;
  w.num_microbatches = chain.num_microbatches;
  detail::bind_ranks(
      cx, ranks, links, headers, [](std::size_t, int, bool, const std::vector<route_plan>&) {},
      [](const bound_program&) {}, w.programs);
}

/// @brief The programs of every rank, in a new world (see the overload above).
[[nodiscard]] inline bound_world bind_world(const topology& topo, const pipeline_schedule& chain,
                                            const reorder_result& map,
                                            const std::vector<link_shape>& shapes) {
  bound_world w;
  bind_world(topo, chain, map, shapes, w);
  return w;
}

/// @brief A bound world as a `pipeline_schedule` whose rank r is global rank
/// r (segment = the module's index among those owning ranks, its stage and
/// replica; TP ranks of a replica share that triple), with each rank's ops.
/// For the views written over schedules: `exec_trace_json` of executed
/// events, `to_trace_json`, the SVG. Not a program to validate or run:
/// `validate_bound` and the executor take the bound world itself.
[[nodiscard]] inline pipeline_schedule as_schedule(const bound_world& w, const topology& t) {
  require(w.world_size() == t.world_size(), "as_schedule", "world of ", w.world_size(),
          " programs, the topology has ", t.world_size(), " ranks");
  pipeline_schedule s;
  s.name = w.name;
  s.num_stages = t.num_chain_stages();
  s.num_microbatches = w.num_microbatches;
  for (const module_id m : t.owning_modules()) {
    const topology_module& g = t.module(m);
    s.segments.push_back(schedule_segment(g));
    s.num_chunks = std::max(s.num_chunks, g.chunks);
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
