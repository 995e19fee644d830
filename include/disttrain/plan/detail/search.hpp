#pragma once
/// @file search.hpp
/// @brief The planner's exact branch-and-bound search (see docs/planner.md).
///
/// Search space (fixed by `planner_options`):
/// - n = samples per pipeline microbatch, a divisor of the global batch
///   (m = global_batch / n microbatches);
/// - recompute: none or full (`search_recompute`), and selective with
///   `search_selective_recompute`, one choice per module;
/// - backbone: tp in the TP candidates, recompute, dp a divisor of n,
///   pp in [min_backbone_pp, max_backbone_pp];
/// - *disaggregated* layouts: every side module (the encoders, the
///   generators: any number of each) gets its own GPUs: tp, recompute, pp in
///   [1, max_side_pp], dp in [1, n]; with `include_mixed`, any proper subset
///   of them colocated on the backbone instead;
/// - *monolithic* layouts (Megatron-style, `include_monolithic`): every side
///   module colocated on the backbone's first/last stage, one recompute flag,
///   layers split by the rules in `monolithic_splits`;
/// - schedule 1F1B, interleaved 1F1B (backbone, `max_virtual_stages`) or, with
///   `zero_bubble`, ZB-H1 for every plain layout (its own backbone nodes:
///   every stage holds min(P, m) microbatches, so splits and side options are
///   fitted to that);
/// - layers split by `balanced_split`; where a backbone split does not fit
///   memory, by the same rule under per-stage memory caps (`fitted_split`,
///   docs/planner.md "Layer split");
/// - constraints: total GPUs <= N, every stage fits memory, each segment's
///   first rank is a multiple of its TP degree (TP groups inside nodes).
/// Objective: the closed-form iteration time of `evaluate`; ties broken by
/// fewer GPUs, then the smallest `tie_key`.
///
/// Exactness rests on these properties of the cost model (the analytic model
/// has them; the exhaustive tests check the result):
/// - A1: stage costs depend on a layer range only through its length and
///   whether it holds the first / last layer;
/// - A2: stage time does not depend on dp; stage memory is non-increasing in dp;
/// - A3: DP sync + optimizer time of a stage is non-decreasing in dp;
/// - A4: a transfer or a DP sync inside a node is no slower than the same one
///   over the NIC;
/// - stage time is non-decreasing in the number of layers;
/// - A5: stage memory is non-decreasing in the number of layers (the memory
///   caps; a capped split is checked again, so breaking A5 loses plans only);
/// - A6 (ZB-H1 only): a stage's W time is at most its F + B time, so a module
///   adds a non-negative `path - 2 W sum` to the closed form (`closed_form.hpp`).
/// A configuration is pruned by the bound of its uncapped split's slowest
/// stage (no capped split has a faster one) with rho * L for the stage-time
/// sum (`any_split_bound`), and by its exact split bound once its split is known.
/// Links follow the rank placement (`detail/stage_cost.hpp`), so a module's
/// hops, sync and boundary depend on its first rank modulo the node size:
/// the modules owning ranks sit in chain order from rank 0 (encoders, the
/// backbone, generators; docs/planner.md, "Several encoders or generators",
/// and `chain_cut.hpp` for what each link carries). The bounds price every link at the cheapest class
/// any placement could give (`link_case::best`: NVLink only for blocks of at
/// most a node); candidates are scored with the placement's classes, bit for
/// bit as `evaluate`. For a side module with fixed (tp, recompute, pp,
/// per-replica samples k = ceil(n/dp)), a larger dp of the same GPU-count
/// residue (a module with others after it) or of any (the last module) is
/// dominated once its stages exceed a node (every link the NIC; A3, A4);
/// below that, the option lists keep every dp not dominated in its own path
/// and sync (`side_options`, `side_place`).
///
/// Pieces: what is enumerated (search_space.hpp), the stage times and layer
/// splits (stage_tables.hpp, keys in stage_time_cache.hpp), the side modules'
/// options and link pricing (side_options.hpp), the closed-form time
/// (closed_form.hpp) and the best plan so far (incumbent.hpp). This file:
/// the backbone configurations and their bounds, the disaggregated search
/// (pairing each backbone configuration with the side modules' options in
/// chain order: `pair_search`) and the monolithic one.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/module_shape.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/detail/chain_cut.hpp"
#include "disttrain/plan/detail/closed_form.hpp"
#include "disttrain/plan/detail/incumbent.hpp"
#include "disttrain/plan/detail/layer_split.hpp"
#include "disttrain/plan/detail/search_space.hpp"
#include "disttrain/plan/detail/side_options.hpp"
#include "disttrain/plan/detail/stage_cost.hpp"
#include "disttrain/plan/detail/stage_tables.hpp"
#include "disttrain/plan/detail/stage_time_cache.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain {

namespace detail {

/// @brief The branch-and-bound search (see the file comment and docs/planner.md).
template <cost_model C>
class plan_search : private search_space {
 public:
  plan_search(const C& cost, const plan_request& req, const planner_options& opt)
      : search_space(cost, req, opt), cost_(cost), model_(cost.model()), req_(req), opt_(opt) {}

  /// @brief Runs the search; returns the best plan or throws `errc::infeasible`.
  ranked_plan run() {
    search();
    if (!best_.empty()) return best_.best();
    no_plan();
  }

  /// @brief Runs the search in pool mode: the best plan of every
  /// `plan_class` whose time is at most `limit`, best first (empty when none
  /// is). Exact per class, as `run` is over the whole space.
  std::vector<ranked_plan> run_classes(double limit) {
    best_.keep_classes(limit);
    search();
    return best_.take_classes();
  }

  [[nodiscard]] const planner_stats& stats() const noexcept { return stats_; }

 private:
  void search() {
    backbone_configs();
    stats_.backbone_configs = static_cast<long long>(nodes_.size());
    if (opt_.include_monolithic) search_monolithic();
    if (opt_.include_disaggregated) search_disaggregated();
  }

  [[noreturn]] void no_plan() {
    const long long min_gpus =
        opt_.include_monolithic ? 1 : 1 + static_cast<long long>(side_modules_.size());
    if (N_ < min_gpus)
      fail(errc::infeasible, "cluster.num_gpus", "the layout needs at least ", min_gpus,
           " GPUs, the cluster has ", N_);
    if (viol_.any)
      fail(errc::infeasible, viol_.where, "no layout of the model on ", N_,
           " GPUs fits in memory; the closest needs ", viol_.need / 1e9, " GB per GPU, limit ",
           limit_ / 1e9, " GB (over by ", viol_.over / 1e9,
           " GB); use more GPUs or GPUs with more memory");
    fail(errc::infeasible, "cluster.num_gpus", "no layout of the model fits on ", N_,
         " GPUs within the search space (global batch ", S_, ", tp/pp/dp limits)");
  }

  // ---- backbone configurations ----
  struct backbone_cfg {
    double lb = 0;  // cheap bound (see backbone_configs), scaled down by 1e-9 for rounding
    int n = 1, tp = 1, dp = 1, pp = 1, k = 1;
    recompute_mode rc = recompute_mode::none;
    const split_info* layout = nullptr;  // set when the configuration is processed
    int v = 1;                           // interleaved chunks per device
    bool zb = false;                     // ZB-H1 (v == 1)
  };

  /// @brief The `plan_class` of backbone configuration `b` with the side
  /// modules of `colocated` (bit i: model module i) colocated.
  [[nodiscard]] static plan_class class_of(const backbone_cfg& b,
                                           std::uint32_t colocated) noexcept {
    return {b.n, b.dp, b.pp, b.v, b.zb ? 1 : 0, static_cast<long long>(colocated)};
  }

  /// @brief A plan with `b`'s microbatching and schedule, its modules named, no layout yet.
  [[nodiscard]] parallel_plan base_plan(const backbone_cfg& b) const {
    parallel_plan p;
    p.global_batch = S_;
    p.num_microbatches = S_ / b.n;
    p.schedule = b.zb ? plan_schedule::zb_h1 : plan_schedule::one_f_one_b;
    p.gpus_per_node = g_;
    p.overlap_grad_reduce = opt_.overlap_grad_reduce;
    p.overlap_param_gather = opt_.overlap_param_gather;
    p.modules.resize(model_.modules.size());
    for (std::size_t i = 0; i < model_.modules.size(); ++i) {
      p.modules[i].name = model_.modules[i].name;
      p.modules[i].role = std::string(to_string(model_.modules[i].role));
      p.modules[i].sequence_parallel = opt_.sequence_parallel;
    }
    return p;
  }

  /// @brief Every (n, tp, rc, dp, pp, v) of the backbone within the GPU count,
  /// with its cheap bound, into `nodes_` (generation order) and the min-heap
  /// `pending_` that `config(i)` pops in increasing bound order (ties:
  /// generation order). The searches stop at the first configuration whose
  /// bound exceeds the incumbent, so only a prefix is ever sorted.
  /// Every split has max >= rho L / pp and sum >= rho L, so the pipeline is at
  /// least (m-1) rho L/pp + rho L (1F1B) or (m-1) rho L/pp + rho L/v + (1 - 1/v)
  /// rho L/pp (v interleaved chunks: path >= S/v + (1 - 1/v) T), or (m-1) rho
  /// L/pp + rho_zb L (ZB-H1, `planner_options::zero_bubble`: a node of its own
  /// per plain configuration). Interleaving needs pp >= 2, m % pp == 0 and v |
  /// L (Megatron-LM's rules).
  void backbone_configs() {
    nodes_.clear();
    for (int n : divisors(S_))
      for (int tp : mods_[bi_].tps)
        for (recompute_mode rc : rcs_)
          for (int dp : divisors(n))
            add_depths(backbone_cfg{0.0, n, tp, dp, 0, n / dp, rc, nullptr});
    pending_.resize(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) pending_[i] = {nodes_[i].lb, i};
    std::make_heap(pending_.begin(), pending_.end(), std::greater<>{});
    sorted_.clear();
  }

  /// @brief The nodes of backbone `c` (its samples per microbatch, TP, DP,
  /// recompute; `pp` and the bound unset) at every pipeline depth: plain
  /// 1F1B, ZB-H1 when enabled, and each interleaving Megatron-LM allows.
  void add_depths(const backbone_cfg& c) {
    const double L = static_cast<double>(mods_[bi_].layers);
    const int m = S_ / c.n;
    const double r = tables_.rho(tables_.table(bi_, c.tp, c.rc, c.k));
    for (int pp = min_pp_b_; pp <= max_pp_b_; ++pp) {
      if (static_cast<long long>(c.tp) * pp * c.dp > N_) break;
      const double lb =
          (static_cast<double>(m - 1) * (r * L / static_cast<double>(pp)) + r * L) * (1.0 - 1e-9);
      nodes_.push_back(backbone_cfg{lb, c.n, c.tp, c.dp, pp, c.k, c.rc, nullptr});
      if (opt_.zero_bubble) {
        // ZB-H1: the fill is sum (t_j - 2 W_j) + 2 max W >= rho_zb L (W <= F + B).
        const double rz = tables_.rho_zb(tables_.table(bi_, c.tp, c.rc, c.k)) * L;
        const double x = static_cast<double>(m - 1) * (r * L / static_cast<double>(pp)) + rz;
        nodes_.push_back(
            backbone_cfg{x - std::abs(x) * 1e-9, c.n, c.tp, c.dp, pp, c.k, c.rc, nullptr, 1, true});
      }
      if (pp < 2 || m % pp != 0) continue;
      for (int v = 2; v <= opt_.max_virtual_stages; ++v) {
        if (mods_[bi_].layers % v != 0 || mods_[bi_].layers / v < pp) continue;
        const double vv = static_cast<double>(v);
        const double t = r * L / static_cast<double>(pp);
        const double lbv =
            (static_cast<double>(m - 1) * t + (r * L / vv + (1.0 - 1.0 / vv) * t)) * (1.0 - 1e-9);
        nodes_.push_back(backbone_cfg{lbv, c.n, c.tp, c.dp, pp, c.k, c.rc, nullptr, v});
      }
    }
  }

  /// @brief The i-th backbone configuration in increasing bound order, or
  /// nullptr past the last one.
  backbone_cfg* config(std::size_t i) {
    while (sorted_.size() <= i && !pending_.empty()) {
      std::pop_heap(pending_.begin(), pending_.end(), std::greater<>{});
      sorted_.push_back(pending_.back().second);
      pending_.pop_back();
    }
    return i < sorted_.size() ? &nodes_[sorted_[i]] : nullptr;
  }

  /// @brief (m-1) * max stage + fill/drain stage times of split `sp` of `b`: a
  /// lower bound of the iteration time of every layout with this backbone
  /// configuration and split.
  [[nodiscard]] double split_bound(const backbone_cfg& b, const split_info& sp) const {
    if (!b.zb) return pipeline_bound(b, sp.tmax, sp.tsum);
    // ZB-H1: (tsum - 2 sum W) + 2 max W, below evaluate's (path - 2 sum W) + 2 max W.
    module_terms w;
    add_weights(w, sp.weights);
    return pipeline_bound(b, sp.tmax, (sp.tsum - 2.0 * w.w_sum_s) + 2.0 * w.w_max_s);
  }

  /// @brief A lower bound over every split of `b`, memory-capped ones
  /// included, from its balanced split `bal`: no split has a smaller largest
  /// stage than `bal` (it minimises it), and no split's stage times sum to less
  /// than rho * L (`rho`) or than its largest stage.
  /// ZB-H1: the fill (sum of t_j - 2 W_j, + 2 max W) is at least rho_zb * L
  /// and at least the largest stage (every t_j - 2 W_j >= 0).
  double any_split_bound(const backbone_cfg& b, const split_info& bal) {
    time_table& t = tables_.table(bi_, b.tp, b.rc, b.k);
    const double L = static_cast<double>(mods_[bi_].layers);
    if (b.zb) {
      const double rz = tables_.rho_zb(t) * L;
      return pipeline_bound(b, bal.tmax, std::max(rz - std::abs(rz) * 1e-9, bal.tmax));
    }
    const double r = tables_.rho(t) * L;
    return pipeline_bound(b, bal.tmax, std::max(r * (1.0 - 1e-9), bal.tmax));
  }

  /// @brief (m-1) * tmax + the fill/drain of stage times summing to tsum with
  /// largest tmax (interleaved: (tsum - tmax) / v + tmax; ZB-H1: `tsum` is
  /// the fill already), monotone in both.
  [[nodiscard]] double pipeline_bound(const backbone_cfg& b, double tmax, double tsum) const {
    const double fill =
        b.v <= 1 ? tsum : (tsum - tmax) / static_cast<double>(b.v) * (1.0 - 1e-9) + tmax;
    return static_cast<double>(S_ / b.n - 1) * tmax + fill;
  }

  /// @brief Links of the backbone configuration `b` with the side modules of
  /// `colocated` on its first (encoders) / last (generators) stage, its hops
  /// forwarding the edges `cut` passes through it; the colocated parts' sync
  /// is added to those stages in model-module order (as `evaluate` does).
  void backbone_links(const backbone_cfg& b, std::uint32_t colocated, const chain_cut& cut,
                      stage_links& L) {
    const module_workload w = tables_.workload(bi_, b.k);
    const link_load pass = cut.load(cost_, cut.through(bi_), req_.sample_workload, b.k);
    L.ranks = static_cast<long long>(b.tp) * b.dp;
    L.hop_in.clear();
    L.hop_nic.clear();
    L.sync_in.clear();
    L.sync_nic.clear();
    // The colocated parts run whole in the first / last chunk (closed_form.hpp).
    L.fixed.assign(static_cast<std::size_t>(b.pp), 0.0);
    if (b.v > 1) {
      L.fixed.front() = tables_.colocated_time(colocated, true, b.tp, b.rc, b.k);
      L.fixed.back() = tables_.colocated_time(colocated, false, b.tp, b.rc, b.k);
    }
    std::vector<std::array<stage_sync, 2>> ye, yg;  // colocated parts, in model-module order
    for (const std::size_t i : side_modules_)
      if ((colocated >> i) & 1U)
        (i < bi_ ? ye : yg)
            .push_back(part_sync_both(cost_, tables_.colocated_cfg(i, b.tp, b.dp, b.rc),
                                      tables_.workload(i, b.k)));
    for (int j = 0; j < b.pp; ++j) {
      const stage_type ty = type_of_stage(j, b.pp);
      const stage_config cfg =
          tables_.stage(bi_, at(b.layout->first, j), at(b.layout->layers, j), b.tp, b.dp, b.rc);
      const bool more = j + 1 < b.pp;
      L.hop_in.push_back(more ? hop_time(cost_, cfg, w, true, mods_[bi_].dirs, pass) : 0.0);
      L.hop_nic.push_back(more ? hop_time(cost_, cfg, w, false, mods_[bi_].dirs, pass) : 0.0);
      const std::array<stage_sync, 2> own = part_sync_both(cost_, cfg, w);
      const bool first = ty == stage_type::first || ty == stage_type::whole;
      const bool last = ty == stage_type::last || ty == stage_type::whole;
      for (std::size_t spans = 0; spans < 2; ++spans) {
        stage_sync y;
        if (first)
          for (const auto& e : ye) y.add(e[spans]);
        y.add(own[spans]);
        if (last)
          for (const auto& g : yg) y.add(g[spans]);
        (spans ? L.sync_nic : L.sync_in).push_back(tables_.exposed_sync(y));
      }
    }
  }

  /// @brief Backbone terms (max stage, path, sync) of `b` with links `L`
  /// whose first rank is `base` (`link_case::best`: a lower bound for any base).
  module_terms backbone_terms(const backbone_cfg& b, const stage_links& L, long long base,
                              link_case lc) {
    const double sync = place(L, base, lc, g_, hops_);
    module_terms t =
        module_path({.stage_s = b.layout->times, .hop_s = hops_, .fixed_s = L.fixed}, 0.0, b.v);
    t.sync_s = sync;
    if (b.zb) add_weights(t, b.layout->weights);
    return t;
  }

  /// @brief Microbatches (chunk-microbatches if interleaved) backbone stage `j`
  /// of `b` keeps in flight in a chain of `P` stages whose first `b.pp` are the
  /// backbone's (ZB-H1: min(P, m) on every stage).
  [[nodiscard]] static int backbone_in_flight(const backbone_cfg& b, int j, int P, int m) noexcept {
    if (b.zb) return zb_h1_in_flight(P, m);
    return b.v > 1 ? interleaved_in_flight(
                         {.pp = b.pp, .chunks = b.v, .microbatches = m, .after = P - b.pp}, j)
                   : one_f_one_b_in_flight(P, j, m);
  }

  /// @brief Memory per GPU of backbone stage `j` of `b` holding `c` layers from
  /// `first` with `f` in flight, with the side modules of `colocated` on its
  /// first (encoders) / last (generators) stage, summed in model-module order.
  double backbone_stage_memory(const backbone_cfg& b, int j, int first, int c, int f,
                               std::uint32_t colocated) {
    const stage_type ty = type_of_stage(j, b.pp);
    const bool on_first = ty == stage_type::first || ty == stage_type::whole;
    const bool on_last = ty == stage_type::last || ty == stage_type::whole;
    const int fw = whole_microbatches(f, b.v);  // colocated parts keep whole microbatches
    memory_breakdown mem;
    auto colocated_part = [&](std::size_t i) {
      add_memory(mem, cost_.stage_memory(tables_.colocated_cfg(i, b.tp, b.dp, b.rc),
                                         tables_.workload(i, b.k), fw));
    };
    for (const std::size_t i : side_modules_)
      if (i < bi_ && on_first && ((colocated >> i) & 1U)) colocated_part(i);
    add_memory(mem, device_memory(cost_, tables_.stage(bi_, first, c, b.tp, b.dp, b.rc),
                                  tables_.workload(bi_, b.k), f, b.v));
    for (const std::size_t i : side_modules_)
      if (i > bi_ && on_last && ((colocated >> i) & 1U)) colocated_part(i);
    return mem.total();
  }

  /// @brief Whether every stage of the backbone split `sp` of `b` fits memory
  /// in a chain of `P` stages (the backbone's first), with the colocated parts.
  bool backbone_fits(const backbone_cfg& b, const split_info& sp, int P, int m,
                     std::uint32_t colocated) {
    for (int j = 0; j < b.pp; ++j) {
      const double need = backbone_stage_memory(b, j, at(sp.first, j), at(sp.layers, j),
                                                backbone_in_flight(b, j, P, m), colocated);
      if (need > limit_) {
        viol_.note(model_.modules[bi_].name, j, need, limit_);
        return false;
      }
    }
    return true;
  }

  /// @brief The backbone split of `b` in a chain of `P` stages (the split rule
  /// of docs/planner.md, "Layer split"): `bal` (the balanced split, key `key`)
  /// if every stage fits memory; else the balanced split with each stage
  /// capped at the most layers that fit it (`balanced_split`'s caps), which
  /// gives `bal` back whenever `bal` fits; nullptr if no split fits.
  /// Memory caps assume A5 (stage memory non-decreasing in the layer count);
  /// the capped split is checked again, so a model breaking A5 loses plans,
  /// never fits a plan that does not.
  const split_info* fitted_split(const backbone_cfg& b, const split_info& bal, const split_key& key,
                                 int P, int m, std::uint32_t colocated) {
    if (bal.layers.empty()) return nullptr;
    if (backbone_fits(b, bal, P, m, colocated)) return &bal;
    if (b.pp < 2) return nullptr;
    const std::array<long long, 4> ckey{b.dp, P, m, b.zb ? 1 : 0};
    auto it = capped_.find({key, ckey});
    if (it != capped_.end()) return it->second->layers.empty() ? nullptr : it->second.get();
    const int L = mods_[bi_].layers, units = L / b.v;
    std::vector<int> caps(static_cast<std::size_t>(b.pp), 0);
    for (int j = 0; j < b.pp; ++j) {
      const stage_type ty = type_of_stage(j, b.pp);
      const int f = backbone_in_flight(b, j, P, m);
      auto fits = [&](int u) {
        const int c = u * b.v;
        return backbone_stage_memory(b, j, first_layer_of(ty, c, L), c, f, colocated) <= limit_;
      };
      int lo = 0, hi = units - (b.pp - 1);  // invariant: lo units fit (0: none)
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (fits(mid))
          lo = mid;
        else
          hi = mid - 1;
      }
      caps[static_cast<std::size_t>(j)] = lo;
    }
    ++stats_.capped_splits;
    auto sp = std::make_unique<split_info>();
    tables_.split_times(key, [&](const auto& fn) {
      make_split(*sp, b.v, L, b.pp, layer_split_rule::balanced, fn, caps);
    });
    tables_.fill_weights(key, *sp);
    if (!sp->layers.empty() && !backbone_fits(b, *sp, P, m, colocated)) *sp = split_info{};
    const split_info* out = sp->layers.empty() ? nullptr : sp.get();
    capped_.emplace(std::make_pair(key, ckey), std::move(sp));
    return out;
  }

  // ---- disaggregated layouts ----
  /// @brief Which side modules a disaggregated-family layout colocates on the
  /// backbone (bit i: model module i; none, or with `include_mixed` any proper
  /// subset), the separate ones in chain order and the edges each link carries.
  struct side_mode {
    std::uint32_t colocated = 0;
    std::vector<std::size_t> front, back;  // separate encoders / generators, in chain order
    chain_cut cut;
  };

  [[nodiscard]] side_mode mode_of(std::uint32_t colocated) const {
    side_mode md{colocated, {}, {}, chain_cut(model_, colocated)};
    for (const std::size_t i : side_modules_)
      if (!((colocated >> i) & 1U)) (i < bi_ ? md.front : md.back).push_back(i);
    return md;
  }

  void search_disaggregated() {
    std::vector<side_mode> modes;
    for (std::uint32_t c = 0; c <= all_sides_; ++c)
      if ((c & ~all_sides_) == 0 && (c == 0 || (opt_.include_mixed && c != all_sides_)))
        modes.push_back(mode_of(c));
    for (std::size_t at = 0; backbone_cfg* node = config(at); ++at) {
      backbone_cfg& b = *node;
      if (b.lb > best_.limit()) break;
      for (const side_mode& md : modes) {
        best_.enter(class_of(b, md.colocated));
        if (b.lb > best_.time()) continue;
        const auto side_min = static_cast<long long>(md.front.size() + md.back.size());
        if (static_cast<long long>(b.tp) * b.pp * b.dp + side_min > N_) continue;
        const split_key key = md.colocated != 0
                                  ? tables_.mono_key(layer_split_rule::balanced, b.tp, b.rc, b.k,
                                                     b.pp, b.v, md.colocated)
                                  : split_key{split_family::plain, bi_, b.tp, b.rc, b.pp, b.k, b.v};
        const split_info& bal = tables_.get_split(key);
        if (bal.layers.empty() || any_split_bound(b, bal) > best_.time()) continue;
        expand(b, md, key, bal);
      }
    }
  }

  /// @brief The backbone configuration being expanded: its links and its
  /// terms per first rank modulo the node size (filled on demand).
  struct backbone_ctx {
    stage_links links;
    module_terms best;             // its terms at the cheapest link classes (any first rank)
    std::vector<module_terms> at;  // by first rank % gpus_per_node
    std::vector<char> done;
  };

  const module_terms& backbone_terms_at(const backbone_cfg& b, backbone_ctx& c, long long base) {
    const auto r = static_cast<std::size_t>(base % g_);
    if (!c.done[r]) {
      c.at[r] = backbone_terms(b, c.links, base, link_case::placed);
      c.done[r] = 1;
    }
    return c.at[r];
  }

  /// @brief Whether the backbone configuration `b` with split `sp` (made
  /// `b.layout`, its links into `bctx_`) can beat the incumbent at all.
  bool prepare_backbone(backbone_cfg& b, const split_info& sp, const side_mode& md) {
    b.layout = &sp;
    if (split_bound(b, sp) > best_.time()) return false;
    backbone_links(b, md.colocated, md.cut, bctx_.links);
    bctx_.at.assign(static_cast<std::size_t>(g_), module_terms{});
    bctx_.done.assign(static_cast<std::size_t>(g_), 0);
    bctx_.best = backbone_terms(b, bctx_.links, 0, link_case::best);
    const module_terms arr[3] = {module_terms{}, bctx_.best, module_terms{}};
    if (combine_bound(S_ / b.n, arr).iteration_s > best_.time()) return false;
    ++stats_.backbone_expanded;
    return true;
  }

  /// @brief Steps `d` (every entry in [1, max_side_pp]) to the next depth
  /// vector in lexicographic order; false after the last (an empty `d` has one).
  [[nodiscard]] bool next_depths(std::vector<int>& d) const {
    for (std::size_t i = d.size(); i-- > 0;) {
      if (d[i] < opt_.max_side_pp) {
        ++d[i];
        return true;
      }
      d[i] = 1;
    }
    return false;
  }

  /// @brief Pairs the backbone configuration `b` (balanced split `bal`, cached
  /// under `key`) with the side modules' options, per generator depths and
  /// encoder depths. The backbone's in-flight counts, hence its split, depend
  /// on the chain stages after it under 1F1B (stage j keeps min(G + pp - j,
  /// m), G the generators' stages), on all of them under ZB-H1 (min(P, m)).
  void expand(backbone_cfg& b, const side_mode& md, const split_key& key, const split_info& bal) {
    const int m = S_ / b.n;
    const long long gb = static_cast<long long>(b.tp) * b.pp * b.dp;
    const split_info* prepared = nullptr;
    bool usable = false;
    // Whether the backbone can beat the incumbent in a chain of `P` stages (its split fitted).
    auto ready = [&](int P) {
      const split_info* sp = fitted_split(b, bal, key, P, m, md.colocated);
      if (sp == nullptr) return false;
      if (sp != prepared) {
        prepared = sp;
        usable = prepare_backbone(b, *sp, md);
      }
      return usable;
    };
    std::vector<int> back(md.back.size(), 1);
    do {
      const int G = std::accumulate(back.begin(), back.end(), 0);
      if (!b.zb && !ready(b.pp + G)) continue;
      std::vector<int> front(md.front.size(), 1);
      do {
        const int E = std::accumulate(front.begin(), front.end(), 0);
        if (gb + E + G > N_) continue;
        if (b.zb && !ready(E + b.pp + G)) continue;
        pair_search(
            {.b = b, .md = md, .gb = gb, .front = front, .back = back, .P = E + b.pp + G, .m = m});
      } while (next_depths(front));
    } while (next_depths(back));
  }

  /// @brief A backbone configuration with side-module depths: what
  /// pair_search pairs (the arguments that travel together).
  struct pair_query {
    const backbone_cfg& b;
    const side_mode& md;
    long long gb = 0;               ///< the backbone's GPUs (tp x pp x dp)
    const std::vector<int>& front;  ///< stages of each separate encoder (`md.front`)
    const std::vector<int>& back;   ///< stages of each separate generator (`md.back`)
    int P = 0;                      ///< chain stages
    int m = 0;                      ///< microbatches
    [[nodiscard]] long long stage_ranks() const noexcept {
      return static_cast<long long>(b.tp) * b.dp;  // ranks per backbone stage
    }
  };

  /// @brief One side of a link between two modules: its time over NVLink /
  /// the NIC for the edges the link carries (0 for none; `chain_cut.hpp`).
  struct link_half {
    double in = 0, nic = 0;
  };
  /// @brief A module's end of a link: its half, ranks per stage and the
  /// first rank of its boundary stage (a sender's last, a receiver's first).
  struct link_end {
    link_half half;
    long long ranks = 0, first = 0;
  };

  /// @brief Who sits at one end of a link: its samples per replica and TP degree.
  struct replica_shape {
    int k = 1, tp = 1;
  };
  /// @brief The half of a link carrying `edges` at the end `r`.
  [[nodiscard]] link_half half_of(const chain_cut& cut, std::uint64_t edges,
                                  replica_shape r) const {
    if (edges == 0) return {};
    const link_load x = cut.load(cost_, edges, req_.sample_workload, r.k);
    return {load_time(cost_, x, r.tp, true), load_time(cost_, x, r.tp, false)};
  }
  /// @brief A link (sender's half, receiver's half) over the class `same_node`
  /// picks: the busier end (`link_time`, as `evaluate`).
  [[nodiscard]] static double busier(const std::array<link_half, 2>& ends,
                                     bool same_node) noexcept {
    const double x = same_node ? ends[0].in : ends[0].nic;
    const double y = same_node ? ends[1].in : ends[1].nic;
    return x < y ? y : x;
  }
  /// @brief The same link at the cheaper class of each end where some
  /// placement may share a node (a bound).
  [[nodiscard]] static double best_link(const std::array<link_half, 2>& ends,
                                        bool may_share) noexcept {
    if (!may_share) return busier(ends, false);
    const double x = std::min(ends[0].in, ends[0].nic), y = std::min(ends[1].in, ends[1].nic);
    return x < y ? y : x;
  }
  [[nodiscard]] double link_between(const link_end& a, const link_end& b) const noexcept {
    return busier({a.half, b.half}, blocks_in_one_node(a.first, a.ranks, b.first, b.ranks, g_));
  }

  /// @brief The pairing in progress: the option lists in chain order (front,
  /// then back; the last generator's list, or `none`, kept apart), the chosen
  /// options and the terms so far (front modules, backbone, back modules).
  struct pairing {
    std::vector<const side_list*> lists;
    const side_list* last = nullptr;
    std::vector<const side_option*> chosen;
    std::vector<module_terms> terms;
    std::vector<long long> min_gpus;  // fewest GPUs of lists [t, end) and `last`
    // Lower bounds (`lower`) in chain order: each front list's, the backbone's (any
    // placement), each middle back list's and the last list's: what an unchosen module adds at
    // least (`may_beat`).
    std::vector<module_terms> floor;
    std::vector<module_terms> scratch;
  };

  /// @brief `t` as `combine_bound` may take it for a lower bound: the path
  /// less twice its W sum, no W terms (ZB-H1's f <= 2; closed_form.hpp).
  [[nodiscard]] static module_terms lower(module_terms t) noexcept {
    t.path_s -= 2.0 * t.w_sum_s;
    t.loop_s = t.path_s;
    t.w_sum_s = 0;
    t.w_max_s = 0;
    return t;
  }
  /// @brief Option `o`'s terms without its links, at its best placement.
  [[nodiscard]] static module_terms option_floor(const pair_query& q, const side_option& o) {
    module_terms t{};
    t.max_stage_s = o.max_stage;
    t.path_s = o.path_base;
    t.sync_s = o.sync;
    t.stages = o.pp;
    t.loop_s = t.path_s;
    if (q.b.zb) add_weights(t, o.layout->weights);
    return lower(t);
  }
  /// @brief The field-wise minimum of `option_floor` over list `l` (stages: its depth).
  [[nodiscard]] static module_terms list_floor(const pair_query& q, const side_list& l) {
    module_terms m = option_floor(q, l.options.front());
    for (const side_option& o : l.options) {
      const module_terms t = option_floor(q, o);
      m.max_stage_s = std::min(m.max_stage_s, t.max_stage_s);
      m.path_s = std::min(m.path_s, t.path_s);
      m.sync_s = std::min(m.sync_s, t.sync_s);
    }
    m.loop_s = m.path_s;
    return m;
  }
  /// @brief Whether a pairing whose first modules have `known` terms (exact,
  /// or lower bounds) and whose lists from `next` on are unchosen can beat
  /// the incumbent (a margin for the different summation order).
  bool may_beat(const pair_query& q, pairing& pr, std::span<const module_terms> known,
                std::size_t next) {
    pr.scratch.assign(known.begin(), known.end());
    pr.scratch.insert(pr.scratch.end(), pr.floor.begin() + static_cast<std::ptrdiff_t>(next),
                      pr.floor.end());
    return combine_bound(q.m, pr.scratch).iteration_s * (1.0 - 1e-12) <= best_.time();
  }

  /// @brief Every pairing of `q`'s backbone with the side modules' options:
  /// encoders in chain order by GPUs, generators before the last likewise,
  /// the last generator's options largest affordable first while the bound
  /// can beat the incumbent (`pair_last`).
  void pair_search(const pair_query& q) {
    const side_mode& md = q.md;
    pairing pr;
    int pos = 0;
    const std::size_t nf = md.front.size(), nb = md.back.size();
    for (std::size_t t = 0; t < nf; ++t) {
      pr.lists.push_back(side_options(
          q, md.front[t], t == 0 ? side_place::first : side_place::middle, pos, q.front[t]));
      pos += q.front[t];
    }
    pos += q.b.pp;
    for (std::size_t t = 0; t < nb; ++t) {
      const side_list* l = side_options(
          q, md.back[t], t + 1 == nb ? side_place::last : side_place::middle, pos, q.back[t]);
      pos += q.back[t];
      (t + 1 == nb ? pr.last : pr.lists.emplace_back()) = l;
    }
    static const side_list none{{side_option{}}};
    if (nb == 0) pr.last = &none;
    if (pr.last->options.empty()) return;
    for (const side_list* l : pr.lists)
      if (l->options.empty()) return;
    pr.min_gpus.assign(pr.lists.size() + 1, pr.last->options.front().gpus);
    for (std::size_t t = pr.lists.size(); t-- > 0;)
      pr.min_gpus[t] = pr.min_gpus[t + 1] + pr.lists[t]->options.front().gpus;
    pr.chosen.assign(pr.lists.size(), nullptr);
    if (nf >= 2 || nb >= 2) {  // `may_beat` runs: floors in chain order
      for (std::size_t t = 0; t < nf; ++t) pr.floor.push_back(list_floor(q, *pr.lists[t]));
      pr.floor.push_back(lower(bctx_.best));
      for (std::size_t t = nf; t < pr.lists.size(); ++t)
        pr.floor.push_back(list_floor(q, *pr.lists[t]));
      pr.floor.push_back(nb == 0 ? module_terms{} : list_floor(q, *pr.last));
    }
    if (nb <= 1) last_bounds(q, *pr.last, backbone_end(q, q.gb));  // after the backbone
    pick_front(q, pr, 0, 0);
  }

  /// @brief A separate side module's options for `depth` stages from chain
  /// position `first` (their in-flight counts).
  const side_list* side_options(const pair_query& q, std::size_t module, side_place where,
                                int first, int depth) {
    std::vector<int> fl;
    for (int j = 0; j < depth; ++j)
      fl.push_back(q.b.zb ? zb_h1_in_flight(q.P, q.m) : one_f_one_b_in_flight(q.P, first + j, q.m));
    return &sides_.options(module, q.b.n, depth, fl, where, q.md.cut, stats_, viol_);
  }

  /// @brief The backbone's end of its link to the generator after it, its
  /// last stage ending at rank `end`.
  [[nodiscard]] link_end backbone_end(const pair_query& q, long long end) const {
    return {half_of(q.md.cut, q.md.back.empty() ? 0 : q.md.cut.after(bi_), {q.b.k, q.b.tp}),
            q.stage_ranks(), end - q.stage_ranks()};
  }
  /// @brief The edges on the link into back module `t` (from the backbone, or
  /// the generator before it).
  [[nodiscard]] std::uint64_t back_in(const pair_query& q, std::size_t t) const {
    return q.md.cut.after(t == 0 ? bi_ : q.md.back[t - 1]);
  }

  /// @brief Side option `o` of module `i` placed from rank `base` (exactly
  /// `o`'s own values at rank 0 for the first module), with `link` its link term.
  module_terms side_terms(const pair_query& q, const side_option& o, long long base, bool first,
                          double link) {
    module_terms t{};
    t.max_stage_s = o.max_stage;
    if (first) {
      t.sync_s = o.sync;
      t.path_s = o.path_base + link;
    } else {
      t.sync_s = place(o.links, base, link_case::placed, g_, hops_);
      t.path_s = accumulate_path({.stage_s = o.layout->times, .hop_s = hops_}, 0.0) + link;
    }
    t.stages = o.pp;
    t.loop_s = t.path_s;
    if (q.b.zb) add_weights(t, o.layout->weights);
    return t;
  }

  /// @brief Front module `t` (encoder) from rank `base`: each affordable
  /// option, the previous front module's terms finished with its link to it;
  /// past the last, the backbone and the back modules.
  void pick_front(const pair_query& q, pairing& pr, std::size_t t, long long base) {
    const std::size_t nf = q.md.front.size();
    if (t == nf) {
      if (base % q.b.tp != 0) return;  // the backbone's first rank must be a multiple of its tp
      pr.terms.resize(nf);
      if (nf > 0) pr.terms[nf - 1] = front_terms(q, pr, nf - 1, base, backbone_start(q, base));
      pr.terms.push_back(backbone_terms_at(q.b, bctx_, base));
      pick_back(q, pr, 0, base + q.gb, backbone_end(q, base + q.gb));
      return;
    }
    for (const side_option& o : pr.lists[t]->options) {
      if (base + o.gpus + q.gb + pr.min_gpus[t + 1] > N_) break;
      if (base % o.tp != 0) continue;
      pr.chosen[t] = &o;
      if (t > 0) {
        pr.terms.resize(t);
        const link_half h = half_of(q.md.cut, q.md.cut.after(q.md.front[t - 1]), {o.k, o.tp});
        pr.terms[t - 1] =
            front_terms(q, pr, t - 1, base, link_end{h, static_cast<long long>(o.tp) * o.dp, base});
        // A second encoder on: bound the rest (the first one's bound is the last list's).
        pr.terms.push_back(option_floor(q, o));
        const bool beat = may_beat(q, pr, pr.terms, t + 1);
        pr.terms.pop_back();
        if (!beat) continue;
      }
      pick_front(q, pr, t + 1, base + o.gpus);
    }
  }

  /// @brief The backbone's end of its link from the encoder before it, from rank `base`.
  [[nodiscard]] link_end backbone_start(const pair_query& q, long long base) const {
    return {half_of(q.md.cut, q.md.cut.after(q.md.front.back()), {q.b.k, q.b.tp}), q.stage_ranks(),
            base};
  }

  /// @brief Front module `t`'s terms, ending at rank `end`, with its link to `next`.
  module_terms front_terms(const pair_query& q, const pairing& pr, std::size_t t, long long end,
                           const link_end& next) {
    const side_option& o = *pr.chosen[t];
    const long long ranks = static_cast<long long>(o.tp) * o.dp;
    const link_end own{half_of(q.md.cut, q.md.cut.after(q.md.front[t]), {o.k, o.tp}), ranks,
                       end - ranks};
    return side_terms(q, o, end - o.gpus, t == 0, link_between(own, next));
  }

  /// @brief Back module `t` (a generator before the last) from rank `base`
  /// after `prev` (the end of the module before it); the last one by `pair_last`.
  void pick_back(const pair_query& q, pairing& pr, std::size_t t, long long base,
                 const link_end& prev) {
    const std::size_t nf = q.md.front.size();
    if (t + 1 >= q.md.back.size()) {
      if (t > 0) last_bounds(q, *pr.last, prev);
      pair_last(q, pr, base, prev);
      return;
    }
    for (const side_option& o : pr.lists[nf + t]->options) {
      if (base + o.gpus + pr.min_gpus[nf + t + 1] > N_) break;
      if (base % o.tp != 0) continue;
      pr.chosen[nf + t] = &o;
      const long long ranks = static_cast<long long>(o.tp) * o.dp;
      const link_end own{half_of(q.md.cut, back_in(q, t), {o.k, o.tp}), ranks, base};
      pr.terms.resize(nf + 1 + t);
      pr.terms.push_back(side_terms(q, o, base, false, link_between(prev, own)));
      if (!may_beat(q, pr, pr.terms, nf + t + 2)) continue;
      const link_end out{half_of(q.md.cut, q.md.cut.after(q.md.back[t]), {o.k, o.tp}), ranks,
                         base + o.gpus - ranks};
      pick_back(q, pr, t + 1, base + o.gpus, out);
    }
  }

  /// @brief The last module's options' terms after `prev` in the best case
  /// (any placement), their halves of the link from `prev`, and the prefix
  /// minima (over fewer GPUs) for the bound.
  void last_bounds(const pair_query& q, const side_list& G, const link_end& prev) {
    const std::size_t ng = G.options.size();
    const bool sg = !q.md.back.empty();
    gterms_.assign(ng, module_terms{});
    ghalf_.assign(ng, link_half{});
    pmin_t_.resize(ng);
    pmin_path_.resize(ng);
    pmin_zpath_.resize(ng);
    const std::uint64_t in = sg ? back_in(q, q.md.back.size() - 1) : 0;
    for (std::size_t i = 0; i < ng; ++i) {
      const side_option& o = G.options[i];
      if (sg) {
        ghalf_[i] = half_of(q.md.cut, in, {o.k, o.tp});
        gterms_[i].max_stage_s = o.max_stage;
        gterms_[i].path_s = o.path_base + best_link({prev.half, ghalf_[i]},
                                                    may_share_node(prev.ranks, o.links.ranks, g_));
        gterms_[i].sync_s = o.sync;
        gterms_[i].stages = o.pp;
        gterms_[i].loop_s = gterms_[i].path_s;
        if (q.b.zb) add_weights(gterms_[i], o.layout->weights);
      }
      // ZB-H1: the path less twice the W sum (the bound's W terms are 0).
      const double zpath = gterms_[i].path_s - 2.0 * gterms_[i].w_sum_s;
      pmin_t_[i] =
          i == 0 ? gterms_[i].max_stage_s : std::min(pmin_t_[i - 1], gterms_[i].max_stage_s);
      pmin_path_[i] = i == 0 ? gterms_[i].path_s : std::min(pmin_path_[i - 1], gterms_[i].path_s);
      pmin_zpath_[i] = i == 0 ? zpath : std::min(pmin_zpath_[i - 1], zpath);
    }
  }

  /// @brief The last module's options from rank `base_g` after `prev`, most
  /// GPUs first; stops where the bound (prefix minima) exceeds the
  /// incumbent, which bounds every option with fewer GPUs.
  void pair_last(const pair_query& q, pairing& pr, long long base_g, const link_end& prev) {
    const side_list& G = *pr.last;
    const bool sg = !q.md.back.empty();
    const std::size_t n = pr.terms.size();
    // Affordable options: [0, idx).
    const auto idx = static_cast<std::size_t>(
        std::upper_bound(G.options.begin(), G.options.end(), N_ - base_g,
                         [](long long v, const side_option& o) { return v < o.gpus; }) -
        G.options.begin());
    for (std::size_t i = idx; i-- > 0;) {
      pr.terms.resize(n);
      pr.terms.push_back(
          module_terms{pmin_t_[i], pmin_zpath_[i], 0.0, sg ? q.back.back() : 0, pmin_path_[i]});
      if (combine(q.m, pr.terms).iteration_s > best_.time())
        break;  // bounds every option in [0, i]
      const side_option& go = G.options[i];
      if (sg && base_g % go.tp != 0) continue;
      ++stats_.pairs_evaluated;
      pr.terms.back() = module_terms{};
      if (sg) {
        const link_end own{ghalf_[i], go.links.ranks, base_g};
        pr.terms.back() = side_terms(q, go, base_g, false, link_between(prev, own));
      }
      const double time = combine(q.m, pr.terms).iteration_s;
      const long long gpus = base_g + go.gpus;
      if (best_.may_improve(time, gpus)) consider_pair(q, pr, go, time, gpus);
    }
    pr.terms.resize(n);
  }

  /// @brief The plan of `q`'s backbone with the chosen side options and the
  /// last one `go`, offered to the incumbent.
  void consider_pair(const pair_query& q, const pairing& pr, const side_option& go, double time,
                     long long gpus) {
    const backbone_cfg& b = q.b;
    parallel_plan p = base_plan(b);
    set_module(p, bi_, b.tp, b.pp, b.dp, b.rc, b.layout->layers, b.v);
    const std::size_t nf = q.md.front.size();
    for (std::size_t t = 0; t < pr.chosen.size(); ++t) {
      const side_option& o = *pr.chosen[t];
      set_module(p, t < nf ? q.md.front[t] : q.md.back[t - nf], o.tp, o.pp, o.dp, o.rc,
                 o.layout->layers);
    }
    if (!q.md.back.empty())
      set_module(p, q.md.back.back(), go.tp, go.pp, go.dp, go.rc, go.layout->layers);
    for (const std::size_t i : side_modules_)
      if ((q.md.colocated >> i) & 1U) set_colocated(p, i, b);
    best_.consider(time, gpus, std::move(p));
  }

  static void set_module(parallel_plan& p, std::size_t i, int tp, int pp, int dp, recompute_mode rc,
                         const std::vector<int>& layers, int v = 1) {
    module_plan& mp = p.modules[i];
    mp.virtual_stages = v;
    mp.tp = tp;
    mp.pp = pp;
    mp.dp = dp;
    mp.recompute = rc == recompute_mode::full;
    mp.selective_recompute = rc == recompute_mode::selective;
    mp.layers = layers;
  }

  /// @brief Side module `i` colocated on backbone configuration `c` (its
  /// largest supported TP dividing the backbone's, the backbone's dp and recompute).
  void set_colocated(parallel_plan& p, std::size_t i, const backbone_cfg& c) const {
    set_module(p, i, tables_.colocated_tp(i, c.tp), 1, c.dp, c.rc, {mods_[i].layers});
    p.modules[i].colocated = true;
  }

  // ---- monolithic (Megatron-style) layouts ----
  void search_monolithic() {
    std::vector<layer_split_rule> rules;
    for (layer_split_rule r : opt_.monolithic_splits)
      if (std::find(rules.begin(), rules.end(), r) == rules.end()) rules.push_back(r);
    std::sort(rules.begin(), rules.end());
    for (std::size_t at = 0; backbone_cfg* node = config(at); ++at) {
      backbone_cfg& c = *node;
      if (c.lb > best_.limit()) break;
      best_.enter(class_of(c, all_sides_));
      if (c.lb > best_.time()) continue;
      const int m = S_ / c.n;
      for (layer_split_rule rule : rules) {
        const split_key key = tables_.mono_key(rule, c.tp, c.rc, c.k, c.pp, c.v, all_sides_);
        const split_info& given = tables_.get_split(key);
        if (given.layers.empty()) continue;
        // The even rule is fixed; the balanced one is capped by memory where it does not fit.
        const bool capped = rule == layer_split_rule::balanced;
        if ((capped ? any_split_bound(c, given) : split_bound(c, given)) > best_.time()) continue;
        const split_info* sp = capped ? fitted_split(c, given, key, c.pp, m, all_sides_)
                               : backbone_fits(c, given, c.pp, m, all_sides_) ? &given
                                                                              : nullptr;
        if (sp == nullptr || split_bound(c, *sp) > best_.time()) continue;
        c.layout = sp;
        ++stats_.monolithic_configs;
        backbone_links(c, all_sides_, mono_cut_, mlinks_);
        const module_terms arr[1] = {backbone_terms(c, mlinks_, 0, link_case::placed)};
        const double time = combine(m, arr).iteration_s;
        const long long gpus = static_cast<long long>(c.tp) * c.pp * c.dp;
        if (!best_.may_improve(time, gpus)) continue;
        parallel_plan p = base_plan(c);
        set_module(p, bi_, c.tp, c.pp, c.dp, c.rc, c.layout->layers, c.v);
        for (std::size_t i = 0; i < p.modules.size(); ++i)
          if (i != bi_) set_colocated(p, i, c);
        best_.consider(time, gpus, std::move(p));
      }
    }
  }

  const C& cost_;
  const model_spec& model_;
  plan_request req_;
  planner_options opt_;
  stage_tables<C> tables_{cost_, *this, req_, opt_};   // stage times and layer splits
  side_search<C> sides_{cost_, *this, tables_, req_};  // side modules' option lists
  // Memory-capped backbone splits by (balanced split's key, {dp, chain stages, microbatches}).
  // Memory-capped backbone splits by (balanced split's key, {dp, chain stages, microbatches, ZB-H1}).
  std::map<std::pair<split_key, std::array<long long, 4>>, std::unique_ptr<split_info>> capped_;
  std::vector<backbone_cfg> nodes_;                      // generation order
  std::vector<std::pair<double, std::size_t>> pending_;  // (bound, index) min-heap, unsorted rest
  std::vector<std::size_t> sorted_;                      // indices popped, in bound order
  std::vector<module_terms> gterms_;
  std::vector<link_half> ghalf_;
  std::vector<double> hops_;
  backbone_ctx bctx_;
  stage_links mlinks_;                      // a monolithic configuration's links
  chain_cut mono_cut_{model_, all_sides_};  // the monolithic layouts' chain
  std::vector<double> pmin_t_, pmin_path_, pmin_zpath_;
  incumbent best_;
  violation viol_;
  planner_stats stats_;
};

}  // namespace detail
}  // namespace disttrain
