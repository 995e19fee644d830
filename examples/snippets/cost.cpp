// The examples of the cost part (disttrain/cost/*.hpp): see snippets.hpp.
#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>

#include "disttrain/cost.hpp"
#include "disttrain/cost/calibration.hpp"
#include "disttrain/cost/format.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/cost/profiler.hpp"
#include "disttrain/model.hpp"
#include "disttrain/model/json.hpp"
#include "snippets.hpp"

namespace {

using disttrain::errc;
using snippets::check;

// The paper-72b backbone stage of the analytic_cost_model example, 4 samples per microbatch.
struct backbone_stage {
  disttrain::scenario sc = disttrain::presets::scenario_preset("paper-72b");
  disttrain::analytic_cost_model cm{sc.model, sc.cluster};
  disttrain::stage_config s{.module = 1, .first_layer = 0, .num_layers = 10, .tp = 8, .dp = 16};
  disttrain::module_workload w = (disttrain::expected_workload(sc.model, sc.data) * 4.0)[1];
};

// Busy-waits `seconds`: a stand-in for a host's own GPU kernel, whose time
// grows with its FLOPs (the profiler examples time it).
void spin(double seconds) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {}
}

void require_fits() {
  const disttrain::memory_breakdown mem{
      .params = 20e9, .grads = 20e9, .optimizer = 20e9, .activations = 20e9};
  //! [require_fits]
  disttrain::require_fits(mem, 76e9, "backbone", 3);
  //! [require_fits]
}

void analytic_cost_model() {
  //! [analytic_cost_model]
  auto sc = disttrain::presets::scenario_preset("paper-72b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  auto w = disttrain::expected_workload(sc.model, sc.data) * 4.0;  // 4 samples per microbatch
  disttrain::stage_config s{.module = 1, .first_layer = 0, .num_layers = 10, .tp = 8, .dp = 16};
  auto t = cm.stage_time(s, w[1]);       // {forward_s, backward_s, weight_grad_s}
  auto m = cm.stage_memory(s, w[1], 8);  // 8 microbatches in flight
  cm.check_stage_memory(s, w[1], 8, 0);  // throws errc::infeasible if over
  //! [analytic_cost_model]
  check(t.forward_s > 0 && t.backward_s > t.forward_s && t.weight_grad_s > 0, "stage_time");
  check(m.total() > 0 && m.total() <= cm.memory_limit(), "stage_memory fits");
}

void calibration() {
  disttrain::cost_params params;
  const double n = 8192, k = 8192;
  auto run_gemm = [&](double m) { spin(1e-3 * m / 1024); };  // 1 ms per 1024 rows
  auto sync = [] {};
  //! [calibration]
  disttrain::profiler prof;
  for (double m : {1024.0, 2048.0, 4096.0}) {
    auto t = prof.time(2.0 * m * n * k, /*tp=*/1);
    run_gemm(m);
    sync();
  }
  auto fit = disttrain::fit_efficiency(prof.samples(), 989e12);
  if (fit.r_squared > 0.99) params.efficiency_for(disttrain::module_role::backbone) = fit.params;
  //! [calibration]
  check(prof.samples().size() == 3 && fit.samples == 3, "three samples fitted");
  check(fit.params.e_max > 0 && fit.params.e_max <= 1, "fitted e_max in (0, 1]");
}

void link_spec() {
  //! [link_spec]
  disttrain::link_spec l{.bandwidth_bytes_per_s = 200e9, .latency_s = 3e-6};
  //! [link_spec]
  check(l.bandwidth_bytes_per_s == 200e9 && l.latency_s == 3e-6, "link_spec");
}

//! [cost_model]
template <disttrain::cost_model C>
double one_stage(const C& c, const disttrain::stage_config& s,
                 const disttrain::module_workload& w) {
  return c.stage_time(s, w).total_s();
}
//! [cost_model]

void cost_model() {
  const backbone_stage b;
  check(one_stage(b.cm, b.s, b.w) == b.cm.stage_time(b.s, b.w).total_s(), "one_stage");
}

void dp_sync_of() {
  const backbone_stage b;
  const auto& cm = b.cm;
  const auto& s = b.s;
  //! [dp_sync_of]
  auto t = disttrain::dp_sync_of(cm, s, false);
  //! [dp_sync_of]
  check(t == cm.dp_sync(s, false), "dp_sync_of uses the model's dp_sync");
}

void cost_params() {
  //! [cost_params]
  disttrain::cost_params p;
  p.efficiency_for(disttrain::module_role::encoder).e_max = 0.6;
  p.memory_reserve_bytes = 6e9;
  //! [cost_params]
  p.validate();
  check(p.efficiency_for(disttrain::module_role::encoder).e_max == 0.6, "cost_params");
}

void calibrated_cost_params() {
  const auto cluster = disttrain::presets::a100_cluster(64);
  //! [calibrated_cost_params]
  auto p = disttrain::calibrated_cost_params(cluster.gpu.name);
  //! [calibrated_cost_params]
  check(
      p.efficiency_for(disttrain::module_role::backbone) != disttrain::cost_params{}.efficiency[1],
      "A100 parameters are calibrated");
}

void efficiency_params() {
  //! [efficiency_params]
  disttrain::efficiency_params e{.e_max = 0.8, .flops_half = 3e10, .tp_penalty = 0.02};
  double t = disttrain::compute_time(1e12, 4, 989e12, e);
  //! [efficiency_params]
  check(t > 1e12 / (0.8 * 989e12), "compute_time is above the asymptote's time");
}

void format() {
  const backbone_stage b;
  const auto& cm = b.cm;
  const auto& s = b.s;
  const auto& w = b.w;
  //! [format]
  fmt::print("{}\n", cm.stage_time(s, w));       // F 35.747 ms  B 36.210 ms  W 16.312 ms
  fmt::print("{}\n", cm.stage_memory(s, w, 8));  // 22.18 GB (params 2.51, grads 5.01,
                                                 //   optimizer 0.94, activations 13.72)
  //! [format]
  // The outputs shown (paper-72b's backbone stage): update them when the cost model changes.
  check(fmt::format("{}", cm.stage_time(s, w)) == "F 35.747 ms  B 36.210 ms  W 16.312 ms",
        "stage_times format");
  check(fmt::format("{}", cm.stage_memory(s, w, 8)) ==
            "22.18 GB (params 2.51, grads 5.01, optimizer 0.94, activations 13.72)",
        "memory_breakdown format");
}

void profiler() {
  auto launch_gemm = [](int m) { spin(1e-3 * m / 1024); };  // 1 ms per 1024 rows
  auto cudaDeviceSynchronize = [] {};
  //! [profiler]
  disttrain::profiler prof;
  for (int m : {512, 1024, 2048, 4096}) {
    auto t = prof.time(disttrain::gemm_flops(m, 8192, 8192), 1, "gemm");
    launch_gemm(m);
    cudaDeviceSynchronize();
  }  // each scope records on destruction
  disttrain::write_json_file("profile.json", prof.to_profile("H800", 989e12));
  //! [profiler]
  const auto back = disttrain::read_json_file("profile.json").get<disttrain::profile>();
  std::filesystem::remove("profile.json");
  check(back.samples.size() == 4 && back.samples[3].kind == "gemm", "profile.json");
  // Each scope spans its GEMM: at least the time it spun (a comparison between scopes would
  // depend on the machine's load).
  const int rows[] = {512, 1024, 2048, 4096};
  for (std::size_t i = 0; i < 4; ++i)
    check(back.samples[i].seconds >= 1e-3 * rows[i] / 1024, "a scope spans its GEMM");
}

void stage_config() {
  //! [stage_config]
  disttrain::stage_config s{.module = 1, .first_layer = 0, .num_layers = 10, .tp = 8, .dp = 4};
  //! [stage_config]
  check(s.tp * s.dp == 32, "stage_config");
}

void dp_sync_times() {
  const backbone_stage b;
  const auto& cm = b.cm;
  const auto& s = b.s;
  //! [dp_sync_times]
  double t = cm.dp_sync(s, true).total_s();
  //! [dp_sync_times]
  check(t > 0 && t == cm.dp_sync_time(s, true), "dp_sync total is dp_sync_time");
}

}  // namespace

int main() {
  snippets::runner r("cost");
  r.run("require_fits", [] { snippets::check_throws(errc::infeasible, require_fits, "over"); });
  r.run("analytic_cost_model", analytic_cost_model);
  r.run("calibration", calibration);
  r.run("link_spec", link_spec);
  r.run("cost_model", cost_model);
  r.run("dp_sync_of", dp_sync_of);
  r.run("cost_params", cost_params);
  r.run("calibrated_cost_params", calibrated_cost_params);
  r.run("efficiency_params", efficiency_params);
  r.run("format", format);
  r.run("profiler", profiler);
  r.run("stage_config", stage_config);
  r.run("dp_sync_times", dp_sync_times);
  return r.finish();
}
