// Reorderer benchmark: speed (samples/s, time per global batch), balance
// quality (slowest replica / lower bound) for arrival order, LPT, KK and the
// refined default, and the iteration-time gain of microbatch ordering against
// arrival, random and the paper's rule. Baselines run in the same process;
// figures are reported as ratios. --json prints one JSON object.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disttrain/reorder.hpp"
#include "harness.hpp"

using namespace disttrain;

namespace {

// Synthetic shipped-style distributions (self-contained so this benchmark does
// not depend on model/): LAION-like image-text pairs with dynamic-resolution
// patches, and interleaved documents with several images.
enum class preset { laion, interleaved };
const char* name_of(preset p) { return p == preset::laion ? "laion-like" : "interleaved"; }

std::vector<multimodal_sample> draw(preset p, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> side(std::log(400.0), 0.5);
  std::uniform_real_distribution<double> aspect(0.5, 1.0), coin(0.0, 1.0);
  std::lognormal_distribution<double> caption(std::log(30.0), 0.6), doc(std::log(800.0), 0.7);
  std::poisson_distribution<int> images(2.5);
  std::vector<multimodal_sample> out(n);
  auto patches = [&]() {
    const double l = std::clamp(side(rng), 64.0, 1344.0);
    const double s = std::max(14.0, l * aspect(rng));
    return static_cast<std::uint32_t>(std::ceil(l / 14.0) * std::ceil(s / 14.0));
  };
  for (std::size_t i = 0; i < n; ++i) {
    auto& x = out[i];
    x.id = seed * 1000003 + i;
    const bool interleaved = p == preset::interleaved;
    x.text_tokens = static_cast<std::uint32_t>(std::max(1.0, interleaved ? doc(rng) : caption(rng)));
    const int k = interleaved ? images(rng) : 1;
    for (int j = 0; j < k; ++j) x.image_tokens.push_back(patches());
    if (coin(rng) < 0.3) x.generated_tokens.push_back(256);
  }
  return out;
}

// Seconds on an H800-class GPU at 40% of 989 TFLOP/s, forward + backward (3x forward):
// ViT-H/14 (0.63B, 32 layers, 1280 hidden), 8B backbone (32 x 4096), SD-2.1-class generator.
multimodal_cost paper_like_cost() {
  const double flops = 0.4 * 989e12 / 3.0;
  multimodal_cost c;
  c.encoder = {0.0, 2 * 0.63e9 / flops, 4.0 * 32 * 1280 / flops};
  c.backbone = {0.0, 2 * 8e9 / flops, 4.0 * 32 * 4096 / flops};
  c.generator = {2 * 0.87e9 * 4096 / flops, 0.0, 0.0};
  c.tokens_per_patch = 0.25;
  return c;
}

std::vector<sample_meta> metas(preset p, std::size_t n, std::uint64_t seed) {
  std::vector<sample_meta> m;
  describe_batch(draw(p, n, seed), paper_like_cost(), m);
  return m;
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
  std::vector<std::size_t> sizes = opt.quick ? std::vector<std::size_t>{512} : std::vector<std::size_t>{512, 2048, 8192, 16384};
  std::vector<std::uint32_t> dps = opt.quick ? std::vector<std::uint32_t>{8, 64} : std::vector<std::uint32_t>{8, 64, 256, 512};
  nlohmann::json bal = nlohmann::json::array();
  if (!opt.json) fmt::print("Balance: slowest replica / lower bound max(mean, largest), backbone costs, 1 microbatch\n"
                            "{:>12} {:>6} {:>5} {:>8} | {:>8} {:>8} {:>8} {:>8}\n",
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
        bal.push_back({{"data", name_of(p)}, {"n", n}, {"dp", dp}, {"arrival", arrival}, {"lpt", lpt},
                       {"kk", kk_ok ? nlohmann::json(kk) : nlohmann::json(nullptr)}, {"refined", ref}});
        if (!opt.json)
          fmt::print("{:>12} {:>6} {:>5} {:>8.1f} | {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f}\n", name_of(p), n, dp,
                     static_cast<double>(n) / dp, arrival, lpt, kk, ref);
      }
    }
  }
  out["balance"] = bal;

  // ---- 2. Speed --------------------------------------------------------------
  nlohmann::json speed = nlohmann::json::array();
  if (!opt.json) fmt::print("\nSpeed (one core): time per global batch; 3 modules dp 64/256/32, 8 microbatches, 1F1B over 1+4+1 stages\n"
                            "{:>6} | {:>10} {:>12} | {:>10} {:>9} | {:>10} {:>9}\n", "n", "default", "samples/s",
                            "lpt only", "ratio", "1 module", "(dp 256)");
  std::vector<std::size_t> speed_sizes = opt.quick ? std::vector<std::size_t>{1024} : std::vector<std::size_t>{1024, 4096, 16384, 65536};
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
    reorder_options o1 = one_module(256, 1, balance_method::refined, 0);
    reorderer<> single(o1);
    const auto batch1 = single_module(batch, 1);
    reorder_result res;
    const double t_def = bench::time_per_call([&] { def.assign(batch, res); }, min_s);
    const double t_lpt = bench::time_per_call([&] { lpt.assign(batch, res); }, min_s);
    const double t_one = bench::time_per_call([&] { single.assign(batch1, res); }, min_s);
    speed.push_back({{"n", n}, {"default_s", t_def}, {"samples_per_s", static_cast<double>(n) / t_def},
                     {"lpt_paper_s", t_lpt}, {"default_over_lpt", t_def / t_lpt}, {"one_module_dp256_s", t_one}});
    if (!opt.json)
      fmt::print("{:>6} | {:>8.3f}ms {:>12.3g} | {:>8.3f}ms {:>9.2f} | {:>8.3f}ms\n", n, t_def * 1e3,
                 static_cast<double>(n) / t_def, t_lpt * 1e3, t_def / t_lpt, t_one * 1e3);
  }
  out["speed"] = speed;

  // ---- 3. Iteration time ----------------------------------------------------
  nlohmann::json ord = nlohmann::json::array();
  if (!opt.json)
    fmt::print("\nSimulated iteration time (exact 1F1B, stages encoder 1 + backbone 4 + generator 1; dp 2/4/2)\n"
               "relative to the default (balanced slots, refined split, searched order); ideal = uniform microbatches\n"
               "{:>12} {:>5} {:>3} | {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>9}\n", "data", "n", "m",
               "arrival", "random", "slot-ord", "paper", "lpt", "kk", "sorted", "ideal", "default");
  std::vector<std::uint32_t> mbs = opt.quick ? std::vector<std::uint32_t>{8} : std::vector<std::uint32_t>{8, 16, 32};
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
      const auto def = run(slot_policy::balanced, balance_method::refined, order_method::search);
      const double t_def = def.iteration_time;
      const double t_arr = run(slot_policy::arrival, balance_method::none, order_method::identity).iteration_time;
      const double t_slot = run(slot_policy::balanced, balance_method::refined, order_method::identity).iteration_time;
      const double t_paper = run(slot_policy::balanced, balance_method::refined, order_method::paper).iteration_time;
      const double t_lpt = run(slot_policy::balanced, balance_method::lpt, order_method::search).iteration_time;
      const double t_kk = run(slot_policy::balanced, balance_method::karmarkar_karp, order_method::search).iteration_time;
      const double t_sorted = run(slot_policy::size_sorted, balance_method::refined, order_method::search).iteration_time;
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
      ord.push_back({{"data", name_of(p)}, {"n", n}, {"microbatches", m}, {"default_s", t_def},
                     {"arrival_over_default", t_arr / t_def}, {"random_over_default", t_rand / t_def},
                     {"slot_order_over_default", t_slot / t_def}, {"paper_over_default", t_paper / t_def},
                     {"lpt_over_default", t_lpt / t_def}, {"kk_over_default", t_kk / t_def},
                     {"size_sorted_over_default", t_sorted / t_def}, {"ideal_over_default", t_ideal / t_def}});
      if (!opt.json)
        fmt::print("{:>12} {:>5} {:>3} | {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} | {:>8.4f} {:>8.3f}s\n",
                   name_of(p), n, m, t_arr / t_def, t_rand / t_def, t_slot / t_def, t_paper / t_def, t_lpt / t_def,
                   t_kk / t_def, t_sorted / t_def, t_ideal / t_def, t_def);
    }
  }
  out["ordering"] = ord;
  if (opt.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
