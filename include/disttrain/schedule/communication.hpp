#pragma once
/// @file communication.hpp
/// @brief Passes that turn a compute-only schedule into a runnable one:
/// `add_communication` (send/recv of activations and gradients) and
/// `add_grad_sync` (data-parallel gradient buckets and the optimizer step).
///
/// Generators emit only F/B/W; these passes derive every message from where
/// each (virtual stage, microbatch) runs, so no generator writes communication
/// by hand. Placement rules:
/// - a send follows the op that produced the tensor; a receive immediately
///   precedes the op that consumes it (the executor may post it earlier);
/// - a tensor moves only between different ranks (consecutive virtual stages
///   on one rank pass it locally);
/// - gradients are sent upstream only where the upstream stage runs a backward
///   pass (frozen leading modules get none).
///
/// @snippet schedule.cpp communication

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

namespace detail {

/// @brief Per virtual stage: runs a backward pass.
inline std::vector<char> backward_mask(const pipeline_schedule& s) {
  const int V = s.num_virtual_stages();
  std::vector<char> out(static_cast<std::size_t>(V), 0);
  bool any = false;
  for (int vs = 0; vs < V; ++vs) {
    any = any || s.stage_trainable(s.stage_chunk(vs).first);
    out[static_cast<std::size_t>(vs)] = any ? 1 : 0;
  }
  return out;
}

/// @brief Rank running F of (virtual stage, microbatch), -1 if none; throws on duplicates.
inline std::vector<int> forward_owners(const pipeline_schedule& s) {
  const std::size_t M = static_cast<std::size_t>(s.num_microbatches);
  std::vector<int> owner(static_cast<std::size_t>(s.num_virtual_stages()) * M, -1);
  for (std::size_t r = 0; r < s.ops.size(); ++r) {
    for (const auto& o : s.ops[r]) {
      if (o.kind != op_kind::forward) continue;
      auto& slot = owner[static_cast<std::size_t>(s.virtual_stage(o)) * M +
                         static_cast<std::size_t>(o.microbatch)];
      if (slot >= 0)
        fail(errc::schedule_error, s.rank_name(static_cast<int>(r)), describe(o), " also runs on ",
             s.rank_name(slot), ": every microbatch's F must run once per stage");
      slot = static_cast<int>(r);
    }
  }
  return owner;
}

}  // namespace detail

/// @brief Adds send/recv ops for every activation and gradient that crosses ranks.
///
/// The input must be compute-only (F/B/W, optionally grad sync and optimizer
/// ops); throws `schedule_error` if it already holds point-to-point ops or if
/// an F runs twice. Message identity: a send and its receive carry the
/// producing op's stage, chunk and microbatch.
[[nodiscard]] inline pipeline_schedule add_communication(pipeline_schedule s) {
  check_schedule_shape(s);
  for (std::size_t r = 0; r < s.ops.size(); ++r)
    for (const auto& o : s.ops[r])
      if (is_p2p(o.kind))
        fail(errc::schedule_error, s.rank_name(static_cast<int>(r)),
             "already has communication op ", describe(o),
             "; add_communication expects a compute-only schedule");
  const auto owner = detail::forward_owners(s);
  const auto back = detail::backward_mask(s);
  const int V = s.num_virtual_stages();
  const std::size_t M = static_cast<std::size_t>(s.num_microbatches);
  const auto owner_of = [&](int vs, int mb) {
    if (vs < 0 || vs >= V) return -1;
    return owner[static_cast<std::size_t>(vs) * M + static_cast<std::size_t>(mb)];
  };
  const auto at = [&](int vs) { return s.stage_chunk(vs); };
  for (std::size_t r = 0; r < s.ops.size(); ++r) {
    const int me = static_cast<int>(r);
    std::vector<schedule_op> out;
    out.reserve(s.ops[r].size() * 3);
    for (const auto& o : s.ops[r]) {
      const int vs =
          o.kind == op_kind::forward || o.kind == op_kind::backward ? s.virtual_stage(o) : -1;
      if (o.kind == op_kind::forward) {
        if (const int q = owner_of(vs - 1, o.microbatch); q >= 0 && q != me) {
          const auto [st, ch] = at(vs - 1);
          out.push_back(schedule_op::send(op_kind::recv_act, st, ch, o.microbatch, q));
        }
        out.push_back(o);
        if (const int q = owner_of(vs + 1, o.microbatch); q >= 0 && q != me)
          out.push_back(schedule_op::send(op_kind::send_act, o.stage, o.chunk, o.microbatch, q));
      } else if (o.kind == op_kind::backward) {
        if (const int q = owner_of(vs + 1, o.microbatch); q >= 0 && q != me) {
          const auto [st, ch] = at(vs + 1);
          out.push_back(schedule_op::send(op_kind::recv_grad, st, ch, o.microbatch, q));
        }
        out.push_back(o);
        if (vs > 0 && back[static_cast<std::size_t>(vs - 1)]) {
          if (const int q = owner_of(vs - 1, o.microbatch); q >= 0 && q != me)
            out.push_back(schedule_op::send(op_kind::send_grad, o.stage, o.chunk, o.microbatch, q));
        }
      } else {
        out.push_back(o);
      }
    }
    s.ops[r] = std::move(out);
  }
  return s;
}

/// @brief Adds data-parallel gradient synchronisation and the optimizer step.
///
/// On every rank of a trainable stage: after the last B (or W when split) of
/// chunk c, `grad_sync_start` of buckets `c*buckets_per_chunk ..
/// (c+1)*buckets_per_chunk-1` (after the sends that follow that op); at the end
/// `grad_sync_finish` of every bucket in start order and one `optimizer_step`.
/// The ranks of one stage across replicas form the DP group of each bucket.
/// Frozen stages get nothing. Throws if the schedule already has such ops.
[[nodiscard]] inline pipeline_schedule add_grad_sync(pipeline_schedule s,
                                                     int buckets_per_chunk = 1) {
  require_positive(buckets_per_chunk, "grad_sync.buckets_per_chunk");
  check_schedule_shape(s);
  for (std::size_t r = 0; r < s.ops.size(); ++r) {
    const int stage = s.ranks[r].stage;
    for (const auto& o : s.ops[r])
      if (o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish ||
          o.kind == op_kind::optimizer_step)
        fail(errc::schedule_error, s.rank_name(static_cast<int>(r)), "already has ", describe(o));
    if (!s.stage_trainable(stage)) continue;
    const op_kind last_kind = s.split_backward ? op_kind::weight : op_kind::backward;
    auto& ops = s.ops[r];
    const int chunks = s.chunks_of_stage(stage);
    std::vector<std::size_t> last(static_cast<std::size_t>(chunks), ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind == last_kind) last[static_cast<std::size_t>(ops[i].chunk)] = i;
    // Per position: the bucket starts placed after it; the finishes, which go
    // at the end in the order of their starts' positions.
    std::vector<std::vector<schedule_op>> after(ops.size()), finish(ops.size());
    std::size_t syncs = 0;
    for (int c = 0; c < chunks; ++c) {
      std::size_t i = last[static_cast<std::size_t>(c)];
      if (i == ops.size())
        fail(errc::schedule_error, cat(s.rank_name(static_cast<int>(r)), " chunk ", c), "has no ",
             to_string(last_kind), " op to start its gradient synchronisation after");
      while (i + 1 < ops.size() && is_send(ops[i + 1].kind) &&
             ops[i + 1].microbatch == ops[i].microbatch)
        ++i;
      for (int b = 0; b < buckets_per_chunk; ++b) {
        const int bucket = c * buckets_per_chunk + b;
        after[i].push_back(schedule_op::sync(op_kind::grad_sync_start, stage, c, bucket));
        finish[i].push_back(schedule_op::sync(op_kind::grad_sync_finish, stage, c, bucket));
        ++syncs;
      }
    }
    std::vector<schedule_op> out;
    out.reserve(ops.size() + 2 * syncs + 1);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      out.push_back(ops[i]);
      for (const schedule_op& o : after[i]) out.push_back(o);
    }
    for (const auto& at : finish)
      for (const schedule_op& o : at) out.push_back(o);
    out.push_back(schedule_op::step(stage));
    ops = std::move(out);
  }
  return s;
}

}  // namespace disttrain
