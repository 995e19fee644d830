// Planner benchmark:
//  1. solve time of plan_parallelism for the paper-72b model (ViT-H/14 + Qwen2-72B + SD-2.1,
//     H800 nodes, interleaved data) on 64 ... 10000 GPUs, next to the DistTrain paper's
//     922 ms for 1296 GPUs (ratio = 922 ms / ours), and the Megatron-style baseline's
//     solve time measured in the same run, and the solve time with ZB-H1 in the space
//     (planner_options::zero_bubble) with its plan's iteration time;
//  2. modelled speedup over the Megatron-LM-style baseline for 7B-, 13B- and 70B-class
//     backbones with ViT-H + SD-2.1 (the scenario presets), split into the part a
//     balanced layer split alone gives a monolithic layout and the rest (disaggregation);
//  3. the data objective (plan_for_data, bind/data_plan.hpp) at 1296 GPUs: its solve
//     time next to the expected-batch objective's in the same run (targets: <= 1 s and
//     <= 10 ms), the plans' closed forms and the sampled objective's predicted mean.
//
//   bench_plan            # table
//   bench_plan --json     # one JSON object
//   bench_plan --quick    # small sizes (ctest smoke)
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "disttrain/bind/data_plan.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "harness.hpp"

namespace {

constexpr double paper_ms = 922.0;  // DistTrain: planning 1296 GPUs (reported)

struct solve_row {
  int gpus, batch;
  double ms, baseline_ms;
  long long expanded, configs;
  double iteration_s, speedup;
  double zb_ms, zb_iteration_s;
};

struct speed_row {
  std::string scenario;
  int gpus, batch;
  double ours_s, ours_mfu, balanced_s, base_s, base_mfu, speedup, balanced_speedup;
  std::string ours_layout, base_layout;
};

std::string layout_of(const disttrain::parallel_plan& p) {
  std::string s;
  for (const auto& m : p.modules) {
    if (!s.empty()) s += " | ";
    s += m.colocated ? fmt::format("{} on backbone", m.name)
                     : fmt::format("{} {}x(tp{} pp{}{} dp{})", m.name, m.gpus(), m.tp, m.pp,
                                   m.virtual_stages > 1 ? fmt::format(" v{}", m.virtual_stages)
                                                        : std::string(),
                                   m.dp);
  }
  return s + fmt::format(" | m={}", p.num_microbatches);
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = disttrain::bench::parse_options(argc, argv);
  using disttrain::bench::time_per_call;

  // ---- 1. solve time ---------------------------------------------------------
  std::vector<solve_row> solves;
  const std::vector<int> sizes =
      opt.quick ? std::vector<int>{64, 256} : std::vector<int>{64, 256, 1172, 1296, 4096, 10000};
  auto base_sc = disttrain::presets::scenario_preset("paper-72b");
  for (int n : sizes) {
    auto sc = base_sc;
    sc.cluster.num_gpus = n;
    sc.global_batch_size = n <= 1296 ? 1024 : (n <= 4096 ? 4096 : 8192);
    const disttrain::analytic_cost_model cm(sc.model, sc.cluster);  // the GPU's shipped curve
    const auto req = disttrain::make_request(sc);
    disttrain::plan_result r, b;
    const double t = time_per_call([&] { r = disttrain::plan_parallelism(cm, req); },
                                   opt.quick ? 0.02 : 0.3, opt.quick ? 1 : 5);
    const double tb = time_per_call([&] { b = disttrain::plan_megatron_baseline(cm, req); },
                                    opt.quick ? 0.02 : 0.3, opt.quick ? 1 : 5);
    disttrain::planner_options zopt;
    zopt.zero_bubble = true;
    disttrain::plan_result z;
    const double tz = time_per_call([&] { z = disttrain::plan_parallelism(cm, req, zopt); },
                                    opt.quick ? 0.02 : 0.3, opt.quick ? 1 : 5);
    solves.push_back(solve_row{n, sc.global_batch_size, 1e3 * t, 1e3 * tb,
                               r.stats.backbone_expanded, r.stats.backbone_configs,
                               r.evaluation.iteration_time_s,
                               b.evaluation.iteration_time_s / r.evaluation.iteration_time_s,
                               1e3 * tz, z.evaluation.iteration_time_s});
  }

  // ---- 2. modelled speedup -----------------------------------------------------
  std::vector<speed_row> speeds;
  const std::vector<std::string> scenarios =
      opt.quick ? std::vector<std::string>{"mllm-7b"} : disttrain::presets::scenario_preset_names();
  for (const auto& name : scenarios) {
    const auto sc = disttrain::presets::scenario_preset(name);
    const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
    const auto req = disttrain::make_request(sc);
    const auto ours = disttrain::plan_parallelism(cm, req);
    const auto base = disttrain::plan_megatron_baseline(cm, req);
    disttrain::planner_options mono;
    mono.include_disaggregated = false;
    mono.monolithic_splits = {disttrain::layer_split_rule::balanced};
    const auto balanced = disttrain::plan_parallelism(cm, req, mono);
    const double tb = base.evaluation.iteration_time_s;
    speeds.push_back(speed_row{
        name, sc.cluster.num_gpus, sc.global_batch_size, ours.evaluation.iteration_time_s,
        ours.evaluation.mfu, balanced.evaluation.iteration_time_s, tb, base.evaluation.mfu,
        tb / ours.evaluation.iteration_time_s, tb / balanced.evaluation.iteration_time_s,
        layout_of(ours.plan), layout_of(base.plan)});
  }

  // ---- 3. the data objective ----------------------------------------------------
  struct data_row {
    int gpus, batch;
    double expected_ms, sampled_ms, expected_closed_s, sampled_closed_s, predicted_s;
    long long screened, simulated;
  } data{};
  {
    auto sc = base_sc;
    sc.cluster.num_gpus = opt.quick ? 64 : 1296;
    sc.global_batch_size = opt.quick ? 64 : 1024;
    const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
    const auto req = disttrain::make_request(sc);
    disttrain::plan_result e;
    disttrain::data_plan_result d;
    // Both in the same run and process (best of the samples each).
    const double te = time_per_call([&] { e = disttrain::plan_parallelism(cm, req); },
                                    opt.quick ? 0.02 : 0.3, opt.quick ? 1 : 5);
    const double td = time_per_call([&] { d = disttrain::plan_for_data(cm, req, sc.data); },
                                    opt.quick ? 0.02 : 2.0, opt.quick ? 1 : 3);
    data = {sc.cluster.num_gpus,
            sc.global_batch_size,
            1e3 * te,
            1e3 * td,
            e.evaluation.iteration_time_s,
            d.result.evaluation.iteration_time_s,
            d.predicted.mean_s,
            d.stats.screened,
            d.stats.simulated};
  }

  if (opt.json) {
    disttrain::json j;
    j["paper_solve_ms_1296_gpus"] = paper_ms;
    j["data_objective"] = {{"gpus", data.gpus},
                           {"global_batch", data.batch},
                           {"expected_solve_ms", data.expected_ms},
                           {"expected_target_ms", 10.0},
                           {"sampled_solve_ms", data.sampled_ms},
                           {"sampled_target_ms", 1000.0},
                           {"sampled_over_expected", data.sampled_ms / data.expected_ms},
                           {"expected_plan_closed_s", data.expected_closed_s},
                           {"sampled_plan_closed_s", data.sampled_closed_s},
                           {"sampled_plan_predicted_s", data.predicted_s},
                           {"classes_screened", data.screened},
                           {"finalists_simulated", data.simulated}};
    for (const auto& s : solves)
      j["solve"].push_back({{"gpus", s.gpus},
                            {"global_batch", s.batch},
                            {"solve_ms", s.ms},
                            {"paper_ratio", paper_ms / s.ms},
                            {"baseline_solve_ms", s.baseline_ms},
                            {"backbone_configs", s.configs},
                            {"backbone_expanded", s.expanded},
                            {"iteration_time_s", s.iteration_s},
                            {"speedup", s.speedup},
                            {"zero_bubble_solve_ms", s.zb_ms},
                            {"zero_bubble_iteration_time_s", s.zb_iteration_s}});
    for (const auto& s : speeds)
      j["speedup"].push_back({{"scenario", s.scenario},
                              {"gpus", s.gpus},
                              {"global_batch", s.batch},
                              {"iteration_time_s", s.ours_s},
                              {"mfu", s.ours_mfu},
                              {"baseline_iteration_time_s", s.base_s},
                              {"baseline_mfu", s.base_mfu},
                              {"speedup", s.speedup},
                              {"balanced_monolithic_iteration_time_s", s.balanced_s},
                              {"balanced_monolithic_speedup", s.balanced_speedup},
                              {"plan", s.ours_layout},
                              {"baseline_plan", s.base_layout}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  fmt::print("Planner solve time, paper-72b model (ViT-H/14 + Qwen2-72B + SD-2.1), H800 nodes\n");
  fmt::print("{:>6} {:>6} {:>10} {:>14} {:>12} {:>10} {:>12} {:>9} {:>11} {:>12}\n", "GPUs",
             "batch", "solve ms", "922 ms / ours", "baseline ms", "configs", "expanded", "speedup",
             "ZB-H1 ms", "ZB-H1 iter");
  for (const auto& s : solves)
    fmt::print(
        "{:>6} {:>6} {:>10.2f} {:>13.0f}x {:>12.2f} {:>10} {:>12} {:>8.2f}x {:>11.2f} {:>10.4f} "
        "s\n",
        s.gpus, s.batch, s.ms, paper_ms / s.ms, s.baseline_ms, s.configs, s.expanded, s.speedup,
        s.zb_ms, s.zb_iteration_s);
  fmt::print("\nModelled speedup over the Megatron-LM-style baseline (same cost model)\n");
  fmt::print("{:<10} {:>5} {:>6} {:>10} {:>7} {:>11} {:>7} {:>9} {:>18}\n", "scenario", "GPUs",
             "batch", "ours s", "MFU", "baseline s", "MFU", "speedup", "balanced-mono x");
  for (const auto& s : speeds)
    fmt::print("{:<10} {:>5} {:>6} {:>10.4f} {:>6.1f}% {:>11.4f} {:>6.1f}% {:>8.2f}x {:>17.2f}x\n",
               s.scenario, s.gpus, s.batch, s.ours_s, 100 * s.ours_mfu, s.base_s, 100 * s.base_mfu,
               s.speedup, s.balanced_speedup);
  fmt::print(
      "\nData objective, paper-72b on {} GPUs, batch {} (plan_for_data vs plan_parallelism, "
      "same run)\n",
      data.gpus, data.batch);
  fmt::print(
      "  expected batch (closed form): {:>8.2f} ms (target <= 10 ms)   plan {:.4f} s closed\n",
      data.expected_ms, data.expected_closed_s);
  fmt::print(
      "  sampled batches (default):    {:>8.2f} ms (target <= 1000 ms), {:.0f}x the expected "
      "objective's; plan {:.4f} s closed, predicted mean {:.4f} s; {} classes scored, {} "
      "simulated\n",
      data.sampled_ms, data.sampled_ms / data.expected_ms, data.sampled_closed_s, data.predicted_s,
      data.screened, data.simulated);
  fmt::print("\nPlans:\n");
  for (const auto& s : speeds)
    fmt::print("  {:<10} ours: {}\n  {:<10} base: {}\n", s.scenario, s.ours_layout, "",
               s.base_layout);
  return 0;
}
