#pragma once
/// @file simulator.hpp
/// @brief Discrete-event simulation of one training iteration of a schedule.
///
/// Every schedule rank (each DP replica of each module's stages; a TP group is
/// one rank) has a compute stream that runs its ops in order; every directed
/// link (src, dst) is a channel carrying one message at a time in send order;
/// every DP group (the replicas of one stage) has a channel for its bucket
/// reductions. Sends overlap compute unless `sim_options::overlap_comm` is
/// false; a receive waits for its message; `grad_sync_finish` waits for the
/// bucket's collective, which starts once every replica has issued it.
/// Durations come from a `duration_model` per op and microbatch.
///
/// Cost: building a `simulator` checks the schedule statically (O(n) for n
/// ops); each `run` is O(n) with no allocation once its buffers are sized, so planners and reorderers can score many duration
/// models (or microbatch orders priced through them) against one schedule.
///
/// @snippet sim.cpp simulator_file

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/detail/compiled.hpp"
#include "disttrain/schedule/detail/replay.hpp"
#include "disttrain/schedule/schedule.hpp"
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

/// @brief When an op ran: compute ops on the rank's stream; sends: the transfer
/// on the link; receives: from reaching the op until the message was there;
/// grad_sync_start: the bucket's collective; grad_sync_finish: the wait.
struct op_interval {
  double start = 0.0;
  double end = 0.0;
};

/// @brief Result of simulating one iteration.
///
/// @snippet sim.cpp sim_result
struct sim_result {
  double iteration_time = 0.0;     ///< first op start (0) to the last op's end, seconds
  std::vector<op_interval> times;  ///< all ops, rank after rank (see `interval`)
  std::vector<std::size_t>
      rank_begin;            ///< rank r's ops are times[rank_begin[r] .. rank_begin[r+1])
  std::vector<double> busy;  ///< per rank: seconds of compute (F, B, W, optimizer)
  std::vector<double> bubble_fraction;        ///< per rank: 1 - busy / iteration_time
  std::vector<double> peak_activation_bytes;  ///< per rank: activation bytes held at the peak
  std::vector<op_ref> critical_path;  ///< ops whose chain sets the iteration time, in time order

  /// @brief Interval of `schedule.ops[rank][index]`.
  [[nodiscard]] const op_interval& interval(int rank, std::size_t index) const {
    return times.at(rank_begin.at(static_cast<std::size_t>(rank)) + index);
  }
  /// @brief busy / iteration_time of `rank`.
  [[nodiscard]] double busy_fraction(int rank) const {
    return iteration_time > 0.0 ? busy.at(static_cast<std::size_t>(rank)) / iteration_time : 0.0;
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

/// @brief Reusable buffers of one simulation (see `simulate_compiled`).
struct sim_buffers {
  replay_state replay;
  std::vector<double> held;  ///< per op of one rank: activation bytes its F keeps
};

[[noreturn]] inline void bad_duration(const compiled_schedule& c, const op_lists& ops,
                                      std::size_t i, double v) {
  fail(errc::invalid_argument, c.name_op(ops, i), "duration model returned ", v,
       " (must be finite and >= 0)");
}

/// @brief Simulates compiled schedule `c` (compiled from `ops`) into `res`.
/// O(n) for n ops; allocates nothing once `b` and `res` are sized.
template <duration_model D>
void simulate_compiled(const compiled_schedule& c, const op_lists& ops, const D& d,
                       const sim_options& opt, sim_buffers& b, sim_result& res) {
  const std::size_t n = c.num_ops();
  const std::size_t R = c.num_ranks();
  const auto& ranks = c.meta.ranks;
  // Durations go to times[i].end, where the replay reads them (no separate table).
  res.times.resize(n);
  op_interval* const times = res.times.data();
  res.busy.assign(R, 0.0);
  for (std::size_t r = 0; r < R; ++r) {
    const auto& info = ranks[r];
    double busy = 0.0;
    std::size_t i = c.begin[r];
    for (const auto& o : ops[r]) {
      double v = 0.0;
      if (is_compute(o.kind)) {
        v = static_cast<double>(d.compute_time(info, o));
        busy += v;
      } else if (is_send(o.kind)) {
        v = static_cast<double>(d.transfer_time(info, ranks[static_cast<std::size_t>(o.peer)], o));
      } else if (o.kind == op_kind::grad_sync_start) {
        v = static_cast<double>(d.sync_time(info, o));
      }
      if (!(v >= 0.0) || !std::isfinite(v)) bad_duration(c, ops, i, v);
      times[i++] = {0.0, v};
    }
    res.busy[r] = busy;
  }
  if (!replay(c, opt.overlap_comm, b.replay, times)) report_deadlock(c, ops, b.replay);

  double t_end = 0.0;
  op_index last = no_op;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = res.times[i].end;
    if (e > t_end || last == no_op) {
      t_end = std::max(t_end, e);
      last = static_cast<op_index>(i);
    }
  }
  res.iteration_time = t_end;
  res.rank_begin = c.begin;
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
  for (std::size_t r = 0; r < R; ++r) {
    double cur = 0.0;
    double peak = 0.0;
    const std::size_t first = c.begin[r];
    std::size_t i = first;
    b.held.resize(std::max(b.held.size(), ops[r].size()));
    double* const held = b.held.data();
    for (const auto& o : ops[r]) {
      if (c.holds(i)) {
        const double bytes = static_cast<double>(d.activation_bytes(ranks[r], o));
        if (!(bytes >= 0.0) || !std::isfinite(bytes)) bad_duration(c, ops, i, bytes);
        held[i - first] = bytes;
        cur += bytes;
        peak = std::max(peak, cur);
      }
      const op_index f = c.releases(i);
      if (f != no_op) cur -= held[f - first];
      ++i;
    }
    res.peak_activation_bytes[r] = peak;
  }
}

}  // namespace detail

/// @brief A schedule validated once and simulated many times.
///
/// The constructor runs every static check of `validate_schedule` and throws
/// `schedule_error` on the first problem; a deadlock (which does not depend
/// on durations) is reported the same way by the first `run`. It keeps a
/// copy of the schedule's ops (the duration model is asked about each).
/// `reset` validates another schedule into the same storage, so scoring many
/// candidate schedules allocates nothing once the buffers are sized.
///
/// @snippet sim.cpp simulator
class simulator {
 public:
  explicit simulator(const pipeline_schedule& s) : c_(detail::compile_schedule(s)), ops_(s.ops) {}

  /// @brief Validates `s` and makes it the simulated schedule, reusing this
  /// simulator's storage. Throws `schedule_error` as the constructor does; the
  /// simulator then holds an empty schedule (no ranks, no ops).
  void reset(const pipeline_schedule& s) {
    try {
      detail::compile_schedule(s, c_);
      ops_ = s.ops;
    } catch (...) {
      c_ = detail::compiled_schedule{};
      c_.begin = {0};
      c_.coll_begin = {0};
      ops_.clear();
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
    detail::simulate_compiled(c_, ops_, d, opt, buf_, res);
  }

 private:
  detail::compiled_schedule c_;
  detail::op_lists ops_;
  detail::sim_buffers buf_;
};

/// @brief Validates `s` and simulates one iteration: the same checks and
/// result as `simulator(s).run(d, opt)`, without copying the ops.
template <duration_model D>
[[nodiscard]] sim_result simulate(const pipeline_schedule& s, const D& d,
                                  const sim_options& opt = {}) {
  const auto c = detail::compile_schedule(s);
  detail::sim_buffers b;
  sim_result res;
  detail::simulate_compiled(c, s.ops, d, opt, b, res);
  return res;
}

}  // namespace disttrain
