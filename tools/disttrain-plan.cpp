// disttrain-plan: lay out a multimodal model on N GPUs (disaggregated model
// orchestration) and compare with the Megatron-LM-style monolithic layout.
//
//   disttrain-plan --preset paper-72b
//   disttrain-plan --preset mllm-7b --gpus 128 --json
//   disttrain-plan --config my_setup.json --trace iteration.trace.json --svg iteration.svg
//   disttrain-plan --preset mllm-13b --evaluate plan.json
//   disttrain-plan --preset paper-72b --iterations 8    # the data-heterogeneity gain, simulated
//
// Exit status: 0 on success, 1 when the request is impossible or an input is
// malformed (the message names the field or the limit), 2 on a usage error.
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "disttrain/bind/data_plan.hpp"
#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/bind/json.hpp"
#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/model/scenario.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/format.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/sim/svg.hpp"
#include "disttrain/sim/trace.hpp"

namespace {

constexpr const char* usage_text =
    R"(usage: disttrain-plan [--preset NAME | --config FILE.json] [options]

Plans the layout of a multimodal model (encoder -> LLM backbone -> generator)
on a GPU cluster: per-module GPUs, TP/PP/DP, layers per stage, microbatches and
recompute, minimising the modelled iteration time; prints the plan, its
iteration time and MFU, the Megatron-LM-style baseline's and the speedup.

  --preset NAME        built-in scenario (see --list-presets; default paper-72b)
  --config FILE.json   scenario file: {"model", "cluster", "data", "global_batch_size"}
                       ("model"/"data" may name a preset; "cluster" may be
                       {"preset": "h800", "num_gpus": 64}); optional "planner"
                       (planner_options' fields: "max_backbone_pp", "max_side_pp",
                       "tp_candidates", "search_recompute", "search_selective_recompute",
                       "include_mixed",
                       "max_virtual_stages", "overlap_grad_reduce", "sequence_parallel", "zero_bubble",
                       "objective",
                       "within", "max_gpus", ...; docs/planner.md) and "cost"
                       (cost-model parameters)
  --gpus N             override the cluster's GPU count
  --batch N            override the global batch (samples per iteration)
  --max-side-pp N      most pipeline stages of the encoder / generator (default 2)
  --max-backbone-pp N  most pipeline stages of the backbone (default: its layers)
  --min-backbone-pp N  fewest pipeline stages of the backbone (default 1)
  --max-virtual-stages N  most interleaved 1F1B chunks per backbone device (default 4;
                       1: plain 1F1B, which --trace / --svg need)
  --objective OBJ      what to minimise: time (default), throughput_per_gpu (time x GPUs),
                       min_gpus_within (fewest GPUs within --within of the best time)
  --data-objective D   what the time is of: sampled (default with --objective time when
                       the data varies: the mean iteration over sampled global batches after
                       the reorderer, interleaving not searched) or expected (the closed form
                       of the expected batch; docs/planner.md "Planning for the data")
  --data-batches N     sampled batches the sampled objective averages (default 8)
  --finalists N        also simulate the N best plans of the sampled objective with
                       simulate_plan and keep the fastest (slower; default 0)
  --within X           tolerance of min_gpus_within as a fraction (default 0.05)
  --max-gpus N         use at most N of the cluster's GPUs
  --no-mixed           never colocate just one side module (per-side-module colocation)
  --selective-recompute  also try selective (attention-core) recompute, plan and baseline
                       (it saves memory only with an unfused attention core:
                       "cost": {"attention_score_bytes": 5})
  --zero-bubble        also consider ZB-H1 (B/W split, Ws in the bubbles; every stage
                       holds min(stages, microbatches) microbatches) for the plan; the
                       baseline stays 1F1B / interleaved, as Megatron-LM runs
  --no-sequence-parallel  plans and baseline run TP without Megatron-LM's
                       --sequence-parallel (more activation memory per TP rank)
  --sync-overlap MODE  DP gradient sync overlap of the plan and the baseline, as
                       Megatron-LM's flags: all (default: --overlap-grad-reduce and
                       --overlap-param-gather), grad (--overlap-grad-reduce only), none
  --evaluate PLAN.json score a given plan (a plan object, or --json output) instead
  --json               print one JSON object (plan, iteration_time_s, mfu,
                       baseline, speedup, solve_ms)
  --stages             also print every pipeline stage (time, memory, in flight)
  --trace FILE         write the simulated iteration as Chrome/Perfetto trace JSON
  --svg FILE           write the simulated iteration as an SVG timeline
  --iterations N       simulate N sampled global batches (every GPU's bound program, in
                       the plan's schedule, interleaved 1F1B included): (a) the baseline
                       with the data in arrival order, (b) the plan in arrival order,
                       (c) the plan with the reorderer's map; prints the iteration times
                       (median, p90) and the orchestration (a/b) and reordering (b/c)
                       gains. Seconds at paper-72b scale (docs/planner.md)
  --seed S             data stream seed of --iterations' batches (default: the data's own)
  --list-presets       list the built-in scenarios
  -h, --help           this text
)";

struct args {
  std::string preset = "paper-72b";
  std::optional<std::string> config, evaluate_file, trace_file, svg_file;
  std::optional<int> gpus, batch, max_side_pp, max_backbone_pp, min_backbone_pp, max_virtual_stages,
      max_gpus, iterations, data_batches, finalists;
  std::optional<std::string> sync_overlap, objective, within, data_objective;
  std::optional<std::uint64_t> seed;
  bool json = false, stages = false, list = false, no_mixed = false, no_sp = false,
       zero_bubble = false, selective = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "disttrain-plan: %s\n%s", msg.c_str(), usage_text);
  std::exit(2);
}

int parse_int(std::string_view flag, const char* v) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x <= 0 || x > 100000000)
    disttrain::fail(disttrain::errc::invalid_argument, flag, "expects a positive integer, got '", v,
                    "'");
  return static_cast<int>(x);
}

std::uint64_t parse_seed(const char* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0' || *v == '-' || *v == '+' || errno == ERANGE)
    disttrain::fail(disttrain::errc::invalid_argument, "--seed",
                    "expects an integer in [0, 2^64), got '", v, "'");
  return static_cast<std::uint64_t>(x);
}

args parse(int argc, char** argv) {
  args a;
  bool preset_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view s(argv[i]);
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", s));
      return argv[++i];
    };
    if (s == "--preset")
      a.preset = value(), preset_given = true;
    else if (s == "--config")
      a.config = value();
    else if (s == "--gpus")
      a.gpus = parse_int("--gpus", value());
    else if (s == "--batch")
      a.batch = parse_int("--batch", value());
    else if (s == "--max-side-pp")
      a.max_side_pp = parse_int("--max-side-pp", value());
    else if (s == "--max-backbone-pp")
      a.max_backbone_pp = parse_int("--max-backbone-pp", value());
    else if (s == "--min-backbone-pp")
      a.min_backbone_pp = parse_int("--min-backbone-pp", value());
    else if (s == "--max-virtual-stages")
      a.max_virtual_stages = parse_int("--max-virtual-stages", value());
    else if (s == "--objective")
      a.objective = value();
    else if (s == "--within")
      a.within = value();
    else if (s == "--data-objective")
      a.data_objective = value();
    else if (s == "--data-batches")
      a.data_batches = parse_int("--data-batches", value());
    else if (s == "--finalists")
      a.finalists = parse_int("--finalists", value());
    else if (s == "--max-gpus")
      a.max_gpus = parse_int("--max-gpus", value());
    else if (s == "--sync-overlap")
      a.sync_overlap = value();
    else if (s == "--evaluate")
      a.evaluate_file = value();
    else if (s == "--trace")
      a.trace_file = value();
    else if (s == "--svg")
      a.svg_file = value();
    else if (s == "--iterations")
      a.iterations = parse_int("--iterations", value());
    else if (s == "--seed")
      a.seed = parse_seed(value());
    else if (s == "--no-mixed")
      a.no_mixed = true;
    else if (s == "--no-sequence-parallel")
      a.no_sp = true;
    else if (s == "--zero-bubble")
      a.zero_bubble = true;
    else if (s == "--selective-recompute")
      a.selective = true;
    else if (s == "--json")
      a.json = true;
    else if (s == "--stages")
      a.stages = true;
    else if (s == "--list-presets")
      a.list = true;
    else if (s == "-h" || s == "--help") {
      std::fputs(usage_text, stdout);
      std::exit(0);
    } else
      usage_error(fmt::format("unknown argument '{}'", s));
  }
  if (preset_given && a.config) usage_error("give --preset or --config, not both");
  if (a.iterations && a.evaluate_file)
    usage_error("--iterations plans; it does not take --evaluate");
  if (a.seed && !a.iterations) usage_error("--seed needs --iterations");
  return a;
}

// ---- scenario from a config file -------------------------------------------

disttrain::scenario read_config(const std::string& path, std::optional<int> gpus,
                                disttrain::planner_options& popt, disttrain::cost_params& cparams) {
  using disttrain::json;
  json j = disttrain::read_json_file(path);
  if (!j.is_object()) disttrain::fail(disttrain::errc::parse_error, path, "expected a JSON object");
  disttrain::check_keys(
      j,
      {"name", "description", "model", "cluster", "data", "global_batch_size", "planner", "cost"},
      "");
  // Preset names as shortcuts.
  if (j.contains("model") && j["model"].is_string())
    j["model"] = json(disttrain::presets::model_preset(j["model"].get<std::string>()));
  if (j.contains("data") && j["data"].is_string())
    j["data"] = json(disttrain::presets::data_preset(j["data"].get<std::string>()));
  if (j.contains("cluster") && j["cluster"].is_object() && j["cluster"].contains("preset")) {
    disttrain::check_keys(j["cluster"], {"preset", "num_gpus"}, "cluster");
    const auto name = disttrain::json_get<std::string>(j["cluster"], "preset", "cluster");
    const int n = gpus ? *gpus : disttrain::json_get<int>(j["cluster"], "num_gpus", "cluster");
    disttrain::require_positive(n, "cluster.num_gpus");
    j["cluster"] = json(disttrain::presets::cluster_preset(name, n));
  }
  if (gpus && j.contains("cluster") && j["cluster"].is_object()) j["cluster"]["num_gpus"] = *gpus;
  if (j.contains("planner")) popt = disttrain::read_planner_options(j["planner"], "planner", popt);
  const json cost = j.contains("cost") ? j["cost"] : json::object();
  j.erase("planner");  // read above; the rest is the scenario
  j.erase("cost");
  auto sc = disttrain::read_scenario(j, "");
  // The GPU's calibrated defaults (cost_params.hpp), overridden by the config's "cost".
  cparams = disttrain::read_cost_params(cost, "cost",
                                        disttrain::calibrated_cost_params(sc.cluster.gpu.name));
  if (sc.name.empty()) sc.name = path;
  return sc;
}

// ---- output ----------------------------------------------------------------

double per_gpu_throughput(const disttrain::plan_result& r) {
  return r.evaluation.samples_per_s / static_cast<double>(r.evaluation.gpus);
}

template <class C>
void write_timeline(const args& a, const disttrain::parallel_plan& plan, const C& cm,
                    const disttrain::model_workload& w, disttrain::json* out) {
  if (!a.trace_file && !a.svg_file) return;
  const auto sim = disttrain::simulate_plan(plan, cm, w);
  if (a.trace_file)
    disttrain::write_json_file(*a.trace_file,
                               disttrain::to_trace_json(sim.world, sim.result, &sim.topo), 0);
  if (a.svg_file) {
    std::FILE* f = std::fopen(a.svg_file->c_str(), "w");
    if (!f)
      disttrain::fail(disttrain::errc::invalid_argument, *a.svg_file,
                      "cannot open file for writing");
    const std::string svg = disttrain::to_svg(sim.world, sim.result, &sim.topo);
    const bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
    if (std::fclose(f) != 0 || !ok)
      disttrain::fail(disttrain::errc::invalid_argument, *a.svg_file, "write failed");
  }
  if (out)
    (*out)["simulated_iteration_time_s"] = sim.result.iteration_time;
  else
    fmt::print("Simulated iteration (bound program, {} ranks, {} ops): {:.4f} s{}{}\n",
               sim.world.world_size(), sim.world.num_ops(), sim.result.iteration_time,
               a.trace_file ? "; trace: " + *a.trace_file : "",
               a.svg_file ? "; svg: " + *a.svg_file : "");
}

// --iterations: the plan and the baseline simulated on sampled batches
// (bind/heterogeneity.hpp), each as planned (interleaved 1F1B included).
struct heterogeneity_run {
  disttrain::heterogeneity_result h;
  disttrain::plan_result ours, base;  // the plans simulated
  double wall_s = 0;
};

template <class C>
heterogeneity_run simulate_data(const args& a, const disttrain::scenario& sc, const C& cm,
                                const disttrain::plan_result& ours,
                                const disttrain::plan_result& base) {
  heterogeneity_run out{{}, ours, base, 0.0};
  const auto t0 = std::chrono::steady_clock::now();
  out.h = disttrain::simulate_heterogeneity(out.base.plan, out.ours.plan, cm, sc.data,
                                            {.iterations = *a.iterations, .seed = a.seed});
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

// What simulate_plan ran: every GPU's bound program, in the plans' schedules.
std::string programs(const heterogeneity_run& r) {
  const auto name = [](const disttrain::parallel_plan& p) {
    int v = 1;
    for (const auto& m : p.modules) v = std::max(v, m.virtual_stages);
    return v > 1 ? fmt::format("interleaved {} ({} chunks)", p.schedule, v)
                 : fmt::format("{}", p.schedule);
  };
  return fmt::format("every GPU's bound program: baseline {}, plan {}", name(r.base.plan),
                     name(r.ours.plan));
}

// The sampled objective's answer, when it was used.
const disttrain::data_plan_result* sampled(const disttrain::data_plan_result& d) {
  return d.objective == disttrain::data_objective::sampled ? &d : nullptr;
}

disttrain::json to_json(const heterogeneity_run& r, const disttrain::data_plan_result* pred) {
  disttrain::json j = r.h;
  if (pred) {
    j["plan_reordered"]["predicted_mean_s"] = pred->predicted.mean_s;
    j["plan_reordered"]["predicted_p90_s"] = pred->predicted.p90_s;
    j["plan_reordered"]["predicted_mfu"] = pred->predicted_mfu;
  }
  j["simulator"] = "simulate_plan: " + programs(r);
  j["baseline_evaluated_s"] = r.base.evaluation.iteration_time_s;
  j["plan_evaluated_s"] = r.ours.evaluation.iteration_time_s;
  j["wall_s"] = r.wall_s;
  return j;
}

void print(const heterogeneity_run& r, const disttrain::data_plan_result* pred) {
  const auto& h = r.h;
  fmt::print(
      "\nData heterogeneity, simulated: {} sampled global batches of {} (data seed {}), each "
      "run by simulate_plan ({} on the batch's own samples; {:.1f} s):\n",
      h.iterations, h.global_batch, h.seed, programs(r), r.wall_s);
  fmt::print("  {:<28} {:>9} {:>9} {:>9} {:>15} {:>6} {:>6}\n", "case", "median", "p90", "mean",
             "expected batch", "MFU", "GPUs");
  const auto row = [](const char* name, const disttrain::heterogeneity_case& c) {
    fmt::print("  {:<28} {:>7.4f} s {:>7.4f} s {:>7.4f} s {:>13.4f} s {:>5.1f}% {:>6}\n", name,
               c.times.median_s, c.times.p90_s, c.times.mean_s, c.expected_s, 100 * c.mfu, c.gpus);
  };
  row("(a) baseline, arrival order", h.baseline_arrival);
  row("(b) plan, arrival order", h.plan_arrival);
  row("(c) plan, reordered", h.plan_reordered);
  row("(d) baseline, reordered", h.baseline_reordered);
  if (pred)
    fmt::print("  {:<28} {:>9} {:>7.4f} s {:>7.4f} s {:>15} {:>5.1f}%\n",
               "(c) predicted by the planner", "", pred->predicted.p90_s, pred->predicted.mean_s,
               "", 100 * pred->predicted_mfu);
  fmt::print(
      "Gains (ratios of mean iteration times): orchestration (d)/(c) {:.3f}x, reordering "
      "(b)/(c) {:.3f}x, total (a)/(c) {:.3f}x; orchestration in arrival order (a)/(b) "
      "{:.3f}x\n",
      h.orchestration_gain, h.reordering_gain, h.total_gain, h.orchestration_gain_arrival);
}

// The sampled objective's prediction and search, in words.
std::string describe(const disttrain::data_plan_result& d) {
  std::string s = fmt::format(
      "predicted on {} sampled batches (the planner's own, held out from --iterations'): mean "
      "{:.4f} s, p90 {:.4f} s, MFU {:.1f}% (the expected-batch optimum's closed form: {:.4f} s)\n",
      d.batches, d.predicted.mean_s, d.predicted.p90_s, 100 * d.predicted_mfu,
      d.expected_optimum_s);
  s += fmt::format(
      "search: {} plan classes within the bound, {} scored by the chain model ({} cut early), "
      "{} simulated\n",
      d.stats.classes, d.stats.screened, d.stats.cut_early, d.stats.simulated);
  if (d.stats.below_closed > 0)
    s += fmt::format(
        "warning: {} scored batches ran under their plan's closed form by more than "
        "the bound's slack (assumption A7, docs/planner.md)\n",
        d.stats.below_closed);
  return s;
}

int run(const args& a) {
  if (a.list) {
    for (const auto& n : disttrain::presets::scenario_preset_names())
      fmt::print("{:<12} {}\n", n, disttrain::presets::scenario_preset(n).description);
    return 0;
  }
  disttrain::planner_options popt;
  disttrain::cost_params cparams;
  disttrain::scenario sc = a.config ? read_config(*a.config, a.gpus, popt, cparams)
                                    : disttrain::presets::scenario_preset(a.preset);
  if (!a.config) cparams = disttrain::calibrated_cost_params(sc.cluster.gpu.name);
  if (a.gpus) sc.cluster.num_gpus = *a.gpus;
  if (a.batch) sc.global_batch_size = *a.batch;
  if (a.max_side_pp) popt.max_side_pp = *a.max_side_pp;
  if (a.max_backbone_pp) popt.max_backbone_pp = *a.max_backbone_pp;
  if (a.min_backbone_pp) popt.min_backbone_pp = *a.min_backbone_pp;
  if (a.max_virtual_stages) popt.max_virtual_stages = *a.max_virtual_stages;
  if (a.max_gpus) popt.max_gpus = *a.max_gpus;
  if (a.no_mixed) popt.include_mixed = false;
  if (a.no_sp) popt.sequence_parallel = false;
  if (a.zero_bubble) popt.zero_bubble = true;
  if (a.selective) popt.search_selective_recompute = true;
  if (a.objective) popt.objective = disttrain::parse_objective(*a.objective, "--objective");
  if (a.within) {
    char* end = nullptr;
    popt.within = std::strtod(a.within->c_str(), &end);
    if (end == a.within->c_str() || *end != '\0')
      disttrain::fail(disttrain::errc::invalid_argument, "--within", "expects a number, got '",
                      *a.within, "'");
  }
  if (a.sync_overlap) {
    const std::string& v = *a.sync_overlap;
    if (v != "all" && v != "grad" && v != "none")
      disttrain::fail(disttrain::errc::invalid_argument, "--sync-overlap",
                      "expects all, grad or none, got '", v, "'");
    popt.overlap_grad_reduce = v != "none";
    popt.overlap_param_gather = v == "all";
  }
  sc.validate();
  cparams.validate_for(sc.cluster.gpu, "cost");
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster, cparams);
  const auto req = disttrain::make_request(sc);
  const std::string title =
      fmt::format("{}: {} GPUs ({} x {}), global batch {}", sc.name, sc.cluster.num_gpus,
                  sc.cluster.gpu.name, sc.cluster.gpus_per_node, sc.global_batch_size);

  if (a.evaluate_file) {
    const auto pj = disttrain::read_json_file(*a.evaluate_file);
    const auto plan = (pj.is_object() && pj.contains("plan") ? pj.at("plan") : pj)
                          .get<disttrain::parallel_plan>();
    if (plan.global_batch != sc.global_batch_size)
      disttrain::fail(disttrain::errc::invalid_argument, "plan.global_batch", "is ",
                      plan.global_batch, ", but the scenario's global batch is ",
                      sc.global_batch_size, " (give --batch ", plan.global_batch,
                      " to evaluate it for that batch)");
    const auto e = disttrain::evaluate(plan, cm, req.sample_workload);
    if (a.json) {
      disttrain::json out{{"scenario", sc.name},
                          {"plan", plan},
                          {"iteration_time_s", e.iteration_time_s},
                          {"mfu", e.mfu},
                          {"evaluation", e}};
      write_timeline(a, plan, cm, req.sample_workload, &out);
      fmt::print("{}\n", out.dump(2));
    } else {
      fmt::print("{}\nGiven plan ({}):\n{}{}", title, *a.evaluate_file,
                 disttrain::format_plan(plan), disttrain::format_evaluation(e, a.stages));
      write_timeline(a, plan, cm, req.sample_workload, nullptr);
    }
    return 0;
  }

  disttrain::data_plan_options dopt;
  dopt.objective =
      a.data_objective ? disttrain::parse_data_objective(*a.data_objective, "--data-objective")
      : popt.objective == disttrain::plan_objective::time ? disttrain::data_objective::sampled
                                                          : disttrain::data_objective::expected;
  if (a.data_batches) dopt.batches = *a.data_batches;
  if (a.finalists) dopt.finalists = *a.finalists;
  const auto data_plan = disttrain::plan_for_data(cm, req, sc.data, popt, dopt);
  const disttrain::data_plan_result* pred = sampled(data_plan);
  const auto& ours = data_plan.result;
  const auto base = disttrain::plan_megatron_baseline(cm, req, popt);
  const double speedup = base.evaluation.iteration_time_s / ours.evaluation.iteration_time_s;
  if (a.json) {
    disttrain::json out = disttrain::json(ours);
    out["scenario"] = sc.name;
    out["num_gpus"] = sc.cluster.num_gpus;
    out["global_batch"] = sc.global_batch_size;
    out["baseline"] = disttrain::json(base);
    out["speedup"] = speedup;
    out["objective"] = std::string(disttrain::to_string(popt.objective));
    out["data_objective"] = std::string(disttrain::to_string(data_plan.objective));
    out["per_gpu_speedup"] = per_gpu_throughput(ours) / per_gpu_throughput(base);
    out["baseline_gpus_unused"] = sc.cluster.num_gpus - base.evaluation.gpus;
    write_timeline(a, ours.plan, cm, req.sample_workload, &out);
    if (pred) out["data_plan"] = data_plan;
    if (a.iterations) out["heterogeneity"] = to_json(simulate_data(a, sc, cm, ours, base), pred);
    if (const auto pub = disttrain::presets::published(sc.name))
      out["published"] = {{"mfu", pub->mfu}, {"speedup", pub->speedup}, {"source", pub->source}};
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{}\n{}\n\n", title, sc.description);
  int sides = 0, colocated = 0;
  for (const auto& m : ours.plan.modules)
    if (m.role != "backbone") ++sides, colocated += m.colocated ? 1 : 0;
  const char* family = colocated == 0       ? "disaggregated"
                       : colocated == sides ? "monolithic: disaggregation does not pay off here"
                                            : "mixed: one side module colocated";
  if (pred)
    fmt::print(
        "Planned layout ({}; objective {} over sampled batches: the mean iteration of {} sampled "
        "global batches after the reorderer; solved in {:.1f} ms):\n{}{}{}\n",
        family, disttrain::to_string(popt.objective), data_plan.batches, ours.solve_ms,
        disttrain::format_plan(ours.plan), disttrain::format_evaluation(ours.evaluation, a.stages),
        describe(data_plan));
  else
    fmt::print(
        "Planned layout ({}; objective {}; exact over its search space, solved in {:.1f} "
        "ms):\n{}{}\n",
        family, disttrain::to_string(popt.objective), ours.solve_ms,
        disttrain::format_plan(ours.plan), disttrain::format_evaluation(ours.evaluation, a.stages));
  fmt::print(
      "Megatron-LM-style baseline (one TP/PP/DP, encoder on the first stage, generator on the "
      "last, even "
      "layer split):\n{}{}\n",
      disttrain::format_plan(base.plan), disttrain::format_evaluation(base.evaluation, a.stages));
  const double per_gpu = per_gpu_throughput(ours) / per_gpu_throughput(base);
  if (popt.objective == disttrain::plan_objective::time) {
    fmt::print(
        "Speedup over the baseline (closed forms of the expected batch): {:.2f}x iteration time "
        "({:.4f} s vs {:.4f} s), MFU {:.1f}% on {} GPUs vs {:.1f}% on {} GPUs\n",
        speedup, ours.evaluation.iteration_time_s, base.evaluation.iteration_time_s,
        100 * ours.evaluation.mfu, ours.evaluation.gpus, 100 * base.evaluation.mfu,
        base.evaluation.gpus);
    if (base.evaluation.gpus < ours.evaluation.gpus)
      fmt::print(
          "Both were given {} GPUs; the baseline's best layout uses {} of them (more do not make "
          "it faster), ours {}: per GPU, ours gives {:.3f} samples/s, the baseline {:.3f} "
          "({:.2f}x).\n",
          sc.cluster.num_gpus, base.evaluation.gpus, ours.evaluation.gpus, per_gpu_throughput(ours),
          per_gpu_throughput(base), per_gpu);
  } else {
    // Different GPU counts: an iteration-time ratio would compare unequal resources.
    fmt::print(
        "Per GPU: ours {:.3f} samples/s on {} GPUs (MFU {:.1f}%), the baseline {:.3f} on {} GPUs "
        "(MFU {:.1f}%): {:.2f}x\n",
        per_gpu_throughput(ours), ours.evaluation.gpus, 100 * ours.evaluation.mfu,
        per_gpu_throughput(base), base.evaluation.gpus, 100 * base.evaluation.mfu, per_gpu);
  }
  std::optional<heterogeneity_run> het;
  if (a.iterations) {
    het = simulate_data(a, sc, cm, ours, base);
    print(*het, pred);
  }
  if (const auto pub = disttrain::presets::published(sc.name)) {
    fmt::print(
        "\nPublished for this setting ({}): MFU {:.1f}%, up to {:.1f}x Megatron-LM.\nModelled "
        "here (closed form of the expected batch): MFU {:.1f}%, orchestration gain {:.2f}x.\n",
        pub->source, 100 * pub->mfu, pub->speedup, 100 * ours.evaluation.mfu, speedup);
    if (pred)
      fmt::print("Predicted here on sampled batches (the planner's data objective): MFU {:.1f}%.\n",
                 100 * pred->predicted_mfu);
    if (het)
      fmt::print(
          "Simulated here ({} sampled batches): MFU {:.1f}% (plan, reordered), {:.2f}x over the "
          "baseline in arrival order (orchestration {:.2f}x with both reordered, reordering "
          "{:.2f}x on the plan).\n",
          het->h.iterations, 100 * het->h.plan_reordered.mfu, het->h.total_gain,
          het->h.orchestration_gain, het->h.reordering_gain);
    else
      fmt::print("The gains on sampled batches are simulated with --iterations N.\n");
    fmt::print("The gap is explained in docs/planner.md (\"Against the paper\").\n");
  }
  write_timeline(a, ours.plan, cm, req.sample_workload, nullptr);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const disttrain::error& e) {
    std::fprintf(stderr, "disttrain-plan: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "disttrain-plan: %s\n", e.what());
    return 1;
  }
}
