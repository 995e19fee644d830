// Pipeline schedules side by side on the simulator: GPipe, 1F1B, interleaved
// 1F1B and ZB-H1 for 4 stages and 8 microbatches, first with equal stages
// (where each schedule's iteration time has a textbook closed form, checked
// here), then with a last stage 1.5x slower, as a generator-heavy pipeline.
// Prints each schedule's iteration time, bubble and peak activations, and
// the ZB-H1 timeline.
//
//   ./example_schedule_simulate
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "disttrain/schedule.hpp"
#include "disttrain/sim.hpp"
#include "disttrain/sim/format.hpp"

namespace {

constexpr int stages = 4, microbatches = 8;

// F, B (activation gradient) and W (weight gradient) seconds per stage; a
// schedule that does not split the backward runs B + W as its B.
disttrain::table_durations durations(const std::vector<double>& scale, bool split) {
  disttrain::table_durations d;
  d.forward.clear();
  d.backward.clear();
  d.weight.clear();
  for (double x : scale) {
    d.forward.push_back(1.0 * x);
    d.backward.push_back((split ? 1.0 : 2.0) * x);
    d.weight.push_back(split ? 1.0 * x : 0.0);
  }
  return d;
}

struct row {
  std::string name;
  disttrain::pipeline_schedule schedule;
  bool split;
  double closed_form;  // iteration time with equal stages of F = B = W = 1 s
};

}  // namespace

int main() {
  try {
    const int p = stages, m = microbatches;
    std::vector<row> rows;
    rows.push_back({"gpipe", disttrain::make_gpipe(p, m), false, (m + p - 1) * 3.0});
    rows.push_back({"1f1b", disttrain::make_1f1b(p, m), false, (m + p - 1) * 3.0});
    // Two chunks per device of half a stage each: the fill and drain shrink by half.
    rows.push_back({"interleaved v=2", disttrain::make_interleaved_1f1b(p, m, 2), false,
                    m * 3.0 + (p - 1) * 3.0 / 2});
    rows.push_back({"zb-h1", disttrain::make_zb_h1(p, m), true, (3.0 * m + p - 1) * 1.0});
    bool ok = true;
    for (const bool slow_last : {false, true}) {
      std::vector<double> scale(static_cast<std::size_t>(p), 1.0);
      if (slow_last) scale.back() = 1.5;
      std::printf("%s stages:\n%-16s %10s %10s %12s %14s\n", slow_last ? "last 1.5x" : "equal",
                  "schedule", "iteration", "bubble", "closed form", "peak act/rank");
      for (const auto& r : rows) {
        // Interleaved: the table gives one chunk's times, half of its device's layers.
        std::vector<double> per_op = scale;
        for (double& x : per_op) x /= r.schedule.num_chunks;
        const auto d = durations(per_op, r.split);
        const auto res = disttrain::simulate(disttrain::add_communication(r.schedule), d);
        double peak = 0;
        for (double a : res.peak_activation_bytes) peak = std::max(peak, a);
        std::printf("%-16s %9.2fs %9.1f%% ", r.name.c_str(), res.iteration_time,
                    100.0 * res.mean_bubble_fraction());
        if (slow_last)
          std::printf("%12s", "-");
        else
          std::printf("%11.2fs", r.closed_form);
        std::printf(" %14.1f\n", peak);
        if (!slow_last && std::abs(res.iteration_time - r.closed_form) > 1e-9) ok = false;
      }
      std::printf("\n");
    }
    const auto zb = disttrain::add_communication(rows.back().schedule);
    const auto res = disttrain::simulate(zb, durations({1, 1, 1, 1.5}, true));
    std::printf(
        "zb-h1 timeline, last stage 1.5x (F forward, B activation grad, W weight grad):\n%s",
        disttrain::format_timeline(zb, res, 90).c_str());
    if (!ok) std::fprintf(stderr, "a simulated time differs from its closed form\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
