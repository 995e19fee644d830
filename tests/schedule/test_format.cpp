// Text views (host-only headers using fmt).
#include <string>

#include "disttrain/schedule.hpp"
#include "disttrain/schedule/format.hpp"
#include "disttrain/sim.hpp"
#include "disttrain/sim/format.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

TEST_CASE("schedule table shows each rank's order and forwards before the first backward") {
  const auto s = add_grad_sync(add_communication(make_1f1b(2, 2)));
  const std::string t = format_schedule(s, true);
  INFO(t);
  CHECK(
      t.find("   0  pipeline s0 r0        2  F0 sa0>1 F1 sa1>1 rg0<1 B0 rg1<1 B1 gs0 gf0 opt\n") !=
      std::string::npos);
  CHECK(
      t.find("   1  pipeline s1 r0        1  ra0<0 F0 B0 sg0>0 ra1<0 F1 B1 sg1>0 gs0 gf0 opt\n") !=
      std::string::npos);
  const std::string i = format_schedule(make_interleaved_1f1b(4, 8, 2), false, 4);
  INFO(i);
  CHECK(i.find("  11  F0 F1 F2 F3 ... (+28)") != std::string::npos);  // rank 0: 10 warm-up + 1
  CHECK(warmup_forwards(make_interleaved_1f1b(4, 8, 2), 3) == 5);
  CHECK(fmt::format("{} {}", op_kind::weight, schedule_op::forward(1, 0, 2)) ==
        "W F(stage 1, mb 2)");
}

TEST_CASE("simulation summary and ASCII timeline") {
  const auto s = add_communication(make_1f1b(2, 2));
  const auto res = simulate(s, table_durations::uniform(1, 2));
  const std::string sum = format_sim_summary(s, res);
  INFO(sum);
  CHECK(sum.find("iteration 9 s, mean bubble 33.3%") != std::string::npos);
  // 9 columns of 1 s. r1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]; r0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9].
  const std::string tl = format_timeline(s, res, 9);
  INFO(tl);
  CHECK(tl == "rank   0 |FF..BB.BB|\nrank   1 |.FBBFBB..|\n");
}
