// MPI backend bandwidth and latency against raw MPI_Send/MPI_Recv measured in
// the same run (target: >= 95% of raw bandwidth from 1 MiB up). Run with 2
// ranks: mpiexec -n 2 bench_comm_mpi [--json] [--quick]. Registered as the
// smoke test mpi.bench_smoke.bench_comm_mpi.np2 (--quick).
//
// Both variants do the same work on the same buffer: rank 0 sends `reps`
// messages one after the other (raw: MPI_Send; backend: isend + wait), rank 1
// receives them (raw: MPI_Recv; backend: irecv + wait), then rank 1 sends a
// 1-byte acknowledgement that ends rank 0's clock. Batches of the two
// variants alternate (and alternate which goes first) so both see the same
// load; one untimed warm-up pair first; the ratio is taken per pair
// (benchmarks/p2p_report.hpp) and summarised by its median and min..max.
// The `route` rows time whole `run_route` calls (rank 0 -> rank 1, one
// message sent in place, plus the always-on 32-byte plan stamp ahead of it)
// against the same raw batches.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "harness.hpp"
#include "one_way.hpp"
#include "p2p_report.hpp"

using disttrain::bench::one_way;

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  const auto opt = disttrain::bench::parse_options(argc, argv);
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) {
    std::printf("SKIPPED: needs 2 ranks\n");
    return 77;
  }
  disttrain::mpi_backend b(MPI_COMM_WORLD, {std::chrono::seconds(120)});
  const std::vector<std::size_t> sizes =
      opt.quick ? std::vector<std::size_t>{4 << 10, 1 << 20}
                : std::vector<std::size_t>{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20,
                                           4 << 20, 16 << 20, 64 << 20, 256 << 20};
  std::vector<disttrain::bench::p2p_row> rows;
  for (std::size_t s : sizes) {
    std::vector<std::byte> buf(s, std::byte{1});
    const std::size_t budget = opt.quick ? (4u << 20) : (16u << 20);  // bytes per batch
    const int reps = static_cast<int>(std::clamp<std::size_t>(budget / s, 4, 512));
    const int batches = opt.quick ? 2 : 21;
    const int count = static_cast<int>(s);
    const auto raw = [&] {
      return one_way(
          me, reps, [&] { MPI_Send(buf.data(), count, MPI_BYTE, 1, 0, MPI_COMM_WORLD); },
          [&] { MPI_Recv(buf.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); });
    };
    const auto ours = [&] {
      return one_way(
          me, reps,
          [&] {
            auto r = b.isend(buf, 1, 0);
            b.wait(r);
          },
          [&] {
            auto r = b.irecv(buf, 0, 0);
            b.wait(r);
          });
    };
    // A whole route (rank 0 -> rank 1, one contiguous message sent in place)
    // with its always-on plan stamp: one 32-byte message ahead of the payload.
    const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 1},
                                 {"b", disttrain::module_role::backbone, 1, 1, 1}});
    const auto p1 = disttrain::sample_placement::round_robin(1, 1);
    const auto plan = disttrain::plan_boundary_route(
        L, 0, p1, p1, disttrain::activation_shape{{static_cast<std::int64_t>(s / 1024)}, 1024, 1},
        {disttrain::split_axis::rows, false});
    disttrain::buffer_pool pool;
    const auto route = [&] {
      return one_way(
          me, reps, [&] { disttrain::run_route(b, plan, buf, {}, pool, {.tag = 0}); },
          [&] { disttrain::run_route(b, plan, {}, buf, pool, {.tag = 0}); });
    };
    const double target = s >= (1u << 20) ? 0.95 : 0.0;
    disttrain::bench::p2p_row row{"one-way", s, target, {}, {}};
    disttrain::bench::p2p_row rrow{"route", s, target, {}, {}};
    for (int bt = 0; bt <= batches; ++bt) {
      double tr = 0, to = 0, tq = 0;
      if (bt % 2 == 0) {
        tr = raw();
        to = ours();
        tq = route();
      } else {
        tq = route();
        to = ours();
        tr = raw();
      }
      if (bt == 0) continue;  // warm-up
      row.candidate_s.push_back(to);
      row.baseline_s.push_back(tr);
      rrow.candidate_s.push_back(tq);
      rrow.baseline_s.push_back(tr);
    }
    rows.push_back(std::move(row));
    rows.push_back(std::move(rrow));
  }
  if (me == 0) {
    if (opt.json) {
      std::printf("%s\n", nlohmann::json{{"mpi_p2p",
                                          disttrain::bench::p2p_json("backend", "raw_mpi", rows)}}
                              .dump(2)
                              .c_str());
    } else {
      disttrain::bench::print_p2p_table(
          "MPI backend vs raw MPI_Send/MPI_Recv, 2 ranks (ratio = raw time / backend time, median "
          "of paired batches)",
          "backend", "raw", rows);
    }
  }
  return 0;
}
