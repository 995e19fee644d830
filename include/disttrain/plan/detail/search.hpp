#pragma once
/// @file search.hpp
/// @brief The planner's exact branch-and-bound search (see docs/planner.md).
///
/// Search space (fixed by `planner_options`):
/// - n = samples per pipeline microbatch, a divisor of the global batch
///   (m = global_batch / n microbatches);
/// - backbone: tp in the TP candidates, recompute on/off, dp a divisor of n,
///   pp in [min_backbone_pp, max_backbone_pp];
/// - *disaggregated* layouts: every side module (encoder, generator) gets its
///   own GPUs: tp, recompute, pp in [1, max_side_pp], dp in [1, n];
/// - *monolithic* layouts (Megatron-style, `include_monolithic`): every side
///   module colocated on the backbone's first/last stage, one recompute flag,
///   layers split by the rules in `monolithic_splits`;
/// - layers split by `balanced_split`; where a backbone split does not fit
///   memory, by the same rule under per-stage memory caps (`fitted_split`,
///   docs/planner.md "Layer split"); schedule 1F1B;
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
///   caps; a capped split is checked again, so breaking A5 loses plans only).
/// A configuration is pruned by the bound of its uncapped split's slowest
/// stage (no capped split has a faster one) with rho * L for the stage-time
/// sum (`any_split_bound`), and by its exact split bound once its split is known.
/// Links follow the rank placement (`detail/stage_cost.hpp`), so a module's
/// hops, sync and boundary depend on its first rank modulo the node size:
/// the encoder starts at rank 0, the backbone at the encoder's GPU count, the
/// generator after both. The bounds price every link at the cheapest class
/// any placement could give (`link_case::best`: NVLink only for blocks of at
/// most a node); candidates are scored with the placement's classes, bit for
/// bit as `evaluate`. For a side module with fixed (tp, recompute, pp,
/// per-replica samples k = ceil(n/dp)), a larger dp of the same GPU-count
/// residue (encoder) or of any (generator) is dominated once its stages
/// exceed a node (every link the NIC; A3, A4); below that, the option lists
/// keep every dp not dominated in its own path and sync (`side_options`).

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
#include "disttrain/plan/detail/closed_form.hpp"
#include "disttrain/plan/detail/incumbent.hpp"
#include "disttrain/plan/detail/layer_split.hpp"
#include "disttrain/plan/detail/search_space.hpp"
#include "disttrain/plan/detail/stage_cost.hpp"
#include "disttrain/plan/detail/stage_time_cache.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain {

namespace detail {

/// @brief Field-wise sum (the order `evaluate` uses for stages with several parts).
inline void add_memory(memory_breakdown& acc, const memory_breakdown& x) noexcept {
  acc.params += x.params;
  acc.grads += x.grads;
  acc.optimizer += x.optimizer;
  acc.activations += x.activations;
}

/// @brief Memory violation closest to fitting (for the "no plan" error).
struct violation {
  bool any = false;
  double over = 0;
  std::string where;
  double need = 0;
};

/// @brief The branch-and-bound search (see the file comment and docs/planner.md).
template <cost_model C>
class plan_search : private search_space {
 public:
  plan_search(const C& cost, const plan_request& req, const planner_options& opt)
      : search_space(cost, req, opt), cost_(cost), model_(cost.model()), req_(req), opt_(opt) {}

  /// @brief Runs the search; returns the best plan or throws `errc::infeasible`.
  ranked_plan run() {
    backbone_configs();
    stats_.backbone_configs = static_cast<long long>(nodes_.size());
    if (opt_.include_monolithic) search_monolithic();
    if (opt_.include_disaggregated) search_disaggregated();
    if (!best_.empty()) return best_.best();
    no_plan();
  }

  [[nodiscard]] const planner_stats& stats() const noexcept { return stats_; }

 private:
  static constexpr double nan_ = std::numeric_limits<double>::quiet_NaN();
  static constexpr double inf_ = std::numeric_limits<double>::infinity();

  // ---- stage-time tables: time(type, c) of module i at (tp, rc, k), lazily filled ----
  time_table& table(std::size_t i, int tp, bool rc, int k) {
    const time_table_key key{i, tp, rc, k};
    auto it = tables_.find(key);
    if (it != tables_.end()) return it->second;
    time_table t;
    t.module = i;
    t.tp = tp;
    t.rc = rc;
    t.k = k;
    t.layers = mods_[i].layers;
    t.v.assign(4 * static_cast<std::size_t>(t.layers + 1), nan_);
    return tables_.emplace(key, std::move(t)).first->second;
  }

  /// @brief min over stage types and layer counts of time / layers: every
  /// stage of c layers takes at least rho * c, so any split into pp stages has
  /// sum >= rho * L and max >= rho * L / pp (the cheap bound that orders the
  /// backbone configurations before their split is computed).
  double rho(time_table& t) {
    if (!std::isnan(t.rho)) return t.rho;
    double r = inf_;
    for (stage_type ty :
         {stage_type::first, stage_type::middle, stage_type::last, stage_type::whole})
      for (int c = 1; c <= t.layers; ++c) r = std::min(r, tt(t, ty, c) / static_cast<double>(c));
    return t.rho = r;
  }

  /// @brief Forward+backward seconds of a stage of `type` with `c` layers (+inf if impossible).
  double tt(time_table& t, stage_type type, int c) {
    double& slot = t.v[static_cast<std::size_t>(type) * static_cast<std::size_t>(t.layers + 1) +
                       static_cast<std::size_t>(c)];
    if (!std::isnan(slot)) return slot;
    const int first = first_layer_of(type, c, t.layers);
    if (first < 0) return slot = inf_;
    const stage_config cfg = stage(t.module, first, c, t.tp, 1, t.rc);
    return slot = cost_.stage_time(cfg, workload(t.module, t.k)).total_s();
  }

  [[nodiscard]] module_workload workload(std::size_t i, int k) const {
    return req_.sample_workload[i] * static_cast<double>(k);
  }

  /// @brief A stage's exposed sync under the options' overlap switches, the
  /// parts added to an empty `stage_sync` in model-module order (as `evaluate`).
  [[nodiscard]] double exposed_sync(const stage_sync& part) const noexcept {
    stage_sync s;
    s.add(part);
    return s.exposed_s(opt_.overlap_grad_reduce, opt_.overlap_param_gather);
  }

  // ---- layer splits with their stage times ----
  /// @brief Calls `use(fn)` with the stage-time function `fn(type, c)` of the
  /// splits cached under `key`: the module's own stage times (`plain`), or the
  /// backbone's with its colocated parts' whole time added to its first
  /// (encoder) / last (generator) stage, in model-module order from 0 (as
  /// `evaluate` sums them).
  template <class Use>
  void split_times(const split_key& key, const Use& use) {
    time_table& T = table(key.module, key.tp, key.rc, key.k);
    if (key.family == split_family::plain) {
      use([&](stage_type t, int c) { return 0.0 + tt(T, t, c); });
      return;
    }
    const bool all = key.family == split_family::all_colocated_balanced ||
                     key.family == split_family::all_colocated_even;
    const bool ce = all ? has_e_ : key.family == split_family::encoder_colocated;
    const bool cg = all ? has_g_ : key.family == split_family::generator_colocated;
    const double te = ce ? tt(table(ei_, colocated_tp(ei_, key.tp), key.rc, key.k),
                              stage_type::whole, mods_[ei_].layers)
                         : 0.0;
    const double tg = cg ? tt(table(gi_, colocated_tp(gi_, key.tp), key.rc, key.k),
                              stage_type::whole, mods_[gi_].layers)
                         : 0.0;
    use([&](stage_type t, int c) {
      const double x = tt(T, t, c);
      switch (t) {
        case stage_type::first: return (0.0 + te) + x;
        case stage_type::last: return (0.0 + x) + tg;
        case stage_type::whole: return ((0.0 + te) + x) + tg;
        case stage_type::middle: break;
      }
      return 0.0 + x;
    });
  }

  /// @brief The split cached under `key` (`make_split`: the even rule for
  /// `all_colocated_even`, else the balanced rule; no memory caps).
  const split_info& get_split(const split_key& key) {
    auto it = splits_.find(key);
    if (it != splits_.end()) return *it->second;
    auto s = std::make_unique<split_info>();
    const layer_split_rule rule = key.family == split_family::all_colocated_even
                                      ? layer_split_rule::even
                                      : layer_split_rule::balanced;
    split_times(key, [&](const auto& fn) {
      make_split(*s, key.v, mods_[key.module].layers, key.pp, rule, fn);
    });
    return *splits_.emplace(key, std::move(s)).first->second;
  }

  /// @brief Split of a disaggregated module (no colocated parts), `v` chunks per stage.
  const split_info& plain_split(std::size_t i, int tp, bool rc, int k, int pp, int v = 1) {
    return get_split(split_key{split_family::plain, i, tp, rc, pp, k, v});
  }

  /// @brief The link-dependent per-stage costs of a module's stages (hop
  /// j -> j + 1, exposed sync of stage j), over NVLink and over the NIC.
  struct stage_links {
    std::vector<double> hop_in, hop_nic, sync_in, sync_nic;
    long long ranks = 1;  // ranks per stage (tp * dp)
  };

  /// @brief Which link classes `place` prices: the placement's, the cheapest
  /// any placement could give (bounds), or the dearer class everywhere.
  enum class link_case { placed, best, worst };

  // ---- side module options ----
  struct side_option {
    long long gpus = 0;
    int tp = 1, pp = 1, dp = 1, k = 1;
    bool rc = false;
    // The encoder (first rank 0): its exact path without the boundary and sync; the generator
    // (first rank known only with the encoder and backbone): best-case values, for bounds.
    double max_stage = 0, path_base = 0, sync = 0;
    double side_in = 0, side_nic = 0;       // its half of the boundary transfer, NVLink / NIC
    double worst_path = 0, worst_sync = 0;  // generator: every link on the NIC
    stage_links links;
    const split_info* layout = nullptr;
  };
  struct side_list {
    std::vector<side_option> options;  // sorted by gpus (stable: generation order)
  };

  /// @brief Options of side module `i` with `pp` stages, `n` samples per
  /// microbatch, stage j keeping in_flight[j] microbatches. Per (tp,
  /// recompute, k = ceil(n / dp)), among the dp that fit memory (A2: every dp
  /// above the smallest fitting one), with stages of `s = tp * dp` ranks:
  /// - encoder (first rank 0; its GPU count modulo the node size fixes where
  ///   the others sit): per residue of the GPU count, the smallest dp, plus
  ///   every larger dp with `s <= gpus_per_node` whose own path or sync beats
  ///   all smaller ones of its residue (a larger dp with `s > gpus_per_node`
  ///   has every link on the NIC: dominated by A3, A4);
  /// - generator (last; its GPU count moves nobody): every dp with `s <=
  ///   gpus_per_node` whose best case beats the smaller ones' worst case, or
  ///   the smallest dp if it has `s > gpus_per_node`.
  /// A smaller dp of the same residue also has a boundary block inside the
  /// larger one's, so its boundary link is no worse.
  const side_list& side_options(std::size_t i, int n, int pp, const std::vector<int>& in_flight) {
    std::vector<long long> key{static_cast<long long>(i), n, pp};
    key.insert(key.end(), in_flight.begin(), in_flight.end());
    auto it = side_cache_.find(key);
    if (it != side_cache_.end()) return it->second;
    ++stats_.side_lists;
    side_list out;
    const module_info& mi = mods_[i];
    const bool is_encoder = i < bi_;
    std::vector<double> hops;
    for (int tp : mi.tps) {
      for (bool rc : rcs_) {
        for (int k : replica_loads(n)) {
          const long long step = static_cast<long long>(tp) * pp;
          const int dmin = (n + k - 1) / k;
          const int dmax = k == 1 ? n : (n - 1) / (k - 1);
          if (step * dmin > N_) continue;
          const split_info& sp = plain_split(i, tp, rc, k, pp);
          if (sp.layers.empty()) continue;
          const module_workload w = workload(i, k);
          auto fits = [&](int d) {
            for (int j = 0; j < pp; ++j) {
              const stage_config cfg = stage(i, at(sp.first, j), at(sp.layers, j), tp, d, rc);
              memory_breakdown mem;
              add_memory(mem, cost_.stage_memory(cfg, w, at(in_flight, j)));
              if (mem.total() > limit_) {
                note_violation(model_.modules[i].name, j, mem.total());
                return false;
              }
            }
            return true;
          };
          if (!fits(dmax)) continue;
          int lo = dmin, hi = dmax;
          while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            if (fits(mid))
              hi = mid;
            else
              lo = mid + 1;
          }
          const int classes =
              is_encoder ? static_cast<int>(g_ / std::gcd(static_cast<long long>(g_), step)) : 1;
          std::vector<char> seen(static_cast<std::size_t>(g_), 0);
          int found = 0;
          const double side_in = side_transfer_time(i, k, tp, true);
          const double side_nic = side_transfer_time(i, k, tp, false);
          const std::size_t first_new = out.options.size();
          for (int d = lo; d <= dmax; ++d) {
            const long long gpus = step * d;
            const long long ranks = static_cast<long long>(tp) * d;
            if (gpus > N_ || (ranks > g_ && found >= classes)) break;
            const auto r = static_cast<std::size_t>(gpus % g_);
            if (ranks > g_ && seen[r]) continue;
            side_option o;
            o.gpus = gpus;
            o.tp = tp;
            o.pp = pp;
            o.dp = d;
            o.k = k;
            o.rc = rc;
            o.layout = &sp;
            o.max_stage = sp.tmax;
            o.side_in = side_in;
            o.side_nic = side_nic;
            o.links = side_links(i, sp, tp, d, rc, w);
            double worst_path = 0, worst_sync = 0;
            o.sync = place(o.links, 0, is_encoder ? link_case::placed : link_case::best, hops);
            o.path_base = accumulate_path({.stage_s = sp.times, .hop_s = hops}, 0.0);
            if (!is_encoder) {
              worst_sync = place(o.links, 0, link_case::worst, hops);
              worst_path = accumulate_path({.stage_s = sp.times, .hop_s = hops}, 0.0);
            }
            // Dominated by a smaller dp already listed (same tp, recompute, k)?
            bool dominated = false;
            for (std::size_t x = first_new; x < out.options.size() && !dominated; ++x) {
              const side_option& q = out.options[x];
              dominated = is_encoder ? (q.gpus % g_ == gpus % g_ && q.path_base <= o.path_base &&
                                        q.sync <= o.sync)
                                     : (q.worst_path <= o.path_base && q.worst_sync <= o.sync);
            }
            if (dominated) continue;
            o.worst_path = worst_path;
            o.worst_sync = worst_sync;
            if (!seen[r]) ++found;
            seen[r] = 1;
            out.options.push_back(std::move(o));
            if (!is_encoder && ranks > g_) break;
          }
        }
      }
    }
    std::stable_sort(out.options.begin(), out.options.end(),
                     [](const side_option& a, const side_option& b) { return a.gpus < b.gpus; });
    stats_.side_options += static_cast<long long>(out.options.size());
    return side_cache_.emplace(std::move(key), std::move(out)).first->second;
  }

  /// @brief Links of a disaggregated side module's stages (split `sp`, dp `d`).
  stage_links side_links(std::size_t i, const split_info& sp, int tp, int d, bool rc,
                         const module_workload& w) {
    stage_links L;
    L.ranks = static_cast<long long>(tp) * d;
    const int pp = static_cast<int>(sp.layers.size());
    for (int j = 0; j < pp; ++j) {
      const stage_config cfg = stage(i, at(sp.first, j), at(sp.layers, j), tp, d, rc);
      const bool more = j + 1 < pp;
      L.hop_in.push_back(more ? hop_time(cost_, cfg, w, true, mods_[i].dirs) : 0.0);
      L.hop_nic.push_back(more ? hop_time(cost_, cfg, w, false, mods_[i].dirs) : 0.0);
      const std::array<stage_sync, 2> y = part_sync_both(cost_, cfg, w);
      L.sync_in.push_back(exposed_sync(y[0]));
      L.sync_nic.push_back(exposed_sync(y[1]));
    }
    return L;
  }

  /// @brief One side's half of the boundary transfer between side module `i`
  /// and the backbone: a replica with `k` samples, each TP rank 1/tp, over
  /// NVLink iff `same_node` (before `dirs` and the max with the other side).
  double side_transfer_time(std::size_t i, int k, int tp, bool same_node) {
    const std::size_t from = i < bi_ ? i : bi_, to = i < bi_ ? bi_ : i;
    return boundary_half(cost_, from, to, req_.sample_workload, k, tp, same_node);
  }

  void note_violation(const std::string& module, int stage, double need) {
    const double over = need - limit_;
    if (!viol_.any || over < viol_.over) {
      viol_.any = true;
      viol_.over = over;
      viol_.need = need;
      viol_.where = cat(module, "/stage ", stage);
    }
  }

  [[noreturn]] void no_plan() {
    const long long min_gpus =
        opt_.include_monolithic ? 1 : 1 + (has_e_ ? 1 : 0) + (has_g_ ? 1 : 0);
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

  /// @brief The cost query of a stage of this search (with its sequence-parallel switch).
  [[nodiscard]] stage_config stage(std::size_t i, int first, int layers, int tp, int dp,
                                   bool rc) const {
    return stage_config{i, first, layers, tp, dp, rc, false, opt_.sequence_parallel};
  }

  [[nodiscard]] parallel_plan base_plan(int n) const {
    parallel_plan p;
    p.global_batch = S_;
    p.num_microbatches = S_ / n;
    p.schedule = plan_schedule::one_f_one_b;
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

  // ---- backbone configurations ----
  struct backbone_cfg {
    double lb = 0;  // cheap bound (see backbone_configs), scaled down by 1e-9 for rounding
    int n = 1, tp = 1, dp = 1, pp = 1, k = 1;
    bool rc = false;
    const split_info* layout = nullptr;  // set when the configuration is processed
    int v = 1;                           // interleaved chunks per device
  };

  /// @brief Every (n, tp, rc, dp, pp, v) of the backbone within the GPU count,
  /// with its cheap bound, into `nodes_` (generation order) and the min-heap
  /// `pending_` that `config(i)` pops in increasing bound order (ties:
  /// generation order). The searches stop at the first configuration whose
  /// bound exceeds the incumbent, so only a prefix is ever sorted.
  /// Every split has max >= rho L / pp and sum >= rho L, so the pipeline is at
  /// least (m-1) rho L/pp + rho L (1F1B) or (m-1) rho L/pp + rho L/v + (1 - 1/v)
  /// rho L/pp (v interleaved chunks: path >= S/v + (1 - 1/v) T). Interleaving
  /// needs pp >= 2, m % pp == 0 and v | L (Megatron-LM's rules).
  void backbone_configs() {
    nodes_.clear();
    const double L = static_cast<double>(mods_[bi_].layers);
    for (int n : divisors(S_)) {
      const int m = S_ / n;
      for (int tp : mods_[bi_].tps)
        for (bool rc : rcs_)
          for (int dp : divisors(n)) {
            const int k = n / dp;
            const double r = rho(table(bi_, tp, rc, k));
            for (int pp = min_pp_b_; pp <= max_pp_b_; ++pp) {
              if (static_cast<long long>(tp) * pp * dp > N_) break;
              const double lb =
                  (static_cast<double>(m - 1) * (r * L / static_cast<double>(pp)) + r * L) *
                  (1.0 - 1e-9);
              nodes_.push_back(backbone_cfg{lb, n, tp, dp, pp, k, rc, nullptr});
              if (pp < 2 || m % pp != 0) continue;
              for (int v = 2; v <= opt_.max_virtual_stages; ++v) {
                if (mods_[bi_].layers % v != 0 || mods_[bi_].layers / v < pp) continue;
                const double vv = static_cast<double>(v);
                const double t = r * L / static_cast<double>(pp);
                const double lbv =
                    (static_cast<double>(m - 1) * t + (r * L / vv + (1.0 - 1.0 / vv) * t)) *
                    (1.0 - 1e-9);
                nodes_.push_back(backbone_cfg{lbv, n, tp, dp, pp, k, rc, nullptr, v});
              }
            }
          }
    }
    pending_.resize(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) pending_[i] = {nodes_[i].lb, i};
    std::make_heap(pending_.begin(), pending_.end(), std::greater<>{});
    sorted_.clear();
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
    return pipeline_bound(b, sp.tmax, sp.tsum);
  }

  /// @brief A lower bound over every split of `b`, memory-capped ones
  /// included, from its balanced split `bal`: no split has a smaller largest
  /// stage than `bal` (it minimises it), and no split's stage times sum to less
  /// than rho * L (`rho`) or than its largest stage.
  double any_split_bound(const backbone_cfg& b, const split_info& bal) {
    const double r = rho(table(bi_, b.tp, b.rc, b.k)) * static_cast<double>(mods_[bi_].layers);
    return pipeline_bound(b, bal.tmax, std::max(r * (1.0 - 1e-9), bal.tmax));
  }

  /// @brief (m-1) * tmax + the fill/drain of stage times summing to tsum with
  /// largest tmax (interleaved: (tsum - tmax) / v + tmax), monotone in both.
  [[nodiscard]] double pipeline_bound(const backbone_cfg& b, double tmax, double tsum) const {
    const double fill =
        b.v <= 1 ? tsum : (tsum - tmax) / static_cast<double>(b.v) * (1.0 - 1e-9) + tmax;
    return static_cast<double>(S_ / b.n - 1) * tmax + fill;
  }

  /// @brief Hops (into `hops`) and the largest exposed sync of a module with
  /// links `L` whose first rank is `base` (`to_rank_layout`'s placement) under `lc`.
  [[nodiscard]] double place(const stage_links& L, long long base, link_case lc,
                             std::vector<double>& hops) const {
    const auto pp = static_cast<int>(L.sync_in.size());
    const long long s = L.ranks;
    hops.assign(static_cast<std::size_t>(pp), 0.0);
    auto pick = [&](double in, double nic, bool placed_in, bool may_in) {
      switch (lc) {
        case link_case::placed: return placed_in ? in : nic;
        case link_case::best: return may_in ? std::min(in, nic) : nic;
        case link_case::worst: break;
      }
      return std::max(in, nic);
    };
    double sync = 0;
    for (int j = 0; j < pp; ++j) {
      const auto u = static_cast<std::size_t>(j);
      const long long a = base + j * s;
      if (j + 1 < pp)
        hops[u] = pick(L.hop_in[u], L.hop_nic[u], blocks_in_one_node(a, s, a + s, s, g_),
                       may_share_node(s, s, g_));
      sync = std::max(
          sync, pick(L.sync_in[u], L.sync_nic[u], in_one_node(a, s, g_), may_share_node(s, 0, g_)));
    }
    return sync;
  }

  /// @brief Links of the backbone configuration `b` whose encoder (`ce`) /
  /// generator (`cg`) may be colocated on its first / last stage; their sync
  /// is added to those stages in model-module order (as `evaluate` does).
  void backbone_links(const backbone_cfg& b, bool ce, bool cg, stage_links& L) {
    const module_workload w = workload(bi_, b.k);
    L.ranks = static_cast<long long>(b.tp) * b.dp;
    L.hop_in.clear();
    L.hop_nic.clear();
    L.sync_in.clear();
    L.sync_nic.clear();
    std::array<stage_sync, 2> ye{}, yg{};
    if (ce) ye = part_sync_both(cost_, colocated_cfg(ei_, b.tp, b.dp, b.rc), workload(ei_, b.k));
    if (cg) yg = part_sync_both(cost_, colocated_cfg(gi_, b.tp, b.dp, b.rc), workload(gi_, b.k));
    for (int j = 0; j < b.pp; ++j) {
      const stage_type ty = type_of_stage(j, b.pp);
      const stage_config cfg =
          stage(bi_, at(b.layout->first, j), at(b.layout->layers, j), b.tp, b.dp, b.rc);
      const bool more = j + 1 < b.pp;
      L.hop_in.push_back(more ? hop_time(cost_, cfg, w, true, mods_[bi_].dirs) : 0.0);
      L.hop_nic.push_back(more ? hop_time(cost_, cfg, w, false, mods_[bi_].dirs) : 0.0);
      const std::array<stage_sync, 2> own = part_sync_both(cost_, cfg, w);
      for (std::size_t spans = 0; spans < 2; ++spans) {
        stage_sync y;
        if ((ty == stage_type::first || ty == stage_type::whole) && ce) y.add(ye[spans]);
        y.add(own[spans]);
        if ((ty == stage_type::last || ty == stage_type::whole) && cg) y.add(yg[spans]);
        (spans ? L.sync_nic : L.sync_in).push_back(exposed_sync(y));
      }
    }
  }

  /// @brief Backbone terms (max stage, path, sync) of `b` with links `L`
  /// whose first rank is `base` (`link_case::best`: a lower bound for any base).
  module_terms backbone_terms(const backbone_cfg& b, const stage_links& L, long long base,
                              link_case lc) {
    const double sync = place(L, base, lc, hops_);
    module_terms t = module_path({.stage_s = b.layout->times, .hop_s = hops_}, 0.0, b.v);
    t.sync_s = sync;
    return t;
  }

  /// @brief Microbatches (chunk-microbatches if interleaved) backbone stage `j`
  /// of `b` keeps in flight in a chain of `P` stages whose first `b.pp` are the backbone's.
  [[nodiscard]] static int backbone_in_flight(const backbone_cfg& b, int j, int P, int m) noexcept {
    return b.v > 1 ? interleaved_in_flight(
                         {.pp = b.pp, .chunks = b.v, .microbatches = m, .after = P - b.pp}, j)
                   : one_f_one_b_in_flight(P, j, m);
  }

  /// @brief Memory per GPU of backbone stage `j` of `b` holding `c` layers from
  /// `first` with `f` in flight, with the colocated encoder / generator parts
  /// (`ce`, `cg`) on its first / last stage, summed in model-module order.
  double backbone_stage_memory(const backbone_cfg& b, int j, int first, int c, int f, bool ce,
                               bool cg) {
    const stage_type ty = type_of_stage(j, b.pp);
    const int fw = whole_microbatches(f, b.v);  // colocated parts keep whole microbatches
    memory_breakdown mem;
    if ((ty == stage_type::first || ty == stage_type::whole) && ce)
      add_memory(mem,
                 cost_.stage_memory(colocated_cfg(ei_, b.tp, b.dp, b.rc), workload(ei_, b.k), fw));
    add_memory(mem, device_memory(cost_, stage(bi_, first, c, b.tp, b.dp, b.rc), workload(bi_, b.k),
                                  f, b.v));
    if ((ty == stage_type::last || ty == stage_type::whole) && cg)
      add_memory(mem,
                 cost_.stage_memory(colocated_cfg(gi_, b.tp, b.dp, b.rc), workload(gi_, b.k), fw));
    return mem.total();
  }

  /// @brief Whether every stage of the backbone split `sp` of `b` fits memory
  /// in a chain of `P` stages (the backbone's first), with the colocated parts.
  bool backbone_fits(const backbone_cfg& b, const split_info& sp, int P, int m, bool ce, bool cg) {
    for (int j = 0; j < b.pp; ++j) {
      const double need = backbone_stage_memory(b, j, at(sp.first, j), at(sp.layers, j),
                                                backbone_in_flight(b, j, P, m), ce, cg);
      if (need > limit_) {
        note_violation(model_.modules[bi_].name, j, need);
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
                                 int P, int m, bool ce, bool cg) {
    if (bal.layers.empty()) return nullptr;
    if (backbone_fits(b, bal, P, m, ce, cg)) return &bal;
    if (b.pp < 2) return nullptr;
    const std::array<long long, 3> ckey{b.dp, P, m};
    auto it = capped_.find({key, ckey});
    if (it != capped_.end()) return it->second->layers.empty() ? nullptr : it->second.get();
    const int L = mods_[bi_].layers, units = L / b.v;
    std::vector<int> caps(static_cast<std::size_t>(b.pp), 0);
    for (int j = 0; j < b.pp; ++j) {
      const stage_type ty = type_of_stage(j, b.pp);
      const int f = backbone_in_flight(b, j, P, m);
      auto fits = [&](int u) {
        const int c = u * b.v;
        return backbone_stage_memory(b, j, first_layer_of(ty, c, L), c, f, ce, cg) <= limit_;
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
    split_times(key, [&](const auto& fn) {
      make_split(*sp, b.v, L, b.pp, layer_split_rule::balanced, fn, caps);
    });
    if (!sp->layers.empty() && !backbone_fits(b, *sp, P, m, ce, cg)) *sp = split_info{};
    const split_info* out = sp->layers.empty() ? nullptr : sp.get();
    capped_.emplace(std::make_pair(key, ckey), std::move(sp));
    return out;
  }

  // ---- disaggregated layouts ----
  /// @brief Which side modules a disaggregated-family layout colocates on the
  /// backbone (both separate; with `include_mixed`, one of the two).
  struct side_mode {
    bool ce = false, cg = false;
  };

  void search_disaggregated() {
    std::vector<side_mode> modes{{false, false}};
    if (opt_.include_mixed && has_e_ && has_g_) {
      modes.push_back({true, false});
      modes.push_back({false, true});
    }
    for (std::size_t at = 0; backbone_cfg* node = config(at); ++at) {
      backbone_cfg& b = *node;
      if (b.lb > best_.time()) break;
      for (const side_mode& md : modes) {
        const long long side_min = (has_e_ && !md.ce ? 1 : 0) + (has_g_ && !md.cg ? 1 : 0);
        if (static_cast<long long>(b.tp) * b.pp * b.dp + side_min > N_) continue;
        const split_key key =
            md.ce || md.cg
                ? mono_key(layer_split_rule::balanced, b.tp, b.rc, b.k, b.pp, b.v, md.ce, md.cg)
                : split_key{split_family::plain, bi_, b.tp, b.rc, b.pp, b.k, b.v};
        const split_info& bal = get_split(key);
        if (bal.layers.empty() || any_split_bound(b, bal) > best_.time()) continue;
        expand(b, md, key, bal);
      }
    }
  }

  /// @brief The backbone configuration being expanded: its links and its
  /// terms per first rank modulo the node size (filled on demand).
  struct backbone_ctx {
    stage_links links;
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
  bool prepare_backbone(backbone_cfg& b, const split_info& sp, side_mode md) {
    b.layout = &sp;
    if (split_bound(b, sp) > best_.time()) return false;
    backbone_links(b, md.ce, md.cg, bctx_.links);
    bctx_.at.assign(static_cast<std::size_t>(g_), module_terms{});
    bctx_.done.assign(static_cast<std::size_t>(g_), 0);
    const module_terms arr[3] = {module_terms{}, backbone_terms(b, bctx_.links, 0, link_case::best),
                                 module_terms{}};
    if (combine_bound(S_ / b.n, arr).iteration_s > best_.time()) return false;
    ++stats_.backbone_expanded;
    return true;
  }

  /// @brief Pairs the backbone configuration `b` (balanced split `bal`, cached
  /// under `key`) with the side modules' options, per generator depth `ppg`
  /// (which fixes the backbone's in-flight counts, hence its split).
  void expand(backbone_cfg& b, side_mode md, const split_key& key, const split_info& bal) {
    const int m = S_ / b.n;
    const bool se = has_e_ && !md.ce, sg = has_g_ && !md.cg;  // separate side modules
    const long long gb = static_cast<long long>(b.tp) * b.pp * b.dp;
    const int max_e = se ? opt_.max_side_pp : 0;
    const int max_g = sg ? opt_.max_side_pp : 0;
    const split_info* prepared = nullptr;
    bool usable = false;
    for (int ppg = sg ? 1 : 0; ppg <= max_g; ++ppg) {
      // The backbone's in-flight counts depend on ppg only (stage j keeps min(ppg + pp - j, m)).
      const split_info* sp = fitted_split(b, bal, key, b.pp + ppg, m, md.ce, md.cg);
      if (sp == nullptr) continue;
      if (sp != prepared) {
        prepared = sp;
        usable = prepare_backbone(b, *sp, md);
      }
      if (!usable) continue;
      for (int ppe = se ? 1 : 0; ppe <= max_e; ++ppe) {
        if (gb + ppe + ppg > N_) break;
        pair_search(b, gb, ppe, ppg, ppe + b.pp + ppg, m, md);
      }
    }
  }

  /// @brief Boundary transfer between a side module and the backbone (times
  /// `dirs`): the larger of the two halves (`a`, `b`: NVLink / NIC pairs) over
  /// the link `same_node` picks (`boundary_of`, as `boundary_time`), or the
  /// cheaper class of each where some placement may share a node (`best_boundary`).
  [[nodiscard]] static double boundary_of(double dirs, double a_in, double a_nic, double b_in,
                                          double b_nic, bool same_node) noexcept {
    return dirs * std::max(same_node ? a_in : a_nic, same_node ? b_in : b_nic);
  }
  [[nodiscard]] static double best_boundary(double dirs, double a_in, double a_nic, double b_in,
                                            double b_nic, bool may_share) noexcept {
    return may_share ? dirs * std::max(std::min(a_in, a_nic), std::min(b_in, b_nic))
                     : boundary_of(dirs, a_in, a_nic, b_in, b_nic, false);
  }

  void pair_search(const backbone_cfg& b, long long gb, int ppe, int ppg, int P, int m,
                   side_mode md) {
    static const side_list none{{side_option{}}};
    const side_list* E = &none;
    const side_list* G = &none;
    const bool se = has_e_ && !md.ce, sg = has_g_ && !md.cg;  // separate side modules
    if (se) {
      std::vector<int> fl;
      for (int j = 0; j < ppe; ++j) fl.push_back(one_f_one_b_in_flight(P, j, m));
      E = &side_options(ei_, b.n, ppe, fl);
    }
    if (sg) {
      std::vector<int> fl;
      for (int j = 0; j < ppg; ++j) fl.push_back(one_f_one_b_in_flight(P, ppe + b.pp + j, m));
      G = &side_options(gi_, b.n, ppg, fl);
    }
    if (E->options.empty() || G->options.empty()) return;
    const long long sb = static_cast<long long>(b.tp) * b.dp;  // ranks per backbone stage
    const double be_in = se ? side_transfer_time(ei_, b.k, b.tp, true) : 0.0;
    const double be_nic = se ? side_transfer_time(ei_, b.k, b.tp, false) : 0.0;
    const double bg_in = sg ? side_transfer_time(gi_, b.k, b.tp, true) : 0.0;
    const double bg_nic = sg ? side_transfer_time(gi_, b.k, b.tp, false) : 0.0;
    const double dirs_e = se ? mods_[ei_].dirs : 0.0;
    const double dirs_g = mods_[bi_].dirs;
    // Generator terms with this backbone in the best case (any placement), and prefix minima (over
    // fewer GPUs) for the bound.
    const std::size_t ng = G->options.size();
    gterms_.assign(ng, module_terms{});
    pmin_t_.resize(ng);
    pmin_path_.resize(ng);
    for (std::size_t i = 0; i < ng; ++i) {
      const side_option& o = G->options[i];
      if (sg) {
        gterms_[i].max_stage_s = o.max_stage;
        gterms_[i].path_s =
            o.path_base + best_boundary(dirs_g, bg_in, bg_nic, o.side_in, o.side_nic,
                                        may_share_node(sb, o.links.ranks, g_));
        gterms_[i].sync_s = o.sync;
        gterms_[i].stages = o.pp;
        gterms_[i].loop_s = gterms_[i].path_s;
      }
      pmin_t_[i] =
          i == 0 ? gterms_[i].max_stage_s : std::min(pmin_t_[i - 1], gterms_[i].max_stage_s);
      pmin_path_[i] = i == 0 ? gterms_[i].path_s : std::min(pmin_path_[i - 1], gterms_[i].path_s);
    }
    const long long budget = N_ - gb;
    for (const side_option& e : E->options) {
      if (e.gpus + G->options.front().gpus > budget) break;
      if (e.gpus % b.tp != 0) continue;  // the backbone's first rank must be a multiple of its tp
      module_terms et{};
      if (se) {
        const long long se_ranks = e.links.ranks;
        et.max_stage_s = e.max_stage;
        et.path_s = e.path_base +
                    boundary_of(dirs_e, e.side_in, e.side_nic, be_in, be_nic,
                                blocks_in_one_node(e.gpus - se_ranks, se_ranks, e.gpus, sb, g_));
        et.sync_s = e.sync;
        et.stages = e.pp;
        et.loop_s = et.path_s;
      }
      const module_terms bt = backbone_terms_at(b, bctx_, e.gpus);
      const long long base_g = gb + e.gpus;  // the generator's first rank
      // Affordable generator options: [0, idx), idx >= 1 by the check above.
      const auto idx = static_cast<std::size_t>(
          std::upper_bound(G->options.begin(), G->options.end(), budget - e.gpus,
                           [](long long v, const side_option& o) { return v < o.gpus; }) -
          G->options.begin());
      for (std::size_t i = idx; i-- > 0;) {
        {
          const module_terms arr[3] = {
              et, bt, module_terms{pmin_t_[i], pmin_path_[i], 0.0, ppg, pmin_path_[i]}};
          if (combine(m, arr).iteration_s > best_.time()) break;  // bounds every option in [0, i]
        }
        const side_option& go = G->options[i];
        if (sg && base_g % go.tp != 0) continue;
        ++stats_.pairs_evaluated;
        module_terms gt{};
        if (sg) {
          gt.max_stage_s = go.max_stage;
          gt.sync_s = place(go.links, base_g, link_case::placed, hops_);
          gt.path_s = accumulate_path({.stage_s = go.layout->times, .hop_s = hops_}, 0.0) +
                      boundary_of(dirs_g, bg_in, bg_nic, go.side_in, go.side_nic,
                                  blocks_in_one_node(base_g - sb, sb, base_g, go.links.ranks, g_));
          gt.stages = go.pp;
          gt.loop_s = gt.path_s;
        }
        const module_terms arr[3] = {et, bt, gt};
        const double time = combine(m, arr).iteration_s;
        const long long gpus = gb + e.gpus + go.gpus;
        if (!best_.may_improve(time, gpus)) continue;
        parallel_plan p = base_plan(b.n);
        set_module(p, bi_, b.tp, b.pp, b.dp, b.rc, b.layout->layers, b.v);
        if (se) set_module(p, ei_, e.tp, e.pp, e.dp, e.rc, e.layout->layers);
        if (sg) set_module(p, gi_, go.tp, go.pp, go.dp, go.rc, go.layout->layers);
        if (md.ce) set_colocated(p, ei_, b);
        if (md.cg) set_colocated(p, gi_, b);
        best_.consider(time, gpus, std::move(p));
      }
    }
  }

  static void set_module(parallel_plan& p, std::size_t i, int tp, int pp, int dp, bool rc,
                         const std::vector<int>& layers, int v = 1) {
    module_plan& mp = p.modules[i];
    mp.virtual_stages = v;
    mp.tp = tp;
    mp.pp = pp;
    mp.dp = dp;
    mp.recompute = rc;
    mp.layers = layers;
  }

  /// @brief Side module `i` colocated on backbone configuration `c` (its
  /// largest supported TP dividing the backbone's, the backbone's dp and recompute).
  void set_colocated(parallel_plan& p, std::size_t i, const backbone_cfg& c) const {
    set_module(p, i, colocated_tp(i, c.tp), 1, c.dp, c.rc, {mods_[i].layers});
    p.modules[i].colocated = true;
  }

  // ---- monolithic (Megatron-style) layouts ----
  [[nodiscard]] int colocated_tp(std::size_t i, int tp_b) const {
    int best = 1;
    for (int t : mods_[i].colocated_tps)
      if (tp_b % t == 0) best = std::max(best, t);
    return best;
  }
  [[nodiscard]] stage_config colocated_cfg(std::size_t i, int tp_b, int dp, bool rc) const {
    return stage(i, 0, mods_[i].layers, colocated_tp(i, tp_b), dp, rc);
  }

  /// @brief Key of the backbone's splits with the colocated encoder (`ce`) on
  /// stage 0 and the colocated generator (`cg`) on the last stage, by `rule`.
  [[nodiscard]] split_key mono_key(layer_split_rule rule, int tp, bool rc, int k, int pp, int v,
                                   bool ce, bool cg) const {
    const bool all = ce == has_e_ && cg == has_g_;
    const split_family family =
        all  ? (rule == layer_split_rule::even ? split_family::all_colocated_even
                                               : split_family::all_colocated_balanced)
        : ce ? split_family::encoder_colocated
        : cg ? split_family::generator_colocated
             : split_family::none_colocated;
    return split_key{family, bi_, tp, rc, pp, k, v};
  }

  void search_monolithic() {
    std::vector<layer_split_rule> rules;
    for (layer_split_rule r : opt_.monolithic_splits)
      if (std::find(rules.begin(), rules.end(), r) == rules.end()) rules.push_back(r);
    std::sort(rules.begin(), rules.end());
    for (std::size_t at = 0; backbone_cfg* node = config(at); ++at) {
      backbone_cfg& c = *node;
      if (c.lb > best_.time()) break;
      const int m = S_ / c.n;
      for (layer_split_rule rule : rules) {
        const split_key key = mono_key(rule, c.tp, c.rc, c.k, c.pp, c.v, has_e_, has_g_);
        const split_info& given = get_split(key);
        if (given.layers.empty()) continue;
        // The even rule is fixed; the balanced one is capped by memory where it does not fit.
        const bool capped = rule == layer_split_rule::balanced;
        if ((capped ? any_split_bound(c, given) : split_bound(c, given)) > best_.time()) continue;
        const split_info* sp = capped ? fitted_split(c, given, key, c.pp, m, has_e_, has_g_)
                               : backbone_fits(c, given, c.pp, m, has_e_, has_g_) ? &given
                                                                                  : nullptr;
        if (sp == nullptr || split_bound(c, *sp) > best_.time()) continue;
        c.layout = sp;
        ++stats_.monolithic_configs;
        backbone_links(c, has_e_, has_g_, mlinks_);
        const module_terms arr[1] = {backbone_terms(c, mlinks_, 0, link_case::placed)};
        const double time = combine(m, arr).iteration_s;
        const long long gpus = static_cast<long long>(c.tp) * c.pp * c.dp;
        if (!best_.may_improve(time, gpus)) continue;
        parallel_plan p = base_plan(c.n);
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
  // Caches (looked up, never iterated, so their order cannot leak into results).
  std::unordered_map<time_table_key, time_table, time_table_key_hash> tables_;
  std::unordered_map<split_key, std::unique_ptr<split_info>, split_key_hash> splits_;
  // Memory-capped backbone splits by (balanced split's key, {dp, chain stages, microbatches}).
  std::map<std::pair<split_key, std::array<long long, 3>>, std::unique_ptr<split_info>> capped_;
  std::map<std::vector<long long>, side_list> side_cache_;
  std::vector<backbone_cfg> nodes_;                      // generation order
  std::vector<std::pair<double, std::size_t>> pending_;  // (bound, index) min-heap, unsorted rest
  std::vector<std::size_t> sorted_;                      // indices popped, in bound order
  std::vector<module_terms> gterms_;
  std::vector<double> hops_;
  backbone_ctx bctx_;
  stage_links mlinks_;  // a monolithic configuration's links
  std::vector<double> pmin_t_, pmin_path_;
  incumbent best_;
  violation viol_;
  planner_stats stats_;
};

}  // namespace detail
}  // namespace disttrain
