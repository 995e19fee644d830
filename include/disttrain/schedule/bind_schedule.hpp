#pragma once
/// @file bind_schedule.hpp
/// @brief A schedule as a bound world, trivially: each schedule rank is one
/// global rank (a TP group stands for its GPUs), every point-to-point op keeps
/// its peer, and the grad-sync ops of a stage's replicas form its DP group.
/// So a generator's op lists are the one program IR the simulator
/// (`simulate`), the validator and the trace writers read: `bind_world`
/// (bind/bind.hpp) binds the same lists to a topology's GPUs, with bytes,
/// tags and routes.
///
/// Fields of the trivial binding: tags as `bind_world` gives them
/// (schedule/message_tags.hpp, with the schedule's virtual stages
/// `pipeline_schedule::virtual_stage` and microbatches): a message's tag names
/// its link, direction and microbatch, a bucket's its bucket, and the
/// program's `control_tag` is the executor's abort-notice tag; a message's
/// bytes are what `bytes(op)` says (0 without it: the duration model prices
/// the op), its stamp a hash of (virtual stages, microbatches, tag), so
/// ranks that built their programs from schedules of another shape fail at
/// the first message instead of exchanging wrong bytes; `virtual_stages`
/// lists the rank's chunks' virtual stages. O(ops).
///
/// With `bytes`, the world runs on the executor (exec/executor.hpp) as it
/// is: each schedule rank is one backend rank.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "disttrain/core/rng.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/message_tags.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

namespace detail {

/// @brief The trivial binding of one schedule, op by op: the simulator asks
/// its duration model about `(*this)(op)` without building the world.
class trivial_binding {
 public:
  trivial_binding() = default;
  /// @brief Per stage of `s`, the virtual stage of each of its chunks.
  explicit trivial_binding(const pipeline_schedule& s) { reset(s); }
  void reset(const pipeline_schedule& s) {
    s_ = &s;
    const auto S = static_cast<std::size_t>(std::max(s.num_stages, 0));
    first_.assign(S + 1, 0);
    vs_.clear();
    for (std::size_t st = 0; st < S; ++st) {
      for (int k = 0; k < s.chunks_of_stage(static_cast<int>(st)); ++k)
        vs_.push_back(s.virtual_stage(static_cast<int>(st), k));
      first_[st + 1] = vs_.size();
    }
    tags_.reset();
    if (!vs_.empty() && s.num_microbatches > 0)
      tags_.emplace(static_cast<int>(vs_.size()), s.num_microbatches);
  }
  /// @brief The tags of the binding; empty for a schedule without virtual
  /// stages or microbatches (whose ops then get tag -1).
  [[nodiscard]] const std::optional<message_tags>& tags() const noexcept { return tags_; }
  /// @brief The virtual stages of stage `stage`'s chunks (empty when out of range).
  [[nodiscard]] std::span<const int> virtual_stages(int stage) const {
    const auto st = static_cast<std::size_t>(stage);
    if (stage < 0 || st + 1 >= first_.size()) return {};
    return std::span(vs_).subspan(first_[st], first_[st + 1] - first_[st]);
  }
  /// @brief The bound op of `o` (see the file comment). Throws
  /// `schedule_error` for a point-to-point op whose stage or chunk is out of range.
  [[nodiscard]] bound_op operator()(const schedule_op& o) const {
    if (is_p2p(o.kind)) {
      const auto st = static_cast<std::size_t>(o.stage);
      const bool ok = o.stage >= 0 && st + 1 < first_.size() && o.chunk >= 0 &&
                      first_[st] + static_cast<std::size_t>(o.chunk) < first_[st + 1];
      if (!ok) (void)s_->virtual_stage(o);  // throws, naming the stage and chunk
    }
    return of_valid(o);
  }
  /// @brief As `operator()` for an op of the schedule as validated (its stage
  /// and chunk in range: `compile_schedule` checked them). O(1).
  [[nodiscard]] bound_op of_valid(const schedule_op& o) const noexcept {
    bound_op b;
    b.op = o;
    if (is_p2p(o.kind)) {
      const int grad = o.kind == op_kind::send_grad || o.kind == op_kind::recv_grad ? 1 : 0;
      // The tensor of (stage, chunk), produced there, crosses the link after
      // it (activation) or before it (gradient).
      const int vs =
          vs_[first_[static_cast<std::size_t>(o.stage)] + static_cast<std::size_t>(o.chunk)];
      b.link = vs - grad;
      if (tags_ && o.microbatch >= 0 && o.microbatch < tags_->microbatches()) {
        b.tag = tags_->p2p_of_valid(vs, grad != 0, o.microbatch);
        b.stamp = stamp(b.tag);
      }
    } else if (o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish) {
      b.tag =
          tags_ && o.bucket >= 0 && o.bucket < tags_->max_buckets() ? tags_->bucket(o.bucket) : -1;
    }
    return b;
  }

 private:
  // The message stamp (see the file comment): SplitMix64's mixer over the
  // tag and the tag space.
  [[nodiscard]] std::uint64_t stamp(int tag) const noexcept {
    const auto v = static_cast<std::uint64_t>(static_cast<unsigned>(tags_->virtual_stages()));
    const auto m = static_cast<std::uint64_t>(static_cast<unsigned>(tags_->microbatches()));
    const auto t = static_cast<std::uint64_t>(static_cast<unsigned>(tag));
    return splitmix64::mix((v << 48) ^ (m << 24) ^ t ^ std::uint64_t{0x9e3779b97f4a7c15});
  }

  const pipeline_schedule* s_ = nullptr;
  std::vector<std::size_t> first_;  // stage st's chunks are vs_[first_[st] .. first_[st + 1])
  std::vector<int> vs_;
  std::optional<message_tags> tags_;
};

/// @brief No bytes (the duration model prices ops): `bind_schedule`'s default.
struct no_bytes {
  [[nodiscard]] std::int64_t operator()(const schedule_op&) const noexcept { return 0; }
};

}  // namespace detail

/// @brief A callable giving the payload bytes of a schedule's point-to-point op.
template <class F>
concept op_bytes = std::regular_invocable<const F&, const schedule_op&> &&
    std::convertible_to<std::invoke_result_t<const F&, const schedule_op&>, std::int64_t>;

/// @brief The bound world of `s` (see the file comment) into `w`, reusing its
/// storage; `bytes(op)` sizes each point-to-point op (a send and its receive
/// must get the same). `s` should be valid (`validate_schedule`); a malformed
/// one gives a world `validate_bound` rejects, or `schedule_error` for an op
/// whose stage or chunk is out of range; a negative size is
/// `invalid_argument` naming the op.
template <op_bytes Bytes = detail::no_bytes>
void bind_schedule(const pipeline_schedule& s, bound_world& w, const Bytes& bytes = {}) {
  const detail::trivial_binding bind(s);
  w.name = s.name;
  w.num_microbatches = s.num_microbatches;
  const std::size_t R = s.ranks.size();
  w.programs.resize(R);
  std::vector<std::vector<int>> groups(static_cast<std::size_t>(std::max(s.num_stages, 0)));
  for (std::size_t r = 0; r < R; ++r) {
    const auto st = static_cast<std::size_t>(s.ranks[r].stage);
    if (st < groups.size()) groups[st].push_back(static_cast<int>(r));
  }
  for (std::size_t r = 0; r < R; ++r) {
    bound_program& p = w.programs[r];
    const int stage = s.ranks[r].stage;
    const auto st = static_cast<std::size_t>(stage);
    p.rank = static_cast<int>(r);
    p.chain_stage = stage;
    p.control_tag = bind.tags() ? bind.tags()->control() : -1;
    p.dp_group = st < groups.size() ? groups[st] : std::vector<int>{};
    const auto vs = bind.virtual_stages(stage);
    p.virtual_stages.assign(vs.begin(), vs.end());
    if (p.virtual_stages.empty()) p.virtual_stages.assign(1, stage);
    const std::size_t slots =
        static_cast<std::size_t>(std::max(s.num_microbatches, 0)) * p.virtual_stages.size();
    p.input_elements.assign(slots, 0);
    p.output_elements.assign(slots, 0);
    p.ops.resize(s.ops[r].size());
    for (std::size_t i = 0; i < s.ops[r].size(); ++i) {
      bound_op& b = p.ops[i] = bind(s.ops[r][i]);
      if (!is_p2p(b.op.kind)) continue;
      b.bytes = static_cast<std::int64_t>(bytes(b.op));
      if (b.bytes < 0)  // (the location is built only on failure)
        fail(errc::invalid_argument, cat("bind_schedule.bytes(rank ", r, " ", describe(b.op), ")"),
             "is ", b.bytes, ", must be >= 0");
    }
  }
}

/// @brief The bound world of `s` (see the file comment).
template <op_bytes Bytes = detail::no_bytes>
[[nodiscard]] bound_world bind_schedule(const pipeline_schedule& s, const Bytes& bytes = {}) {
  bound_world w;
  bind_schedule(s, w, bytes);
  return w;
}

}  // namespace disttrain
