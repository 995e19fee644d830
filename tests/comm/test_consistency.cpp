// Issue 13 item 8: the small inconsistencies found by an outside user, one
// test each: negative tags, backward routes and differing placements on
// consecutive stages, both sizes in a size mismatch, and timeout messages
// that quote the configured timeout instead of the time left.
#include <chrono>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "disttrain/exec/bucket_allreduce.hpp"
#include "disttrain_catch.hpp"
#include "local_harness.hpp"
#include "route_cases.hpp"

using disttrain::errc;
using disttrain::local_backend;
using disttrain::local_world;
using disttrain::sample_placement;
using disttrain::test::at;
using namespace std::chrono_literals;

namespace {
// The error `fn` throws (errc::internal with an empty where if none).
template <class F>
disttrain::error error_of(F&& fn) {
  try {
    fn();
  } catch (const disttrain::error& e) {
    return e;
  }
  return disttrain::error(errc::internal, "", "no exception");
}
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("local backend rejects negative tags like MPI; its collectives still work") {
  local_world world(2, {1000ms});
  auto b = world.endpoint(0);
  std::vector<std::byte> buf(8);
  const auto es = error_of([&] { (void)b.isend(buf, 1, -1); });
  CHECK(es.code() == errc::invalid_argument);
  CHECK(es.where() == "rank 0 -> rank 1 tag -1");
  CHECK(contains(es.message(), "tag -1 out of [0, "));
  const auto er = error_of([&] { (void)b.irecv(buf, 1, -7); });
  CHECK(er.code() == errc::invalid_argument);
  CHECK(er.where() == "rank 0 <- rank 1 tag -7");
  // The collectives use the reserved negative tags internally.
  auto errors = disttrain::test::run_ranks(world, [](local_backend& ep) {
    ep.barrier();
    int v = ep.rank() == 1 ? 42 : 0;
    ep.broadcast(std::as_writable_bytes(std::span(&v, 1)), 1);
    if (v != 42) throw disttrain::error(errc::internal, "broadcast", "wrong value");
  });
  disttrain::test::rethrow_first(errors);
}

TEST_CASE("route planning rejects backward routes and skipped modules, naming the field") {
  using enum disttrain::module_role;
  const disttrain::topology L(
      {{"enc", encoder, 1, 1, 2}, {"llm", backbone, 1, 2, 2}, {"gen", generator, 1, 1, 2}});
  const auto p = sample_placement::round_robin(4, 2);
  const disttrain::activation_shape shape{{1, 2, 3, 4}, 8, 4};
  const auto back =
      error_of([&] { (void)disttrain::plan_route(L, at(1, 1), p, at(0, 0), p, shape); });
  CHECK(back.code() == errc::invalid_argument);
  CHECK(back.where() == "route.to.module");
  CHECK(contains(back.message(), "backward"));
  CHECK(contains(back.message(), "from 'llm' to 'gen'"));
  const auto back2 =
      error_of([&] { (void)disttrain::plan_route(L, at(2, 0), p, at(1, 0), p, shape); });
  CHECK(back2.where() == "route.to.module");
  const auto skip =
      error_of([&] { (void)disttrain::plan_route(L, at(0, 0), p, at(2, 0), p, shape); });
  CHECK(skip.code() == errc::invalid_argument);
  CHECK(skip.where() == "route.to.module");
  CHECK(!contains(skip.message(), "backward"));
  CHECK_NOTHROW(disttrain::plan_route(L, at(0, 0), p, at(1, 0), p, shape));
}

TEST_CASE("consecutive stages of one module must share the placement") {
  using enum disttrain::module_role;
  const disttrain::topology L({{"enc", encoder, 1, 1, 1}, {"llm", backbone, 2, 3, 2}});
  const disttrain::activation_shape shape{{1, 2, 3, 4}, 8, 4};
  const sample_placement a({{0, 2}, {1, 3}});
  const sample_placement b({{2, 0}, {1, 3}});  // same replicas, other order
  const sample_placement c({{0, 1}, {2, 3}});  // other replicas
  for (const auto* other : {&b, &c}) {
    const auto e =
        error_of([&] { (void)disttrain::plan_route(L, at(1, 0), a, at(1, 1), *other, shape); });
    CHECK(e.code() == errc::invalid_argument);
    CHECK(e.where() == "route.placement_b");
    CHECK(contains(e.message(), "stage 0 and stage 1 of 'llm'"));
  }
  CHECK(contains(
      error_of([&] { (void)disttrain::plan_route(L, at(1, 0), a, at(1, 1), b, shape); }).message(),
      "replica 0 position 0: sample 0 vs 2"));
  CHECK_NOTHROW(disttrain::plan_route(L, at(1, 1), a, at(1, 2), a, shape));
}

TEST_CASE("a size mismatch names both sizes, the same text on both sides, either direction") {
  for (const auto& sizes : {std::pair{64, 100}, std::pair{100, 64}}) {
    const int sent = sizes.first, posted = sizes.second;  // (clang 14 cannot capture bindings)
    local_world world(2, {2000ms});
    auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
      std::vector<std::byte> buf(static_cast<std::size_t>(b.rank() == 0 ? sent : posted));
      auto r = b.rank() == 0 ? b.isend(buf, 1, 3) : b.irecv(buf, 0, 3);
      b.wait(r);
    });
    const std::string want = "size mismatch: rank 0 sends " + std::to_string(sent) +
                             " bytes but rank 1 posted a receive of " + std::to_string(posted) +
                             " bytes (tag 3)";
    for (const auto& e : errors) {
      REQUIRE(e);
      const auto err = error_of([&] { std::rethrow_exception(e); });
      CHECK(err.code() == errc::comm_error);
      CHECK(err.message() == want);
    }
  }
}

TEST_CASE("timeouts quote the configured timeout, not the time left for the last wait") {
  // Rank 2 receives from ranks 0 and 1 under one deadline of 400 ms; rank 0
  // answers after ~150 ms, rank 1 never: the error on rank 1's message must
  // say 400 ms (the time left when that wait began was ~250 ms).
  const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 2},
                               {"b", disttrain::module_role::backbone, 1, 1, 1}});
  const auto pa = sample_placement::round_robin(2, 2);
  const auto pb = sample_placement::round_robin(2, 1);
  const disttrain::activation_shape shape{{2, 2}, 4, 4};
  const auto plan = disttrain::plan_boundary_route(L, 0, pa, pb, shape);
  for (const bool verify : {false, true}) {
    local_world world(3, {5000ms});
    auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
      if (b.rank() == 1) return;  // silent
      std::vector<std::byte> src(static_cast<std::size_t>(plan.source_elements(b.rank())) * 4);
      std::vector<std::byte> dst(static_cast<std::size_t>(plan.destination_elements(b.rank())) * 4);
      if (b.rank() == 0) std::this_thread::sleep_for(150ms);
      disttrain::buffer_pool pool;
      disttrain::run_route(b, plan, src, dst, pool, {.tag = 6, .verify = verify, .timeout = 400ms});
    });
    CHECK(!errors[0]);
    REQUIRE(errors[2]);
    const auto e = error_of([&] { std::rethrow_exception(errors[2]); });
    CHECK(e.code() == errc::timeout);
    CHECK(e.where() == "rank 2 <- rank 1 tag 6");
    CHECK(contains(e.message(), "within 400 ms"));
  }
  // wait_all and the collectives the same way.
  local_world world(3, {5000ms});
  std::vector<std::byte> a(4), c(4);
  std::thread late([&] {
    auto b0 = world.endpoint(0);
    std::this_thread::sleep_for(150ms);
    auto s = b0.isend(a, 2, 1);
    b0.wait(s);
  });
  auto b2 = world.endpoint(2);
  std::vector<local_backend::request> reqs;
  reqs.push_back(b2.irecv(a, 0, 1));
  reqs.push_back(b2.irecv(c, 1, 1));
  const auto e = error_of([&] { disttrain::wait_all(b2, std::span(reqs), 400ms); });
  late.join();
  CHECK(e.code() == errc::timeout);
  CHECK(e.where() == "rank 2 <- rank 1 tag 1");
  CHECK(contains(e.message(), "within 400 ms"));
}

TEST_CASE("a bucket reduction's timeout quotes the configured timeout") {
  // Rank 2 reduces over {0, 1, 2} with a 400 ms timeout: rank 0 takes part
  // after ~150 ms, rank 1 never. The wait on rank 1 begins with ~250 ms left;
  // the error must still say 400 ms.
  local_world world(3, {5000ms});
  std::vector<double> theirs(4, 1.0), mine(4, 2.0), got(4);
  std::thread late([&] {
    auto b0 = world.endpoint(0);
    std::this_thread::sleep_for(150ms);
    auto r = b0.irecv(std::as_writable_bytes(std::span(got)), 2, 7);
    auto s = b0.isend(std::as_bytes(std::span(theirs)), 2, 7);
    b0.wait(r);
    b0.wait(s);
  });
  auto b2 = world.endpoint(2);
  const std::vector<int> group{0, 1, 2};
  disttrain::bucket_allreduce<local_backend, double> ar;
  ar.start(b2, std::span(mine), group, 7);
  const auto e = error_of([&] { ar.finish(b2, 400ms); });
  late.join();
  CHECK(e.code() == errc::timeout);
  CHECK(contains(e.message(), "within 400 ms"));
}
