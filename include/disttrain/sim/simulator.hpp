#pragma once
/// @file simulator.hpp
/// @brief Discrete-event simulation of one training iteration: of a schedule
/// (`simulate`, `simulator`) or of a bound world (`simulate_bound`), on one
/// engine.
///
/// Both compile to the one program the replay runs (schedule/detail/replay.hpp):
/// a schedule through `compile_schedule` (every static check of
/// `validate_schedule`), a bound world through `compile_bound` (the checks of
/// `validate_bound`). Durations come from one `duration_model`
/// (duration_model.hpp), asked per op of the bound program: a schedule is
/// asked as its trivial binding (schedule/bind_schedule.hpp; a rank is a
/// schedule rank, a TP group). Each rank has a compute stream that runs its
/// ops in order; each channel carries one message at a time in send order
/// (in a schedule the directed link between two schedule ranks, in a bound
/// world a GPU's NIC); sends overlap compute unless `sim_options::overlap_comm`
/// is false; a receive waits for its message; `grad_sync_finish` waits for
/// the bucket's collective, which starts once every member issued it (after
/// the group's previous one: a schedule's stage reduces its buckets one after
/// another; a bound world's buckets are each their own group).
///
/// The result (`sim_result`) is the same for both: every op's interval, the
/// iteration time, per rank busy / exposed / idle time and bubble fraction,
/// the critical path, and the activation bytes held at the peak (with an
/// `activation_model`).
///
/// Cost: building a `simulator` checks the schedule statically (O(n) for n
/// ops); each `run` is O(n) with no allocation once its buffers are sized, so
/// planners and reorderers can score many duration models (or microbatch
/// orders priced through them) against one schedule. `simulate_bound`
/// compiles in O(n log ranks).
///
/// @snippet sim.cpp simulator_file

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/bind_schedule.hpp"
#include "disttrain/schedule/detail/compiled.hpp"
#include "disttrain/schedule/detail/replay.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/schedule/validate_bound.hpp"  // compile_bound: the validator's compile
#include "disttrain/sim/duration_model.hpp"

namespace disttrain {

/// @brief Simulation switches.
///
/// @snippet sim.cpp sim_options
struct sim_options {
  bool overlap_comm = true;  ///< sends run on the link while the rank keeps computing
};

/// @brief Names one op of a schedule: `schedule.ops[rank][index]`.
struct op_ref {
  int rank = 0;
  std::size_t index = 0;
  friend bool operator==(const op_ref&, const op_ref&) = default;
};

/// @brief When an op ran: compute ops on the rank's stream; sends: the
/// transfer on its channel (from leaving, after the channel's earlier
/// messages, to arrival; the sender does not wait unless overlap is off);
/// receives: from reaching the op until the message was there;
/// grad_sync_start: the bucket's collective as this member sees it (start to
/// its own end); grad_sync_finish: the wait.
struct op_interval {
  double start = 0.0;
  double end = 0.0;
};

/// @brief Result of simulating one iteration (of a schedule or a bound world).
///
/// @snippet sim.cpp sim_result
struct sim_result {
  double iteration_time = 0.0;     ///< first op start (0) to the last op's end, seconds
  std::vector<op_interval> times;  ///< all ops, rank after rank (see `interval`)
  std::vector<std::size_t>
      rank_begin;                    ///< rank r's ops are times[rank_begin[r] .. rank_begin[r+1])
  std::vector<double> busy;          ///< per rank: seconds of compute (F, B, W, optimizer)
  std::vector<double> exposed_p2p;   ///< per rank: seconds blocked in receives
  std::vector<double> exposed_sync;  ///< per rank: seconds blocked in gradient-sync waits
  std::vector<double> finish;        ///< per rank: end of its last op other than a send
  std::vector<double> bubble_fraction;        ///< per rank: 1 - busy / iteration_time
  std::vector<double> peak_activation_bytes;  ///< per rank: activation bytes held at the peak
  std::vector<op_ref> critical_path;  ///< ops whose chain sets the iteration time, in time order

  [[nodiscard]] int world_size() const noexcept { return static_cast<int>(busy.size()); }
  /// @brief Interval of op `index` of `rank`'s program.
  [[nodiscard]] const op_interval& interval(int rank, std::size_t index) const {
    const auto r = static_cast<std::size_t>(rank);
    require(index < rank_begin.at(r + 1) - rank_begin.at(r), "sim_result.interval", "rank ", rank,
            " has no op #", index);
    return times[rank_begin[r] + index];
  }
  /// @brief Ops of `rank`'s program.
  [[nodiscard]] std::size_t num_ops(int rank) const {
    const auto r = static_cast<std::size_t>(rank);
    return rank_begin.at(r + 1) - rank_begin.at(r);
  }
  /// @brief Seconds `rank` spent blocked (receives and gradient-sync waits).
  [[nodiscard]] double exposed(int rank) const {
    const auto r = static_cast<std::size_t>(rank);
    return exposed_p2p.at(r) + exposed_sync.at(r);
  }
  /// @brief Seconds of the iteration after `rank`'s last op.
  [[nodiscard]] double idle(int rank) const {
    return iteration_time - finish.at(static_cast<std::size_t>(rank));
  }
  /// @brief busy / iteration_time of `rank`.
  [[nodiscard]] double busy_fraction(int rank) const {
    return iteration_time > 0.0 ? busy.at(static_cast<std::size_t>(rank)) / iteration_time : 0.0;
  }
  /// @brief Mean over ranks of `busy_fraction`.
  [[nodiscard]] double mean_busy_fraction() const {
    if (busy.empty()) return 0.0;
    double s = 0.0;
    for (int r = 0; r < world_size(); ++r) s += busy_fraction(r);
    return s / static_cast<double>(busy.size());
  }
  /// @brief Bubble fraction averaged over ranks.
  [[nodiscard]] double mean_bubble_fraction() const {
    if (bubble_fraction.empty()) return 0.0;
    double s = 0.0;
    for (double b : bubble_fraction) s += b;
    return s / static_cast<double>(bubble_fraction.size());
  }
  /// @brief Model FLOPs utilisation: `model_flops` (one iteration, all GPUs) /
  /// (`iteration_time` x `peak_flops_per_s`, the sum of every GPU's peak).
  [[nodiscard]] double mfu(double model_flops, double peak_flops_per_s) const {
    require_non_negative(model_flops, "mfu.model_flops");
    require_positive(peak_flops_per_s, "mfu.peak_flops_per_s");
    require_positive(iteration_time, "mfu.iteration_time");
    return model_flops / (iteration_time * peak_flops_per_s);
  }
  /// @brief Per pipeline stage: the largest peak activation bytes over its replicas.
  [[nodiscard]] std::vector<double> peak_activation_bytes_per_stage(
      const pipeline_schedule& s) const {
    std::vector<double> out(static_cast<std::size_t>(s.num_stages), 0.0);
    for (std::size_t r = 0; r < s.ranks.size() && r < peak_activation_bytes.size(); ++r) {
      auto& v = out[static_cast<std::size_t>(s.ranks[r].stage)];
      v = std::max(v, peak_activation_bytes[r]);
    }
    return out;
  }
};

namespace detail {

/// @brief Reusable buffers of one simulation (see `simulate_program`).
struct sim_buffers {
  replay_state replay;
  std::vector<double> held;  ///< per op of one rank: activation bytes its F keeps
};

/// @brief Simulates compiled program `c` into `res`: `op(r, k)` is op k of
/// rank r's bound program (of the bound world `c` was compiled from, or of
/// the schedule's trivial binding), `name(i)` names flat op i in errors, a
/// deadlock is reported at `deadlock_at` (empty: at the first blocked op).
/// O(n) for n ops; allocates nothing once `b` and `res` are sized.
template <duration_model D, class OpOf, class Name>
void simulate_program(const compiled_program& c, const OpOf& op, const D& d, const sim_options& opt,
                      sim_buffers& b, sim_result& res, const Name& name,
                      const std::string& deadlock_at = {}) {
  const std::size_t n = c.num_ops();
  const std::size_t R = c.num_ranks();
  const auto checked = [&](double v, std::size_t i) {
    if (!(v >= 0.0) || !std::isfinite(v))
      fail(errc::invalid_argument, name(i), "duration model returned ", v,
           " (must be finite and >= 0)");
    return v;
  };
  // Durations go to times[i].end, where the replay reads them (no separate table).
  res.times.resize(n);
  op_interval* const times = res.times.data();
  res.busy.assign(R, 0.0);
  for (std::size_t r = 0; r < R; ++r) {
    const int rank = static_cast<int>(r);
    double busy = 0.0;
    for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
      const auto& o = op(r, i - c.begin[r]);
      double v = 0.0;
      if (is_compute(o.op.kind)) {
        v = checked(static_cast<double>(d.compute(rank, o)), i);
        busy += v;
      } else if (is_send(o.op.kind)) {
        v = checked(static_cast<double>(d.transfer(rank, o.op.peer, o)), i);
      } else if (o.op.kind == op_kind::grad_sync_start) {
        v = checked(static_cast<double>(d.reduce(rank, o)), i);
      }
      times[i] = {0.0, v};
    }
    res.busy[r] = busy;
  }
  if (!replay(c, opt.overlap_comm, b.replay, times))
    report_deadlock(c, b.replay, deadlock_at, name);

  double t_end = 0.0;
  op_index last = no_op;
  res.rank_begin = c.begin;
  res.exposed_p2p.assign(R, 0.0);
  res.exposed_sync.assign(R, 0.0);
  res.finish.assign(R, 0.0);
  for (std::size_t r = 0; r < R; ++r) {
    double p2p = 0.0, sync = 0.0, fin = 0.0;
    for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
      const op_interval iv = times[i];
      if (iv.end > t_end || last == no_op) {
        t_end = std::max(t_end, iv.end);
        last = static_cast<op_index>(i);
      }
      const op_kind k = c.kind[i];
      if (is_recv(k))
        p2p += iv.end - iv.start;
      else if (k == op_kind::grad_sync_finish)
        sync += iv.end - iv.start;
      if (!is_send(k)) fin = std::max(fin, iv.end);
    }
    res.exposed_p2p[r] = p2p;
    res.exposed_sync[r] = sync;
    res.finish[r] = fin;
  }
  res.iteration_time = t_end;
  res.bubble_fraction.assign(R, 0.0);
  for (std::size_t r = 0; r < R; ++r)
    res.bubble_fraction[r] = t_end > 0.0 ? 1.0 - res.busy[r] / t_end : 0.0;

  // Critical path: follow each op's binding predecessor back from the last to finish.
  res.critical_path.clear();
  for (op_index i = last; i != no_op; i = b.replay.pred[i]) {
    const int r = c.rank_of[i];
    res.critical_path.push_back({r, i - c.begin[static_cast<std::size_t>(r)]});
    if (res.critical_path.size() > n)
      break;  // defensive: preds always point to earlier-finishing ops
  }
  std::reverse(res.critical_path.begin(), res.critical_path.end());

  // Activation memory in program order; an F and the B or W freeing its
  // activations are on one rank, so `held` is indexed by op within the rank.
  res.peak_activation_bytes.assign(R, 0.0);
  if constexpr (activation_model<D>) {
    for (std::size_t r = 0; r < R; ++r) {
      double cur = 0.0;
      double peak = 0.0;
      const std::size_t first = c.begin[r];
      b.held.resize(std::max(b.held.size(), c.begin[r + 1] - first));
      double* const held = b.held.data();
      for (std::size_t i = first; i < c.begin[r + 1]; ++i) {
        if (c.holds(i)) {
          const double bytes = checked(
              static_cast<double>(d.activation_bytes(static_cast<int>(r), op(r, i - first))), i);
          held[i - first] = bytes;
          cur += bytes;
          peak = std::max(peak, cur);
        }
        const op_index f = c.releases(i);
        if (f != no_op) cur -= held[f - first];
      }
      res.peak_activation_bytes[r] = peak;
    }
  }
}

}  // namespace detail

namespace detail {

/// @brief Simulates schedule `s` compiled into `c`, asking `d` about each op's
/// trivial binding `bind(op)` (schedule/bind_schedule.hpp).
template <duration_model D>
void simulate_schedule(const compiled_schedule& c, const op_lists& ops, const trivial_binding& bind,
                       const D& d, const sim_options& opt, sim_buffers& b, sim_result& res) {
  simulate_program(
      c, [&](std::size_t r, std::size_t k) { return bind.of_valid(ops[r][k]); }, d, opt, b, res,
      [&](std::size_t i) { return c.name_op(ops, i); });
}

}  // namespace detail

/// @brief A schedule validated once and simulated many times.
///
/// The constructor runs every static check of `validate_schedule` and throws
/// `schedule_error` on the first problem; a deadlock (which does not depend
/// on durations) is reported the same way by the first `run`. It keeps a
/// copy of the schedule's ops: the duration model is asked about each, as
/// its trivial binding (`bind_schedule`). `reset` validates another schedule
/// into the same storage, so scoring many candidate schedules allocates
/// nothing once the buffers are sized.
///
/// @snippet sim.cpp simulator
class simulator {
 public:
  explicit simulator(const pipeline_schedule& s)
      : c_(detail::compile_schedule(s)), ops_(s.ops), bind_(c_.meta) {}

  /// @brief Validates `s` and makes it the simulated schedule, reusing this
  /// simulator's storage. Throws `schedule_error` as the constructor does; the
  /// simulator then holds an empty schedule (no ranks, no ops).
  void reset(const pipeline_schedule& s) {
    try {
      detail::compile_schedule(s, c_);
      ops_ = s.ops;
      bind_.reset(c_.meta);
    } catch (...) {
      c_ = detail::compiled_schedule{};
      c_.begin = {0};
      c_.coll_begin = {0};
      ops_.clear();
      bind_.reset(c_.meta);
      throw;
    }
  }

  /// @brief The schedule's shape (segments, ranks; no ops).
  [[nodiscard]] const pipeline_schedule& meta() const noexcept { return c_.meta; }
  /// @brief Ops in the schedule.
  [[nodiscard]] std::size_t num_ops() const noexcept { return c_.num_ops(); }

  /// @brief Simulates one iteration with durations from `d`.
  /// Throws `invalid_argument` naming the op if `d` returns a negative or non-finite value.
  template <duration_model D>
  sim_result run(const D& d, const sim_options& opt = {}) {
    sim_result res;
    run(d, res, opt);
    return res;
  }

  /// @brief As `run`, reusing `res`'s storage.
  template <duration_model D>
  void run(const D& d, sim_result& res, const sim_options& opt = {}) {
    detail::simulate_schedule(c_, ops_, bind_, d, opt, buf_, res);
  }

 private:
  detail::compiled_schedule c_;
  detail::op_lists ops_;
  detail::trivial_binding bind_;  // reads c_.meta: declared after it
  detail::sim_buffers buf_;
};

/// @brief Validates `s` and simulates one iteration: the same checks and
/// result as `simulator(s).run(d, opt)`, without copying the ops.
template <duration_model D>
[[nodiscard]] sim_result simulate(const pipeline_schedule& s, const D& d,
                                  const sim_options& opt = {}) {
  const auto c = detail::compile_schedule(s);
  const detail::trivial_binding bind(s);
  detail::sim_buffers b;
  sim_result res;
  detail::simulate_schedule(c, s.ops, bind, d, opt, b, res);
  return res;
}

/// @brief Simulates one iteration of bound world `w` (schedule/bound_program.hpp:
/// the per-rank programs `bind_world` produces, every message with its real
/// peer and bytes) with durations from `d`: what is simulated is what the
/// executor runs. Throws `schedule_error` naming the op for a mismatched
/// message or a deadlock (as `validate_bound`; a deadlock at `bound_world`),
/// `invalid_argument` naming the op when `d` returns a negative or non-finite
/// value.
///
/// @snippet sim.cpp bound_simulator
template <duration_model D>
[[nodiscard]] sim_result simulate_bound(const bound_world& w, const D& d,
                                        const sim_options& opt = {}) {
  detail::compiled_program c;
  detail::compile_bound(w, c);
  detail::sim_buffers b;
  sim_result res;
  detail::simulate_program(
      c, [&](std::size_t r, std::size_t k) -> const bound_op& { return w.programs[r].ops[k]; }, d,
      opt, b, res, [&](std::size_t i) { return detail::name_bound_op(w, c, i); }, "bound_world");
  return res;
}

}  // namespace disttrain
