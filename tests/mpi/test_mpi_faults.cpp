// Issue 13 item 6 under mpirun (np >= 3): the fault-injection suite of
// tests/comm/test_fault_injection.cpp over `mpi_backend`. Each trial uses a
// fresh backend (a duplicate of MPI_COMM_WORLD: after a timeout an MPI
// communicator is broken), every rank's outcome is gathered, and every rank
// must end with the correct bytes or a `disttrain::error` within the timeout.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "disttrain/comm/fault_backend.hpp"
#include "disttrain/comm/mpi_backend.hpp"
#include "fault_suite.hpp"
#include "mpi_harness.hpp"

using disttrain::comm_options;
using disttrain::fault_backend;
using disttrain::mpi_backend;
using disttrain::sample_placement;
using disttrain::test::outcome;
using disttrain::test::rank_outcome;
using namespace std::chrono_literals;

namespace {

constexpr auto timeout = 250ms;
constexpr double grace_s = 2.0;  // oversubscribed ranks, cancellation grace periods

// Routes on the first three ranks: 2 -> 1 (two senders), 1 -> 2 with
// TP 2 and the fan-out, and consecutive stages of one module.
std::vector<disttrain::test::route_case> mpi_cases() {
  using L = disttrain::topology;
  using disttrain::test::at;
  using enum disttrain::module_role;
  const disttrain::activation_shape shape{{5, 0, 7, 1, 9, 3, 4, 11}, 24, 4};
  const int n = static_cast<int>(shape.rows.size());
  auto rr = [&](int dp) { return sample_placement::round_robin(n, dp); };
  std::vector<disttrain::test::route_case> v;
  v.push_back({"dp2->dp1",
               L({{"a", encoder, 1, 1, 2}, {"b", backbone, 1, 1, 1}}),
               at(0, 0),
               at(1, 0),
               rr(2),
               rr(1),
               shape,
               {}});
  v.push_back({"dp1->tp2",
               L({{"a", encoder, 1, 1, 1}, {"b", backbone, 2, 1, 1}}),
               at(0, 0),
               at(1, 0),
               rr(1),
               rr(1),
               shape,
               {}});
  v.push_back({"stage1->stage2",
               L({{"m", backbone, 1, 3, 1}}),
               at(0, 1),
               at(0, 2),
               rr(1),
               rr(1),
               shape,
               {disttrain::split_axis::rows, true}});
  return v;
}

// Every rank's outcome of one trial, on every rank.
std::vector<rank_outcome> gather(const rank_outcome& mine) {
  constexpr int fields = 3 + disttrain::fault_kind_count;
  std::vector<long long> row(fields), all;
  row[0] = static_cast<long long>(mine.what);
  row[1] = static_cast<long long>(mine.code);
  row[2] = static_cast<long long>(mine.seconds * 1e6);
  for (int k = 0; k < disttrain::fault_kind_count; ++k)
    row[static_cast<std::size_t>(3 + k)] = mine.faults[static_cast<std::size_t>(k)];
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  all.resize(static_cast<std::size_t>(n * fields));
  MPI_Allgather(row.data(), fields, MPI_LONG_LONG, all.data(), fields, MPI_LONG_LONG,
                MPI_COMM_WORLD);
  std::vector<rank_outcome> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    const long long* x = all.data() + r * fields;
    auto& o = out[static_cast<std::size_t>(r)];
    o.what = static_cast<outcome>(x[0]);
    o.code = static_cast<disttrain::errc>(x[1]);
    o.seconds = static_cast<double>(x[2]) * 1e-6;
    for (int k = 0; k < disttrain::fault_kind_count; ++k)
      o.faults[static_cast<std::size_t>(k)] = static_cast<int>(x[3 + k]);
  }
  return out;
}

void report_and_check(const disttrain::test::tally& t, const std::string& title, int min_faults) {
  if (disttrain::mpitest::world_rank() == 0) std::printf("%s\n", t.report(title).c_str());
  MPI_CHECK(t.outcomes[static_cast<std::size_t>(outcome::silent)] == 0);
  MPI_CHECK(t.outcomes[static_cast<std::size_t>(outcome::foreign)] == 0);
  MPI_CHECK(t.late_errors == 0);
  MPI_CHECK(t.total_faults() >= min_faults);
  MPI_CHECK(t.clean_trials_correct * 100 >= t.clean_trials * 90);
}

// Runs `trial(fault_backend&)` on ranks below `ranks` (the others idle) with a fresh backend.
template <class Trial>
std::vector<rank_outcome> run_trial(int ranks, const disttrain::fault_options& opts,
                                    Trial&& trial) {
  // The backends of past trials stay alive until the end: freeing one lets
  // OpenMPI reuse its context id, and a message of a past trial still in
  // flight (a duplicate, a send that timed out) would then match in the new one.
  static std::vector<std::unique_ptr<mpi_backend>> past;
  rank_outcome mine;
  {
    mpi_backend& mb =
        *past.emplace_back(std::make_unique<mpi_backend>(MPI_COMM_WORLD, comm_options{timeout}));
    if (mb.rank() < ranks) {
      fault_backend<mpi_backend> fb(mb, opts);
      mine = trial(fb);
      if (mine.what == outcome::silent || mine.what == outcome::foreign)
        std::fprintf(stderr, "[rank %d] %s: %s\n", mb.rank(),
                     mine.what == outcome::silent ? "SILENT WRONG DATA" : "foreign exception",
                     mine.text.c_str());
    }
  }
  auto all = gather(mine);
  int faults = 0;
  for (const auto& o : all)
    for (int f : o.faults) faults += f;
  if (faults == 0 && mine.what == outcome::error)  // diagnostics: a fault-free trial failed
    std::fprintf(stderr, "[rank %d] fault-free trial failed: %s\n",
                 disttrain::mpitest::world_rank(), mine.text.c_str());
  return all;
}

void routes_under_faults() {
  const auto cases = mpi_cases();
  disttrain::test::tally t;
  const double allowed = std::chrono::duration<double>(timeout).count() + grace_s;
  for (int i = 0; i < 120; ++i) {
    const auto& c = cases[static_cast<std::size_t>(i) % cases.size()];
    const bool verify = i % 2 == 0;
    const auto opts =
        disttrain::test::trial_faults(static_cast<std::uint64_t>(i) + 1, 0.5, verify, timeout);
    t.add_trial(run_trial(c.layout.world_size(), opts,
                          [&](auto& fb) {
                            return disttrain::test::route_trial(fb, c, verify, 3, timeout);
                          }),
                allowed);
  }
  report_and_check(t, "routes, MPI backend", 150);
}

void executor_under_faults() {
  const auto s = disttrain::test::fault_schedule(2, 1, 4);
  disttrain::test::tally t;
  const double allowed =
      std::chrono::duration<double>(timeout).count() * static_cast<double>(s.ops[0].size()) +
      grace_s;
  for (int i = 0; i < 60; ++i) {
    const auto opts =
        disttrain::test::trial_faults(static_cast<std::uint64_t>(i) + 1000, 0.15, false, timeout);
    t.add_trial(run_trial(s.num_ranks(), opts,
                          [&](auto& fb) { return disttrain::test::exec_trial(fb, s, timeout); }),
                allowed);
  }
  report_and_check(t, "executor, MPI backend", 50);
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  if (int rc = disttrain::mpitest::skip_unless_ranks(3, "test_mpi_faults")) return rc;
  return disttrain::mpitest::run_all({{"routes under seeded faults", routes_under_faults},
                                      {"executor under seeded faults", executor_under_faults}});
}
