// Communicator benchmark:
//  1. local backend point-to-point bandwidth and latency (two threads) against
//     memcpy of the same bytes measured in the same run (target >= 80%);
//  2. route planning time for paper-scale boundaries, and the bytes each plan
//     moves across the boundary against the minimum (every element once);
//  3. one route executed on the local backend against memcpy of the same bytes.
// --json prints one JSON object; --quick shrinks sizes for the ctest smoke run.
// The MPI backend's bandwidth against raw MPI_Send/MPI_Recv is measured by
// tests/mpi/bench_mpi_comm.cpp (needs MPI; see docs/comm.md).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "disttrain/comm.hpp"
#include "harness.hpp"

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {

double seconds_since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

struct p2p_result {
  std::size_t bytes;
  double local_s;   // seconds per transfer
  double memcpy_s;  // seconds per memcpy of the same bytes
};

// Median over `batches` of the time per transfer of `reps` back-to-back transfers.
p2p_result measure_p2p(std::size_t bytes, int reps, int batches) {
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes);
  std::vector<double> local, base;
  disttrain::local_world world(2, {60s});
  for (int b = 0; b < batches; ++b) {
    std::thread receiver([&] {
      auto ep = world.endpoint(1);
      for (int i = 0; i < reps; ++i) {
        auto r = ep.irecv(dst, 0, 0);
        ep.wait(r);
      }
    });
    auto ep = world.endpoint(0);
    const auto t0 = clk::now();
    for (int i = 0; i < reps; ++i) {
      auto s = ep.isend(src, 1, 0);
      ep.wait(s);
    }
    local.push_back(seconds_since(t0) / reps);
    receiver.join();
    const auto t1 = clk::now();
    for (int i = 0; i < reps; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      disttrain::bench::do_not_optimize(dst[bytes / 2]);
    }
    base.push_back(seconds_since(t1) / reps);
  }
  std::sort(local.begin(), local.end());
  std::sort(base.begin(), base.end());
  return {bytes, local[local.size() / 2], base[base.size() / 2]};
}

struct route_bench {
  std::string name;
  int samples;
  double plan_ms;
  std::int64_t crossing, minimum, fan_out;
  std::size_t messages;
};

route_bench bench_plan(const std::string& name, const disttrain::rank_layout& L, int n, int dp_a, int dp_b,
                       std::int64_t hidden, bool quick) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  for (int s = 0; s < n; ++s) rows[static_cast<std::size_t>(s)] = 256 + (s * 7919) % 3840;  // 256..4095 tokens
  const disttrain::activation_shape shape{rows, hidden, 2};
  // An irregular sample map (as the reorderer produces).
  std::vector<int> ma(static_cast<std::size_t>(n)), mb(static_cast<std::size_t>(n));
  for (int s = 0; s < n; ++s) {
    ma[static_cast<std::size_t>(s)] = (s * 5 + s / 3) % dp_a;
    mb[static_cast<std::size_t>(s)] = (s * 3 + s / 7) % dp_b;
  }
  const auto pa = disttrain::sample_placement::from_replica_map(ma, dp_a);
  const auto pb = disttrain::sample_placement::from_replica_map(mb, dp_b);
  disttrain::route_plan plan;
  const double t = disttrain::bench::time_per_call([&] { plan = disttrain::plan_boundary_route(L, 0, pa, pb, shape); },
                                                   quick ? 0.02 : 0.2, 3);
  return {name, n, t * 1e3, plan.phase_elements(0), plan.minimum_crossing_elements(), plan.phase_elements(1),
          plan.messages().size()};
}

struct exec_result {
  double route_s, memcpy_s;
  std::int64_t bytes;
};

// Executes a 2 -> 1 route (TP 1) on the local backend, 3 threads, rows split (zero copy).
exec_result bench_exec(bool quick) {
  const disttrain::rank_layout L({{"enc", "encoder", 1, 1, 2}, {"llm", "backbone", 1, 1, 1}});
  const int n = 8;
  const std::int64_t hidden = quick ? 1024 : 4096;
  const disttrain::activation_shape shape{std::vector<std::int64_t>(n, quick ? 256 : 2048), hidden, 2};
  const auto pa = disttrain::sample_placement::round_robin(n, 2);
  const auto pb = disttrain::sample_placement::round_robin(n, 1);
  const auto plan = disttrain::plan_boundary_route(L, 0, pa, pb, shape, {disttrain::split_axis::rows, true});
  const int reps = quick ? 3 : 10;
  std::vector<std::vector<std::byte>> src(3), dst(3);
  for (int r = 0; r < 3; ++r) {
    src[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(plan.source_elements(r)) * 2, std::byte{3});
    dst[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(plan.destination_elements(r)) * 2);
  }
  disttrain::local_world world(3, {60s});
  std::atomic<int> ready{0};
  double elapsed = 0;
  std::vector<std::thread> th;
  for (int r = 0; r < 3; ++r)
    th.emplace_back([&, r] {
      auto ep = world.endpoint(r);
      disttrain::buffer_pool pool;
      ep.barrier();
      const auto t0 = clk::now();
      for (int i = 0; i < reps; ++i)
        disttrain::run_route(ep, plan, src[static_cast<std::size_t>(r)], dst[static_cast<std::size_t>(r)], pool,
                             {i, false, std::chrono::milliseconds(-1)});
      ep.barrier();
      if (r == 2) elapsed = seconds_since(t0) / reps;
      ++ready;
    });
  for (auto& t : th) t.join();
  const auto bytes = plan.phase_elements(0) * 2;
  std::vector<std::byte> a(static_cast<std::size_t>(bytes), std::byte{1}), b(a.size());
  const double mc = disttrain::bench::time_per_call(
      [&] {
        std::memcpy(b.data(), a.data(), a.size());
        disttrain::bench::do_not_optimize(b[b.size() / 2]);
      },
      quick ? 0.02 : 0.2, 3);
  return {elapsed, mc, bytes};
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = disttrain::bench::parse_options(argc, argv);
  std::vector<std::size_t> sizes = opt.quick ? std::vector<std::size_t>{4 << 10, 1 << 20, 16 << 20}
                                             : std::vector<std::size_t>{4 << 10,  64 << 10, 1 << 20,
                                                                        16 << 20, 64 << 20, 256 << 20};
  std::vector<p2p_result> p2p;
  for (std::size_t s : sizes) {
    const std::size_t budget = opt.quick ? (64u << 20) : (1u << 30);
    const int reps = static_cast<int>(std::clamp<std::size_t>(budget / s, 2, opt.quick ? 200 : 2000));
    p2p.push_back(measure_p2p(s, reps, opt.quick ? 3 : 5));
  }
  std::vector<route_bench> plans;
  // Paper's worked example: encoder DP 2 TP 2 -> backbone stage DP 3 TP 4, 1172-GPU scale boundaries.
  plans.push_back(bench_plan("vit dp2 tp2 -> llm dp3 tp4", disttrain::rank_layout({{"vit", "encoder", 2, 1, 2},
                                                                                   {"llm", "backbone", 4, 1, 3}}),
                             opt.quick ? 48 : 192, 2, 3, 5120, opt.quick));
  plans.push_back(bench_plan("llm dp16 tp8 -> gen dp48 tp1", disttrain::rank_layout({{"llm", "backbone", 8, 1, 16},
                                                                                     {"gen", "generator", 1, 1, 48}}),
                             opt.quick ? 96 : 960, 16, 48, 8192, opt.quick));
  plans.push_back(bench_plan("vit dp64 tp1 -> llm dp12 tp8", disttrain::rank_layout({{"vit", "encoder", 1, 1, 64},
                                                                                     {"llm", "backbone", 8, 1, 12}}),
                             opt.quick ? 96 : 960, 64, 12, 8192, opt.quick));
  const exec_result ex = bench_exec(opt.quick);

  if (opt.json) {
    nlohmann::json j;
    for (const auto& r : p2p)
      j["local_p2p"].push_back({{"bytes", r.bytes},
                                {"local_GBps", static_cast<double>(r.bytes) / r.local_s / 1e9},
                                {"memcpy_GBps", static_cast<double>(r.bytes) / r.memcpy_s / 1e9},
                                {"ratio_to_memcpy", r.memcpy_s / r.local_s},
                                {"latency_us", r.local_s * 1e6}});
    for (const auto& p : plans)
      j["route_plan"].push_back({{"case", p.name},
                                 {"samples", p.samples},
                                 {"plan_ms", p.plan_ms},
                                 {"messages", p.messages},
                                 {"crossing_elements", p.crossing},
                                 {"minimum_elements", p.minimum},
                                 {"crossing_over_minimum", static_cast<double>(p.crossing) / static_cast<double>(p.minimum)},
                                 {"fan_out_elements", p.fan_out}});
    j["route_exec_local"] = {{"bytes", ex.bytes},
                             {"route_GBps", static_cast<double>(ex.bytes) / ex.route_s / 1e9},
                             {"memcpy_GBps", static_cast<double>(ex.bytes) / ex.memcpy_s / 1e9},
                             {"ratio_to_memcpy", ex.memcpy_s / ex.route_s}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("local backend point-to-point vs memcpy (same run)\n");
  fmt::print("{:>12} {:>12} {:>12} {:>8} {:>12}\n", "bytes", "local GB/s", "memcpy GB/s", "ratio", "latency us");
  for (const auto& r : p2p)
    fmt::print("{:>12} {:>12.2f} {:>12.2f} {:>8.2f} {:>12.2f}\n", r.bytes, static_cast<double>(r.bytes) / r.local_s / 1e9,
               static_cast<double>(r.bytes) / r.memcpy_s / 1e9, r.memcpy_s / r.local_s, r.local_s * 1e6);
  fmt::print("\nroute planning (bf16 activations, 256..4095 tokens per sample)\n");
  fmt::print("{:<32} {:>8} {:>10} {:>9} {:>18}\n", "case", "samples", "plan ms", "messages", "crossing/minimum");
  for (const auto& p : plans)
    fmt::print("{:<32} {:>8} {:>10.3f} {:>9} {:>18.3f}\n", p.name, p.samples, p.plan_ms, p.messages,
               static_cast<double>(p.crossing) / static_cast<double>(p.minimum));
  fmt::print("\nroute execution on the local backend (2 -> 1, rows split, {} MiB per route)\n",
             ex.bytes / (1 << 20));
  fmt::print("route {:.2f} GB/s, memcpy {:.2f} GB/s, ratio {:.2f}\n", static_cast<double>(ex.bytes) / ex.route_s / 1e9,
             static_cast<double>(ex.bytes) / ex.memcpy_s / 1e9, ex.memcpy_s / ex.route_s);
  return 0;
}
