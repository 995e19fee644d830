#pragma once
/// @file simulate_plan.hpp
/// @brief Simulates one iteration of a plan as it would run: the plan's
/// topology, the split-microbatch chain, the sample map of a batch, every
/// rank's bound program (`bind_world`) and `simulate_bound`, with durations
/// from the cost model. The timeline behind `disttrain-plan --trace/--svg`
/// and `--iterations` (`bind/heterogeneity.hpp`).
///
/// Steps: `topology_of(plan, model)` -> `chain_program` (the chain in 1F1B
/// order, or ZB-H1's for a `zb_h1` plan; one gradient bucket per rank) -> the batch's sample map
/// (`plan_sample_map`: `reorder_for_plan`'s options, or the same options under
/// `arrival_order` for the data as it arrives; each sample costed per segment,
/// a colocated module's seconds added to its host segment; or a map the
/// caller gives) -> `bind_world` -> `simulate_bound`.
/// Without a batch, the plan's expected batch is simulated: `global_batch`
/// samples of `sample_workload` each.
///
/// Durations (`plan_bound_durations`), per global rank:
/// - F / B (B + W; a `zb_h1` plan: B and W apart) of microbatch j: the cost
///   model's `stage_time` of the
///   rank's stage on the samples its replica holds in microbatch j (their
///   workloads summed); a stage that hosts a colocated module adds that
///   module's whole time on the same samples; 0 for a replica with no sample.
///   An interleaved module (`virtual_stages` v > 1) runs chunk c of stage s
///   as its own op, over its own layers (`chunk_config`: Megatron-LM's
///   assignment, chunk c holding the c-th v-th of the layers, each stage its
///   `layers[s] / v`); colocated encoders join the first virtual stage,
///   colocated generators the last.
/// - a message: `p2p_time(bytes, same_node)`, with its own bytes and node
///   placement from the global rank numbering (`gpus_per_node` ranks a node);
///   bytes per sample are the cost model's (`transfer_bytes` across modules,
///   `stage_output_bytes` inside one), carried as rows of 1024 one-byte
///   columns (so within 1 KiB per sample).
/// - a gradient bucket: the stage's DP reduce-scatter + all-gather less what
///   the plan's overlap flags hide behind the replica's mean microbatch
///   (`evaluate`'s formula, since the chain has one bucket per rank), over
///   the rank's actual DP group (spanning nodes or not); the optimizer step
///   is a compute op.
///
/// @snippet bind.cpp simulate_plan_file

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/bind/bind.hpp"
#include "disttrain/bind/plan_reorder.hpp"
#include "disttrain/bind/topology_views.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

/// @brief The stage config of chunk `chunk` of stage `stage` of module `i`
/// of plan `p` (`chunk` 0 and the whole stage without interleaving): its
/// layers are `layers[stage] / v`, starting at `chunk * L / v` plus the
/// earlier stages' chunks, for L layers and v = `virtual_stages`.
[[nodiscard]] inline stage_config chunk_config(const parallel_plan& p, std::size_t i, int stage,
                                               int chunk) {
  const module_plan& mp = p.modules.at(i);
  const int v = mp.virtual_stages;
  if (chunk < 0 || chunk >= v) require_in_range(chunk, 0, v - 1, cat("plan.", mp.name, ".chunk"));
  int total = 0, first = 0;
  for (int s = 0; s < mp.pp; ++s) {
    if (s < stage) first += mp.layers[static_cast<std::size_t>(s)] / v;
    total += mp.layers[static_cast<std::size_t>(s)];
  }
  return stage_config_of(mp, i, chunk * (total / v) + first,
                         mp.layers[static_cast<std::size_t>(stage)] / v, mp.dp);
}

/// @brief A plan's simulated iteration: what was bound and how it ran.
struct plan_simulation {
  topology topo;                   ///< `topology_of(plan, model)`
  pipeline_schedule chain;         ///< the chain program bound
  reorder_result map;              ///< the batch's sample map
  std::vector<link_shape> shapes;  ///< per chain link, rows per sample
  bound_world world;               ///< every rank's program
  sim_result result;               ///< its simulated iteration
};

/// @brief A `duration_model` of a plan on a cost model for one sample
/// map (see the file comment). Keeps references to the cost model, the
/// topology and the map, which must outlive it.
template <cost_model C>
class plan_bound_durations {
 public:
  /// @param batch  per sample of `map` (index into `map.samples`), its workload
  plan_bound_durations(const parallel_plan& p, const C& cost, const topology& t,
                       const reorder_result& map, std::span<const model_workload> batch)
      : cost_(cost),
        topo_(t),
        map_(map),
        g_(cost.cluster().gpus_per_node),
        m_(map.microbatches),
        overlap_rs_(p.overlap_grad_reduce),
        overlap_ag_(p.overlap_param_gather),
        split_(p.schedule == plan_schedule::zb_h1) {
    require(batch.size() == map.samples.size(), "plan_bound_durations.batch", "has ", batch.size(),
            " workloads, the sample map ", map.samples.size(), " samples");
    const std::size_t bi = p.backbone_index();
    const module_plan& bb = p.modules[bi];
    // Parts of every chain stage's chunks, as evaluate builds them.
    for (int c = 0; c < t.num_chain_stages(); ++c) {
      const auto [mid, sid] = t.chain_at(c);
      const auto i = static_cast<std::size_t>(mid.value);
      const module_plan& mp = p.modules[i];
      chain_stage cs;
      cs.segment = static_cast<std::size_t>(t.owning_index(mid));
      cs.dp = mp.dp;
      cs.chunks = mp.virtual_stages;
      cs.parts.resize(static_cast<std::size_t>(cs.chunks));
      const auto colocated = [&](std::vector<stage_config>& parts, std::size_t k) {
        const module_plan& q = p.modules[k];
        parts.push_back(stage_config_of(q, k, 0, cost.model().modules[k].layers(), bb.dp));
      };
      for (int k = 0; k < cs.chunks; ++k) {
        auto& parts = cs.parts[static_cast<std::size_t>(k)];
        if (i == bi && sid.value == 0 && k == 0)
          for (std::size_t e = 0; e < bi; ++e)
            if (p.modules[e].colocated) colocated(parts, e);
        parts.push_back(chunk_config(p, i, sid.value, k));
        if (i == bi && sid.value == mp.pp - 1 && k == cs.chunks - 1)
          for (std::size_t e = bi + 1; e < p.modules.size(); ++e)
            if (p.modules[e].colocated) colocated(parts, e);
        for (const stage_config& cfg : parts) cs.all_parts.push_back(cfg);
      }
      stages_.push_back(std::move(cs));
    }
    // Workload of every cell (segment, microbatch, replica): its samples summed.
    cells_.resize(map.cells());
    for (std::size_t k = 0; k < map.modules; ++k)
      for (std::size_t j = 0; j < m_; ++j)
        for (std::size_t r = 0; r < map.dp[k]; ++r) {
          cell& x = cells_[map.cell_index(k, r, j)];
          for (const std::uint32_t idx : map.cell(k, r, j)) x.w += batch[idx];
          x.samples = map.cell(k, r, j).size();
        }
    // F, B and W seconds per (chain stage, replica, microbatch, chunk).
    for (std::size_t c = 0; c < stages_.size(); ++c) {
      chain_stage& cs = stages_[c];
      const auto V = static_cast<std::size_t>(cs.chunks);
      cs.times.resize(static_cast<std::size_t>(cs.dp) * m_ * V);
      for (std::size_t r = 0; r < static_cast<std::size_t>(cs.dp); ++r)
        for (std::size_t j = 0; j < m_; ++j) {
          const cell& x = cells_[map.cell_index(cs.segment, r, j)];
          if (x.samples == 0) continue;
          for (std::size_t k = 0; k < V; ++k) {
            stage_times& ft = cs.times[(r * m_ + j) * V + k];
            for (const stage_config& cfg : cs.parts[k]) {
              const stage_times st = cost.stage_time(cfg, x.w[cfg.module]);
              ft.forward_s += st.forward_s;
              ft.backward_s += split_ ? st.backward_s : st.backward_s + st.weight_grad_s;
              ft.weight_grad_s += split_ ? st.weight_grad_s : 0.0;
            }
          }
        }
    }
    ranks_.reserve(static_cast<std::size_t>(t.world_size()));
    for (int r = 0; r < t.world_size(); ++r) {
      const topology_coord co = t.coord(r);
      ranks_.push_back({t.chain_stage(co.module, co.stage), co.replica.value});
    }
  }

  /// @brief Chain stages (as the topology's `num_chain_stages`).
  [[nodiscard]] int chain_stages() const noexcept { return static_cast<int>(stages_.size()); }
  /// @brief DP replicas of chain stage `c`.
  [[nodiscard]] int replicas(int c) const { return stages_.at(static_cast<std::size_t>(c)).dp; }
  /// @brief F, B (B + W unless split) and W (0 unless split) seconds of
  /// chunk `chunk` of replica `r` of chain stage `c` in microbatch `j`; zeros
  /// for a replica with no sample. Throws `std::out_of_range` outside the shape.
  [[nodiscard]] const stage_times& cell_times(int c, replica_id r, std::size_t j,
                                              int chunk = 0) const {
    const chain_stage& cs = stages_.at(static_cast<std::size_t>(c));
    require_in_range(chunk, 0, cs.chunks - 1, "plan_bound_durations.chunk");
    return cs.times.at((static_cast<std::size_t>(r.value) * m_ + j) *
                           static_cast<std::size_t>(cs.chunks) +
                       static_cast<std::size_t>(chunk));
  }

  /// @brief F, B (B + W unless split), W (0 unless split) or the optimizer step of `rank`.
  [[nodiscard]] double compute(int rank, const bound_op& b) const {
    const rank_info& ri = ranks_.at(static_cast<std::size_t>(rank));
    const chain_stage& cs = stages_[static_cast<std::size_t>(ri.chain_stage)];
    if (b.op.kind == op_kind::optimizer_step) {
      double s = 0;
      for (const stage_config& cfg : cs.all_parts) s += cost_.optimizer_time(cfg);
      return s;
    }
    if (b.op.microbatch < 0) return 0.0;
    const auto& ft = cs.times[(static_cast<std::size_t>(ri.replica) * m_ +
                               static_cast<std::size_t>(b.op.microbatch)) *
                                  static_cast<std::size_t>(cs.chunks) +
                              static_cast<std::size_t>(b.op.chunk)];
    if (b.op.kind == op_kind::forward) return ft.forward_s;
    if (b.op.kind == op_kind::backward) return ft.backward_s;
    if (b.op.kind == op_kind::weight) return ft.weight_grad_s;
    return 0.0;
  }
  /// @brief One message between two global ranks (NVLink inside a node, else the NIC).
  [[nodiscard]] double transfer(int src, int dst, const bound_op& b) const {
    return static_cast<double>(cost_.p2p_time(static_cast<double>(b.bytes), src / g_ == dst / g_));
  }
  /// @brief The exposed DP collectives of `rank`'s stage (see the file comment).
  [[nodiscard]] double reduce(int rank, const bound_op&) const {
    const rank_info& ri = ranks_.at(static_cast<std::size_t>(rank));
    const chain_stage& cs = stages_[static_cast<std::size_t>(ri.chain_stage)];
    const topology_coord co = topo_.coord(rank);
    const std::vector<int> group = topo_.dp_group(co.module, co.stage, co.tp_rank);
    const bool spans = group.front() / g_ != group.back() / g_;
    // The replica's mean microbatch: the window its collectives hide behind.
    model_workload mean;
    for (std::size_t j = 0; j < m_; ++j)
      mean += cells_[map_.cell_index(cs.segment, static_cast<std::size_t>(ri.replica), j)].w;
    mean = mean * (1.0 / static_cast<double>(m_));
    return exposed_stage_sync(cost_, cs.all_parts, mean, spans,
                              {.grad_reduce = overlap_rs_, .param_gather = overlap_ag_});
  }

 private:
  struct chain_stage {
    std::vector<std::vector<stage_config>> parts;  // per chunk, model-module order
    std::vector<stage_config> all_parts;           // every chunk's (the stage's parameters)
    std::size_t segment = 0;                       // reorder module (index into the map)
    int dp = 1;
    int chunks = 1;
    std::vector<stage_times> times;  // [(replica * M + j) * chunks + chunk]
  };
  struct cell {
    model_workload w;
    std::size_t samples = 0;
  };
  struct rank_info {
    int chain_stage = 0;
    int replica = 0;
  };
  const C& cost_;
  const topology& topo_;
  const reorder_result& map_;
  int g_;
  std::size_t m_;
  bool overlap_rs_, overlap_ag_;
  bool split_;  // B and W apart (ZB-H1)
  std::vector<chain_stage> stages_;
  std::vector<cell> cells_;
  std::vector<rank_info> ranks_;
};

/// @brief The activation crossing every link of plan `p` (between virtual
/// stages: chain stages without interleaving) for the
/// samples of `map` (`batch[i]`: the workload of `map.samples[i]`), as
/// `bind_world` takes it: inside a module, its stage's output
/// (`stage_output_bytes`, field "activation"); plus one field per data edge
/// the link carries (`links_of`: across modules, and edges a module forwards;
/// `transfer_bytes`, field "<from>-><to>", differentiable iff its source
/// runs a backward pass); each as rows of 1024 one-byte columns per sample,
/// rounded up.
/// @snippet bind.cpp plan_link_shapes
template <cost_model C>
[[nodiscard]] std::vector<link_shape> plan_link_shapes(const parallel_plan& p, const C& cost,
                                                       const topology& t, const reorder_result& map,
                                                       std::span<const model_workload> batch) {
  constexpr std::int64_t columns = 1024;  // >= lcm of any two TP degrees in a node
  require(batch.size() == map.samples.size(), "plan_link_shapes.batch", "has ", batch.size(),
          " workloads, the sample map ", map.samples.size(), " samples");
  std::vector<link_shape> out(static_cast<std::size_t>(t.num_links()));
  const model_spec& model = cost.model();
  auto add_field = [&](link_shape& shape, std::string name, auto&& bytes_of) {
    link_field& ls = shape.fields.emplace_back();
    ls.name = std::move(name);
    ls.hidden = columns;
    ls.elem_size = 1;
    ls.rows.reserve(map.samples.size());
    for (std::size_t i = 0; i < map.samples.size(); ++i)
      ls.rows.push_back(
          static_cast<std::int64_t>(std::ceil(bytes_of(i) / static_cast<double>(columns))));
  };
  // One field per data edge a link carries (`links_of`), after the stage's own output; an
  // edge's gradient flows back iff its source runs a backward pass.
  auto add_edges = [&](link_shape& shape, const std::vector<connection>& edges) {
    for (const connection& e : edges) {
      add_field(shape, cat(model.modules[e.from].name, "->", model.modules[e.to].name),
                [&](std::size_t i) { return cost.transfer_bytes(e.from, e.to, batch[i]); });
      shape.fields.back().differentiable = model.runs_backward(e.from);
    }
  };
  std::vector<module_links> links_by_module(p.modules.size());  // of the modules owning ranks
  for (const module_id m : t.owning_modules())
    links_by_module[static_cast<std::size_t>(m.value)] =
        links_of(p, model, static_cast<std::size_t>(m.value));
  for (std::size_t l = 0; l < out.size(); ++l) {
    const auto [ca, ka] = t.virtual_at(static_cast<int>(l));
    const auto [ma, sa] = t.chain_at(ca);
    const auto mb = t.chain_at(t.virtual_at(static_cast<int>(l) + 1).first).first;
    const auto a = static_cast<std::size_t>(ma.value);
    const module_links& links = links_by_module[a];
    if (ma == mb) {
      const stage_config cfg = chunk_config(p, a, sa.value, ka);
      add_field(out[l], "activation",
                [&](std::size_t i) { return cost.stage_output_bytes(cfg, batch[i][a]); });
      add_edges(out[l], links.through);
    } else if (!links.after.empty()) {
      add_edges(out[l], links.after);
    } else {  // a custom model whose next module takes nothing from this one
      add_field(out[l], "none", [](std::size_t) { return 0.0; });
    }
  }
  return out;
}

namespace detail {

/// @brief The chain program's settings for plan `p`: its microbatches, ZB-H1's
/// order for a `zb_h1` plan (an interleaved module runs interleaved 1F1B:
/// `chain_program`). Refuses (`errc::unsupported`) a GPipe plan (at
/// `plan.schedule`): the bound chain program runs 1F1B or ZB-H1 only.
inline chain_options chain_options_of(const parallel_plan& p) {
  if (p.schedule == plan_schedule::gpipe)
    fail(errc::unsupported, "plan.schedule",
         "the bound chain program runs 1f1b or zb_h1, not gpipe; evaluate() prices this plan");
  return {.microbatches = p.num_microbatches, .zero_bubble = p.schedule == plan_schedule::zb_h1};
}

/// @brief Checks a batch of workloads against a cost model's model.
template <cost_model C>
void check_plan_batch(const C& cost, std::span<const model_workload> batch) {
  require(!batch.empty(), "simulate_plan.batch", "is empty");
  for (std::size_t i = 0; i < batch.size(); ++i)
    require(
        batch[i].size == cost.model().modules.size(),
        [&] { return cat("simulate_plan.batch[", i, "]"); }, "has ", batch[i].size,
        " modules, the model has ", cost.model().modules.size());
}

}  // namespace detail

/// @brief Which sample map a plan's batch is simulated with.
enum class sample_order : std::uint8_t {
  reordered,  ///< the reorderer's map with the plan's options (`reorder_for_plan`)
  arrival,    ///< the same options under `arrival_order`: samples as they arrive (no reordering)
  /// The reorderer's quick settings (`screening_order`); `plan_for_data`
  /// screens plans with them.
  screening,
};

/// @brief `o` with the reorderer's quick settings: size-sorted slots, LPT
/// balance over the replicas and an order search of 100 evaluations. On the
/// presets' expected-batch optima it runs 4-480x faster than the defaults
/// (0.2-1.0 ms a batch) and its maps simulate 0.2-1.6% slower than theirs
/// (docs/planner.md, "Planning for the data").
[[nodiscard]] inline reorder_options screening_order(reorder_options o) {
  o.slots = slot_policy::size_sorted;
  o.balance = balance_method::lpt;
  o.order_budget = 100;
  return o;
}

/// @brief The sample map of `batch` on plan `p`: every sample (id = its index
/// in `batch`) costed per segment with the plan's TP (a colocated module's
/// seconds on its host segment, `reorder_for_plan`), then the reorderer with
/// the plan's options (`sample_order::reordered`) or with reordering off
/// (`sample_order::arrival`, `arrival_order`: what Megatron-LM's sampler
/// deals). Throws like `reorder_for_plan` and `reorderer::assign`, and
/// `invalid_argument` at `simulate_plan.batch` for an empty batch or
/// workloads over another model.
/// @snippet bind.cpp plan_sample_map
template <cost_model C>
[[nodiscard]] reorder_result plan_sample_map(const parallel_plan& p, const C& cost,
                                             std::span<const model_workload> batch,
                                             sample_order order = sample_order::reordered) {
  detail::check_plan_batch(cost, batch);
  const plan_reorder<C> pr = reorder_for_plan(p, cost);
  std::vector<sample_meta> meta(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    meta[i].id = i;
    meta[i].modules = static_cast<std::uint32_t>(pr.cost.columns());
    for (std::size_t k = 0; k < cost.model().modules.size(); ++k)
      meta[i].cost[pr.cost.column_of(k)] +=
          cost.stage_time(pr.cost.config(k), batch[i][k]).total_s();
  }
  reorderer<> r(order == sample_order::arrival     ? arrival_order(pr.options)
                : order == sample_order::screening ? screening_order(pr.options)
                                                   : pr.options);
  return r.assign(meta);
}

/// @brief Simulates `p` on batch `batch` with the sample map `map` (see the
/// file comment): `batch[i]` is the workload of `map.samples[i]` (the map's
/// samples are sorted by id, so with `plan_sample_map`'s ids, sample `i`).
/// Throws like `evaluate` for a plan that does not match the cost model,
/// `invalid_argument` at `simulate_plan.batch` for an empty batch or
/// workloads over another model, at `simulate_plan.map` for a map whose
/// segments, DP degrees, microbatches or sample count are not the plan's and
/// batch's, and `errc::unsupported` for a GPipe plan: the chain program runs
/// 1F1B (interleaved where a module has `virtual_stages > 1`) or ZB-H1.
/// @snippet bind.cpp simulate_plan
template <cost_model C>
[[nodiscard]] plan_simulation simulate_plan(const parallel_plan& p, const C& cost,
                                            std::span<const model_workload> batch,
                                            const reorder_result& map) {
  detail::check_plan_against(p, cost.model(), cost.cluster());
  const chain_options chain = detail::chain_options_of(p);
  detail::check_plan_batch(cost, batch);
  const plan_segments seg = reorder_segments(p);
  const auto& mods = seg.options.modules;
  bool same = map.modules == mods.size() &&
              map.microbatches == static_cast<std::uint32_t>(p.num_microbatches);
  for (std::size_t k = 0; same && k < mods.size(); ++k) same = map.dp[k] == mods[k].dp;
  require(same, "simulate_plan.map", "has ", map.modules, " segments and ", map.microbatches,
          " microbatches; the plan has ", mods.size(), " and ", p.num_microbatches,
          " (or a DP degree differs)");
  require(map.samples.size() == batch.size(), "simulate_plan.map", "has ", map.samples.size(),
          " samples, the batch ", batch.size());
  validate(map);
  plan_simulation out;
  out.topo = topology_of(p, cost.model());
  out.chain = chain_program(out.topo, chain);
  out.map = map;
  out.shapes = plan_link_shapes(p, cost, out.topo, out.map, batch);
  out.world = bind_world(out.topo, out.chain, out.map, out.shapes);
  out.world.name = cat(p.modules[p.backbone_index()].name, " plan");
  const plan_bound_durations<C> d(p, cost, out.topo, out.map, batch);
  out.result = simulate_bound(out.world, d);
  return out;
}

/// @brief Simulates `p` on batch `batch` (one workload per sample, in sample
/// id order) with the reorderer's map (`plan_sample_map`). Throws as above.
template <cost_model C>
[[nodiscard]] plan_simulation simulate_plan(const parallel_plan& p, const C& cost,
                                            std::span<const model_workload> batch) {
  detail::check_plan_against(p, cost.model(), cost.cluster());
  (void)detail::chain_options_of(p);
  return simulate_plan(p, cost, batch, plan_sample_map(p, cost, batch));
}

/// @brief Simulates the plan's expected batch: `global_batch` samples of
/// `sample_workload` each (the batch `evaluate` prices). Throws as above, and
/// `invalid_argument` at `sample_workload` for a workload over another model.
template <cost_model C>
[[nodiscard]] plan_simulation simulate_plan(const parallel_plan& p, const C& cost,
                                            const model_workload& sample_workload) {
  if (sample_workload.size != cost.model().modules.size())
    fail(errc::invalid_argument, "sample_workload", "has ", sample_workload.size,
         " modules, the model has ", cost.model().modules.size());
  require_positive(p.global_batch, "plan.global_batch");
  const std::vector<model_workload> batch(static_cast<std::size_t>(p.global_batch),
                                          sample_workload);
  return simulate_plan(p, cost, std::span<const model_workload>(batch));
}

}  // namespace disttrain
