#pragma once
/// @file duration_model.hpp
/// @brief How the simulator learns what each op costs: the one
/// `duration_model` concept (schedules and bound worlds alike) and
/// `table_durations`, a table-driven model for tests and quick studies.
///
/// The simulator asks per op of a bound program (schedule/bound_program.hpp;
/// a schedule is simulated as its trivial binding, schedule/bind_schedule.hpp,
/// where a rank is a schedule rank), so a model can price every microbatch as
/// it is (unequal microbatches simulate as they are): `op.op.microbatch`
/// identifies it, `op.op.stage` / `op.op.chunk` the chain stage and chunk,
/// `rank` where it runs, and a message's `op.bytes` its size:
///
/// | member | called for | returns |
/// |---|---|---|
/// | `compute(rank, op)` | F, B, W, optimizer_step | seconds on the rank's compute stream |
/// | `transfer(src, dst, op)` | send_act, send_grad | seconds the message occupies its channel |
/// | `reduce(rank, op)` | grad_sync_start | seconds of the bucket's reduction for this member, after the last member joined |
/// | *optional* `activation_bytes(rank, op)` | F of a stage with a backward pass | bytes held until B (or W); without it no activation memory is reported |
///
/// B is the op's whole backward work unless the schedule splits it
/// (`split_backward`), in which case B is the activation-gradient part and W
/// the weight-gradient part.
///
/// @snippet sim.cpp duration_model

#include <concepts>
#include <cstddef>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/bound_program.hpp"

namespace disttrain {

/// @brief Requirements of a source of op durations for the simulator (see the file comment).
template <class D>
concept duration_model = requires(const D& d, int rank, const bound_op& op) {
  { d.compute(rank, op) } -> std::convertible_to<double>;
  { d.transfer(rank, rank, op) } -> std::convertible_to<double>;
  { d.reduce(rank, op) } -> std::convertible_to<double>;
};

/// @brief A `duration_model` that also prices activation memory (see the file comment).
template <class D>
concept activation_model = duration_model<D> && requires(const D& d, int rank, const bound_op& op) {
  { d.activation_bytes(rank, op) } -> std::convertible_to<double>;
};

/// @brief Durations from small tables: per pipeline stage (or one value for all
/// stages) times for F, B, W, scaled per microbatch.
///
/// A vector of size 1 applies to every stage; otherwise it needs one entry per
/// stage (for interleaved schedules the time of one chunk). `microbatch_scale`
/// (empty = all 1) multiplies compute, transfer and activation bytes of each
/// microbatch, e.g. to model a long-sequence straggler. A message costs
/// `transfer` seconds plus its bytes over `bytes_per_s` (0: bytes are free).
///
/// @snippet sim.cpp table_durations
struct table_durations {
  std::vector<double> forward{1.0};        ///< seconds of F per stage
  std::vector<double> backward{2.0};       ///< seconds of B per stage
  std::vector<double> weight{0.0};         ///< seconds of W per stage (split schedules)
  std::vector<double> activation{1.0};     ///< bytes held per microbatch per stage
  std::vector<double> microbatch_scale{};  ///< per microbatch factor (empty: 1)
  double transfer_s = 0.0;                 ///< seconds per point-to-point message
  double bytes_per_s = 0.0;                ///< link bandwidth for a message's bytes; 0: free
  double sync = 0.0;                       ///< seconds per gradient-bucket reduction
  double optimizer = 0.0;                  ///< seconds of the optimizer step

  /// @brief The same F, B (and W) time on every stage, free communication.
  [[nodiscard]] static table_durations uniform(double f, double b, double w = 0.0) {
    table_durations d;
    d.forward = {f};
    d.backward = {b};
    d.weight = {w};
    return d;
  }

  [[nodiscard]] double compute(int, const bound_op& b) const {
    const schedule_op& o = b.op;
    switch (o.kind) {
      case op_kind::forward: return at(forward, o.stage, "table_durations.forward") * scale(o);
      case op_kind::backward: return at(backward, o.stage, "table_durations.backward") * scale(o);
      case op_kind::weight: return at(weight, o.stage, "table_durations.weight") * scale(o);
      case op_kind::optimizer_step: return optimizer;
      default: return 0.0;
    }
  }
  [[nodiscard]] double transfer(int, int, const bound_op& b) const {
    const double bytes = bytes_per_s > 0.0 ? static_cast<double>(b.bytes) / bytes_per_s : 0.0;
    return (transfer_s + bytes) * scale(b.op);
  }
  [[nodiscard]] double reduce(int, const bound_op&) const { return sync; }
  [[nodiscard]] double activation_bytes(int, const bound_op& b) const {
    return at(activation, b.op.stage, "table_durations.activation") * scale(b.op);
  }

 private:
  static double at(const std::vector<double>& v, int stage, std::string_view where) {
    if (v.size() == 1) return v.front();
    if (stage < 0 || static_cast<std::size_t>(stage) >= v.size())
      fail(errc::invalid_argument, where, "has ", v.size(), " entries, no entry for stage ", stage,
           " (give one value for all stages or one per stage)");
    return v[static_cast<std::size_t>(stage)];
  }
  [[nodiscard]] double scale(const schedule_op& o) const {
    if (microbatch_scale.empty() || o.microbatch < 0) return 1.0;
    if (static_cast<std::size_t>(o.microbatch) >= microbatch_scale.size())
      fail(errc::invalid_argument, "table_durations.microbatch_scale", "has ",
           microbatch_scale.size(), " entries, no entry for microbatch ", o.microbatch);
    return microbatch_scale[static_cast<std::size_t>(o.microbatch)];
  }
};

static_assert(activation_model<table_durations>);

}  // namespace disttrain
