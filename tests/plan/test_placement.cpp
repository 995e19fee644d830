// Link classes come from the plan's rank placement (topology_of's numbering),
// not from a layout-independent rule: mllm-13b on 36 H800 GPUs with a 3-GPU
// encoder puts every 8-GPU backbone stage across two nodes, so its DP sync and
// its stage-to-stage transfers run over the NIC.
#include <cstddef>

#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain_catch.hpp"

namespace {

using disttrain::module_plan;
using disttrain::parallel_plan;

// ViT 3 GPUs (ranks 0-2), Llama-2-13B 4 stages of 8 GPUs (ranks 3-10, 11-18, 19-26, 27-34),
// SD 1 GPU (rank 35).
parallel_plan straddling(int global_batch) {
  parallel_plan p;
  p.global_batch = global_batch;
  p.num_microbatches = global_batch / 8;
  p.gpus_per_node = 8;
  p.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 3, {32}},
               module_plan{"llama-2-13b", "backbone", 1, 4, 8, {10, 10, 10, 10}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
  return p;
}

}  // namespace

TEST_CASE("a stage's DP sync is priced by where its DP group sits (mllm-13b on 36 GPUs)") {
  auto sc = disttrain::presets::scenario_preset("mllm-13b");
  sc.cluster = disttrain::presets::h800_cluster(36);
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const parallel_plan p = straddling(req.global_batch);
  const auto e =
      disttrain::evaluate(p, cm, req.sample_workload, disttrain::evaluate_options{false});
  const disttrain::topology L = disttrain::topology_of(p);
  const int g = sc.cluster.gpus_per_node;
  int straddling_stages = 0;
  for (const auto& s : e.stages) {
    const auto group = L.dp_group(L.find(s.module), disttrain::stage_id{s.stage}, 0);
    const bool spans = group.front() / g != group.back() / g;
    straddling_stages += spans ? 1 : 0;
    std::size_t mod = 0;
    while (sc.model.modules[mod].name != s.module) ++mod;
    const disttrain::stage_config cfg{mod, s.first_layer, s.num_layers, s.tp, s.dp, false};
    const auto w = req.sample_workload[mod] * static_cast<double>(s.replica_samples);
    INFO(s.module << " stage " << s.stage << ", DP group spans nodes: " << spans);
    CHECK(s.sync_total_s == disttrain::detail::part_sync(cm, cfg, w, spans).total_s());
  }
  CHECK(straddling_stages == 4);  // every backbone stage; the encoder (3 GPUs) sits in node 0
}

TEST_CASE("stage-to-stage transfers of straddling stages go over the NIC") {
  auto sc = disttrain::presets::scenario_preset("mllm-13b");
  sc.cluster = disttrain::presets::h800_cluster(36);
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const parallel_plan p = straddling(req.global_batch);
  const auto e =
      disttrain::evaluate(p, cm, req.sample_workload, disttrain::evaluate_options{false});
  // The same plan on a cluster of one 64-GPU "node" (every link NVLink) and of 1-GPU "nodes"
  // (every link the NIC; no TP to split) brackets it strictly: placement decides the classes.
  auto all_nvlink = sc.cluster;
  all_nvlink.gpus_per_node = 64;
  all_nvlink.num_gpus = 64;
  auto all_nic = sc.cluster;
  all_nic.gpus_per_node = 1;
  const disttrain::analytic_cost_model cm_in(sc.model, all_nvlink), cm_out(sc.model, all_nic);
  auto with_g = [&](int g) {
    parallel_plan q = p;
    q.gpus_per_node = g;
    return q;
  };
  const auto in = disttrain::evaluate(with_g(64), cm_in, req.sample_workload,
                                      disttrain::evaluate_options{false});
  const auto out = disttrain::evaluate(with_g(1), cm_out, req.sample_workload,
                                       disttrain::evaluate_options{false});
  CHECK(in.iteration_time_s < e.iteration_time_s);
  // Here every transfer crosses nodes (encoder ranks 0-2 -> backbone stage 0 ranks 3-10, each
  // backbone stage to the next, stage 3 ranks 27-34 -> generator rank 35): the pipeline is the
  // all-NIC one; only the encoder's own DP group (ranks 0-2) is on NVLink.
  CHECK(e.pipeline_time_s == out.pipeline_time_s);
  CHECK(e.iteration_time_s == out.iteration_time_s);  // the encoder's sync is not the largest
}

TEST_CASE("the planner's answer is priced by its own placement (mllm-13b on 36 GPUs)") {
  auto sc = disttrain::presets::scenario_preset("mllm-13b");
  sc.cluster = disttrain::presets::h800_cluster(36);
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const auto r = disttrain::plan_parallelism(cm, req);
  // The search's score equals evaluate()'s (run_planner checks it bit for bit), and every DP
  // group the plan prices as NVLink sits inside one node of its rank layout.
  const disttrain::topology L = disttrain::topology_of(r.plan);
  const int g = sc.cluster.gpus_per_node;
  for (const auto& s : r.evaluation.stages) {
    const auto group = L.dp_group(L.find(s.module), disttrain::stage_id{s.stage}, 0);
    std::size_t mod = 0;
    while (sc.model.modules[mod].name != s.module) ++mod;
    if (!s.colocated.empty()) continue;  // colocated parts add their own sync
    const bool spans = group.front() / g != group.back() / g;
    const disttrain::stage_config cfg{mod,  s.first_layer, s.num_layers,
                                      s.tp, s.dp,          r.plan.modules[mod].recompute};
    const auto w = req.sample_workload[mod] * static_cast<double>(s.replica_samples);
    CHECK(s.sync_total_s == disttrain::detail::part_sync(cm, cfg, w, spans).total_s());
  }
}
