// MPI backend bandwidth and latency against raw MPI_Send/MPI_Recv measured in
// the same run (target: >= 95% of raw bandwidth from 1 MiB up). Run with 2
// ranks: mpiexec -n 2 bench_mpi_comm [--json] [--quick]. Registered as the
// smoke test mpi.bench_smoke.np2 (--quick).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "disttrain/comm/mpi_backend.hpp"
#include "harness.hpp"

namespace {

// Seconds per one-way transfer of `bytes` (rank 0 -> rank 1, with a 1-byte
// acknowledgement every `reps` transfers), median of `batches`.
template <class Send, class Recv>
double stream(int me, std::size_t bytes, int reps, int batches, Send&& send, Recv&& recv) {
  std::vector<double> t;
  char ack = 0;
  for (int b = 0; b < batches; ++b) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < reps; ++i) {
      if (me == 0) send();
      else if (me == 1) recv();
    }
    if (me == 0) MPI_Recv(&ack, 1, MPI_CHAR, 1, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (me == 1) MPI_Send(&ack, 1, MPI_CHAR, 0, 999, MPI_COMM_WORLD);
    t.push_back((MPI_Wtime() - t0) / reps);
  }
  std::sort(t.begin(), t.end());
  (void)bytes;
  return t[t.size() / 2];
}

}  // namespace

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
  const std::vector<std::size_t> sizes = opt.quick ? std::vector<std::size_t>{4 << 10, 1 << 20}
                                                   : std::vector<std::size_t>{4 << 10, 64 << 10, 1 << 20, 16 << 20,
                                                                              64 << 20, 256 << 20};
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t s : sizes) {
    std::vector<std::byte> buf(s, std::byte{1});
    const std::size_t budget = opt.quick ? (16u << 20) : (1u << 30);
    const int reps = static_cast<int>(std::clamp<std::size_t>(budget / s, 2, 1000));
    const int batches = opt.quick ? 2 : 5;
    const int count = static_cast<int>(s);
    // Interleave raw and backend batches so both see the same machine load.
    std::vector<double> raws, ourss;
    for (int bt = 0; bt < batches; ++bt) {
      raws.push_back(stream(
          me, s, reps, 1, [&] { MPI_Send(buf.data(), count, MPI_BYTE, 1, 0, MPI_COMM_WORLD); },
          [&] { MPI_Recv(buf.data(), count, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }));
      ourss.push_back(stream(
          me, s, reps, 1,
          [&] {
            auto r = b.isend(buf, 1, 0);
            b.wait(r);
          },
          [&] {
            auto r = b.irecv(buf, 0, 0);
            b.wait(r);
          }));
    }
    std::sort(raws.begin(), raws.end());
    std::sort(ourss.begin(), ourss.end());
    const double raw = raws[raws.size() / 2], ours = ourss[ourss.size() / 2];
    out.push_back({{"bytes", s},
                   {"backend_GBps", static_cast<double>(s) / ours / 1e9},
                   {"raw_mpi_GBps", static_cast<double>(s) / raw / 1e9},
                   {"ratio_to_raw", raw / ours},
                   {"backend_latency_us", ours * 1e6},
                   {"raw_latency_us", raw * 1e6}});
  }
  if (me == 0) {
    if (opt.json) {
      std::printf("%s\n", nlohmann::json{{"mpi_p2p", out}}.dump(2).c_str());
    } else {
      std::printf("%12s %14s %14s %8s %12s\n", "bytes", "backend GB/s", "raw MPI GB/s", "ratio", "latency us");
      for (const auto& r : out)
        std::printf("%12zu %14.2f %14.2f %8.2f %12.2f\n", r["bytes"].get<std::size_t>(),
                    r["backend_GBps"].get<double>(), r["raw_mpi_GBps"].get<double>(), r["ratio_to_raw"].get<double>(),
                    r["backend_latency_us"].get<double>());
    }
  }
  return 0;
}
