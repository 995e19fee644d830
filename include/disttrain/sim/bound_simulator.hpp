#pragma once
/// @file bound_simulator.hpp
/// @brief Simulates one iteration of a bound world (schedule/bound_program.hpp):
/// the per-rank programs `bind_world` produces, with every message's real
/// peer and byte count, so what is simulated is what the executor runs.
///
/// It runs the one replay (schedule/detail/replay.hpp) on the world compiled
/// as `validate_bound` compiles it (schedule/detail/compile_bound.hpp), with
/// durations: each rank runs its ops in order on one compute stream; a
/// send is posted when reached and the rank goes on; a rank's messages leave
/// one at a time in program order (one NIC per GPU), each arriving
/// `transfer(src, dst, bytes)` seconds after it left; a receive waits for
/// its message; `grad_sync_finish` waits until every member of the DP group
/// joined the bucket plus the member's `reduce(rank, op)` seconds. Receivers
/// do not contend (a rank may receive from several peers at once). Durations
/// come from a `bound_duration_model`:
///
/// | member | called for | returns |
/// |---|---|---|
/// | `compute(rank, op)` | F, B, W, optimizer_step | seconds on the rank's stream |
/// | `transfer(src, dst, bytes)` | each send (per pair, its own bytes) | seconds until it arrives |
/// | `reduce(rank, op)` | each `grad_sync_start` | seconds of the bucket's reduction after the last member joined |
///
/// Per rank the result splits the iteration into `busy` (compute), `exposed`
/// (blocked in receives: `exposed_p2p`; in gradient-sync waits:
/// `exposed_sync`) and `idle` (after its last op). Cost: O(ops log ranks) to
/// compile, O(ops) to replay.
///
/// @snippet sim.cpp bound_simulator

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/validate_bound.hpp"  // compile_bound: the validator's compile
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

/// @brief Requirements of a source of durations for `simulate_bound` (see the file comment).
template <class D>
concept bound_duration_model = requires(const D& d, int rank, const bound_op& b,
                                        std::int64_t bytes) {
  { d.compute(rank, b) } -> std::convertible_to<double>;
  { d.transfer(rank, rank, bytes) } -> std::convertible_to<double>;
  { d.reduce(rank, b) } -> std::convertible_to<double>;
};

/// @brief The same durations everywhere, for tests and quick studies: F, B, W
/// per microbatch regardless of its samples, messages `latency_s + bytes /
/// bytes_per_s` (per pair, its own bytes), each bucket reduction `reduce_s`.
///
/// @snippet sim.cpp uniform_bound_durations
struct uniform_bound_durations {
  double forward = 1.0;      ///< seconds of F
  double backward = 2.0;     ///< seconds of B
  double weight = 0.0;       ///< seconds of W (split schedules)
  double optimizer = 0.0;    ///< seconds of the optimizer step
  double latency_s = 0.0;    ///< seconds per message
  double bytes_per_s = 0.0;  ///< link bandwidth; 0: bytes are free
  double reduce_s = 0.0;     ///< seconds per gradient-bucket reduction

  [[nodiscard]] double compute(int, const bound_op& b) const {
    switch (b.op.kind) {
      case op_kind::forward: return forward;
      case op_kind::backward: return backward;
      case op_kind::weight: return weight;
      case op_kind::optimizer_step: return optimizer;
      default: return 0.0;
    }
  }
  [[nodiscard]] double transfer(int, int, std::int64_t bytes) const {
    return latency_s + (bytes_per_s > 0.0 ? static_cast<double>(bytes) / bytes_per_s : 0.0);
  }
  [[nodiscard]] double reduce(int, const bound_op&) const { return reduce_s; }
};
static_assert(bound_duration_model<uniform_bound_durations>);

/// @brief One simulated iteration of a bound world.
///
/// Intervals (`times[rank][op]`, seconds from the iteration start): compute
/// ops on the rank's stream; a send from leaving (after the rank's earlier
/// messages; the sender does not wait) to arrival; a receive from reaching it to its message's arrival;
/// `grad_sync_start` the bucket's reduction (last member joined to reduced);
/// `grad_sync_finish` the rank's wait for it.
///
/// @snippet sim.cpp bound_sim_result
struct bound_sim_result {
  double iteration_time = 0.0;                  ///< start (0) to the last op's end, seconds
  std::vector<std::vector<op_interval>> times;  ///< per rank, per op of its program
  std::vector<double> busy;                     ///< per rank: seconds of F, B, W, optimizer
  std::vector<double> exposed_p2p;              ///< per rank: seconds blocked in receives
  std::vector<double> exposed_sync;  ///< per rank: seconds blocked in gradient-sync waits
  std::vector<double> finish;        ///< per rank: end of its last op

  [[nodiscard]] int world_size() const noexcept { return static_cast<int>(times.size()); }
  /// @brief Interval of op `index` of `rank`'s program.
  [[nodiscard]] const op_interval& interval(int rank, std::size_t index) const {
    return times.at(static_cast<std::size_t>(rank)).at(index);
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
};

namespace detail {

// Asks `d` and checks every answer is finite and >= 0, naming the op.
template <bound_duration_model D>
struct checked_bound_durations {
  const bound_world& w;
  const D& d;

  static double check(double v, const bound_world& w, int rank, const bound_op& b) {
    if (!(v >= 0.0) || !std::isfinite(v)) {
      const auto& ops = w.programs[static_cast<std::size_t>(rank)].ops;
      fail(errc::invalid_argument, describe(w, rank, static_cast<std::size_t>(&b - ops.data())),
           "duration model returned ", v, " (must be finite and >= 0)");
    }
    return v;
  }
  [[nodiscard]] double compute(int rank, const bound_op& b) const {
    return check(static_cast<double>(d.compute(rank, b)), w, rank, b);
  }
  [[nodiscard]] double reduce(int rank, const bound_op& b) const {
    return check(static_cast<double>(d.reduce(rank, b)), w, rank, b);
  }
  [[nodiscard]] double transfer(int src, int dst, std::int64_t bytes) const {
    const auto v = static_cast<double>(d.transfer(src, dst, bytes));
    if (!(v >= 0.0) || !std::isfinite(v))
      fail(errc::invalid_argument,
           cat("simulate_bound.transfer(", src, " -> ", dst, ", ", bytes, " B)"),
           "duration model returned ", v, " (must be finite and >= 0)");
    return v;
  }
};

}  // namespace detail

/// @brief Simulates one iteration of `w` with durations from `d` (see the
/// file comment). Throws `schedule_error` naming the op for a mismatched
/// message or a deadlock (as `validate_bound`), `invalid_argument` naming the
/// op when `d` returns a negative or non-finite value.
template <bound_duration_model D>
[[nodiscard]] bound_sim_result simulate_bound(const bound_world& w, const D& d) {
  const detail::checked_bound_durations<D> cd{w, d};
  detail::compiled_program c;
  detail::compile_bound(w, c);
  const std::size_t R = w.programs.size();
  std::vector<op_interval> flat(c.num_ops());  // durations in .end, then intervals
  for (std::size_t r = 0; r < R; ++r) {
    const bound_program& p = w.programs[r];
    const int me = static_cast<int>(r);
    for (std::size_t k = 0; k < p.ops.size(); ++k) {
      const bound_op& b = p.ops[k];
      double v = 0.0;
      if (is_compute(b.op.kind))
        v = cd.compute(me, b);
      else if (is_send(b.op.kind))
        v = cd.transfer(me, b.op.peer, b.bytes);
      else if (b.op.kind == op_kind::grad_sync_start)
        v = cd.reduce(me, b);
      flat[c.begin[r] + k] = {0.0, v};
    }
  }
  detail::replay_state st;
  if (!detail::replay(c, true, st, flat.data()))
    detail::report_deadlock(c, st, "bound_world",
                            [&](std::size_t i) { return detail::name_bound_op(w, c, i); });
  bound_sim_result res;
  res.times.resize(R);
  res.busy.assign(R, 0.0);
  res.exposed_p2p.assign(R, 0.0);
  res.exposed_sync.assign(R, 0.0);
  res.finish.assign(R, 0.0);
  for (std::size_t r = 0; r < R; ++r) {
    res.times[r].assign(flat.begin() + static_cast<std::ptrdiff_t>(c.begin[r]),
                        flat.begin() + static_cast<std::ptrdiff_t>(c.begin[r + 1]));
    for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
      const op_interval& iv = flat[i];
      const double len = iv.end - iv.start;
      if (is_compute(c.kind[i]))
        res.busy[r] += len;
      else if (is_recv(c.kind[i]))
        res.exposed_p2p[r] += len;
      else if (c.kind[i] == op_kind::grad_sync_finish)
        res.exposed_sync[r] += len;
      if (!is_send(c.kind[i])) res.finish[r] = std::max(res.finish[r], iv.end);
      res.iteration_time = std::max(res.iteration_time, iv.end);
    }
  }
  return res;
}

}  // namespace disttrain
