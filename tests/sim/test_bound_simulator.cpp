// simulate_bound: the bound program of every rank, with per-pair message
// sizes, on the validator's replay engine with durations; busy / exposed /
// idle per rank; agreement with the schedule simulator on a DP-1 chain.
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "disttrain/bind/bind.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/sim/simulator.hpp"
#include "disttrain/sim/svg.hpp"
#include "disttrain/sim/trace.hpp"
#include "disttrain_catch.hpp"

using disttrain::bound_op;
using disttrain::bound_world;
using disttrain::errc;
using disttrain::module_role;
using disttrain::op_kind;
using disttrain::schedule_op;
using disttrain::topology;

namespace {

bound_op compute(op_kind k, int mb) {
  bound_op b;
  b.op.kind = k;
  b.op.microbatch = mb;
  return b;
}
bound_op p2p(op_kind k, int mb, int peer, std::int64_t bytes, int tag) {
  bound_op b;
  b.op = schedule_op::send(k, 0, 0, mb, peer);
  b.bytes = bytes;
  b.tag = tag;
  b.link = 0;
  return b;
}

// Rank 0 computes F and sends 1000 B to rank 1 and 3000 B to rank 2; each
// receiver runs F on what arrives.
bound_world fan_out() {
  bound_world w;
  w.name = "fan-out";
  w.num_microbatches = 1;
  w.programs.resize(3);
  for (int r = 0; r < 3; ++r) {
    w.programs[static_cast<std::size_t>(r)].rank = r;
    w.programs[static_cast<std::size_t>(r)].dp_group = {r};
  }
  w.programs[0].ops = {compute(op_kind::forward, 0), p2p(op_kind::send_act, 0, 1, 1000, 7),
                       p2p(op_kind::send_act, 0, 2, 3000, 7)};
  w.programs[1].ops = {p2p(op_kind::recv_act, 0, 0, 1000, 7), compute(op_kind::forward, 0)};
  w.programs[2].ops = {p2p(op_kind::recv_act, 0, 0, 3000, 7), compute(op_kind::forward, 0)};
  return w;
}

topology three(int etp, int edp, int btp, int bpp, int bdp, int gtp, int gdp) {
  return topology({{"enc", module_role::encoder, etp, 1, edp},
                   {"llm", module_role::backbone, btp, bpp, bdp},
                   {"gen", module_role::generator, gtp, 1, gdp}});
}

struct bound_case {
  topology topo;
  disttrain::pipeline_schedule chain;
  disttrain::reorder_result map;
  bound_world world;
};

// n samples of unequal cost, `rows` rows of 4 floats per sample on every link.
bound_case bind_case(const topology& t, int n, int microbatches, std::int64_t rows = 2) {
  bound_case c{t, disttrain::chain_program(t, {.microbatches = microbatches}), {}, {}};
  disttrain::reorderer<> r(
      disttrain::reorder_options_of(t, static_cast<std::uint32_t>(microbatches)));
  std::vector<disttrain::sample_meta> batch;
  for (int i = 0; i < n; ++i) {
    disttrain::sample_meta m;
    m.id = static_cast<std::uint64_t>(i);
    for (std::size_t k = 0; k < t.owning_modules().size(); ++k)
      m.cost[k] = 1.0 + static_cast<double>((i * 5 + static_cast<int>(k)) % 3);
    batch.push_back(m);
  }
  c.map = r.assign(batch);
  std::vector<disttrain::link_shape> shapes(static_cast<std::size_t>(t.num_chain_stages() - 1));
  for (auto& s : shapes)
    s.fields = {{.hidden = 4, .rows = std::vector(c.map.samples.size(), rows)}};
  c.world = disttrain::bind_world(t, c.chain, c.map, shapes);
  return c;
}

}  // namespace

TEST_CASE("simulate_bound prices each message by its own pair and bytes", "[sim][bound]") {
  const bound_world w = fan_out();
  const disttrain::table_durations d{.forward = {1.0}, .bytes_per_s = 1000.0};
  const auto res = disttrain::simulate_bound(w, d);
  // Rank 1 gets 1000 B at 1 + 1 = 2 s; rank 0's second message leaves after
  // the first: rank 2 gets its 3000 B at 2 + 3 = 5 s.
  CHECK(res.interval(0, 1).start == 1.0);
  CHECK(res.interval(0, 1).end == 2.0);
  CHECK(res.interval(0, 2).start == 2.0);  // leaves once the first has arrived
  CHECK(res.interval(0, 2).end == 5.0);
  CHECK(res.interval(1, 0).end == 2.0);
  CHECK(res.interval(2, 1).start == 5.0);
  CHECK(res.iteration_time == 6.0);
  CHECK(res.busy == std::vector<double>{1.0, 1.0, 1.0});
  CHECK(res.exposed_p2p == std::vector<double>{0.0, 2.0, 5.0});
  CHECK(res.exposed(2) == 5.0);
  CHECK(res.idle(0) == 5.0);  // rank 0 finished posting at 1 s
  CHECK(res.idle(2) == 0.0);
  CHECK(res.busy_fraction(1) == 1.0 / 6.0);
  // A transfer model that looks at the pair: rank 2's link is 10x slower.
  struct slow_pair : disttrain::table_durations {
    [[nodiscard]] double transfer(int, int dst, const disttrain::bound_op& b) const {
      return static_cast<double>(b.bytes) / (dst == 2 ? 100.0 : 1000.0);
    }
  };
  static_assert(disttrain::duration_model<slow_pair>);
  CHECK(disttrain::simulate_bound(w, slow_pair{{.forward = {1.0}}}).iteration_time ==
        1.0 + 1.0 + 30.0 + 1.0);
}

TEST_CASE("simulate_bound names the op of a bad duration and reports deadlocks", "[sim][bound]") {
  const bound_world w = fan_out();
  DISTTRAIN_CHECK_ERROR(disttrain::simulate_bound(w, disttrain::table_durations{.forward = {-1.0}}),
                        errc::invalid_argument, "rank 0 op #0 F");
  DISTTRAIN_CHECK_ERROR(
      disttrain::simulate_bound(
          w, disttrain::table_durations{.transfer_s = std::numeric_limits<double>::infinity()}),
      errc::invalid_argument, "rank 0 op #1 send_act");
  auto bad = w;
  std::swap(bad.programs[1].ops[0], bad.programs[1].ops[1]);
  bad.programs[0].ops.insert(bad.programs[0].ops.begin(), p2p(op_kind::recv_grad, 0, 1, 8, 9));
  bad.programs[1].ops.push_back(p2p(op_kind::send_grad, 0, 0, 8, 9));
  DISTTRAIN_CHECK_ERROR(disttrain::simulate_bound(bad, disttrain::table_durations{}),
                        errc::schedule_error, "bound_world");
}

TEST_CASE("a DP-1 TP-1 bound chain simulates as the schedule simulator's chain", "[sim][bound]") {
  // With no replicas the bound program is the chain with communication; both
  // engines must give the same iteration time (free transfers: the schedule
  // simulator's link channels then never contend).
  const auto c = bind_case(three(1, 1, 1, 2, 1, 1, 1), 8, 4);
  const auto bound = disttrain::simulate_bound(c.world, disttrain::table_durations{});
  const auto sched = disttrain::simulate(disttrain::add_communication(c.chain),
                                         disttrain::table_durations::uniform(1.0, 2.0));
  CHECK(bound.iteration_time == sched.iteration_time);
  // 1F1B over 4 chain stages and 4 microbatches: (4 + 4 - 1) * (1 + 2).
  CHECK(bound.iteration_time == 21.0);
  for (int r = 0; r < c.world.world_size(); ++r) {
    CHECK(bound.busy[static_cast<std::size_t>(r)] == 12.0);
    CHECK(bound.busy[static_cast<std::size_t>(r)] + bound.exposed(r) + bound.idle(r) ==
          Approx(bound.iteration_time));
  }
}

TEST_CASE("splitting microbatches over replicas and TP ranks keeps uniform times", "[sim][bound]") {
  // Every replica and TP rank of a chain stage runs every microbatch: with
  // durations independent of the share, the split world takes the chain's time.
  const auto c = bind_case(three(2, 2, 2, 2, 3, 1, 2), 24, 4);
  REQUIRE(c.world.world_size() == 4 + 12 + 2);
  const auto res = disttrain::simulate_bound(c.world, disttrain::table_durations{});
  CHECK(res.iteration_time == 21.0);
  // With bandwidth, the busiest pair's bytes set the delays: messages cost > 0.
  const auto slow =
      disttrain::simulate_bound(c.world, disttrain::table_durations{.bytes_per_s = 64.0});
  CHECK(slow.iteration_time > 21.0);
  double waited = 0.0;
  for (int r = 0; r < slow.world_size(); ++r)
    waited += slow.exposed_p2p[static_cast<std::size_t>(r)];
  CHECK(waited > 0.0);
  // Deterministic: the same world and durations give the same intervals.
  CHECK(disttrain::simulate_bound(c.world, disttrain::table_durations{.bytes_per_s = 64.0})
            .times.size() == slow.times.size());
  CHECK(disttrain::simulate_bound(c.world, disttrain::table_durations{.bytes_per_s = 64.0})
            .iteration_time == slow.iteration_time);
}

TEST_CASE("gradient-bucket reductions: the wait is exposed, the reduction shown on start",
          "[sim][bound]") {
  const auto c = bind_case(three(1, 1, 1, 1, 2, 1, 1), 6, 2);
  const auto res = disttrain::simulate_bound(c.world, disttrain::table_durations{.sync = 5.0});
  const auto base = disttrain::simulate_bound(c.world, disttrain::table_durations{});
  CHECK(res.iteration_time > base.iteration_time);
  bool seen = false;
  for (int r = 0; r < c.world.world_size(); ++r) {
    const auto& ops = c.world.programs[static_cast<std::size_t>(r)].ops;
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].op.kind == op_kind::grad_sync_start &&
          c.world.programs[static_cast<std::size_t>(r)].dp_group.size() == 2) {
        CHECK(res.interval(r, i).end - res.interval(r, i).start == 5.0);
        CHECK(res.exposed_sync[static_cast<std::size_t>(r)] > 0.0);
        seen = true;
      }
  }
  CHECK(seen);
}

TEST_CASE("bound worlds export a trace and an SVG, one track per global rank",
          "[sim][bound][export]") {
  const auto c = bind_case(three(2, 1, 1, 2, 2, 1, 1), 8, 2);
  const auto res = disttrain::simulate_bound(
      c.world, disttrain::table_durations{.bytes_per_s = 100.0, .sync = 0.5});
  const auto j = disttrain::to_trace_json(c.world, res, &c.topo);
  std::set<int> pids;
  std::size_t with_bytes = 0, sends = 0;
  bool named = false;
  for (const auto& e : j["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "process_name")
      named = named || e["args"]["name"].get<std::string>().find("llm stage 1 replica 1 tp 0") !=
                           std::string::npos;
    if (e["ph"] == "X" && e["cat"] == "comm") {
      ++sends;
      with_bytes += e["args"].contains("bytes") ? 1U : 0U;
    }
  }
  CHECK(pids.size() == static_cast<std::size_t>(c.world.world_size()));
  CHECK(named);
  CHECK(sends > 0);
  CHECK(with_bytes == sends);
  const std::string svg = disttrain::to_svg(c.world, res, &c.topo);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("% busy)") != std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  auto other = c.world;
  other.programs.pop_back();
  DISTTRAIN_CHECK_ERROR(disttrain::to_trace_json(other, res), errc::invalid_argument,
                        "trace.result");
  DISTTRAIN_CHECK_ERROR(disttrain::to_svg(other, res), errc::invalid_argument, "svg.result");
}

TEST_CASE("a schedule's trivial binding is a valid bound world that simulates alike",
          "[sim][bound]") {
  // One program IR: every generator's op lists, bound trivially (a schedule
  // rank is a global rank), pass validate_bound, and simulate_bound gives the
  // schedule simulator's intervals wherever their channels cannot differ
  // (free messages; buckets reduced in no time).
  std::vector<disttrain::pipeline_schedule> all = {
      disttrain::make_gpipe(3, 5), disttrain::make_1f1b(4, 6),
      disttrain::make_interleaved_1f1b(2, 4, 2), disttrain::make_interleaved_1f1b(3, 6, 3),
      disttrain::make_zb_h1(4, 8)};
  for (auto& s : all) {
    s = disttrain::add_grad_sync(disttrain::add_communication(s), 2);
    INFO(s.name);
    const bound_world w = disttrain::bind_schedule(s);
    REQUIRE(w.world_size() == static_cast<int>(s.ranks.size()));
    const auto rep = disttrain::validate_bound(w);
    CHECK(rep.ops == s.num_ops());
    const auto d = disttrain::table_durations::uniform(1.0, 2.0, s.split_backward ? 1.0 : 0.0);
    const auto sched = disttrain::simulate(s, d);
    const auto bound = disttrain::simulate_bound(w, d);
    CHECK(bound.iteration_time == sched.iteration_time);
    CHECK(bound.times.size() == sched.times.size());
    for (std::size_t i = 0; i < sched.times.size(); ++i) {
      CHECK(bound.times[i].start == sched.times[i].start);
      CHECK(bound.times[i].end == sched.times[i].end);
    }
    CHECK(bound.busy == sched.busy);
    CHECK(bound.exposed_p2p == sched.exposed_p2p);
    // Both results carry the critical path: it ends with the last op to finish.
    REQUIRE(!bound.critical_path.empty());
    const auto last = bound.critical_path.back();
    CHECK(bound.interval(last.rank, last.index).end == bound.iteration_time);
  }
}
