#pragma once
/// @file message_tags.hpp
/// @brief The tag of every message of a bound program (schedule/bound_program.hpp),
/// computed identically by sender and receiver from what both already hold
/// (the message's link, direction and microbatch), so no tag or shape is
/// ever exchanged. `bind_world` and `bind_schedule` both tag with it.
///
/// Tags of one iteration are unique per (direction, producing virtual stage,
/// microbatch); gradient buckets get a range after them:
///
///     p2p tag     = (mb * V + vs) * 2 + is_grad
///     bucket tag  = M * V * 2 + bucket
///     control tag = M * V * 2 + max_buckets   (the executor's abort notices)
///
/// with V virtual stages (`topology::num_virtual_stages`; `vs` is the virtual
/// stage that produced the tensor: an activation crosses link `vs`, a
/// gradient link `vs - 1`) and M microbatches. The several messages of one
/// route share their tag: between two ranks they match in program order.
/// All tags are >= 0 (negative tags are reserved for the communicator's
/// bootstrap collectives) and below `limit()`, which must not exceed the
/// transport's tag bound (MPI guarantees 32767; OpenMPI allows 2^31 - 1).
///
/// @snippet exec.cpp message_tags

#include <climits>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Deterministic message tags for one iteration (see the file comment).
class message_tags {
 public:
  /// @param virtual_stages virtual pipeline stages of the chain (V >= 1)
  /// @param microbatches   microbatches of the iteration (M >= 1)
  /// @param max_buckets    gradient buckets per rank (>= 1)
  message_tags(int virtual_stages, int microbatches, int max_buckets = 1024)
      : v_(virtual_stages), m_(microbatches), buckets_(max_buckets) {
    require_positive(virtual_stages, "message_tags.virtual_stages");
    require_positive(microbatches, "message_tags.microbatches");
    require_positive(max_buckets, "message_tags.max_buckets");
    const long long need = static_cast<long long>(m_) * v_ * 2 + buckets_ + 1;
    require(need <= INT_MAX, "message_tags", "needs ", need, " tags, limit ", INT_MAX);
    limit_ = static_cast<int>(need);
  }

  /// @brief Tag of the activation (or gradient, `grad`) produced at virtual
  /// stage `vs` for microbatch `mb` (a send and its receive name the same tensor).
  [[nodiscard]] int p2p(int vs, bool grad, int mb) const {
    require_in_range(vs, 0, v_ - 1, "message_tags.virtual_stage");
    require_in_range(mb, 0, m_ - 1, "message_tags.microbatch");
    return p2p_of_valid(vs, grad, mb);
  }
  /// @brief As `p2p` for `vs` and `mb` the caller knows in range (the
  /// simulator's per-op path).
  [[nodiscard]] int p2p_of_valid(int vs, bool grad, int mb) const noexcept {
    return (mb * v_ + vs) * 2 + (grad ? 1 : 0);
  }
  /// @brief Tag of gradient bucket `bucket`.
  [[nodiscard]] int bucket(int b) const {
    require_in_range(b, 0, buckets_ - 1, "message_tags.bucket");
    return m_ * v_ * 2 + b;
  }
  /// @brief Tag of the executor's abort notices (the last one: `limit() - 1`).
  [[nodiscard]] int control() const noexcept { return limit_ - 1; }
  /// @brief One past the largest tag.
  [[nodiscard]] int limit() const noexcept { return limit_; }
  [[nodiscard]] int virtual_stages() const noexcept { return v_; }
  [[nodiscard]] int microbatches() const noexcept { return m_; }
  [[nodiscard]] int max_buckets() const noexcept { return buckets_; }

 private:
  int v_, m_, buckets_;
  int limit_ = 0;
};

}  // namespace disttrain
