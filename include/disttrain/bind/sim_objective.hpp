#pragma once
/// @file sim_objective.hpp
/// @brief `simulated_objective`: an `order_objective` that scores a microbatch
/// order with the discrete-event simulator (`sim/`) on any validated schedule
/// (1F1B, interleaved, zero-bubble, the multi-module chain, with communication
/// ops and DP replicas), instead of the built-in 1F1B/GPipe recurrence.
///
/// Durations: for an op of microbatch j on stage s (chunk c of v), F takes
/// `t.forward_at(j, s) / v`; B takes `t.backward_at(j, s) / v`, or
/// `(1 - weight_fraction)` of it when the schedule splits B and W, W the rest;
/// every point-to-point message takes `transfer_s`, every gradient bucket
/// `sync_s`, the optimizer `optimizer_s`. Every DP replica of a stage gets the
/// same times (the reorderer passes the slowest replica's load).
///
/// @snippet bind.cpp sim_objective_file

#include <cmath>
#include <cstddef>
#include <utility>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/pipeline_time.hpp"
#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/sim/duration_model.hpp"
#include "disttrain/sim/simulator.hpp"

namespace disttrain {

/// @brief What `simulated_objective` charges besides the microbatch times
/// (named fields: four adjacent doubles would be easy to swap).
struct simulated_objective_options {
  double weight_fraction =
      0.5;                   ///< share of backward time in W (schedules that split B/W), in [0, 1]
  double transfer_s = 0.0;   ///< seconds per activation / gradient message
  double sync_s = 0.0;       ///< seconds per gradient-bucket reduction
  double optimizer_s = 0.0;  ///< seconds of the optimizer step
};

/// @brief Scores orders by simulating one iteration of `schedule`; an
/// `order_objective`. Reuses the simulator's buffers (no allocation per call
/// after the first). Not thread-safe.
/// @snippet bind.cpp simulated_objective
class simulated_objective {
 public:
  /// @param schedule  validated by the simulator (throws `schedule_error`)
  /// @param o         the costs besides the microbatch times; each is checked
  ///                  (`invalid_argument` at `simulated_objective.<field>`)
  explicit simulated_objective(const pipeline_schedule& schedule,
                               const simulated_objective_options& o = {})
      : sim_(schedule) {
    require_in_range(o.weight_fraction, 0.0, 1.0, "simulated_objective.weight_fraction");
    const auto finite_non_negative = [](double v, const char* where) {
      if (!(std::isfinite(v) && v >= 0.0))
        fail(errc::invalid_argument, where, "must be finite and >= 0, got ", v);
    };
    finite_non_negative(o.transfer_s, "simulated_objective.transfer_s");
    finite_non_negative(o.sync_s, "simulated_objective.sync_s");
    finite_non_negative(o.optimizer_s, "simulated_objective.optimizer_s");
    bool split = false;
    for (const auto& rank_ops : schedule.ops)
      for (const auto& op : rank_ops) split = split || op.kind == op_kind::weight;
    d_.weight_fraction = split ? o.weight_fraction : 0.0;
    d_.chunks = static_cast<double>(schedule.num_chunks > 0 ? schedule.num_chunks : 1);
    d_.transfer_s = o.transfer_s;
    d_.sync = o.sync_s;
    d_.optimizer = o.optimizer_s;
  }

  /// @brief Iteration time of running the rows of `t` in order. Throws
  /// `errc::invalid_argument` at `simulated_objective` when `t`'s shape is not
  /// the schedule's (microbatches x stages).
  double operator()(const microbatch_times& t) {
    t.validate();
    const auto& meta = sim_.meta();
    if (t.microbatches != static_cast<std::size_t>(meta.num_microbatches) ||
        t.stages != static_cast<std::size_t>(meta.num_stages))
      fail(errc::invalid_argument, "simulated_objective", "times are ", t.microbatches,
           " microbatches x ", t.stages, " stages, the schedule has ", meta.num_microbatches, " x ",
           meta.num_stages);
    d_.t = &t;
    sim_.run(d_, res_);
    d_.t = nullptr;
    return res_.iteration_time;
  }

  /// @brief The last simulation (critical path, bubbles, ...).
  [[nodiscard]] const sim_result& last() const noexcept { return res_; }

 private:
  struct durations {
    const microbatch_times* t = nullptr;
    double weight_fraction = 0.0, chunks = 1.0, transfer_s = 0.0, sync = 0.0, optimizer = 0.0;

    [[nodiscard]] double compute(int, const bound_op& b) const {
      const schedule_op& o = b.op;
      if (o.kind == op_kind::optimizer_step) return optimizer;
      if (o.microbatch < 0) return 0.0;
      const auto j = static_cast<std::size_t>(o.microbatch), s = static_cast<std::size_t>(o.stage);
      switch (o.kind) {
        case op_kind::forward: return t->forward_at(j, s) / chunks;
        case op_kind::backward: return t->backward_at(j, s) * (1.0 - weight_fraction) / chunks;
        case op_kind::weight: return t->backward_at(j, s) * weight_fraction / chunks;
        default: return 0.0;
      }
    }
    [[nodiscard]] double transfer(int, int, const bound_op&) const { return transfer_s; }
    [[nodiscard]] double reduce(int, const bound_op&) const { return sync; }
  };
  static_assert(duration_model<durations>);

  simulator sim_;
  sim_result res_;
  durations d_;
};

static_assert(order_objective<simulated_objective>);

}  // namespace disttrain
