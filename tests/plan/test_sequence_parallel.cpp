// Sequence parallelism (Megatron-LM's --sequence-parallel) as a switch: in the
// cost model's memory (hand computation), in plan and planner-option JSON, in
// evaluate, in the planner (its optimum without SP is never faster than with
// it) and in simulate_plan, which costs a plan's stages like evaluate does.
#include <string>
#include <tuple>
#include <vector>

#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
module_workload one_sequence(double s) {
  module_workload w;
  w.add_sequence(s);
  return w;
}
stage_config without_sp(stage_config s) {
  s.sequence_parallel = false;
  return s;
}
}  // namespace

TEST_CASE("without sequence parallelism the norm and GEMM inputs are whole on every TP rank") {
  // Llama-2-7B layers 0..15, TP 2, DP 4, one 4096-token sequence, 3 in flight.
  const model_spec model{.name = "solo", .modules = {presets::llama2_7b()}};
  const analytic_cost_model cm(model, presets::h800_cluster(64));
  const double h = 4096, mlp = 11008, tokens = 4096, tp = 2;
  const double act = 2 * (6 * h + 2 * h + 3 * mlp);  // bytes per token and layer
  const double whole = 2 * 4 * h;                    // two norm inputs, the QKV and fc1 inputs
  const stage_config sp{0, 0, 16, 2, 4, false};
  CHECK(sp.sequence_parallel);  // the default: what Megatron-LM runs today
  const auto on = cm.stage_memory(sp, one_sequence(tokens), 3);
  const auto off = cm.stage_memory(without_sp(sp), one_sequence(tokens), 3);
  CHECK(on.activations == Approx(3 * 16 * act * tokens / tp).epsilon(1e-12));
  CHECK(off.activations ==
        Approx(3 * 16 * ((act - whole) * tokens / tp + whole * tokens)).epsilon(1e-12));
  CHECK(off.params == on.params);
  CHECK(off.grads == on.grads);
  CHECK(off.optimizer == on.optimizer);

  // Full recompute: the checkpoint (the layer input, 2h bytes per token) is whole too, and so
  // is the replicated part of the one layer recomputed at a time.
  stage_config rc = sp;
  rc.recompute = true;
  const auto rc_off = cm.stage_memory(without_sp(rc), one_sequence(tokens), 3);
  CHECK(rc_off.activations ==
        Approx(3 * 16 * 2 * h * tokens + (act - whole) * tokens / tp + whole * tokens)
            .epsilon(1e-12));

  // Times do not change (reduce-scatter + all-gather move the bytes of one all-reduce), and at
  // TP 1 nothing changes at all.
  CHECK(cm.stage_time(without_sp(sp), one_sequence(tokens)) ==
        cm.stage_time(sp, one_sequence(tokens)));
  const stage_config tp1{0, 0, 16, 1, 4, false};
  CHECK(cm.stage_memory(without_sp(tp1), one_sequence(tokens), 3).activations ==
        cm.stage_memory(tp1, one_sequence(tokens), 3).activations);
}

TEST_CASE("sequence_parallel in plan and planner-option JSON") {
  module_plan m{"llm", "backbone", 4, 2, 2, {16, 16}};
  CHECK(m.sequence_parallel);
  json j = m;
  CHECK(j["sequence_parallel"] == true);
  j.erase("sequence_parallel");
  CHECK(j.get<module_plan>().sequence_parallel);  // absent: on
  j["sequence_parallel"] = false;
  const auto back = j.get<module_plan>();
  CHECK_FALSE(back.sequence_parallel);
  CHECK(json(back)["sequence_parallel"] == false);
  j["sequence_parallel"] = "yes";
  DISTTRAIN_CHECK_ERROR(j.get<module_plan>(), errc::parse_error, "plan.llm.sequence_parallel");

  CHECK(planner_options{}.sequence_parallel);
  CHECK_FALSE(read_planner_options(json{{"sequence_parallel", false}}).sequence_parallel);
  DISTTRAIN_CHECK_ERROR(read_planner_options(json{{"sequence_parallel", 1.5}}), errc::parse_error,
                        "planner.sequence_parallel");
}

TEST_CASE("the planner without sequence parallelism: its plans run without it, never faster") {
  // Memory-bound: a 13B backbone on one A100 / H100 node (where SP decides the optimum), a 72B
  // one on 32 H800s (where it does not: without SP the layer split capped by memory keeps the
  // same layout and time) and a 7B one on 16 H800s (where it does not either).
  int decided = 0;
  for (const auto& [preset, cluster, gpus, batch] :
       {std::tuple{"mllm-13b", "a100", 8, 8}, std::tuple{"mllm-13b", "h100", 8, 8},
        std::tuple{"paper-72b", "h800", 32, 8}, std::tuple{"mllm-7b", "h800", 16, 8}}) {
    INFO(preset << " on " << gpus << " " << cluster << ", batch " << batch);
    auto sc = presets::scenario_preset(preset);
    sc.cluster = presets::cluster_preset(cluster, gpus);
    const analytic_cost_model cm(sc.model, sc.cluster);
    const auto req = make_request(sc.model, sc.data, batch, 256);
    planner_options opt;
    opt.max_backbone_pp = 4;
    opt.max_side_pp = 1;
    const auto on = plan_parallelism(cm, req, opt);
    opt.sequence_parallel = false;
    const auto off = plan_parallelism(cm, req, opt);
    if (off.evaluation.iteration_time_s > on.evaluation.iteration_time_s) ++decided;
    for (const auto& m : on.plan.modules) CHECK(m.sequence_parallel);
    for (const auto& m : off.plan.modules) CHECK_FALSE(m.sequence_parallel);
    // Every plan without SP also fits with it, in the same time: the space with SP dominates.
    CHECK(off.evaluation.iteration_time_s >= on.evaluation.iteration_time_s);
    // The plan without SP, scored with SP, keeps its time and needs no more memory; the
    // planner's plan with SP, scored without it, needs more wherever a module has tp > 1.
    parallel_plan flipped = off.plan;
    for (auto& m : flipped.modules) m.sequence_parallel = true;
    const auto e = evaluate(flipped, cm, req.sample_workload);
    CHECK(e.iteration_time_s == off.evaluation.iteration_time_s);
    CHECK(e.max_memory_bytes <= off.evaluation.max_memory_bytes);
    flipped = on.plan;
    bool split = false;
    for (auto& m : flipped.modules) {
      m.sequence_parallel = false;
      split = split || m.tp > 1;
    }
    if (!split) continue;
    evaluate_options unchecked;
    unchecked.check_memory = false;
    const auto more = evaluate(flipped, cm, req.sample_workload, unchecked);
    CHECK(more.iteration_time_s == on.evaluation.iteration_time_s);
    CHECK(more.max_memory_bytes > on.evaluation.max_memory_bytes);
  }
  CHECK(decided == 2);
}

TEST_CASE("a plan that fits only with sequence parallelism is infeasible without it") {
  // The 70B backbone at TP 8 on four stages, no recompute, the side modules colocated. Without
  // SP a layer keeps 2.7x the activation bytes per TP rank, so some batch size on a doubling
  // ladder fits with SP and not without it.
  auto sc = presets::scenario_preset("mllm-70b");
  sc.cluster = presets::cluster_preset("h800", 32);
  const analytic_cost_model cm(sc.model, sc.cluster);
  const auto& mods = sc.model.modules;
  REQUIRE(mods.size() == 3);
  const int layers = mods[1].layers();
  bool decided = false;
  for (int batch = 1; batch <= 1024 && !decided; batch *= 2) {
    const auto req = make_request(sc.model, sc.data, batch, 256);
    parallel_plan p;
    p.global_batch = batch;
    p.num_microbatches = 1;
    p.modules = {module_plan{mods[0].name, "encoder", 1, 1, 1, {mods[0].layers()}, false, true},
                 module_plan{mods[1].name, "backbone", 8, 4, 1, std::vector<int>(4, layers / 4)},
                 module_plan{mods[2].name, "generator", 1, 1, 1, {mods[2].layers()}, false, true}};
    evaluate_options unchecked;
    unchecked.check_memory = false;
    const double with = evaluate(p, cm, req.sample_workload, unchecked).max_memory_bytes;
    for (auto& m : p.modules) m.sequence_parallel = false;
    const double without = evaluate(p, cm, req.sample_workload, unchecked).max_memory_bytes;
    INFO("batch " << batch << ": " << with << " bytes with SP, " << without << " without");
    CHECK(without > with);
    if (with <= cm.memory_limit() && without > cm.memory_limit()) {
      decided = true;
      DISTTRAIN_CHECK_ERROR(evaluate(p, cm, req.sample_workload), errc::infeasible, "llama-3-70b");
      for (auto& m : p.modules) m.sequence_parallel = true;
      CHECK_NOTHROW(evaluate(p, cm, req.sample_workload));
    }
  }
  CHECK(decided);
}

TEST_CASE("simulate_plan costs a plan's stages as evaluate does (selective recompute)") {
  auto sc = presets::scenario_preset("mllm-7b");
  sc.cluster = presets::cluster_preset("h800", 16);
  const analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = make_request(sc.model, sc.data, 8, 256);
  planner_options opt;
  opt.max_virtual_stages = 1;  // simulate_plan runs plain 1F1B
  parallel_plan p = plan_parallelism(cm, req, opt).plan;
  const auto base = simulate_plan(p, cm, req.sample_workload).result.iteration_time;
  for (auto& m : p.modules) m.selective_recompute = !m.recompute;
  // Selective recompute runs the attention core again in backward: evaluate and the simulation
  // both get slower.
  const auto e = evaluate(p, cm, req.sample_workload);
  const auto s = simulate_plan(p, cm, req.sample_workload).result.iteration_time;
  CHECK(s > base);
  // Within the band measured on the presets (docs/planner.md: simulated / evaluated 0.90-1.02).
  INFO("simulated / evaluated = " << s / e.iteration_time_s);
  CHECK(s / e.iteration_time_s > 0.90);
  CHECK(s / e.iteration_time_s < 1.02);
}
