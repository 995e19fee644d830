#pragma once
/// @file duration_model.hpp
/// @brief How the simulator learns what each op costs: the `duration_model`
/// concept and `table_durations`, a table-driven model for tests and quick studies.
///
/// The simulator asks per op, so a model can price every microbatch as it is
/// (unequal microbatches simulate as they are): `op.microbatch` identifies it,
/// `rank.segment/stage/replica` where it runs. A cost model from `cost/` or
/// measured tables plug in by providing these four members:
///
/// | member | called for | returns |
/// |---|---|---|
/// | `compute_time(rank, op)` | F, B, W, optimizer_step | seconds on the rank's compute stream |
/// | `transfer_time(src, dst, op)` | send_act, send_grad | seconds the message occupies link src->dst |
/// | `sync_time(rank, op)` | grad_sync_start | seconds of the bucket's DP reduction (asked of one member) |
/// | `activation_bytes(rank, op)` | F of a stage with a backward pass | bytes held until B (or W) |
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
#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief Requirements of a source of op durations for the simulator (see the file comment).
template <class D>
concept duration_model = requires(const D& d, const schedule_rank& r, const schedule_op& o) {
  { d.compute_time(r, o) } -> std::convertible_to<double>;
  { d.transfer_time(r, r, o) } -> std::convertible_to<double>;
  { d.sync_time(r, o) } -> std::convertible_to<double>;
  { d.activation_bytes(r, o) } -> std::convertible_to<double>;
};

/// @brief Durations from small tables: per pipeline stage (or one value for all
/// stages) times for F, B, W, scaled per microbatch.
///
/// A vector of size 1 applies to every stage; otherwise it needs one entry per
/// stage (for interleaved schedules the time of one chunk). `microbatch_scale`
/// (empty = all 1) multiplies compute, transfer and activation bytes of each
/// microbatch, e.g. to model a long-sequence straggler.
///
/// @snippet sim.cpp table_durations
struct table_durations {
  std::vector<double> forward{1.0};        ///< seconds of F per stage
  std::vector<double> backward{2.0};       ///< seconds of B per stage
  std::vector<double> weight{0.0};         ///< seconds of W per stage (split schedules)
  std::vector<double> activation{1.0};     ///< bytes held per microbatch per stage
  std::vector<double> microbatch_scale{};  ///< per microbatch factor (empty: 1)
  double transfer = 0.0;                   ///< seconds per point-to-point message
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

  [[nodiscard]] double compute_time(const schedule_rank&, const schedule_op& o) const {
    switch (o.kind) {
      case op_kind::forward: return at(forward, o.stage, "table_durations.forward") * scale(o);
      case op_kind::backward: return at(backward, o.stage, "table_durations.backward") * scale(o);
      case op_kind::weight: return at(weight, o.stage, "table_durations.weight") * scale(o);
      case op_kind::optimizer_step: return optimizer;
      default: return 0.0;
    }
  }
  [[nodiscard]] double transfer_time(const schedule_rank&, const schedule_rank&,
                                     const schedule_op& o) const {
    return transfer * scale(o);
  }
  [[nodiscard]] double sync_time(const schedule_rank&, const schedule_op&) const { return sync; }
  [[nodiscard]] double activation_bytes(const schedule_rank&, const schedule_op& o) const {
    return at(activation, o.stage, "table_durations.activation") * scale(o);
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

static_assert(duration_model<table_durations>);

}  // namespace disttrain
