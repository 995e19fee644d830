// Reorderer benchmark: speed (samples/s, time per global batch), balance
// quality (slowest replica / lower bound) for arrival order, LPT, KK and the
// refined default, and the iteration-time gain of microbatch ordering against
// arrival, random and the paper's rule. Baselines run in the same process;
// figures are reported as ratios. --json prints one JSON object.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disttrain/bind/workload_cost.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/reorder.hpp"
#include "harness.hpp"

using namespace disttrain;

namespace {

// The shipped data presets (model/presets.hpp) priced by the analytic cost
// model for the 7B-class MLLM (ViT-H/14 448px, Llama-2-7B, SD-2.1) on H800s:
// per-sample seconds of each module (TP 1), via workload_cost.
enum class preset { laion, interleaved };
const char* name_of(preset p) { return p == preset::laion ? "laion-400m" : "interleaved"; }

const analytic_cost_model& cost_model_7b() {
  static const analytic_cost_model cm(presets::mllm_7b(), presets::h800_cluster(64));
  return cm;
}

std::vector<sample_meta> metas(preset p, std::size_t n, std::uint64_t seed) {
  data_sampler sampler(p == preset::laion ? presets::laion400m_like()
                                          : presets::interleaved_image_text());
  std::vector<sample_meta> m;
  describe_batch(sampler.draw_batch(seed * 1000003, n),
                 workload_cost<analytic_cost_model>(cost_model_7b()), m);
  return m;
}

// Median thread CPU seconds per call (the wall clock of a shared machine is noisy).
double cpu_per_call(const std::function<void()>& fn, double min_seconds) {
  const auto now = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  long reps = 1;
  for (;;) {
    const double t0 = now();
    for (long i = 0; i < reps; ++i) fn();
    if (now() - t0 >= min_seconds / 5 || reps > (1L << 24)) break;
    reps *= 2;
  }
  std::vector<double> per;
  for (int s = 0; s < 5; ++s) {
    const double t0 = now();
    for (long i = 0; i < reps; ++i) fn();
    per.push_back((now() - t0) / static_cast<double>(reps));
  }
  std::sort(per.begin(), per.end());
  return per[2];
}

reorder_options one_module(std::uint32_t dp, std::uint32_t m, balance_method b, std::size_t k) {
  reorder_options o;
  o.modules = {{"module", dp}};
  o.microbatches = m;
  o.balance = b;
  o.order = order_method::identity;
  o.slots = b == balance_method::none ? slot_policy::arrival : slot_policy::size_sorted;
  (void)k;
  return o;
}

std::vector<sample_meta> single_module(const std::vector<sample_meta>& all, std::size_t k) {
  std::vector<sample_meta> out(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    out[i].id = all[i].id;
    out[i].cost[0] = all[i].cost[k];
  }
  return out;
}

// Slowest replica load / max(mean load, largest sample), one microbatch.
double balance_ratio(const std::vector<sample_meta>& batch, std::uint32_t dp, balance_method b) {
  reorderer<> r(one_module(dp, 1, b, 0));
  const auto res = r.assign(batch);
  double total = 0.0, largest = 0.0;
  for (const auto& s : batch) {
    total += s.cost[0];
    largest = std::max(largest, s.cost[0]);
  }
  return res.slowest(0, 0) / std::max(total / dp, largest);
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = bench::parse_options(argc, argv);
  nlohmann::json out;
  out["benchmark"] = "reorder";
  const double min_s = opt.quick ? 0.02 : 0.3;

  // ---- 1. Balance quality ---------------------------------------------------
  std::vector<std::size_t> sizes =
      opt.quick ? std::vector<std::size_t>{512} : std::vector<std::size_t>{512, 2048, 8192, 16384};
  std::vector<std::uint32_t> dps =
      opt.quick ? std::vector<std::uint32_t>{8, 64} : std::vector<std::uint32_t>{8, 64, 256, 512};
  nlohmann::json bal = nlohmann::json::array();
  if (!opt.json)
    fmt::print(
        "Balance: slowest replica / lower bound max(mean, largest), backbone costs, 1 microbatch\n"
        "{:>11} {:>6} {:>5} {:>8} | {:>8} {:>8} {:>8} {:>8}\n",
        "data", "n", "dp", "n/dp", "arrival", "lpt", "kk", "refined");
  for (preset p : {preset::laion, preset::interleaved}) {
    for (std::size_t n : sizes) {
      const auto batch = single_module(metas(p, n, 1), 1);
      for (std::uint32_t dp : dps) {
        if (n < dp) continue;
        const double arrival = balance_ratio(batch, dp, balance_method::none);
        const double lpt = balance_ratio(batch, dp, balance_method::lpt);
        const bool kk_ok = n * dp <= (1u << 22);  // KK keeps n x dp partial sums
        const double kk = kk_ok ? balance_ratio(batch, dp, balance_method::karmarkar_karp) : NAN;
        const double ref = balance_ratio(batch, dp, balance_method::refined);
        bal.push_back({{"data", name_of(p)},
                       {"n", n},
                       {"dp", dp},
                       {"arrival", arrival},
                       {"lpt", lpt},
                       {"kk", kk_ok ? nlohmann::json(kk) : nlohmann::json(nullptr)},
                       {"refined", ref}});
        if (!opt.json)
          fmt::print("{:>11} {:>6} {:>5} {:>8.1f} | {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f}\n",
                     name_of(p), n, dp, static_cast<double>(n) / dp, arrival, lpt, kk, ref);
      }
    }
  }
  out["balance"] = bal;

  // ---- 2. Speed --------------------------------------------------------------
  nlohmann::json speed = nlohmann::json::array();
  if (!opt.json)
    fmt::print(
        "\nSpeed, one thread, CPU time per global batch (wall time in the JSON)\n"
        "  default: 3 modules dp 64/256/32, 8 microbatches, 1F1B over 1+4+1 stages; lpt+paper: "
        "same, LPT split\n"
        "  and paper order; 1 module: backbone costs over 256 replicas, 1 microbatch (the <= 1 ms "
        "target at 4096)\n"
        "{:>6} | {:>10} {:>11} | {:>10} {:>6} | {:>9} {:>9} {:>9}\n",
        "n", "default", "samples/s", "lpt+paper", "ratio", "1 module", "lpt only", "arrival");
  std::vector<std::size_t> speed_sizes = opt.quick
                                             ? std::vector<std::size_t>{1024}
                                             : std::vector<std::size_t>{1024, 4096, 16384, 65536};
  for (std::size_t n : speed_sizes) {
    const auto batch = metas(preset::laion, n, 2);
    reorder_options o;
    o.modules = {{"encoder", 64}, {"backbone", 256}, {"generator", 32}};
    o.microbatches = 8;
    o.stages = chain_stages(std::vector<std::uint32_t>{1, 4, 1});
    reorderer<> def(o);
    reorder_options ol = o;
    ol.balance = balance_method::lpt;
    ol.order = order_method::paper;
    reorderer<> lpt(ol);
    reorderer<> single(one_module(256, 1, balance_method::refined, 0));
    reorderer<> single_lpt(one_module(256, 1, balance_method::lpt, 0));
    reorderer<> single_arr(one_module(256, 1, balance_method::none, 0));
    const auto batch1 = single_module(batch, 1);
    reorder_result res;
    const double t_def = cpu_per_call([&] { def.assign(batch, res); }, min_s);
    const double w_def = bench::time_per_call([&] { def.assign(batch, res); }, min_s);
    const double t_lpt = cpu_per_call([&] { lpt.assign(batch, res); }, min_s);
    const double t_one = cpu_per_call([&] { single.assign(batch1, res); }, min_s);
    const double t_one_lpt = cpu_per_call([&] { single_lpt.assign(batch1, res); }, min_s);
    const double t_one_arr = cpu_per_call([&] { single_arr.assign(batch1, res); }, min_s);
    speed.push_back({{"n", n},
                     {"default_cpu_s", t_def},
                     {"default_wall_s", w_def},
                     {"samples_per_cpu_s", static_cast<double>(n) / t_def},
                     {"lpt_paper_cpu_s", t_lpt},
                     {"default_over_lpt_paper", t_def / t_lpt},
                     {"one_module_dp256_cpu_s", t_one},
                     {"one_module_lpt_cpu_s", t_one_lpt},
                     {"one_module_arrival_cpu_s", t_one_arr}});
    if (!opt.json)
      fmt::print(
          "{:>6} | {:>8.3f}ms {:>11.3g} | {:>8.3f}ms {:>6.2f} | {:>7.3f}ms {:>7.3f}ms {:>7.3f}ms\n",
          n, t_def * 1e3, static_cast<double>(n) / t_def, t_lpt * 1e3, t_def / t_lpt, t_one * 1e3,
          t_one_lpt * 1e3, t_one_arr * 1e3);
  }
  out["speed"] = speed;

  // ---- 3. Iteration time ----------------------------------------------------
  nlohmann::json ord = nlohmann::json::array();
  if (!opt.json)
    fmt::print(
        "\nSimulated iteration time (exact 1F1B, stages encoder 1 + backbone 4 + generator 1; dp "
        "2/4/2)\n"
        "relative to the default (best of balanced / size-sorted slots, refined split, searched "
        "order);\n"
        "arrival: no reordering; random/slot-ord/paper: the default's slots in random/slot/paper "
        "order;\n"
        "lpt/kk: that split instead of refined; sorted/balanced: only that slot cut; ideal: "
        "uniform microbatches\n"
        "{:>11} {:>5} {:>3} | {:>7} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8} | {:>7} {:>9}\n",
        "data", "n", "m", "arrival", "random", "slot-ord", "paper", "lpt", "kk", "sorted",
        "balanced", "ideal", "default");
  std::vector<std::uint32_t> mbs =
      opt.quick ? std::vector<std::uint32_t>{8} : std::vector<std::uint32_t>{8, 16, 32};
  for (preset p : {preset::laion, preset::interleaved}) {
    for (std::uint32_t m : mbs) {
      const std::size_t n = static_cast<std::size_t>(m) * 64;
      const auto batch = metas(p, n, 3);
      reorder_options o;
      o.modules = {{"encoder", 2}, {"backbone", 4}, {"generator", 2}};
      o.microbatches = m;
      o.stages = chain_stages(std::vector<std::uint32_t>{1, 4, 1});
      auto run = [&](slot_policy s, balance_method b, order_method om) {
        reorder_options x = o;
        x.slots = s;
        x.balance = b;
        x.order = om;
        reorderer<> r(x);
        return r.assign(batch);
      };
      const auto def = run(slot_policy::best, balance_method::refined, order_method::search);
      const double t_bal =
          run(slot_policy::balanced, balance_method::refined, order_method::search).iteration_time;
      const double t_def = def.iteration_time;
      const double t_arr =
          run(slot_policy::arrival, balance_method::none, order_method::identity).iteration_time;
      const double t_slot =
          run(slot_policy::best, balance_method::refined, order_method::identity).iteration_time;
      const double t_paper =
          run(slot_policy::best, balance_method::refined, order_method::paper).iteration_time;
      const double t_lpt =
          run(slot_policy::best, balance_method::lpt, order_method::search).iteration_time;
      const double t_kk =
          run(slot_policy::best, balance_method::karmarkar_karp, order_method::search)
              .iteration_time;
      const double t_sorted =
          run(slot_policy::size_sorted, balance_method::refined, order_method::search)
              .iteration_time;
      const std::size_t S = o.stages.size();
      // Random orders of the default's microbatches: mean over 16 shuffles.
      std::vector<double> f(m * S), b(m * S), pf(m * S), pb(m * S);
      for (std::uint32_t j = 0; j < m; ++j)
        for (std::size_t s = 0; s < S; ++s) {
          const double t = def.slowest(o.stages[s].module, j);
          f[j * S + s] = o.stages[s].forward_scale * t;
          b[j * S + s] = o.stages[s].backward_scale * t;
        }
      std::vector<std::uint32_t> perm(m);
      for (std::uint32_t j = 0; j < m; ++j) perm[j] = j;
      std::mt19937_64 rng(4);
      pipeline_time eval;
      double t_rand = 0.0;
      for (int rep = 0; rep < 16; ++rep) {
        std::shuffle(perm.begin(), perm.end(), rng);
        for (std::uint32_t j = 0; j < m; ++j)
          for (std::size_t s = 0; s < S; ++s) {
            pf[j * S + s] = f[perm[j] * S + s];
            pb[j * S + s] = b[perm[j] * S + s];
          }
        t_rand += eval(microbatch_times{m, S, pf, pb}) / 16.0;
      }
      // Ideal: every microbatch and replica carries exactly the mean load.
      std::array<double, max_reorder_modules> total{};
      for (const auto& x : batch)
        for (std::size_t k = 0; k < 3; ++k) total[k] += x.cost[k];
      for (std::uint32_t j = 0; j < m; ++j)
        for (std::size_t s = 0; s < S; ++s) {
          const auto& st = o.stages[s];
          const double t = total[st.module] / (m * o.modules[st.module].dp);
          f[j * S + s] = st.forward_scale * t;
          b[j * S + s] = st.backward_scale * t;
        }
      const double t_ideal = eval(microbatch_times{m, S, f, b});
      ord.push_back({{"data", name_of(p)},
                     {"n", n},
                     {"microbatches", m},
                     {"default_s", t_def},
                     {"arrival_over_default", t_arr / t_def},
                     {"random_over_default", t_rand / t_def},
                     {"slot_order_over_default", t_slot / t_def},
                     {"paper_over_default", t_paper / t_def},
                     {"lpt_over_default", t_lpt / t_def},
                     {"kk_over_default", t_kk / t_def},
                     {"size_sorted_over_default", t_sorted / t_def},
                     {"balanced_over_default", t_bal / t_def},
                     {"ideal_over_default", t_ideal / t_def}});
      if (!opt.json)
        fmt::print(
            "{:>11} {:>5} {:>3} | {:>7.4f} {:>7.4f} {:>8.4f} {:>7.4f} {:>7.4f} {:>7.4f} {:>7.4f} "
            "{:>8.4f} | {:>7.4f} {:>8.3f}s\n",
            name_of(p), n, m, t_arr / t_def, t_rand / t_def, t_slot / t_def, t_paper / t_def,
            t_lpt / t_def, t_kk / t_def, t_sorted / t_def, t_bal / t_def, t_ideal / t_def, t_def);
    }
  }
  out["ordering"] = ord;
  if (opt.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
