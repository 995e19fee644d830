// Plan a multimodal model on 64 H800s: the planner's layout and the
// Megatron-LM-style baseline's on the same GPUs and cost model, then a layout
// written by hand, scored with evaluate(). The planner is exact over its
// search space, so the hand layout (which is in that space) cannot beat it:
// the program checks it and exits 1 if it did.
//
//   ./example_plan_layout
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan.hpp"
#include "disttrain/plan/format.hpp"

int main() {
  try {
    // ViT-H/14 -> Llama-2-7B -> SD-2.1 (a preset scenario), on 64 H800 GPUs, batch 256.
    auto sc = disttrain::presets::scenario_preset("mllm-7b");
    sc.cluster = disttrain::presets::cluster_preset("h800", 64);
    sc.global_batch_size = 256;
    const disttrain::analytic_cost_model cost(sc.model, sc.cluster);
    const disttrain::plan_request req = disttrain::make_request(sc);

    const disttrain::plan_result ours = disttrain::plan_parallelism(cost, req);
    const disttrain::plan_result base = disttrain::plan_megatron_baseline(cost, req);
    std::printf("planner (solved in %.1f ms):\n%s%s\n", ours.solve_ms,
                disttrain::format_plan(ours.plan).c_str(),
                disttrain::format_evaluation(ours.evaluation).c_str());
    std::printf("Megatron-LM-style baseline:\n%s%s\n", disttrain::format_plan(base.plan).c_str(),
                disttrain::format_evaluation(base.evaluation).c_str());

    // A hand layout: the encoder on 8 GPUs (DP 8), the backbone TP 2 x PP 4 x DP 6 (48 GPUs),
    // the generator on 8 GPUs (DP 8); 32 microbatches of 8 samples.
    disttrain::parallel_plan hand = ours.plan;
    hand.num_microbatches = 32;
    auto set = [&](int i, int tp, int pp, int dp, std::vector<int> layers) {
      auto& m = hand.modules[static_cast<std::size_t>(i)];
      disttrain::module_plan fresh;  // not colocated, no recompute, one chunk per stage
      fresh.name = m.name;
      fresh.role = m.role;
      m = fresh;
      m.tp = tp;
      m.pp = pp;
      m.dp = dp;
      m.layers = std::move(layers);
    };
    set(0, 1, 1, 8, {32});
    set(1, 2, 4, 6, {7, 8, 9, 8});
    set(2, 1, 1, 8, {25});
    const disttrain::plan_evaluation mine = disttrain::evaluate(hand, cost, req.sample_workload);
    std::printf("hand layout:\n%s%s\n", disttrain::format_plan(hand).c_str(),
                disttrain::format_evaluation(mine).c_str());

    std::printf("speedup over the baseline %.2fx; the hand layout is %.2fx the planner's time\n",
                base.evaluation.iteration_time_s / ours.evaluation.iteration_time_s,
                mine.iteration_time_s / ours.evaluation.iteration_time_s);
    return mine.iteration_time_s >= ours.evaluation.iteration_time_s ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
