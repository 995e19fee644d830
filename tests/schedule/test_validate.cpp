// Validation: broken schedules are rejected with the offending ops named.
#include <algorithm>
#include <string>

#include "disttrain/schedule.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
std::string message_of(const pipeline_schedule& s) {
  try {
    (void)validate_schedule(s);
  } catch (const error& e) {
    CHECK(e.code() == errc::schedule_error);
    return std::string(e.where()) + " | " + e.message();
  }
  FAIL("schedule was accepted");
  return {};
}
std::size_t find_op(const std::vector<schedule_op>& ops, const schedule_op& o) {
  const auto it = std::find(ops.begin(), ops.end(), o);
  REQUIRE(it != ops.end());
  return static_cast<std::size_t>(it - ops.begin());
}
}  // namespace

TEST_CASE("generated schedules validate") {
  CHECK_NOTHROW(validate_schedule(add_grad_sync(add_communication(make_gpipe(3, 5)))));
  CHECK_NOTHROW(validate_schedule(add_grad_sync(add_communication(make_1f1b(5, 3)))));
  CHECK_NOTHROW(
      validate_schedule(add_grad_sync(add_communication(make_interleaved_1f1b(3, 6, 3)))));
  CHECK_NOTHROW(validate_schedule(add_grad_sync(add_communication(make_zb_h1(4, 9)))));
  CHECK_NOTHROW(validate_schedule(add_communication(make_1f1b(1, 4))));  // one stage: no messages
}

TEST_CASE("a missing receive is named") {
  auto s = add_communication(make_1f1b(2, 3));
  auto& ops = s.ops[1];
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(
                              find_op(ops, schedule_op::send(op_kind::recv_act, 0, 0, 1, 0))));
  const auto msg = message_of(s);
  INFO(msg);
  CHECK(msg.find("F(stage 1, mb 1)") != std::string::npos);
  CHECK(msg.find("missing receive") != std::string::npos);
  CHECK(msg.find("rank 1") != std::string::npos);
}

TEST_CASE("a missing send is named") {
  auto s = add_communication(make_1f1b(2, 3));
  auto& ops = s.ops[1];
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(
                              find_op(ops, schedule_op::send(op_kind::send_grad, 1, 0, 2, 0))));
  const auto msg = message_of(s);
  INFO(msg);
  CHECK(msg.find("recv_grad(stage 1, mb 2 <- rank 1)") != std::string::npos);
  CHECK(msg.find("missing send") != std::string::npos);
}

TEST_CASE("crossed message order on a link is rejected") {
  auto s = add_communication(make_1f1b(2, 4));
  auto& ops = s.ops[1];
  const auto a = find_op(ops, schedule_op::send(op_kind::recv_act, 0, 0, 1, 0));
  const auto b = find_op(ops, schedule_op::send(op_kind::recv_act, 0, 0, 2, 0));
  std::swap(ops[a], ops[b]);  // receives mb 2 before mb 1 (and feeds F1 with it)
  const auto msg = message_of(s);
  INFO(msg);
  CHECK(msg.find("rank 1") != std::string::npos);
  CHECK(msg.find("recv_act") != std::string::npos);
}

TEST_CASE("a deadlock reports the first blocked op of each rank") {
  // Rank 0 waits for the gradient of mb 0 before sending mb 0's activation.
  auto s = add_communication(make_1f1b(2, 2));
  auto& ops = s.ops[0];
  const auto snd = find_op(ops, schedule_op::send(op_kind::send_act, 0, 0, 0, 1));
  const auto rcv = find_op(ops, schedule_op::send(op_kind::recv_grad, 1, 0, 0, 1));
  const auto moved = ops[rcv];
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(rcv));
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(snd), moved);
  const auto msg = message_of(s);
  INFO(msg);
  CHECK(msg.find("deadlock") != std::string::npos);
  CHECK(msg.find("rank 0 (pipeline stage 0 replica 0) op #1 recv_grad(stage 1, mb 0 <- rank 1)") !=
        std::string::npos);
  CHECK(msg.find("rank 1 (pipeline stage 1 replica 0) op #0 recv_act(stage 0, mb 0 <- rank 0)") !=
        std::string::npos);
}

TEST_CASE("missing, duplicated and misordered compute ops are rejected") {
  {
    auto s = make_1f1b(2, 2);
    s.ops[1].erase(s.ops[1].begin());  // F0 of stage 1
    const auto msg = message_of(s);
    CHECK(msg.find("pipeline/stage 1 mb 0") != std::string::npos);
    CHECK(msg.find("F is missing") != std::string::npos);
  }
  {
    auto s = make_1f1b(1, 2);
    s.ops[0].push_back(schedule_op::backward(0, 0, 1));
    CHECK(message_of(s).find("duplicates") != std::string::npos);
  }
  {
    auto s = make_1f1b(1, 2);  // F0 F1? no: p = 1 -> F0 B0 F1 B1
    std::swap(s.ops[0][0], s.ops[0][1]);
    CHECK(message_of(s).find("must follow") != std::string::npos);
  }
  {
    auto s = make_1f1b(1, 1);
    s.ops[0].push_back(schedule_op::weight(0, 0, 0));
    CHECK(message_of(s).find("does not split") != std::string::npos);
  }
  {
    auto s = make_1f1b(2, 1);
    s.ops[0][0].stage = 1;  // an F of stage 1 on the rank of stage 0
    CHECK(message_of(s).find("on a rank holding stage 0") != std::string::npos);
  }
}

TEST_CASE("gradient sync must be started by every replica and finished after starting") {
  auto s = add_grad_sync(add_communication(make_1f1b(2, 2)));
  auto bad = s;
  auto& ops = bad.ops[0];
  const auto fin = find_op(ops, schedule_op::sync(op_kind::grad_sync_finish, 0, 0, 0));
  const auto st = find_op(ops, schedule_op::sync(op_kind::grad_sync_start, 0, 0, 0));
  std::swap(ops[fin], ops[st]);
  CHECK(message_of(bad).find("not started") != std::string::npos);
}
