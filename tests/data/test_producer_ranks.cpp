// Producer ranks over the local backend (ranks are threads): delivery in the
// map's order at two layouts, identical maps on every trainer, backpressure,
// a killed producer, a stalled producer, bad samples (fail and skip).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "../comm/local_harness.hpp"
#include "disttrain_catch.hpp"
#include "feed_cases.hpp"

using namespace std::chrono_literals;
using disttrain::errc;
using disttrain::local_backend;
using disttrain::local_world;
using disttrain::producer_ranks_config;
using disttrain::test::feed_layout;
using disttrain::test::synthetic_parts_source;
using feed = disttrain::sample_feed<local_backend, synthetic_parts_source>;
using producer = disttrain::sample_producer<local_backend, synthetic_parts_source>;

namespace {

// Consumers are ranks 0..C-1, producers C..C+P-1.
producer_ranks_config config_for(std::size_t consumers, std::size_t producers) {
  producer_ranks_config cfg;
  for (std::size_t c = 0; c < consumers; ++c) cfg.consumers.push_back(static_cast<int>(c));
  for (std::size_t p = 0; p < producers; ++p)
    cfg.producers.push_back(static_cast<int>(consumers + p));
  cfg.timeout = 5000ms;
  return cfg;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The code of a rank's disttrain::error (errc::internal if none or another type).
errc code_of(const std::exception_ptr& e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const disttrain::error& x) {
    return x.code();
  } catch (...) {}
  return errc::internal;
}

std::string held_ids(const producer_ranks_config& cfg, std::size_t p, std::uint64_t k) {
  const auto ids = disttrain::test::synthetic_batch(k);
  std::string s = "[";
  bool first = true;
  for (std::size_t i :
       disttrain::producer_share(ids, k, {.index = p, .count = cfg.producers.size()})) {
    s += (first ? "" : ", ") + std::to_string(ids[i]);
    first = false;
  }
  return s + "]";
}

void run_layout(const feed_layout& layout, std::size_t producers, std::uint64_t batches) {
  const std::size_t nc = layout.roles().size();
  auto cfg = config_for(nc, producers);
  synthetic_parts_source src;
  local_world world(static_cast<int>(nc + producers));
  std::vector<std::vector<disttrain::reorder_result>> maps(nc);
  std::vector<std::string> problems(nc);
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    const auto me = static_cast<std::size_t>(b.rank());
    if (me >= nc) {
      producer prod(b, src, cfg, disttrain::test::synthetic_batch);
      prod.run(0, batches);
      return;
    }
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    for (std::uint64_t k = 0; k < batches; ++k) {
      disttrain::reorder_result map;
      auto p = disttrain::test::consume_batch(f, layout, me, k, &map);
      if (!p.empty() && problems[me].empty()) problems[me] = p;
      maps[me].push_back(std::move(map));
    }
  });
  disttrain::test::rethrow_first(errors);
  for (const auto& p : problems) CHECK(p.empty());
  for (std::size_t c = 1; c < nc; ++c) CHECK(maps[c] == maps[0]);  // one map on every trainer
  CHECK(src.loads.load() == static_cast<int>(12 * batches));       // each sample prepared once
}

}  // namespace

TEST_CASE("producer ranks deliver each trainer its module's part in the map's order") {
  SECTION("encoder dp 2, backbone dp 1, generator dp 1; 2 producers") {
    run_layout({{2, 1, 1}}, 2, 4);
  }
  SECTION("encoder dp 1, backbone dp 2, generator dp 2; 3 producers") {
    run_layout({{1, 2, 2}}, 3, 3);
  }
}

TEST_CASE("a wrong delivery is detected") {
  // The check itself can fail: a consumer that asks for a different order
  // than the map gets what it asked for, which the check rejects.
  feed_layout layout{{1}};
  auto cfg = config_for(1, 1);
  synthetic_parts_source src;
  local_world world(2);
  std::string problem;
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    if (b.rank() == 1) {
      producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 1);
      return;
    }
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    const auto& md = f.metadata(0);
    const auto map = disttrain::test::sample_map(layout, md);
    const std::uint32_t part = 0;
    auto want = disttrain::requests_for(map, 0, 0, std::span(&part, 1));
    std::swap(want.front(), want.back());
    const auto got = f.fetch(0, want);
    auto expected = disttrain::requests_for(map, 0, 0, std::span(&part, 1));
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i].id != expected[i].id) problem += " " + std::to_string(i);
  });
  disttrain::test::rethrow_first(errors);
  CHECK(problem == " 0 11");  // the two swapped positions, and only them
}

TEST_CASE("producers prepare at most `prefetch` batches ahead (backpressure)") {
  auto cfg = config_for(1, 1);
  cfg.prefetch = 2;
  synthetic_parts_source src;
  local_world world(2);
  int loads_before_first_request = -1;
  std::size_t max_staged = 0;
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    if (b.rank() == 1) {
      producer prod(b, src, cfg, disttrain::test::synthetic_batch);
      prod.run(0, 6);
      max_staged = prod.max_staged();
      return;
    }
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    (void)f.metadata(0);
    std::this_thread::sleep_for(200ms);  // a slow trainer: the producer must stop at 2 batches
    loads_before_first_request = src.loads.load();
    for (std::uint64_t k = 0; k < 6; ++k) {
      if (k > 0) (void)f.metadata(k);
      (void)f.fetch(k, {});
    }
  });
  disttrain::test::rethrow_first(errors);
  CHECK(loads_before_first_request == 24);  // batches 0 and 1, 12 samples each
  CHECK(max_staged == 2);
}

TEST_CASE("a killed producer gives every trainer an error naming it and its samples") {
  feed_layout layout{{2}};
  auto cfg = config_for(2, 2);
  cfg.prefetch = 1;
  cfg.timeout = 3000ms;
  synthetic_parts_source src;
  local_world world(4);
  std::vector<disttrain::error> seen(2, disttrain::error(errc::internal, "", "no error"));
  std::vector<double> seconds(2, 0.0);
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    if (b.rank() == 3) {  // dies after delivering batch 0
      auto batch_0_only = [](std::uint64_t k) { return disttrain::test::synthetic_batch(k); };
      producer(b, src, cfg, batch_0_only).run(0, 1);
      world.mark_dead(3);
      return;
    }
    if (b.rank() == 2) {
      producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 2);  // throws: see below
      return;
    }
    const auto me = static_cast<std::size_t>(b.rank());
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    if (!disttrain::test::consume_batch(f, layout, me, 0).empty())
      throw std::runtime_error("batch 0");
    const auto t0 = std::chrono::steady_clock::now();
    try {
      (void)f.metadata(1);
    } catch (const disttrain::error& e) {
      seen[me] = e;
    }
    seconds[me] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  CHECK(code_of(errors[2]) == errc::timeout);  // the survivor: its trainers are gone
  errors[2] = nullptr;
  disttrain::test::rethrow_first(errors);
  for (std::size_t c = 0; c < 2; ++c) {
    INFO(seen[c].what());
    CHECK(seen[c].code() == errc::comm_error);
    CHECK(seen[c].where() == "producer rank 3");
    CHECK(contains(seen[c].message(), "holds samples " + held_ids(cfg, 1, 1) + " of batch 1"));
    CHECK(seconds[c] < 3.0);  // the death is reported at once, not after the timeout
  }
}

TEST_CASE("a stalled producer gives a timeout naming it and its samples, not a hang") {
  feed_layout layout{{1}};
  auto cfg = config_for(1, 2);
  cfg.timeout = 1000ms;
  std::atomic<bool> release{false};
  synthetic_parts_source src;
  const auto ids = disttrain::test::synthetic_batch(0);
  const std::size_t stalled_index = 1;  // producer rank 2
  src.stall_id =
      ids[disttrain::producer_share(ids, 0, {.index = stalled_index, .count = 2}).front()];
  src.release = &release;
  local_world world(3);
  disttrain::error seen(errc::internal, "", "no error");
  double waited = 0.0;
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    if (b.rank() > 0) {
      producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 1);  // throws: see below
      return;
    }
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      (void)disttrain::test::consume_batch(f, layout, 0, 0);
    } catch (const disttrain::error& e) {
      seen = e;
    }
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    release = true;
  });
  // Both producers time out once their consumer has given up: errors, not hangs.
  CHECK(code_of(errors[1]) == errc::timeout);
  CHECK(code_of(errors[2]) == errc::timeout);
  errors[1] = errors[2] = nullptr;
  disttrain::test::rethrow_first(errors);
  INFO(seen.what());
  CHECK(seen.code() == errc::timeout);
  CHECK(seen.where() == "producer rank 2");
  CHECK(contains(seen.message(), "holds samples " + held_ids(cfg, 1, 0) + " of batch 0"));
  CHECK(waited < 5.0);  // about one timeout
}

TEST_CASE("a bad sample: located error (fail) or dropped everywhere (skip)") {
  feed_layout layout{{2}};
  synthetic_parts_source src;
  const std::uint64_t bad = disttrain::test::synthetic_batch(1)[4];
  src.bad = {bad};
  SECTION("fail: every trainer and the producer report the sample") {
    auto cfg = config_for(2, 1);
    cfg.timeout = 2000ms;
    local_world world(3);
    std::vector<disttrain::error> seen(3, disttrain::error(errc::internal, "", "no error"));
    auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
      const auto me = static_cast<std::size_t>(b.rank());
      try {
        if (me == 2) {
          producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 2);
          return;
        }
        feed f(b, src, cfg, disttrain::test::synthetic_batch);
        for (std::uint64_t k = 0; k < 2; ++k)
          if (!disttrain::test::consume_batch(f, layout, me, k).empty())
            throw std::runtime_error("bad delivery");
      } catch (const disttrain::error& e) {
        seen[me] = e;
      }
    });
    disttrain::test::rethrow_first(errors);
    for (const auto& e : seen) {
      INFO(e.what());
      CHECK(e.code() == errc::invalid_argument);
      CHECK(e.where() == "sample " + std::to_string(bad));
      CHECK(contains(e.message(), "batch 1, producer rank 2: undecodable image"));
    }
  }
  SECTION("skip: the rest of the batch is delivered, the sample is listed as skipped") {
    auto cfg = config_for(2, 2);
    cfg.on_bad_sample = disttrain::bad_sample_policy::skip;
    local_world world(4);
    std::vector<std::string> problems(2);
    std::vector<std::vector<disttrain::skipped_sample>> skipped(2);
    auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
      const auto me = static_cast<std::size_t>(b.rank());
      if (me >= 2) {
        producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 2);
        return;
      }
      feed f(b, src, cfg, disttrain::test::synthetic_batch);
      for (std::uint64_t k = 0; k < 2; ++k) {
        std::vector<disttrain::skipped_sample> sk;
        problems[me] += disttrain::test::consume_batch(f, layout, me, k, nullptr, &sk);
        skipped[me].insert(skipped[me].end(), sk.begin(), sk.end());
      }
    });
    disttrain::test::rethrow_first(errors);
    for (std::size_t c = 0; c < 2; ++c) {
      CHECK(problems[c].empty());
      REQUIRE(skipped[c].size() == 1);
      CHECK(skipped[c][0].id == bad);
      CHECK(contains(skipped[c][0].reason, "undecodable image"));
    }
    CHECK(src.loads.load() == 24);
  }
}
