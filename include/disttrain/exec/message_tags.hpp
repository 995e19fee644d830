#pragma once
/// @file message_tags.hpp
/// @brief The tag of every message the executor posts, computed identically by
/// sender and receiver from what both already hold (the schedule op's
/// identity), so no tag or shape is ever exchanged.
///
/// Tags of one iteration are unique per (direction, producing virtual stage,
/// microbatch, sub-message); gradient buckets get a range after them:
///
///     p2p tag     = ((mb * V + vs) * 2 + is_grad) * max_sub + sub
///     bucket tag  = M * V * 2 * max_sub + bucket
///     control tag = M * V * 2 * max_sub + max_buckets   (the executor's abort notices)
///
/// with V = stages x chunks virtual stages (vs = chunk * stages + stage of the
/// op that produced the tensor) and M microbatches. `sub` tells apart several
/// messages between the same two ranks for one op (e.g. the crossing and the
/// fan-out phases of a route). All tags are >= 0 (negative tags are reserved
/// for the communicator's bootstrap collectives) and below `limit()`, which
/// must not exceed the transport's tag bound (MPI guarantees 32767; OpenMPI
/// allows 2^31 - 1).
///
/// @snippet exec.cpp message_tags

#include <climits>
#include <cstdint>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/op.hpp"

namespace disttrain {

/// @brief Deterministic message tags for one iteration (see the file comment).
class message_tags {
 public:
  /// @param stages       pipeline stages of the schedule (>= 1)
  /// @param chunks       virtual chunks per rank (>= 1; 1 unless interleaved)
  /// @param microbatches microbatches of the iteration (M >= 1)
  /// @param max_sub      sub-messages per (op, peer) pair (>= 1)
  /// @param max_buckets  gradient buckets per rank (>= 1)
  message_tags(int stages, int chunks, int microbatches, int max_sub = 4, int max_buckets = 1024)
      : stages_(stages),
        v_(stages * chunks),
        m_(microbatches),
        sub_(max_sub),
        buckets_(max_buckets) {
    require_positive(stages, "message_tags.stages");
    require_positive(chunks, "message_tags.chunks");
    require_positive(microbatches, "message_tags.microbatches");
    require_positive(max_sub, "message_tags.max_sub");
    require_positive(max_buckets, "message_tags.max_buckets");
    const long long need = static_cast<long long>(m_) * v_ * 2 * sub_ + buckets_ + 1;
    require(need <= INT_MAX, "message_tags", "needs ", need, " tags, limit ", INT_MAX);
    limit_ = static_cast<int>(need);
  }

  /// @brief Tag of sub-message `sub` of a point-to-point op (a send and its
  /// receive carry the producing op's stage, chunk and microbatch, hence the same tag).
  [[nodiscard]] int p2p(const schedule_op& op, int sub = 0) const {
    if (!is_p2p(op.kind))  // (described only on failure: tags are looked up per message)
      fail(errc::invalid_argument, "message_tags", "op ", describe(op), " is not point-to-point");
    const bool grad = op.kind == op_kind::send_grad || op.kind == op_kind::recv_grad;
    return p2p_at(op.chunk * stages_ + op.stage, grad, op.microbatch, sub);
  }
  /// @brief Tag of sub-message `sub` of the activation (or gradient, `grad`)
  /// produced at virtual stage `vs` for microbatch `mb`: for paths whose
  /// virtual stages are not `chunk * stages + stage` (bind.hpp numbers them
  /// as the topology does; construct with `stages` = its virtual stages, `chunks` 1).
  [[nodiscard]] int p2p_at(int vs, bool grad, int mb, int sub = 0) const {
    require_in_range(vs, 0, v_ - 1, "message_tags.virtual_stage");
    require_in_range(mb, 0, m_ - 1, "message_tags.microbatch");
    require_in_range(sub, 0, sub_ - 1, "message_tags.sub");
    return ((mb * v_ + vs) * 2 + (grad ? 1 : 0)) * sub_ + sub;
  }
  /// @brief Tag of gradient bucket `bucket`.
  [[nodiscard]] int bucket(int b) const {
    require_in_range(b, 0, buckets_ - 1, "message_tags.bucket");
    return m_ * v_ * 2 * sub_ + b;
  }
  /// @brief Tag of the executor's abort notices (the last one: `limit() - 1`).
  [[nodiscard]] int control() const noexcept { return limit_ - 1; }
  /// @brief One past the largest tag.
  [[nodiscard]] int limit() const noexcept { return limit_; }
  [[nodiscard]] int virtual_stages() const noexcept { return v_; }
  [[nodiscard]] int microbatches() const noexcept { return m_; }

 private:
  int stages_, v_, m_, sub_, buckets_;
  int limit_ = 0;
};

}  // namespace disttrain
