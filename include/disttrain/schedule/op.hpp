#pragma once
/// @file op.hpp
/// @brief One operation of a pipeline schedule: compute (F, B, W), point-to-point
/// communication, data-parallel gradient synchronisation, optimizer step.
///
/// A schedule is, per pipeline rank, an ordered list of `schedule_op`s (see
/// schedule.hpp). The same value type is executed by the executor, scored by
/// the simulator and rewritten by the reorderer.
///
/// @snippet schedule.cpp op_file

#include <cstdint>
#include <string>
#include <string_view>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief What a schedule operation does.
///
/// `backward` is the activation-gradient pass; when the schedule splits the
/// backward pass (`pipeline_schedule::split_backward`) the weight-gradient work
/// is a separate `weight` op, otherwise `backward` does both. Communication
/// kinds carry the identity of the tensor they move (the producing stage,
/// chunk and microbatch) and the peer rank.
enum class op_kind : std::uint8_t {
  forward,           ///< F: forward pass of (stage, chunk, microbatch)
  backward,          ///< B: backward pass (activation gradient, plus weights unless split)
  weight,            ///< W: weight-gradient pass of a split backward
  send_act,          ///< send the activation produced by F(stage, chunk, microbatch) to `peer`
  recv_act,          ///< receive the activation produced by F(stage, chunk, microbatch) from `peer`
  send_grad,         ///< send the input gradient produced by B(stage, chunk, microbatch) to `peer`
  recv_grad,         ///< receive the gradient produced by B(stage, chunk, microbatch) from `peer`
  grad_sync_start,   ///< start the data-parallel reduction of gradient `bucket`
  grad_sync_finish,  ///< wait for the reduction of gradient `bucket`
  optimizer_step,    ///< apply the optimizer on this rank's parameters
};

/// @brief Number of `op_kind` values.
inline constexpr int num_op_kinds = 10;

/// @brief Short name of an op kind: "F", "B", "W", "send_act", ..., "optimizer_step".
constexpr std::string_view to_string(op_kind k) noexcept {
  switch (k) {
    case op_kind::forward: return "F";
    case op_kind::backward: return "B";
    case op_kind::weight: return "W";
    case op_kind::send_act: return "send_act";
    case op_kind::recv_act: return "recv_act";
    case op_kind::send_grad: return "send_grad";
    case op_kind::recv_grad: return "recv_grad";
    case op_kind::grad_sync_start: return "grad_sync_start";
    case op_kind::grad_sync_finish: return "grad_sync_finish";
    case op_kind::optimizer_step: return "optimizer_step";
  }
  return "?";
}

/// @brief Parses a name written by `to_string(op_kind)`; throws `parse_error` at `where`.
inline op_kind parse_op_kind(std::string_view name, std::string_view where) {
  for (int i = 0; i < num_op_kinds; ++i) {
    const auto k = static_cast<op_kind>(i);
    if (to_string(k) == name) return k;
  }
  fail(errc::parse_error, where, "unknown op kind '", name,
       "' (expected F, B, W, send_act, recv_act, send_grad, recv_grad, grad_sync_start, "
       "grad_sync_finish or optimizer_step)");
}

/// @brief True for F, B, W and the optimizer step (work on the compute stream).
constexpr bool is_compute(op_kind k) noexcept {
  return k == op_kind::forward || k == op_kind::backward || k == op_kind::weight ||
         k == op_kind::optimizer_step;
}
/// @brief True for F, B and W: a pass of one microbatch over one chunk.
constexpr bool is_pass(op_kind k) noexcept {
  return k == op_kind::forward || k == op_kind::backward || k == op_kind::weight;
}
/// @brief True for the four point-to-point kinds.
constexpr bool is_p2p(op_kind k) noexcept {
  return k == op_kind::send_act || k == op_kind::recv_act || k == op_kind::send_grad ||
         k == op_kind::recv_grad;
}
/// @brief True for send_act and send_grad.
constexpr bool is_send(op_kind k) noexcept {
  return k == op_kind::send_act || k == op_kind::send_grad;
}
/// @brief True for recv_act and recv_grad.
constexpr bool is_recv(op_kind k) noexcept {
  return k == op_kind::recv_act || k == op_kind::recv_grad;
}

/// @brief One operation of a pipeline rank's program.
///
/// - `stage`: the pipeline stage (rank position, 0-based) the op belongs to. For
///   point-to-point ops it is the stage of the op that *produced* the tensor
///   (so a send and its receive carry identical stage/chunk/microbatch).
/// - `chunk`: the virtual chunk (interleaved schedules; 0 otherwise). The
///   virtual stage is `chunk * num_stages + stage`.
/// - `microbatch`: the global microbatch id (-1 for grad sync and optimizer step).
/// - `peer`: the other rank of a point-to-point op (-1 otherwise).
/// - `bucket`: the gradient bucket of grad-sync ops (-1 otherwise).
///
/// @snippet schedule.cpp schedule_op
struct schedule_op {
  op_kind kind = op_kind::forward;
  int stage = 0;
  int chunk = 0;
  int microbatch = -1;
  int peer = -1;
  int bucket = -1;

  /// @brief F of (stage, chunk, microbatch).
  static constexpr schedule_op forward(int stage, int chunk, int mb) noexcept {
    return {op_kind::forward, stage, chunk, mb, -1, -1};
  }
  /// @brief B of (stage, chunk, microbatch).
  static constexpr schedule_op backward(int stage, int chunk, int mb) noexcept {
    return {op_kind::backward, stage, chunk, mb, -1, -1};
  }
  /// @brief W of (stage, chunk, microbatch).
  static constexpr schedule_op weight(int stage, int chunk, int mb) noexcept {
    return {op_kind::weight, stage, chunk, mb, -1, -1};
  }
  /// @brief A point-to-point op of `kind` moving the tensor of (stage, chunk, mb) to/from `peer`.
  static constexpr schedule_op send(op_kind kind, int stage, int chunk, int mb, int peer) noexcept {
    return {kind, stage, chunk, mb, peer, -1};
  }
  /// @brief grad_sync_start / grad_sync_finish of `bucket` on (stage, chunk).
  static constexpr schedule_op sync(op_kind kind, int stage, int chunk, int bucket) noexcept {
    return {kind, stage, chunk, -1, -1, bucket};
  }
  /// @brief The optimizer step of a rank holding `stage`.
  static constexpr schedule_op step(int stage) noexcept {
    return {op_kind::optimizer_step, stage, 0, -1, -1, -1};
  }

  friend constexpr bool operator==(const schedule_op&, const schedule_op&) = default;
};

/// @brief Human-readable label, e.g. "F(stage 1, chunk 0, mb 3)" or "send_act(stage 0, mb 2 -> rank 1)".
inline std::string describe(const schedule_op& o) {
  std::string s(to_string(o.kind));
  s += "(stage ";
  s += std::to_string(o.stage);
  if (o.chunk != 0) {
    s += ", chunk ";
    s += std::to_string(o.chunk);
  }
  if (o.microbatch >= 0) {
    s += ", mb ";
    s += std::to_string(o.microbatch);
  }
  if (is_send(o.kind)) {
    s += " -> rank ";
    s += std::to_string(o.peer);
  } else if (is_recv(o.kind)) {
    s += " <- rank ";
    s += std::to_string(o.peer);
  }
  if (o.bucket >= 0) {
    s += ", bucket ";
    s += std::to_string(o.bucket);
  }
  s += ')';
  return s;
}

}  // namespace disttrain
