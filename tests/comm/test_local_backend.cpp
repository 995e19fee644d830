#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"
#include "disttrain_catch.hpp"
#include "local_harness.hpp"

using disttrain::errc;
using disttrain::local_backend;
using disttrain::local_world;
using namespace std::chrono_literals;

namespace {
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const disttrain::error& err) {
    return err.what();
  } catch (...) {
    return "non-disttrain exception";
  }
}
errc code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const disttrain::error& err) {
    return err.code();
  } catch (...) {
    return errc::internal;
  }
}
}  // namespace

TEST_CASE("deadline_after saturates instead of overflowing") {
  using std::chrono::steady_clock;
  CHECK(disttrain::detail::deadline_after(std::chrono::milliseconds::max()) ==
        steady_clock::time_point::max());
  const auto before = steady_clock::now();
  const auto d = disttrain::detail::deadline_after(std::chrono::hours(1));
  CHECK(d >= before + std::chrono::hours(1));
  CHECK(d < steady_clock::time_point::max());
  CHECK(disttrain::detail::remaining(d) <= std::chrono::hours(1));
}

TEST_CASE("local backend delivers bytes in FIFO order per (source, tag)") {
  local_world world(3, {2000ms});
  std::vector<std::vector<std::int32_t>> got(3);
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    if (b.rank() == 0) {
      // Three messages on tag 4 and one on tag 9, sent before the receives exist.
      std::vector<std::int32_t> a{1, 2}, c{3, 4, 5}, d{6}, e{42};
      auto r1 = b.isend(std::as_bytes(std::span(a)), 2, 4);
      auto r2 = b.isend(std::as_bytes(std::span(c)), 2, 4);
      auto r3 = b.isend(std::as_bytes(std::span(e)), 2, 9);
      auto r4 = b.isend(std::as_bytes(std::span(d)), 2, 4);
      b.wait(r1);
      b.wait(r2);
      b.wait(r3);
      b.wait(r4);
    } else if (b.rank() == 2) {
      std::vector<std::int32_t> x(1), y(2), z(3), w(1);
      auto q9 = b.irecv(std::as_writable_bytes(std::span(w)), 0, 9);  // tag 9 first: matched by tag
      auto q1 = b.irecv(std::as_writable_bytes(std::span(y)), 0, 4);
      auto q2 = b.irecv(std::as_writable_bytes(std::span(z)), 0, 4);
      auto q3 = b.irecv(std::as_writable_bytes(std::span(x)), 0, 4);
      b.wait(q9);
      b.wait(q1);
      b.wait(q2);
      b.wait(q3);
      got[2] = {w[0], y[0], y[1], z[0], z[1], z[2], x[0]};
    }
  });
  disttrain::test::rethrow_first(errors);
  CHECK(got[2] == std::vector<std::int32_t>{42, 1, 2, 3, 4, 5, 6});
}

TEST_CASE("local backend: zero-byte messages, test() polling, group nesting") {
  local_world world(2, {2000ms});
  std::atomic<bool> consumed_rejected{false};
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    std::span<std::byte> none;
    b.group_start();
    if (b.rank() == 0) {
      auto r = b.isend(none, 1, 0);
      b.group_end();
      b.wait(r);
    } else {
      auto r = b.irecv(none, 0, 0);
      b.group_end();
      while (!b.test(r)) std::this_thread::yield();
      try {
        (void)b.test(r);  // already consumed
      } catch (const disttrain::error& e) {
        consumed_rejected = e.code() == errc::invalid_argument;
      }
    }
  });
  disttrain::test::rethrow_first(errors);
  CHECK(consumed_rejected);
  auto b = world.endpoint(0);
  DISTTRAIN_CHECK_ERROR(b.group_end(), errc::invalid_argument, "rank 0");
}

TEST_CASE("local backend collectives: barrier, broadcast, allgather") {
  constexpr int n = 5;
  local_world world(n, {5000ms});
  std::vector<std::vector<std::int64_t>> gathered(n);
  std::vector<std::int64_t> bcast(n, 0);
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    b.barrier();
    std::int64_t v = b.rank() == 3 ? 777 : -1;
    b.broadcast(std::as_writable_bytes(std::span(&v, 1)), 3);
    bcast[static_cast<std::size_t>(b.rank())] = v;
    std::int64_t mine[2] = {b.rank() * 10, b.rank() * 10 + 1};
    std::vector<std::int64_t> all(2 * n, -5);
    b.allgather(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
    gathered[static_cast<std::size_t>(b.rank())] = all;
    b.barrier();
  });
  disttrain::test::rethrow_first(errors);
  std::vector<std::int64_t> expect;
  for (int r = 0; r < n; ++r) {
    expect.push_back(r * 10);
    expect.push_back(r * 10 + 1);
  }
  for (int r = 0; r < n; ++r) {
    CHECK(bcast[static_cast<std::size_t>(r)] == 777);
    CHECK(gathered[static_cast<std::size_t>(r)] == expect);
  }
  auto ep = world.endpoint(0);
  std::int64_t one = 0;
  std::vector<std::int64_t> small(3);
  DISTTRAIN_CHECK_ERROR(
      ep.allgather(std::as_bytes(std::span(&one, 1)), std::as_writable_bytes(std::span(small))),
      errc::invalid_argument, "allgather");
  DISTTRAIN_CHECK_ERROR(ep.broadcast(std::as_writable_bytes(std::span(&one, 1)), 7),
                        errc::invalid_argument, "broadcast.root");
}

TEST_CASE("a peer that never sends: timeout naming peer, tag and bytes") {
  local_world world(2, {50ms});
  auto b = world.endpoint(1);
  std::vector<std::byte> buf(4096);
  auto r = b.irecv(buf, 0, 12);
  try {
    b.wait(r);
    FAIL("no timeout");
  } catch (const disttrain::error& e) {
    CHECK(e.code() == errc::timeout);
    CHECK(e.where() == "rank 1 <- rank 0 tag 12");
    CHECK(e.message().find("receive of 4096 bytes") != std::string::npos);
    CHECK(e.message().find("50 ms") != std::string::npos);
  }
  // The timed-out receive was withdrawn: a later send from rank 0 does not
  // write into `buf`, it stays unmatched and times out itself.
  auto s0 = world.endpoint(0, {20ms});
  std::vector<std::byte> data(4096, std::byte{1});
  auto q = s0.isend(data, 1, 12);
  DISTTRAIN_CHECK_ERROR(s0.wait(q), errc::timeout, "rank 0 -> rank 1 tag 12");
  CHECK(buf[0] == std::byte{0});
  // Barrier with a missing rank times out too (never hangs).
  DISTTRAIN_CHECK_ERROR(b.barrier(), errc::timeout, "rank 1 -> rank 0 tag -1");
}

TEST_CASE("size mismatch fails both sides naming both sizes") {
  local_world world(2, {2000ms});
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    std::vector<std::byte> buf(b.rank() == 0 ? 100 : 64);
    auto r = b.rank() == 0 ? b.isend(buf, 1, 3) : b.irecv(buf, 0, 3);
    b.wait(r);
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(errors[static_cast<std::size_t>(r)]);
    CHECK(code_of(errors[static_cast<std::size_t>(r)]) == errc::comm_error);
    const std::string w = what_of(errors[static_cast<std::size_t>(r)]);
    CHECK(w.find("sends 100 bytes") != std::string::npos);
    CHECK(w.find("receive of 64 bytes") != std::string::npos);
  }
}

TEST_CASE("a dead peer fails pending and later transfers") {
  local_world world(3, {5000ms});
  auto b = world.endpoint(0);
  std::vector<std::byte> buf(8);
  auto pending = b.irecv(buf, 2, 0);
  world.mark_dead(2);
  CHECK(world.is_dead(2));
  DISTTRAIN_CHECK_ERROR(b.wait(pending), errc::comm_error, "rank 0 <- rank 2 tag 0");
  auto later = b.isend(buf, 2, 1);
  try {
    b.wait(later);
    FAIL("no error");
  } catch (const disttrain::error& e) {
    CHECK(e.code() == errc::comm_error);
    CHECK(e.message().find("rank 2 is dead") != std::string::npos);
  }
  DISTTRAIN_CHECK_ERROR(b.isend(buf, 3, 0), errc::invalid_argument, "rank 0 -> rank 3");
  DISTTRAIN_CHECK_ERROR(local_world(0), errc::invalid_argument, "local_world.size");
}

TEST_CASE("destroying an unmatched request cancels it") {
  local_world world(2, {30ms});
  std::vector<std::byte> buf(16, std::byte{0});
  {
    auto b1 = world.endpoint(1);
    auto r = b1.irecv(buf, 0, 0);
  }  // cancelled here
  auto b0 = world.endpoint(0);
  std::vector<std::byte> data(16, std::byte{7});
  auto s = b0.isend(data, 1, 0);
  DISTTRAIN_CHECK_ERROR(b0.wait(s), errc::timeout, "rank 0 -> rank 1 tag 0");
  CHECK(buf[0] == std::byte{0});
}

TEST_CASE("moving a request empties the source; assigning over an unmatched one cancels it") {
  local_world world(2, {30ms});
  auto b0 = world.endpoint(0);
  auto b1 = world.endpoint(1);
  std::vector<std::byte> old_buf(16, std::byte{0}), new_buf(16, std::byte{0});
  auto r = b1.irecv(old_buf, 0, 0);
  auto moved = std::move(r);
  CHECK_FALSE(r.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  REQUIRE(moved.valid());
  CHECK(moved.info().where() == "rank 1 <- rank 0 tag 0");
  moved = b1.irecv(new_buf, 0, 1);  // the receive on tag 0 is cancelled first
  std::vector<std::byte> data(16, std::byte{7});
  auto s0 = b0.isend(data, 1, 0);
  DISTTRAIN_CHECK_ERROR(b0.wait(s0), errc::timeout, "rank 0 -> rank 1 tag 0");
  CHECK(old_buf[0] == std::byte{0});
  auto s1 = b0.isend(data, 1, 1);
  b0.wait(s1);
  b1.wait(moved);
  CHECK_FALSE(moved.valid());
  CHECK(new_buf[0] == std::byte{7});
}

TEST_CASE("many distinct tags: queues are recycled and matching stays correct") {
  local_world world(2, {5000ms});
  constexpr int n_tags = 300;
  std::vector<std::int32_t> got(n_tags, -1);
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    for (int round = 0; round < 2; ++round) {
      std::vector<local_backend::request> reqs;
      std::vector<std::int32_t> vals(n_tags);
      for (int t = 0; t < n_tags; ++t) {
        vals[static_cast<std::size_t>(t)] = t * 3 + round;
        auto s = std::span(&vals[static_cast<std::size_t>(t)], 1);
        // Rank 0 sends tags ascending; rank 1 receives them descending.
        if (b.rank() == 0) reqs.push_back(b.isend(std::as_bytes(s), 1, t));
      }
      if (b.rank() == 1)
        for (int t = n_tags - 1; t >= 0; --t)
          reqs.push_back(b.irecv(
              std::as_writable_bytes(std::span(&got[static_cast<std::size_t>(t)], 1)), 0, t));
      for (auto& r : reqs) b.wait(r);
      b.barrier();
      if (b.rank() == 1)
        for (int t = 0; t < n_tags; ++t)
          if (got[static_cast<std::size_t>(t)] != t * 3 + round)
            throw std::runtime_error("wrong value");
      b.barrier();
    }
  });
  disttrain::test::rethrow_first(errors);
  for (int t = 0; t < n_tags; ++t) CHECK(got[static_cast<std::size_t>(t)] == t * 3 + 1);
}

TEST_CASE("a waiter that went to sleep is woken by a late match; huge timeouts do not overflow") {
  local_world world(2, {5000ms});
  std::vector<std::int64_t> got(512, -1);
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    std::vector<std::int64_t> data(512);
    std::iota(data.begin(), data.end(), 100);
    for (int round = 0; round < 3; ++round) {
      if (b.rank() == 0) {
        // Far longer than the waiter's polling phase: the receiver is asleep.
        std::this_thread::sleep_for(20ms);
        auto s = b.isend(std::as_bytes(std::span(data)), 1, round);
        b.wait(s, std::chrono::milliseconds::max());
      } else {
        auto r = b.irecv(std::as_writable_bytes(std::span(got)), 0, round);
        if (round == 1)
          b.wait(r, std::chrono::milliseconds::max());
        else
          b.wait(r);
      }
    }
  });
  disttrain::test::rethrow_first(errors);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == static_cast<std::int64_t>(100 + i));
}
