// The bind step: bound programs validated, equal whether bound per rank or for
// the world, run by the executor over the local backend with every route
// phase (TP fan-out, gradients on reversed routes) carrying the right values,
// and the executed ops equal to the bound program's.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../comm/local_harness.hpp"
#include "disttrain/bind/activation_buffers.hpp"
#include "disttrain/bind/bind.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "disttrain/exec/executor.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/schedule/rendezvous_order.hpp"
#include "disttrain/schedule/validate_bound.hpp"
#include "disttrain_catch.hpp"

using namespace std::chrono_literals;
using disttrain::errc;
using disttrain::module_role;
using disttrain::op_kind;

namespace {

using disttrain::topology;

topology three(int etp, int edp, int btp, int bpp, int bdp, int gtp, int gdp,
               bool frozen_encoder = false, int chunks = 1) {
  disttrain::topology_module llm{"llm", module_role::backbone, btp, bpp, bdp};
  llm.chunks = chunks;
  return topology({{"enc", module_role::encoder, etp, 1, edp, !frozen_encoder},
                   llm,
                   {"gen", module_role::generator, gtp, 1, gdp}});
}

// A batch of n samples with uneven costs, reordered for `t`.
disttrain::reorder_result sample_map(const topology& t, int n, int microbatches) {
  disttrain::reorderer<> r(
      disttrain::reorder_options_of(t, static_cast<std::uint32_t>(microbatches)));
  std::vector<disttrain::sample_meta> batch;
  for (int i = 0; i < n; ++i) {
    disttrain::sample_meta m;
    m.id = static_cast<std::uint64_t>(100 + i);
    for (std::size_t k = 0; k < t.owning_modules().size(); ++k)
      m.cost[k] = 1.0 + static_cast<double>((i * 7 + static_cast<int>(k) * 3) % 5);
    batch.push_back(m);
  }
  return r.assign(batch);
}

constexpr std::int64_t hidden = 6;

// Rows of sample index i on every link: 1..3. With `fields`, each link also
// carries "pos" (one value per row, not differentiable, split by rows) and
// "aux" (one row of 2 per sample, differentiable, split by columns).
std::vector<disttrain::link_shape> shapes(const topology& t, const disttrain::reorder_result& map,
                                          bool fields = false) {
  std::vector<disttrain::link_shape> out(static_cast<std::size_t>(t.num_links()));
  for (auto& l : out) {
    disttrain::link_field& f = l.fields.emplace_back();
    f.hidden = hidden;
    f.elem_size = sizeof(double);
    for (const auto& s : map.samples) f.rows.push_back(1 + static_cast<std::int64_t>(s.id % 3));
    if (!fields) continue;
    l.fields.push_back({.name = "pos",
                        .hidden = 1,
                        .elem_size = sizeof(double),
                        .rows = f.rows,
                        .split = disttrain::split_axis::rows,
                        .differentiable = false});
    l.fields.push_back({.name = "aux",
                        .hidden = 2,
                        .elem_size = sizeof(double),
                        .rows = std::vector<std::int64_t>(map.samples.size(), 1)});
  }
  return out;
}

// Virtual stage c maps x -> 2x + 1 (stage 0 seeds its output from the sample
// ids); the last stage checks what arrived and seeds the gradient with ones;
// B doubles the gradient; stage 0 checks the gradient that came back. (Chain
// stages without interleaving; an interleaved rank runs several.)
struct toy_host {
  using grad_type = double;
  const disttrain::bound_rank* mine = nullptr;
  const disttrain::reorder_result* map = nullptr;
  int stages = 0;
  int module_index = 0, replica = 0;
  disttrain::activation_buffers<double> buf;
  std::vector<double> bucket{0.0};
  std::vector<disttrain::schedule_op> ran;  // compute ops, in order

  // Value of element (row, col) of sample id after chain stage c.
  static double value(std::uint64_t id, std::int64_t row, std::int64_t col, int c) {
    double v = static_cast<double>(id) * 100.0 + static_cast<double>(row * 10 + col);
    for (int k = 1; k <= c; ++k) v = 2.0 * v + 1.0;
    return v;
  }
  // Sample ids of this replica in microbatch j, in placement order.
  bool fields = false;  // the links carry "pos" and "aux" (see shapes)
  std::vector<std::uint64_t> ids(int j) const {
    std::vector<std::uint64_t> out;
    for (auto idx : map->cell(static_cast<std::size_t>(module_index),
                              static_cast<std::size_t>(replica), static_cast<std::size_t>(j)))
      out.push_back(map->samples[idx].id);
    return out;
  }
  // Position of row r of sample id after chain stage c (not differentiable).
  static double pos(std::uint64_t id, std::int64_t r, int c) {
    return static_cast<double>(id) * 1000.0 + static_cast<double>(r * 10 + c);
  }
  // Element (row, col) of field `field` of sample id: checks what arrived
  // from stage c - 1, writes stage c's output.
  void pass(const disttrain::schedule_op& op, int c, std::size_t field, std::int64_t width,
            const std::function<std::int64_t(std::uint64_t)>& rows_of,
            const std::function<double(std::uint64_t, std::int64_t, std::int64_t, int)>& v) {
    auto x = buf.input(op.microbatch, op.chunk, field);
    auto y = buf.output(op.microbatch, op.chunk, field);
    std::size_t at = 0;
    for (auto id : ids(op.microbatch))
      for (std::int64_t r = 0; r < rows_of(id); ++r)
        for (std::int64_t k = 0; k < width; ++k, ++at) {
          if (c > 0 && x[at] != v(id, r, k, c - 1))
            throw std::runtime_error(
                disttrain::cat("stage ", c, " field ", field, " got ", x[at], " for sample ", id));
          if (c + 1 < stages) y[at] = v(id, r, k, c);
        }
  }
  void forward(const disttrain::schedule_op& op) {
    ran.push_back(op);
    const int c = mine->program.virtual_stages.at(static_cast<std::size_t>(op.chunk));
    const auto rows = [](std::uint64_t id) { return 1 + static_cast<std::int64_t>(id % 3); };
    pass(op, c, 0, hidden, rows, value);
    if (!fields) return;
    pass(op, c, 1, 1, rows,
         [](std::uint64_t id, std::int64_t r, std::int64_t, int s) { return pos(id, r, s); });
    pass(
        op, c, 2, 2, [](std::uint64_t) { return std::int64_t{1}; },
        [](std::uint64_t id, std::int64_t, std::int64_t k, int s) { return value(id, 7, k, s); });
  }
  void backward(const disttrain::schedule_op& op) {
    ran.push_back(op);
    const int c = mine->program.virtual_stages.at(static_cast<std::size_t>(op.chunk));
    auto dx = buf.input_grad(op.microbatch, op.chunk);
    auto dy = buf.output_grad(op.microbatch, op.chunk);
    // The gradient of stage c's output: 2^(stages - 2 - c) (the last stage has no output).
    const double expect = c + 1 < stages ? static_cast<double>(1 << (stages - 2 - c)) : 0.0;
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = c + 1 == stages ? 1.0 : 2.0 * dy[i];
    for (double g : dy)
      if (g != expect)
        throw std::runtime_error(
            disttrain::cat("stage ", c, " gradient ", g, ", expected ", expect));
    bucket[0] += static_cast<double>(dy.size());
    if (!fields) return;
    // "aux" is differentiable like the activation; no gradient of "pos"
    // travels (its part of every gradient message is empty: still zeros).
    auto ax = buf.input_grad(op.microbatch, op.chunk, 2);
    auto ay = buf.output_grad(op.microbatch, op.chunk, 2);
    for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = c + 1 == stages ? 1.0 : 2.0 * ay[i];
    for (double g : ay)
      if (g != expect)
        throw std::runtime_error(
            disttrain::cat("stage ", c, " aux gradient ", g, ", expected ", expect));
    for (std::size_t i = 0; auto& g : buf.input_grad(op.microbatch, op.chunk, 1))
      g = static_cast<double>(++i);  // would corrupt "pos" upstream if it travelled
    for (double g : buf.output_grad(op.microbatch, op.chunk, 1))
      if (g != 0.0) throw std::runtime_error(disttrain::cat("stage ", c, " got a pos gradient"));
  }
  void weight(const disttrain::schedule_op& op) { ran.push_back(op); }
  void optimizer_step(const disttrain::schedule_op& op) { ran.push_back(op); }
  disttrain::grad_bucket<double> bucket_ready(const disttrain::schedule_op&) {
    return {std::span(bucket)};
  }
  void bucket_reduced(const disttrain::schedule_op&) {}
  std::span<std::byte> payload(const disttrain::bound_op& b) { return buf.payload(b); }
  void received(const disttrain::bound_op& b) { buf.received(b); }
};
static_assert(disttrain::exec_host<toy_host>);

// Runs `world` (bound for t, chain, map, sh; maybe reordered) one iteration
// on every rank; checks values, gradients and that the executed ops are the
// program's.
void execute_world(const topology& t, const disttrain::pipeline_schedule& chain,
                   const disttrain::reorder_result& map,
                   const std::vector<disttrain::link_shape>& sh,
                   const disttrain::bound_world& world, disttrain::exec_options opts = {},
                   std::chrono::milliseconds timeout = 5000ms, bool fields = false) {
  disttrain::local_world lw(t.world_size(), {timeout});
  std::vector<std::vector<disttrain::exec_event>> events(static_cast<std::size_t>(t.world_size()));
  auto errors = disttrain::test::run_ranks(lw, [&](disttrain::local_backend& b) {
    const int me = b.rank();
    disttrain::bound_rank mine = disttrain::bind_rank(t, chain, map, sh, me);
    auto& prog = world.programs[static_cast<std::size_t>(me)];
    if (!std::is_permutation(mine.program.ops.begin(), mine.program.ops.end(), prog.ops.begin(),
                             prog.ops.end()))
      throw std::runtime_error("bind_rank's ops differ from bind_world's");
    mine.program = prog;
    toy_host h;
    h.mine = &mine;
    h.map = &map;
    h.stages = t.num_virtual_stages();
    h.fields = fields;
    const auto co = t.coord(me);
    h.module_index = t.owning_index(co.module);
    h.replica = co.replica.value;
    h.buf.reset(mine);
    disttrain::executor<disttrain::local_backend> ex(b, opts);
    auto st = ex.run(mine.program, h);
    events[static_cast<std::size_t>(me)] = std::move(st.events);
  });
  disttrain::test::rethrow_first(errors);
  // The executed ops, per rank, in program order, are the bound program's.
  for (int r = 0; r < t.world_size(); ++r) {
    const auto& prog = world.programs[static_cast<std::size_t>(r)].ops;
    std::vector<disttrain::schedule_op> executed(prog.size());
    std::vector<char> seen(prog.size(), 0);
    for (const auto& e : events[static_cast<std::size_t>(r)])
      if (e.index >= 0 && !seen[static_cast<std::size_t>(e.index)]) {
        executed[static_cast<std::size_t>(e.index)] = e.op;
        seen[static_cast<std::size_t>(e.index)] = 1;
      }
    for (std::size_t i = 0; i < prog.size(); ++i) {
      INFO("rank " << r << " op #" << i << " " << disttrain::describe(prog[i].op));
      REQUIRE(seen[i]);
      REQUIRE(executed[i] == prog[i].op);
    }
  }
}

// Binds and runs one iteration on every rank; checks values, gradients and
// that the executed ops are the bound program's.
// `zb`: the chain in ZB-H1's order (implies split); `fields`: the links
// carry three fields (see shapes).
void run_layout(const topology& t, int n, int microbatches, bool split = false, bool zb = false,
                bool fields = false) {
  const auto chain = disttrain::chain_program(
      t, {.microbatches = microbatches, .split_backward = split, .zero_bubble = zb});
  const auto map = sample_map(t, n, microbatches);
  const auto sh = shapes(t, map, fields);
  const disttrain::bound_world world = disttrain::bind_world(t, chain, map, sh);
  for (int r = 0; r < t.world_size(); ++r)
    REQUIRE(disttrain::bind_rank(t, chain, map, sh, r).program ==
            world.programs[static_cast<std::size_t>(r)]);
  const auto rep = disttrain::validate_bound(world);
  CHECK(rep.messages > 0);
  // No two messages from one rank to another share a stamp (NCCL matches
  // them by issue order: a message taken for another must fail its check).
  for (const auto& p : world.programs) {
    std::set<std::pair<int, std::uint64_t>> seen;
    for (const auto& b : p.ops)
      if (disttrain::is_send(b.op.kind)) CHECK(seen.insert({b.op.peer, b.stamp}).second);
  }
  // The rendezvous order (NCCL, as disttrain.torch issues the ops): the same
  // ops, messages matched as before, no deadlock under either semantics.
  auto ordered = world;
  disttrain::order_for_rendezvous(ordered, chain);
  CHECK(disttrain::validate_bound(ordered, disttrain::p2p_semantics::rendezvous).messages ==
        rep.messages);
  CHECK(disttrain::validate_bound(ordered).messages == rep.messages);
  for (const bool rendezvous : {false, true}) {
    INFO("rendezvous order " << rendezvous);
    execute_world(t, chain, map, sh, rendezvous ? ordered : world, {}, 5000ms, fields);
  }
  // The executor's batched mode (NCCL's way: a batch in one group, nothing
  // posted ahead, a batch's sends done before the next) on the ordered world.
  execute_world(t, chain, map, sh, ordered, {.batched = true}, 5000ms, fields);
}

}  // namespace

TEST_CASE("bound programs carry TP fan-out and reversed gradient routes", "[bind]") {
  SECTION("enc TP2 DP2 -> llm TP2 PP1 DP3 -> gen TP1 DP2") {
    run_layout(three(2, 2, 2, 1, 3, 1, 2), 13, 3);
  }
  SECTION("enc TP1 DP3 -> llm TP2 PP2 DP2 -> gen TP2 DP1, frozen encoder, split backward") {
    run_layout(three(1, 3, 2, 2, 2, 2, 1, true), 11, 4, true);
  }
  SECTION("enc TP2 DP1 -> llm TP1 PP3 DP2 -> gen TP1 DP3") {
    run_layout(three(2, 1, 1, 3, 2, 1, 3), 9, 3);
  }
  SECTION("ZB-H1 order: enc TP1 DP2 -> llm TP2 PP3 DP2 -> gen TP1 DP2, 6 microbatches") {
    run_layout(three(1, 2, 2, 3, 2, 1, 2), 12, 6, false, true);
  }
  SECTION("ZB-H1 order, frozen encoder (forwards only), fewer microbatches than stages") {
    run_layout(three(1, 3, 2, 2, 2, 2, 1, true), 11, 3, false, true);
  }
  SECTION("a replica with no sample in a microbatch") {
    run_layout(three(1, 4, 1, 1, 1, 1, 4), 5, 2);
  }
  SECTION("interleaved: enc TP1 DP2 -> llm TP2 PP2 DP1 x2 chunks -> gen TP1 DP1") {
    run_layout(three(1, 2, 2, 2, 1, 1, 1, false, 2), 10, 4);
  }
  SECTION("interleaved: frozen enc TP1 DP1 -> llm TP1 PP3 DP2 x3 chunks -> gen TP2 DP1") {
    run_layout(three(1, 1, 1, 3, 2, 2, 1, true, 3), 14, 6);
  }
  SECTION("interleaved, microbatches = pp: enc TP2 DP1 -> llm TP1 PP2 DP2 x2 -> gen TP1 DP2") {
    run_layout(three(2, 1, 1, 2, 2, 1, 2, false, 2), 7, 2);
  }
}

TEST_CASE("links of several fields: each field arrives, gradients flow for the differentiable",
          "[bind]") {
  SECTION("enc TP2 DP2 -> llm TP2 PP1 DP3 -> gen TP1 DP2") {
    run_layout(three(2, 2, 2, 1, 3, 1, 2), 13, 3, false, false, true);
  }
  SECTION("ZB-H1: enc TP1 DP2 -> llm TP2 PP3 DP2 -> gen TP1 DP2") {
    run_layout(three(1, 2, 2, 3, 2, 1, 2), 12, 6, false, true, true);
  }
  SECTION("interleaved: frozen enc TP1 DP1 -> llm TP1 PP3 DP2 x3 chunks -> gen TP2 DP1") {
    run_layout(three(1, 1, 1, 3, 2, 2, 1, true, 3), 14, 6, false, false, true);
  }
}

TEST_CASE("links of several fields: one message per pair, parts aligned, sizes per field",
          "[bind]") {
  const topology t = three(2, 2, 2, 1, 3, 1, 2);
  const auto chain = disttrain::chain_program(t, {.microbatches = 3});
  const auto map = sample_map(t, 13, 3);
  const auto one = shapes(t, map), three_fields = shapes(t, map, true);
  const auto w1 = disttrain::bind_world(t, chain, map, one);
  const auto w3 = disttrain::bind_world(t, chain, map, three_fields);
  std::size_t multi = 0;
  for (int r = 0; r < t.world_size(); ++r) {
    const auto& p1 = w1.programs[static_cast<std::size_t>(r)];
    const auto& p3 = w3.programs[static_cast<std::size_t>(r)];
    CHECK(p1.fields == 1);
    CHECK(p3.fields == 3);
    // The extra fields add no message: the activation already needs every pair.
    REQUIRE(p1.ops.size() == p3.ops.size());
    const disttrain::bound_rank mine = disttrain::bind_rank(t, chain, map, three_fields, r);
    for (std::size_t i = 0; i < p3.ops.size(); ++i) {
      const auto& b = p3.ops[i];
      CHECK(b.op == p1.ops[i].op);
      if (!disttrain::is_p2p(b.op.kind)) continue;
      CHECK(b.stamp != p1.ops[i].stamp);  // the fields are part of the plan
      const auto rs = mine.routes_of(b);
      REQUIRE(rs.size() == 3);
      std::int64_t end = 0;
      for (std::size_t f = 0; f < 3; ++f) {
        const std::int64_t off = mine.field_offset(b, f);
        CHECK(off >= end);
        CHECK(off - end < disttrain::field_alignment);
        CHECK((f == 0 || off % disttrain::field_alignment == 0));
        end = off + mine.message_of(b, f).elements * 8;
      }
      CHECK(mine.field_offset(b, 3) == end);
      CHECK(b.bytes == end);
      const bool grad =
          b.op.kind == disttrain::op_kind::send_grad || b.op.kind == disttrain::op_kind::recv_grad;
      if (grad) CHECK(mine.message_of(b, 1).elements == 0);  // "pos" is not differentiable
      multi += mine.message_of(b, 1).elements > 0 ? 1U : 0U;
    }
    for (std::size_t e = 0; e < p1.input_elements.size(); ++e) {
      CHECK(p3.input_elements[e * 3] == p1.input_elements[e]);
      CHECK(p3.input_elements[e * 3 + 1] * hidden == p1.input_elements[e]);  // one pos per row
      CHECK(p3.output_elements[e * 3] == p1.output_elements[e]);
    }
  }
  CHECK(multi > 0);
  CHECK(disttrain::field_index(three_fields[0], "aux") == 2);
  DISTTRAIN_CHECK_ERROR((void)disttrain::field_index(three_fields[0], "mask"),
                        disttrain::errc::invalid_argument, "link_shape.fields");
  // Bad fields are named.
  auto bad = three_fields;
  bad[1].fields[2].name = "pos";
  DISTTRAIN_CHECK_ERROR(disttrain::bind_world(t, chain, map, bad),
                        disttrain::errc::invalid_argument, "bind.shapes[1].fields[2].name");
  bad = three_fields;
  bad[0].fields[1].rows.pop_back();
  DISTTRAIN_CHECK_ERROR(disttrain::bind_world(t, chain, map, bad),
                        disttrain::errc::invalid_argument, "bind.shapes[0].fields[1].rows");
  bad = three_fields;
  bad[0].fields.clear();
  DISTTRAIN_CHECK_ERROR(disttrain::bind_world(t, chain, map, bad),
                        disttrain::errc::invalid_argument, "bind.shapes[0].fields");
}

TEST_CASE("interleaved: links join chunk c on the last stage to chunk c + 1 on the first",
          "[bind]") {
  const topology t = three(1, 2, 2, 2, 1, 1, 1, false, 2);
  // Path: enc, llm s0 c0, llm s1 c0, llm s0 c1, llm s1 c1, gen.
  REQUIRE(t.num_virtual_stages() == 6);
  CHECK(t.virtual_at(3) == std::pair<int, int>{1, 1});
  CHECK(t.virtual_stage(t.backbone(), disttrain::stage_id{1}, 1) == 4);
  const auto chain = disttrain::chain_program(t, {.microbatches = 4});
  const auto map = sample_map(t, 8, 4);
  const auto w = disttrain::bind_world(t, chain, map, shapes(t, map));
  // llm stage 1 TP rank 0 (global rank 4) sends chunk 0's activations to llm
  // stage 0 (ranks 2, 3) across link 2, and receives their gradients back.
  const auto& p = w.programs[4];
  CHECK(p.virtual_stages == std::vector<int>{2, 4});
  bool act = false, grad = false;
  for (const auto& b : p.ops) {
    if (b.link != 2) continue;
    if (b.op.kind == op_kind::send_act && b.phase == 0) {
      act = true;
      CHECK((b.op.peer == 2 || b.op.peer == 3));
      CHECK(b.op.stage == 2);  // the producer: chain stage 2 (llm stage 1), chunk 0
      CHECK(b.op.chunk == 0);
    }
    if (b.op.kind == op_kind::recv_grad && b.phase == 0) grad = true;
  }
  CHECK(act);
  CHECK(grad);
  // Microbatches must be a multiple of the interleaved module's stages.
  DISTTRAIN_CHECK_ERROR(disttrain::chain_program(t, {.microbatches = 3}), errc::invalid_argument,
                        "chain_options (llm).num_microbatches");
  DISTTRAIN_CHECK_ERROR(disttrain::chain_program(t, {.microbatches = 4, .zero_bubble = true}),
                        errc::invalid_argument, "chain_options.zero_bubble");
  // A chain of other chunks does not bind.
  const auto flat = disttrain::chain_program(three(1, 2, 2, 2, 1, 1, 1), {.microbatches = 4});
  DISTTRAIN_CHECK_ERROR(disttrain::bind_world(t, flat, map, shapes(t, map)), errc::invalid_argument,
                        "bind.chain");
}

TEST_CASE("validate_bound reports a deadlock and a mismatched message", "[bind]") {
  const bool interleaved = GENERATE(false, true);
  INFO("interleaved " << interleaved);
  const topology t = three(1, 2, 2, 2, 2, 1, 1, false, interleaved ? 2 : 1);
  const int m = interleaved ? 4 : 3;
  const auto chain = disttrain::chain_program(t, {.microbatches = m});
  const auto map = sample_map(t, 9, m);
  disttrain::bound_world w = disttrain::bind_world(t, chain, map, shapes(t, map));
  REQUIRE_NOTHROW(disttrain::validate_bound(w));
  // A receive moved before the send its message waits on: the two ranks
  // deadlock. The move keeps the order of the rank's receives from that peer
  // (which the validator checks first: a crossed pair is a mismatch), so the
  // replay itself must find the deadlock. The first such move on a rank that
  // runs chunks (interleaved) or on the encoder rank 0.
  {
    const auto move_recv = [](std::vector<disttrain::bound_op>& ops, std::size_t i) {
      const int peer = ops[i].op.peer;
      std::size_t to = i;
      bool sends = false;
      while (to > 0 && !(disttrain::is_recv(ops[to - 1].op.kind) && ops[to - 1].op.peer == peer)) {
        sends = sends || (disttrain::is_send(ops[to - 1].op.kind) && ops[to - 1].op.peer == peer);
        --to;
      }
      if (!sends) return false;
      const auto moved = ops[i];
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
      ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(to), moved);
      return true;
    };
    // A move whose receive does not wait on the sends it passes is legal;
    // every other one must be reported as a deadlock.
    bool found = false;
    for (int r = 0; r < w.world_size() && !found; ++r) {
      if (interleaved ? w.programs[static_cast<std::size_t>(r)].chunks() < 2 : r != 0) continue;
      for (std::size_t i = 0; i < w.programs[static_cast<std::size_t>(r)].ops.size() && !found;
           ++i) {
        auto bad = w;
        auto& ops = bad.programs[static_cast<std::size_t>(r)].ops;
        if (ops[i].op.kind != op_kind::recv_grad || !move_recv(ops, i)) continue;
        try {
          disttrain::validate_bound(bad);
        } catch (const disttrain::error& e) {
          INFO("rank " << r << " op " << i << ": " << e.what());
          found = true;
          CHECK(e.code() == errc::schedule_error);
          CHECK(std::string(e.where()) == "bound_world");
          CHECK(std::string(e.what()).find("deadlock") != std::string::npos);
        }
      }
    }
    CHECK(found);
  }
  // A byte count that differs between send and receive.
  {
    auto bad = w;
    for (auto& b : bad.programs[0].ops)
      if (b.op.kind == op_kind::send_act) {
        b.bytes += 8;
        break;
      }
    DISTTRAIN_CHECK_ERROR(disttrain::validate_bound(bad), errc::schedule_error, "recv_act");
  }
}

TEST_CASE("p2p_batches: runs of point-to-point ops, fan-out sends after a receive apart",
          "[bind]") {
  const topology t = three(1, 2, 2, 2, 1, 1, 1);
  const auto chain = disttrain::chain_program(t, {.microbatches = 4});
  const auto map = sample_map(t, 8, 4);
  const disttrain::bound_world w = disttrain::bind_world(t, chain, map, shapes(t, map));
  bool fan_out_apart = false;
  for (const auto& p : w.programs) {
    const std::vector<int> batch = disttrain::p2p_batches(p);
    REQUIRE(batch.size() == p.ops.size());
    int last = -1;
    bool received = false;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const auto& b = p.ops[i];
      INFO(disttrain::describe(w, p.rank, i));
      if (!disttrain::is_p2p(b.op.kind)) {
        CHECK(batch[i] == -1);
        continue;
      }
      const bool same = i > 0 && batch[i - 1] == batch[i];
      // A batch continues a run unless a fan-out send follows a receive of it.
      const bool runs_on = i > 0 && disttrain::is_p2p(p.ops[i - 1].op.kind);
      const bool split = received && disttrain::is_send(b.op.kind) && b.phase == 1;
      CHECK(same == (runs_on && !split));
      fan_out_apart = fan_out_apart || (runs_on && split);
      CHECK((same ? batch[i] == last : batch[i] == last + 1));
      if (!same) received = false;
      received = received || disttrain::is_recv(b.op.kind);
      last = batch[i];
    }
  }
  CHECK(fan_out_apart);  // the backbone's TP2 fan-out of a received input
}

TEST_CASE("validate_bound under rendezvous finds what buffering hides", "[bind]") {
  // Backbone PP2: in 1F1B's steady state stage 0 sends activation j+1 and
  // receives gradient j in one batch, stage 1 sends gradient j and receives
  // activation j+1 in one. A compute op put between the send and the receive
  // of each batch (both ranks send first, then wait): MPI buffers the sends
  // and runs; NCCL's sends wait for receives that come after them.
  const topology t({{"llm", module_role::backbone, 1, 2, 1}});
  const auto chain = disttrain::chain_program(t, {.microbatches = 4});
  const auto map = sample_map(t, 8, 4);
  const disttrain::bound_world w = disttrain::bind_world(t, chain, map, shapes(t, map));
  REQUIRE_NOTHROW(disttrain::validate_bound(w, disttrain::p2p_semantics::rendezvous));
  auto bad = w;
  int split = 0;
  for (auto& p : bad.programs) {
    for (std::size_t i = 0; i + 1 < p.ops.size(); ++i) {
      if (disttrain::is_send(p.ops[i].op.kind) && disttrain::is_recv(p.ops[i + 1].op.kind)) {
        disttrain::bound_op compute;  // no message: it ends the batch
        compute.op = p.ops[i].op;
        compute.op.kind = op_kind::optimizer_step;
        compute.op.peer = -1;
        p.ops.insert(p.ops.begin() + static_cast<std::ptrdiff_t>(i) + 1, compute);
        ++split;
        break;
      }
    }
  }
  REQUIRE(split == 2);
  REQUIRE_NOTHROW(disttrain::validate_bound(bad));
  DISTTRAIN_CHECK_ERROR(disttrain::validate_bound(bad, disttrain::p2p_semantics::rendezvous),
                        errc::schedule_error, "bound_world");
  try {
    disttrain::validate_bound(bad, disttrain::p2p_semantics::rendezvous);
  } catch (const disttrain::error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("2 ranks blocked") != std::string::npos);
    CHECK(what.find("send_act") != std::string::npos);
    CHECK(what.find("for rank 1, which waits at rank 1 op #") != std::string::npos);
  }
}

TEST_CASE("order_for_rendezvous: interleaved 1F1B as bound deadlocks on NCCL, ordered it runs",
          "[bind]") {
  // Bound order: stage 0 sends chunk 1's output down while stage 1 sends
  // chunk 0's output back up the wrap-around link, each before its receive.
  const int chunks = GENERATE(2, 3);
  INFO("chunks " << chunks);
  const topology t = three(1, 2, 2, 2, 1, 1, 1, false, chunks);
  const int m = 6;
  const auto chain = disttrain::chain_program(t, {.microbatches = m});
  const auto map = sample_map(t, 12, m);
  const disttrain::bound_world w = disttrain::bind_world(t, chain, map, shapes(t, map));
  REQUIRE_NOTHROW(disttrain::validate_bound(w));
  DISTTRAIN_CHECK_ERROR(disttrain::validate_bound(w, disttrain::p2p_semantics::rendezvous),
                        errc::schedule_error, "bound_world");
  auto ordered = w;
  disttrain::order_for_rendezvous(ordered, chain);
  REQUIRE_NOTHROW(disttrain::validate_bound(ordered, disttrain::p2p_semantics::rendezvous));
  // The executor in batched mode on the local backend (a send completes once
  // its receive takes it): the bound order hangs until the deadline, the
  // rendezvous order runs and moves the right values.
  if (chunks == 2) {
    bool failed = false;
    try {
      execute_world(t, chain, map, shapes(t, map), w, {.batched = true}, 300ms);
    } catch (const disttrain::error& e) {
      failed = e.code() == errc::timeout || e.code() == errc::comm_error;
      INFO(e.what());
      CHECK(failed);
    }
    CHECK(failed);
  }
  execute_world(t, chain, map, shapes(t, map), ordered, {.batched = true});
  // The compute ops keep their order; a receive (and the fan-out of what it
  // brings) still comes just before the op that reads it; a send moves later
  // only, to the round its receiver reads it in.
  for (std::size_t r = 0; r < w.programs.size(); ++r) {
    const auto& a = w.programs[r].ops;
    const auto& b = ordered.programs[r].ops;
    REQUIRE(std::is_permutation(a.begin(), a.end(), b.begin(), b.end()));
    const auto compute = [](const disttrain::bound_op& o) { return disttrain::is_pass(o.op.kind); };
    std::vector<disttrain::bound_op> ca, cb;
    std::copy_if(a.begin(), a.end(), std::back_inserter(ca), compute);
    std::copy_if(b.begin(), b.end(), std::back_inserter(cb), compute);
    CHECK(ca == cb);
    const auto computes_before = [&](const std::vector<disttrain::bound_op>& ops,
                                     const disttrain::bound_op& x) {
      return std::count_if(ops.begin(), std::find(ops.begin(), ops.end(), x), compute);
    };
    bool moved = false;
    for (const auto& x : b) {
      if (!disttrain::is_p2p(x.op.kind)) continue;
      const auto now = computes_before(b, x), was = computes_before(a, x);
      if (disttrain::is_send(x.op.kind) && x.phase == 0) {
        CHECK(now >= was);
        moved = moved || now > was;
      } else {
        CHECK(now == was);
      }
    }
    if (w.programs[r].chunks() > 1) CHECK(moved);
  }
  // A chain of other rounds (fewer microbatches) does not order this program.
  // (Its first op is the encoder's F of microbatch 0, which that chain has:
  // the error comes at a later microbatch.)
  const disttrain::message_rounds other(disttrain::chain_program(t, {.microbatches = 2}));
  DISTTRAIN_CHECK_ERROR(disttrain::order_for_rendezvous(ordered.programs[0], other),
                        errc::invalid_argument, "message_rounds");
}

TEST_CASE("programs bound from different sample maps of equal sizes fail, never swap data",
          "[bind]") {
  // enc -> llm -> gen, DP 1 each: every module's cell of microbatch 0 holds the
  // same samples. Map B swaps the first two samples of that microbatch (rows
  // 1 and 2: the microbatch's bytes are unchanged, the sample order is not).
  const topology t = three(1, 1, 1, 1, 1, 1, 1);
  const auto chain = disttrain::chain_program(t, {.microbatches = 2});
  const auto a = sample_map(t, 6, 2);
  auto b = a;
  const auto first = a.cell(0, 0, 0);
  REQUIRE(first.size() >= 2);
  const std::uint32_t x = first[0], y = first[1];
  REQUIRE(a.samples[x].id % 3 != a.samples[y].id % 3);  // different rows: a real swap
  for (std::size_t k = 0; k < b.modules; ++k) {
    const std::size_t c = b.cell_index(k, 0, 0);
    std::swap(b.cell_samples[b.cell_begin[c]], b.cell_samples[b.cell_begin[c] + 1]);
    std::swap(b.samples[x].module[k].offset, b.samples[y].module[k].offset);
  }
  const auto sh = shapes(t, a);
  REQUIRE(sh[0].fields[0].rows == shapes(t, b)[0].fields[0].rows);
  const auto wa = disttrain::bind_world(t, chain, a, sh);
  const auto wb = disttrain::bind_world(t, chain, b, sh);
  // Same peers, tags and bytes everywhere: only the stamps tell them apart.
  auto mixed = wa;
  mixed.programs[0] = wb.programs[0];
  for (std::size_t i = 0; i < wa.programs[0].ops.size(); ++i) {
    CHECK(wa.programs[0].ops[i].bytes == wb.programs[0].ops[i].bytes);
    CHECK(wa.programs[0].ops[i].tag == wb.programs[0].ops[i].tag);
  }
  // The first receive (in rank order) of a message whose stamps differ.
  DISTTRAIN_CHECK_ERROR(disttrain::validate_bound(mixed), errc::schedule_error, "op #4 recv_grad");
  // Run: the encoder rank binds from map B, the others from map A. The
  // backbone must fail at its first receive (before its host sees a byte).
  disttrain::local_world lw(t.world_size(), {2000ms});
  auto errors = disttrain::test::run_ranks(lw, [&](disttrain::local_backend& be) {
    const int me = be.rank();
    const disttrain::bound_rank mine = disttrain::bind_rank(t, chain, me == 0 ? b : a, sh, me);
    toy_host h;
    h.mine = &mine;
    h.map = me == 0 ? &b : &a;
    h.stages = t.num_virtual_stages();
    h.module_index = t.owning_index(t.coord(me).module);
    h.buf.reset(mine);
    disttrain::executor<disttrain::local_backend> ex(be, {.timeout = 500ms});
    (void)ex.run(mine.program, h);
  });
  REQUIRE(errors[1]);
  try {
    std::rethrow_exception(errors[1]);
  } catch (const disttrain::error& e) {
    CHECK(e.code() == errc::comm_error);
    CHECK(std::string(e.what()).find("plan disagreement: rank 0") != std::string::npos);
  } catch (const std::exception& e) {
    FAIL("rank 1 failed with a non-disttrain error (its host saw wrong data): " << e.what());
  }
}

TEST_CASE("bind_world into a used world equals a fresh bind", "[bind]") {
  // The overload that reuses a world's storage (a training loop rebinding
  // every batch) must give exactly the fresh world, whatever it held before:
  // a larger interleaved world, then a smaller plain one, then the first again.
  const topology big = three(1, 2, 2, 2, 2, 1, 1, false, 2);
  const topology small = three(1, 1, 1, 1, 1, 1, 1);
  disttrain::bound_world reused;
  for (const topology* t : {&big, &small, &big}) {
    const int m = t == &big ? 4 : 3;
    const auto chain = disttrain::chain_program(*t, {.microbatches = m});
    const auto map = sample_map(*t, 9, m);
    const auto sh = shapes(*t, map);
    disttrain::bind_world(*t, chain, map, sh, reused);
    const disttrain::bound_world fresh = disttrain::bind_world(*t, chain, map, sh);
    REQUIRE(reused.world_size() == fresh.world_size());
    for (std::size_t r = 0; r < fresh.programs.size(); ++r)
      CHECK(reused.programs[r] == fresh.programs[r]);  // every field
    CHECK(reused == fresh);
  }
}

TEST_CASE("bind rejects inputs that do not fit the topology", "[bind]") {
  const topology t = three(1, 2, 1, 2, 2, 1, 1);
  const auto chain = disttrain::chain_program(t, {.microbatches = 2});
  const auto map = sample_map(t, 6, 2);
  auto sh = shapes(t, map);
  sh.pop_back();
  DISTTRAIN_CHECK_ERROR(disttrain::bind_world(t, chain, map, sh), errc::invalid_argument,
                        "bind.shapes");
  // A sample map over other modules (e.g. per model module with a colocated encoder).
  const topology colo({{"enc", module_role::encoder, 1, 1, 2, true, true},
                       {"llm", module_role::backbone, 1, 2, 2},
                       {"gen", module_role::generator, 1, 1, 1}});
  const auto chain2 = disttrain::chain_program(colo, {.microbatches = 2});
  DISTTRAIN_CHECK_ERROR(disttrain::bind_world(colo, chain2, map, shapes(t, map)),
                        errc::invalid_argument, "bind.map.modules");
}

TEST_CASE("topology: one rank numbering, checked fields", "[bind][topology]") {
  const topology t = three(2, 2, 2, 1, 3, 1, 2);
  CHECK(t.world_size() == 4 + 6 + 2);
  for (int r = 0; r < t.world_size(); ++r) {
    const auto c = t.coord(r);
    CHECK(t.rank(c) == r);
  }
  DISTTRAIN_CHECK_ERROR(topology({{"a", module_role::backbone}, {"a", module_role::generator}}),
                        errc::invalid_argument, "topology.modules[1].name");
  DISTTRAIN_CHECK_ERROR(topology({{"g", module_role::generator}, {"b", module_role::backbone}}),
                        errc::invalid_argument, "topology.modules[1].role");
  DISTTRAIN_CHECK_ERROR(topology({{"e", module_role::encoder}}), errc::invalid_argument,
                        "topology.modules");
}
