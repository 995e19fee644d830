#pragma once
/// @file parallel_plan.hpp
/// @brief The plan value type: how every module of a multimodal model is laid
/// out on the cluster (GPUs, TP, PP, DP, layers per stage, recompute), plus the
/// microbatching and the pipeline schedule. JSON in and out: plan/json.hpp.
///
/// A plan lists the modules in **pipeline order**: encoders, exactly one
/// backbone, generators (roles "encoder", "backbone", "generator"; several
/// encoders or generators run one after the other, `links_of` in
/// plan/layout.hpp). Each module is either
/// - *disaggregated* (`colocated == false`): it owns `tp * pp * dp` GPUs and
///   forms its own pipeline segment, or
/// - *colocated* (`colocated == true`, encoder/generator only): it runs on the
///   GPUs of the backbone's first (encoder) or last (generator) pipeline stage
///   with the backbone's DP, as Megatron-LM places extra modules; its `tp`
///   divides the backbone's (a module TP cannot split that far runs with a
///   smaller TP, replicated over the rest of the TP group). The Megatron-style
///   baseline is the plan in which every side module is colocated.
///
/// Microbatching: an iteration processes `global_batch` samples as
/// `num_microbatches` pipeline microbatches of `n = global_batch /
/// num_microbatches` samples each. A module with DP degree `dp` gives each
/// replica at most `ceil(n / dp)` samples of every microbatch (so `dp <= n`).
///
/// @snippet plan.cpp parallel_plan_file

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief The pipeline schedule a plan runs.
///
/// - `one_f_one_b`: 1F1B (interleaved where a module has `virtual_stages > 1`);
///   stage s of P keeps min(P - s, m) microbatches in flight.
/// - `gpipe`: the 1F1B closed form with all `m` microbatches in flight
///   (dominated, so the planner never returns it; `evaluate` accepts it so
///   that its memory can be compared).
/// - `zb_h1`: ZB-H1 over the whole chain (`zb_h1_ops`, Qi et al. 2024): the
///   backward is split into B and W and the Ws are deferred into 1F1B's
///   cool-down bubbles. Every stage keeps min(P, m) microbatches in flight
///   (1F1B's first-stage peak); no interleaving. Its closed form is 1F1B's
///   less f (sum of the stages' W - largest W), f = 2 once m >= P: see
///   `detail/closed_form.hpp`.
/// @snippet plan.cpp plan_schedule
enum class plan_schedule { one_f_one_b, gpipe, zb_h1 };

/// @brief Name of a schedule in JSON and tables: "1f1b", "gpipe" or "zb_h1".
constexpr std::string_view to_string(plan_schedule s) noexcept {
  switch (s) {
    case plan_schedule::gpipe: return "gpipe";
    case plan_schedule::zb_h1: return "zb_h1";
    case plan_schedule::one_f_one_b: break;
  }
  return "1f1b";
}

/// @brief Layout of one module.
///
/// @snippet plan.cpp module_plan
struct module_plan {
  std::string name;         ///< the module's name in the model spec
  std::string role;         ///< "encoder", "backbone" or "generator"
  int tp = 1;               ///< tensor-parallel degree (divides gpus_per_node)
  int pp = 1;               ///< pipeline stages
  int dp = 1;               ///< data-parallel replicas
  std::vector<int> layers;  ///< layers of each stage (size pp, each >= 1)
  bool recompute = false;   ///< full activation recomputation
  bool colocated = false;   ///< runs on the backbone's first/last stage GPUs
  /// Interleaved 1F1B (Megatron-LM's `--num-layers-per-virtual-pipeline-stage`):
  /// model chunks per device, each `layers[j] / virtual_stages` layers of stage
  /// j. Backbone only; 1 = plain 1F1B.
  int virtual_stages = 1;
  /// Selective recomputation: only the attention core is recomputed (JSON:
  /// `"recompute": "selective"`). Exclusive with `recompute`. Last, so that
  /// positional initialisers of the fields above keep their meaning.
  bool selective_recompute = false;
  /// Sequence parallelism (Megatron-LM `--sequence-parallel`; see
  /// `stage_config::sequence_parallel`): with it, TP splits every saved
  /// activation; without it, the norm and GEMM-input activations are whole on
  /// each TP rank. No effect at tp = 1.
  bool sequence_parallel = true;

  /// @brief GPUs this module owns: tp * pp * dp, or 0 when colocated.
  [[nodiscard]] long long gpus() const noexcept {
    return colocated ? 0 : static_cast<long long>(tp) * pp * dp;
  }
  friend bool operator==(const module_plan&, const module_plan&) = default;
};

/// @brief A complete parallelisation plan (see the file comment).
///
/// @snippet plan.cpp parallel_plan
struct parallel_plan {
  std::vector<module_plan> modules;  ///< pipeline order: [encoder], backbone, [generator]
  int global_batch = 1;              ///< samples per iteration
  int num_microbatches = 1;          ///< pipeline microbatches per iteration (m)
  plan_schedule schedule = plan_schedule::one_f_one_b;
  int gpus_per_node = 8;  ///< node size used for placement (TP groups stay inside a node)
  /// Megatron-LM `--overlap-grad-reduce`: the gradient reduce-scatter runs in
  /// DDP buckets during the last microbatch's backward pass.
  bool overlap_grad_reduce = false;
  /// Megatron-LM `--overlap-param-gather` (distributed optimizer): the updated
  /// parameters' all-gather runs in buckets during the first microbatch's forward.
  bool overlap_param_gather = false;

  /// @brief Sum of the modules' GPUs.
  [[nodiscard]] long long total_gpus() const noexcept {
    long long g = 0;
    for (const auto& m : modules) g += m.gpus();
    return g;
  }
  /// @brief Samples per pipeline microbatch: global_batch / num_microbatches.
  [[nodiscard]] int microbatch_samples() const noexcept {
    return num_microbatches > 0 ? global_batch / num_microbatches : 0;
  }
  /// @brief Largest number of samples one replica of module `i` gets from a
  /// microbatch: ceil(n / dp) (colocated modules use the backbone's dp).
  [[nodiscard]] int replica_samples(std::size_t i) const {
    if (!(i < modules.size()))
      fail(errc::invalid_argument, "plan.modules", "index ", i, " out of range");
    const int dp = modules[i].colocated ? modules[backbone_index()].dp : modules[i].dp;
    const int n = microbatch_samples();
    return dp > 0 ? (n + dp - 1) / dp : 0;
  }
  /// @brief Index of the backbone module; throws `invalid_argument` if none.
  [[nodiscard]] std::size_t backbone_index() const {
    for (std::size_t i = 0; i < modules.size(); ++i)
      if (modules[i].role == "backbone") return i;
    fail(errc::invalid_argument, "plan.modules", "no module has role \"backbone\"");
  }
  friend bool operator==(const parallel_plan&, const parallel_plan&) = default;
};

/// @brief Checks a plan's structure (no model needed): roles and order, TP a
/// power of two dividing `gpus_per_node`, `layers.size() == pp`, positive sizes,
/// `global_batch % num_microbatches == 0`, `dp <= samples per microbatch`,
/// colocated modules consistent with the backbone. Throws `invalid_argument`
/// naming the field, e.g. `plan.llm.tp`.
/// @snippet plan.cpp validate
inline void validate(const parallel_plan& p) {
  require_positive(p.gpus_per_node, "plan.gpus_per_node");
  require_positive(p.global_batch, "plan.global_batch");
  require_positive(p.num_microbatches, "plan.num_microbatches");
  if (!(p.global_batch % p.num_microbatches == 0))
    fail(errc::invalid_argument, "plan.num_microbatches", "global_batch ", p.global_batch,
         " is not a multiple of num_microbatches ", p.num_microbatches);
  if (!(!p.modules.empty()))
    fail(errc::invalid_argument, "plan.modules", "needs at least a backbone");
  int backbones = 0;
  const int n = p.microbatch_samples();
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_plan& m = p.modules[i];
    if (!(!m.name.empty()))
      fail(errc::invalid_argument, cat("plan.modules[", i, "].name"), "must not be empty");
    if (m.recompute && m.selective_recompute)
      fail(errc::invalid_argument, cat("plan.", m.name, ".recompute"),
           "full and selective recomputation are exclusive");
    for (std::size_t j = 0; j < i; ++j)
      if (!(p.modules[j].name != m.name))
        fail(errc::invalid_argument, cat("plan.modules[", i, "].name"), "duplicate module name '",
             m.name, "'");
    const std::string w = "plan." + m.name;
    if (m.role == "backbone") {
      ++backbones;
      if (!(backbones == 1))
        fail(errc::invalid_argument, w + ".role", "a plan has exactly one backbone");
      if (!(!m.colocated))
        fail(errc::invalid_argument, w + ".colocated", "the backbone cannot be colocated");
    } else if (m.role == "encoder") {
      if (!(backbones == 0))
        fail(errc::invalid_argument, w + ".role", "encoders are placed before the backbone");
    } else if (m.role == "generator") {
      if (!(backbones == 1))
        fail(errc::invalid_argument, w + ".role", "generators are placed after the backbone");
    } else {
      fail(errc::invalid_argument, w + ".role", "unknown role '", m.role,
           "' (expected encoder, backbone or generator)");
    }
    if (!(m.tp >= 1 && (m.tp & (m.tp - 1)) == 0 && p.gpus_per_node % m.tp == 0))
      fail(errc::invalid_argument, w + ".tp", "must be a power of two dividing gpus_per_node ",
           p.gpus_per_node, ", got ", m.tp);
    require_positive(m.pp, w + ".pp");
    require_positive(m.dp, w + ".dp");
    if (!(m.dp <= n))
      fail(errc::invalid_argument, w + ".dp", "dp ", m.dp, " exceeds the ", n,
           " samples of a microbatch (a replica would idle)");
    if (!(m.layers.size() == static_cast<std::size_t>(m.pp)))
      fail(errc::invalid_argument, w + ".layers", "has ", m.layers.size(),
           " entries, expected pp = ", m.pp);
    for (std::size_t s = 0; s < m.layers.size(); ++s)
      if (!(m.layers[s] >= 1))
        fail(errc::invalid_argument, cat(w, ".layers[", s, "]"), "must be >= 1, got ", m.layers[s]);
    require_positive(m.virtual_stages, w + ".virtual_stages");
    if (m.virtual_stages > 1) {
      if (m.role != "backbone")
        fail(errc::invalid_argument, w + ".virtual_stages",
             "only the backbone runs interleaved 1F1B, got ", m.virtual_stages);
      if (p.schedule != plan_schedule::one_f_one_b)
        fail(errc::invalid_argument, w + ".virtual_stages",
             "interleaving is a 1f1b schedule, the plan's schedule is ", to_string(p.schedule));
      if (m.pp < 2)
        fail(errc::invalid_argument, w + ".virtual_stages", "interleaving needs pp >= 2, got pp ",
             m.pp);
      if (p.num_microbatches % m.pp != 0)
        fail(errc::invalid_argument, w + ".virtual_stages",
             "interleaved 1F1B needs num_microbatches ", p.num_microbatches,
             " to be a multiple of pp ", m.pp, " (Megatron-LM's rule)");
      for (std::size_t s = 0; s < m.layers.size(); ++s)
        if (m.layers[s] % m.virtual_stages != 0)
          fail(errc::invalid_argument, cat(w, ".layers[", s, "]"), m.layers[s],
               " layers do not split into ", m.virtual_stages, " equal chunks (virtual_stages)");
    }
  }
  if (!(backbones == 1))
    fail(errc::invalid_argument, "plan.modules", "no module has role \"backbone\"");
  const module_plan& bb = p.modules[p.backbone_index()];
  for (const module_plan& m : p.modules) {
    if (!m.colocated) continue;
    const std::string w = "plan." + m.name;
    if (!(m.pp == 1))
      fail(errc::invalid_argument, w + ".pp", "a colocated module has pp 1, got ", m.pp);
    if (!(m.dp == bb.dp))
      fail(errc::invalid_argument, w + ".dp", "a colocated module uses the backbone's dp ", bb.dp,
           ", got ", m.dp);
    if (!(bb.tp % m.tp == 0))
      fail(errc::invalid_argument, w + ".tp",
           "a colocated module's tp must divide the backbone's tp ", bb.tp, ", got ", m.tp);
  }
}

// ---- JSON -------------------------------------------------------------------

}  // namespace disttrain
