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
#include <optional>
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
};

template <class C>
exhaustive_result exhaustive_plan(const C& cost, const plan_request& req,
                                  const planner_options& opt) {
  const model_spec& model = cost.model();
  const int N = cost.cluster().num_gpus;
  const int g = cost.cluster().gpus_per_node;
  const int S = req.global_batch;
  const std::size_t bi = model.backbone_index();
  std::optional<std::size_t> ei, gi;
  for (std::size_t i = 0; i < model.modules.size(); ++i) {
    if (model.modules[i].role == module_role::encoder) ei = i;
    if (model.modules[i].role == module_role::generator) gi = i;
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
  std::vector<bool> rcs =
      opt.search_recompute ? std::vector<bool>{false, true} : std::vector<bool>{false};
  const int Lb = model.modules[bi].layers();
  const int max_pp = opt.max_backbone_pp > 0 ? std::min(opt.max_backbone_pp, Lb) : Lb;

  // Stage time of module i by stage type, straight from the cost model.
  auto type_time = [&](std::size_t i, int tp, bool rc, int k, detail::stage_type t, int c) {
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
        .stage_time(stage_config{i, first, c, tp, 1, rc},
                    req.sample_workload[i] * static_cast<double>(k))
        .total_s();
  };
  // The balanced split with v interleaved chunks per stage: L / v units of v layers.
  auto balanced_v = [](int L, int pp, int v, const auto& fn) {
    if (v <= 1) return detail::balanced_split(L, pp, fn);
    std::vector<int> out;
    if (L % v != 0) return out;
    out = detail::balanced_split(L / v, pp,
                                 [&](detail::stage_type t, int u) { return fn(t, u * v); });
    for (int& c : out) c *= v;
    return out;
  };
  auto plain_split = [&](std::size_t i, int tp, bool rc, int k, int pp, int v = 1) {
    return balanced_v(model.modules[i].layers(), pp, v, [&](detail::stage_type t, int c) {
      return 0.0 + type_time(i, tp, rc, k, t, c);
    });
  };

  exhaustive_result best;
  detail::ranked_plan rb;
  auto score = [&](parallel_plan&& p) {
    ++best.plans_scored;
    if (p.total_gpus() > N) return;
    long long first_rank = 0;  // rank_layout's rule: each segment starts at a multiple of its tp
    for (const auto& m : p.modules) {
      if (m.colocated) continue;
      if (first_rank % m.tp != 0) return;
      first_rank += m.gpus();
    }
    const auto ev = evaluate(p, cost, req.sample_workload, evaluate_options{false});
    if (ev.max_memory_bytes > ev.memory_limit_bytes) return;
    auto key = detail::tie_key(p);
    if (detail::ranks_before(ev.iteration_time_s, ev.gpus, key, rb)) {
      rb.time = ev.iteration_time_s;
      rb.gpus = ev.gpus;
      rb.key = std::move(key);
      best.plan = p;
      best.time = ev.iteration_time_s;
    }
  };
  auto base = [&](int n) {
    parallel_plan p;
    p.global_batch = S;
    p.num_microbatches = S / n;
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
  auto set = [](module_plan& mp, int tp, int pp, int dp, bool rc, std::vector<int> layers) {
    mp.tp = tp;
    mp.pp = pp;
    mp.dp = dp;
    mp.recompute = rc;
    mp.layers = std::move(layers);
  };

  for (int n = 1; n <= S; ++n) {
    if (S % n) continue;
    for (int tpb : tps_of(bi))
      for (bool rcb : rcs)
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
              // Monolithic layouts.
              if (opt.include_monolithic) {
                const double te =
                    ei ? type_time(*ei, colocated_tp(*ei, tpb), rcb, kb, detail::stage_type::whole,
                                   model.modules[*ei].layers())
                       : 0.0;
                const double tg =
                    gi ? type_time(*gi, colocated_tp(*gi, tpb), rcb, kb, detail::stage_type::whole,
                                   model.modules[*gi].layers())
                       : 0.0;
                for (layer_split_rule rule : opt.monolithic_splits) {
                  std::vector<int> layers;
                  if (rule == layer_split_rule::even) {
                    if (Lb % (ppb * vb) == 0)
                      layers.assign(static_cast<std::size_t>(ppb), Lb / ppb);
                  } else {
                    layers = balanced_v(Lb, ppb, vb, [&](detail::stage_type t, int c) {
                      const double x = type_time(bi, tpb, rcb, kb, t, c);
                      if (t == detail::stage_type::first) return (0.0 + te) + x;
                      if (t == detail::stage_type::last) return (0.0 + x) + tg;
                      if (t == detail::stage_type::whole) return ((0.0 + te) + x) + tg;
                      return 0.0 + x;
                    });
                  }
                  if (layers.empty()) continue;
                  parallel_plan p = base(n);
                  set(p.modules[bi], tpb, ppb, dpb, rcb, layers);
                  p.modules[bi].virtual_stages = vb;
                  for (std::size_t i = 0; i < p.modules.size(); ++i)
                    if (i != bi) {
                      set(p.modules[i], colocated_tp(i, tpb), 1, dpb, rcb,
                          {model.modules[i].layers()});
                      p.modules[i].colocated = true;
                    }
                  score(std::move(p));
                }
              }
              if (!opt.include_disaggregated) continue;
              // Disaggregated: both side modules on their own GPUs, or (mixed) one of them
              // colocated on the backbone's first (encoder) / last (generator) stage.
              struct mode {
                bool ce, cg;
              };
              std::vector<mode> modes{{false, false}};
              if (opt.include_mixed && ei && gi) {
                modes.push_back({true, false});
                modes.push_back({false, true});
              }
              struct side {
                int tp, pp, dp;
                bool rc;
                std::vector<int> layers;
              };
              auto sides = [&](std::optional<std::size_t> mi) {
                std::vector<side> v;
                if (!mi) {
                  v.push_back(side{1, 0, 0, false, {}});
                  return v;
                }
                for (int pp = 1; pp <= opt.max_side_pp; ++pp)
                  for (int tp : tps_of(*mi))
                    for (bool rc : rcs)
                      for (int dp = 1; dp <= n; ++dp) {
                        if (gb + static_cast<long long>(tp) * pp * dp > N) break;
                        auto layers = plain_split(*mi, tp, rc, (n + dp - 1) / dp, pp);
                        if (!layers.empty()) v.push_back(side{tp, pp, dp, rc, layers});
                      }
                return v;
              };
              for (const mode& md : modes) {
                std::vector<int> lb;
                if (!md.ce && !md.cg) {
                  lb = plain_split(bi, tpb, rcb, kb, ppb, vb);
                } else {
                  const double te =
                      md.ce ? type_time(*ei, colocated_tp(*ei, tpb), rcb, kb,
                                        detail::stage_type::whole, model.modules[*ei].layers())
                            : 0.0;
                  const double tg =
                      md.cg ? type_time(*gi, colocated_tp(*gi, tpb), rcb, kb,
                                        detail::stage_type::whole, model.modules[*gi].layers())
                            : 0.0;
                  lb = balanced_v(Lb, ppb, vb, [&](detail::stage_type t, int c) {
                    const double x = type_time(bi, tpb, rcb, kb, t, c);
                    if (t == detail::stage_type::first) return (0.0 + te) + x;
                    if (t == detail::stage_type::last) return (0.0 + x) + tg;
                    if (t == detail::stage_type::whole) return ((0.0 + te) + x) + tg;
                    return 0.0 + x;
                  });
                }
                if (lb.empty()) continue;
                const auto E = sides(md.ce ? std::nullopt : ei);
                const auto G = sides(md.cg ? std::nullopt : gi);
                for (const auto& e : E)
                  for (const auto& gg : G) {
                    if (gb + static_cast<long long>(e.tp) * e.pp * e.dp +
                            static_cast<long long>(gg.tp) * gg.pp * gg.dp >
                        N)
                      continue;
                    parallel_plan p = base(n);
                    set(p.modules[bi], tpb, ppb, dpb, rcb, lb);
                    p.modules[bi].virtual_stages = vb;
                    auto side_of = [&](std::optional<std::size_t> mi, bool col, const side& sd) {
                      if (!mi) return;
                      if (col) {
                        set(p.modules[*mi], colocated_tp(*mi, tpb), 1, dpb, rcb,
                            {model.modules[*mi].layers()});
                        p.modules[*mi].colocated = true;
                      } else {
                        set(p.modules[*mi], sd.tp, sd.pp, sd.dp, sd.rc, sd.layers);
                      }
                    };
                    side_of(ei, md.ce, e);
                    side_of(gi, md.cg, gg);
                    score(std::move(p));
                  }
              }
            }
        }
  }
  return best;
}

}  // namespace disttrain::testing
