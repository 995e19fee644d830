// Cost model tour: presets, expected workloads, stage times and memory, a memory
// check, and calibrating the efficiency curve from (synthetic) measurements.
#include <fmt/format.h>

#include "disttrain/cost.hpp"
#include "disttrain/cost/format.hpp"
#include "disttrain/cost/profiler.hpp"
#include "disttrain/model.hpp"
#include "disttrain/model/format.hpp"

int main() {
  using namespace disttrain;
  const auto sc = presets::scenario_preset("paper-72b");
  fmt::print("{}{}", format_model(sc.model), format_cluster(sc.cluster));

  const analytic_cost_model cm(sc.model, sc.cluster);
  const auto per_sample = expected_workload(sc.model, sc.data);  // Monte-Carlo, fixed seed
  const auto mb = per_sample * 2.0;                              // 2 samples per microbatch
  fmt::print(
      "expected per sample: {:.0f} image tokens, {:.0f} backbone tokens, {:.0f} latent tokens\n",
      per_sample[0].tokens, per_sample[1].tokens, per_sample[2].tokens);

  // Backbone in 8 stages of 10 layers, TP 8, DP 16, recompute.
  const stage_config s{1, 0, 10, 8, 16, true};
  fmt::print("backbone stage 0: {}\n", cm.stage_time(s, mb[1]));
  fmt::print("memory with 8 microbatches in flight: {}\n", cm.stage_memory(s, mb[1], 8));
  fmt::print("DP sync (across nodes): {:.1f} ms, optimizer: {:.2f} ms\n",
             cm.dp_sync_time(s, true) * 1e3, cm.optimizer_time(s) * 1e3);

  // The whole backbone on one TP-8 group without ZeRO sharding (DP 1) does not fit:
  // the error names the module, the stage and the bytes over.
  try {
    (void)cm.check_stage_memory(stage_config{1, 0, 80, 8, 1, false}, mb[1], 1, 0);
  } catch (const error& e) {
    fmt::print("{}\n", e.what());
  }

  // Calibrate: time some "kernels" (here: the model itself plus 2% noise).
  profiler prof;
  splitmix64 rng(5);
  for (int i = 0; i < 64; ++i) {
    const double f = 1e9 * (1 + 999 * rng.uniform01());
    const int tp = 1 << rng.below(4);
    prof.record(f, tp,
                compute_time(f, tp, cm.peak_flops(), efficiency_params{0.7, 5e10, 0.03}) *
                    (1 + 0.02 * (rng.uniform01() - 0.5)));
  }
  const auto fit = fit_efficiency(prof.samples(), cm.peak_flops());
  fmt::print("fitted: {}\n", fit);
  cost_params p;
  p.efficiency_for(module_role::backbone) = fit.params;
  const analytic_cost_model calibrated(sc.model, sc.cluster, p);
  fmt::print("calibrated backbone stage 0: {}\n", calibrated.stage_time(s, mb[1]));
  return 0;
}
