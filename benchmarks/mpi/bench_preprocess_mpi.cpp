// Disaggregated preprocessing benchmark (issue 17): one trainer rank runs the
// same workload four ways in the same run (and `none` again at the end),
//   none     no preprocessing at all (the compute-only reference),
//   inline   the trainer decodes / resizes / patchifies / tokenizes its batch itself,
//   threads  producer threads inside the trainer's process (data/preprocess_pipeline.hpp),
//   ranks    producer ranks (data/producer_ranks.hpp): every other rank of the job,
//   none-end `none` again: the two `none` rows bound how far the machine's
//            speed drifted during the run,
// and reports per way the exposed data wait per iteration, the trainer's
// compute time per iteration and samples/s.
//
//   mpirun --oversubscribe -np 2 bench_preprocess_mpi [--json] [--quick]
//   (smoke test mpi.bench_smoke.bench_preprocess_mpi.np2 runs --quick)
//
// Cores: the trainer rank pins itself to the first CPU it may use and every
// producer rank to the second (sched_setaffinity, before any thread starts,
// so the pipeline's producer threads inherit the trainer's single CPU: that
// is the contention the issue is about). With one CPU nothing is pinned and
// the table says so.
// Workload: a batch of 16 samples (quick: 8); a sample is a real JPEG of
// 160..320 px per side (tests/data/jpeg_corpus.hpp, generated at start) and
// an 8..40-word caption; preparing it = libturbojpeg decode, bilinear resize
// to 224 px, 14 px patches (256 x 588 floats), a 16 x 16 grey target, hashed
// tokens. The trainer's compute per iteration is a fixed number of passes of
// a multiply-add over a 256 KiB float array (the core's private L2),
// calibrated once to ~60 ms (quick: 20 ms) on an idle trainer CPU. A warm-up
// iteration is not counted; per-iteration times are medians.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/data/jpeg.hpp"
#include "disttrain/data/preprocess_pipeline.hpp"
#include "disttrain/data/producer_ranks.hpp"
#include "harness.hpp"
#include "jpeg_corpus.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Pins this process to the `index`-th CPU it may use; returns that CPU, or -1
// when there are fewer than two (nothing pinned).
int pin_to(std::size_t index) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return -1;
  std::vector<std::size_t> cpus;
  for (std::size_t c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const std::size_t cpu = cpus[std::min(index, cpus.size() - 1)];
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0 ? static_cast<int>(cpu) : -1;
}

// The trainer's compute: `passes` multiply-adds over a 256 KiB array. It fits
// the core's private L2: a trainer's host-side step is kernel launches and
// bookkeeping over a small working set (its GPU does the math), so what the
// modes differ in is CPU time taken from the trainer, not the L3 this one
// machine's two cores share (producers on other nodes share none).
struct trainer_compute {
  std::vector<float> data = std::vector<float>(1 << 16, 1.0f);
  std::size_t passes = 1;
  void operator()(float input) {
    for (std::size_t p = 0; p < passes; ++p)
      for (auto& x : data) x = x * 0.999f + input * 1e-6f;
    disttrain::bench::do_not_optimize(data[0]);
  }
  // Sets `passes` so that one call takes ~target_s: the fastest of 5 timed
  // probes after 0.5 s of warm-up (the first calls run on a cold cache and clock).
  void calibrate(double target_s) {
    constexpr std::size_t probe = 64;
    passes = probe;
    const auto warm = clock_type::now();
    while (since(warm) < 0.5) (*this)(0.0f);
    double best = 1e300;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = clock_type::now();
      (*this)(0.0f);
      best = std::min(best, since(t0));
    }
    passes = std::max<std::size_t>(
        1, static_cast<std::size_t>(static_cast<double>(probe) * target_s / best));
  }
};

struct mode_result {
  std::string mode;
  double wait_ms = 0, compute_ms = 0, samples_per_s = 0;
};

float touch(const disttrain::image_text_item& it) { return it.patches[0] + it.target[0]; }
float touch(const std::vector<disttrain::received_part>& parts) {
  float s = 0;
  for (const auto& p : parts) s += static_cast<float>(p.bytes.size());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  const auto opt = disttrain::bench::parse_options(argc, argv);
  disttrain::mpi_backend b(MPI_COMM_WORLD, {std::chrono::seconds(120)});
  const bool trainer = b.rank() == 0;
  const int cpu = pin_to(trainer ? 0 : 1);

  const std::size_t batch = opt.quick ? 8 : 16;
  const std::uint64_t iters = opt.quick ? 3 : 12;
  const std::uint64_t batches = iters + 1;  // + warm-up
  const disttrain::test::jpeg_corpus corpus(batch * batches);
  const disttrain::image_text_source src(corpus.fetch());
  const disttrain::batch_sampler sampler = [batch](std::uint64_t k) {
    std::vector<std::uint64_t> ids(batch);
    for (std::size_t i = 0; i < batch; ++i) ids[i] = k * batch + i;
    return ids;
  };
  trainer_compute compute;
  // Every rank has its corpus before the trainer calibrates: nothing else of
  // this job runs during the calibration or the `none` reference.
  MPI_Barrier(MPI_COMM_WORLD);
  if (trainer) compute.calibrate(opt.quick ? 0.020 : 0.060);

  std::vector<mode_result> results;
  // Runs `iteration(k, wait)` for every batch; the warm-up batch 0 is not
  // counted. Wait and compute are medians over the iterations (the machine
  // may be shared), samples/s is over the whole loop.
  auto measure = [&](const std::string& name, auto&& iteration) {
    std::vector<double> waits, computes;
    clock_type::time_point start;
    for (std::uint64_t k = 0; k < batches; ++k) {
      if (k == 1) start = clock_type::now();
      double wait = 0;
      const float input = iteration(k, wait);
      const auto t0 = clock_type::now();
      compute(input);
      if (k == 0) continue;
      computes.push_back(since(t0) * 1e3);
      waits.push_back(wait * 1e3);
    }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    results.push_back(
        {name, median(waits), median(computes), static_cast<double>(batch * iters) / since(start)});
  };

  if (trainer) {
    measure("none", [&](std::uint64_t, double&) { return 1.0f; });
    measure("inline", [&](std::uint64_t k, double& wait) {
      const auto t0 = clock_type::now();
      float s = 0;
      for (auto id : sampler(k)) s += touch(src.load(id));
      wait = since(t0);
      return s;
    });
    {
      disttrain::preprocess_config pc;
      pc.producers = 2;
      pc.max_batches_ahead = 2;
      disttrain::preprocess_pipeline<disttrain::image_text_source> pipe(src, pc);
      pipe.submit(0, sampler(0));
      pipe.submit(1, sampler(1));
      measure("threads", [&](std::uint64_t k, double& wait) {
        pipe.reset_exposed_wait();
        (void)pipe.metadata(k);
        pipe.assign(k, {sampler(k)});
        float s = 0;
        for (std::size_t i = 0; i < batch; ++i) s += touch(pipe.next(0));
        wait = pipe.exposed_wait_seconds();
        if (k + 2 < batches) pipe.submit(k + 2, sampler(k + 2));
        return s;
      });
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);

  disttrain::producer_ranks_config cfg;
  cfg.consumers = {0};
  for (int r = 1; r < b.size(); ++r) cfg.producers.push_back(r);
  cfg.prefetch = 2;
  double producer_prepare_s = 0;
  if (b.size() > 1) {
    if (trainer) {
      disttrain::sample_feed<disttrain::mpi_backend, disttrain::image_text_source> feed(b, src, cfg,
                                                                                        sampler);
      measure("ranks", [&](std::uint64_t k, double& wait) {
        feed.reset_exposed_wait();
        std::vector<disttrain::sample_request> want;
        for (const auto& rec : feed.metadata(k).samples)
          for (std::uint32_t p = 0; p < 3; ++p) want.push_back({rec.id, p});
        const float s = touch(feed.fetch(k, want));
        wait = feed.exposed_wait_seconds();
        return s;
      });
    } else {
      disttrain::sample_producer<disttrain::mpi_backend, disttrain::image_text_source> prod(
          b, src, cfg, sampler);
      prod.run(0, batches);
      producer_prepare_s = prod.prepare_seconds();
    }
  }
  // The compute-only reference again, last: the gap between the two `none`
  // rows is how far this machine's speed drifted during the run, the noise
  // floor of every ratio below.
  if (trainer) measure("none-end", [&](std::uint64_t, double&) { return 1.0f; });
  double max_prepare = 0;
  MPI_Reduce(&producer_prepare_s, &max_prepare, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (!trainer) return 0;

  const auto find = [&](const std::string& m) {
    for (const auto& r : results)
      if (r.mode == m) return r;
    return mode_result{m};
  };
  const auto none = find("none"), none_end = find("none-end"), in = find("inline"),
             ranks = find("ranks");
  const double wait_ratio = in.wait_ms > 0 ? ranks.wait_ms / in.wait_ms : 0;
  // The reference is the mean of the two compute-only runs; the drift is
  // their difference relative to it.
  const double reference_ms = (none.compute_ms + none_end.compute_ms) / 2;
  const double compute_ratio = reference_ms > 0 ? ranks.compute_ms / reference_ms : 0;
  const double drift =
      reference_ms > 0 ? std::abs(none.compute_ms - none_end.compute_ms) / reference_ms : 0;
  const std::string pinning =
      cpu < 0 ? std::string("not pinned (fewer than 2 CPUs)")
              : fmt::format("trainer on CPU {}, {} producer rank(s) on the next CPU", cpu,
                            b.size() - 1);
  if (opt.json) {
    nlohmann::json j;
    j["batch"] = batch;
    j["iterations"] = iters;
    j["producer_ranks"] = b.size() - 1;
    j["pinning"] = pinning;
    for (const auto& r : results)
      j["modes"][r.mode] = {{"exposed_wait_ms", r.wait_ms},
                            {"compute_ms", r.compute_ms},
                            {"samples_per_s", r.samples_per_s}};
    j["ranks_wait_over_inline"] = wait_ratio;
    j["ranks_compute_over_none"] = compute_ratio;
    j["none_drift"] = drift;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  fmt::print(
      "bench_preprocess_mpi: batch {} samples (JPEG 160..320 px -> 224 px, 14 px patches, "
      "tokens), {} iterations, {}\n",
      batch, iters, pinning);
  fmt::print("  {:<9} {:>22} {:>20} {:>11}\n", "mode", "exposed wait ms/iter", "compute ms/iter",
             "samples/s");
  for (const auto& r : results)
    fmt::print("  {:<9} {:>22.2f} {:>20.2f} {:>11.1f}\n", r.mode, r.wait_ms, r.compute_ms,
               r.samples_per_s);
  if (b.size() > 1) {
    fmt::print(
        "ranks: exposed wait {:.1f}% of inline's (goal <= 5%), compute {:.1f}% of none's "
        "(goal within 5%; none drifted {:.1f}% between its two runs)\n",
        100 * wait_ratio, 100 * compute_ratio, 100 * drift);
    fmt::print("producer ranks' CPU work: {:.1f} ms per batch (slowest producer)\n",
               max_prepare * 1e3 / static_cast<double>(batches));
  }
  return 0;
}
