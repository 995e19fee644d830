// Cost-model benchmark: how many stage-time and stage-memory queries per second
// the planner can make, closed form (analytic_cost_model: one O(1) evaluation
// per stage) against a naive per-layer loop (the same model evaluated one layer
// at a time and summed), measured in the same run; plus expected-workload
// estimation and calibration fit times.
// --json prints one JSON object; --quick shrinks the run for the ctest smoke test.
#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <vector>

#include "disttrain/cost.hpp"
#include "disttrain/cost/calibration.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model.hpp"
#include "disttrain/model/json.hpp"
#include "harness.hpp"

using namespace disttrain;

namespace {

struct query {
  stage_config cfg;
  module_workload w;
};

// A mix of the stage shapes a planner visits on the paper-72b scenario.
std::vector<query> make_queries(const analytic_cost_model& cm, const model_workload& per_sample) {
  std::vector<query> q;
  const int tps[] = {1, 2, 4, 8};
  for (std::size_t m = 0; m < cm.model().modules.size(); ++m) {
    const int layers = cm.shape(m).layers;
    for (int tp : tps) {
      if (!cm.shape(m).tp_supported(tp)) continue;
      for (int stages : {1, 2, 4, 8}) {
        if (stages > layers) continue;
        const int per = layers / stages;
        for (int k : {1, 2, 4, 8}) {
          for (bool rc : {false, true}) {
            q.push_back(
                query{stage_config{m, 0, per, tp, 8, rc}, per_sample[m] * static_cast<double>(k)});
          }
        }
      }
    }
  }
  return q;
}

stage_times naive_time(const analytic_cost_model& cm, const stage_config& s,
                       const module_workload& w) {
  stage_times t;
  for (int l = s.first_layer; l < s.first_layer + s.num_layers; ++l) {
    stage_config one = s;
    one.first_layer = l;
    one.num_layers = 1;
    const auto x = cm.stage_time(one, w);
    t.forward_s += x.forward_s;
    t.backward_s += x.backward_s;
    t.weight_grad_s += x.weight_grad_s;
  }
  return t;
}

memory_breakdown naive_memory(const analytic_cost_model& cm, const stage_config& s,
                              const module_workload& w, int in_flight) {
  memory_breakdown m;
  for (int l = s.first_layer; l < s.first_layer + s.num_layers; ++l) {
    stage_config one = s;
    one.first_layer = l;
    one.num_layers = 1;
    const auto x = cm.stage_memory(one, w, in_flight);
    m.params += x.params;
    m.grads += x.grads;
    m.optimizer += x.optimizer;
    m.activations += x.activations;  // (over-counts transients; only the cost matters here)
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = bench::parse_options(argc, argv);
  const double min_s = opt.quick ? 0.02 : 0.3;
  const int samples = opt.quick ? 3 : 7;
  const auto sc = presets::scenario_preset("paper-72b");
  const analytic_cost_model cm(sc.model, sc.cluster);
  const auto per_sample = expected_workload(sc.model, sc.data, 1024);
  const auto qs = make_queries(cm, per_sample);
  const double nq = static_cast<double>(qs.size());

  double layers_per_query = 0;
  for (const auto& q : qs) layers_per_query += q.cfg.num_layers;
  layers_per_query /= nq;

  double sink = 0;
  const double t_closed = bench::time_per_call(
                              [&] {
                                for (const auto& q : qs)
                                  sink += cm.stage_time(q.cfg, q.w).total_s();
                                bench::do_not_optimize(sink);
                              },
                              min_s, samples) /
                          nq;
  const double t_naive = bench::time_per_call(
                             [&] {
                               for (const auto& q : qs)
                                 sink += naive_time(cm, q.cfg, q.w).total_s();
                               bench::do_not_optimize(sink);
                             },
                             min_s, samples) /
                         nq;
  const double m_closed = bench::time_per_call(
                              [&] {
                                for (const auto& q : qs)
                                  sink += cm.stage_memory(q.cfg, q.w, 8).total();
                                bench::do_not_optimize(sink);
                              },
                              min_s, samples) /
                          nq;
  const double m_naive = bench::time_per_call(
                             [&] {
                               for (const auto& q : qs)
                                 sink += naive_memory(cm, q.cfg, q.w, 8).total();
                               bench::do_not_optimize(sink);
                             },
                             min_s, samples) /
                         nq;

  // Expected workload (Monte-Carlo over 4096 samples) and a 200-sample calibration fit.
  const std::size_t draws = opt.quick ? 512 : 4096;
  const double t_expect = bench::time_per_call(
      [&] {
        const auto e = expected_workload(sc.model, sc.data, draws);
        bench::do_not_optimize(e[1].tokens);
      },
      min_s, samples);
  std::vector<profile_sample> prof;
  splitmix64 rng(1);
  for (int i = 0; i < 200; ++i) {
    const double f = 1e8 * (1.0 + 1e5 * rng.uniform01());
    const int tp = 1 << rng.below(4);
    prof.push_back({f, tp,
                    compute_time(f, tp, 989e12, efficiency_params{}) * (1 + 0.02 * rng.uniform01()),
                    ""});
  }
  const double t_fit = bench::time_per_call(
      [&] {
        const auto r = fit_efficiency(prof, 989e12);
        bench::do_not_optimize(r.params.e_max);
      },
      min_s, samples);

  if (opt.json) {
    nlohmann::json j;
    j["benchmark"] = "cost";
    j["scenario"] = sc.name;
    j["queries"] = qs.size();
    j["mean_layers_per_query"] = layers_per_query;
    j["stage_time"] = {{"closed_form_per_s", 1.0 / t_closed},
                       {"per_layer_loop_per_s", 1.0 / t_naive},
                       {"speedup", t_naive / t_closed}};
    j["stage_memory"] = {{"closed_form_per_s", 1.0 / m_closed},
                         {"per_layer_loop_per_s", 1.0 / m_naive},
                         {"speedup", m_naive / m_closed}};
    j["expected_workload"] = {{"draws", draws}, {"ms", t_expect * 1e3}};
    j["calibration_fit"] = {{"samples", prof.size()}, {"ms", t_fit * 1e3}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("cost model queries on {} ({} stage shapes, {:.1f} layers per stage on average)\n",
             sc.name, qs.size(), layers_per_query);
  fmt::print("{:<14} {:>18} {:>20} {:>9}\n", "query", "closed form /s", "per-layer loop /s",
             "speedup");
  fmt::print("{:<14} {:>18.3e} {:>20.3e} {:>9.1f}\n", "stage_time", 1.0 / t_closed, 1.0 / t_naive,
             t_naive / t_closed);
  fmt::print("{:<14} {:>18.3e} {:>20.3e} {:>9.1f}\n", "stage_memory", 1.0 / m_closed, 1.0 / m_naive,
             m_naive / m_closed);
  fmt::print("expected_workload over {} samples: {:.3f} ms\n", draws, t_expect * 1e3);
  fmt::print("calibration fit of {} samples: {:.3f} ms\n", prof.size(), t_fit * 1e3);
  return 0;
}
