#pragma once
/// @file simulate.hpp
/// @brief Simulates one iteration of a plan with the discrete-event simulator
/// (`sim/`), op durations from the cost model: the timeline behind
/// `disttrain-plan --trace/--svg`.
///
/// The plan becomes a multi-module schedule (`make_multi_module`): one segment
/// per disaggregated module (colocated modules add their work to the
/// backbone's first/last stage), `m * dp_backbone` microbatches of `n /
/// dp_backbone` samples (one backbone microbatch each), assigned round-robin
/// to the replicas of every segment; then point-to-point sends and DP
/// gradient sync + optimizer ops are added. The simulated iteration time is
/// close to, but not the same number as, `evaluate`'s closed form (it
/// resolves the actual interleaving, per-replica assignment and overlap).
///
/// @code
/// auto sim = disttrain::simulate_plan(result.plan, cm, req.sample_workload);
/// disttrain::write_json_file("plan.trace.json", disttrain::to_trace_json(sim.schedule, sim.result));
/// @endcode

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/error.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/detail/stage_cost.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/multi_module.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/duration_model.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

/// @brief A plan's simulated iteration: the schedule and its timing.
struct plan_simulation {
  pipeline_schedule schedule;
  sim_result result;
};

namespace detail {

/// @brief `duration_model` of a plan on a cost model (one backbone microbatch per op).
template <cost_model C>
class plan_durations {
 public:
  struct part {
    stage_config cfg;
    module_workload w;
  };
  struct stage_entry {
    std::vector<part> parts;  // model-module order
    std::size_t module = 0;   // owning (disaggregated) module
    int tp = 1, dp = 1;
    bool spans = false;
  };

  plan_durations(const parallel_plan& p, const C& cost, const model_workload& per_sample)
      : cost_(cost), per_sample_(per_sample), g_(p.gpus_per_node) {
    const std::size_t bi = p.backbone_index();
    const module_plan& bb = p.modules[bi];
    samples_ = static_cast<double>(p.microbatch_samples() / bb.dp);
    for (std::size_t i = 0; i < p.modules.size(); ++i) {
      const module_plan& mp = p.modules[i];
      if (mp.colocated) continue;
      int first = 0;
      for (int j = 0; j < mp.pp; ++j) {
        stage_entry e;
        e.module = i;
        e.tp = mp.tp;
        e.dp = mp.dp;
        e.spans = dp_spans_nodes(mp.tp, mp.dp, g_);
        auto colocated = [&](std::size_t c) {
          const module_plan& cp = p.modules[c];
          e.parts.push_back(part{stage_config{c, 0, cp.layers.front(), cp.tp, bb.dp, cp.recompute},
                                 per_sample[c] * samples_});
        };
        if (i == bi && j == 0)
          for (std::size_t c = 0; c < bi; ++c)
            if (p.modules[c].colocated) colocated(c);
        const int layers = mp.layers[static_cast<std::size_t>(j)];
        e.parts.push_back(part{stage_config{i, first, layers, mp.tp, mp.dp, mp.recompute},
                               per_sample[i] * samples_});
        if (i == bi && j == mp.pp - 1)
          for (std::size_t c = bi + 1; c < p.modules.size(); ++c)
            if (p.modules[c].colocated) colocated(c);
        first += layers;
        stages_.push_back(std::move(e));
      }
    }
  }

  [[nodiscard]] double compute_time(const schedule_rank&, const schedule_op& o) const {
    const stage_entry& e = entry(o.stage);
    double t = 0;
    for (const part& x : e.parts) {
      const stage_times st = cost_.stage_time(x.cfg, x.w);
      switch (o.kind) {
        case op_kind::forward: t += st.forward_s; break;
        case op_kind::backward: t += st.backward_s + st.weight_grad_s; break;
        case op_kind::optimizer_step: t += cost_.optimizer_time(x.cfg); break;
        default: break;
      }
    }
    return t;
  }
  [[nodiscard]] double transfer_time(const schedule_rank& src, const schedule_rank& dst,
                                     const schedule_op& o) const {
    const int from_stage = std::min(src.stage, dst.stage);
    const stage_entry& a = entry(from_stage);
    const stage_entry& b = entry(from_stage + 1);
    if (a.module == b.module) {
      const part& x = a.parts.back();
      return cost_.p2p_time(cost_.stage_output_bytes(x.cfg, x.w) / static_cast<double>(a.tp),
                            hop_same_node(a.tp, a.dp, g_));
    }
    (void)o;
    const double bytes = cost_.transfer_bytes(a.module, b.module, per_sample_ * samples_);
    return cost_.p2p_time(bytes / static_cast<double>(std::min(a.tp, b.tp)), false);
  }
  [[nodiscard]] double sync_time(const schedule_rank&, const schedule_op& o) const {
    const stage_entry& e = entry(o.stage);
    double t = 0;
    for (const part& x : e.parts) t += cost_.dp_sync_time(x.cfg, e.spans);
    return t;
  }
  [[nodiscard]] double activation_bytes(const schedule_rank&, const schedule_op& o) const {
    const stage_entry& e = entry(o.stage);
    double b = 0;
    for (const part& x : e.parts)
      b += cost_.stage_memory(x.cfg, x.w, 1).activations -
           cost_.stage_memory(x.cfg, x.w, 0).activations;
    return b;
  }

 private:
  [[nodiscard]] const stage_entry& entry(int stage) const {
    if (stage < 0 || static_cast<std::size_t>(stage) >= stages_.size())
      fail(errc::internal, "simulate_plan", "stage ", stage, " out of range");
    return stages_[static_cast<std::size_t>(stage)];
  }
  const C& cost_;
  model_workload per_sample_;
  int g_;
  double samples_ = 1;
  std::vector<stage_entry> stages_;
};

}  // namespace detail

/// @brief Builds and simulates the schedule of `p` (see the file comment).
/// Throws like `evaluate` for a plan that does not match the cost model, and
/// `errc::unsupported` for an interleaved backbone (`virtual_stages > 1`).
template <cost_model C>
[[nodiscard]] plan_simulation simulate_plan(const parallel_plan& p, const C& cost,
                                            const model_workload& sample_workload) {
  detail::check_plan_against(p, cost.model(), cost.cluster());
  const std::size_t bi = p.backbone_index();
  if (p.modules[bi].virtual_stages > 1)
    detail::fail(
        errc::unsupported, detail::cat("plan.", p.modules[bi].name, ".virtual_stages"),
        "the multi-module schedule has no interleaved 1F1B yet; evaluate() prices this "
        "plan, simulate_plan cannot run it (plan with max_virtual_stages = 1 to simulate)");
  multi_module_spec spec;
  spec.num_microbatches = p.num_microbatches * p.modules[bi].dp;
  for (std::size_t i = 0; i < p.modules.size(); ++i) {
    const module_plan& mp = p.modules[i];
    if (mp.colocated) continue;
    spec.segments.emplace_back(mp.name, mp.pp, mp.dp, !cost.model().modules[i].frozen);
  }
  const detail::plan_durations<C> durations(p, cost, sample_workload);
  spec.cost = [&](const schedule_rank& r, const schedule_op& o) {
    return durations.compute_time(r, o);
  };
  plan_simulation out;
  out.schedule = add_grad_sync(add_communication(make_multi_module(spec)));
  out.result = simulate(out.schedule, durations);
  return out;
}

}  // namespace disttrain
