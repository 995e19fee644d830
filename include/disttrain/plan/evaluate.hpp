#pragma once
/// @file evaluate.hpp
/// @brief Scores a plan with a cost model: modelled iteration time (1F1B
/// closed form), MFU, memory per GPU of every stage, bubble fraction.
///
/// Pipeline: the disaggregated modules' stages chained in pipeline order
/// (encoder stages, backbone stages, generator stages); a colocated module
/// adds its work, memory and sync to the backbone's first (encoder) or last
/// (generator) stage. With `m` microbatches and module terms as in
/// `detail/closed_form.hpp`:
///
///     period    = max(max_s t_s, sum_modules path / P)
///     iteration = (m - 1) * period + sum_modules path + max_stages (exposed DP sync + optimizer)
///
/// where `t_s` is a stage's forward+backward time for its busiest replica
/// (ceil(n / dp) of the n samples of a microbatch), `path` adds the
/// point-to-point transfers on the fill/drain path, and 1F1B keeps
/// min(P - s, m) microbatches in flight at chain stage s of P (GPipe: m,
/// ZB-H1: min(P, m)). ZB-H1 subtracts f (sum of the stages' W - largest W),
/// f = 1 + (min(m, P) - 1) / (P - 1)
/// from the pipeline (`detail/closed_form.hpp`).
/// A stage's exposed sync is its ZeRO-1 reduce-scatter + all-gather + optimizer
/// step, less what the plan's `overlap_grad_reduce` / `overlap_param_gather`
/// hide behind the last backward / first forward (`detail::stage_sync`).
/// Links follow the plan's rank placement (`topology_of`'s numbering): a
/// stage's DP sync runs on NVLink iff the stage's ranks sit in one node, a
/// transfer between two stages iff both stages' ranks do; else the NIC
/// (`detail/stage_cost.hpp`).
///
/// @snippet plan.cpp evaluate

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/detail/chain_cut.hpp"
#include "disttrain/plan/detail/closed_form.hpp"
#include "disttrain/plan/detail/stage_cost.hpp"
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/parallel_plan.hpp"

namespace disttrain {

/// @brief One pipeline stage of an evaluated plan.
/// @snippet plan.cpp stage_report
struct stage_report {
  std::string module;       ///< module owning the stage
  int stage = 0;            ///< stage index within the module
  int chain_stage = 0;      ///< position in the chained pipeline
  int first_layer = 0;      ///< first layer of the module on this stage
  int num_layers = 0;       ///< layers of the module on this stage
  int tp = 1;               ///< TP degree
  int dp = 1;               ///< DP degree
  int replica_samples = 0;  ///< samples of the busiest replica per microbatch
  int in_flight = 0;  ///< microbatches whose activations are held at peak (chunks if interleaved)
  int virtual_stages = 1;              ///< interleaved model chunks on the device
  std::vector<std::string> colocated;  ///< modules colocated on this stage
  double time_s = 0;                   ///< forward + backward per microbatch (all parts)
  double sync_s = 0;                   ///< exposed DP sync + optimizer per iteration (all parts)
  double sync_total_s = 0;  ///< all DP sync + optimizer work, overlapped with compute or not
  double memory_bytes = 0;  ///< per GPU at peak (all parts)
  memory_breakdown memory;  ///< breakdown of memory_bytes
};

/// @brief Modelled figures of a plan.
/// @snippet plan.cpp plan_evaluation
struct plan_evaluation {
  double iteration_time_s = 0;    ///< pipeline + non-overlapped sync
  double pipeline_time_s = 0;     ///< (m-1) * max stage + fill/drain path
  double sync_time_s = 0;         ///< largest per-stage exposed DP sync + optimizer step
  double bubble_fraction = 0;     ///< 1 - busy / (stages * pipeline time)
  double mfu = 0;                 ///< model FLOPs / (iteration time * GPUs * peak)
  double model_flops = 0;         ///< model FLOPs per iteration (no recompute)
  double samples_per_s = 0;       ///< global_batch / iteration time
  long long gpus = 0;             ///< GPUs the plan uses
  int num_stages = 0;             ///< chained pipeline stages
  double max_memory_bytes = 0;    ///< largest stage memory per GPU
  double memory_limit_bytes = 0;  ///< the cost model's usable bytes per GPU
  std::vector<stage_report> stages;
};

/// @brief Options of `evaluate`.
struct evaluate_options {
  bool check_memory = true;  ///< throw `errc::infeasible` for a stage over the memory limit
};

/// @brief The cost query for layers `[first_layer, first_layer + num_layers)`
/// of module plan `m` (model module `module`), replicated `dp` ways (a colocated
/// module: the backbone's dp): `m`'s TP, recompute mode and sequence
/// parallelism. `evaluate`, the planner and `simulate_plan` cost a plan's
/// stages through it.
/// @snippet plan.cpp stage_config_of
[[nodiscard]] inline stage_config stage_config_of(const module_plan& m, std::size_t module,
                                                  int first_layer, int num_layers,
                                                  int dp) noexcept {
  return stage_config{module,      first_layer,           num_layers,         m.tp, dp,
                      m.recompute, m.selective_recompute, m.sequence_parallel};
}

namespace detail {

/// @brief Checks a plan against the model and cluster of a cost model: the
/// same modules in the same order, layer counts, node size, GPU count, and
/// TP groups inside nodes (as `topology_of` requires). Throws naming the plan field.
inline void check_plan_against(const parallel_plan& p, const model_spec& model,
                               const cluster_spec& cluster) {
  validate(p);
  if (p.modules.size() != model.modules.size())
    fail(errc::invalid_argument, "plan.modules", "has ", p.modules.size(),
         " modules, the model has ", model.modules.size());
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const auto& mp = p.modules[i];
    const auto& ms = model.modules[i];
    if (mp.name != ms.name)
      fail(errc::invalid_argument, cat("plan.modules[", i, "].name"), "is '", mp.name,
           "', the model's module ", i, " is '", ms.name, "'");
    if (mp.role != to_string(ms.role))
      fail(errc::invalid_argument, cat("plan.", mp.name, ".role"), "is '", mp.role,
           "', the model says '", to_string(ms.role), "'");
    long long sum = 0;
    for (int c : mp.layers) sum += c;
    if (!mp.colocated && sum != ms.layers())
      fail(errc::invalid_argument, cat("plan.", mp.name, ".layers"), "sum to ", sum,
           ", the module has ", ms.layers(), " layers");
    if (mp.colocated && (mp.layers.size() != 1 || sum != ms.layers()))
      fail(errc::invalid_argument, cat("plan.", mp.name, ".layers"),
           "a colocated module is one stage of all ", ms.layers(), " layers");
  }
  if (p.gpus_per_node != cluster.gpus_per_node)
    fail(errc::invalid_argument, "plan.gpus_per_node", "is ", p.gpus_per_node, ", the cluster has ",
         cluster.gpus_per_node);
  const std::size_t b = p.backbone_index();
  for (const auto& m : p.modules)
    if (m.colocated && p.modules[b].tp % m.tp != 0)
      fail(errc::invalid_argument, cat("plan.", m.name, ".tp"), "a colocated module's tp ", m.tp,
           " must divide the backbone's tp ", p.modules[b].tp);
  if (p.total_gpus() > cluster.num_gpus)
    fail(errc::infeasible, "plan.total_gpus", "the plan uses ", p.total_gpus(),
         " GPUs, the cluster has ", cluster.num_gpus);
  // TP groups inside nodes: the rank layout's rule (each segment's first rank is a multiple of its
  // tp).
  long long base = 0;
  for (const auto& m : p.modules) {
    if (m.colocated) continue;
    if (base % m.tp != 0)
      fail(errc::invalid_argument, cat("plan.", m.name, ".tp"), "the module's first rank ", base,
           " is not a multiple of its tp ", m.tp, " (a TP group would straddle two nodes)");
    base += m.gpus();
  }
}

/// @brief Throws `errc::infeasible` at "<module>/stage <j>" naming the bytes.
inline void fail_memory(const stage_report& s, double limit) {
  fail(errc::infeasible, cat(s.module, "/stage ", s.stage), "needs ", s.memory_bytes / 1e9,
       " GB per GPU (params ", s.memory.params / 1e9, ", grads ", s.memory.grads / 1e9,
       ", optimizer ", s.memory.optimizer / 1e9, ", activations ", s.memory.activations / 1e9,
       " GB, ", s.in_flight, " microbatches in flight), limit ", limit / 1e9, " GB, over by ",
       (s.memory_bytes - limit) / 1e9, " GB (", s.memory_bytes - limit, " bytes)");
}

}  // namespace detail

/// @brief Scores `p` with cost model `cost` for samples of expected workload
/// `sample_workload` (see the file comment). Throws `invalid_argument` /
/// `infeasible` naming the plan field, or `infeasible` at "<module>/stage <j>"
/// with the bytes over when a GPU does not fit (unless `opt.check_memory` is false).
/// @brief Which DP collectives overlap compute (`parallel_plan::overlap_grad_reduce`,
/// `overlap_param_gather`).
struct sync_overlap {
  bool grad_reduce = false;   ///< the reduce-scatter hides behind the last backward
  bool param_gather = false;  ///< the all-gather hides behind the first forward
};

/// @brief The exposed DP synchronisation of one pipeline stage, without the
/// optimizer step: its parts (a backbone stage with colocated modules has
/// several, in model-module order), each priced on its module's mean
/// microbatch `mean[part.module]`, with the DP group inside one node or
/// across nodes (`spans_nodes`). The planner's rule, so a simulation of the
/// plan (`simulate_plan`) prices what the planner does.
template <cost_model C>
[[nodiscard]] double exposed_stage_sync(const C& cost, std::span<const stage_config> parts,
                                        const model_workload& mean, bool spans_nodes,
                                        sync_overlap overlap) {
  detail::stage_sync sync;
  for (const stage_config& cfg : parts)
    sync.add(detail::part_sync(cost, cfg, mean[cfg.module], spans_nodes));
  sync.optimizer_s = 0.0;  // the optimizer step is its own op
  return sync.exposed_s(overlap.grad_reduce, overlap.param_gather);
}

template <cost_model C>
[[nodiscard]] plan_evaluation evaluate(const parallel_plan& p, const C& cost,
                                       const model_workload& sample_workload,
                                       const evaluate_options& opt = {}) {
  const model_spec& model = cost.model();
  const int g = cost.cluster().gpus_per_node;
  detail::check_plan_against(p, model, cost.cluster());
  if (sample_workload.size != model.modules.size())
    fail(errc::invalid_argument, "sample_workload", "has ", sample_workload.size,
         " modules, the model has ", model.modules.size());
  const int m = p.num_microbatches;
  const int n = p.microbatch_samples();
  const std::size_t bi = p.backbone_index();
  const module_plan& bb = p.modules[bi];
  auto samples_of = [&](int dp) { return (n + dp - 1) / dp; };
  const int kb = samples_of(bb.dp);

  // Chain positions, and each disaggregated module's first rank (`topology_of`'s numbering).
  int total_stages = 0;
  std::vector<long long> base(p.modules.size(), 0);
  long long next_rank = 0;
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_plan& mp = p.modules[i];
    if (mp.colocated) continue;
    total_stages += mp.pp;
    base[i] = next_rank;
    next_rank += mp.gpus();
  }
  // Rank block of stage j of module i.
  auto block = [&](std::size_t i, int j) {
    const long long s = static_cast<long long>(p.modules[i].tp) * p.modules[i].dp;
    return std::pair<long long, long long>{base[i] + j * s, s};
  };
  auto same_node = [&](std::pair<long long, long long> a, std::pair<long long, long long> b) {
    return detail::blocks_in_one_node(a.first, a.second, b.first, b.second, g);
  };
  // The data edges each link carries (detail/chain_cut.hpp), and the owning neighbours.
  const detail::chain_cut cut(model, detail::colocated_mask(p));
  auto owning_after = [&](std::size_t i) {
    while (p.modules[++i].colocated) {}
    return i;
  };
  auto owning_before = [&](std::size_t i) {
    while (p.modules[--i].colocated) {}
    return i;
  };

  plan_evaluation ev;
  ev.gpus = p.total_gpus();
  ev.num_stages = total_stages;
  ev.memory_limit_bytes = cost.memory_limit();
  std::vector<detail::module_terms> terms;
  std::vector<double> times, fixed, hops, weights;
  const bool zb = p.schedule == plan_schedule::zb_h1;
  int pos = 0;
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_plan& mp = p.modules[i];
    if (mp.colocated) continue;
    const int k = samples_of(mp.dp);
    const module_workload w = sample_workload[i] * static_cast<double>(k);
    const double dirs = detail::transfer_directions(model, i);
    const detail::link_load pass = cut.load(cost, cut.through(i), sample_workload, k);
    times.assign(static_cast<std::size_t>(mp.pp), 0.0);
    fixed.assign(static_cast<std::size_t>(mp.pp), 0.0);
    hops.assign(static_cast<std::size_t>(mp.pp), 0.0);
    weights.assign(static_cast<std::size_t>(mp.pp), 0.0);
    const int v = mp.virtual_stages;
    const int after = total_stages - pos - mp.pp;  // chain stages after this module
    double sync_max = 0;
    int first = 0;
    for (int j = 0; j < mp.pp; ++j, ++pos) {
      const int c = mp.layers[static_cast<std::size_t>(j)];
      stage_report r;
      r.module = mp.name;
      r.stage = j;
      r.chain_stage = pos;
      r.first_layer = first;
      r.num_layers = c;
      r.tp = mp.tp;
      r.dp = mp.dp;
      r.replica_samples = k;
      r.virtual_stages = v;
      r.in_flight = p.schedule == plan_schedule::gpipe ? m
                    : zb                               ? detail::zb_h1_in_flight(total_stages, m)
                    : v > 1                            ? detail::interleaved_in_flight(
                                                             {.pp = mp.pp, .chunks = v, .microbatches = m, .after = after}, j)
                            : detail::one_f_one_b_in_flight(total_stages, pos, m);
      const auto here = block(i, j);
      const bool spans = !detail::in_one_node(here.first, here.second, g);
      // Parts of this stage in model-module order: [colocated encoder], module, [colocated
      // generator].
      double time = 0, weight = 0, whole = 0;  // whole: the colocated parts' time
      detail::stage_sync sync;
      memory_breakdown mem;
      // A colocated part runs in the device's first (encoder) or last (generator) chunk: it
      // keeps whole microbatches, ceil(chunk-microbatches / v) of them.
      auto add_part = [&](std::size_t mod, const stage_config& cfg, const module_workload& wl) {
        const stage_times st = cost.stage_time(cfg, wl);
        time += st.total_s();
        if (mod != i) whole += st.total_s();
        weight += st.weight_grad_s;
        sync.add(detail::part_sync(cost, cfg, wl, spans));
        const memory_breakdown x =
            mod == i ? detail::device_memory(cost, cfg, wl, r.in_flight, v)
                     : cost.stage_memory(cfg, wl, detail::whole_microbatches(r.in_flight, v));
        mem.params += x.params;
        mem.grads += x.grads;
        mem.optimizer += x.optimizer;
        mem.activations += x.activations;
        if (mod != i) r.colocated.push_back(model.modules[mod].name);
      };
      auto colocated_part = [&](std::size_t mod) {
        const module_plan& cp = p.modules[mod];
        add_part(mod, stage_config_of(cp, mod, 0, model.modules[mod].layers(), bb.dp),
                 sample_workload[mod] * static_cast<double>(kb));
      };
      if (i == bi && j == 0)
        for (std::size_t e = 0; e < bi; ++e)
          if (p.modules[e].colocated) colocated_part(e);
      const stage_config cfg = stage_config_of(mp, i, first, c, mp.dp);
      add_part(i, cfg, w);
      if (i == bi && j == mp.pp - 1)
        for (std::size_t e = bi + 1; e < p.modules.size(); ++e)
          if (p.modules[e].colocated) colocated_part(e);
      r.time_s = time;
      r.sync_s = sync.exposed_s(p.overlap_grad_reduce, p.overlap_param_gather);
      r.sync_total_s = sync.total_s();
      r.memory = mem;
      r.memory_bytes = mem.total();
      times[static_cast<std::size_t>(j)] = time;
      fixed[static_cast<std::size_t>(j)] = whole;
      weights[static_cast<std::size_t>(j)] = weight;
      if (j + 1 < mp.pp)
        hops[static_cast<std::size_t>(j)] =
            detail::hop_time(cost, cfg, w, same_node(here, block(i, j + 1)), dirs, pass);
      sync_max = std::max(sync_max, r.sync_s);
      ev.max_memory_bytes = std::max(ev.max_memory_bytes, r.memory_bytes);
      ev.stages.push_back(std::move(r));
      first += c;
    }
    // The link to the next owning module (an encoder's) or from the previous one (a
    // generator's) is this module's: one with one encoder and one generator.
    double boundary = 0;
    if (i != bi) {
      const std::size_t a = i < bi ? i : owning_before(i), b = i < bi ? owning_after(i) : i;
      const std::uint64_t edges = cut.after(a);
      const module_plan &pa = p.modules[a], &pb = p.modules[b];
      boundary =
          detail::link_time(cost, edges, cut.load(cost, edges, sample_workload, samples_of(pa.dp)),
                            pa.tp, cut.load(cost, edges, sample_workload, samples_of(pb.dp)), pb.tp,
                            same_node(block(a, pa.pp - 1), block(b, 0)));
    }
    detail::module_terms t =
        detail::module_path({.stage_s = times, .hop_s = hops, .fixed_s = fixed}, boundary, v);
    t.sync_s = sync_max;
    if (zb) detail::add_weights(t, weights);
    terms.push_back(t);
  }
  const detail::closed_form_time cf = detail::combine(m, terms);
  ev.iteration_time_s = cf.iteration_s;
  ev.pipeline_time_s = cf.pipeline_s;
  ev.sync_time_s = cf.sync_s;
  double busy = 0;
  for (const auto& s : ev.stages) busy += static_cast<double>(m) * s.time_s;
  ev.bubble_fraction =
      cf.pipeline_s > 0 ? 1.0 - busy / (static_cast<double>(total_stages) * cf.pipeline_s) : 0.0;
  // Model FLOPs of the whole global batch (each module once, no recompute).
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_plan& mp = p.modules[i];
    const module_workload w = sample_workload[i] * static_cast<double>(p.global_batch);
    int first = 0;
    for (int c : mp.layers) {
      ev.model_flops +=
          cost.flops(stage_config_of(mp, i, first, c, mp.colocated ? bb.dp : mp.dp), w).total();
      first += c;
    }
  }
  const double denom = ev.iteration_time_s * static_cast<double>(ev.gpus) * cost.peak_flops();
  ev.mfu = denom > 0 ? ev.model_flops / denom : 0.0;
  ev.samples_per_s =
      ev.iteration_time_s > 0 ? static_cast<double>(p.global_batch) / ev.iteration_time_s : 0.0;
  if (opt.check_memory)
    for (const auto& s : ev.stages)
      if (s.memory_bytes > ev.memory_limit_bytes) detail::fail_memory(s, ev.memory_limit_bytes);
  return ev;
}

}  // namespace disttrain
