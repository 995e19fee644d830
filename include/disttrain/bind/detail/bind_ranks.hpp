#pragma once
/// @file bind_ranks.hpp
/// @brief Internals of bind/bind.hpp: the checked inputs (`bind_context`) and
/// `bind_ranks`, which binds a set of ranks (one for `bind_rank`, all for
/// `bind_world`).
///
/// ## How a program is assembled
/// A rank's program is its chain stage's ops with, around each forward and
/// backward op, the messages that op receives (before it) and sends (after
/// it), grouped by route slot (bound_rank::routes) and role (`msg_role`).
/// `bind_ranks` gets there in three passes, without sorting messages:
/// 1. per microbatch, plan the routes (through one `skeleton_cache`: a
///    link's gradient route and the links between stages of one module
///    number their messages once); record each message once
///    (`message_record`: its ranks, bytes, stamp) and count, per (rank,
///    microbatch, slot, role) cell (`message_cells`), the messages there;
/// 2. per rank, lay out its program (`walk_program`): from the counts, every
///    chain op's position and every cell's first position;
/// 3. per recorded message, write its two ops where their cells point.
/// A cell keeps route order, and the program order is `walk_program`'s, the
/// one place that says where messages sit.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "disttrain/bind/link_shape.hpp"
#include "disttrain/bind/placement.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/rng.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/message_tags.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain::detail {

// Everything bind needs, checked once.
struct bind_context {
  const topology& topo;
  const pipeline_schedule& chain;
  const reorder_result& map;
  const std::vector<link_shape>& shapes;
  message_tags tags;
  int stages = 0;
  int vstages = 0;                 // virtual stages (the path)
  std::vector<char> has_backward;  // per virtual stage: chain.has_backward

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
    for (int v = 0; v < vstages; ++v) has_backward.push_back(c.has_backward(v) ? 1 : 0);
  }

  // The (module, stage) at virtual stage v.
  [[nodiscard]] route_endpoint endpoint(int v) const {
    const auto [m, s] = topo.chain_at(topo.virtual_at(v).first);
    return {m, s};
  }
  // The routes of `link` in microbatch j (one per field), forward or
  // backward, into `out`; `o` gives for_rank and headers_only; `cache`: the
  // skeletons of the microbatch's routes planned so far.
  void routes(int link, const microbatch_placement& mp, bool backward, route_options o,
              skeleton_cache& cache, std::vector<route_plan>& out) const {
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
    out = plan_routes_cached(topo, from, *pf, to, *pt, fields, o, cache);
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

// A rank's role in one message, in the order of its program: received in
// the crossing, sent and received in the TP fan-out (all before the op that
// consumes the tensor), sent in the crossing (after the op that produced it).
enum class msg_role : std::uint8_t { recv0, send1, recv1, send0 };

[[nodiscard]] constexpr msg_role role_of(bool sending, int phase) noexcept {
  if (sending) return phase == 0 ? msg_role::send0 : msg_role::send1;
  return phase == 0 ? msg_role::recv0 : msg_role::recv1;
}

// One message of a route, recorded once per bind: what its two ops need.
struct message_record {
  std::int64_t bytes = 0;   // all fields' parts
  std::uint64_t stamp = 0;  // the fields' route stamps mixed (before the tag)
  int src = -1;             // sending global rank
  int dst = -1;             // receiving global rank
  int index = -1;           // in the whole route (bound_op::message)
  int phase = 0;            // route phase: 0 crossing, 1 fan-out
};

// One cell per (microbatch, indexed rank, route slot, role), microbatch-major
// (one microbatch's cells are near each other while its routes are
// counted and written): ((j * ranks + rank) * slots + slot) * 4 + role. A
// cell counts its messages (pass 1), then holds, flagged `placed`, the
// position in its rank's program of its next message (passes 2 and 3). A
// cell its program never visits (the gradients of a link no backward
// crosses) stays unplaced, and its messages are not emitted.
struct message_cells {
  static constexpr std::uint32_t placed = std::uint32_t{1} << 31;
  std::size_t ranks = 0;
  std::size_t slots = 0;  // 4 per chunk
  std::size_t microbatches = 0;
  std::vector<std::uint32_t> count;

  message_cells(std::size_t n, std::size_t m, std::size_t s)
      : ranks(n), slots(s), microbatches(m), count(m * n * s * 4, 0) {}
  [[nodiscard]] std::uint32_t& at(std::size_t j, std::size_t rank, std::size_t slot,
                                  msg_role role) {
    return count[((j * ranks + rank) * slots + slot) * 4 + static_cast<std::size_t>(role)];
  }
  // Messages of `rank` over all its cells (before they are placed).
  [[nodiscard]] std::size_t messages(std::size_t rank) const {
    std::size_t n = 0;
    for (std::size_t j = 0; j < microbatches; ++j) {
      const std::uint32_t* c = count.data() + (j * ranks + rank) * slots * 4;
      for (std::size_t k = 0; k < slots * 4; ++k) n += c[k];
    }
    return n;
  }
};

// Per (link, direction, indexed rank at an end of the link), the route slot
// it holds the link's route in: chunk * 4 + k, k into its virtual stage 0
// forward, 3 backward, out of it 2 forward, 1 backward (bound_rank::routes);
// `none` for a rank at neither end. Computed once per bind.
struct slot_table {
  static constexpr std::uint32_t none = UINT32_MAX;
  std::size_t ranks = 0;
  std::vector<std::uint32_t> slot;  // ((link * 2 + backward) * ranks + rank)

  [[nodiscard]] std::uint32_t at(int link, bool bwd, int rank) const noexcept {
    return slot[(static_cast<std::size_t>(link) * 2 + (bwd ? 1U : 0U)) * ranks +
                static_cast<std::size_t>(rank)];
  }
};

// The slot table of the indexed programs `progs` (virtual stages set) over
// links 0 .. num_links - 1.
inline slot_table make_slot_table(std::span<const bound_program> progs, int num_links) {
  slot_table t;
  t.ranks = progs.size();
  t.slot.assign(static_cast<std::size_t>(std::max(num_links, 0)) * 2 * t.ranks, slot_table::none);
  for (std::size_t r = 0; r < progs.size(); ++r) {
    const std::vector<int>& vs = progs[r].virtual_stages;
    for (std::size_t c = 0; c < vs.size(); ++c)
      for (const bool upstream : {true, false}) {
        const int link = upstream ? vs[c] : vs[c] - 1;
        if (link < 0 || link >= num_links) continue;
        for (const bool bwd : {false, true}) {
          const std::size_t k = bwd ? (upstream ? 3 : 1) : (upstream ? 2 : 0);
          t.slot[(static_cast<std::size_t>(link) * 2 + (bwd ? 1U : 0U)) * t.ranks + r] =
              static_cast<std::uint32_t>(c * 4 + k);
        }
      }
  }
  return t;
}

// A hint that `*p` is about to be written: its cache lines fetched (no-op
// where the compiler has no prefetch builtin).
template <class T>
void prefetch_for_write([[maybe_unused]] const T* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(p) + sizeof(T) - 1, 1);
#endif
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

// The site of microbatch `mb`'s messages on the route across `link`, forward
// or `backward`: the tensor of virtual stage `link` (an activation) or
// `link + 1` (a gradient).
[[nodiscard]] inline message_site site_of(const bind_context& cx, int link, bool backward, int mb) {
  const int v = backward ? link + 1 : link;
  const auto [stage, chunk] = cx.topo.virtual_at(v);
  return {.stage = stage,
          .chunk = chunk,
          .microbatch = mb,
          .link = link,
          .tag = cx.tags.p2p(v, backward, mb)};
}

// Visits the program of `p` (chain stage, virtual stages set) in order:
// op(o) for each op of its chain stage, and group(j, slot, role) for each
// message cell around it: before a forward / backward op, the input it
// receives (slot 0 / 3: recv0, send1, recv1), after it the output it sends
// (slot 2 / 1: send0). The one place that orders a rank's messages.
template <class Group, class Op>
void walk_program(const bind_context& cx, const bound_program& p, const Group& group,
                  const Op& op) {
  for (const schedule_op& o : cx.chain.ops[static_cast<std::size_t>(p.chain_stage)]) {
    const bool fwd = o.kind == op_kind::forward;
    if (!fwd && o.kind != op_kind::backward) {
      op(o);
      continue;
    }
    const auto j = static_cast<std::size_t>(o.microbatch);
    const int v = p.virtual_stages.at(static_cast<std::size_t>(o.chunk));
    const std::size_t base = static_cast<std::size_t>(o.chunk) * 4;
    if (fwd ? v > 0 : v + 1 < cx.vstages)
      for (const msg_role r : {msg_role::recv0, msg_role::send1, msg_role::recv1})
        group(j, base + (fwd ? 0 : 3), r);
    op(o);
    if (fwd ? v + 1 < cx.vstages : v > 0 && cx.has_backward[static_cast<std::size_t>(v - 1)] != 0)
      group(j, base + (fwd ? 2 : 1), msg_role::send0);
  }
}

// A chain op as its program holds it (a gradient bucket's ops with their tag).
[[nodiscard]] inline bound_op chain_op(const bind_context& cx, const schedule_op& o) {
  bound_op b{o};
  if (o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish)
    b.tag = cx.tags.bucket(o.bucket);
  return b;
}

// Pass 2 for program `p` (indexed rank `rank`): writes its chain ops and
// turns each cell it visits into the position of the cell's first message,
// flagged `placed`; its ops then end with those of its last cell.
inline void layout_program(const bind_context& cx, bound_program& p, message_cells& cells,
                           std::size_t rank) {
  // At most its chain ops and messages (fewer where a cell is not visited).
  const std::size_t n =
      cx.chain.ops[static_cast<std::size_t>(p.chain_stage)].size() + cells.messages(rank);
  ensure(n < message_cells::placed, "bind.ops", "more than 2^31 ops in one program");
  p.ops.resize(n);  // a reused program keeps its storage; every op is written here or in pass 3
  std::uint32_t pos = 0;
  walk_program(
      cx, p,
      [&](std::size_t j, std::size_t slot, msg_role r) {
        std::uint32_t& c = cells.at(j, rank, slot, r);
        ensure((c & message_cells::placed) == 0, "bind.messages", "a message cell placed twice");
        const std::uint32_t k = c;
        c = pos | message_cells::placed;
        pos += k;
      },
      [&](const schedule_op& o) {
        // The ops ahead are written here or in pass 3: their lines fetched now.
        if (pos + 8 < n) prefetch_for_write(&p.ops[pos + 8]);
        p.ops[pos++] = chain_op(cx, o);
      });
  p.ops.resize(pos);
}

// Pass 1 for one microbatch: appends to `out` a record of each message of the
// routes `rs` (one per field) with an indexed rank (`local(rank) >= 0`) at
// an end: its stamp and bytes over all fields.
template <class LocalOf>
void record_messages(std::span<const route_plan> rs, const LocalOf& local,
                     std::vector<message_record>& out) {
  const std::vector<route_message>& ms = rs[0].messages();
  for (std::size_t k = 0; k < ms.size(); ++k) {
    const route_message& m = ms[k];
    if (local(m.src) < 0 && local(m.dst) < 0) continue;
    std::uint64_t stamp = rs[0].stamp(m);
    for (std::size_t f = 1; f < rs.size(); ++f)
      stamp = splitmix64::mix(stamp ^ rs[f].stamp(rs[f].messages()[k]));
    const std::int64_t bytes =
        part_offset(rs, rs.size(), [&](std::size_t f) { return rs[f].messages()[k].elements; });
    out.push_back({bytes, stamp, m.src, m.dst, m.index, m.phase});
  }
}

// Pass 3 for one route of microbatch `at.microbatch` (`bwd`: its gradient
// route): writes each record's op into the programs of its indexed ends,
// where their cells point. In blocks: first every destination of the block
// (its cell advanced, its line prefetched for writing: the ends' programs
// are far apart in memory), then the ops.
template <class LocalOf>
void write_messages(std::span<const message_record> rs, const message_site& at, bool bwd,
                    const slot_table& table, const LocalOf& local, message_cells& cells,
                    std::vector<bound_program>& out) {
  const auto j = static_cast<std::size_t>(at.microbatch);
  constexpr std::size_t block = 32;
  std::array<bound_op*, block * 2> dest{};
  for (std::size_t k0 = 0; k0 < rs.size(); k0 += block) {
    const std::size_t n = std::min(block, rs.size() - k0);
    for (std::size_t k = 0; k < n * 2; ++k) {
      const message_record& m = rs[k0 + k / 2];
      const bool sending = k % 2 == 0;
      dest[k] = nullptr;
      const int r = local(sending ? m.src : m.dst);
      if (r < 0) continue;
      std::uint32_t& c = cells.at(j, static_cast<std::size_t>(r), table.at(at.link, bwd, r),
                                  role_of(sending, m.phase));
      if ((c & message_cells::placed) == 0) continue;  // a cell its program does not visit
      dest[k] = &out[static_cast<std::size_t>(r)].ops[c++ & ~message_cells::placed];
      prefetch_for_write(dest[k]);
    }
    for (std::size_t k = 0; k < n; ++k) {
      const message_record& m = rs[k0 + k];
      // The route's stamp tells plans apart, the tag (virtual stage,
      // direction, microbatch) messages of one plan: microbatches of equal
      // shapes have equal route stamps, and NCCL matches by issue order, not
      // by tag.
      const std::uint64_t stamp = splitmix64::mix(m.stamp ^ static_cast<std::uint64_t>(at.tag));
      for (const bool sending : {true, false}) {
        bound_op* b = dest[k * 2 + (sending ? 0 : 1)];
        if (b == nullptr) continue;
        const op_kind kind = bwd ? (sending ? op_kind::send_grad : op_kind::recv_grad)
                                 : (sending ? op_kind::send_act : op_kind::recv_act);
        b->op = schedule_op::send(kind, at.stage, at.chunk, at.microbatch, sending ? m.dst : m.src);
        b->bytes = m.bytes;
        b->tag = at.tag;
        b->link = at.link;
        b->phase = m.phase;
        b->message = m.index;
        b->stamp = stamp;
      }
    }
  }
}

// Sets up program `p` of global rank `r` (rank, stages, chunks, DP group,
// fields, zeroed buffer sizes) for a bind of `microbatches`; keeps its ops'
// storage.
inline void prepare_program(const bind_context& cx, int r, std::size_t microbatches,
                            bound_program& p) {
  const topology& topo = cx.topo;
  const topology_coord me = topo.coord(r);
  p.rank = r;
  p.chain_stage = topo.chain_stage(me.module, me.stage);
  p.virtual_stages.clear();
  for (int k = 0; k < topo.chunks_of(p.chain_stage); ++k)
    p.virtual_stages.push_back(topo.virtual_stage(me.module, me.stage, k));
  p.dp_group = topo.dp_group(me.module, me.stage, me.tp_rank);
  p.control_tag = cx.tags.control();
  p.fields = 1;
  for (const int v : p.virtual_stages)
    for (const int link : {v - 1, v})
      if (link >= 0 && link + 1 < cx.vstages)
        p.fields = std::max(
            p.fields, static_cast<int>(cx.shapes[static_cast<std::size_t>(link)].fields.size()));
  const std::size_t entries =
      microbatches * p.virtual_stages.size() * static_cast<std::size_t>(p.fields);
  p.input_elements.assign(entries, 0);
  p.output_elements.assign(entries, 0);
}

// The owning-module indices at the ends of `links`: only their placements are built.
inline std::vector<std::size_t> link_modules(const bind_context& cx,
                                             const std::vector<int>& links) {
  std::vector<std::size_t> modules;
  for (const int l : links)
    for (const int e : {l, l + 1}) {
      const auto m = static_cast<std::size_t>(cx.topo.owning_index(cx.endpoint(e).module));
      if (std::find(modules.begin(), modules.end(), m) == modules.end()) modules.push_back(m);
    }
  return modules;
}

// Per link of `links`, the first link whose route it shares (itself if
// none): an interleaved module's chunks cross the same two stages with the
// same activation, so their routes are planned and recorded once per
// microbatch.
inline std::vector<std::size_t> route_owners(const bind_context& cx,
                                             const std::vector<int>& links) {
  std::vector<std::size_t> owner(links.size());
  const auto same_ends = [&](int x, int y) {
    const route_endpoint a = cx.endpoint(x), b = cx.endpoint(y);
    const route_endpoint a2 = cx.endpoint(x + 1), b2 = cx.endpoint(y + 1);
    return a.module == b.module && a.stage == b.stage && a2.module == b2.module &&
           a2.stage == b2.stage;
  };
  for (std::size_t i = 0; i < links.size(); ++i) {
    owner[i] = i;
    for (std::size_t k = 0; k < i && owner[i] == i; ++k)
      if (same_ends(links[i], links[k]) && cx.shapes[static_cast<std::size_t>(links[i])] ==
                                               cx.shapes[static_cast<std::size_t>(links[k])])
        owner[i] = k;
  }
  return owner;
}

// Every microbatch's recorded messages: per microbatch its records, owner
// route after owner route (route = owner link * 2 + backward), and where
// each route's records begin.
struct message_log {
  std::size_t routes = 0;
  std::vector<std::vector<message_record>> records;
  std::vector<std::uint32_t> begin;  // (j * (routes + 1) + route); the last: the end

  message_log(std::size_t microbatches, std::size_t n_routes)
      : routes(n_routes), records(microbatches), begin(microbatches * (n_routes + 1), 0) {}
  [[nodiscard]] std::span<const message_record> of(std::size_t j, std::size_t route) const {
    const std::size_t e = j * (routes + 1) + route;
    return std::span<const message_record>(records[j]).subspan(begin[e], begin[e + 1] - begin[e]);
  }
  // Closes route `route` of microbatch j (its records are the ones appended since).
  void close(std::size_t j, std::size_t route) {
    begin[j * (routes + 1) + route + 1] = static_cast<std::uint32_t>(records[j].size());
  }
};

// Pass 1's count: each indexed end of `rs` (the records of microbatch j's
// route across `link`) counted in its cell; throws if an end is not at the link.
template <class LocalOf>
void count_messages(std::span<const message_record> rs, std::size_t j, int link, bool bwd,
                    const slot_table& table, const LocalOf& local, message_cells& cells) {
  for (const message_record& m : rs)
    for (const bool sending : {true, false})
      if (const int r = local(sending ? m.src : m.dst); r >= 0) {
        const std::uint32_t s = table.at(link, bwd, r);
        if (s == slot_table::none)
          fail(errc::internal, "bind.messages", "a route has a message of rank ",
               sending ? m.src : m.dst, ", at neither end of link ", link);
        ++cells.at(j, static_cast<std::size_t>(r), s, role_of(sending, m.phase));
      }
}

// The buffer sizes of microbatch j's forward routes `rs` (one per field)
// across `link`: its receivers hold the destination buffer as their input,
// its senders the source buffer as their output (every field's route has
// the same ranks, in the same order).
template <class LocalOf>
void record_buffer_sizes(std::span<const route_plan> rs, std::size_t j, int link,
                         const slot_table& table, const LocalOf& local,
                         std::vector<bound_program>& out) {
  const std::vector<route_rank_info>& infos = rs[0].ranks();
  for (const route_plan& f : rs)
    ensure(f.ranks().size() == infos.size(), "bind.routes", "fields with different ranks");
  for (std::size_t k = 0; k < infos.size(); ++k) {
    const int r = local(infos[k].rank);
    if (r < 0) continue;
    bound_program& p = out[static_cast<std::size_t>(r)];
    const std::size_t chunk = table.at(link, false, r) / 4;
    const std::size_t at =
        (j * p.virtual_stages.size() + chunk) * static_cast<std::size_t>(p.fields);
    for (std::size_t f = 0; f < rs.size(); ++f) {
      const route_rank_info& info = rs[f].ranks()[k];
      const auto elements = [&](std::int64_t rows) {
        return rows < 0 ? 0 : checked_mul(rows, rs[f].hidden(), "bind.elements");
      };
      if (infos[k].dst_rows >= 0) p.input_elements[at + f] = elements(info.dst_rows);
      if (infos[k].src_rows >= 0) p.output_elements[at + f] = elements(info.src_rows);
    }
  }
}

// Binds the ranks `ranks` (all of whose links are in `links`, ascending):
// per microbatch, plans the routes of `links` with `opts` (one rank's part,
// or headers only for the world), records the ranks' buffer sizes and
// messages and hands each link's routes (one per field) to
// `keep(j, link, backward, routes)` (an rvalue, or a const reference for a
// link whose routes are an earlier link's); then lays out and writes each
// rank's program (see the file comment). `ready(program)` sees each program
// once its rank, stages and chunks are set, before any `keep`.
template <class Keep, class Ready>
void bind_ranks(const bind_context& cx, const std::vector<int>& ranks,
                const std::vector<int>& links, route_options opts, const Keep& keep,
                const Ready& ready, std::vector<bound_program>& out) {
  const auto M = static_cast<std::size_t>(cx.chain.num_microbatches);
  const std::size_t N = ranks.size(), L = links.size();
  std::vector<int> local_of(static_cast<std::size_t>(cx.topo.world_size()), -1);
  const auto local = [&](int r) { return local_of[static_cast<std::size_t>(r)]; };
  out.resize(N);  // programs already there keep their storage
  std::size_t max_chunks = 1;
  for (std::size_t i = 0; i < N; ++i) {
    local_of[static_cast<std::size_t>(ranks[i])] = static_cast<int>(i);
    prepare_program(cx, ranks[i], M, out[i]);
    max_chunks = std::max(max_chunks, out[i].virtual_stages.size());
    ready(std::as_const(out[i]));
  }
  const std::vector<std::size_t> modules = link_modules(cx, links);
  const std::vector<std::size_t> owner = route_owners(cx, links);
  const slot_table table =
      make_slot_table(std::span<const bound_program>(out), cx.topo.num_links());
  message_cells cells(N, M, max_chunks * 4);
  message_log log(M, L * 2);
  const auto route_of = [&](std::size_t i, bool bwd) { return owner[i] * 2 + (bwd ? 1U : 0U); };
  // Per owner link and direction, one route per field (reused per microbatch).
  std::vector<std::vector<route_plan>> routes(L * 2);
  skeleton_cache skeletons;  // a link's two routes, the links in a module: one skeleton
  for (std::size_t j = 0; j < M; ++j) {
    const microbatch_placement mp =
        links.empty() ? microbatch_placement{} : microbatch_placements(cx.map, j, modules);
    skeletons.clear();        // it holds the placements of mp
    std::size_t planned = 0;  // messages of the routes planned for j
    for (std::size_t i = 0; i < L; ++i)
      for (const bool bwd : {false, true})
        if (owner[i] == i) {
          cx.routes(links[i], mp, bwd, opts, skeletons, routes[route_of(i, bwd)]);
          planned += routes[route_of(i, bwd)][0].messages().size();
        }
    // Pass 1: each planned message recorded once, then counted per cell at
    // each link that shares its route.
    log.records[j].reserve(planned);
    for (std::size_t e = 0; e < L * 2; ++e) {
      if (owner[e / 2] == e / 2)
        record_messages(std::span<const route_plan>(routes[e]), local, log.records[j]);
      log.close(j, e);
    }
    for (std::size_t i = 0; i < L; ++i)
      for (const bool bwd : {false, true})
        count_messages(log.of(j, route_of(i, bwd)), j, links[i], bwd, table, local, cells);
    for (std::size_t i = 0; i < L; ++i)
      record_buffer_sizes(std::span<const route_plan>(routes[route_of(i, false)]), j, links[i],
                          table, local, out);
    // Copied links first (by reference to their owner's route), then the
    // owners hand theirs over.
    for (std::size_t i = 0; i < L; ++i)
      for (const bool bwd : {false, true})
        if (owner[i] != i) keep(j, links[i], bwd, std::as_const(routes[route_of(i, bwd)]));
    for (std::size_t i = 0; i < L; ++i)
      for (const bool bwd : {false, true})
        if (owner[i] == i) keep(j, links[i], bwd, std::move(routes[route_of(i, bwd)]));
  }
  // Pass 2: each program laid out (the next rank's cells fetched meanwhile:
  // one per microbatch, far apart).
  for (std::size_t i = 0; i < N; ++i) {
    if (i + 1 < N)
      for (std::size_t j = 0; j < M; ++j)
        for (std::size_t s = 0; s < cells.slots; s += 4)
          prefetch_for_write(&cells.at(j, i + 1, s, msg_role::recv0));
    layout_program(cx, out[i], cells, i);
  }
  // Pass 3: each recorded message's ops, where their cells point.
  for (std::size_t j = 0; j < M; ++j)
    for (std::size_t i = 0; i < L; ++i)
      for (const bool bwd : {false, true})
        write_messages(log.of(j, route_of(i, bwd)), site_of(cx, links[i], bwd, static_cast<int>(j)),
                       bwd, table, local, cells, out);
}

}  // namespace disttrain::detail
