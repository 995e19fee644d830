// Issue 13 item 6: seeded faults (delay, drop, duplicate, truncate, corrupt,
// kill) injected by `fault_backend` into routes and executor iterations on
// the local backend. Every rank must end with the correct bytes or a
// `disttrain::error` within the timeout; never with wrong data and no error.
// The counts are printed (ctest -V shows them). The same suite runs under
// mpirun in tests/mpi/test_mpi_faults.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"
#include "disttrain_catch.hpp"
#include "fault_suite.hpp"

using disttrain::errc;
using disttrain::fault_backend;
using disttrain::fault_kind;
using disttrain::local_backend;
using disttrain::local_world;
using disttrain::test::outcome;
using disttrain::test::rank_outcome;
using namespace std::chrono_literals;

namespace {

constexpr auto timeout = 100ms;
// An error must come within the timeout plus this much (thread start-up,
// scheduling on a loaded 2-core machine, cancelling the remaining requests).
constexpr double grace_s = 1.5;

// Runs `trial(fault_backend&)` on every rank of a fresh world of `n` ranks
// with the faults of `seed`; returns every rank's outcome.
template <class Trial>
std::vector<rank_outcome> run_world(int n, const disttrain::fault_options& base, Trial&& trial) {
  local_world world(n, {timeout});
  std::vector<rank_outcome> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto ep = world.endpoint(r);
      auto opts = base;
      opts.on_kill = [&world](int dead) { world.mark_dead(dead); };
      fault_backend<local_backend> fb(ep, opts);
      out[static_cast<std::size_t>(r)] = trial(fb);
    });
  for (auto& t : threads) t.join();
  return out;
}

// Runs `trials` independent trials, `trial(i)` returning trial i's rank
// outcomes, up to 4 worlds at a time: a world mostly waits out timeouts, so
// four of them share the machine without slowing one another, and the suite
// takes a quarter of the wall time. The outcomes come back in trial order.
template <class Trial>
std::vector<std::vector<rank_outcome>> run_trials(int trials, Trial&& trial) {
  constexpr int concurrent_worlds = 4;
  std::vector<std::vector<rank_outcome>> out(static_cast<std::size_t>(trials));
  for (int first = 0; first < trials; first += concurrent_worlds) {
    std::vector<std::thread> worlds;
    for (int i = first; i < std::min(trials, first + concurrent_worlds); ++i)
      worlds.emplace_back([&, i] { out[static_cast<std::size_t>(i)] = trial(i); });
    for (auto& w : worlds) w.join();
  }
  return out;
}

void print_failures(const std::vector<rank_outcome>& ranks, const std::string& what) {
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r].what == outcome::silent || ranks[r].what == outcome::foreign)
      std::fprintf(stderr, "%s: rank %zu: %s %s\n", what.c_str(), r,
                   ranks[r].what == outcome::silent ? "SILENT WRONG DATA" : "foreign exception",
                   ranks[r].text.c_str());
}

void check_tally(const disttrain::test::tally& t, int min_faults) {
  CHECK(t.outcomes[static_cast<std::size_t>(outcome::silent)] == 0);
  CHECK(t.outcomes[static_cast<std::size_t>(outcome::foreign)] == 0);
  CHECK(t.late_errors == 0);
  CHECK(t.total_faults() >= min_faults);
  for (int k = 0; k < disttrain::fault_kind_count; ++k)
    if (k != static_cast<int>(fault_kind::corrupt) || t.faults[4] > 0)
      CHECK(t.faults[static_cast<std::size_t>(k)] > 0);
  // Sanity: without faults the transfers succeed (a suite where everything
  // fails would pass the checks above); 95 % allows a stalled thread.
  CHECK(t.clean_trials_correct * 100 >= t.clean_trials * 95);
}

}  // namespace

TEST_CASE("fault injection: routes deliver the right bytes or fail within the timeout") {
  const auto cases = disttrain::test::small_route_cases();
  disttrain::test::tally t;
  const double allowed = std::chrono::duration<double>(timeout).count() + grace_s;
  constexpr int trials = 300;
  const auto outcomes = run_trials(trials, [&](int i) {
    const auto& c = cases[static_cast<std::size_t>(i) % cases.size()];
    // Even trials in verify mode (corruption is caught by the checksum),
    // odd ones without (no corruption: nothing would check the payload).
    const bool verify = i % 2 == 0;
    const auto opts =
        disttrain::test::trial_faults(static_cast<std::uint64_t>(i) + 1, 0.25, verify, timeout);
    return run_world(c.layout.world_size(), opts, [&](auto& fb) {
      return disttrain::test::route_trial(fb, c, verify, 3, timeout);
    });
  });
  for (int i = 0; i < trials; ++i) {
    const auto& ranks = outcomes[static_cast<std::size_t>(i)];
    print_failures(ranks, "route trial " + std::to_string(i) + " (" +
                              cases[static_cast<std::size_t>(i) % cases.size()].name + ")");
    t.add_trial(ranks, allowed);
  }
  std::printf("%s\n", t.report("routes, local backend").c_str());
  check_tally(t, 1000);
}

TEST_CASE("fault injection: executor iterations deliver the right bytes or fail in time") {
  const auto s = disttrain::test::fault_schedule(2, 2, 4);
  disttrain::test::tally t;
  // The executor gives each wait its own timeout: a rank waits for a chain
  // of peers that each time out, at most one timeout per op of its program.
  const double allowed =
      std::chrono::duration<double>(timeout).count() * static_cast<double>(s.ops[0].size()) +
      grace_s;
  constexpr int trials = 150;
  const auto outcomes = run_trials(trials, [&](int i) {
    const auto opts =
        disttrain::test::trial_faults(static_cast<std::uint64_t>(i) + 1000, 0.2, false, timeout);
    return run_world(s.num_ranks(), opts,
                     [&](auto& fb) { return disttrain::test::exec_trial(fb, s, timeout); });
  });
  for (int i = 0; i < trials; ++i) {
    const auto& ranks = outcomes[static_cast<std::size_t>(i)];
    print_failures(ranks, "executor trial " + std::to_string(i));
    t.add_trial(ranks, allowed);
  }
  std::printf("%s\n", t.report("executor, local backend").c_str());
  check_tally(t, 250);
}

TEST_CASE("fault_backend: seeded, reproducible, and validated options") {
  local_world world(2, {timeout});
  auto ep = world.endpoint(0);
  disttrain::fault_options o;
  o.seed = 5;
  o.rate = 1.0;
  o.kinds = {fault_kind::drop};
  fault_backend<local_backend> fb(ep, o);
  std::vector<std::byte> buf(16);
  auto dropped = fb.isend(buf, 1, 0);
  auto r = std::move(dropped);   // the moved-from request is empty, not a second drop
  CHECK_FALSE(dropped.valid());  // NOLINT(bugprone-use-after-move)
  REQUIRE(r.valid());
  fb.wait(r);  // dropped: completes at once
  CHECK_FALSE(r.valid());
  REQUIRE(fb.faults().size() == 1);
  CHECK(fb.faults()[0].kind == fault_kind::drop);
  CHECK(fb.faults()[0].send.where() == "rank 0 -> rank 1 tag 0");
  // Same seed, same decisions; another seed, other ones.
  auto decisions = [&](std::uint64_t seed) {
    disttrain::fault_options q;
    q.seed = seed;
    q.rate = 0.5;
    q.kinds = {fault_kind::drop, fault_kind::duplicate};
    fault_backend<local_backend> f(ep, q);
    std::vector<int> d;
    for (int i = 0; i < 64; ++i) {
      auto x = f.isend(buf, 0, 1);  // to itself: a duplicate or the real send stays unmatched
      d.push_back(f.faults().empty() ? -1 : static_cast<int>(f.faults().back().index));
    }
    return d;
  };
  CHECK(decisions(9) == decisions(9));
  CHECK(decisions(9) != decisions(10));
  o.rate = 1.5;
  DISTTRAIN_CHECK_ERROR(fault_backend<local_backend>(ep, o), errc::invalid_argument,
                        "fault_options.rate");
  o.rate = 0.5;
  o.min_delay = std::chrono::milliseconds(30);  // above max_delay (20)
  DISTTRAIN_CHECK_ERROR(fault_backend<local_backend>(ep, o), errc::invalid_argument,
                        "fault_options.max_delay");
  o.min_delay = std::chrono::milliseconds(-1);
  DISTTRAIN_CHECK_ERROR(fault_backend<local_backend>(ep, o), errc::invalid_argument,
                        "fault_options.min_delay");
  o.min_delay = std::chrono::milliseconds(0);
  o.kinds.clear();
  DISTTRAIN_CHECK_ERROR(fault_backend<local_backend>(ep, o), errc::invalid_argument,
                        "fault_options.kinds");
  // A killed rank fails every later call with comm_error, and on_kill ran.
  o.rate = 1.0;
  o.kinds = {fault_kind::kill};
  int killed = -1;
  o.on_kill = [&](int rank) { killed = rank; };
  fault_backend<local_backend> fk(ep, o);
  DISTTRAIN_CHECK_ERROR((void)fk.isend(buf, 1, 0), errc::comm_error, "rank 0 -> rank 1 tag 0");
  CHECK(killed == 0);
  CHECK(fk.killed());
  DISTTRAIN_CHECK_ERROR((void)fk.irecv(buf, 1, 0), errc::comm_error, "rank 0 <- rank 1 tag 0");
  DISTTRAIN_CHECK_ERROR(fk.barrier(), errc::comm_error, "rank 0 barrier");
}

TEST_CASE("fault injection: the suite sees silent corruption where nothing checks the payload") {
  // Corruption without verify mode is not detectable by the transport: the
  // suite must report it as silent wrong data (so the checks above can fail).
  const auto cases = disttrain::test::small_route_cases();
  disttrain::test::tally t;
  for (int i = 0; i < 24; ++i) {
    const auto& c = cases[static_cast<std::size_t>(i) % cases.size()];
    disttrain::fault_options opts;
    opts.seed = static_cast<std::uint64_t>(i) + 77;
    opts.rate = 0.2;
    opts.kinds = {fault_kind::corrupt};
    const auto ranks = run_world(c.layout.world_size(), opts, [&](auto& fb) {
      return disttrain::test::route_trial(fb, c, false, 3, timeout);
    });
    t.add_trial(ranks, 1e9);
  }
  std::printf("%s\n", t.report("corruption without verify (expected silent)").c_str());
  // (A corrupted plan stamp is still caught: some ranks end with an error.)
  CHECK(t.outcomes[static_cast<std::size_t>(outcome::silent)] > 0);
}
