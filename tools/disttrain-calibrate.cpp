// disttrain-calibrate: fit the efficiency curve to published training runs and
// print the fidelity table (docs/cost_model.md, "Fidelity against published runs").
//
//   disttrain-calibrate                               # data/published_runs.json, every hardware
//   disttrain-calibrate --runs FILE.json --hardware a100
//   disttrain-calibrate --no-fit                      # score with the shipped defaults only
//
// For each hardware it fits one efficiency curve to the runs marked "fit",
// starting from the shipped defaults (`calibrated_cost_params`), and
// prints every run (fitted and held out): published, predicted, error.
// Exit status: 0 on success, 1 on bad input, 2 on a usage error.
#include <cmath>
#include <cstdio>
#include <exception>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/error.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/plan/fidelity.hpp"

namespace {

void print_table(const std::vector<disttrain::published_run>& runs, const std::string& hw,
                 const disttrain::cost_params& params) {
  std::printf(
      "| run | split | layout (TP/PP/DP[ vV], mb, batch) | recompute | published | predicted | "
      "error | "
      "bubble | exposed sync |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : runs) {
    if (r.hardware != hw) continue;
    const auto s = disttrain::score_run(r, params);
    // MFU as a percentage, TFLOP/s per GPU, or seconds per iteration.
    const bool mfu = r.metric == "mfu", time = r.metric == "iteration_s";
    const double scale = mfu ? 100 : 1;
    const char* unit = mfu ? "% MFU" : time ? " s/iter" : " TFLOP/s";
    std::printf(
        "| %s | %s | %d/%d/%d%s, %d, %d | %s | %.*f%s | %.*f%s | %+.1f%% | %.1f%% | %.1f%% |\n",
        r.id.c_str(), r.split == "fit" ? "fitted" : "held out", r.tp, r.pp, r.dp,
        r.virtual_stages > 1 ? (" v" + std::to_string(r.virtual_stages)).c_str() : "", r.microbatch,
        r.global_batch, r.recompute.c_str(), time ? 3 : 1, scale * r.published, unit, time ? 3 : 1,
        scale * s.predicted, unit, 100 * s.relative_error, 100 * s.evaluation.bubble_fraction,
        100 * s.evaluation.sync_time_s / s.evaluation.iteration_time_s);
  }
}

int run(int argc, char** argv) {
  std::string path = DISTTRAIN_DEFAULT_RUNS;
  std::string only;
  bool fit = true;
  // The op sizes of the published runs (>= 1e11 FLOPs per GPU) do not pin
  // flops_half: by default it keeps its prior and e_max, tp_penalty are fitted.
  disttrain::fit_options free{.flops_half = false};
  double start_e_max = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      path = argv[++i];
    } else if (a == "--hardware" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--free" && i + 1 < argc) {
      const std::string_view f = argv[++i];
      free.e_max = f.find("e_max") != std::string_view::npos;
      free.flops_half = f.find("flops_half") != std::string_view::npos;
      free.tp_penalty = f.find("tp_penalty") != std::string_view::npos;
    } else if (a == "--e-max" && i + 1 < argc) {
      start_e_max = std::stod(argv[++i]);
    } else if (a == "--no-fit") {
      fit = false;
    } else {
      std::fprintf(stderr,
                   "usage: disttrain-calibrate [--runs FILE.json] [--hardware NAME] [--no-fit]"
                   " [--free e_max,flops_half,tp_penalty] [--e-max X]\n");
      return 2;
    }
  }
  const auto runs = disttrain::read_published_runs(disttrain::read_json_file(path));
  std::set<std::string> hardware;
  for (const auto& r : runs)
    if (only.empty() || r.hardware == only) hardware.insert(r.hardware);
  for (const auto& hw : hardware) {
    const disttrain::cost_params shipped = disttrain::calibrated_cost_params(hw);
    const auto& e0 = shipped.efficiency_for(disttrain::module_role::backbone);
    std::printf("## %s\nshipped: e_max %.4f, flops_half %.4g, tp_penalty %.4f\n", hw.c_str(),
                e0.e_max, e0.flops_half, e0.tp_penalty);
    disttrain::cost_params params = shipped;
    if (fit) {
      std::vector<disttrain::published_run> mine;
      for (const auto& r : runs)
        if (r.hardware == hw) mine.push_back(r);
      bool any = false;
      for (const auto& r : mine) any = any || r.split == "fit";
      disttrain::efficiency_params start = e0;
      if (start_e_max > 0) start.e_max = start_e_max;
      if (any) {
        const auto f = disttrain::fit_runs(mine, shipped, start, free);
        params = disttrain::with_efficiency(shipped, f.params);
        std::printf(
            "fitted on %zu runs: e_max %.4f, flops_half %.4g, tp_penalty %.4f "
            "(max |error| %.1f%%, RMS %.1f%%)\n",
            f.runs, f.params.e_max, f.params.flops_half, f.params.tp_penalty, 100 * f.max_abs_error,
            100 * f.rms_error);
      }
    }
    print_table(runs, hw, params);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttrain-calibrate: %s\n", e.what());
    return 1;
  }
}
