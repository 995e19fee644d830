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
/// Fields of the trivial binding: a message's tag is `2 * link + (gradient ?
/// 1 : 0)` with `link` the virtual stage on the upstream side of the message
/// (`pipeline_schedule::virtual_stage`), its bytes 0 (a schedule has none; the
/// duration model prices the op), its stamp 0; a bucket's tag is its bucket
/// index; `virtual_stages` lists the rank's chunks' virtual stages. O(ops).

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "disttrain/schedule/bound_program.hpp"
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
  }
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
      // The tensor of (stage, chunk) crosses the link after it (activation)
      // or before it (gradient).
      b.link =
          vs_[first_[static_cast<std::size_t>(o.stage)] + static_cast<std::size_t>(o.chunk)] - grad;
      b.tag = 2 * std::max(b.link, 0) + grad;
    } else if (o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish) {
      b.tag = o.bucket;
    }
    return b;
  }

 private:
  const pipeline_schedule* s_ = nullptr;
  std::vector<std::size_t> first_;  // stage st's chunks are vs_[first_[st] .. first_[st + 1])
  std::vector<int> vs_;
};

}  // namespace detail

/// @brief The bound world of `s` (see the file comment) into `w`, reusing its
/// storage. `s` should be valid (`validate_schedule`); a malformed one gives a
/// world `validate_bound` rejects, or `schedule_error` for an op whose stage
/// or chunk is out of range.
inline void bind_schedule(const pipeline_schedule& s, bound_world& w) {
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
    p.control_tag = -1;
    p.dp_group = st < groups.size() ? groups[st] : std::vector<int>{};
    const auto vs = bind.virtual_stages(stage);
    p.virtual_stages.assign(vs.begin(), vs.end());
    if (p.virtual_stages.empty()) p.virtual_stages.assign(1, stage);
    const std::size_t slots =
        static_cast<std::size_t>(std::max(s.num_microbatches, 0)) * p.virtual_stages.size();
    p.input_elements.assign(slots, 0);
    p.output_elements.assign(slots, 0);
    p.ops.resize(s.ops[r].size());
    for (std::size_t i = 0; i < s.ops[r].size(); ++i) p.ops[i] = bind(s.ops[r][i]);
  }
}

/// @brief The bound world of `s` (see the file comment).
[[nodiscard]] inline bound_world bind_schedule(const pipeline_schedule& s) {
  bound_world w;
  bind_schedule(s, w);
  return w;
}

}  // namespace disttrain
