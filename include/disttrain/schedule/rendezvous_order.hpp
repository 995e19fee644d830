#pragma once
/// @file rendezvous_order.hpp
/// @brief Puts a bound program's point-to-point ops in an order that cannot
/// deadlock where a send waits for its receive (NCCL): `message_rounds` of the
/// chain schedule, then `order_for_rendezvous` of each rank's program.
///
/// Bind places each receive just before the op that reads it and each send
/// just after the op that produces it. Where sends are buffered (MPI, gloo)
/// that order runs; where a send waits for its receive, two ranks that each
/// send to the other before receiving deadlock, as interleaved 1F1B's
/// stage 0 and stage 1 do in the steady state (chunk 1's output goes down
/// while chunk 0's output comes back up the wrap-around link).
///
/// The fix is a logical clock. Replay the chain schedule with every compute
/// op taking one unit and messages none (the replay is that of the
/// simulator): F, B, W of (stage, chunk, microbatch) get integer start times,
/// and each message gets a *round*, the start time of the op that reads it
/// (any time between its producer's end and that start would do; the latest
/// pairs each send with the receives its rank waits for anyway, as
/// Megatron-LM's `send_forward_recv_backward` does, instead of making a
/// receiver wait for a message before compute it could run first). Every
/// rank then issues a message in its round, on both sides: the receiver just
/// before the op that reads it (as bound), the sender later than bound, at
/// the same round. A TP fan-out forwards what arrived in round t in round
/// t + 1/8. Each rank's ops are sorted by (time, kind): a round's messages
/// come after the compute ops that end by it and before those that start at
/// it or later; `grad_sync_start` stays after its compute op,
/// `grad_sync_finish` and `optimizer_step` move as late as the next compute
/// op (a finish does not hold back the pipeline's last gradients). Sends to
/// and receives from one peer keep their relative order (the sort is stable
/// and the keys of a message are the same on both sides), so messages still
/// match in program order.
///
/// Why it cannot deadlock: the replicas of a stage have the chain's unit
/// timing, so every message's send and receive are in the same round on both
/// sides, and with `p2p_batches` (maximal runs of point-to-point ops) every
/// rank issues its rounds in increasing order, each round's ops as one batch
/// or several consecutive ones with no compute between. By induction on the
/// round, every batch of round t is issued once those of earlier rounds
/// complete, and then completes. `validate_bound(w,
/// p2p_semantics::rendezvous)` checks it on the result.
///
/// @snippet schedule.cpp rendezvous_order

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/detail/compiled.hpp"
#include "disttrain/schedule/detail/replay.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief Unit-time start of every compute op of a chain schedule (see the
/// file comment), by (kind, chain stage, chunk, microbatch).
class message_rounds {
 public:
  /// @brief Replays `chain` (one rank per stage, as `chain_program` builds it).
  explicit message_rounds(const pipeline_schedule& chain)
      : stages_(chain.num_stages), chunks_(chain.num_chunks), mbs_(chain.num_microbatches) {
    // The chain as bound carries no messages: add them (zero time) to replay it.
    const pipeline_schedule run = add_communication(chain);
    const detail::compiled_schedule c = detail::compile_schedule(run);
    std::vector<detail::interval> t(c.num_ops());
    for (std::size_t i = 0; i < t.size(); ++i) t[i].end = is_pass(c.kind[i]) ? 1.0 : 0.0;
    detail::replay_state st;
    ensure(detail::replay(c, true, st, t.data()), "message_rounds",
           "the chain schedule deadlocks (validate_schedule names the op)");
    start_.assign(3 * static_cast<std::size_t>(stages_) * static_cast<std::size_t>(chunks_) *
                      static_cast<std::size_t>(mbs_),
                  -1);
    round_.assign(2 * static_cast<std::size_t>(stages_) * static_cast<std::size_t>(chunks_) *
                      static_cast<std::size_t>(mbs_),
                  -1);
    for (std::size_t i = 0; i < t.size(); ++i) {
      const schedule_op& o = c.op(run.ops, i);
      if (is_pass(c.kind[i]))
        start_[index(o.kind, o.stage, o.chunk, o.microbatch)] =
            static_cast<std::int64_t>(t[i].start);
      else if (is_recv(c.kind[i]))  // it ends when its consumer starts
        round_[index(c.kind[i] == op_kind::recv_act ? op_kind::forward : op_kind::backward, o.stage,
                     o.chunk, o.microbatch)] = static_cast<std::int64_t>(t[i].end);
    }
  }

  /// @brief Unit-time start of pass (kind, stage, chunk, microbatch) (F, B
  /// or W); throws `invalid_argument` where the chain has no such op.
  [[nodiscard]] std::int64_t start(op_kind k, int stage, int chunk, int microbatch) const {
    return lookup(start_, k, stage, chunk, microbatch, is_pass(k), "pass");
  }

  /// @brief Round of point-to-point op `o`: the unit-time start of the op
  /// that reads the tensor (the F of the next virtual stage for an
  /// activation, the B of the previous one for a gradient); throws
  /// `invalid_argument` where the chain moves no such tensor.
  [[nodiscard]] std::int64_t round(const schedule_op& o) const {
    const bool act = o.kind == op_kind::send_act || o.kind == op_kind::recv_act;
    return lookup(round_, act ? op_kind::forward : op_kind::backward, o.stage, o.chunk,
                  o.microbatch, is_p2p(o.kind), act ? "message of F's output" : "message of B's");
  }

 private:
  // table[index(k, stage, chunk, mb)], or invalid_argument naming `what`.
  [[nodiscard]] std::int64_t lookup(const std::vector<std::int64_t>& table, op_kind k, int stage,
                                    int chunk, int mb, bool valid, const char* what) const {
    const bool in = valid && stage >= 0 && stage < stages_ && chunk >= 0 && chunk < chunks_ &&
                    mb >= 0 && mb < mbs_;
    const std::int64_t v = in ? table[index(k, stage, chunk, mb)] : -1;
    if (v < 0)
      fail(errc::invalid_argument, "message_rounds", "the chain has no ", what, " ", to_string(k),
           "(stage ", stage, ", chunk ", chunk, ", mb ", mb,
           "): the program was bound from another chain");
    return v;
  }
  [[nodiscard]] std::size_t index(op_kind k, int stage, int chunk, int mb) const noexcept {
    const auto kind = static_cast<std::size_t>(k);  // forward 0, backward 1, weight 2
    return ((kind * static_cast<std::size_t>(stages_) + static_cast<std::size_t>(stage)) *
                static_cast<std::size_t>(chunks_) +
            static_cast<std::size_t>(chunk)) *
               static_cast<std::size_t>(mbs_) +
           static_cast<std::size_t>(mb);
  }

  int stages_ = 0, chunks_ = 0, mbs_ = 0;
  std::vector<std::int64_t> start_;  // per (kind, stage, chunk, microbatch); -1: none
  std::vector<std::int64_t> round_;  // per (F: activation / B: gradient, producer's stage,
                                     // chunk, microbatch): its consumer's start; -1: none
};

/// @brief Sorts `p`'s ops into the rendezvous order of `r` (the rounds of the
/// chain `p` was bound from; see the file comment). Deterministic: the same
/// program and rounds give the same order on every rank.
inline void order_for_rendezvous(bound_program& p, const message_rounds& r) {
  // Keys in eighths of a unit: compute starting at s: 8s + 4; the ops after
  // it (grad_sync_start): 8s + 5; a message of round t: 8t (+1 for a fan-out);
  // grad_sync_finish, optimizer_step: 8s' + 3 for the next compute s' (or last).
  const std::size_t n = p.ops.size();
  constexpr std::int64_t unset = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> key(n, unset);
  std::int64_t after = -3;  // 8 * (-1) + 5: before any compute
  for (std::size_t i = 0; i < n; ++i) {
    const schedule_op& o = p.ops[i].op;
    if (is_pass(o.kind)) {
      const std::int64_t s = r.start(o.kind, o.stage, o.chunk, o.microbatch);
      key[i] = 8 * s + 4;
      after = 8 * s + 5;
    } else if (is_p2p(o.kind)) {
      key[i] = 8 * r.round(o) + (p.ops[i].phase == 1 ? 1 : 0);
    } else if (o.kind != op_kind::grad_sync_finish && o.kind != op_kind::optimizer_step) {
      key[i] = after;
    }
  }
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = n; i-- > 0;) {
    if (key[i] != unset && (key[i] & 7) == 4) next = key[i] - 1;
    if (key[i] == unset) key[i] = next;
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
  std::vector<bound_op> ops;
  ops.reserve(n);
  for (std::size_t i : order) ops.push_back(p.ops[i]);
  p.ops = std::move(ops);
}

/// @brief `order_for_rendezvous` of every program of `w`.
inline void order_for_rendezvous(bound_world& w, const pipeline_schedule& chain) {
  const message_rounds r(chain);
  for (bound_program& p : w.programs) order_for_rendezvous(p, r);
}

}  // namespace disttrain
