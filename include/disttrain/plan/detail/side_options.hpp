#pragma once
/// @file side_options.hpp
/// @brief Internal: the planner search's options for a disaggregated side
/// module (encoder or generator) and how a module's stages are priced on the
/// links their placement gives: `stage_links` (per-stage hop and sync over
/// NVLink and over the NIC), `place`, `side_option` lists per (module,
/// samples per microbatch, stages, in-flight counts) with the dominated dp
/// left out (`side_search::options`), and the memory violation closest to
/// fitting (`violation`, the "no plan" error).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/detail/chain_cut.hpp"
#include "disttrain/plan/detail/closed_form.hpp"
#include "disttrain/plan/detail/search_space.hpp"
#include "disttrain/plan/detail/stage_cost.hpp"
#include "disttrain/plan/detail/stage_tables.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain::detail {

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

  /// @brief Records stage `stage` of `module` needing `need` bytes against
  /// `limit`, if it is the closest to fitting so far.
  void note(const std::string& module, int stage, double need_bytes, double limit) {
    const double by = need_bytes - limit;
    if (!any || by < over) {
      any = true;
      over = by;
      need = need_bytes;
      where = cat(module, "/stage ", stage);
    }
  }
};

/// @brief The link-dependent per-stage costs of a module's stages (hop
/// j -> j + 1, exposed sync of stage j), over NVLink and over the NIC.
struct stage_links {
  std::vector<double> hop_in, hop_nic, sync_in, sync_nic;
  std::vector<double> fixed;  // per stage: colocated parts' time (`stage_chain::fixed_s`)
  long long ranks = 1;        // ranks per stage (tp * dp)
};

/// @brief Which link classes `place` prices: the placement's, the cheapest
/// any placement could give (bounds), or the dearer class everywhere.
enum class link_case { placed, best, worst };

/// @brief Hops (into `hops`) and the largest exposed sync of a module with
/// links `L` whose first rank is `base` (`topology_of`'s placement) on
/// nodes of `gpus_per_node`, under `lc`.
[[nodiscard]] inline double place(const stage_links& L, long long base, link_case lc,
                                  int gpus_per_node, std::vector<double>& hops) {
  const auto pp = static_cast<int>(L.sync_in.size());
  const long long s = L.ranks;
  const int g = gpus_per_node;
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
      hops[u] = pick(L.hop_in[u], L.hop_nic[u], blocks_in_one_node(a, s, a + s, s, g),
                     may_share_node(s, s, g));
    sync = std::max(
        sync, pick(L.sync_in[u], L.sync_nic[u], in_one_node(a, s, g), may_share_node(s, 0, g)));
  }
  return sync;
}

/// @brief Where a separate side module sits in the chain, which decides what
/// its option list may leave out (`side_search::options`):
/// - `first`: the first module (rank 0); its GPU count modulo the node size
///   fixes where every later module sits;
/// - `middle`: between two modules (a second encoder, a generator before
///   another); its first rank is known only with the modules before it;
/// - `last`: the last module; its GPU count moves nobody.
enum class side_place : std::uint8_t { first, middle, last };

/// @brief One option of a disaggregated side module.
struct side_option {
  long long gpus = 0;
  int tp = 1, pp = 1, dp = 1, k = 1;
  recompute_mode rc = recompute_mode::none;
  // `first`: its exact path (without its links to other modules) and sync at rank 0; the others
  // (first rank known only with the modules before them): best-case values, for bounds.
  double max_stage = 0, path_base = 0, sync = 0;
  double worst_path = 0, worst_sync = 0;  // not `first`: every link on the NIC
  stage_links links;
  const split_info* layout = nullptr;
};
/// @brief A side module's options, sorted by gpus (stable: generation order).
struct side_list {
  std::vector<side_option> options;
};

/// @brief Builds and caches the side modules' option lists of one search.
template <cost_model C>
class side_search {
 public:
  side_search(const C& cost, const search_space& space, stage_tables<C>& tables,
              const plan_request& req)
      : cost_(cost), space_(space), tables_(tables), req_(req) {}

  /// @brief Options of side module `i` at chain place `where` with `pp`
  /// stages, `n` samples per microbatch, stage j keeping in_flight[j]
  /// microbatches, its hops also forwarding the edges `cut` passes through it. Per
  /// (tp, recompute, k = ceil(n / dp)), among the dp that fit memory (A2:
  /// every dp above the smallest fitting one), with stages of `s = tp * dp` ranks:
  /// - `first` (its GPU count modulo the node size fixes where the others
  ///   sit): per residue of the GPU count, the smallest dp, plus every larger
  ///   dp with `s <= gpus_per_node` whose own path or sync beats all smaller
  ///   ones of its residue (a larger dp with `s > gpus_per_node` has every link
  ///   on the NIC: dominated by A3, A4);
  /// - `middle`: the same residues, a larger dp with `s <= gpus_per_node`
  ///   left out only where a smaller one of its residue is no worse in its
  ///   worst case than it in its best;
  /// - `last` (its GPU count moves nobody): every dp with `s <=
  ///   gpus_per_node` whose best case beats the smaller ones' worst case, or
  ///   the smallest dp if it has `s > gpus_per_node`.
  /// A smaller dp of the same residue also has its boundary blocks inside the
  /// larger one's, so its links to the neighbours are no worse. Counts lists
  /// and options in `stats`; a stage over memory is noted in `viol`.
  const side_list& options(std::size_t i, int n, int pp, const std::vector<int>& in_flight,
                           side_place where, const chain_cut& cut, planner_stats& stats,
                           violation& viol) {
    const std::uint64_t pass = cut.through(i);
    std::vector<long long> key{static_cast<long long>(i), n, pp, static_cast<long long>(where),
                               static_cast<long long>(pass)};
    for (const int f : in_flight) key.push_back(f);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    ++stats.side_lists;
    side_list out;
    const module_info& mi = space_.mods_[i];
    const bool exact = where == side_place::first;    // placed at rank 0
    const bool residues = where != side_place::last;  // its GPU count moves later modules
    const int g = space_.g_;
    std::vector<double> hops;
    for (int tp : mi.tps) {
      for (recompute_mode rc : space_.rcs_) {
        for (int k : replica_loads(n)) {
          const long long step = static_cast<long long>(tp) * pp;
          const int dmin = (n + k - 1) / k;
          const int dmax = k == 1 ? n : (n - 1) / (k - 1);
          if (step * dmin > space_.N_) continue;
          const split_info& sp = tables_.plain_split(i, tp, rc, k, pp);
          if (sp.layers.empty()) continue;
          const module_workload w = tables_.workload(i, k);
          auto fits = [&](int d) {
            for (int j = 0; j < pp; ++j) {
              const stage_config cfg =
                  tables_.stage(i, at(sp.first, j), at(sp.layers, j), tp, d, rc);
              memory_breakdown mem;
              add_memory(mem, cost_.stage_memory(cfg, w, at(in_flight, j)));
              if (mem.total() > space_.limit_) {
                viol.note(cost_.model().modules[i].name, j, mem.total(), space_.limit_);
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
              residues ? static_cast<int>(g / std::gcd(static_cast<long long>(g), step)) : 1;
          std::vector<char> seen(static_cast<std::size_t>(g), 0);
          int found = 0;
          const link_load carried = cut.load(cost_, pass, req_.sample_workload, k);
          const std::size_t first_new = out.options.size();
          for (int d = lo; d <= dmax; ++d) {
            const long long gpus = step * d;
            const long long ranks = static_cast<long long>(tp) * d;
            if (gpus > space_.N_ || (ranks > g && found >= classes)) break;
            const auto r = static_cast<std::size_t>(gpus % g);
            if (ranks > g && seen[r]) continue;
            side_option o;
            o.gpus = gpus;
            o.tp = tp;
            o.pp = pp;
            o.dp = d;
            o.k = k;
            o.rc = rc;
            o.layout = &sp;
            o.max_stage = sp.tmax;
            o.links = links(i, sp, tp, d, rc, w, carried);
            double worst_path = 0, worst_sync = 0;
            o.sync = place(o.links, 0, exact ? link_case::placed : link_case::best, g, hops);
            o.path_base = accumulate_path({.stage_s = sp.times, .hop_s = hops}, 0.0);
            if (!exact) {
              worst_sync = place(o.links, 0, link_case::worst, g, hops);
              worst_path = accumulate_path({.stage_s = sp.times, .hop_s = hops}, 0.0);
            }
            // Dominated by a smaller dp already listed (same tp, recompute, k)?
            bool dominated = false;
            for (std::size_t x = first_new; x < out.options.size() && !dominated; ++x) {
              const side_option& q = out.options[x];
              const bool same_residue = q.gpus % g == gpus % g;
              dominated = exact ? (same_residue && q.path_base <= o.path_base && q.sync <= o.sync)
                                : ((same_residue || !residues) && q.worst_path <= o.path_base &&
                                   q.worst_sync <= o.sync);
            }
            if (dominated) continue;
            o.worst_path = worst_path;
            o.worst_sync = worst_sync;
            if (!seen[r]) ++found;
            seen[r] = 1;
            out.options.push_back(std::move(o));
            if (!residues && ranks > g) break;
          }
        }
      }
    }
    std::stable_sort(out.options.begin(), out.options.end(),
                     [](const side_option& a, const side_option& b) { return a.gpus < b.gpus; });
    stats.side_options += static_cast<long long>(out.options.size());
    return cache_.emplace(std::move(key), std::move(out)).first->second;
  }

 private:
  /// @brief Links of a disaggregated side module's stages (split `sp`, dp `d`),
  /// its hops also forwarding `carried`.
  stage_links links(std::size_t i, const split_info& sp, int tp, int d, recompute_mode rc,
                    const module_workload& w, const link_load& carried) {
    stage_links L;
    L.ranks = static_cast<long long>(tp) * d;
    const int pp = static_cast<int>(sp.layers.size());
    const double dirs = space_.mods_[i].dirs;
    for (int j = 0; j < pp; ++j) {
      const stage_config cfg = tables_.stage(i, at(sp.first, j), at(sp.layers, j), tp, d, rc);
      const bool more = j + 1 < pp;
      L.hop_in.push_back(more ? hop_time(cost_, cfg, w, true, dirs, carried) : 0.0);
      L.hop_nic.push_back(more ? hop_time(cost_, cfg, w, false, dirs, carried) : 0.0);
      const std::array<stage_sync, 2> y = part_sync_both(cost_, cfg, w);
      L.sync_in.push_back(tables_.exposed_sync(y[0]));
      L.sync_nic.push_back(tables_.exposed_sync(y[1]));
    }
    return L;
  }

  const C& cost_;
  const search_space& space_;
  stage_tables<C>& tables_;
  const plan_request& req_;
  std::map<std::vector<long long>, side_list> cache_;
};

}  // namespace disttrain::detail
