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
/// are not kept), and hands each message to its two ranks through one flat
/// index. A message's `bound_op::message` is its index in the whole route
/// either way, so `bind_rank(..., r).program == bind_world(...).programs[r]`.
///
/// @snippet bind.cpp bind_file

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "disttrain/bind/placement.hpp"
#include "disttrain/bind/topology_views.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/rng.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/message_tags.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief One named tensor of a link's activation (`link_shape`).
struct link_field {
  std::string name = "hidden";     ///< unique within its link
  std::int64_t hidden = 1;         ///< elements per row
  std::size_t elem_size = 4;       ///< bytes per element
  std::vector<std::int64_t> rows;  ///< per sample of the map (index into reorder_result::samples)
  split_axis split = split_axis::hidden;  ///< how a sample is sliced across TP ranks
  /// Its gradient flows back along the reversed route (hidden states). A
  /// field that is not (position ids, sequence lengths, masks, offsets)
  /// travels forward only: its part of every gradient message is empty.
  bool differentiable = true;

  friend bool operator==(const link_field&, const link_field&) = default;
};

/// @brief The activation crossing one link (virtual stage v -> v + 1): one
/// or more named fields (hidden states, position ids, sequence lengths, ...).
/// Every field travels along the same sample map with one message set
/// (`plan_routes`): a message of the link packs, per field in order, its
/// part of that message, each part starting at a multiple of
/// `field_alignment` bytes (`bound_rank::field_offset`). One field is the
/// single-tensor link, packed as before.
struct link_shape {
  std::vector<link_field> fields;

  friend bool operator==(const link_shape&, const link_shape&) = default;
};

/// @brief Byte alignment of the second and later fields' parts in a message.
inline constexpr std::int64_t field_alignment = 16;

/// @brief Index of the field named `name` in `shape`; throws
/// `invalid_argument` at `link_shape.fields` listing the names there are.
[[nodiscard]] inline std::size_t field_index(const link_shape& shape, std::string_view name) {
  for (std::size_t f = 0; f < shape.fields.size(); ++f)
    if (shape.fields[f].name == name) return f;
  std::string names;
  for (const link_field& f : shape.fields)
    names += cat(names.empty() ? "" : ", ", "'", f.name, "'");
  fail(errc::invalid_argument, "link_shape.fields", "no field '", name, "' (fields: ", names, ")");
}

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

namespace detail {

// Everything bind needs, checked once.
struct bind_context {
  const topology& topo;
  const pipeline_schedule& chain;
  const reorder_result& map;
  const std::vector<link_shape>& shapes;
  message_tags tags;
  int stages = 0;
  int vstages = 0;  // virtual stages (the path)

  bind_context(const topology& t, const pipeline_schedule& c, const reorder_result& m,
               const std::vector<link_shape>& s)
      : topo(t),
        chain(c),
        map(m),
        shapes(s),
        tags(t.num_virtual_stages(), c.num_microbatches),
        stages(t.num_chain_stages()),
        vstages(t.num_virtual_stages()) {
    bool same = c.num_stages == stages && c.num_ranks() == stages &&
                c.segments.size() == t.owning_modules().size();
    for (std::size_t k = 0; same && k < c.segments.size(); ++k)
      same = c.segments[k].chunks == t.module(t.owning_modules()[k]).chunks;
    require(same, "bind.chain", "is not the chain of this topology (", stages,
            " stages, one rank each, the modules' chunks; build it with chain_program)");
    require(m.modules == t.owning_modules().size(), "bind.map.modules", "the sample map has ",
            m.modules, " modules, the topology ", t.owning_modules().size(),
            " that own ranks (colocated modules are not reorder "
            "modules: derive the options with reorder_options_of)");
    for (std::size_t k = 0; k < m.modules; ++k)
      require(
          k < m.dp.size() &&
              m.dp[k] == static_cast<std::uint32_t>(t.module(t.owning_modules()[k]).dp),
          [&] { return cat("bind.map.dp[", k, "]"); }, "the sample map's DP differs from module '",
          t.module(t.owning_modules()[k]).name, "'s");
    require(m.microbatches == static_cast<std::uint32_t>(c.num_microbatches),
            "bind.map.microbatches", "the sample map has ", m.microbatches,
            " microbatches, the chain ", c.num_microbatches);
    require(s.size() == static_cast<std::size_t>(t.num_links()), "bind.shapes", "has ", s.size(),
            " entries, need one per link (", t.num_links(), ")");
    for (std::size_t l = 0; l < s.size(); ++l) {
      const std::vector<link_field>& fs = s[l].fields;
      require(
          !fs.empty(), [&] { return cat("bind.shapes[", l, "].fields"); },
          "is empty: a link carries at least one field");
      for (std::size_t f = 0; f < fs.size(); ++f) {
        const auto where = [&] { return cat("bind.shapes[", l, "].fields[", f, "]"); };
        require(
            fs[f].rows.size() == m.samples.size(), [&] { return cat(where(), ".rows"); }, "has ",
            fs[f].rows.size(), " entries, the map has ", m.samples.size(), " samples");
        require(
            !fs[f].name.empty(), [&] { return cat(where(), ".name"); }, "is empty");
        for (std::size_t g = 0; g < f; ++g)
          require(
              fs[g].name != fs[f].name, [&] { return cat(where(), ".name"); }, "'", fs[f].name,
              "' is also field ", g, "'s name");
      }
    }
  }

  // The (module, stage) at virtual stage v.
  [[nodiscard]] route_endpoint endpoint(int v) const {
    const auto [m, s] = topo.chain_at(topo.virtual_at(v).first);
    return {m, s};
  }
  // The routes of `link` in microbatch j (one per field), forward or
  // backward, into `out`; `o` gives for_rank and headers_only.
  void routes(int link, const microbatch_placement& mp, bool backward, route_options o,
              std::vector<route_plan>& out) const {
    const std::vector<link_field>& fs = shapes[static_cast<std::size_t>(link)].fields;
    const route_endpoint up = endpoint(link), down = endpoint(link + 1);
    const sample_placement& pu = mp.module[static_cast<std::size_t>(topo.owning_index(up.module))];
    const sample_placement& pd =
        mp.module[static_cast<std::size_t>(topo.owning_index(down.module))];
    const auto [from, pf, to, pt] =
        backward ? std::tuple{down, &pd, up, &pu} : std::tuple{up, &pu, down, &pd};
    o.fan_out = true;
    o.backward = backward;
    // The field's rows in the microbatch (none for the gradient of a field
    // that is not differentiable).
    const auto shape_of = [&](const link_field& f) {
      activation_shape a;
      a.hidden = f.hidden;
      a.elem_size = f.elem_size;
      a.rows.reserve(mp.samples.size());
      for (const std::uint32_t idx : mp.samples)
        a.rows.push_back(backward && !f.differentiable ? 0 : f.rows[idx]);
      return a;
    };
    std::vector<route_field> fields;
    fields.reserve(fs.size());
    for (const link_field& f : fs) fields.push_back({shape_of(f), f.split});
    out = plan_routes(topo, from, *pf, to, *pt, fields, o);
  }
};

// Offset of part `field` of a message of routes `rs` (`field ==
// rs.size()`: the message's bytes), `elements(f)` giving field f's elements
// in it: part 0 at 0, each later part where its predecessor ends, rounded up
// to field_alignment.
template <class Elements>
std::int64_t part_offset(std::span<const route_plan> rs, std::size_t field,
                         const Elements& elements) {
  std::int64_t start = 0;
  for (std::size_t f = 0; f < field; ++f) {
    const std::int64_t end = checked_add(
        start, checked_mul(elements(f), static_cast<std::int64_t>(rs[f].elem_size()), "bind.bytes"),
        "bind.bytes");
    if (f + 1 == rs.size()) return end;  // the last part: the message ends with it
    start =
        checked_add(end, (field_alignment - end % field_alignment) % field_alignment, "bind.bytes");
  }
  return start;
}

// One message of a rank on one route: what its bound op needs (its phase
// is its list's: rank_messages).
struct rank_message {
  std::int64_t bytes = 0;   // all fields' parts
  std::uint64_t stamp = 0;  // route_plan::stamp (bound_op::stamp)
  int peer = -1;            // the other end
  int index = -1;           // in the whole route (bound_op::message)
};

// The messages one rank takes part in on one route, by role.
struct rank_messages {
  std::span<const rank_message> recv0, send1, recv1, send0;  // 0/1: the phase
};

// Every indexed rank's messages on each of its route slots (bound_rank::routes
// of one microbatch), by role, in one flat array: entry ((rank * slots +
// slot) * 4 + role) of `begin` starts its list in `messages` (roles in
// rank_messages order).
struct message_lists {
  std::size_t slots = 0;
  std::vector<std::uint32_t> begin;
  std::vector<rank_message> messages;

  [[nodiscard]] rank_messages at(std::size_t rank, std::size_t slot) const {
    const std::size_t b = (rank * slots + slot) * 4;
    const auto list = [&](std::size_t role) {
      return std::span<const rank_message>(messages).subspan(begin[b + role],
                                                             begin[b + role + 1] - begin[b + role]);
    };
    return {list(0), list(1), list(2), list(3)};
  }
  // Messages of `rank` on all its slots.
  [[nodiscard]] std::size_t count(std::size_t rank) const {
    return begin[(rank + 1) * slots * 4] - begin[rank * slots * 4];
  }
};

// Per (link, direction, indexed rank at an end of the link), the first of
// its 4 role entries in a `message_lists` index: ((rank * slots + chunk * 4
// + k) * 4) with k the route slot (into its virtual stage: 0 forward, 3
// backward; out of it: 2 forward, 1 backward); `none` for a rank at neither
// end. Computed once per bind, so indexing a message is a table lookup.
struct slot_table {
  static constexpr std::uint32_t none = UINT32_MAX;
  std::size_t ranks = 0;
  std::vector<std::uint32_t> base;  // ((link * 2 + backward) * ranks + rank)

  [[nodiscard]] std::uint32_t at(int link, bool bwd, int rank) const noexcept {
    return base[(static_cast<std::size_t>(link) * 2 + (bwd ? 1U : 0U)) * ranks +
                static_cast<std::size_t>(rank)];
  }
};

// The slot table of the indexed programs `progs` (virtual stages set), with
// `slots` route slots per rank, over links 0 .. num_links - 1.
inline slot_table make_slot_table(std::span<const bound_program> progs, std::size_t slots,
                                  int num_links) {
  slot_table t;
  t.ranks = progs.size();
  t.base.assign(static_cast<std::size_t>(std::max(num_links, 0)) * 2 * t.ranks, slot_table::none);
  for (std::size_t r = 0; r < progs.size(); ++r) {
    const std::vector<int>& vs = progs[r].virtual_stages;
    for (std::size_t c = 0; c < vs.size(); ++c)
      for (const bool upstream : {true, false}) {
        const int link = upstream ? vs[c] : vs[c] - 1;
        if (link < 0 || link >= num_links) continue;
        for (const bool bwd : {false, true}) {
          const std::size_t k = bwd ? (upstream ? 3 : 1) : (upstream ? 2 : 0);
          const std::size_t e = (r * slots + c * 4 + k) * 4;
          ensure(e < slot_table::none, "bind.messages", "more than 2^32 index entries");
          t.base[(static_cast<std::size_t>(link) * 2 + (bwd ? 1U : 0U)) * t.ranks + r] =
              static_cast<std::uint32_t>(e);
        }
      }
  }
  return t;
}

// Indexes the messages of the routes `for_each_route` visits (as
// fn(link, backward, routes), one route per field, one microbatch) for the ranks `local_of` maps to
// 0..table.ranks-1 (-1: not indexed), with `slots` route slots per rank (4
// per chunk) placed by `table`: a counting sort from route order to (rank,
// slot, role) order, which keeps route order. Two visits of the routes
// (count, then fill: cheaper than buffering the entries); the fill computes
// each message's stamp once.
template <class ForEachRoute, class LocalOf>
message_lists index_messages(const slot_table& table, std::size_t slots,
                             const ForEachRoute& for_each_route, const LocalOf& local_of) {
  message_lists out;
  out.slots = slots;
  out.begin.assign(table.ranks * out.slots * 4 + 1, 0);
  // Calls fn(entry, message, sending) for each (indexed rank, message).
  const auto visit = [&](const auto& fn) {
    for_each_route([&](int link, bool bwd, std::span<const route_plan> rs) {
      const std::vector<route_message>& ms = rs[0].messages();
      for (std::size_t i = 0; i < ms.size(); ++i) {
        const route_message& m = ms[i];
        // Roles in rank_messages order: recv0, send1, recv1, send0.
        if (const int r = local_of(m.src); r >= 0)
          fn(std::size_t{table.at(link, bwd, r)} + (m.phase == 0 ? 3U : 1U), rs, i, true);
        if (const int r = local_of(m.dst); r >= 0)
          fn(std::size_t{table.at(link, bwd, r)} + (m.phase == 0 ? 0U : 2U), rs, i, false);
      }
    });
  };
  bool outside = false;  // a message of a rank at neither end of its link
  visit([&](std::size_t e, std::span<const route_plan>, std::size_t, bool) {
    outside |= e >= slot_table::none;
    ++out.begin[std::min<std::size_t>(e, out.begin.size() - 2) + 1];
  });
  ensure(!outside, "bind.messages", "a route has a message of a rank at neither end of its link");
  std::size_t total = 0;  // the partial sums grow: the last one fitting checks them all
  for (std::uint32_t& b : out.begin) {
    total += b;
    b = static_cast<std::uint32_t>(total);
  }
  ensure(total <= UINT32_MAX, "bind.messages", "more than 2^32 messages in one index");
  out.messages.resize(out.begin.back());
  // begin[e] is entry e's fill cursor, then (shifted back by one entry) its start again.
  // The sender's entry comes first: its stamp and bytes are reused.
  const route_message* last = nullptr;
  std::uint64_t stamp = 0;
  std::int64_t bytes = 0;
  visit([&](std::size_t e, std::span<const route_plan> rs, std::size_t i, bool sending) {
    const route_message& m = rs[0].messages()[i];
    if (&m != last) {
      stamp = rs[0].stamp(m);
      for (std::size_t f = 1; f < rs.size(); ++f)
        stamp = splitmix64::mix(stamp ^ rs[f].stamp(rs[f].messages()[i]));
      bytes =
          part_offset(rs, rs.size(), [&](std::size_t f) { return rs[f].messages()[i].elements; });
      last = &m;
    }
    out.messages[out.begin[e]++] = rank_message{bytes, stamp, sending ? m.dst : m.src, m.index};
  });
  for (std::size_t e = out.begin.size() - 1; e > 0; --e) out.begin[e] = out.begin[e - 1];
  out.begin[0] = 0;
  return out;
}

// Where a transfer's messages sit: the chain stage and chunk of the op that
// produced the tensor, the microbatch, the link whose shape it moves and the
// tag its messages carry. Named fields, so that the stage and the link
// (often adjacent numbers) cannot be swapped unseen.
struct message_site {
  int stage = 0;
  int chunk = 0;
  int microbatch = 0;
  int link = 0;
  int tag = 0;
};

// Appends one bound op per message of `ms`: `kind` in route phase `phase` at `at`.
inline void emit_messages(std::vector<bound_op>& out, const message_site& at,
                          std::span<const rank_message> ms, int phase, op_kind kind) {
  for (const rank_message& m : ms) {
    bound_op b;
    b.op = schedule_op::send(kind, at.stage, at.chunk, at.microbatch, m.peer);
    b.bytes = m.bytes;
    b.tag = at.tag;
    b.link = at.link;
    b.phase = phase;
    b.message = m.index;
    // The route's stamp tells plans apart, the tag (virtual stage, direction,
    // microbatch) messages of one plan: microbatches of equal shapes have
    // equal route stamps, and NCCL matches by issue order, not by tag.
    b.stamp = splitmix64::mix(m.stamp ^ static_cast<std::uint64_t>(at.tag));
    out.push_back(b);
  }
}

// Fills the ops of `p` (rank, chain stage p.chain_stage, virtual stages
// p.virtual_stages), which has `messages` messages; `msgs(j, c, k)` gives its
// messages on route slot k of chunk c in microbatch j (see bound_rank::routes).
template <class Msgs>
void emit_program(const bind_context& cx, bound_program& p, std::size_t messages,
                  const Msgs& msgs) {
  p.ops.reserve(cx.chain.ops[static_cast<std::size_t>(p.chain_stage)].size() + messages);
  // The site of the tensor produced at virtual stage `v` (an activation
  // crosses link v, a gradient link v - 1).
  const auto site = [&](int v, bool grad, int mb) {
    const int link = grad ? v - 1 : v;
    const auto [stage, chunk] = cx.topo.virtual_at(v);
    return message_site{.stage = stage,
                        .chunk = chunk,
                        .microbatch = mb,
                        .link = link,
                        .tag = cx.tags.p2p(v, grad, mb)};
  };
  for (const schedule_op& o : cx.chain.ops[static_cast<std::size_t>(p.chain_stage)]) {
    const auto j = static_cast<std::size_t>(o.microbatch);
    const int mb = o.microbatch;
    const int v = o.kind == op_kind::forward || o.kind == op_kind::backward
                      ? p.virtual_stages.at(static_cast<std::size_t>(o.chunk))
                      : -1;
    if (o.kind == op_kind::forward) {
      if (v > 0) {
        const message_site at = site(v - 1, false, mb);
        const rank_messages in = msgs(j, o.chunk, 0);
        emit_messages(p.ops, at, in.recv0, 0, op_kind::recv_act);
        emit_messages(p.ops, at, in.send1, 1, op_kind::send_act);
        emit_messages(p.ops, at, in.recv1, 1, op_kind::recv_act);
      }
      p.ops.push_back({o});
      if (v + 1 < cx.vstages)
        emit_messages(p.ops, site(v, false, mb), msgs(j, o.chunk, 2).send0, 0, op_kind::send_act);
    } else if (o.kind == op_kind::backward) {
      if (v + 1 < cx.vstages) {
        const message_site at = site(v + 1, true, mb);
        const rank_messages in = msgs(j, o.chunk, 3);
        emit_messages(p.ops, at, in.recv0, 0, op_kind::recv_grad);
        emit_messages(p.ops, at, in.send1, 1, op_kind::send_grad);
        emit_messages(p.ops, at, in.recv1, 1, op_kind::recv_grad);
      }
      p.ops.push_back({o});
      if (v > 0 && cx.chain.has_backward(v - 1))
        emit_messages(p.ops, site(v, true, mb), msgs(j, o.chunk, 1).send0, 0, op_kind::send_grad);
    } else if (o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish) {
      bound_op b{o};
      b.tag = cx.tags.bucket(o.bucket);
      p.ops.push_back(b);
    } else {
      p.ops.push_back({o});
    }
  }
}

// Binds the ranks `ranks` (all of whose links are in `links`, ascending):
// per microbatch, plans the routes of `links` with `opts` (one rank's part,
// or headers only for the world), records the ranks' buffer sizes, indexes
// the ranks' messages and hands each link's routes (one per field) to
// `keep(j, link, backward, routes)` (an rvalue, or a const reference for a
// link whose routes are an earlier link's); then emits each rank's program. `ready(program)` sees each
// program once its rank, stages and chunks are set, before any `keep`.
template <class Keep, class Ready>
void bind_ranks(const bind_context& cx, const std::vector<int>& ranks,
                const std::vector<int>& links, route_options opts, const Keep& keep,
                const Ready& ready, std::vector<bound_program>& out) {
  const topology& topo = cx.topo;
  const auto M = static_cast<std::size_t>(cx.chain.num_microbatches);
  const std::size_t N = ranks.size();
  std::vector<int> local_of(static_cast<std::size_t>(topo.world_size()), -1);
  out.resize(N);  // programs already there keep their storage
  std::size_t max_chunks = 1;
  for (std::size_t i = 0; i < N; ++i) {
    const int r = ranks[i];
    local_of[static_cast<std::size_t>(r)] = static_cast<int>(i);
    const topology_coord me = topo.coord(r);
    bound_program& p = out[i];
    p.rank = r;
    p.chain_stage = topo.chain_stage(me.module, me.stage);
    p.ops.clear();
    p.virtual_stages.clear();
    for (int k = 0; k < topo.chunks_of(p.chain_stage); ++k)
      p.virtual_stages.push_back(topo.virtual_stage(me.module, me.stage, k));
    max_chunks = std::max(max_chunks, p.virtual_stages.size());
    p.dp_group = topo.dp_group(me.module, me.stage, me.tp_rank);
    p.control_tag = cx.tags.control();
    p.fields = 1;
    for (const int v : p.virtual_stages)
      for (const int link : {v - 1, v})
        if (link >= 0 && link + 1 < cx.vstages)
          p.fields = std::max(
              p.fields, static_cast<int>(cx.shapes[static_cast<std::size_t>(link)].fields.size()));
    const std::size_t entries = M * p.virtual_stages.size() * static_cast<std::size_t>(p.fields);
    p.input_elements.assign(entries, 0);
    p.output_elements.assign(entries, 0);
    ready(std::as_const(p));
  }
  const auto local = [&](int r) { return local_of[static_cast<std::size_t>(r)]; };
  // The modules at the ends of the links: only their placements are built.
  std::vector<std::size_t> modules;
  for (const int l : links)
    for (const int e : {l, l + 1}) {
      const auto m = static_cast<std::size_t>(topo.owning_index(cx.endpoint(e).module));
      if (std::find(modules.begin(), modules.end(), m) == modules.end()) modules.push_back(m);
    }
  // Links whose route is an earlier link's (an interleaved module's chunks
  // cross the same two stages with the same activation): planned once per
  // microbatch, then copied.
  std::vector<std::ptrdiff_t> same(links.size(), -1);
  for (std::size_t i = 0; i < links.size(); ++i)
    for (std::size_t k = 0; k < i && same[i] < 0; ++k) {
      const route_endpoint a = cx.endpoint(links[i]), b = cx.endpoint(links[k]);
      const route_endpoint a2 = cx.endpoint(links[i] + 1), b2 = cx.endpoint(links[k] + 1);
      if (a.module == b.module && a.stage == b.stage && a2.module == b2.module &&
          a2.stage == b2.stage &&
          cx.shapes[static_cast<std::size_t>(links[i])] ==
              cx.shapes[static_cast<std::size_t>(links[k])])
        same[i] = static_cast<std::ptrdiff_t>(k);
    }
  // Per microbatch, slots 0..3 of each chunk; a chain of one stage (every
  // module on the same GPUs, pp 1) has no link, and its lists are empty, not missing.
  std::vector<message_lists> lists(M);
  const slot_table table =
      make_slot_table(std::span<const bound_program>(out), max_chunks * 4, topo.num_links());
  // Per link and direction, one route per field; a copied link's stay empty.
  std::vector<std::vector<route_plan>> routes(links.size() * 2);
  const auto route_of = [&](std::size_t i, int bwd) -> const std::vector<route_plan>& {
    const std::size_t owner = same[i] < 0 ? i : static_cast<std::size_t>(same[i]);
    return routes[owner * 2 + static_cast<std::size_t>(bwd)];
  };
  for (std::size_t j = 0; j < M; ++j) {
    const microbatch_placement mp =
        links.empty() ? microbatch_placement{} : microbatch_placements(cx.map, j, modules);
    for (std::size_t i = 0; i < links.size(); ++i)
      for (int bwd = 0; bwd < 2; ++bwd) {
        if (same[i] < 0)
          cx.routes(links[i], mp, bwd != 0, opts, routes[i * 2 + static_cast<std::size_t>(bwd)]);
        const std::vector<route_plan>& rs = route_of(i, bwd);
        if (bwd != 0) continue;
        // A forward route's receivers hold its destination buffer as their
        // input, its senders its source buffer as their output (per field;
        // every field's route has the same ranks).
        for (const route_rank_info& info : rs[0].ranks()) {
          const int r = local(info.rank);
          if (r < 0) continue;
          bound_program& p = out[static_cast<std::size_t>(r)];
          const auto at = (j * p.virtual_stages.size() +
                           static_cast<std::size_t>(p.chunk_at_link(links[i]).first)) *
                          static_cast<std::size_t>(p.fields);
          for (std::size_t f = 0; f < rs.size(); ++f) {
            if (info.dst_rows >= 0)
              p.input_elements[at + f] = rs[f].destination_elements(info.rank);
            if (info.src_rows >= 0) p.output_elements[at + f] = rs[f].source_elements(info.rank);
          }
        }
      }
    lists[j] = index_messages(
        table, max_chunks * 4,
        [&](const auto& fn) {
          for (std::size_t i = 0; i < links.size(); ++i)
            for (int bwd = 0; bwd < 2; ++bwd) fn(links[i], bwd != 0, route_of(i, bwd));
        },
        local);
    // Copied links first (by reference to their owner's route), then the
    // owners hand theirs over.
    for (std::size_t i = 0; i < links.size(); ++i)
      for (int bwd = 0; bwd < 2; ++bwd)
        if (same[i] >= 0) keep(j, links[i], bwd != 0, route_of(i, bwd));
    for (std::size_t i = 0; i < links.size(); ++i)
      for (int bwd = 0; bwd < 2; ++bwd)
        if (same[i] < 0)
          keep(j, links[i], bwd != 0, std::move(routes[i * 2 + static_cast<std::size_t>(bwd)]));
  }
  for (std::size_t i = 0; i < N; ++i) {
    std::size_t messages = 0;
    for (const message_lists& ml : lists) messages += ml.count(i);
    emit_program(cx, out[i], messages, [&](std::size_t j, int chunk, int k) {
      return lists[j].at(i, static_cast<std::size_t>(chunk * 4 + k));
    });
  }
}

}  // namespace detail

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
