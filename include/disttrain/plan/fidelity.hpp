#pragma once
/// @file fidelity.hpp
/// @brief Published training runs scored with `evaluate`, and the fit of the
/// efficiency curve to them (docs/cost_model.md, "Fidelity against published runs").
///
/// A `published_run` is a dense GPT-style LLM trained on one GPU type with a
/// known TP/PP/DP layout, microbatch, global batch, sequence length and
/// recompute, and a measured throughput: MFU (`metric = "mfu"`, Korthikanti et
/// al.'s convention, which is this model's) or TFLOP/s per GPU counted with
/// Narayanan et al.'s formula (`metric = "tflops_narayanan"`: `96 B s l h^2
/// (1 + s/6h + V/16lh)` FLOPs per iteration, i.e. full recompute counted), or
/// the time of one iteration in seconds (`metric = "iteration_s"`, the step
/// time a benchmark table reports). `relative_error` is always the error in
/// throughput, positive when the model is optimistic: for MFU and TFLOP/s
/// `predicted / published - 1`, for a time `published / predicted - 1`.
/// `score_run` builds the model, cluster and plan, evaluates them with an
/// `analytic_cost_model` and returns the prediction in the run's own metric.
/// `fit_runs` fits one `efficiency_params` (all roles) to a set of runs by a
/// deterministic pattern search on the sum of squared log errors.
///
/// @snippet plan.cpp fidelity

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/model/architecture.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"

namespace disttrain {

/// @brief One published training run (see the file comment). JSON keys are the field names.
struct published_run {
  std::string id;                   ///< short name, e.g. "narayanan21-1008b"
  std::string source;               ///< citation: paper, table
  std::string hardware;             ///< cluster preset: "a100", "h100" or "h800"
  std::string metric;               ///< "mfu", "tflops_narayanan" or "iteration_s"
  std::string split;                ///< "fit" (used by fit_runs) or "held_out"
  decoder_llm_arch arch{};          ///< the model (one backbone module)
  int seq_len = 2048;               ///< tokens per sample
  int tp = 1, pp = 1, dp = 1;       ///< layout (GPUs = tp * pp * dp)
  int microbatch = 1;               ///< samples per microbatch per DP replica
  int global_batch = 1;             ///< samples per iteration
  int virtual_stages = 1;           ///< interleaved model chunks per device
  std::string recompute = "off";    ///< "off", "selective" or "full"
  std::string attention = "flash";  ///< "flash" (fused) or "unfused" (score matrix in HBM)
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool sequence_parallel = true;  ///< Megatron-LM `--sequence-parallel` (since 2022)
  /// false: score the time without the memory check, for a run whose memory
  /// savings this model does not have (`note` says which); a run that does
  /// not fit is otherwise `errc::infeasible`
  bool check_memory = true;
  double published = 0;  ///< the published figure in `metric`'s unit (MFU as a fraction)
  std::string note;      ///< what the source leaves open and what we assumed
};

/// @brief HBM bytes per attention-score element of an unfused (pre-flash)
/// Megatron-LM attention core in a forward pass, counted from its kernels
/// (fp16/bf16 scores, 2 bytes; 1-byte dropout mask): QK^T written (2), fused
/// scale-mask-softmax read and written (4), dropout read, written and its mask
/// written (5), read by AV (2): 13. Used for runs with `attention = "unfused"`
/// (`cost_params::attention_score_bytes`); not fitted.
inline constexpr double unfused_attention_score_bytes = 13.0;

/// @brief A run scored by the cost model.
struct run_score {
  double predicted = 0;       ///< in the run's metric
  double relative_error = 0;  ///< throughput error, > 0 when optimistic (see the file comment)
  plan_evaluation evaluation;
};

/// @brief Which parameters `fit_runs` moves (the others keep the start value).
struct fit_options {
  bool e_max = true;
  bool flops_half = true;
  bool tp_penalty = true;
};

/// @brief Result of `fit_runs`.
struct fidelity_fit {
  efficiency_params params{};
  double max_abs_error = 0;  ///< largest |relative error| over the fitted runs
  double rms_error = 0;      ///< RMS relative error over the fitted runs
  std::size_t runs = 0;      ///< runs fitted
};

namespace detail {
inline void check_run(const published_run& r, std::string_view path) {
  require(r.metric == "mfu" || r.metric == "tflops_narayanan" || r.metric == "iteration_s",
          join_path(path, "metric"),
          "must be \"mfu\", \"tflops_narayanan\" or \"iteration_s\", got \"", r.metric, "\"");
  require(r.split == "fit" || r.split == "held_out", join_path(path, "split"),
          "must be \"fit\" or \"held_out\", got \"", r.split, "\"");
  require(r.recompute == "off" || r.recompute == "selective" || r.recompute == "full",
          join_path(path, "recompute"), "must be \"off\", \"selective\" or \"full\", got \"",
          r.recompute, "\"");
  require(r.attention == "flash" || r.attention == "unfused", join_path(path, "attention"),
          "must be \"flash\" or \"unfused\", got \"", r.attention, "\"");
  require_positive(r.seq_len, join_path(path, "seq_len"));
  require_positive(r.tp, join_path(path, "tp"));
  require_positive(r.pp, join_path(path, "pp"));
  require_positive(r.dp, join_path(path, "dp"));
  require_positive(r.microbatch, join_path(path, "microbatch"));
  require_positive(r.virtual_stages, join_path(path, "virtual_stages"));
  require(r.global_batch > 0 && r.global_batch % (r.dp * r.microbatch) == 0,
          join_path(path, "global_batch"), "must be a positive multiple of dp * microbatch (",
          r.dp * r.microbatch, "), got ", r.global_batch);
  require(r.arch.layers % (r.pp * r.virtual_stages) == 0, join_path(path, "pp"),
          "pp * virtual_stages must divide the ", r.arch.layers, " layers");
  require(r.published > 0, join_path(path, "published"), "must be > 0, got ", r.published);
}

// JSON descriptor (core/json.hpp, `json_field`): every field but `arch`,
// which is read at its own path.
inline constexpr auto published_run_fields =
    std::tuple{required_field("id", &published_run::id),
               required_field("source", &published_run::source),
               required_field("hardware", &published_run::hardware),
               required_field("metric", &published_run::metric),
               required_field("split", &published_run::split),
               required_field("seq_len", &published_run::seq_len),
               required_field("tp", &published_run::tp),
               required_field("pp", &published_run::pp),
               required_field("dp", &published_run::dp),
               required_field("microbatch", &published_run::microbatch),
               required_field("global_batch", &published_run::global_batch),
               optional_field("virtual_stages", &published_run::virtual_stages),
               required_field("recompute", &published_run::recompute),
               optional_field("attention", &published_run::attention),
               optional_field("overlap_grad_reduce", &published_run::overlap_grad_reduce),
               optional_field("overlap_param_gather", &published_run::overlap_param_gather),
               optional_field("sequence_parallel", &published_run::sequence_parallel),
               optional_field("check_memory", &published_run::check_memory),
               required_field("published", &published_run::published),
               optional_field("note", &published_run::note)};

[[nodiscard]] inline published_run read_published_run(const json& j, std::string_view path) {
  published_run r;
  read_fields(j, r, published_run_fields, path, {"arch"});
  if (!j.contains("arch"))
    fail(errc::parse_error, join_path(path, "arch"), "required field is missing");
  r.arch = read_decoder_llm_arch(j.at("arch"), join_path(path, "arch"));
  bool known = false;
  for (const auto& n : presets::cluster_preset_names()) known = known || n == r.hardware;
  require(known, join_path(path, "hardware"), "unknown cluster preset \"", r.hardware,
          "\" (known: h100, h800, a100)");
  check_run(r, path);
  return r;
}

/// Narayanan et al. (SC'21) Eq. 3: FLOPs per iteration with full recompute.
[[nodiscard]] inline double narayanan_flops(const published_run& r) {
  const double b = r.global_batch, s = r.seq_len, l = r.arch.layers, h = r.arch.hidden,
               v = r.arch.vocab;
  return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}
}  // namespace detail

/// @brief Reads `{"runs": [...]}`; errors name `runs[i].<field>`.
[[nodiscard]] inline std::vector<published_run> read_published_runs(const json& j) {
  if (!j.is_object() || !j.contains("runs") || !j.at("runs").is_array())
    fail(errc::parse_error, "runs", "required array is missing");
  std::vector<published_run> out;
  const json& a = j.at("runs");
  for (std::size_t i = 0; i < a.size(); ++i)
    out.push_back(detail::read_published_run(a[i], cat("runs[", i, "]")));
  return out;
}

/// @brief The one-module model of a run (module "gpt", role backbone).
[[nodiscard]] inline model_spec run_model(const published_run& r) {
  model_spec m;
  m.name = r.id;
  module_spec b;
  b.name = "gpt";
  b.role = module_role::backbone;
  b.arch = r.arch;
  m.modules.push_back(b);
  return m;
}

/// @brief The run's layout as a plan: even layer split, 1F1B (interleaved when
/// `virtual_stages > 1`), `global_batch / (dp * microbatch)` microbatches.
[[nodiscard]] inline parallel_plan run_plan(const published_run& r) {
  parallel_plan p;
  module_plan mp;
  mp.name = "gpt";
  mp.role = "backbone";
  mp.tp = r.tp;
  mp.pp = r.pp;
  mp.dp = r.dp;
  mp.layers.assign(static_cast<std::size_t>(r.pp), r.arch.layers / r.pp);
  mp.recompute = r.recompute == "full";
  mp.selective_recompute = r.recompute == "selective";
  mp.virtual_stages = r.virtual_stages;
  mp.sequence_parallel = r.sequence_parallel;
  p.modules.push_back(mp);
  p.global_batch = r.global_batch;
  p.num_microbatches = r.global_batch / (r.dp * r.microbatch);
  p.overlap_grad_reduce = r.overlap_grad_reduce;
  p.overlap_param_gather = r.overlap_param_gather;
  return p;
}

/// @brief Scores run `r` with an `analytic_cost_model` of parameters `params`
/// (memory checked unless `r.check_memory` is false: a run that does not fit
/// is `errc::infeasible`).
[[nodiscard]] inline run_score score_run(const published_run& r, const cost_params& params) {
  const long long gpus = static_cast<long long>(r.tp) * r.pp * r.dp;
  cost_params p = params;
  p.attention_score_bytes = r.attention == "unfused" ? unfused_attention_score_bytes : 0.0;
  const analytic_cost_model cm(run_model(r),
                               presets::cluster_preset(r.hardware, static_cast<int>(gpus)), p);
  model_workload w;
  w.size = 1;
  w[0].add_sequence(r.seq_len);
  run_score s;
  s.evaluation = evaluate(run_plan(r), cm, w, {.check_memory = r.check_memory});
  if (r.metric == "iteration_s") {  // a time: faster than published is optimistic
    s.predicted = s.evaluation.iteration_time_s;
    s.relative_error = r.published / s.predicted - 1.0;
  } else {
    s.predicted = r.metric == "mfu"
                      ? s.evaluation.mfu
                      : detail::narayanan_flops(r) /
                            (s.evaluation.iteration_time_s * static_cast<double>(gpus)) / 1e12;
    s.relative_error = s.predicted / r.published - 1.0;
  }
  return s;
}

/// @brief `base` with every role's efficiency curve set to `e`.
[[nodiscard]] inline cost_params with_efficiency(cost_params base, const efficiency_params& e) {
  for (auto& x : base.efficiency) x = e;
  return base;
}

/// @brief Fits one efficiency curve (all roles) to `runs` whose split is "fit":
/// minimises the sum of squared log(predicted / published) by a deterministic
/// pattern search over (e_max, log f_half, tp_penalty) from `start` (those
/// `opt` leaves free), with the rest of `base` fixed. Throws `invalid_argument` at "runs" if no run is marked "fit".
[[nodiscard]] inline fidelity_fit fit_runs(std::span<const published_run> runs,
                                           const cost_params& base, efficiency_params start,
                                           const fit_options& opt = {}) {
  std::vector<const published_run*> fit;
  for (const auto& r : runs)
    if (r.split == "fit") fit.push_back(&r);
  require(!fit.empty(), "runs", "no run has split \"fit\"");
  auto loss = [&](const efficiency_params& e) {
    double sum = 0;
    for (const auto* r : fit) {
      const double l = std::log(score_run(*r, with_efficiency(base, e)).predicted / r->published);
      sum += l * l;
    }
    return sum;
  };
  auto clamp = [](efficiency_params e) {
    e.e_max = std::min(1.0, std::max(0.05, e.e_max));
    e.flops_half = std::max(1e6, e.flops_half);
    e.tp_penalty = std::max(0.0, e.tp_penalty);
    return e;
  };
  efficiency_params best = clamp(start);
  double best_loss = loss(best);
  double step[3] = {0.05, 0.5, 0.02};  // e_max, ln f_half, tp_penalty
  for (int round = 0; round < 200 && step[0] > 1e-6; ++round) {
    bool improved = false;
    const bool free[3] = {opt.e_max, opt.flops_half, opt.tp_penalty};
    for (int d = 0; d < 3; ++d)
      for (double sign : {1.0, -1.0}) {
        if (!free[d]) continue;
        efficiency_params e = best;
        if (d == 0) e.e_max += sign * step[0];
        if (d == 1) e.flops_half *= std::exp(sign * step[1]);
        if (d == 2) e.tp_penalty += sign * step[2];
        e = clamp(e);
        const double l = loss(e);
        if (l < best_loss) {
          best = e;
          best_loss = l;
          improved = true;
        }
      }
    if (!improved)
      for (double& s : step) s *= 0.5;
  }
  fidelity_fit f;
  f.params = best;
  f.runs = fit.size();
  double sq = 0;
  for (const auto* r : fit) {
    const double e = score_run(*r, with_efficiency(base, best)).relative_error;
    f.max_abs_error = std::max(f.max_abs_error, std::abs(e));
    sq += e * e;
  }
  f.rms_error = std::sqrt(sq / static_cast<double>(fit.size()));
  return f;
}

}  // namespace disttrain
