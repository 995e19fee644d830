#pragma once
// Test-only reference: enumerates EVERY plan of the planner's search space
// (docs/planner.md, "Search space") as a parallel_plan, scores each with
// evaluate(), and keeps the minimum under the planner's documented order
// (time, GPUs, tie_key). No bounds, no dominance, no caches of the planner:
// only the space definition (and the layer-split rule, which is part of it)
// is shared.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/model/module_shape.hpp"
#include "disttrain/plan/detail/layer_split.hpp"
#include "disttrain/plan/detail/search.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"

namespace disttrain::testing {

struct exhaustive_result {
  std::optional<parallel_plan> plan;
  double time = std::numeric_limits<double>::infinity();
  long long plans_scored = 0;
  bool capped_split = false;  // the best plan's backbone split is capped by memory
};

template <class C>
exhaustive_result exhaustive_plan(const C& cost, const plan_request& req,
                                  const planner_options& opt) {
  const model_spec& model = cost.model();
  const int N = cost.cluster().num_gpus;
  const int g = cost.cluster().gpus_per_node;
  const int S = req.global_batch;
  const std::size_t bi = model.backbone_index();
  std::vector<std::size_t> side_modules;  // encoders and generators, in model order
  unsigned all_sides = 0;
  for (std::size_t i = 0; i < model.modules.size(); ++i)
    if (i != bi) {
      side_modules.push_back(i);
      all_sides |= 1U << i;
    }
  auto tps_of = [&](std::size_t i) {
    std::vector<int> v;
    const auto sh = shape_of(model.modules[i]);
    for (int t : opt.tp_candidates)
      if (t <= g && g % t == 0 && sh.tp_supported(t) && std::find(v.begin(), v.end(), t) == v.end())
        v.push_back(t);
    return v;
  };
  auto colocated_tp = [&](std::size_t i, int tpb) {
    int best = 1;
    const auto sh = shape_of(model.modules[i]);
    for (int t = 1; t <= tpb; t *= 2)
      if (tpb % t == 0 && sh.tp_supported(t)) best = t;
    return best;
  };
  // Recompute: 0 none, 1 selective, 2 full.
  std::vector<int> rcs{0};
  if (opt.search_selective_recompute) rcs.push_back(1);
  if (opt.search_recompute) rcs.push_back(2);
  const int Lb = model.modules[bi].layers();
  const int max_pp = opt.max_backbone_pp > 0 ? std::min(opt.max_backbone_pp, Lb) : Lb;

  // Stage time of module i by stage type, straight from the cost model.
  auto type_time = [&](std::size_t i, int tp, int rc, int k, detail::stage_type t, int c) {
    const int L = model.modules[i].layers();
    int first = -1;
    switch (t) {
      case detail::stage_type::first: first = c <= L - 1 ? 0 : -1; break;
      case detail::stage_type::middle: first = c <= L - 2 ? 1 : -1; break;
      case detail::stage_type::last: first = c <= L - 1 ? L - c : -1; break;
      case detail::stage_type::whole: first = c == L ? 0 : -1; break;
    }
    if (first < 0) return std::numeric_limits<double>::infinity();
    return cost
        .stage_time(stage_config{i, first, c, tp, 1, rc == 2, rc == 1},
                    req.sample_workload[i] * static_cast<double>(k))
        .total_s();
  };
  // The balanced split with v interleaved chunks per stage: L / v units of v layers, each stage
  // capped at caps[j] units if caps are given.
  auto balanced_v = [](int L, int pp, int v, const auto& fn, std::span<const int> caps = {}) {
    if (v <= 1) return detail::balanced_split(L, pp, fn, caps);
    std::vector<int> out;
    if (L % v != 0) return out;
    out = detail::balanced_split(
        L / v, pp, [&](detail::stage_type t, int u) { return fn(t, u * v); }, caps);
    for (int& c : out) c *= v;
    return out;
  };
  // Stage times of the backbone with the side modules of `colocated` (bit i: module i) on its
  // first (encoders) / last (generators) stage, added in model-module order as evaluate() does.
  auto backbone_fn = [&](unsigned colocated, int tpb, int rcb, int kb) {
    std::vector<double> te, tg;
    for (const std::size_t i : side_modules)
      if ((colocated >> i) & 1U)
        (i < bi ? te : tg)
            .push_back(type_time(i, colocated_tp(i, tpb), rcb, kb, detail::stage_type::whole,
                                 model.modules[i].layers()));
    double front = 0.0;
    for (const double t : te) front += t;
    return [=, &type_time](detail::stage_type t, int c) {
      const double x = type_time(bi, tpb, rcb, kb, t, c);
      double acc = 0.0;
      if (t == detail::stage_type::first || t == detail::stage_type::whole)
        acc = (0.0 + front) + x;
      else
        acc = 0.0 + x;
      if (t == detail::stage_type::last || t == detail::stage_type::whole)
        for (const double x_g : tg) acc += x_g;
      return acc;
    };
  };
  // Memory per GPU of the backbone's stage j in plan q, as evaluate() reports it.
  auto backbone_memory = [&](const parallel_plan& q, int j) {
    const auto ev = evaluate(q, cost, req.sample_workload, evaluate_options{false});
    for (const auto& st : ev.stages)
      if (st.module == model.modules[bi].name && st.stage == j) return st.memory_bytes;
    return std::numeric_limits<double>::infinity();
  };
  const double limit = cost.memory_limit();
  // The split rule for the backbone of plan p (docs/planner.md, "Layer split"): the balanced
  // split `bal` if every backbone stage fits memory; else the balanced split with each stage
  // capped at the most units that fit it, found by scoring probe plans in which only that stage's
  // layer count varies (a stage's memory depends on its own layers only); empty if none fits.
  auto fitted = [&](parallel_plan p, const std::vector<int>& bal, const auto& fn) {
    module_plan& mb = p.modules[bi];
    const int pp = mb.pp, v = mb.virtual_stages, units = Lb / v;
    mb.layers = bal;
    const auto ev = evaluate(p, cost, req.sample_workload, evaluate_options{false});
    bool fits = true;
    for (const auto& st : ev.stages)
      if (st.module == model.modules[bi].name && st.memory_bytes > limit) fits = false;
    if (fits) return bal;
    if (pp < 2) return std::vector<int>{};
    std::vector<int> caps(static_cast<std::size_t>(pp), 0);
    for (int j = 0; j < pp; ++j) {
      auto fits_units = [&](int u) {
        std::vector<int> probe(static_cast<std::size_t>(pp), v);
        probe[static_cast<std::size_t>(j)] = u * v;
        probe[j == 0 ? 1u : 0u] += (units - u - (pp - 1)) * v;
        mb.layers = probe;
        return backbone_memory(p, j) <= limit;
      };
      int lo = 0, hi = units - (pp - 1);
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (fits_units(mid))
          lo = mid;
        else
          hi = mid - 1;
      }
      caps[static_cast<std::size_t>(j)] = lo;
    }
    return balanced_v(Lb, pp, v, fn, caps);
  };
  auto plain_split = [&](std::size_t i, int tp, int rc, int k, int pp, int v = 1) {
    return balanced_v(model.modules[i].layers(), pp, v, [&](detail::stage_type t, int c) {
      return 0.0 + type_time(i, tp, rc, k, t, c);
    });
  };

  exhaustive_result best;
  detail::ranked_plan rb;
  // Whether p is within the GPU budget and every module owning ranks starts at a
  // multiple of its tp (topology_of's rule, require_tp_in_nodes).
  auto admissible = [&](const parallel_plan& p) {
    if (p.total_gpus() > N) return false;
    long long first_rank = 0;
    for (const auto& m : p.modules) {
      if (m.colocated) continue;
      if (first_rank % m.tp != 0) return false;
      first_rank += m.gpus();
    }
    return true;
  };
  auto score = [&](parallel_plan&& p, bool capped = false) {
    ++best.plans_scored;
    if (!admissible(p)) return;
    const auto ev = evaluate(p, cost, req.sample_workload, evaluate_options{false});
    if (ev.max_memory_bytes > ev.memory_limit_bytes) return;
    auto key = detail::tie_key(p);
    if (detail::ranks_before(ev.iteration_time_s, ev.gpus, key, rb)) {
      rb.time = ev.iteration_time_s;
      rb.gpus = ev.gpus;
      rb.key = std::move(key);
      best.plan = p;
      best.time = ev.iteration_time_s;
      best.capped_split = capped;
    }
  };
  auto base = [&](int n, bool zb) {
    parallel_plan p;
    p.global_batch = S;
    p.num_microbatches = S / n;
    if (zb) p.schedule = plan_schedule::zb_h1;
    p.gpus_per_node = g;
    p.overlap_grad_reduce = opt.overlap_grad_reduce;
    p.overlap_param_gather = opt.overlap_param_gather;
    for (const auto& m : model.modules) {
      module_plan mp;
      mp.name = m.name;
      mp.role = std::string(to_string(m.role));
      mp.sequence_parallel = opt.sequence_parallel;
      p.modules.push_back(mp);
    }
    return p;
  };
  auto set = [](module_plan& mp, int tp, int pp, int dp, int rc, std::vector<int> layers) {
    mp.tp = tp;
    mp.pp = pp;
    mp.dp = dp;
    mp.recompute = rc == 2;
    mp.selective_recompute = rc == 1;
    mp.layers = std::move(layers);
  };

  for (int n = 1; n <= S; ++n) {
    if (S % n) continue;
    for (int tpb : tps_of(bi))
      for (int rcb : rcs)
        for (int dpb = 1; dpb <= n; ++dpb) {
          if (n % dpb) continue;
          const int kb = n / dpb;
          for (int ppb = opt.min_backbone_pp; ppb <= max_pp; ++ppb)
            for (int vb = 1; vb <= opt.max_virtual_stages; ++vb) {
              // Interleaving (Megatron-LM's rules): pp >= 2, m % pp == 0, v | layers.
              if (vb > 1 && (ppb < 2 || (S / n) % ppb != 0 || Lb % vb != 0 || Lb / vb < ppb))
                continue;
              const long long gb = static_cast<long long>(tpb) * ppb * dpb;
              if (gb > N) break;
              // Schedules: 1F1B, and ZB-H1 for plain layouts when the options allow it.
              for (int zb = 0; zb <= (opt.zero_bubble && vb == 1 ? 1 : 0); ++zb) {
                // Monolithic layouts.
                if (opt.include_monolithic) {
                  const auto fn = backbone_fn(all_sides, tpb, rcb, kb);
                  for (layer_split_rule rule : opt.monolithic_splits) {
                    std::vector<int> layers;
                    if (rule == layer_split_rule::even) {
                      if (Lb % (ppb * vb) == 0)
                        layers.assign(static_cast<std::size_t>(ppb), Lb / ppb);
                    } else {
                      layers = balanced_v(Lb, ppb, vb, fn);
                    }
                    if (layers.empty()) continue;
                    parallel_plan p = base(n, zb != 0);
                    set(p.modules[bi], tpb, ppb, dpb, rcb, layers);
                    p.modules[bi].virtual_stages = vb;
                    for (std::size_t i = 0; i < p.modules.size(); ++i)
                      if (i != bi) {
                        set(p.modules[i], colocated_tp(i, tpb), 1, dpb, rcb,
                            {model.modules[i].layers()});
                        p.modules[i].colocated = true;
                      }
                    if (rule == layer_split_rule::balanced && admissible(p)) {
                      p.modules[bi].layers = fitted(p, layers, fn);
                      if (p.modules[bi].layers.empty()) continue;
                    }
                    const bool capped = p.modules[bi].layers != layers;
                    score(std::move(p), capped);
                  }
                }
                if (!opt.include_disaggregated) continue;  // next schedule
                // Disaggregated: every side module on its own GPUs, or (mixed) any proper
                // subset of them colocated on the backbone's first (encoders) / last
                // (generators) stage.
                std::vector<unsigned> modes;
                for (unsigned c = 0; c <= all_sides; ++c)
                  if ((c & ~all_sides) == 0 && (c == 0 || (opt.include_mixed && c != all_sides)))
                    modes.push_back(c);
                struct side {
                  int tp, pp, dp;
                  int rc;
                  std::vector<int> layers;
                };
                auto sides = [&](std::size_t mi) {
                  std::vector<side> v;
                  for (int pp = 1; pp <= opt.max_side_pp; ++pp)
                    for (int tp : tps_of(mi))
                      for (int rc : rcs)
                        for (int dp = 1; dp <= n; ++dp) {
                          if (gb + static_cast<long long>(tp) * pp * dp > N) break;
                          auto layers = plain_split(mi, tp, rc, (n + dp - 1) / dp, pp);
                          if (!layers.empty()) v.push_back(side{tp, pp, dp, rc, layers});
                        }
                  return v;
                };
                for (const unsigned colocated : modes) {
                  const auto fn = backbone_fn(colocated, tpb, rcb, kb);
                  const std::vector<int> lb = balanced_v(Lb, ppb, vb, fn);
                  if (lb.empty()) continue;
                  std::vector<std::size_t> separate;
                  std::vector<std::vector<side>> lists;
                  bool any_empty = false;
                  for (const std::size_t i : side_modules)
                    if (!((colocated >> i) & 1U)) {
                      separate.push_back(i);
                      lists.push_back(sides(i));
                      any_empty = any_empty || lists.back().empty();
                    }
                  if (any_empty) continue;
                  // The backbone's split per (encoder stages, generator stages).
                  std::map<std::pair<int, int>, std::vector<int>> split_by_depth;
                  std::vector<std::size_t> pick(separate.size(), 0);
                  for (bool more = true; more;) {
                    long long gpus = gb;
                    int front_pp = 0, back_pp = 0;
                    for (std::size_t t = 0; t < separate.size(); ++t) {
                      const side& sd = lists[t][pick[t]];
                      gpus += static_cast<long long>(sd.tp) * sd.pp * sd.dp;
                      (separate[t] < bi ? front_pp : back_pp) += sd.pp;
                    }
                    if (gpus <= N) {
                      parallel_plan p = base(n, zb != 0);
                      set(p.modules[bi], tpb, ppb, dpb, rcb, lb);
                      p.modules[bi].virtual_stages = vb;
                      for (std::size_t t = 0; t < separate.size(); ++t) {
                        const side& sd = lists[t][pick[t]];
                        set(p.modules[separate[t]], sd.tp, sd.pp, sd.dp, sd.rc, sd.layers);
                      }
                      for (const std::size_t i : side_modules)
                        if ((colocated >> i) & 1U) {
                          set(p.modules[i], colocated_tp(i, tpb), 1, dpb, rcb,
                              {model.modules[i].layers()});
                          p.modules[i].colocated = true;
                        }
                      if (admissible(p)) {
                        const std::pair<int, int> key{front_pp, back_pp};
                        auto it = split_by_depth.find(key);
                        if (it == split_by_depth.end())
                          it = split_by_depth.emplace(key, fitted(p, lb, fn)).first;
                        if (!it->second.empty()) {
                          p.modules[bi].layers = it->second;
                          score(std::move(p), it->second != lb);
                        }
                      }
                    }
                    // Next combination (odometer over the separate modules' options).
                    more = false;
                    for (std::size_t t = separate.size(); t-- > 0;) {
                      if (++pick[t] < lists[t].size()) {
                        more = true;
                        break;
                      }
                      pick[t] = 0;
                    }
                  }
                }
              }
            }
        }
  }
  return best;
}

}  // namespace disttrain::testing
