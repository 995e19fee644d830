// disttrain._core, part 2: the topology and the bound per-rank programs
// (issue 14, item 2's last bullet). Same rules as disttrain_ext.cpp: the
// topology crosses as JSON text, the sample map and the link shapes as NumPy
// arrays, the program comes back as NumPy arrays (one entry per op) plus, per
// point-to-point op, the flat element indices that pack a send from its
// source buffer or unpack a receive into its destination buffer, so a Python
// runner (disttrain.torch) moves bytes with one gather / scatter per message.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "disttrain/bind/bind.hpp"
#include "disttrain/bind/topology_views.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/exec/trace.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/reorder/json.hpp"
#include "disttrain/schedule/rendezvous_order.hpp"
#include "disttrain/schedule/validate_bound.hpp"
#include "program_ext.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using disttrain::json;

// ---- topology <-> JSON -----------------------------------------------------------

disttrain::topology read_topology(const std::string& text) {
  // Errors name topology.modules[i].<field> (core/json.hpp's reader).
  return disttrain::parse_json(text, "topology").get<disttrain::topology>();
}

// The topology and everything derived from it that a Python trainer needs:
// its modules, the world size, the chain stages, the virtual stages (the
// path: [chain stage, chunk] each; one per chain stage without interleaving),
// the modules that own ranks (the reorderer's modules, in order) and each
// rank's coordinate.
std::string topology_json(const disttrain::topology& t) {
  json chain = json::array(), path = json::array(), owning = json::array(), ranks = json::array();
  for (int c = 0; c < t.num_chain_stages(); ++c) {
    const auto [m, s] = t.chain_at(c);
    chain.push_back({m.value, s.value});
  }
  for (int v = 0; v < t.num_virtual_stages(); ++v) {
    const auto [c, k] = t.virtual_at(v);
    path.push_back({c, k});
  }
  for (const auto m : t.owning_modules()) owning.push_back(m.value);
  for (int r = 0; r < t.world_size(); ++r) {
    const auto co = t.coord(r);
    ranks.push_back({{"module", co.module.value},
                     {"stage", co.stage.value},
                     {"replica", co.replica.value},
                     {"tp_rank", co.tp_rank},
                     {"chain_stage", t.chain_stage(co.module, co.stage)}});
  }
  return json{{"modules", t.modules()},         {"world_size", t.world_size()},
              {"backbone", t.backbone().value}, {"chain", std::move(chain)},
              {"path", std::move(path)},        {"owning_modules", std::move(owning)},
              {"ranks", std::move(ranks)},      {"describe", disttrain::describe(t)}}
      .dump();
}

std::string topology_of_impl(const std::string& plan_json, const std::string& model_json) {
  const json pj = disttrain::parse_json(plan_json, "plan");
  const auto plan =
      (pj.is_object() && pj.contains("plan") ? pj.at("plan") : pj).get<disttrain::parallel_plan>();
  if (model_json.empty()) return topology_json(disttrain::topology_of(plan));
  const auto model = disttrain::parse_json(model_json, "model").get<disttrain::model_spec>();
  return topology_json(disttrain::topology_of(plan, model));
}

// ---- the sample map from the reorderer's arrays ---------------------------------

using u64_1d = nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using u32_1d = nb::ndarray<const std::uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using u32_2d = nb::ndarray<const std::uint32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using i64_2d = nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// The map's rows (input order) sorted by id: entry i of the result is the row
// of reorder_result::samples[i].
std::vector<std::uint32_t> id_order(const u64_1d& id) {
  std::vector<std::uint32_t> order(id.shape(0));
  std::iota(order.begin(), order.end(), 0u);
  const std::uint64_t* p = id.data();
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return p[a] < p[b]; });
  return order;
}

// A reorder_result from disttrain.reorder()'s arrays (rows in any order):
// cells rebuilt and validated, as from JSON.
disttrain::reorder_result read_map(const u64_1d& id, const u32_1d& mb, const u32_2d& replica,
                                   const u32_2d& offset, std::uint32_t microbatches,
                                   const std::vector<std::uint32_t>& dp,
                                   const std::vector<std::uint32_t>& order) {
  const std::size_t n = id.shape(0), K = dp.size();
  disttrain::require(K >= 1 && K <= disttrain::max_reorder_modules, "map.dp", "needs 1..",
                     disttrain::max_reorder_modules, " modules, got ", K);
  disttrain::require(mb.shape(0) == n, "map.microbatch", "has ", mb.shape(0), " entries, ids ", n);
  disttrain::require(replica.shape(0) == n && replica.shape(1) == K, "map.replica", "must be (", n,
                     ", ", K, "), got (", replica.shape(0), ", ", replica.shape(1), ")");
  disttrain::require(offset.shape(0) == n && offset.shape(1) == K, "map.offset", "must be (", n,
                     ", ", K, "), got (", offset.shape(0), ", ", offset.shape(1), ")");
  disttrain::reorder_result r;
  r.modules = static_cast<std::uint32_t>(K);
  r.microbatches = microbatches;
  std::copy(dp.begin(), dp.end(), r.dp.begin());
  r.samples.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t row = order[i];
    disttrain::sample_place& s = r.samples[i];
    s.id = id.data()[row];
    s.microbatch = mb.data()[row];
    for (std::size_t k = 0; k < K; ++k)
      s.module[k] = {replica.data()[row * K + k], offset.data()[row * K + k]};
  }
  disttrain::rebuild_cells(r);
  disttrain::validate(r);
  return r;
}

// ---- bind_rank ------------------------------------------------------------------

// Flat element indices of a message's copy blocks: for a send, entry e of the
// packed message is source[index[e]]; for a receive, destination[index[e]] =
// packed[e].
void block_index(const std::vector<disttrain::kernels::copy_block>& blocks, bool send,
                 std::int64_t elements, std::int64_t* out) {
  for (const auto& b : blocks)
    for (std::int64_t i = 0; i < b.rows; ++i)
      for (std::int64_t c = 0; c < b.cols; ++c) {
        const std::int64_t s = b.src_offset + i * b.src_ld + c, d = b.dst_offset + i * b.dst_ld + c;
        const std::int64_t at = send ? d : s, value = send ? s : d;
        disttrain::ensure(at >= 0 && at < elements, "bind_rank.index",
                          "copy block outside the message");
        out[at] = value;
      }
}

// A vector handed to NumPy without a copy, as a 1-D array or (cols > 0) a
// (size / cols, cols) one.
template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& v, std::size_t cols = 0) {
  auto* heap = new std::vector<T>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  if (cols > 0) return nb::ndarray<nb::numpy, T>(heap->data(), {heap->size() / cols, cols}, owner);
  return nb::ndarray<nb::numpy, T>(heap->data(), {heap->size()}, owner);
}

// A message's copy blocks as rows of (src_offset, dst_offset, rows, cols,
// src_ld, dst_ld): a send's from its source buffer into the packed message, a
// receive's from the packed message into its destination buffer.
std::vector<std::int64_t> block_rows(const std::vector<disttrain::kernels::copy_block>& blocks) {
  std::vector<std::int64_t> out;
  out.reserve(blocks.size() * 6);
  for (const auto& b : blocks)
    out.insert(out.end(), {b.src_offset, b.dst_offset, b.rows, b.cols, b.src_ld, b.dst_ld});
  return out;
}

// The program of one rank as flat columns (one entry per op) and, per
// point-to-point op, its copy blocks and index array (see block_index), each
// the concatenation over the fields of its link, and its parts (per field:
// byte offset in the message, elements, copy blocks).
struct flat_program {
  int rank = -1, chain_stage = -1, fields = 1;
  std::vector<int> dp_group, virtual_stages;
  std::vector<std::int64_t> input_elements, output_elements;
  std::vector<std::int32_t> kind, stage, chunk, microbatch, peer, bucket, tag, link, phase, message;
  std::vector<int> batch;  // p2p_batches
  std::vector<std::int64_t> bytes, elements;
  std::vector<std::uint64_t> stamp;
  std::vector<char> p2p;                          // per op: point-to-point?
  std::vector<std::vector<std::int64_t>> blocks;  // per op: block_rows; empty for compute ops
  std::vector<std::vector<std::int64_t>> index;   // per op (if asked): block_index
  std::vector<std::vector<std::int64_t>> parts;   // per op: (offset, elements, blocks) per field
  bool with_index = false;
};

flat_program flatten_program(const disttrain::bound_rank& mine, bool with_index) {
  const disttrain::bound_program& p = mine.program;
  flat_program f;
  f.rank = p.rank;
  f.chain_stage = p.chain_stage;
  f.fields = p.fields;
  f.dp_group = p.dp_group;
  f.virtual_stages = p.virtual_stages;
  f.input_elements = p.input_elements;
  f.output_elements = p.output_elements;
  f.batch = disttrain::p2p_batches(p);
  const std::size_t n = p.ops.size();
  for (auto* v : {&f.kind, &f.stage, &f.chunk, &f.microbatch, &f.peer, &f.bucket, &f.tag, &f.link,
                  &f.phase, &f.message})
    v->reserve(n);
  f.with_index = with_index;
  f.blocks.resize(n);
  f.parts.resize(n);
  f.index.resize(with_index ? n : 0);
  for (std::size_t i = 0; i < n; ++i) {
    const disttrain::bound_op& b = p.ops[i];
    f.kind.push_back(static_cast<std::int32_t>(b.op.kind));
    f.stage.push_back(b.op.stage);
    f.chunk.push_back(b.op.chunk);
    f.microbatch.push_back(b.op.microbatch);
    f.peer.push_back(b.op.peer);
    f.bucket.push_back(b.op.bucket);
    f.tag.push_back(b.tag);
    f.link.push_back(b.link);
    f.phase.push_back(b.phase);
    f.message.push_back(b.message);
    f.bytes.push_back(b.bytes);
    f.stamp.push_back(b.stamp);
    std::int64_t elements = 0;
    f.p2p.push_back(disttrain::is_p2p(b.op.kind) ? 1 : 0);
    if (f.p2p.back() != 0) {
      const bool send = disttrain::is_send(b.op.kind);
      const std::size_t fields = mine.routes_of(b).size();
      for (std::size_t k = 0; k < fields; ++k) {
        const disttrain::route_message& m = mine.message_of(b, k);
        const auto& blocks = send ? m.send_blocks : m.recv_blocks;
        const std::vector<std::int64_t> rows = block_rows(blocks);
        f.blocks[i].insert(f.blocks[i].end(), rows.begin(), rows.end());
        f.parts[i].insert(f.parts[i].end(), {mine.field_offset(b, k), m.elements,
                                             static_cast<std::int64_t>(blocks.size())});
        if (with_index) {
          const std::size_t at = f.index[i].size();
          f.index[i].resize(at + static_cast<std::size_t>(m.elements), -1);
          block_index(blocks, send, m.elements, f.index[i].data() + at);
        }
        elements += m.elements;
      }
    }
    f.elements.push_back(elements);
  }
  return f;
}

nb::dict to_dict(flat_program&& f) {
  nb::dict d;
  d["rank"] = f.rank;
  d["chain_stage"] = f.chain_stage;
  d["fields"] = f.fields;
  d["dp_group"] = f.dp_group;
  d["virtual_stages"] = f.virtual_stages;
  d["input_elements"] = to_numpy(std::move(f.input_elements));
  d["output_elements"] = to_numpy(std::move(f.output_elements));
  d["kind"] = to_numpy(std::move(f.kind));
  d["stage"] = to_numpy(std::move(f.stage));
  d["chunk"] = to_numpy(std::move(f.chunk));
  d["microbatch"] = to_numpy(std::move(f.microbatch));
  d["peer"] = to_numpy(std::move(f.peer));
  d["bucket"] = to_numpy(std::move(f.bucket));
  d["tag"] = to_numpy(std::move(f.tag));
  d["link"] = to_numpy(std::move(f.link));
  d["phase"] = to_numpy(std::move(f.phase));
  d["message"] = to_numpy(std::move(f.message));
  d["bytes"] = to_numpy(std::move(f.bytes));
  d["elements"] = to_numpy(std::move(f.elements));
  d["stamp"] = to_numpy(std::move(f.stamp));
  d["batch"] = to_numpy(std::move(f.batch));
  // Compute ops: None; a point-to-point op: its array (maybe empty: 0 elements).
  const auto per_op = [&](std::vector<std::vector<std::int64_t>>& v, std::size_t cols) {
    nb::list out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (f.p2p[i] == 0)
        out.append(nb::none());
      else
        out.append(to_numpy(std::move(v[i]), cols));
    }
    return out;
  };
  d["blocks"] = per_op(f.blocks, 6);
  d["parts"] = per_op(f.parts, 3);
  if (f.with_index) d["index"] = per_op(f.index, 0);
  return d;
}

// What bind needs, read from the Python arrays: the topology, the sample map
// (`rows` is (fields, n) in the map's row order, the fields of every link in
// link order; `hidden`, `elem_size`, `names`, `split` and `differentiable`
// one entry per field, `fields` the count per link) and chain_program(topology, {microbatches, split_backward, zero_bubble,
// buckets}).
struct bind_inputs {
  disttrain::topology topo;
  disttrain::reorder_result map;
  std::vector<disttrain::link_shape> shapes;
  disttrain::pipeline_schedule chain;
};

// The leading arguments of bind_rank / validate_world / trace_json, as
// disttrain._bind_args builds them (cast while the GIL is held).
struct bind_args {
  std::string topology_text;
  int buckets = 1;
  bool split_backward = false, zero_bubble = false;
  u64_1d id;
  u32_1d mb;
  u32_2d replica, offset;
  std::uint32_t microbatches = 0;
  std::vector<std::uint32_t> dp;
  i64_2d rows;
  std::vector<std::int64_t> hidden;
  std::vector<std::size_t> elem_size;
  std::vector<std::size_t> fields;  // per link
  std::vector<std::string> names;
  std::vector<int> split;  // 0 hidden, 1 rows
  std::vector<bool> differentiable;
};

bind_args cast_bind_args(const nb::tuple& t) {
  disttrain::require(t.size() == 17, "bind_args", "has ", t.size(), " entries, need 17");
  return {nb::cast<std::string>(t[0]),
          nb::cast<int>(t[1]),
          nb::cast<bool>(t[2]),
          nb::cast<bool>(t[3]),
          nb::cast<u64_1d>(t[4]),
          nb::cast<u32_1d>(t[5]),
          nb::cast<u32_2d>(t[6]),
          nb::cast<u32_2d>(t[7]),
          nb::cast<std::uint32_t>(t[8]),
          nb::cast<std::vector<std::uint32_t>>(t[9]),
          nb::cast<i64_2d>(t[10]),
          nb::cast<std::vector<std::int64_t>>(t[11]),
          nb::cast<std::vector<std::size_t>>(t[12]),
          nb::cast<std::vector<std::size_t>>(t[13]),
          nb::cast<std::vector<std::string>>(t[14]),
          nb::cast<std::vector<int>>(t[15]),
          nb::cast<std::vector<bool>>(t[16])};
}

bind_inputs read_bind_inputs(const bind_args& a) {
  const auto& [topology_text, buckets, split_backward, zero_bubble, id, mb, replica, offset,
               microbatches, dp, rows, hidden, elem_size, fields, names, split, differentiable] = a;
  bind_inputs in{read_topology(topology_text), {}, {}, {}};
  const auto order = id_order(id);
  in.map = read_map(id, mb, replica, offset, microbatches, dp, order);
  const auto links = static_cast<std::size_t>(in.topo.num_links());
  disttrain::require(fields.size() == links, "shapes", "has ", fields.size(),
                     " entries, need one per link (", links, ")");
  std::size_t total = 0;
  for (const std::size_t n : fields) total += n;
  disttrain::require(rows.shape(0) == total && rows.shape(1) == id.shape(0), "shapes.rows",
                     "must be (", total, ", ", id.shape(0),
                     ") (one row per field of every link, one column per sample), got (",
                     rows.shape(0), ", ", rows.shape(1), ")");
  for (const std::size_t n :
       {hidden.size(), elem_size.size(), names.size(), split.size(), differentiable.size()})
    disttrain::require(n == total, "shapes", "has ", n, " field entries, need ", total);
  in.shapes.resize(links);
  std::size_t g = 0;  // field index over all links
  for (std::size_t l = 0; l < links; ++l)
    for (std::size_t k = 0; k < fields[l]; ++k, ++g) {
      const auto where = [&](const char* what) {
        return fields[l] == 1 ? disttrain::cat("shapes[", l, "].", what)
                              : disttrain::cat("shapes[", l, "].fields[", k, "].", what);
      };
      disttrain::require(hidden[g] >= 1, where("hidden"), "must be >= 1, got ", hidden[g]);
      disttrain::require(elem_size[g] >= 1, where("elem_size"), "must be >= 1");
      disttrain::link_field& f = in.shapes[l].fields.emplace_back();
      f.name = names[g];
      f.hidden = hidden[g];
      f.elem_size = elem_size[g];
      f.split = split[g] == 0 ? disttrain::split_axis::hidden : disttrain::split_axis::rows;
      f.differentiable = differentiable[g];
      f.rows.resize(order.size());
      for (std::size_t i = 0; i < order.size(); ++i) {
        const std::int64_t r = rows.data()[g * order.size() + order[i]];
        disttrain::require(r >= 0, disttrain::cat(where("rows"), "[", order[i], "]"),
                           "must be >= 0, got ", r);
        f.rows[i] = r;
      }
    }
  in.chain = disttrain::chain_program(in.topo, {.microbatches = static_cast<int>(microbatches),
                                                .split_backward = split_backward,
                                                .buckets = buckets,
                                                .zero_bubble = zero_bubble});
  return in;
}

// bind_rank of the inputs; `rendezvous`: in order_for_rendezvous's order.
nb::dict bind_rank_impl(const nb::tuple& args, int rank, bool with_index, bool rendezvous) {
  const bind_args a = cast_bind_args(args);
  flat_program f;
  {
    nb::gil_scoped_release release;
    const bind_inputs in = read_bind_inputs(a);
    disttrain::bound_rank mine = disttrain::bind_rank(in.topo, in.chain, in.map, in.shapes, rank);
    if (rendezvous)
      disttrain::order_for_rendezvous(mine.program, disttrain::message_rounds(in.chain));
    f = flatten_program(mine, with_index);
  }
  return to_dict(std::move(f));
}

// Every rank's program of the inputs; `rendezvous`: in order_for_rendezvous's order.
disttrain::bound_world bind_world_of(const bind_inputs& in, bool rendezvous) {
  disttrain::bound_world w = disttrain::bind_world(in.topo, in.chain, in.map, in.shapes);
  if (rendezvous) disttrain::order_for_rendezvous(w, in.chain);
  return w;
}

// validate_bound of every rank's program under `p2p`. Returns {ops, messages, bytes}.
nb::dict validate_world_impl(const nb::tuple& args, bool rendezvous, const std::string& p2p) {
  const bind_args a = cast_bind_args(args);
  disttrain::bound_report rep;
  {
    nb::gil_scoped_release release;
    disttrain::require(p2p == "buffered" || p2p == "rendezvous", "p2p",
                       "must be \"buffered\" or \"rendezvous\", got \"", p2p, "\"");
    const bind_inputs in = read_bind_inputs(a);
    rep = disttrain::validate_bound(bind_world_of(in, rendezvous),
                                    p2p == "rendezvous" ? disttrain::p2p_semantics::rendezvous
                                                        : disttrain::p2p_semantics::buffered);
  }
  nb::dict d;
  d["ops"] = rep.ops;
  d["messages"] = rep.messages;
  d["bytes"] = rep.bytes;
  return d;
}

using i32_1d = nb::ndarray<const std::int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using f64_1d = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// exec_trace_json of measured events (rank, op index, start, end, track per
// event) on every rank's program of the inputs: JSON text.
std::string trace_json_impl(const nb::tuple& args, bool rendezvous, const i32_1d& rank,
                            const i32_1d& index, const f64_1d& start, const f64_1d& end,
                            const i32_1d& track) {
  const bind_args a = cast_bind_args(args);
  nb::gil_scoped_release release;
  const std::size_t n = rank.shape(0);
  disttrain::require(
      index.shape(0) == n && start.shape(0) == n && end.shape(0) == n && track.shape(0) == n,
      "events", "rank, index, start, end and track must have one entry per event");
  const bind_inputs in = read_bind_inputs(a);
  const disttrain::bound_world w = bind_world_of(in, rendezvous);
  std::vector<disttrain::exec_event> events(n);
  for (std::size_t i = 0; i < n; ++i) {
    disttrain::exec_event& e = events[i];
    e.rank = rank(i);
    e.index = index(i);
    disttrain::require(
        e.rank >= 0 && e.rank < w.world_size() && e.index >= 0 &&
            static_cast<std::size_t>(e.index) <
                w.programs[static_cast<std::size_t>(e.rank)].ops.size(),
        [&] { return disttrain::cat("events[", i, "]"); }, "rank ", e.rank, " op #", e.index,
        " is not an op of the world's programs");
    e.op = w.programs[static_cast<std::size_t>(e.rank)].ops[static_cast<std::size_t>(e.index)].op;
    e.start = start(i);
    e.end = end(i);
    disttrain::require(
        track(i) >= 0 && track(i) <= 2, [&] { return disttrain::cat("events[", i, "].track"); },
        "must be 0 (compute), 1 (wait) or 2 (transfer), got ", track(i));
    e.track = static_cast<disttrain::exec_track>(track(i));
  }
  return disttrain::exec_trace_json(disttrain::as_schedule(w, in.topo), events).dump();
}

}  // namespace

void add_program_bindings(nb::module_& m) {
  m.attr("op_kinds") = [] {
    std::vector<std::string> names;
    for (int i = 0; i < disttrain::num_op_kinds; ++i)
      names.emplace_back(disttrain::to_string(static_cast<disttrain::op_kind>(i)));
    return names;
  }();
  m.def(
      "topology", [](const std::string& text) { return topology_json(read_topology(text)); },
      "topology"_a, "Validates a topology (JSON text); returns it with its derived views (JSON).");
  m.def("topology_of", &topology_of_impl, "plan"_a, "model"_a,
        "The topology of a plan (JSON), frozen modules from a model spec (JSON, or empty).");
  m.def(
      "reorder_options_of",
      [](const std::string& text, std::uint32_t microbatches) {
        return json(disttrain::reorder_options_of(read_topology(text), microbatches)).dump();
      },
      "topology"_a, "microbatches"_a, "The reorderer's options of a topology (JSON text).");
  m.def("bind_rank", &bind_rank_impl, "bind_args"_a, "rank"_a, "index"_a, "rendezvous"_a,
        "One rank's bound program as arrays (see disttrain.bind_rank).");
  m.def("validate_world", &validate_world_impl, "bind_args"_a, "rendezvous"_a, "p2p"_a,
        "Validates every rank's bound program (see disttrain.validate_world).");
  m.def("trace_json", &trace_json_impl, "bind_args"_a, "rendezvous"_a, "rank"_a, "index"_a,
        "start"_a, "end"_a, "track"_a,
        "A measured iteration as Perfetto trace JSON text (see disttrain.trace_json).");
}
