#pragma once
// A small benchmark harness of our own (see docs/benchmarks.md for why not
// Google Benchmark): every benchmark binary measures a baseline and a
// candidate in the same run, reports the ratio, and prints either a table or
// one JSON object (--json). --quick shrinks the problem for the ctest smoke run.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace disttrain::bench {

struct options {
  bool json = false;   ///< print one JSON object instead of a table
  bool quick = false;  ///< small sizes, few repetitions (smoke test)
};

inline options parse_options(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a(argv[i]);
    if (a == "--json")
      o.json = true;
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--help" || a == "-h") {
      std::printf("usage: %s [--json] [--quick]\n", argv[0]);
      std::exit(0);
    } else {
      std::fprintf(stderr, "unknown argument: %s (try --help)\n", argv[i]);
      std::exit(2);
    }
  }
  return o;
}

/// This thread's CPU time in seconds (POSIX CLOCK_THREAD_CPUTIME_ID): on a
/// shared machine, what a call costs whatever the load (wall time grows with it).
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// Runs `fn` repeatedly for at least `min_seconds` (and `min_reps` times);
/// returns the median seconds per call over `samples` batches. With `cpu`,
/// also stores the median CPU seconds per call of the calling thread.
inline double time_per_call(const std::function<void()>& fn, double min_seconds = 0.2,
                            int samples = 5, double* cpu = nullptr) {
  using clock = std::chrono::steady_clock;
  // Calibrate reps per sample.
  long reps = 1;
  for (;;) {
    auto t0 = clock::now();
    for (long i = 0; i < reps; ++i) fn();
    double dt = std::chrono::duration<double>(clock::now() - t0).count();
    if (dt >= min_seconds / samples || reps > (1L << 30)) break;
    reps *= 2;
  }
  std::vector<double> per, per_cpu;
  for (int s = 0; s < samples; ++s) {
    const double c0 = thread_cpu_seconds();
    auto t0 = clock::now();
    for (long i = 0; i < reps; ++i) fn();
    per.push_back(std::chrono::duration<double>(clock::now() - t0).count() /
                  static_cast<double>(reps));
    per_cpu.push_back((thread_cpu_seconds() - c0) / static_cast<double>(reps));
  }
  std::sort(per.begin(), per.end());
  std::sort(per_cpu.begin(), per_cpu.end());
  if (cpu != nullptr) *cpu = per_cpu[per_cpu.size() / 2];
  return per[per.size() / 2];
}

/// 1-minute load average (-1 if unknown): wall times grow with it on a shared machine.
inline double load_average() {
  double l = -1.0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1.0;
    std::fclose(f);
  }
  return l;
}

/// Keeps a value alive so the optimiser cannot drop the computation.
template <class T>
inline void do_not_optimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

}  // namespace disttrain::bench
