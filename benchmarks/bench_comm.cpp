// Communicator benchmark:
//  1. local backend point-to-point against the raw transport measured in the
//     same run, batch by batch (see p2p_report.hpp):
//     - "stream w8": rank 0 streams messages to rank 1 with 8 in flight per
//       side (the usual bandwidth test, as osu_bw; also how route_transfer
//       posts), against memcpy between the same two buffers, same count;
//       target >= 0.80 of memcpy from 1 MiB up;
//     - "route w8": the same stream as whole routes (`route_transfer`, one
//       message sent in place, with the always-on 32-byte plan stamp ahead
//       of it), 8 in flight, same baseline; target >= 0.80 from 1 MiB up;
//     - "route self": one route at a time with both ends on one thread (no
//       thread hand-off): the route's own cost, plan stamp included (informative);
//     - "blocking": one message in flight (send+wait / recv+wait), same
//       baseline; latency-bound for small messages (informative);
//     - "self": rank 0 sends to itself (irecv, isend, wait both): the
//       backend's own per-message cost without any thread hand-off, hence
//       insensitive to scheduling (informative);
//     - "ping-pong": round trip / 2 against a bare condition-variable hand-off
//       between two threads that memcpy the same bytes (informative);
//  2. route planning time for paper-scale boundaries, and the bytes each plan
//     moves across the boundary against the minimum (every element once);
//  3. one route executed on the local backend against memcpy of the same bytes.
// --json prints one JSON object; --quick shrinks sizes for the ctest smoke run.
// The MPI backend's bandwidth against raw MPI_Send/MPI_Recv is measured by
// benchmarks/mpi/bench_comm_mpi.cpp (needs MPI; see docs/comm.md).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "disttrain/comm.hpp"
#include "disttrain/comm/json.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "harness.hpp"
#include "p2p_report.hpp"

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {

double seconds_since(clk::time_point t0) {
  return std::chrono::duration<double>(clk::now() - t0).count();
}

// Rank 0 is the calling thread, rank 1 a partner thread kept alive for all
// batches; `run` starts both sides together and times rank 0's side.
class duo {
 public:
  duo() : start_(2), end_(2), partner_([this] { loop(); }) {}
  duo(const duo&) = delete;
  duo& operator=(const duo&) = delete;
  ~duo() {
    job_ = nullptr;
    stop_ = true;
    start_.arrive_and_wait();
    partner_.join();
  }
  // Seconds rank 0 spends in `mine` (rank 1 runs `theirs` concurrently).
  double run(const std::function<void()>& mine, std::function<void()> theirs) {
    job_ = std::move(theirs);
    start_.arrive_and_wait();
    const auto t0 = clk::now();
    mine();
    const double t = seconds_since(t0);
    end_.arrive_and_wait();
    return t;
  }

 private:
  void loop() {
    for (;;) {
      start_.arrive_and_wait();
      if (stop_) return;
      if (job_) job_();
      end_.arrive_and_wait();
    }
  }
  std::barrier<> start_, end_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread partner_;
};

// A bare hand-off: one mutex + condition variable, `turn` says who may go.
struct handoff {
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;
  void give(int to) {
    {
      std::lock_guard<std::mutex> lk(m);
      turn = to;
    }
    cv.notify_one();
  }
  void await(int me) {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return turn == me; });
  }
};

// Sends (rank 0) or receives (rank 1) `reps` messages with `window` in flight.
void stream(disttrain::local_backend& ep, std::span<std::byte> buf, int reps, int window) {
  std::vector<disttrain::local_backend::request> q;
  q.reserve(static_cast<std::size_t>(window));
  for (int i = 0; i < reps; i += window) {
    for (int k = 0; k < window && i + k < reps; ++k)
      q.push_back(ep.rank() == 0 ? ep.isend(buf, 1, 0) : ep.irecv(buf, 0, 0));
    for (auto& r : q) ep.wait(r);
    q.clear();
  }
}

void memcpy_reps(std::span<std::byte> dst, std::span<const std::byte> src, int reps) {
  for (int i = 0; i < reps; ++i) {
    std::memcpy(dst.data(), src.data(), src.size());
    disttrain::bench::do_not_optimize(dst[dst.size() / 2]);
  }
}

// Runs `reps` routes of `plan` (rank 0 -> rank 1) with `window` in flight:
// every route is one message sent in place plus its 32-byte plan stamp.
void stream_routes(disttrain::local_backend& ep, const disttrain::route_plan& plan,
                   std::span<std::byte> buf, int reps, int window) {
  disttrain::buffer_pool pool;
  std::vector<std::unique_ptr<disttrain::route_transfer<disttrain::local_backend>>> q;
  for (int i = 0; i < reps; i += window) {
    for (int k = 0; k < window && i + k < reps; ++k) {
      auto& t =
          q.emplace_back(std::make_unique<disttrain::route_transfer<disttrain::local_backend>>(
              ep, plan, pool, disttrain::transfer_options{.tag = k}));
      if (ep.rank() == 0)
        t->start(buf, {});
      else
        t->start({}, buf);
    }
    for (auto& t : q) t->wait();
    q.clear();
  }
}

// The plan of a route moving `bytes` from rank 0 to rank 1 in one contiguous message.
disttrain::route_plan one_message_route(std::size_t bytes) {
  const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 1},
                               {"b", disttrain::module_role::backbone, 1, 1, 1}});
  const auto p = disttrain::sample_placement::round_robin(1, 1);
  return disttrain::plan_boundary_route(
      L, 0, p, p, disttrain::activation_shape{{static_cast<std::int64_t>(bytes / 1024)}, 1024, 1},
      {disttrain::split_axis::rows, false});
}

struct local_rows {
  std::vector<disttrain::bench::p2p_row> bandwidth, latency;
};

// All point-to-point rows of one message size. Every timed batch of the
// backend is paired with an adjacent batch of its baseline doing the same
// copies between the same buffers; one untimed warm-up round first.
void measure_p2p(std::size_t bytes, bool quick, local_rows& out) {
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes), echo(bytes);
  disttrain::local_world world(2, {60s});
  auto e0 = world.endpoint(0);
  auto e1 = world.endpoint(1);
  duo d;
  const std::size_t budget = quick ? (4u << 20) : (32u << 20);  // bytes per batch
  const int reps = static_cast<int>(std::clamp<std::size_t>(budget / bytes, 8, 512));
  const int batches = quick ? 3 : 11;
  const double target = bytes >= (1u << 20) ? 0.80 : 0.0;
  disttrain::bench::p2p_row w8{"stream w8", bytes, target, {}, {}};
  disttrain::bench::p2p_row rw8{"route w8", bytes, target, {}, {}};
  disttrain::bench::p2p_row rself{"route self", bytes, 0.0, {}, {}};
  const auto plan = one_message_route(bytes);
  disttrain::bench::p2p_row w1{"blocking", bytes, 0.0, {}, {}};
  disttrain::bench::p2p_row self{"self", bytes, 0.0, {}, {}};
  const bool small = bytes <= (64u << 10);
  disttrain::bench::p2p_row pp{"ping-pong", bytes, 0.0, {}, {}};
  const int pp_reps = quick ? 50 : 400;
  handoff h;
  for (int b = 0; b <= batches; ++b) {
    const double t8 = d.run([&] { stream(e0, src, reps, 8); }, [&] { stream(e1, dst, reps, 8); });
    const double m8 = d.run([&] { memcpy_reps(dst, src, reps); }, nullptr);
    const double r8 = d.run([&] { stream_routes(e0, plan, src, reps, 8); },
                            [&] { stream_routes(e1, plan, dst, reps, 8); });
    const double mr = d.run([&] { memcpy_reps(dst, src, reps); }, nullptr);
    const double rs = d.run(
        [&] {
          disttrain::buffer_pool pool;
          for (int i = 0; i < reps; ++i) {  // both ends on this thread: no hand-off
            disttrain::route_transfer<disttrain::local_backend> snd(e0, plan, pool, {.tag = 3});
            disttrain::route_transfer<disttrain::local_backend> rcv(e1, plan, pool, {.tag = 3});
            snd.start(src, {});
            rcv.start({}, dst);
            rcv.wait();
            snd.wait();
          }
        },
        nullptr);
    const double ms2 = d.run([&] { memcpy_reps(dst, src, reps); }, nullptr);
    const double t1 = d.run([&] { stream(e0, src, reps, 1); }, [&] { stream(e1, dst, reps, 1); });
    const double m1 = d.run([&] { memcpy_reps(dst, src, reps); }, nullptr);
    const double ts = d.run(
        [&] {
          for (int i = 0; i < reps; ++i) {
            auto r = e0.irecv(dst, 0, 2);
            auto q = e0.isend(src, 0, 2);
            e0.wait(q);
            e0.wait(r);
          }
        },
        nullptr);
    const double ms = d.run([&] { memcpy_reps(dst, src, reps); }, nullptr);
    if (b > 0) {  // batch 0 warms up buffers, threads and queues
      self.candidate_s.push_back(ts / reps);
      self.baseline_s.push_back(ms / reps);
      w8.candidate_s.push_back(t8 / reps);
      w8.baseline_s.push_back(m8 / reps);
      rw8.candidate_s.push_back(r8 / reps);
      rw8.baseline_s.push_back(mr / reps);
      rself.candidate_s.push_back(rs / reps);
      rself.baseline_s.push_back(ms2 / reps);
      w1.candidate_s.push_back(t1 / reps);
      w1.baseline_s.push_back(m1 / reps);
    }
    if (!small) continue;
    const double tp = d.run(
        [&] {
          for (int i = 0; i < pp_reps; ++i) {
            auto s = e0.isend(src, 1, 1);
            e0.wait(s);
            auto r = e0.irecv(echo, 1, 1);
            e0.wait(r);
          }
        },
        [&] {
          for (int i = 0; i < pp_reps; ++i) {
            auto r = e1.irecv(dst, 0, 1);
            e1.wait(r);
            auto s = e1.isend(dst, 0, 1);
            e1.wait(s);
          }
        });
    h.turn = 0;
    const double hp = d.run(
        [&] {
          for (int i = 0; i < pp_reps; ++i) {
            std::memcpy(dst.data(), src.data(), bytes);
            h.give(1);
            h.await(0);
          }
        },
        [&] {
          for (int i = 0; i < pp_reps; ++i) {
            h.await(1);
            std::memcpy(echo.data(), dst.data(), bytes);
            h.give(0);
          }
        });
    if (b > 0) {
      pp.candidate_s.push_back(tp / (2.0 * pp_reps));
      pp.baseline_s.push_back(hp / (2.0 * pp_reps));
    }
  }
  out.bandwidth.push_back(std::move(w8));
  out.bandwidth.push_back(std::move(rw8));
  out.bandwidth.push_back(std::move(w1));
  out.bandwidth.push_back(std::move(self));
  out.bandwidth.push_back(std::move(rself));
  if (small) out.latency.push_back(std::move(pp));
}

struct route_bench {
  std::string name;
  int samples;
  double plan_ms;
  std::int64_t crossing, minimum, fan_out;
  std::size_t messages;
};

route_bench bench_plan(const std::string& name, const disttrain::topology& L, int n, int dp_a,
                       int dp_b, std::int64_t hidden, bool quick) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  for (int s = 0; s < n; ++s)
    rows[static_cast<std::size_t>(s)] = 256 + (s * 7919) % 3840;  // 256..4095 tokens
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
  const double t = disttrain::bench::time_per_call(
      [&] { plan = disttrain::plan_boundary_route(L, 0, pa, pb, shape); }, quick ? 0.02 : 0.2, 3);
  return {name,
          n,
          t * 1e3,
          plan.phase_elements(0),
          plan.minimum_crossing_elements(),
          plan.phase_elements(1),
          plan.messages().size()};
}

struct exec_result {
  double route_s, memcpy_s;
  std::int64_t bytes;
};

// Executes a 2 -> 1 route (TP 1) on the local backend, 3 threads, rows split (zero copy).
exec_result bench_exec(bool quick) {
  const disttrain::topology L({{"enc", disttrain::module_role::encoder, 1, 1, 2},
                               {"llm", disttrain::module_role::backbone, 1, 1, 1}});
  const int n = 8;
  const std::int64_t hidden = quick ? 1024 : 4096;
  const disttrain::activation_shape shape{std::vector<std::int64_t>(n, quick ? 256 : 2048), hidden,
                                          2};
  const auto pa = disttrain::sample_placement::round_robin(n, 2);
  const auto pb = disttrain::sample_placement::round_robin(n, 1);
  const auto plan =
      disttrain::plan_boundary_route(L, 0, pa, pb, shape, {disttrain::split_axis::rows, true});
  const int reps = quick ? 3 : 10;
  std::vector<std::vector<std::byte>> src(3), dst(3);
  for (int r = 0; r < 3; ++r) {
    src[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(plan.source_elements(r)) * 2,
                                            std::byte{3});
    dst[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(plan.destination_elements(r)) *
                                            2);
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
        disttrain::run_route(ep, plan, src[static_cast<std::size_t>(r)],
                             dst[static_cast<std::size_t>(r)], pool,
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
  const std::vector<std::size_t> sizes =
      opt.quick ? std::vector<std::size_t>{4 << 10, 1 << 20}
                : std::vector<std::size_t>{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20,
                                           4 << 20, 16 << 20, 64 << 20, 256 << 20};
  local_rows p2p;
  for (std::size_t s : sizes) measure_p2p(s, opt.quick, p2p);
  std::vector<route_bench> plans;
  // Paper's worked example: encoder DP 2 TP 2 -> backbone stage DP 3 TP 4, 1172-GPU scale boundaries.
  plans.push_back(
      bench_plan("vit dp2 tp2 -> llm dp3 tp4",
                 disttrain::topology({{"vit", disttrain::module_role::encoder, 2, 1, 2},
                                      {"llm", disttrain::module_role::backbone, 4, 1, 3}}),
                 opt.quick ? 48 : 192, 2, 3, 5120, opt.quick));
  plans.push_back(
      bench_plan("llm dp16 tp8 -> gen dp48 tp1",
                 disttrain::topology({{"llm", disttrain::module_role::backbone, 8, 1, 16},
                                      {"gen", disttrain::module_role::generator, 1, 1, 48}}),
                 opt.quick ? 96 : 960, 16, 48, 8192, opt.quick));
  plans.push_back(
      bench_plan("vit dp64 tp1 -> llm dp12 tp8",
                 disttrain::topology({{"vit", disttrain::module_role::encoder, 1, 1, 64},
                                      {"llm", disttrain::module_role::backbone, 8, 1, 12}}),
                 opt.quick ? 96 : 960, 64, 12, 8192, opt.quick));
  const exec_result ex = bench_exec(opt.quick);

  if (opt.json) {
    nlohmann::json j;
    j["local_p2p"] = disttrain::bench::p2p_json("local", "memcpy", p2p.bandwidth);
    j["local_latency"] = disttrain::bench::p2p_json("local", "handoff", p2p.latency);
    for (const auto& p : plans)
      j["route_plan"].push_back({{"case", p.name},
                                 {"samples", p.samples},
                                 {"plan_ms", p.plan_ms},
                                 {"messages", p.messages},
                                 {"crossing_elements", p.crossing},
                                 {"minimum_elements", p.minimum},
                                 {"crossing_over_minimum",
                                  static_cast<double>(p.crossing) / static_cast<double>(p.minimum)},
                                 {"fan_out_elements", p.fan_out}});
    j["route_exec_local"] = {{"bytes", ex.bytes},
                             {"route_GBps", static_cast<double>(ex.bytes) / ex.route_s / 1e9},
                             {"memcpy_GBps", static_cast<double>(ex.bytes) / ex.memcpy_s / 1e9},
                             {"ratio_to_memcpy", ex.memcpy_s / ex.route_s}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  disttrain::bench::print_p2p_table(
      "local backend point-to-point vs memcpy between the same buffers (ratio = memcpy time / "
      "local time, median of paired batches)",
      "local", "memcpy", p2p.bandwidth);
  disttrain::bench::print_p2p_table(
      "\nlocal backend ping-pong latency (one way) vs a bare condition-variable hand-off + memcpy",
      "local", "handoff", p2p.latency);
  fmt::print("\nroute planning (bf16 activations, 256..4095 tokens per sample)\n");
  fmt::print("{:<32} {:>8} {:>10} {:>9} {:>18}\n", "case", "samples", "plan ms", "messages",
             "crossing/minimum");
  for (const auto& p : plans)
    fmt::print("{:<32} {:>8} {:>10.3f} {:>9} {:>18.3f}\n", p.name, p.samples, p.plan_ms, p.messages,
               static_cast<double>(p.crossing) / static_cast<double>(p.minimum));
  fmt::print("\nroute execution on the local backend (2 -> 1, rows split, {} MiB per route)\n",
             ex.bytes / (1 << 20));
  fmt::print("route {:.2f} GB/s, memcpy {:.2f} GB/s, ratio {:.2f}\n",
             static_cast<double>(ex.bytes) / ex.route_s / 1e9,
             static_cast<double>(ex.bytes) / ex.memcpy_s / 1e9, ex.memcpy_s / ex.route_s);
  return 0;
}
