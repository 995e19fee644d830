#pragma once
// A tiny cost model with round numbers, so tests can compute iteration times
// by hand. Costs are per microbatch of a replica (workload tokens T):
//   stage time   = 3 * layers * 1e-6 * T / tp       (forward 1, backward 2, of
//                  which `weight_share` is W: 0 unless a test sets it)
//   memory       = params 1e8 * layers / tp + optimizer 4e8 * layers / (tp * dp)
//                  + activations in_flight * layers * 1e6 * T / tp
//   output bytes = 1e6 * T;  transfer_bytes(from, to) = 1e6 * tokens of `from`
//   p2p          = bytes / 1e11 (same node) or bytes / 1e10
//   dp sync      = dp > 1 ? 1e-3 * layers * (spans_nodes ? 2 : 1) : 0
//   optimizer    = 1e-4 * layers / dp
//   flops        = 6e9 * layers * T;  peak 1e15;  memory limit `limit` bytes.

#include "disttrain/cost/cost_model.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/parallel_plan.hpp"

namespace disttrain::testing {

struct mock_cost {
  model_spec m;
  cluster_spec c;
  double limit = 80e9;
  double weight_share = 0;  // fraction of the backward that is W (ZB-H1 tests)

  explicit mock_cost(int gpus = 16, double limit_bytes = 80e9) : limit(limit_bytes) {
    m.name = "mock";
    m.modules = {presets::vit_h_14(), presets::llama2_7b(),
                 presets::sd21_unet()};  // 32, 32, 25 layers
    c = presets::h800_cluster(gpus);
  }
  [[nodiscard]] const model_spec& model() const { return m; }
  [[nodiscard]] const cluster_spec& cluster() const { return c; }
  [[nodiscard]] stage_times stage_time(const stage_config& s, const module_workload& w) const {
    const double f = static_cast<double>(s.num_layers) * 1e-6 * w.tokens / s.tp;
    return stage_times{f, 2 * f * (1 - weight_share), 2 * f * weight_share};
  }
  [[nodiscard]] memory_breakdown stage_memory(const stage_config& s, const module_workload& w,
                                              int in_flight) const {
    const double L = s.num_layers;
    return memory_breakdown{1e8 * L / s.tp, 0, 4e8 * L / (s.tp * s.dp),
                            in_flight * L * 1e6 * w.tokens / s.tp};
  }
  [[nodiscard]] stage_flops flops(const stage_config& s, const module_workload& w) const {
    const double f = 2e9 * s.num_layers * w.tokens;
    return stage_flops{f, 2 * f, 0};
  }
  [[nodiscard]] double stage_output_bytes(const stage_config&, const module_workload& w) const {
    return 1e6 * w.tokens;
  }
  [[nodiscard]] double transfer_bytes(std::size_t from, std::size_t,
                                      const model_workload& w) const {
    return 1e6 * w[from].tokens;
  }
  [[nodiscard]] double p2p_time(double bytes, bool same_node) const {
    return bytes / (same_node ? 1e11 : 1e10);
  }
  [[nodiscard]] double dp_sync_time(const stage_config& s, bool spans) const {
    return s.dp > 1 ? 1e-3 * s.num_layers * (spans ? 2 : 1) : 0.0;
  }
  [[nodiscard]] double optimizer_time(const stage_config& s) const {
    return 1e-4 * s.num_layers / s.dp;
  }
  [[nodiscard]] double memory_limit() const { return limit; }
  [[nodiscard]] double peak_flops() const { return 1e15; }
};
static_assert(cost_model<mock_cost>);

/// Per-sample workload: encoder 100 tokens, backbone 1000, generator 50.
inline model_workload mock_sample() {
  model_workload w;
  w.size = 3;
  w[0] = module_workload{1, 100, 1e4};
  w[1] = module_workload{1, 1000, 1e6};
  w[2] = module_workload{1, 50, 2500};
  return w;
}

/// The mock model's disaggregated plan used by the hand computations: 8 samples as 4 microbatches
/// of 2; encoder dp 2, backbone tp 2 x pp 2 x dp 2 (16 + 16 layers), generator dp 1.
inline parallel_plan mock_plan() {
  parallel_plan p;
  p.global_batch = 8;
  p.num_microbatches = 4;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 2, {32}},
               module_plan{"llama-2-7b", "backbone", 2, 2, 2, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
  return p;
}

}  // namespace disttrain::testing
