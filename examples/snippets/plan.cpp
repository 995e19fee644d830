// The examples of the plan part (disttrain/plan/*.hpp): see snippets.hpp.
//! [umbrella_include]
#include <disttrain/plan.hpp>
//! [umbrella_include]
//! [json_umbrella]
#include <disttrain/json.hpp>  // to_json / from_json of every part, trace and published-run I/O
//! [json_umbrella]

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "disttrain/model.hpp"
#include "disttrain/plan/format.hpp"
#include "snippets.hpp"

namespace {

using snippets::check;

// The planner's plan for the paper-72b scenario, solved once for every example.
const disttrain::plan_result& paper_72b_result() {
  static const disttrain::plan_result r = [] {
    const auto sc = disttrain::presets::scenario_preset("paper-72b");
    const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
    return disttrain::plan_parallelism(cm, disttrain::make_request(sc));
  }();
  return r;
}

void evaluate() {
  const auto sc = disttrain::presets::scenario_preset("paper-72b");
  const disttrain::parallel_plan& plan = paper_72b_result().plan;
  //! [evaluate]
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  auto req = disttrain::make_request(sc);
  disttrain::plan_evaluation e = disttrain::evaluate(plan, cm, req.sample_workload);
  double mfu = e.mfu;  // throws errc::infeasible naming "module/stage j" if a GPU is over memory
  //! [evaluate]
  check(mfu == paper_72b_result().evaluation.mfu, "evaluate agrees with the planner");
}

void stage_report() {
  const disttrain::plan_evaluation& eval = paper_72b_result().evaluation;
  //! [stage_report]
  for (const auto& s : eval.stages)
    if (s.memory_bytes > eval.memory_limit_bytes) { /* ... */
    }
  //! [stage_report]
  check(!eval.stages.empty(), "stages reported");
  for (const auto& s : eval.stages)
    check(s.memory_bytes <= eval.memory_limit_bytes, "no stage of a planned plan is over memory");
}

void plan_evaluation() {
  const disttrain::plan_evaluation& e = paper_72b_result().evaluation;
  //! [plan_evaluation]
  std::printf("%.3f s, MFU %.1f%%\n", e.iteration_time_s, 100 * e.mfu);
  //! [plan_evaluation]
  check(e.iteration_time_s > 0 && e.mfu > 0 && e.mfu < 1, "iteration time and MFU");
}

void stage_config_of() {
  const disttrain::parallel_plan& p = paper_72b_result().plan;
  //! [stage_config_of]
  auto s = disttrain::stage_config_of(p.modules[1], 1, 0, p.modules[1].layers[0], p.modules[1].dp);
  //! [stage_config_of]
  check(s.module == 1 && s.tp == p.modules[1].tp && s.num_layers == p.modules[1].layers[0],
        "stage_config_of");
}

void fidelity() {
  // published_runs.json: data/published_runs.json, copied next to the test.
  //! [fidelity]
  auto runs = disttrain::read_published_runs(disttrain::read_json_file("published_runs.json"));
  auto s = disttrain::score_run(runs[0], disttrain::cost_params{});
  double err = s.relative_error;  // (predicted - published) / published
  //! [fidelity]
  check(s.predicted > 0 && err > -1 && err < 1, "score_run");
}

void format() {
  const disttrain::plan_result& result = paper_72b_result();
  //! [format]
  std::fputs(disttrain::format_plan(result.plan).c_str(), stdout);
  std::fputs(disttrain::format_evaluation(result.evaluation).c_str(), stdout);
  fmt::print("{}\n", disttrain::plan_schedule::one_f_one_b);  // "1f1b"
  //! [format]
  check(disttrain::format_plan(result.plan).find("qwen2-72b") != std::string::npos,
        "format_plan names the backbone");
  check(disttrain::format_evaluation(result.evaluation).starts_with("iteration "),
        "format_evaluation");
  check(fmt::format("{}", disttrain::plan_schedule::one_f_one_b) == "1f1b", "plan_schedule");
}

void topology_of() {
  const disttrain::plan_result& result = paper_72b_result();
  //! [topology_of]
  disttrain::topology t = disttrain::topology_of(result.plan);
  disttrain::require_tp_in_nodes(t, result.plan.gpus_per_node, "plan");  // the planner's are
  auto tp_groups = t.groups(disttrain::group_kind::tp);  // one MPI_Comm_split color each
  //! [topology_of]
  check(t.world_size() == result.plan.total_gpus() && !tp_groups.empty(), "topology_of");
}

void links_of() {
  //! [links_of]
  // Two encoders on their own GPUs: SAM forwards SigLIP's output to the backbone.
  const disttrain::model_spec model = disttrain::presets::dual_7b();
  disttrain::parallel_plan p;
  p.global_batch = 16;
  p.num_microbatches = 4;
  p.modules = {{"siglip-l-384", "encoder", 1, 1, 2, {24}},
               {"sam-b-1024", "encoder", 1, 2, 2, {6, 6}},
               {"llama-2-7b", "backbone", 2, 2, 2, {16, 16}},
               {"sd-2.1-unet", "generator", 1, 1, 2, {25}}};
  const disttrain::module_links sam = disttrain::links_of(p, model, 1);
  // sam.through == {{0, 2}}: its hops carry siglip -> llama;
  // sam.after == {{0, 2}, {1, 2}}: its link into the backbone carries both edges.
  //! [links_of]
  check(sam.through.size() == 1 && sam.after.size() == 2, "links_of");
}

void parallel_plan_file() {
  //! [parallel_plan_file]
  disttrain::parallel_plan p;
  p.global_batch = 64;
  p.num_microbatches = 8;  // 8 samples per pipeline microbatch
  p.modules = {{"vit", "encoder", 1, 1, 2, {32}},
               {"llm", "backbone", 4, 2, 2, {16, 16}},
               {"sd", "generator", 2, 1, 2, {1}}};
  disttrain::validate(p);  // structure only (no model needed)
  disttrain::json j = p;   // and back: j.get<parallel_plan>()
  //! [parallel_plan_file]
  check(j.get<disttrain::parallel_plan>() == p, "parallel_plan JSON round trip");
}

void plan_schedule() {
  //! [plan_schedule]
  auto k = disttrain::plan_schedule::one_f_one_b;
  //! [plan_schedule]
  check(k == disttrain::parallel_plan{}.schedule, "1F1B is the default schedule");
}

void module_plan() {
  //! [module_plan]
  disttrain::module_plan m{"llm", "backbone", 8, 4, 3, {20, 20, 20, 20}};  // 96 GPUs
  //! [module_plan]
  check(m.gpus() == 96, "module_plan gpus");
}

void parallel_plan() {
  const disttrain::plan_result& planner_result = paper_72b_result();
  //! [parallel_plan]
  disttrain::parallel_plan p = planner_result.plan;
  long long used = p.total_gpus();
  int n = p.microbatch_samples();          // samples per pipeline microbatch
  int per_replica = p.replica_samples(1);  // the backbone's microbatch size
  //! [parallel_plan]
  check(used <= 1172 && n * p.num_microbatches == p.global_batch, "plan sizes");
  check(per_replica == (n + p.modules[1].dp - 1) / p.modules[1].dp, "replica_samples");
}

void validate() {
  const disttrain::parallel_plan p = paper_72b_result().plan;
  //! [validate]
  disttrain::validate(p);
  //! [validate]
}

void planner() {
  //! [planner]
  auto sc = disttrain::presets::scenario_preset("paper-72b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  auto req = disttrain::make_request(sc);
  disttrain::plan_result ours = disttrain::plan_parallelism(cm, req);
  disttrain::plan_result base = disttrain::plan_megatron_baseline(cm, req);
  double speedup = base.evaluation.iteration_time_s / ours.evaluation.iteration_time_s;
  //! [planner]
  check(speedup >= 1, "the planner is never slower than the baseline");
}

void plan_result() {
  const disttrain::plan_result& result = paper_72b_result();
  //! [plan_result]
  std::printf("%.2f ms\n", result.solve_ms);
  //! [plan_result]
  check(result.solve_ms > 0, "solve_ms");
}

void layer_split_rule() {
  //! [layer_split_rule]
  disttrain::planner_options o;
  o.monolithic_splits = {disttrain::layer_split_rule::even};
  //! [layer_split_rule]
  check(o.monolithic_splits.size() == 1, "monolithic_splits");
}

void plan_objective() {
  //! [plan_objective]
  disttrain::planner_options o;
  o.objective = disttrain::plan_objective::min_gpus_within;
  //! [plan_objective]
  check(o.objective != disttrain::planner_options{}.objective, "objective set");
}

void planner_options() {
  //! [planner_options]
  disttrain::planner_options o;
  o.max_side_pp = 1;  // never pipeline the encoder / generator
  o.tp_candidates = {1, 2, 4, 8};
  //! [planner_options]
  check(o.max_side_pp == 1 && o.tp_candidates.size() == 4, "planner_options");
}

void read_planner_options() {
  disttrain::json config = disttrain::parse_json(R"({"planner": {"max_side_pp": 1}})");
  //! [read_planner_options]
  auto o = disttrain::read_planner_options(config["planner"], "planner");
  //! [read_planner_options]
  check(o.max_side_pp == 1, "read_planner_options");
}

void plan_request() {
  //! [plan_request]
  auto sc = disttrain::presets::scenario_preset("paper-72b");
  disttrain::plan_request req = disttrain::make_request(sc);  // batch 1024
  //! [plan_request]
  check(req.global_batch == 1024, "make_request(scenario)");
}

void make_request() {
  const auto model = disttrain::presets::paper_72b();
  const auto data = disttrain::presets::laion400m_like();
  //! [make_request]
  auto r = disttrain::make_request(model, data, 512);
  //! [make_request]
  check(r.global_batch == 512 && r.sample_workload[1].tokens > 0, "make_request");
}

void umbrella() {
  const auto scenario = disttrain::presets::scenario_preset("paper-72b");
  const disttrain::analytic_cost_model cost_model(scenario.model, scenario.cluster);
  //! [umbrella]
  auto result = disttrain::plan_parallelism(cost_model, disttrain::make_request(scenario));
  auto topology = disttrain::topology_of(result.plan);
  //! [umbrella]
  check(topology.world_size() == result.plan.total_gpus(), "umbrella: planner and topology");
}

}  // namespace

int main() {
  snippets::runner r("plan");
  r.run("evaluate", evaluate);
  r.run("stage_report", stage_report);
  r.run("plan_evaluation", plan_evaluation);
  r.run("stage_config_of", stage_config_of);
  r.run("fidelity", fidelity);
  r.run("format", format);
  r.run("topology_of", topology_of);
  r.run("links_of", links_of);
  r.run("parallel_plan_file", parallel_plan_file);
  r.run("plan_schedule", plan_schedule);
  r.run("module_plan", module_plan);
  r.run("parallel_plan", parallel_plan);
  r.run("validate", validate);
  r.run("planner", planner);
  r.run("plan_result", plan_result);
  r.run("layer_split_rule", layer_split_rule);
  r.run("plan_objective", plan_objective);
  r.run("planner_options", planner_options);
  r.run("read_planner_options", read_planner_options);
  r.run("plan_request", plan_request);
  r.run("make_request", make_request);
  r.run("umbrella", umbrella);
  return r.finish();
}
