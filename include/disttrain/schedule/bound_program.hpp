#pragma once
/// @file bound_program.hpp
/// @brief The program a global rank runs in one iteration, bound to a batch:
/// every point-to-point op names its real peer (a global rank), its byte count
/// and its tag. `bind_rank` / `bind_world` (bind/bind.hpp) produce it from the
/// topology, the chain schedule and the batch's sample map; `validate_bound`
/// (here), `simulate_bound` (sim/simulator.hpp) and `executor`
/// (exec/executor.hpp) consume it, so the program checked is the program run.
///
/// A bound program keeps the chain schedule's compute ops (F/B/W of chain
/// stage `op.stage`, gradient buckets, the optimizer step) in order and
/// surrounds them with one op per message:
/// - before F: the receives of its input (route phase 0, the crossing), the
///   fan-out sends and receives among the replica's TP ranks (phase 1);
/// - after F: the sends of its output (phase 0);
/// - before B: the same for the gradient of its output, which flows back
///   along the reversed route; after B: the sends of its input gradient.
///
/// A send and its receive carry the same (tag, bytes); messages between two
/// ranks are matched in program order, as MPI and NCCL match them.
///
/// @snippet schedule.cpp bound_program

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/op.hpp"

namespace disttrain {

/// @brief One op of a bound program (see the file comment).
///
/// For point-to-point kinds, `op.peer` is the global rank of the other side
/// and `op.stage` / `op.chunk` the chain stage and chunk that produced the
/// tensor (as in schedules); `link` is the link the message crosses (link v
/// joins virtual stages v and v + 1 of the topology; chain stages c and
/// c + 1 without interleaving), `phase` 0 for the crossing, 1 for the TP fan-out, and
/// `message` the index of the message in its route (`bound_rank::route_of`).
struct bound_op {
  schedule_op op;          ///< kind, chain stage, chunk, microbatch, peer, bucket
  std::int64_t bytes = 0;  ///< point-to-point: payload bytes
  int tag = -1;            ///< point-to-point and grad sync: the message / collective tag
  int link = -1;           ///< point-to-point: chain link crossed
  int phase = 0;           ///< point-to-point: 0 crossing, 1 TP fan-out
  int message = -1;        ///< point-to-point: index of the message in its route
  /// Point-to-point: the message's stamp (`route_plan::stamp` mixed with the
  /// tag), the same in the sender's and the receiver's programs iff both were
  /// bound from the same inputs, different for the messages of one pair of
  /// ranks (whatever their shapes); the executor sends it with the message
  /// and checks it, so a message taken for another (NCCL matches by issue
  /// order, not by tag) fails too.
  std::uint64_t stamp = 0;

  friend bool operator==(const bound_op&, const bound_op&) = default;
};

/// @brief What one global rank runs in one iteration.
struct bound_program {
  int rank = -1;              ///< global rank
  int chain_stage = -1;       ///< the chain stage it runs
  std::vector<bound_op> ops;  ///< in program order
  std::vector<int> dp_group;  ///< ascending global ranks reducing its gradient buckets
  /// The executor's abort notices (exec/executor.hpp, "Failures"): a tag no op
  /// uses, the same in every program of a world (bind: `message_tags::control()`);
  /// < 0: none.
  int control_tag = -1;
  /// Per model chunk, the virtual stage it runs (topology.hpp, "Virtual
  /// stages"): one entry, `chain_stage`'s, without interleaving.
  std::vector<int> virtual_stages;
  /// Per (microbatch j, chunk k, field f) at `(j * chunks() + k) * fields +
  /// f`, elements of its activation buffers: the input it receives (and the
  /// input gradient it sends back) and the output it sends (and the output
  /// gradient it receives), per field of the link (bind/bind.hpp,
  /// `link_shape`; 0 past a link's fields).
  std::vector<std::int64_t> input_elements, output_elements;
  /// Entries per (microbatch, chunk) in `input_elements` / `output_elements`:
  /// the most fields of a link at the rank's ends (1 for single-tensor links).
  int fields = 1;

  /// @brief Model chunks of the rank (1 without interleaving).
  [[nodiscard]] int chunks() const noexcept { return static_cast<int>(virtual_stages.size()); }
  /// @brief The chunk of this rank at an end of `link`, and whether it is the
  /// upstream end (its output crosses the link) or the downstream one; throws
  /// `invalid_argument` if the rank is at neither end.
  [[nodiscard]] std::pair<int, bool> chunk_at_link(int link) const {
    for (std::size_t k = 0; k < virtual_stages.size(); ++k) {
      if (virtual_stages[k] == link) return {static_cast<int>(k), true};
      if (virtual_stages[k] == link + 1) return {static_cast<int>(k), false};
    }
    fail(errc::invalid_argument, "bound_program.link", "rank ", rank, " is at neither end of link ",
         link);
  }

  [[nodiscard]] std::size_t num_messages() const noexcept {
    std::size_t n = 0;
    for (const auto& o : ops) n += is_p2p(o.op.kind) ? 1U : 0U;
    return n;
  }

  friend bool operator==(const bound_program&, const bound_program&) = default;
};

/// @brief The programs of every global rank (`programs[r].rank == r`).
struct bound_world {
  std::string name;                     ///< e.g. the chain schedule's name
  std::vector<bound_program> programs;  ///< one per global rank
  int num_microbatches = 0;

  [[nodiscard]] int world_size() const noexcept { return static_cast<int>(programs.size()); }
  [[nodiscard]] std::size_t num_ops() const noexcept {
    std::size_t n = 0;
    for (const auto& p : programs) n += p.ops.size();
    return n;
  }

  friend bool operator==(const bound_world&, const bound_world&) = default;
};

/// @brief The batches in which a rank issues its point-to-point ops where
/// messages rendezvous (NCCL: one `ncclGroupStart`/`ncclGroupEnd`, PyTorch's
/// `batch_isend_irecv`, as Megatron-LM groups its p2p ops per step):
/// `disttrain.torch.Runner` issues them so, and `validate_bound` with
/// `p2p_semantics::rendezvous` checks them (schedule/validate_bound.hpp).
///
/// A batch is a maximal run of consecutive point-to-point ops, split before
/// a TP fan-out send (phase 1) once the batch holds a receive: a fan-out
/// forwards what a receive brings, so it cannot be posted beside it. Returns,
/// per op, its batch (0, 1, ... in program order), -1 for other ops.
/// @snippet schedule.cpp p2p_batches
inline std::vector<int> p2p_batches(const bound_program& p) {
  std::vector<int> out(p.ops.size(), -1);
  int batches = 0;
  bool open = false, received = false;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const bound_op& b = p.ops[i];
    if (!is_p2p(b.op.kind)) {
      open = false;
      continue;
    }
    if (!open || (received && is_send(b.op.kind) && b.phase == 1)) {
      ++batches;
      open = true;
      received = false;
    }
    out[i] = batches - 1;
    received = received || is_recv(b.op.kind);
  }
  return out;
}

/// @brief "rank 5 op #12 recv_act(stage 1, mb 3 <- rank 2), 4096 B, tag 17".
inline std::string describe(const bound_world& w, int rank, std::size_t i) {
  const bound_op& b = w.programs.at(static_cast<std::size_t>(rank)).ops.at(i);
  std::string s = cat("rank ", rank, " op #", i, " ", describe(b.op));
  if (is_p2p(b.op.kind)) s += cat(", ", b.bytes, " B, tag ", b.tag);
  return s;
}

}  // namespace disttrain
