// Simulator benchmark: one iteration of a 1296-GPU disaggregated plan
// (TP 8 -> 162 schedule ranks: encoder DP 6, backbone PP 8 x DP 18, generator
// DP 12) with 128 microbatches per backbone replica (2304 in all), unequal
// microbatch sizes, point-to-point transfers and gradient reductions.
// Measured: schedule generation (+ communication and grad-sync passes),
// validation (building the simulator, deadlock check included), one
// simulated iteration, ops per second, and the full path a planner pays to
// score one candidate schedule (validation + simulation): `simulate()` from
// scratch and `simulator::reset` + `run` reusing one simulator's storage.
// Baseline in the same run: a polling simulator (sweeps over all ranks, each
// executing its next op if ready, messages matched through a std::map; it does
// no validation), which must agree on the iteration time; the full path is
// reported as a ratio against it. Wall medians and process CPU times are both
// printed, with the 1-minute load average (the machine may be shared). Beside it: a plain 1F1B of one replica's chain with the same
// microbatch sizes, and the closed form (m-1)*max_s t_s + sum_s t_s at the mean size.
// --json prints one JSON object; --quick shrinks the plan for the ctest smoke test.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "disttrain/schedule.hpp"
#include "disttrain/schedule/json.hpp"
#include "disttrain/sim.hpp"
#include "disttrain/sim/trace.hpp"
#include "harness.hpp"

using namespace disttrain;

namespace {

struct plan_shape {
  int enc_dp, bb_pp, bb_dp, gen_dp, per_replica;
};

multi_module_spec make_spec(const plan_shape& p, const table_durations& d) {
  multi_module_spec spec;
  // Order ops with the same costs the plan is simulated with.
  spec.cost = [d](const schedule_rank&, const schedule_op& o) {
    const bound_op b{.op = o};
    return is_send(o.kind) ? d.transfer(0, 0, b) : d.compute(0, b);
  };
  spec.segments = {
      {.name = "encoder", .role = disttrain::module_role::encoder, .pp = 1, .dp = p.enc_dp},
      {.name = "backbone", .pp = p.bb_pp, .dp = p.bb_dp},
      {.name = "generator", .role = disttrain::module_role::generator, .pp = 1, .dp = p.gen_dp}};
  spec.num_microbatches = p.bb_dp * p.per_replica;
  return spec;
}

// Per-stage times (s) sized so every module keeps up with one backbone stage;
// microbatch sizes vary by a deterministic factor in [0.6, 1.6] from one
// microbatch slot to the next but are equal across the backbone replicas of a
// slot (the state after intra-microbatch balancing by the reorderer).
table_durations make_durations(const plan_shape& p) {
  table_durations d;
  const int S = p.bb_pp + 2;
  d.forward.assign(static_cast<std::size_t>(S), 0.050);
  d.backward.assign(static_cast<std::size_t>(S), 0.100);
  d.activation.assign(static_cast<std::size_t>(S), 2.0e9);
  const double enc_share =
      static_cast<double>(p.enc_dp) / p.bb_dp;  // encoder replica handles bb_dp/enc_dp times more
  const double gen_share = static_cast<double>(p.gen_dp) / p.bb_dp;
  d.forward.front() = 0.045 * enc_share;
  d.backward.front() = 0.090 * enc_share;
  d.forward.back() = 0.045 * gen_share;
  d.backward.back() = 0.090 * gen_share;
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int slot = 0; slot < p.per_replica; ++slot) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    for (int r = 0; r < p.bb_dp; ++r)
      d.microbatch_scale.push_back(0.6 + static_cast<double>(x % 1000) / 1000.0);
  }
  d.transfer_s = 0.002;
  d.sync = 0.25;
  d.optimizer = 0.03;
  return d;
}

// Baseline: polling simulation. Same semantics as the simulator, naive structure.
double polling_simulate(const pipeline_schedule& s, const table_durations& d) {
  const std::size_t R = s.ranks.size();
  using key = std::tuple<int, int, int, int, int, int>;  // src, dst, is_act, stage, chunk, mb
  std::map<key, double> arrived;                         // message -> arrival time
  std::map<std::pair<int, int>, double> link_free;
  std::map<std::pair<int, int>, std::pair<int, double>>
      coll;  // (stage, bucket) -> (issued, ready time)
  std::map<std::pair<int, int>, double> coll_end;
  std::map<int, double> group_free;
  std::vector<int> members(static_cast<std::size_t>(s.num_stages), 0);
  for (const auto& r : s.ranks) ++members[static_cast<std::size_t>(r.stage)];
  std::vector<std::size_t> pc(R, 0);
  std::vector<double> t(R, 0.0);
  double end = 0.0;
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t r = 0; r < R; ++r) {
      if (pc[r] >= s.ops[r].size()) continue;
      const auto& o = s.ops[r][pc[r]];
      const int me = static_cast<int>(r);
      if (is_compute(o.kind)) {
        t[r] += d.compute(me, bound_op{.op = o});
      } else if (is_send(o.kind)) {
        auto& f = link_free[{me, o.peer}];
        const double xs = std::max(f, t[r]);
        f = xs + d.transfer(me, o.peer, bound_op{.op = o});
        arrived[key{me, o.peer, o.kind == op_kind::send_act, o.stage, o.chunk, o.microbatch}] = f;
        end = std::max(end, f);
      } else if (is_recv(o.kind)) {
        auto it = arrived.find(
            key{o.peer, me, o.kind == op_kind::recv_act, o.stage, o.chunk, o.microbatch});
        if (it == arrived.end()) continue;  // not sent yet: poll again next sweep
        t[r] = std::max(t[r], it->second);
      } else if (o.kind == op_kind::grad_sync_start) {
        auto& c = coll[{o.stage, o.bucket}];
        c.second = std::max(c.second, t[r]);
        if (++c.first == members[static_cast<std::size_t>(o.stage)]) {
          auto& g = group_free[o.stage];
          const double cs = std::max(c.second, g);
          g = cs + d.reduce(me, bound_op{.op = o});
          coll_end[{o.stage, o.bucket}] = g;
          end = std::max(end, g);
        }
      } else {  // grad_sync_finish
        auto it = coll_end.find({o.stage, o.bucket});
        if (it == coll_end.end()) continue;
        t[r] = std::max(t[r], it->second);
      }
      end = std::max(end, t[r]);
      ++pc[r];
      progress = true;
    }
  }
  return end;
}

double ms_of(const std::function<void()>& fn, bool quick) {
  return 1e3 * bench::time_per_call(fn, quick ? 0.02 : 0.5, quick ? 3 : 5);
}

// Process CPU milliseconds per call (robust when the machine is shared).
double cpu_ms_of(const std::function<void()>& fn, int reps) {
  const std::clock_t c0 = std::clock();
  for (int i = 0; i < reps; ++i) fn();
  return 1e3 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = bench::parse_options(argc, argv);
  const plan_shape p = opt.quick ? plan_shape{2, 4, 3, 2, 16} : plan_shape{6, 8, 18, 12, 128};
  const int tp = 8;
  const int gpus = tp * (p.enc_dp + p.bb_pp * p.bb_dp + p.gen_dp);
  const auto d = make_durations(p);
  const auto spec = make_spec(p, d);

  pipeline_schedule s;
  const double gen_ms =
      ms_of([&] { s = add_grad_sync(add_communication(make_multi_module(spec))); }, opt.quick);
  const double validate_ms = ms_of(
      [&] {
        simulator v(s);
        bench::do_not_optimize(v.num_ops());
      },
      opt.quick);
  simulator sim(s);
  sim_result res;
  const double run_ms = ms_of(
      [&] {
        sim.run(d, res);
        bench::do_not_optimize(res.iteration_time);
      },
      opt.quick);
  const double simulate_ms = ms_of(
      [&] {
        auto r = simulate(s, d);
        bench::do_not_optimize(r.iteration_time);
      },
      opt.quick);
  simulator scorer(s);  // a planner's scorer: one simulator, reset per candidate schedule
  sim_result scored;
  const auto score = [&] {
    scorer.reset(s);
    scorer.run(d, scored);
    bench::do_not_optimize(scored.iteration_time);
  };
  const double reset_run_ms = ms_of(score, opt.quick);
  double base_time = 0.0;
  const double base_ms = ms_of([&] { base_time = polling_simulate(s, d); }, opt.quick);
  const int reps = opt.quick ? 3 : 30;
  const double simulate_cpu_ms = cpu_ms_of(
      [&] {
        auto r = simulate(s, d);
        bench::do_not_optimize(r.iteration_time);
      },
      reps);
  const double run_cpu_ms = cpu_ms_of(
      [&] {
        sim.run(d, res);
        bench::do_not_optimize(res.iteration_time);
      },
      reps);
  const double base_cpu_ms = cpu_ms_of([&] { base_time = polling_simulate(s, d); }, reps);
  const double reset_run_cpu_ms = cpu_ms_of(score, reps);
  const double load = bench::load_average();
  sim.run(d, res);
  const double ops = static_cast<double>(s.num_ops());
  const bool agree = std::abs(base_time - res.iteration_time) <= 1e-9 * res.iteration_time &&
                     scored.iteration_time == res.iteration_time;

  // 1F1B closed form over the chain (mean microbatch size), for reference.
  double mean_scale = 0.0;
  for (double x : d.microbatch_scale) mean_scale += x;
  mean_scale /= static_cast<double>(d.microbatch_scale.size());
  double sum_t = 0.0, max_t = 0.0;
  for (std::size_t k = 0; k < d.forward.size(); ++k) {
    const double t = (d.forward[k] + d.backward[k]) * mean_scale;
    sum_t += t;
    max_t = std::max(max_t, t);
  }
  const double closed = (p.per_replica - 1) * max_t + sum_t;
  // Reference: plain 1F1B over one replica's chain with the same per-slot sizes.
  table_durations d1 = d;
  d1.microbatch_scale.clear();
  for (int slot = 0; slot < p.per_replica; ++slot)
    d1.microbatch_scale.push_back(d.microbatch_scale[static_cast<std::size_t>(slot * p.bb_dp)]);
  const double ref_1f1b =
      simulate(add_communication(make_1f1b(p.bb_pp + 2, p.per_replica)), d1).iteration_time;

  if (opt.json) {
    nlohmann::json j{{"benchmark", "sim"},
                     {"gpus", gpus},
                     {"tp", tp},
                     {"ranks", s.ranks.size()},
                     {"microbatches", spec.num_microbatches},
                     {"microbatches_per_replica", p.per_replica},
                     {"ops", s.num_ops()},
                     {"generate_ms", gen_ms},
                     {"validate_ms", validate_ms},
                     {"run_ms", run_ms},
                     {"simulate_ms", simulate_ms},
                     {"run_cpu_ms", run_cpu_ms},
                     {"simulate_cpu_ms", simulate_cpu_ms},
                     {"baseline_polling_cpu_ms", base_cpu_ms},
                     {"ops_per_s", ops / (run_ms * 1e-3)},
                     {"baseline_polling_ms", base_ms},
                     {"speedup_run_vs_baseline", base_ms / run_ms},
                     {"speedup_simulate_vs_baseline", base_ms / simulate_ms},
                     {"full_path_ms", simulate_ms},
                     {"full_path_cpu_ms", simulate_cpu_ms},
                     {"reset_run_ms", reset_run_ms},
                     {"reset_run_cpu_ms", reset_run_cpu_ms},
                     {"speedup_full_path_vs_baseline", base_ms / simulate_ms},
                     {"speedup_full_path_vs_baseline_cpu", base_cpu_ms / simulate_cpu_ms},
                     {"load_average_1min", load},
                     {"iteration_time_s", res.iteration_time},
                     {"baseline_iteration_time_s", base_time},
                     {"agree", agree},
                     {"closed_form_1f1b_s", closed},
                     {"reference_1f1b_one_replica_s", ref_1f1b},
                     {"mean_bubble", res.mean_bubble_fraction()},
                     {"critical_path_ops", res.critical_path.size()}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print(
        "simulating one iteration: {} GPUs (TP {}), {} schedule ranks, {} microbatches ({} per "
        "backbone replica), {} ops\n",
        gpus, tp, s.ranks.size(), spec.num_microbatches, p.per_replica, s.num_ops());
    fmt::print("  {:<44} {:>10.3f} ms\n", "generate (multi-module + comm + grad sync)", gen_ms);
    fmt::print("  {:<44} {:>10.3f} ms\n", "validate (simulator construction)", validate_ms);
    fmt::print("  {:<44} {:>10.3f} ms   {:.3g} ops/s\n", "run one iteration (prepared)", run_ms,
               ops / (run_ms * 1e-3));
    fmt::print("  {:<44} {:>10.3f} ms\n", "full path: simulate() = validate + run", simulate_ms);
    fmt::print("  {:<44} {:>10.3f} ms\n", "full path, reused storage: reset() + run()",
               reset_run_ms);
    fmt::print("  {:<44} {:>10.3f} ms   x{:.1f} slower than run, x{:.1f} than the full path\n",
               "baseline: polling simulator (std::map)", base_ms, base_ms / run_ms,
               base_ms / simulate_ms);
    fmt::print(
        "  CPU time: simulate() {:.3f} ms, reset() + run() {:.3f} ms, run {:.3f} ms, baseline "
        "{:.3f} ms (x{:.1f})\n",
        simulate_cpu_ms, reset_run_cpu_ms, run_cpu_ms, base_cpu_ms, base_cpu_ms / simulate_cpu_ms);
    fmt::print("  1-minute load average {:.2f} (wall times grow with it; CPU times less)\n", load);
    fmt::print("  iteration time {:.4f} s (baseline {:.4f} s, {}), mean bubble {:.1f}%\n",
               res.iteration_time, base_time, agree ? "agree" : "DISAGREE",
               100.0 * res.mean_bubble_fraction());
    fmt::print(
        "  references: plain 1F1B of one replica's chain {:.4f} s; closed form at mean size {:.4f} "
        "s\n",
        ref_1f1b, closed);
  }
  return agree ? 0 : 1;
}
