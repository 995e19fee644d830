// The planner returns the optimum of its search space: compared with an
// exhaustive enumeration (exhaustive.hpp: every plan of the space scored by
// evaluate()) on 8-64 GPUs across the scenario presets, H800/H100/A100
// clusters, with spaces kept small enough for a Debug build.
#include <string>

#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain_catch.hpp"
#include "exhaustive.hpp"

namespace {

enum class variant { as_is, no_generator, frozen_encoder, two_generators };

struct case_spec {
  const char* preset;
  const char* cluster;
  int gpus;
  int batch;
  int max_backbone_pp;
  int max_side_pp;
  variant v = variant::as_is;
  int min_backbone_pp = 1;
  bool overlap_grad_reduce = true;  // the planner's defaults (Megatron-LM's overlap switches on)
  bool overlap_param_gather = true;
  int gpus_per_node = 0;  // 0: the cluster preset's
  bool sequence_parallel = true;
  bool zero_bubble = false;
  bool selective = false;  // search_selective_recompute, with an unfused attention core
};

int interleaved_optima = 0;  // how many optima (plan or baseline) interleave the backbone
int mixed_optima = 0;        // how many planner optima colocate exactly one side module
int placed_optima = 0;       // optima whose placement prices a link unlike the layout-free rules
int sp_decided = 0;          // cases whose optimum without sequence parallelism differs
int capped_optima = 0;       // optima whose backbone split is capped by memory
int zb_optima = 0;           // planner optima that run ZB-H1
int zb_cases = 0;            // cases searched with ZB-H1 in the space
int selective_optima = 0;    // planner optima with selective recompute on a module
int chained_optima = 0;      // optima with two encoders (or two generators) on their own GPUs
int several_mixed = 0;       // optima of a model with 3+ side modules colocating some, not all

// Whether the placement (topology_of's numbering) puts a stage of at most a node's GPUs across
// two nodes, or a module boundary inside one node: links the old layout-independent rules
// (a DP group spans nodes iff tp * dp > gpus per node; boundaries on the NIC) priced otherwise.
bool placement_matters(const disttrain::parallel_plan& p) {
  const long long g = p.gpus_per_node;
  long long base = 0, prev_first = -1, prev_size = 0;
  bool matters = false;
  for (const auto& m : p.modules) {
    if (m.colocated) continue;
    const long long s = static_cast<long long>(m.tp) * m.dp;
    for (int j = 0; j < m.pp; ++j) {
      const long long a = base + j * s;
      if (s <= g && a / g != (a + s - 1) / g) matters = true;
    }
    if (prev_first >= 0 && prev_size + s <= g && prev_first / g == (base + s - 1) / g)
      matters = true;
    prev_first = base + (m.pp - 1) * s;
    prev_size = s;
    base += m.gpus();
  }
  return matters;
}

bool mixed(const disttrain::parallel_plan& p) {
  int colocated = 0, sides = 0;
  for (const auto& m : p.modules)
    if (m.role != "backbone") ++sides, colocated += m.colocated ? 1 : 0;
  return sides == 2 && colocated == 1;
}

void compare(const case_spec& c) {
  auto sc = disttrain::presets::scenario_preset(c.preset);
  sc.cluster = disttrain::presets::cluster_preset(c.cluster, c.gpus);
  if (c.gpus_per_node > 0) sc.cluster.gpus_per_node = c.gpus_per_node;
  if (c.v == variant::no_generator) sc.model.modules.pop_back();
  if (c.v == variant::frozen_encoder) sc.model.modules.front().frozen = true;
  if (c.v == variant::two_generators) sc.model.modules.push_back(disttrain::presets::dit_xl_2());
  auto params = disttrain::calibrated_cost_params(sc.cluster.gpu.name);
  // Selective recompute saves memory only where the attention scores are kept (unfused).
  if (c.selective) params.attention_score_bytes = 5;
  disttrain::analytic_cost_model cm(sc.model, sc.cluster, params);
  const auto req = disttrain::make_request(sc.model, sc.data, c.batch, 256);
  disttrain::planner_options opt;
  opt.max_backbone_pp = c.max_backbone_pp;
  opt.max_side_pp = c.max_side_pp;
  opt.min_backbone_pp = c.min_backbone_pp;
  opt.overlap_grad_reduce = c.overlap_grad_reduce;
  opt.overlap_param_gather = c.overlap_param_gather;
  opt.sequence_parallel = c.sequence_parallel;
  opt.zero_bubble = c.zero_bubble;
  opt.search_selective_recompute = c.selective;
  INFO("sequence parallel " << c.sequence_parallel << ", zero bubble " << c.zero_bubble);
  INFO("overlap grad reduce " << c.overlap_grad_reduce << ", param gather "
                              << c.overlap_param_gather);
  INFO(c.preset << " on " << c.gpus << " " << c.cluster << " GPUs, batch " << c.batch
                << ", variant " << static_cast<int>(c.v));
  if (c.zero_bubble) ++zb_cases;
  const auto ex = disttrain::testing::exhaustive_plan(cm, req, opt);
  INFO("exhaustive scored " << ex.plans_scored << " plans");
  if (!ex.plan) {
    DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(cm, req, opt), disttrain::errc::infeasible,
                          "");
    return;
  }
  const auto r = disttrain::plan_parallelism(cm, req, opt);
  INFO("planner: " << disttrain::json(r.plan).dump());
  INFO("exhaustive: " << disttrain::json(*ex.plan).dump());
  CHECK(r.evaluation.iteration_time_s == ex.time);
  CHECK(r.plan == *ex.plan);
  if (r.plan.modules[r.plan.backbone_index()].virtual_stages > 1) ++interleaved_optima;
  if (mixed(r.plan)) ++mixed_optima;
  if (placement_matters(r.plan)) ++placed_optima;
  if (ex.capped_split) ++capped_optima;
  if (r.plan.schedule == disttrain::plan_schedule::zb_h1) ++zb_optima;
  for (const auto& m : r.plan.modules) selective_optima += m.selective_recompute ? 1 : 0;
  {
    int enc = 0, gen = 0, sides = 0, colocated = 0;
    for (const auto& m : r.plan.modules) {
      if (m.role == "backbone") continue;
      ++sides;
      colocated += m.colocated ? 1 : 0;
      if (!m.colocated) ++(m.role == "encoder" ? enc : gen);
    }
    if (enc >= 2 || gen >= 2) ++chained_optima;
    if (sides >= 3 && colocated > 0 && colocated < sides) ++several_mixed;
  }
  if (!c.sequence_parallel) {
    auto with = opt;
    with.sequence_parallel = true;
    const auto on = disttrain::plan_parallelism(cm, req, with);
    CHECK(on.evaluation.iteration_time_s <= r.evaluation.iteration_time_s);
    auto flipped = r.plan;
    for (auto& m : flipped.modules) m.sequence_parallel = true;
    if (!(flipped == on.plan)) ++sp_decided;
  }
  // The same for the baseline's space.
  const auto exb = disttrain::testing::exhaustive_plan(cm, req, [&] {
    auto o = opt;
    o.include_disaggregated = false;
    o.monolithic_splits = {disttrain::layer_split_rule::even};
    o.zero_bubble = false;  // Megatron-LM runs no ZB-H1
    return o;
  }());
  if (exb.plan) {
    const auto b = disttrain::plan_megatron_baseline(cm, req, opt);
    CHECK(b.plan == *exb.plan);
    if (b.plan.modules[b.plan.backbone_index()].virtual_stages > 1) ++interleaved_optima;
    CHECK(b.evaluation.iteration_time_s >= r.evaluation.iteration_time_s);
  }
}

}  // namespace

TEST_CASE("planner optimum equals exhaustive enumeration (8-64 GPUs, presets)") {
  const case_spec cases[] = {
      {"mllm-7b", "h800", 8, 4, 2, 2},     // monolithic wins on one node
      {"mllm-7b", "h800", 16, 4, 4, 1},    // disaggregated
      {"mllm-13b", "h100", 32, 4, 2, 1},   // H100 links
      {"mllm-70b", "h800", 16, 4, 2, 2},   // memory-bound: recompute / pp
      {"mllm-70b", "a100", 8, 4, 2, 1},    // infeasible: nothing fits
      {"paper-72b", "h800", 64, 2, 4, 1},  // 72B backbone, 64 GPUs
      {"paper-72b", "a100", 24, 4, 2, 1},  // 3 nodes, memory-bound
      {"mllm-7b", "h800", 16, 4, 2, 2, variant::no_generator},
      {"mllm-13b", "h800", 32, 4, 2, 1, variant::frozen_encoder},
      {"mllm-7b", "h800", 16, 4, 4, 1, variant::as_is, 2},  // at least 2 backbone stages
      // Without sync overlap (the sync is then paid in full), and with one of the two switches.
      {"mllm-7b", "h800", 16, 4, 4, 1, variant::as_is, 1, false, false},
      {"mllm-70b", "h800", 16, 4, 2, 2, variant::as_is, 1, false, false},
      {"paper-72b", "h800", 64, 2, 4, 1, variant::as_is, 1, true, false},
      {"mllm-13b", "h100", 32, 4, 2, 1, variant::as_is, 1, false, true},
      // Mixed optimum: the generator colocated, the encoder on its own GPUs.
      {"mllm-13b", "h800", 24, 8, 4, 2},
      // Small nodes: side modules of a few GPUs shift the backbone's stages across node
      // boundaries, so where a module starts decides its links (placement-aware pricing).
      {"mllm-7b", "h800", 12, 4, 4, 2, variant::as_is, 1, true, true, 4},
      {"mllm-13b", "h800", 20, 4, 4, 2, variant::as_is, 1, true, true, 4},
      {"mllm-7b", "h100", 14, 8, 2, 2, variant::as_is, 1, false, false, 4},
      // Without sequence parallelism (more activation memory per TP rank), memory-bound cases.
      {"mllm-70b", "h800", 16, 4, 2, 2, variant::as_is, 1, true, true, 0, false},
      {"mllm-13b", "a100", 8, 8, 4, 1, variant::as_is, 1, true, true, 0, false},
      {"mllm-13b", "h100", 8, 8, 4, 1, variant::as_is, 1, true, true, 0, false},
      // Memory-bound on few GPUs: the balanced split does not fit, a split capped by memory does
      // (and beats recompute or fewer stages).
      {"mllm-13b", "h800", 4, 8, 4, 1},
      {"mllm-13b", "h800", 4, 16, 4, 2, variant::as_is, 1, true, true, 0, false},
      {"paper-72b", "h800", 24, 8, 4, 1},
      // ZB-H1 in the space (planner_options::zero_bubble): every stage holds min(P, m)
      // microbatches, so it trades memory for the bubble.
      {"mllm-7b", "h800", 16, 4, 4, 1, variant::as_is, 1, true, true, 0, true, true},
      {"mllm-13b", "h800", 24, 8, 4, 2, variant::as_is, 1, true, true, 0, true, true},
      {"mllm-70b", "h800", 16, 4, 2, 2, variant::as_is, 1, true, true, 0, true, true},
      {"mllm-13b", "h800", 32, 4, 2, 1, variant::frozen_encoder, 1, true, true, 0, true, true},
      {"mllm-13b", "h800", 4, 8, 4, 1, variant::as_is, 1, true, true, 0, true, true},
      {"mllm-7b", "h800", 12, 4, 4, 2, variant::as_is, 1, false, false, 4, true, true},
      {"mllm-7b", "h800", 12, 8, 4, 2, variant::as_is, 1, true, true, 0, true, true},
      // Memory-bound with a two-stage encoder: under ZB-H1 the encoder's stages count towards
      // every backbone stage's in-flight microbatches (a split fitted without them did not fit).
      {"hires-70b", "h800", 40, 16, 2, 2, variant::as_is, 1, true, true, 0, true, true},
      // Selective recompute in the space, unfused attention (it keeps the score matrices unless
      // the layer recomputes), memory-bound.
      {"mllm-13b", "a100", 8, 8, 4, 1, variant::as_is, 1, true, true, 0, false, false, true},
      {"mllm-70b", "h800", 16, 4, 2, 2, variant::as_is, 1, true, true, 0, true, false, true},
      {"mllm-7b", "h800", 8, 8, 2, 2, variant::as_is, 1, true, true, 0, true, true, true},
  };
  for (const auto& c : cases) compare(c);
  // The space includes interleaved 1F1B (max_virtual_stages 4 by default), and it wins somewhere.
  CHECK(interleaved_optima > 0);
  // Per-side-module colocation is in the space too, and wins at least once.
  CHECK(mixed_optima > 0);
  // And optima whose links the rank placement decides (a stage across a node boundary, or a
  // module boundary inside a node).
  CHECK(placed_optima > 0);
  // Turning sequence parallelism off changes an optimum: the switch reaches the search.
  CHECK(sp_decided > 0);
  // And optima whose backbone split the memory caps decide (docs/planner.md, "Layer split").
  CHECK(capped_optima > 0);
  // ZB-H1 reaches the search and wins somewhere.
  CHECK(zb_cases == 9);
  CHECK(zb_optima > 0);
  // Selective recompute reaches the search and wins somewhere (unfused attention).
  CHECK(selective_optima > 0);
}

TEST_CASE("planner optimum equals exhaustive enumeration with several encoders or generators") {
  // dual-7b: two encoders (SigLIP-L at 384 px, SAM-B at 1024 px) feeding Llama-2-7B, SD-2.1;
  // run as a chain, the second encoder forwarding the first one's output (docs/planner.md,
  // "Several encoders or generators"). two_generators: mllm-7b with DiT-XL/2 after SD-2.1.
  const case_spec cases[] = {
      {"dual-7b", "h800", 8, 4, 2, 1},  // one node
      {"dual-7b", "h800", 16, 4, 2, 1},
      {"dual-7b", "h800", 12, 4, 2, 2, variant::as_is, 1, true, true, 4},  // small nodes
      {"dual-7b", "h800", 16, 8, 2, 1, variant::no_generator},
      {"dual-7b", "h800", 16, 4, 2, 1, variant::frozen_encoder},
      {"dual-7b", "h800", 16, 4, 2, 1, variant::as_is, 1, true, true, 0, true, true},  // ZB-H1
      {"mllm-7b", "h800", 16, 4, 2, 1, variant::two_generators},
      {"mllm-7b", "h800", 12, 4, 2, 1, variant::two_generators, 1, true, true, 4},
  };
  for (const auto& c : cases) compare(c);
  // Both chain shapes win somewhere with the side modules on their own GPUs, and mixed
  // colocation of three side modules too.
  CHECK(chained_optima > 0);
  CHECK(several_mixed > 0);
}
