// Reorderer benchmark: speed (samples/s, time per global batch), balance
// quality (slowest replica / lower bound) for arrival order, LPT, KK and the
// refined default, and the iteration-time gain of microbatch ordering against
// arrival, random and the paper's rule, and (large DP) plain KK against the
// default: time and memory, and (end to end) the default against LPT, KK, the
// arrival cut + search and no reordering on four generated data shapes, and
// (limits) the cost of per-replica token and sample limits that bind, and
// (order) the microbatch order search against brute force / multi-start.
// Baselines run in the same process;
// figures are reported as ratios. --json prints one JSON object.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disttrain/bind/workload_cost.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/reorder.hpp"
#include "disttrain/reorder/json.hpp"
#include "harness.hpp"

using namespace disttrain;

// Bytes requested from the global operator new (the large-DP table reports
// what one cold partitioner call allocates: its peak, as it frees nothing).
namespace {
std::atomic<long long> g_new_bytes{0};
}  // namespace
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  g_new_bytes.fetch_add(static_cast<long long>(size), std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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

// ---- 4. Large DP: plain KK and the refined default, one module, 1 microbatch --
// Time per partitioner call (thread CPU), bytes a cold partitioner allocates
// in one call, and max load / lower bound. `--kk` runs only this table, so the
// process's peak RSS (printed) is this table's.
nlohmann::json large_dp(bool json, bool quick) {
  const double min_s = quick ? 0.02 : 0.3;
  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    fmt::print(
        "\nLarge DP: one partitioner call, backbone costs (laion), thread CPU time, bytes a cold "
        "partitioner allocates;\nbalance = max load / max(mean, largest); one module = "
        "reorderer (refined, 1 microbatch)\n{:>6} {:>5} | {:>10} {:>10} {:>7} | {:>10} {:>10} "
        "{:>7} | {:>10}\n",
        "n", "dp", "kk time", "kk bytes", "kk bal", "ref time", "ref bytes", "ref bal", "1 module");
  const std::pair<std::size_t, std::uint32_t> cases[] = {{1024, 256}, {4096, 256}, {16384, 1024}};
  for (const auto& [n, dp] : cases) {
    if (quick && n > 4096) continue;
    const auto batch = single_module(metas(preset::laion, n, 5), 1);
    std::vector<double> c(n);
    double total = 0.0, largest = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      c[i] = batch[i].cost[0];
      total += c[i];
      largest = std::max(largest, c[i]);
    }
    std::sort(c.begin(), c.end(), std::greater<>());  // ranked, as the reorderer hands them
    const double lower = std::max(total / dp, largest);
    std::vector<std::uint32_t> bin(n);
    const auto measure = [&](balance_method m, double& t, long long& bytes, double& bal) {
      {
        partitioner cold;
        const long long b0 = g_new_bytes.load();
        bal = cold.partition(c, dp, false, m, bin) / lower;
        bytes = g_new_bytes.load() - b0;
      }
      partitioner warm;
      t = cpu_per_call([&] { warm.partition(c, dp, false, m, bin); }, min_s);
    };
    double t_kk = 0, t_ref = 0, bal_kk = 0, bal_ref = 0;
    long long by_kk = 0, by_ref = 0;
    measure(balance_method::karmarkar_karp, t_kk, by_kk, bal_kk);
    measure(balance_method::refined, t_ref, by_ref, bal_ref);
    reorderer<> single(one_module(dp, 1, balance_method::refined, 0));
    reorder_result res;
    const double t_one = cpu_per_call([&] { single.assign(batch, res); }, min_s);
    rows.push_back({{"n", n},
                    {"dp", dp},
                    {"kk_cpu_s", t_kk},
                    {"kk_bytes", by_kk},
                    {"kk_balance", bal_kk},
                    {"refined_cpu_s", t_ref},
                    {"refined_bytes", by_ref},
                    {"refined_balance", bal_ref},
                    {"one_module_cpu_s", t_one}});
    if (!json)
      fmt::print(
          "{:>6} {:>5} | {:>8.3f}ms {:>9.2f}M {:>7.4f} | {:>8.3f}ms {:>9.2f}M {:>7.4f} | "
          "{:>8.3f}ms\n",
          n, dp, t_kk * 1e3, static_cast<double>(by_kk) / 1e6, bal_kk, t_ref * 1e3,
          static_cast<double>(by_ref) / 1e6, bal_ref, t_one * 1e3);
  }
  return rows;
}

// ---- 5. End to end on data shapes generated here (issue 16) ---------------
// Four shapes the shipped presets do not cover, per sample: text tokens t,
// input images / video frames of p patches each, maybe one generated image of
// L latent tokens. Module costs (seconds, scaled): encoder sum over frames of
// p + p^2 / 2048, backbone T + T^2 / 16384 with T = t + sum p / 4, generator L.
enum class shape { video_heavy, rare_huge, bimodal, long_tail_text };
const char* name_of(shape s) {
  switch (s) {
    case shape::video_heavy: return "video-heavy";
    case shape::rare_huge: return "rare-huge";
    case shape::bimodal: return "bimodal";
    case shape::long_tail_text: return "long-tail";
  }
  return "?";
}

std::vector<sample_meta> shaped(shape sh, std::size_t n, std::size_t modules, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::lognormal_distribution<double> text_len(6.5, 1.2);
  std::vector<sample_meta> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    double t = 0.0, frames = 0.0, p = 0.0, L = 0.0;
    switch (sh) {
      case shape::video_heavy:
        t = 64.0 + 256.0 * u(rng);
        if (u(rng) < 0.6) {  // a video: 8..64 frames of 256 patches
          frames = std::floor(8.0 + 57.0 * u(rng));
          p = 256.0;
        } else {  // one image of 256..1024 patches
          frames = 1.0;
          p = std::floor(256.0 + 769.0 * u(rng));
        }
        break;
      case shape::rare_huge:
        t = 100.0 + 200.0 * u(rng);
        frames = 1.0;
        p = u(rng) < 0.03 ? std::floor(4096.0 + 12289.0 * u(rng)) : 256.0;
        break;
      case shape::bimodal:
        if (u(rng) < 0.5) {
          t = 100.0 + 200.0 * u(rng);  // short, text only
        } else {
          t = 2000.0 + 2000.0 * u(rng);  // long interleaved document, 4..8 images
          frames = std::floor(4.0 + 5.0 * u(rng));
          p = 576.0;
        }
        break;
      case shape::long_tail_text: t = std::min(32768.0, std::floor(text_len(rng))); break;
    }
    if (u(rng) < 0.2) L = 1024.0 + 3072.0 * u(rng);
    const double T = t + frames * p / 4.0;
    const double enc = frames * (p + p * p / 2048.0), bb = T + T * T / 16384.0;
    out[i].id = i;
    if (modules == 1) {
      out[i].cost[0] = bb * 1e-4;
    } else {
      out[i].cost[0] = enc * 1e-4;
      out[i].cost[1] = bb * 1e-4;
      out[i].cost[2] = L * 1e-4;
    }
  }
  return out;
}

// Default, LPT and KK splits (the default's cut and order search), the arrival
// cut with the default split and order search, the order-independent `best`,
// and no reordering (arrival cut, arrival chunks, arrival order); modelled
// 1F1B time relative to the best of them, and balance = sum over microbatches
// of the backbone's slowest replica / sum of its lower bounds
// max(slot mean over dp, largest sample of the slot).
nlohmann::json end_to_end(bool json, bool quick) {
  struct method {
    const char* name;
    slot_policy slots;
    balance_method balance;
    order_method order;
  };
  const method methods[] = {
      {"default", slot_policy::objective, balance_method::refined, order_method::search},
      {"lpt", slot_policy::objective, balance_method::lpt, order_method::search},
      {"kk", slot_policy::objective, balance_method::karmarkar_karp, order_method::search},
      {"arrival+search", slot_policy::arrival, balance_method::refined, order_method::search},
      {"best (order-free)", slot_policy::best, balance_method::refined, order_method::search},
      {"nothing", slot_policy::arrival, balance_method::arrival, order_method::identity},
  };
  constexpr std::size_t M = std::size(methods);
  const std::vector<std::uint32_t> dps =
      quick ? std::vector<std::uint32_t>{2, 8} : std::vector<std::uint32_t>{2, 4, 8, 16, 32, 64};
  const std::vector<std::uint32_t> mbs =
      quick ? std::vector<std::uint32_t>{8} : std::vector<std::uint32_t>{8, 16, 32};
  const std::vector<std::size_t> per_replica{2, 8};  // samples per backbone replica per microbatch
  nlohmann::json rows = nlohmann::json::array();
  // Per (shape, modules): sums and maxima over the grid.
  struct agg {
    std::array<double, M> gap_sum{}, gap_max{}, bal_max{};
    std::array<int, M> at_best{};
    int n = 0, bal_n = 0, worse_arrival = 0, worse_nothing = 0;
    double bal_default_max8 = 0.0;
  };
  if (!json)
    fmt::print(
        "\nEnd to end (issue 16): modelled 1F1B time / best of the methods, mean (max) over dp "
        "{{2..64}} x microbatches {{8,16,32}} x {{2,8}} samples per backbone replica and "
        "microbatch;\n1 module: backbone only (4 stages, dp d); 3 modules: encoder d/2, backbone "
        "d, generator d/2 (stages 1+4+1)\n");
  std::vector<agg> all;
  for (shape sh : {shape::video_heavy, shape::rare_huge, shape::bimodal, shape::long_tail_text}) {
    for (std::size_t K : {std::size_t{1}, std::size_t{3}}) {
      agg a;
      for (std::uint32_t dp : dps) {
        for (std::uint32_t m : mbs) {
          for (std::size_t per : per_replica) {
            const std::size_t n = static_cast<std::size_t>(m) * dp * per;
            const auto batch = shaped(sh, n, K, 1000 * dp + 10 * m + per);
            reorder_options o;
            const std::uint32_t side = std::max(1u, dp / 2);
            if (K == 1) {
              o.modules = {{"backbone", dp}};
              o.stages = chain_stages(std::vector<std::uint32_t>{4});
            } else {
              o.modules = {{"encoder", side}, {"backbone", dp}, {"generator", side}};
              o.stages = chain_stages(std::vector<std::uint32_t>{1, 4, 1});
            }
            o.microbatches = m;
            const std::size_t bb = K == 1 ? 0 : 1;
            std::array<double, M> t{}, bal{};
            for (std::size_t x = 0; x < M; ++x) {
              reorder_options ox = o;
              ox.slots = methods[x].slots;
              ox.balance = methods[x].balance;
              ox.order = methods[x].order;
              reorderer<> r(ox);
              const auto res = r.assign(batch);
              t[x] = res.iteration_time;
              // Balance of the backbone against its per-slot lower bounds.
              double slow = 0.0, lower = 0.0;
              for (std::uint32_t j = 0; j < m; ++j) {
                double sum = 0.0, largest = 0.0;
                for (std::uint32_t rep = 0; rep < dp; ++rep) {
                  for (std::uint32_t idx : res.cell(bb, rep, j)) {
                    const double c = batch[res.samples[idx].id].cost[bb];
                    sum += c;
                    largest = std::max(largest, c);
                  }
                }
                slow += res.slowest(bb, j);
                lower += std::max(sum / dp, largest);
              }
              bal[x] = slow / lower;
            }
            const double best = *std::min_element(t.begin(), t.end());
            nlohmann::json row{{"shape", name_of(sh)}, {"modules", K}, {"dp", dp},
                               {"microbatches", m},    {"n", n},       {"best_s", best}};
            for (std::size_t x = 0; x < M; ++x) {
              const double g = t[x] / best;
              a.gap_sum[x] += g;
              a.gap_max[x] = std::max(a.gap_max[x], g);
              a.at_best[x] += g <= 1.0 + 1e-12 ? 1 : 0;
              a.bal_max[x] = per >= 8 ? std::max(a.bal_max[x], bal[x]) : a.bal_max[x];
              row[std::string(methods[x].name) + "_over_best"] = g;
              row[std::string(methods[x].name) + "_balance"] = bal[x];
            }
            a.worse_arrival += t[0] > t[3] ? 1 : 0;
            a.worse_nothing += t[0] > t[5] ? 1 : 0;
            ++a.n;
            rows.push_back(row);
          }
        }
      }
      if (!json) {
        if (all.empty()) {
          fmt::print("{:>11} {:>1} {:>4} |", "data", "K", "runs");
          for (const auto& me : methods) fmt::print(" {:>17}", me.name);
          fmt::print(" | {:>9} {:>9} | balance at >= 8/replica: default (worst of all)\n",
                     "def>arr+s", "def>none");
        }
        fmt::print("{:>11} {:>1} {:>4} |", name_of(sh), K, a.n);
        for (std::size_t x = 0; x < M; ++x)
          fmt::print(" {:>8.4f} ({:>6.4f})", a.gap_sum[x] / a.n, a.gap_max[x]);
        const double bal_all = *std::max_element(a.bal_max.begin(), a.bal_max.end());
        fmt::print(" | {:>9} {:>9} | {:.4f} ({:.4f})\n", a.worse_arrival, a.worse_nothing,
                   a.bal_max[0], bal_all);
      }
      all.push_back(a);
    }
  }
  if (!json) {
    agg tot;
    for (const agg& a : all) {
      for (std::size_t x = 0; x < M; ++x) {
        tot.gap_sum[x] += a.gap_sum[x];
        tot.gap_max[x] = std::max(tot.gap_max[x], a.gap_max[x]);
        tot.at_best[x] += a.at_best[x];
        tot.bal_max[x] = std::max(tot.bal_max[x], a.bal_max[x]);
      }
      tot.n += a.n;
      tot.worse_arrival += a.worse_arrival;
      tot.worse_nothing += a.worse_nothing;
    }
    fmt::print("{:>11} {:>1} {:>4} |", "all", "", tot.n);
    for (std::size_t x = 0; x < M; ++x)
      fmt::print(" {:>8.4f} ({:>6.4f})", tot.gap_sum[x] / tot.n, tot.gap_max[x]);
    fmt::print(" | {:>9} {:>9} | {:.4f}\n", tot.worse_arrival, tot.worse_nothing, tot.bal_max[0]);
    fmt::print("{:>18} |", "at the best");
    for (std::size_t x = 0; x < M; ++x) fmt::print(" {:>17}", tot.at_best[x]);
    fmt::print("\n");
  }
  return rows;
}

}  // namespace

// ---- 6. Per-replica limits ---------------------------------------------------
// The shipped data presets on the 7B-class MLLM's three modules (dp 4, 8, 4;
// 16 microbatches), tokens per module from the cost model's workload (image
// patches, backbone sequence, latent tokens). Baseline: the same batch
// without limits, in the same run. Limits: every module's max_tokens halfway
// from the unlimited plan's fullest cell to its mean cell, and the backbone's
// max_samples one below its fullest cell (at least its even share). Reported: time per assign (thread
// CPU) and modelled iteration time, limited / unlimited, and the fullest cell
// over its limit (<= 1: kept).
nlohmann::json limits_table(bool json, bool quick) {
  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    fmt::print(
        "\nPer-replica limits: limited / unlimited default (dp 4, 8, 4; 16 microbatches)\n"
        "{:>11} {:>6} | {:>9} {:>9} | {:>10} {:>10} | {:>6} {:>6} {:>6} {:>7}\n",
        "data", "n", "ms", "ratio", "iter", "ratio", "tok0", "tok1", "tok2", "count1");
  const std::vector<std::size_t> sizes =
      quick ? std::vector<std::size_t>{512} : std::vector<std::size_t>{1024, 4096};
  for (preset p : {preset::laion, preset::interleaved}) {
    for (std::size_t n : sizes) {
      data_sampler sampler(p == preset::laion ? presets::laion400m_like()
                                              : presets::interleaved_image_text());
      const auto samples = sampler.draw_batch(7 * 1000003, n);
      std::vector<sample_meta> batch;
      describe_batch(samples, workload_cost<analytic_cost_model>(cost_model_7b()), batch);
      for (std::size_t i = 0; i < n; ++i) {
        const model_workload w = workload_of(cost_model_7b().model(), samples[i]);
        for (std::size_t k = 0; k < 3; ++k)
          batch[i].tokens[k] = static_cast<std::uint32_t>(w[k].tokens);
      }
      reorder_options o;
      o.modules = {{"encoder", 4}, {"backbone", 8}, {"generator", 4}};
      o.microbatches = 16;
      o.stages = chain_stages(std::vector<std::uint32_t>{1, 4, 1});
      reorderer<> free_r(o);
      const reorder_result free_res = free_r.assign(batch);
      // Fullest and mean cell per module, largest sample: the limits.
      std::vector<const sample_meta*> by_id;
      for (const auto& x : batch) by_id.push_back(&x);
      std::sort(by_id.begin(), by_id.end(), [](auto* a, auto* b) { return a->id < b->id; });
      reorder_options lim = o;
      for (std::size_t k = 0; k < 3; ++k) {
        std::uint64_t peak = 0, total = 0, largest = 0;
        std::size_t count = 0;
        for (std::uint32_t j = 0; j < o.microbatches; ++j)
          for (std::uint32_t r = 0; r < o.modules[k].dp; ++r) {
            std::uint64_t t = 0;
            for (const std::uint32_t x : free_res.cell(k, r, j)) t += by_id[x]->tokens[k];
            peak = std::max(peak, t);
            count = std::max(count, free_res.cell(k, r, j).size());
          }
        for (const auto& x : batch) {
          total += x.tokens[k];
          largest = std::max<std::uint64_t>(largest, x.tokens[k]);
        }
        const std::uint64_t mean = total / (std::uint64_t{o.microbatches} * o.modules[k].dp);
        lim.modules[k].max_tokens = std::max(largest, (mean + peak) / 2);
        const std::size_t share = (n + o.microbatches - 1) / o.microbatches;  // largest microbatch
        const std::size_t floor_count = (share + o.modules[k].dp - 1) / o.modules[k].dp;
        if (k == 1)
          lim.modules[k].max_samples = static_cast<std::uint32_t>(std::max(floor_count, count - 1));
      }
      reorderer<> lim_r(lim);
      reorder_result lim_res;
      nlohmann::json row{{"data", name_of(p)}, {"n", n}};
      try {
        lim_r.assign(batch, lim_res);
      } catch (const error& e) {
        row["infeasible"] = e.what();
        rows.push_back(row);
        if (!json) fmt::print("{:>11} {:>6} | infeasible: {}\n", name_of(p), n, e.what());
        continue;
      }
      reorder_result scratch;
      const double t_free =
          cpu_per_call([&] { free_r.assign(batch, scratch); }, quick ? 0.02 : 0.3);
      const double t_lim = cpu_per_call([&] { lim_r.assign(batch, scratch); }, quick ? 0.02 : 0.3);
      std::array<double, 3> over{};
      std::size_t count1 = 0;
      for (std::size_t k = 0; k < 3; ++k)
        for (std::uint32_t j = 0; j < o.microbatches; ++j)
          for (std::uint32_t r = 0; r < o.modules[k].dp; ++r) {
            std::uint64_t t = 0;
            for (const std::uint32_t x : lim_res.cell(k, r, j)) t += by_id[x]->tokens[k];
            over[k] = std::max(
                over[k], static_cast<double>(t) / static_cast<double>(lim.modules[k].max_tokens));
            if (k == 1) count1 = std::max(count1, lim_res.cell(k, r, j).size());
          }
      const double count_over =
          static_cast<double>(count1) / static_cast<double>(lim.modules[1].max_samples);
      row.update({{"unlimited_ms", t_free * 1e3},
                  {"limited_ms", t_lim * 1e3},
                  {"time_ratio", t_lim / t_free},
                  {"iteration_ratio", lim_res.iteration_time / free_res.iteration_time},
                  {"fullest_over_max_tokens", over},
                  {"fullest_over_max_samples", count_over}});
      rows.push_back(row);
      if (!json)
        fmt::print(
            "{:>11} {:>6} | {:>9.3f} {:>9.2f} | {:>10.4f} {:>10.4f} | {:>6.3f} {:>6.3f} "
            "{:>6.3f} {:>7.3f}\n",
            name_of(p), n, t_lim * 1e3, t_lim / t_free, lim_res.iteration_time,
            lim_res.iteration_time / free_res.iteration_time, over[0], over[1], over[2],
            count_over);
    }
  }
  return rows;
}

// ---- 7. Time sweep (issue 41): no batch size the default stalls on ----------
// The default's wall time per call (best of 3) for every n = 16, 32, ... up to
// 4096 (quick: every 64th up to 512), on the four shapes above and i.i.d.
// lognormal costs, for two pipelines: encoder dp 2 -> backbone pp 4 dp 4 ->
// generator dp 2 over 16 microbatches (the layout the time cliff was found
// on), and dp 4 / 8 / 4 over 32. Baseline, same run: LPT split and the paper's
// order (no search). Reported: the worst default call and its ratio to the
// baseline's time on that batch.
nlohmann::json time_sweep(bool json, bool quick) {
  struct layout {
    std::uint32_t side, dp, m;
  };
  const layout layouts[] = {{2, 4, 16}, {4, 8, 32}};
  const std::size_t n_max = quick ? 512 : 4096, step = quick ? 64 : 16;
  const int reps = quick ? 1 : 3;
  const auto best_of = [&](reorderer<>& r, const std::vector<sample_meta>& batch,
                           reorder_result& res) {
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      r.assign(batch, res);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    fmt::print(
        "\nTime sweep: the default's wall time per call (best of {}), n = {}..{} step {};\n"
        "baseline: LPT split + paper order, same batch. Worst n per data shape and layout\n"
        "{:>11} {:>9} | {:>6} {:>9} {:>9} {:>6} | {:>9}\n",
        reps, step, n_max, step, "data", "layout", "n", "default", "baseline", "ratio", "median");
  double worst_all = 0.0;
  for (const layout& l : layouts) {
    reorder_options o;
    o.modules = {{"encoder", l.side}, {"backbone", l.dp}, {"generator", l.side}};
    o.microbatches = l.m;
    o.stages = chain_stages(std::vector<std::uint32_t>{1, 4, 1});
    reorder_options ob = o;
    ob.balance = balance_method::lpt;
    ob.order = order_method::paper;
    reorderer<> def(o), base(ob);
    reorder_result res;
    const std::string name = fmt::format("{}/{}/{} m{}", l.side, l.dp, l.side, l.m);
    for (int sh = 0; sh < 5; ++sh) {
      double worst = 0.0, worst_base = 0.0;
      std::size_t worst_n = 0;
      std::vector<double> all;
      for (std::size_t n = std::max<std::size_t>(step, l.m); n <= n_max; n += step) {
        std::vector<sample_meta> batch;
        if (sh < 4) {
          batch = shaped(static_cast<shape>(sh), n, 3, 7 * n + 1);
        } else {  // i.i.d. lognormal costs per module
          std::mt19937_64 rng(7 * n + 2);
          std::lognormal_distribution<double> ln(0.0, 1.0);
          batch.resize(n);
          for (std::size_t i = 0; i < n; ++i) {
            batch[i].id = i;
            for (std::size_t k = 0; k < 3; ++k) batch[i].cost[k] = ln(rng);
          }
        }
        const double t = best_of(def, batch, res);
        all.push_back(t);
        if (t > worst) {
          worst = t;
          worst_n = n;
          worst_base = best_of(base, batch, res);
        }
      }
      std::sort(all.begin(), all.end());
      const double median = all[all.size() / 2];
      const char* data = sh < 4 ? name_of(static_cast<shape>(sh)) : "lognormal";
      worst_all = std::max(worst_all, worst);
      rows.push_back({{"data", data},
                      {"layout", name},
                      {"worst_n", worst_n},
                      {"worst_default_s", worst},
                      {"baseline_s", worst_base},
                      {"default_over_baseline", worst / worst_base},
                      {"median_default_s", median}});
      if (!json)
        fmt::print("{:>11} {:>9} | {:>6} {:>7.2f}ms {:>7.2f}ms {:>6.1f} | {:>7.2f}ms\n", data, name,
                   worst_n, worst * 1e3, worst_base * 1e3, worst / worst_base, median * 1e3);
    }
  }
  if (!json) fmt::print("worst default call of the sweep: {:.2f} ms\n", worst_all * 1e3);
  return rows;
}

// ---- Order search quality (--order) ------------------------------------------
// The microbatch order search against a reference on generated microbatch
// times (four size shapes: log-normal, rare huge, bimodal, Pareto; per-stage
// profile and noise): brute force at m = 8, else the best of 20 descents from
// random orders (swaps + moves to a local optimum, written here independently
// of the library). Rows: the library's search with patience 0 and budget
// 4000 (one descent from the best seed: the previous algorithm and default)
// scored by copying rows (the previous evaluation path), and the default (iterated search, incremental
// scoring). Time per call, same process.
namespace order_bench {
void instance(std::mt19937_64& rng, int shape, std::size_t m, std::size_t S, std::vector<double>& f,
              std::vector<double>& b) {
  std::lognormal_distribution<double> ln(0.0, 0.7);
  std::uniform_real_distribution<double> prof(0.5, 1.5), noise(0.9, 1.1), u(0, 1);
  std::vector<double> p(S);
  for (auto& x : p) x = prof(rng);
  f.assign(m * S, 0);
  b.assign(m * S, 0);
  for (std::size_t j = 0; j < m; ++j) {
    double sz = 0;
    if (shape == 0)
      sz = ln(rng);
    else if (shape == 1)
      sz = u(rng) < 0.1 ? 5 + 5 * u(rng) : 0.5 + u(rng);
    else if (shape == 2)
      sz = u(rng) < 0.5 ? 1 + 0.2 * u(rng) : 3 + 0.5 * u(rng);
    else
      sz = std::pow(1 - u(rng), -1 / 1.5);
    for (std::size_t s = 0; s < S; ++s) {
      f[j * S + s] = sz * p[s] * noise(rng);
      b[j * S + s] = 2 * f[j * S + s] * noise(rng);
    }
  }
}
struct permuted {
  pipeline_time pt;
  std::vector<double> pf, pb;
  double operator()(const std::vector<double>& f, const std::vector<double>& b, std::size_t S,
                    const std::vector<std::uint32_t>& o) {
    const std::size_t m = o.size();
    pf.resize(m * S);
    pb.resize(m * S);
    for (std::size_t q = 0; q < m; ++q)
      for (std::size_t s = 0; s < S; ++s) {
        pf[q * S + s] = f[o[q] * S + s];
        pb[q * S + s] = b[o[q] * S + s];
      }
    return pt(microbatch_times{m, S, pf, pb});
  }
};
double reference(const std::vector<double>& f, const std::vector<double>& b, std::size_t m,
                 std::size_t S, double incumbent) {
  permuted E;
  std::vector<std::uint32_t> o(m);
  double best = incumbent;
  if (m <= 8) {
    std::iota(o.begin(), o.end(), 0u);
    do best = std::min(best, E(f, b, S, o));
    while (std::next_permutation(o.begin(), o.end()));
    return best;
  }
  std::mt19937_64 r(5);
  for (int start = 0; start < 20; ++start) {
    std::iota(o.begin(), o.end(), 0u);
    std::shuffle(o.begin(), o.end(), r);
    double cur = E(f, b, S, o);
    for (bool improved = true; improved;) {
      improved = false;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = i + 1; j < m; ++j) {
          std::swap(o[i], o[j]);
          const double v = E(f, b, S, o);
          if (v < cur * (1 - 1e-12)) {
            cur = v;
            improved = true;
          } else {
            std::swap(o[i], o[j]);
          }
        }
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < m; ++j) {
          if (j == i) continue;
          auto c = o;
          const auto x = c[i];
          c.erase(c.begin() + static_cast<std::ptrdiff_t>(i));
          c.insert(c.begin() + static_cast<std::ptrdiff_t>(j), x);
          const double v = E(f, b, S, c);
          if (v < cur * (1 - 1e-12)) {
            cur = v;
            o = c;
            improved = true;
          }
        }
    }
    best = std::min(best, cur);
  }
  return best;
}
}  // namespace order_bench

nlohmann::json order_quality(bool json, bool quick) {
  using namespace order_bench;
  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    fmt::print(
        "Order search: time / reference (brute force at m = 8, else best of 20 random-start "
        "descents);\n{} instances per row (4 shapes); previous = one descent, rows copied; "
        "default = iterated search, incremental\n{:>3} {:>2} | {:>9} {:>9} {:>9} | {:>9} {:>9} "
        "{:>9} | {:>6}\n",
        quick ? 4 : 24, "m", "S", "prev mean", "prev max", "prev us", "def mean", "def max",
        "def us", "speed");
  std::mt19937_64 rng(11);
  const auto ms = quick ? std::vector<std::size_t>{8, 16} : std::vector<std::size_t>{8, 16, 24, 32};
  const auto Ss = quick ? std::vector<std::size_t>{4} : std::vector<std::size_t>{2, 4, 8};
  for (std::size_t m : ms)
    for (std::size_t S : Ss) {
      double sum[2] = {0, 0}, worst[2] = {1, 1}, us[2] = {0, 0};
      int n = 0;
      for (int shape = 0; shape < 4; ++shape)
        for (int t = 0; t < (quick ? 1 : 6); ++t, ++n) {
          std::vector<double> f, b;
          instance(rng, shape, m, S, f, b);
          double got[2] = {0, 0};
          for (int k = 0; k < 2; ++k) {
            pipeline_time pt;
            auto copying = [&](const microbatch_times& x) { return pt(x); };
            microbatch_orderer ord;
            std::vector<std::uint32_t> perm(m);
            const auto t0 = std::chrono::steady_clock::now();
            if (k == 0) {  // the previous defaults: budget 4000, no restarts
              ord.budget = 4000;
              ord.patience = 0;
              got[k] = ord.order(microbatch_times{m, S, f, b}, copying, order_method::search, perm);
            } else {
              got[k] = ord.order(microbatch_times{m, S, f, b}, pt, order_method::search, perm);
            }
            us[k] +=
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count();
          }
          const double ref = reference(f, b, m, S, std::min(got[0], got[1]));
          for (int k = 0; k < 2; ++k) {
            sum[k] += got[k] / ref;
            worst[k] = std::max(worst[k], got[k] / ref);
          }
        }
      rows.push_back({{"m", m},
                      {"stages", S},
                      {"previous_mean", sum[0] / n},
                      {"previous_max", worst[0]},
                      {"previous_us", us[0] / n},
                      {"default_mean", sum[1] / n},
                      {"default_max", worst[1]},
                      {"default_us", us[1] / n}});
      if (!json)
        fmt::print(
            "{:>3} {:>2} | {:>9.4f} {:>9.4f} {:>9.0f} | {:>9.4f} {:>9.4f} {:>9.0f} | {:>5.2f}x\n",
            m, S, sum[0] / n, worst[0], us[0] / n, sum[1] / n, worst[1], us[1] / n, us[0] / us[1]);
    }
  return rows;
}

int main(int argc, char** argv) {
  // --kk: only the large-DP table (and the process's peak RSS).
  bool kk_only = false, e2e_only = false, speed_only = false, limits_only = false,
       order_only = false, sweep_only = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--kk") == 0)
      kk_only = true;
    else if (i > 0 && std::strcmp(argv[i], "--e2e") == 0)
      e2e_only = true;
    else if (i > 0 && std::strcmp(argv[i], "--speed") == 0)
      speed_only = true;
    else if (i > 0 && std::strcmp(argv[i], "--limits") == 0)
      limits_only = true;
    else if (i > 0 && std::strcmp(argv[i], "--order") == 0)
      order_only = true;
    else if (i > 0 && std::strcmp(argv[i], "--sweep") == 0)
      sweep_only = true;
    else
      args.push_back(argv[i]);
    if (i > 0 && (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0))
      std::printf(
          "extra options: --kk   run only the large-DP table (KK vs refined, peak RSS)\n"
          "               --e2e  run only the end-to-end table (four generated data shapes)\n"
          "               --speed  run only the speed table\n"
          "               --limits run only the per-replica limits table\n"
          "               --order  run only the order search table (vs brute force / "
          "multi-start)\n"
          "               --sweep  run only the time sweep (n in steps of 16 up to 4096)\n");
  }
  const auto opt = bench::parse_options(static_cast<int>(args.size()), args.data());
  nlohmann::json out;
  out["benchmark"] = "reorder";
  const double min_s = opt.quick ? 0.02 : 0.3;
  if (limits_only) {
    out["limits"] = limits_table(opt.json, opt.quick);
    if (opt.json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (sweep_only) {
    out["time_sweep"] = time_sweep(opt.json, opt.quick);
    if (opt.json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (order_only) {
    out["order_search"] = order_quality(opt.json, opt.quick);
    out["time_sweep"] = time_sweep(opt.json, opt.quick);
    if (opt.json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (e2e_only) {
    out["end_to_end"] = end_to_end(opt.json, opt.quick);
    if (opt.json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (kk_only) {
    out["large_dp"] = large_dp(opt.json, opt.quick);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    out["peak_rss_kib"] = ru.ru_maxrss;
    if (opt.json)
      std::printf("%s\n", out.dump(2).c_str());
    else
      fmt::print("peak RSS of the process: {:.1f} MB\n", static_cast<double>(ru.ru_maxrss) / 1024);
    return 0;
  }

  // ---- 1. Balance quality ---------------------------------------------------
  std::vector<std::size_t> sizes = speed_only  ? std::vector<std::size_t>{}
                                   : opt.quick ? std::vector<std::size_t>{512}
                                               : std::vector<std::size_t>{512, 2048, 8192, 16384};
  std::vector<std::uint32_t> dps =
      opt.quick ? std::vector<std::uint32_t>{8, 64} : std::vector<std::uint32_t>{8, 64, 256, 512};
  nlohmann::json bal = nlohmann::json::array();
  if (!opt.json && !speed_only)
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
        const double kk = balance_ratio(batch, dp, balance_method::karmarkar_karp);
        const double ref = balance_ratio(batch, dp, balance_method::refined);
        bal.push_back({{"data", name_of(p)},
                       {"n", n},
                       {"dp", dp},
                       {"arrival", arrival},
                       {"lpt", lpt},
                       {"kk", kk},
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
  if (speed_only) {
    if (opt.json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

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
      const auto def = run(slot_policy::objective, balance_method::refined, order_method::search);
      const double t_bal =
          run(slot_policy::balanced, balance_method::refined, order_method::search).iteration_time;
      const double t_def = def.iteration_time;
      const double t_arr =
          run(slot_policy::arrival, balance_method::none, order_method::identity).iteration_time;
      const double t_slot =
          run(slot_policy::objective, balance_method::refined, order_method::identity)
              .iteration_time;
      const double t_paper =
          run(slot_policy::objective, balance_method::refined, order_method::paper).iteration_time;
      const double t_lpt =
          run(slot_policy::objective, balance_method::lpt, order_method::search).iteration_time;
      const double t_kk =
          run(slot_policy::objective, balance_method::karmarkar_karp, order_method::search)
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
  out["large_dp"] = large_dp(opt.json, opt.quick);
  out["end_to_end"] = end_to_end(opt.json, opt.quick);
  out["limits"] = limits_table(opt.json, opt.quick);
  out["order_search"] = order_quality(opt.json, opt.quick);
  if (opt.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
