// Executor benchmark: (1) iteration time with communication/compute overlap
// on vs off, on a synthetic 1F1B workload whose communication time equals its
// compute time (ideal ratio 0.5); (2) exposed data wait with disaggregated
// producers (preprocess_pipeline) vs inline preprocessing on the trainer.
//
// Workload model (stated, because the machine has 2 CPU cores and no GPU):
// - compute ops are timed waits of the trainer thread (a GPU kernel the host
//   waits for), so ranks do not compete for the two cores;
// - every transfer crosses a modelled link (`link_model_backend`, wrapping
//   the in-process backend): a message occupies its directed link for
//   bytes / bandwidth and arrives `latency` later, like a NIC or copy-engine
//   transfer that progresses without the CPU. Sends are eager (complete when
//   the bytes have left), so the naive executor (overlap off: wait for every
//   send, post every receive at its op) runs the same schedule without the
//   rendezvous deadlock it would hit on a real transport.
// So the ratio measures the executor's scheduling (receives posted ahead,
// asynchronous sends), not the host's copy speed.
//
//   bench_exec [--json] [--quick]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "disttrain/comm/local_backend.hpp"
#include "disttrain/data/preprocess_pipeline.hpp"
#include "disttrain/exec.hpp"
#include "disttrain/exec/trace.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/gpipe.hpp"
#include "disttrain/schedule/one_f_one_b.hpp"
#include "disttrain/schedule/validate.hpp"
#include "disttrain/sim/simulator.hpp"
#include "exec_workload.hpp"
#include "harness.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Waits until `t` without using a core (timer sleeps overshoot by tens to
// hundreds of microseconds, hence millisecond-scale ops; spinning instead
// would make the ranks compete for the two cores).
void wait_until(clock_type::time_point t) { std::this_thread::sleep_until(t); }
void wait_for(clock_type::duration d) { wait_until(clock_type::now() + d); }

// ---- a comm_backend adapter that models a link ------------------------------
template <disttrain::comm_backend B>
class link_model_backend {
 public:
  static constexpr disttrain::memory_space memory = disttrain::memory_space::host;
  struct link {
    double latency_s = 20e-6;
    double bytes_per_s = 1e9;
  };

  class request {
   public:
    request() = default;
    request(request&&) noexcept = default;
    request& operator=(request&&) noexcept = default;

   private:
    friend class link_model_backend;
    bool is_send = true;
    clock_type::time_point due{};  // send: bytes left; recv: bytes arrived (read from the header)
    typename B::request inner;     // recv only
    std::shared_ptr<std::vector<std::byte>> staging;  // recv: header + payload
    std::span<std::byte> dst;
    bool inner_done = false;
    bool done = false;
  };

  link_model_backend(B& inner, link l)
      : inner_(&inner), link_(l), free_(static_cast<std::size_t>(inner.size())) {}
  link_model_backend(const link_model_backend&) = delete;
  link_model_backend& operator=(const link_model_backend&) = delete;
  ~link_model_backend() {
    for (auto& f : inflight_)
      if (!f.done) inner_->wait(f.req);
  }

  [[nodiscard]] int rank() const { return inner_->rank(); }
  [[nodiscard]] int size() const { return inner_->size(); }
  [[nodiscard]] const disttrain::comm_options& options() const { return inner_->options(); }

  request isend(std::span<const std::byte> data, int peer, int tag) {
    reap();
    const auto now = clock_type::now();
    auto& free = free_.at(static_cast<std::size_t>(peer));
    const auto start = std::max(now, free);
    const auto leave = start + seconds(static_cast<double>(data.size()) / link_.bytes_per_s);
    free = leave;
    const auto arrive = leave + seconds(link_.latency_s);
    auto staging = std::make_shared<std::vector<std::byte>>(sizeof(std::int64_t) + data.size());
    const std::int64_t stamp = arrive.time_since_epoch().count();
    std::memcpy(staging->data(), &stamp, sizeof stamp);
    if (!data.empty()) std::memcpy(staging->data() + sizeof stamp, data.data(), data.size());
    inflight_.push_back({staging, inner_->isend(*staging, peer, tag), false});
    request r;
    r.is_send = true;
    r.due = leave;
    return r;
  }

  request irecv(std::span<std::byte> data, int peer, int tag) {
    request r;
    r.is_send = false;
    r.staging = std::make_shared<std::vector<std::byte>>(sizeof(std::int64_t) + data.size());
    r.inner = inner_->irecv(*r.staging, peer, tag);
    r.dst = data;
    return r;
  }

  void wait(request& r) { wait(r, options().timeout); }
  void wait(request& r, std::chrono::milliseconds timeout) {
    const auto deadline = clock_type::now() + timeout;
    if (!r.is_send && !r.inner_done) {
      inner_->wait(r.inner, timeout);
      arrived(r);
    }
    if (r.due > deadline) {
      wait_until(deadline);
      disttrain::fail(disttrain::errc::timeout, disttrain::cat("rank ", rank(), " link"),
                      "transfer does not complete within ", timeout.count(), " ms");
    }
    wait_until(r.due);
    finish(r);
  }
  bool test(request& r) {
    if (r.done) return true;
    if (!r.is_send && !r.inner_done) {
      if (!inner_->test(r.inner)) return false;
      arrived(r);
    }
    if (clock_type::now() < r.due) return false;
    finish(r);
    return true;
  }
  void group_start() {}
  void group_end() {}
  void barrier() { inner_->barrier(); }
  void broadcast(std::span<std::byte> d, int root) { inner_->broadcast(d, root); }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
    inner_->allgather(mine, all);
  }

 private:
  struct flight {
    std::shared_ptr<std::vector<std::byte>> staging;
    typename B::request req;
    bool done = false;
  };
  static clock_type::duration seconds(double s) {
    return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
  }
  void arrived(request& r) {
    r.inner_done = true;
    std::int64_t stamp = 0;
    std::memcpy(&stamp, r.staging->data(), sizeof stamp);
    r.due = clock_type::time_point(clock_type::duration(stamp));
  }
  void finish(request& r) {
    if (!r.is_send && !r.done && !r.dst.empty())
      std::memcpy(r.dst.data(), r.staging->data() + sizeof(std::int64_t), r.dst.size());
    r.done = true;
  }
  void reap() {
    for (auto& f : inflight_)
      if (!f.done && inner_->test(f.req)) f.done = true;
    while (!inflight_.empty() && inflight_.front().done) inflight_.pop_front();
  }

  B* inner_;
  link link_;
  std::vector<clock_type::time_point> free_;
  std::deque<flight> inflight_;
};

// ---- (1) overlap on vs off ---------------------------------------------------
// F and B = 2F as timed sleeps (see exec_workload.hpp).
struct sleep_compute {
  void operator()(clock_type::duration d) const { wait_for(d); }
};
using sleep_host = disttrain::bench::synthetic_host<sleep_compute>;

struct overlap_result {
  double on_s = 0, off_s = 0, compute_s = 0, comm_s = 0;
  double sim_on_s = 0, sim_off_s = 0;  // the simulator's prediction for the same workload
};

overlap_result bench_overlap(const disttrain::pipeline_schedule& compute_only,
                             std::chrono::microseconds t_forward, int reps) {
  const auto s = disttrain::add_grad_sync(disttrain::add_communication(compute_only));
  disttrain::validate_schedule(s);
  const int stages = s.num_stages, microbatches = s.num_microbatches;
  // Comparable communication: an activation message occupies its link as
  // long as the forward pass that produced it, a gradient message as long as
  // its backward pass (twice): per rank, link time = compute time.
  const std::size_t bytes = 1 << 16;
  typename link_model_backend<disttrain::local_backend>::link l;
  l.latency_s = 20e-6;
  l.bytes_per_s = static_cast<double>(bytes) / std::chrono::duration<double>(t_forward).count();
  overlap_result res;
  res.compute_s = 3.0 * std::chrono::duration<double>(t_forward).count() * microbatches;
  res.comm_s = 3.0 * static_cast<double>(bytes) / l.bytes_per_s *
               microbatches;  // per middle rank: act + grad out
  // The simulator's view: each message occupies its link like the op that
  // produced it, plus the latency.
  const double f = std::chrono::duration<double>(t_forward).count();
  const disttrain::bench::synthetic_durations d{f, f + l.latency_s, 2 * f + l.latency_s};
  res.sim_on_s = disttrain::simulate(s, d).iteration_time;
  res.sim_off_s = disttrain::simulate(s, d, {.overlap_comm = false}).iteration_time;
  const disttrain::bound_world w = disttrain::bench::synthetic_programs(s, bytes);
  for (bool overlap : {true, false}) {
    std::vector<double> times;
    for (int rep = 0; rep < reps; ++rep) {
      disttrain::local_world world(stages, {std::chrono::seconds(30)});
      std::vector<double> per_rank(static_cast<std::size_t>(stages));
      std::vector<std::thread> th;
      for (int r = 0; r < stages; ++r)
        th.emplace_back([&, r] {
          auto inner = world.endpoint(r);
          link_model_backend<disttrain::local_backend> b(inner, l);
          sleep_host h{t_forward};
          disttrain::executor<link_model_backend<disttrain::local_backend>> ex(
              b, {.overlap = overlap, .record = false});
          b.barrier();
          per_rank[static_cast<std::size_t>(r)] =
              ex.run(w.programs[static_cast<std::size_t>(r)], h).iteration_seconds;
        });
      for (auto& t : th) t.join();
      times.push_back(*std::max_element(per_rank.begin(), per_rank.end()));
    }
    std::sort(times.begin(), times.end());
    (overlap ? res.on_s : res.off_s) = times[times.size() / 2];
  }
  return res;
}

// ---- (2) exposed data wait: producers vs inline ------------------------------
struct slow_source {
  using item_type = std::vector<float>;
  using meta_type = std::size_t;
  std::chrono::microseconds decode_time;
  item_type load(std::uint64_t id) const {
    wait_for(decode_time);  // load + decode + augment + tokenize
    return item_type(64, static_cast<float>(id));
  }
  meta_type meta(const item_type& x) const { return x.size(); }
};

struct data_result {
  double inline_wait_s = 0, producer_wait_s = 0;  // per iteration
};

data_result bench_data(int iterations, int samples, std::chrono::microseconds decode,
                       std::chrono::microseconds compute, std::size_t producers) {
  slow_source src{decode};
  data_result res;
  // Inline: the trainer prepares each sample itself when it needs it.
  {
    double wait = 0;
    for (int k = 0; k < iterations; ++k) {
      for (int i = 0; i < samples; ++i) {
        const auto t0 = clock_type::now();
        auto x = src.load(static_cast<std::uint64_t>(k * samples + i));
        wait += std::chrono::duration<double>(clock_type::now() - t0).count();
        disttrain::bench::do_not_optimize(x.front());
      }
      wait_for(compute);
    }
    res.inline_wait_s = wait / iterations;
  }
  // Disaggregated: producers prepare batch k+1 while the trainer runs batch k.
  {
    disttrain::preprocess_pipeline<slow_source> pipe(src, {.producers = producers, .consumers = 1});
    auto ids = [&](int k) {
      std::vector<std::uint64_t> v;
      for (int i = 0; i < samples; ++i) v.push_back(static_cast<std::uint64_t>(k * samples + i));
      return v;
    };
    pipe.submit(0, ids(0));
    pipe.reset_exposed_wait();
    double wait = 0;
    for (int k = 0; k < iterations; ++k) {
      if (k + 1 < iterations) pipe.submit(static_cast<std::uint64_t>(k + 1), ids(k + 1));
      (void)pipe.metadata(static_cast<std::uint64_t>(k));  // what the reorderer needs
      pipe.assign(static_cast<std::uint64_t>(k), {ids(k)});
      for (int i = 0; i < samples; ++i) disttrain::bench::do_not_optimize(pipe.next(0).front());
      wait_for(compute);
    }
    wait = pipe.exposed_wait_seconds();
    res.producer_wait_s = wait / iterations;
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opts = disttrain::bench::parse_options(argc, argv);
  const int stages = 4, microbatches = opts.quick ? 4 : 32, reps = opts.quick ? 1 : 3;
  const auto t_forward = opts.quick ? 500us : 2000us;
  struct row {
    const char* schedule;
    overlap_result r;
  };
  // GPipe keeps every transfer off the critical path once the pipeline is
  // full, so the ideal is on/off = 0.5. 1F1B's warm-up (p - s - 1 forwards)
  // does not cover a link time as long as the compute: its round trips stay
  // on the critical path whatever the executor does (a schedule property;
  // more warm-up microbatches would be needed).
  const std::vector<row> rows{
      {"gpipe", bench_overlap(disttrain::make_gpipe(stages, microbatches), t_forward, reps)},
      {"1f1b", bench_overlap(disttrain::make_1f1b(stages, microbatches), t_forward, reps)}};
  const int iters = opts.quick ? 3 : 10, samples = 16;
  const auto decode = opts.quick ? 200us : 1000us;
  const auto compute =
      std::chrono::microseconds(decode.count() * samples / 2);  // 4 producers: decode < compute
  const auto dw = bench_data(iters, samples, decode, compute, 4);
  const double data_ratio = dw.producer_wait_s / dw.inline_wait_s;
  if (opts.json) {
    nlohmann::json ov = nlohmann::json::array();
    for (const auto& x : rows)
      ov.push_back({{"schedule", x.schedule},
                    {"stages", stages},
                    {"microbatches", microbatches},
                    {"forward_ms", std::chrono::duration<double, std::milli>(t_forward).count()},
                    {"compute_ms_per_rank", x.r.compute_s * 1e3},
                    {"link_ms_per_rank", x.r.comm_s * 1e3},
                    {"iteration_ms_overlap_on", x.r.on_s * 1e3},
                    {"iteration_ms_overlap_off", x.r.off_s * 1e3},
                    {"ratio_on_over_off", x.r.on_s / x.r.off_s},
                    {"simulated_ms_on", x.r.sim_on_s * 1e3},
                    {"simulated_ms_off", x.r.sim_off_s * 1e3},
                    {"simulated_ratio", x.r.sim_on_s / x.r.sim_off_s},
                    {"ideal_ratio", 0.5}});
    nlohmann::json j{
        {"benchmark", "exec"},
        {"backend", "local (threads) + modelled links"},
        {"overlap", std::move(ov)},
        {"data_wait",
         {{"samples_per_iteration", samples},
          {"decode_ms_per_sample", std::chrono::duration<double, std::milli>(decode).count()},
          {"compute_ms_per_iteration", std::chrono::duration<double, std::milli>(compute).count()},
          {"producers", 4},
          {"inline_ms_per_iteration", dw.inline_wait_s * 1e3},
          {"producers_ms_per_iteration", dw.producer_wait_s * 1e3},
          {"ratio_producers_over_inline", data_ratio}}}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print(
        "overlap: {} stages, {} microbatches, F {:.1f} ms, B 2F; per rank compute = link time "
        "(ideal on/off 0.5)\n",
        stages, microbatches, std::chrono::duration<double, std::milli>(t_forward).count());
    fmt::print("  {:8s} {:>10s} {:>10s} {:>8s} | simulated {:>8s} {:>8s} {:>8s}\n", "schedule",
               "on (ms)", "off (ms)", "on/off", "on", "off", "on/off");
    for (const auto& x : rows)
      fmt::print("  {:8s} {:10.2f} {:10.2f} {:8.3f} |           {:8.2f} {:8.2f} {:8.3f}\n",
                 x.schedule, x.r.on_s * 1e3, x.r.off_s * 1e3, x.r.on_s / x.r.off_s,
                 x.r.sim_on_s * 1e3, x.r.sim_off_s * 1e3, x.r.sim_on_s / x.r.sim_off_s);
    fmt::print(
        "data wait: {} samples/iteration, decode {:.1f} ms each, trainer compute {:.1f} "
        "ms/iteration\n",
        samples, std::chrono::duration<double, std::milli>(decode).count(),
        std::chrono::duration<double, std::milli>(compute).count());
    fmt::print(
        "  inline preprocessing   {:8.3f} ms exposed per iteration\n  4 producer threads     "
        "{:8.3f} ms exposed "
        "per iteration\n  ratio producers/inline {:.4f}\n",
        dw.inline_wait_s * 1e3, dw.producer_wait_s * 1e3, data_ratio);
  }
  return 0;
}
