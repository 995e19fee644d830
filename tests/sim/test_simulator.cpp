// Simulator: closed forms with uniform costs and hand-computed timelines.
#include <cmath>
#include <numeric>
#include <vector>

#include "disttrain/schedule.hpp"
#include "disttrain/sim.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
constexpr double eps = 1e-12;
sim_result run(const pipeline_schedule& s, const table_durations& d, bool overlap = true) {
  sim_options o;
  o.overlap_comm = overlap;
  return simulate(s, d, o);
}
}  // namespace

TEST_CASE("1F1B and GPipe bubble = (p-1)/(m+p-1) on every rank") {
  for (int p : {1, 2, 3, 5, 8}) {
    for (int m : {1, 3, 8, 13}) {
      const double cf = static_cast<double>(p - 1) / (m + p - 1);
      const auto r1 = run(add_communication(make_1f1b(p, m)), table_durations::uniform(1.0, 2.0));
      const auto rg = run(add_communication(make_gpipe(p, m)), table_durations::uniform(1.0, 2.0));
      CHECK(r1.iteration_time == Approx((m + p - 1) * 3.0).epsilon(eps));
      for (int r = 0; r < p; ++r) {
        CHECK(r1.bubble_fraction[static_cast<std::size_t>(r)] == Approx(cf).margin(eps));
        CHECK(rg.bubble_fraction[static_cast<std::size_t>(r)] == Approx(cf).margin(eps));
        CHECK(r1.busy_fraction(r) == Approx(1.0 - cf).margin(eps));
      }
    }
  }
}

TEST_CASE("interleaved bubble = (p-1)/(v*m+p-1)") {
  for (int p : {2, 4}) {
    for (int v : {2, 3, 4}) {
      for (int m : {p, 2 * p, 4 * p}) {
        const auto res = run(add_communication(make_interleaved_1f1b(p, m, v)),
                             table_durations::uniform(1.0 / v, 2.0 / v));
        const double cf = static_cast<double>(p - 1) / (v * m + p - 1);
        INFO("p " << p << " v " << v << " m " << m);
        CHECK(res.mean_bubble_fraction() == Approx(cf).margin(1e-9));
        CHECK(res.bubble_fraction.front() == Approx(cf).margin(1e-9));
      }
    }
  }
}

TEST_CASE("ZB-H1 bubble = (p-1)/(3m+p-1) < 1F1B's at 1F1B's peak memory") {
  for (int p : {2, 4, 6}) {
    for (int m : {p, 2 * p, 5 * p}) {
      const auto z = add_communication(make_zb_h1(p, m));
      const auto f = add_communication(make_1f1b(p, m));
      const auto rz = run(z, table_durations::uniform(1, 1, 1));
      const auto rf = run(f, table_durations::uniform(1, 2));
      CHECK(rz.bubble_fraction.front() ==
            Approx(static_cast<double>(p - 1) / (3 * m + p - 1)).margin(1e-12));
      CHECK(rz.mean_bubble_fraction() < rf.mean_bubble_fraction());
      const auto bz = rz.peak_activation_bytes;
      const auto bf = rf.peak_activation_bytes;
      CHECK(*std::max_element(bz.begin(), bz.end()) == *std::max_element(bf.begin(), bf.end()));
    }
  }
}

TEST_CASE("unequal microbatches are simulated as they are") {
  // p = 2, m = 2, F = 1, B = 2, microbatch 0 three times larger. By hand:
  // r0: F0 [0,3] F1 [3,4]; r1: F0 [3,6] B0 [6,12] F1 [12,13] B1 [13,15]; r0: B0 [12,18] B1 [18,20].
  auto d = table_durations::uniform(1, 2);
  d.microbatch_scale = {3.0, 1.0};
  const auto s = add_communication(make_1f1b(2, 2));
  const auto res = run(s, d);
  CHECK(res.iteration_time == Approx(20.0));
  // r0's ops: F0 send F1 send recv_grad B0 recv_grad B1
  CHECK(res.interval(0, 5).start == Approx(12.0));
  CHECK(res.interval(0, 7).end == Approx(20.0));
  CHECK(res.busy[0] == Approx(12.0));
  CHECK(res.bubble_fraction[0] == Approx(0.4));
}

TEST_CASE("communication overlaps compute unless blocking") {
  // p = 2, m = 2, F = 1, B = 2, every message 1 s (hand-computed: 11 s overlapped, 12 s blocking).
  auto d = table_durations::uniform(1, 2);
  d.transfer_s = 1.0;
  const auto s = add_communication(make_1f1b(2, 2));
  CHECK(run(s, d, true).iteration_time == Approx(11.0));
  CHECK(run(s, d, false).iteration_time == Approx(12.0));
}

TEST_CASE("critical path runs through the messages that set the time") {
  // p = 2, m = 1, transfer 0.5: F0 [0,1] -> [1,1.5] -> F0 [1.5,2.5] B0 [2.5,4.5] -> [4.5,5] -> B0 [5,7].
  auto d = table_durations::uniform(1, 2);
  d.transfer_s = 0.5;
  const auto s = add_communication(make_1f1b(2, 1));
  const auto res = run(s, d);
  CHECK(res.iteration_time == Approx(7.0));
  REQUIRE(!res.critical_path.empty());
  std::vector<op_kind> kinds;
  for (const auto& ref : res.critical_path)
    kinds.push_back(s.ops[static_cast<std::size_t>(ref.rank)][ref.index].kind);
  const std::vector<op_kind> expect{op_kind::forward,   op_kind::send_act, op_kind::recv_act,
                                    op_kind::forward,   op_kind::backward, op_kind::send_grad,
                                    op_kind::recv_grad, op_kind::backward};
  CHECK(kinds == expect);
  CHECK(res.critical_path.front().rank == 0);
  CHECK(res.critical_path.back().rank == 0);
  // Every op on the path starts when its predecessor ends.
  for (std::size_t k = 1; k < res.critical_path.size(); ++k) {
    const auto& a = res.interval(res.critical_path[k - 1].rank, res.critical_path[k - 1].index);
    const auto& b = res.interval(res.critical_path[k].rank, res.critical_path[k].index);
    CHECK(b.end >= a.end);
  }
}

TEST_CASE("gradient buckets reduce after the last backward, one at a time per DP group") {
  // p = 2, m = 1, F = 1, B = 2, reduction 3 s, optimizer 1 s. r1: B0 ends 4 -> reduce [4,7] -> step [7,8];
  // r0: B0 [4,6] -> bucket 0 [6,9], bucket 1 [9,12] (same group channel) -> step [12,13].
  auto d = table_durations::uniform(1, 2);
  d.sync = 3.0;
  d.optimizer = 1.0;
  const auto res = run(add_grad_sync(add_communication(make_1f1b(2, 1)), 2), d);
  CHECK(res.iteration_time == Approx(13.0));
  const auto res1 = run(add_grad_sync(add_communication(make_1f1b(2, 1)), 1), d);
  CHECK(res1.iteration_time == Approx(10.0));
}

TEST_CASE("activation memory follows the program order and microbatch sizes") {
  auto d = table_durations::uniform(1, 2);
  d.activation = {10.0};
  d.microbatch_scale = {1.0, 2.0, 4.0};
  const auto res = run(add_communication(make_1f1b(2, 3)), d);
  // r0: F0 (+10) F1 (+20) B0 (-10) F2 (+40) -> peak 60; r1 holds one at a time -> 40.
  CHECK(res.peak_activation_bytes[0] == Approx(60.0));
  CHECK(res.peak_activation_bytes[1] == Approx(40.0));
  const auto g = run(add_communication(make_gpipe(2, 3)), d);
  CHECK(g.peak_activation_bytes[0] == Approx(70.0));
  const auto per_stage = g.peak_activation_bytes_per_stage(make_gpipe(2, 3));
  CHECK(per_stage == std::vector<double>{70.0, 70.0});
}

TEST_CASE("MFU, reuse and bad durations") {
  const auto s = add_communication(make_1f1b(4, 8));
  simulator sim(s);
  const auto a = sim.run(table_durations::uniform(1, 2));
  const auto b = sim.run(table_durations::uniform(1, 2));
  CHECK(a.iteration_time == b.iteration_time);
  CHECK(a.mfu(33.0 * 100.0, 200.0) == Approx(0.5));
  DISTTRAIN_CHECK_ERROR(a.mfu(1.0, 0.0), errc::invalid_argument, "mfu.peak_flops_per_s");
  DISTTRAIN_CHECK_ERROR(sim.run(table_durations::uniform(1, -2)), errc::invalid_argument, "rank 0");
  auto d = table_durations::uniform(1, 2);
  d.forward = {1.0, 2.0};  // 2 entries for 4 stages
  DISTTRAIN_CHECK_ERROR(sim.run(d), errc::invalid_argument, "table_durations.forward");
  auto broken = s;
  broken.ops[1].erase(broken.ops[1].begin());
  DISTTRAIN_CHECK_ERROR(simulator{broken}, errc::schedule_error, "rank 1");
  // A deadlock passes the static checks and is reported by the first run, naming the blocked ops.
  auto dead = add_communication(make_1f1b(2, 1));  // r0: F0 send_act recv_grad B0
  std::swap(dead.ops[0][1], dead.ops[0][2]);       // r0 waits for the gradient before sending
  simulator dsim(dead);
  try {
    (void)dsim.run(table_durations::uniform(1, 2));
    FAIL("deadlock not detected");
  } catch (const error& e) {
    CHECK(e.code() == errc::schedule_error);
    CHECK(std::string(e.message()).find("deadlock") != std::string::npos);
    CHECK(std::string(e.message()).find("recv_act(stage 0, mb 0 <- rank 0)") != std::string::npos);
  }
}

TEST_CASE("reset validates another schedule into the same simulator, with fresh results") {
  // Alternate shapes (more, then fewer ranks, links, buckets) so stale state would show.
  const auto same = [](const sim_result& x, const sim_result& y) {
    CHECK(x.iteration_time == y.iteration_time);
    CHECK(x.busy == y.busy);
    CHECK(x.bubble_fraction == y.bubble_fraction);
    CHECK(x.peak_activation_bytes == y.peak_activation_bytes);
    CHECK(x.critical_path == y.critical_path);
    CHECK(x.rank_begin == y.rank_begin);
    REQUIRE(x.times.size() == y.times.size());
    for (std::size_t i = 0; i < x.times.size(); ++i) {
      CHECK(x.times[i].start == y.times[i].start);
      CHECK(x.times[i].end == y.times[i].end);
    }
  };
  table_durations d = table_durations::uniform(1.0, 2.0, 0.5);
  d.transfer_s = 0.25;
  d.sync = 1.5;
  d.microbatch_scale = {1.0, 0.5, 2.0, 1.0, 0.75, 1.25, 1.0, 3.0};
  const std::vector<pipeline_schedule> schedules = {
      add_grad_sync(add_communication(make_interleaved_1f1b(4, 8, 2)), 2),
      add_communication(make_1f1b(2, 3)), add_grad_sync(add_communication(make_zb_h1(3, 8))),
      add_communication(make_gpipe(1, 2))};
  simulator sim(schedules.back());
  sim_result res;
  for (const auto& s : schedules) {
    sim.reset(s);
    CHECK(sim.num_ops() == s.num_ops());
    sim.run(d, res);
    same(res, simulate(s, d));
    // 1F1B(2, 3) by hand: F=s, B=2s, transfer s/4 for scales s = 1, 0.5, 2: rank 1 runs F2 at
    // 9 (rank 0: F0, F1, B0 at 4.5, F2 at 6.5, sent at 9), B2 to 15, rank 0 B2 from 15.5.
    if (s.ranks.size() == 2 && s.num_microbatches == 3) CHECK(res.iteration_time == Approx(19.5));
  }
  auto broken = schedules.front();
  broken.ops[2].erase(broken.ops[2].begin());
  DISTTRAIN_CHECK_ERROR(sim.reset(broken), errc::schedule_error, "rank 2");
  CHECK(sim.num_ops() == 0);  // left empty, still usable
  CHECK(sim.run(d).times.empty());
  sim.reset(schedules.front());
  same(sim.run(d), simulate(schedules.front(), d));
}

TEST_CASE("crossed messages on both links name the first crossed receive in program order") {
  // Rank 1 of 1F1B(2, 4) runs microbatch 2 before microbatch 1 (each block:
  // recv_act, F, B, send_grad). Link 0->1 then delivers 1 before 2 and link
  // 1->0 sends 2 before 1; rank 0 comes first, and its receive of gradient 1
  // is receive #1 on link 1->0 while rank 1 sends that gradient as send #2.
  auto s = add_communication(make_1f1b(2, 4));
  auto& ops = s.ops[1];
  std::swap_ranges(ops.begin() + 4, ops.begin() + 8, ops.begin() + 8);
  try {
    simulator sim(s);
    FAIL("crossed order not detected");
  } catch (const error& e) {
    CHECK(e.code() == errc::schedule_error);
    CHECK(std::string(e.where()).find("rank 0") == 0);
    CHECK(std::string(e.where()).find("recv_grad(stage 1, mb 1 <- rank 1)") != std::string::npos);
    CHECK(std::string(e.message()).find("is receive #1 from rank 1") != std::string::npos);
    CHECK(std::string(e.message()).find("send #2 on this link") != std::string::npos);
  }
}

TEST_CASE("table_durations takes designated initializers that name only some fields") {
  // Compiled with -Wextra -Werror (missing-field-initializers).
  const disttrain::table_durations d{.forward = {1.0}, .backward = {2.0}};
  CHECK(d.microbatch_scale.empty());
  CHECK(d.weight == std::vector<double>{0.0});
}
