#pragma once
/// @file pipeline_time.hpp
/// @brief Scoring microbatch orders: the `microbatch_times` view, the
/// `order_objective` concept, and `pipeline_time`, an exact evaluator of a
/// synchronous pipeline's iteration time (1F1B or GPipe) for per-microbatch,
/// per-stage forward and backward durations.
///
/// Model: stage `s` runs its ops in its schedule's fixed order; forward
/// F(j, s) starts when F(j, s-1) has finished (plus `p2p_latency`), backward
/// B(j, s) when B(j, s+1) has finished (plus latency), and B(j, S-1) after
/// F(j, S-1). Iteration time = the last op's finish. The ops are visited in one
/// topological order computed once per (microbatches, stages, schedule) and
/// cached, so an evaluation is O(m * S): one max and one add per op.
///
/// @snippet reorder.cpp pipeline_time_file

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Forward and backward durations of each microbatch (in execution
/// order) on each pipeline stage; row-major `[microbatch * stages + stage]`.
/// A non-owning view.
/// @snippet reorder.cpp microbatch_times
struct microbatch_times {
  std::size_t microbatches = 0;      ///< m
  std::size_t stages = 0;            ///< S
  std::span<const double> forward;   ///< m * S forward durations
  std::span<const double> backward;  ///< m * S backward durations (B and W together)

  [[nodiscard]] double forward_at(std::size_t mb, std::size_t stage) const {
    return forward[mb * stages + stage];
  }
  [[nodiscard]] double backward_at(std::size_t mb, std::size_t stage) const {
    return backward[mb * stages + stage];
  }

  /// @brief Throws `errc::invalid_argument` at `microbatch_times` for empty shapes,
  /// size mismatches and negative or non-finite durations.
  void validate() const {
    require(microbatches > 0, "microbatch_times.microbatches", "must be > 0, got ", microbatches);
    require(stages > 0, "microbatch_times.stages", "must be > 0, got ", stages);
    const std::size_t need = microbatches * stages;
    require(forward.size() == need, "microbatch_times.forward", "has ", forward.size(),
            " entries, need ", need);
    require(backward.size() == need, "microbatch_times.backward", "has ", backward.size(),
            " entries, need ", need);
    for (std::size_t i = 0; i < need; ++i) {
      if (!(std::isfinite(forward[i]) && forward[i] >= 0.0))
        fail(errc::invalid_argument, cat("microbatch_times.forward[", i, "]"),
             "must be finite and >= 0, got ", forward[i]);
      if (!(std::isfinite(backward[i]) && backward[i] >= 0.0))
        fail(errc::invalid_argument, cat("microbatch_times.backward[", i, "]"),
             "must be finite and >= 0, got ", backward[i]);
    }
  }
};

/// @brief Scores a microbatch order: `o(times)` returns the iteration time of
/// running the microbatches in the row order of `times`. Lower is better.
/// May keep mutable scratch state (called through a non-const reference).
/// @snippet reorder.cpp order_objective
template <class O>
concept order_objective = requires(O& o, const microbatch_times& t) {
  { o(t) } -> std::convertible_to<double>;
};

/// @brief Pipeline schedule evaluated by `pipeline_time`.
enum class pipeline_kind : std::uint8_t {
  one_f_one_b,  ///< 1F1B: stage s warms up with min(S-1-s, m) forwards, then alternates
  gpipe,        ///< all forwards, then all backwards
};

/// @brief Name of a schedule ("1f1b", "gpipe").
constexpr std::string_view to_string(pipeline_kind s) noexcept {
  return s == pipeline_kind::gpipe ? "gpipe" : "1f1b";
}

/// @brief Exact iteration time of a synchronous pipeline; an `order_objective`.
///
/// Reuses its buffers: after the first call for a shape, calls for the same or
/// smaller shapes do not allocate. Not thread-safe (one per thread).
/// @snippet reorder.cpp pipeline_time
class pipeline_time {
 public:
  explicit pipeline_time(pipeline_kind schedule = pipeline_kind::one_f_one_b,
                         double p2p_latency = 0.0)
      : schedule_(schedule), latency_(p2p_latency) {
    if (!(std::isfinite(p2p_latency) && p2p_latency >= 0.0))
      fail(errc::invalid_argument, "pipeline_time.p2p_latency", "must be finite and >= 0, got ",
           p2p_latency);
  }

  /// @brief Schedule this evaluator models.
  [[nodiscard]] pipeline_kind schedule() const noexcept { return schedule_; }

  /// @brief Iteration time of running the rows of `t` in order. (It does
  /// not move the anchor of the incremental scoring below.)
  double operator()(const microbatch_times& t) {
    t.validate();
    if (t.microbatches != m_ || t.stages != s_) build(t.microbatches, t.stages);
    dirty_from_ = 0;  // the scratch no longer matches the anchor anywhere
    tried_from_ = nodes_.size();
    return relax(t, identity_, 0, std::numeric_limits<double>::infinity());
  }

  /// @brief A lower bound on the iteration time of the rows of `t` in *any*
  /// order, for this schedule or any other that runs each stage's ops one at a
  /// time and a microbatch's forwards up the chain, its backwards down it:
  /// max over stages s of (the least forward time any row needs to reach s) +
  /// (s's total work) + (the least backward time any row needs from s back
  /// to stage 0), with the p2p latency of each hop. Exact for identical rows
  /// under 1F1B and GPipe without latency. As every time grows with every duration, it also
  /// bounds any `t'` whose durations are at least those of `t`.
  [[nodiscard]] double lower_bound(const microbatch_times& t) const {
    t.validate();
    const std::size_t m = t.microbatches, S = t.stages;
    double best = 0.0;
    for (std::size_t s = 0; s < S; ++s) {
      double head = std::numeric_limits<double>::infinity(), tail = head, work = 0.0;
      for (std::size_t j = 0; j < m; ++j) {
        double f = 0.0, b = 0.0;
        for (std::size_t q = 0; q < s; ++q) {
          f += t.forward[j * S + q];
          b += t.backward[j * S + q];
        }
        head = std::min(head, f);
        tail = std::min(tail, b);
        work += t.forward[j * S + s] + t.backward[j * S + s];
      }
      const double hops = 2.0 * static_cast<double>(s) * latency_;
      best = std::max(best, head + work + tail + hops);
    }
    return best;
  }

  /// @name Incremental scoring of reorderings (what `microbatch_orderer`'s search uses)
  /// `anchor(base, order)` validates `base` once and returns the iteration
  /// time of running row `order[p]` of `base` at position p. `try_order(order,
  /// from)` scores another order of the same rows that equals the anchored one
  /// at every position before `from`: it recomputes only the ops from the
  /// first one that involves a position >= `from`, and neither copies nor
  /// re-validates the rows; with a `cutoff`, it stops as soon as the time
  /// provably reaches `cutoff` (an op's finish plus its stage's remaining work)
  /// and returns a value >= `cutoff`. `accept()` makes the last tried order,
  /// one that came in below its cutoff, the anchor. Each result below the
  /// cutoff equals `operator()` on the permuted rows, bit for bit.
  /// `base` must outlive the calls; `order` must be a permutation of its rows
  /// (checked by `anchor`; the caller keeps it one for `try_order`).
  /// @{
  double anchor(const microbatch_times& base, std::span<const std::uint32_t> order) {
    base.validate();
    const std::size_t m = base.microbatches;
    require(order.size() == m, "pipeline_time.anchor.order", "has ", order.size(),
            " entries, need ", m);
    seen_.assign(m, 0);
    for (std::uint32_t r : order) {
      require(r < m && seen_[r] == 0, "pipeline_time.anchor.order", "is not a permutation of 0..",
              m - 1);
      seen_[r] = 1;
    }
    if (m != m_ || base.stages != s_) build(m, base.stages);
    base_ = base;
    tried_from_ = 0;
    std::fill(stage_work_.begin(), stage_work_.end(), 0.0);
    for (std::size_t c = 0; c < m * s_; ++c)
      stage_work_[c % s_] += base.forward[c] + base.backward[c];
    tried_end_ = relax(base_, order, 0, std::numeric_limits<double>::infinity());
    accept();
    return anchor_end_;
  }
  double try_order(std::span<const std::uint32_t> order, std::size_t from,
                   double cutoff = std::numeric_limits<double>::infinity()) {
    const std::size_t k0 = from < m_ ? first_op_[from] : nodes_.size();
    // tried_ must equal anchor_ before k0: resync what an earlier try changed.
    if (dirty_from_ < k0)
      std::copy(anchored_.begin() + static_cast<std::ptrdiff_t>(dirty_from_),
                anchored_.begin() + static_cast<std::ptrdiff_t>(k0),
                tried_.begin() + static_cast<std::ptrdiff_t>(dirty_from_));
    dirty_from_ = k0;
    tried_from_ = k0;
    tried_end_ = relax(base_, order, k0, cutoff);
    return tried_end_;
  }
  void accept() {
    std::swap(anchored_, tried_);
    anchor_end_ = tried_end_;
    dirty_from_ = tried_from_;  // the old anchor differs from the new one from there on
    tried_from_ = nodes_.size();
  }
  /// @}

 private:
  // One op in the cached topological order: its finish time is
  // max(finish[prev], finish[dep] + lat) + its duration, where the index past
  // the last op (no such op) holds 0.
  struct node {
    std::uint32_t pos;  // microbatch position
    std::uint32_t stage;
    std::uint32_t prev;  // previous op on the same stage
    std::uint32_t dep;   // the op it waits for on another stage (or its own F)
    double lat;          // latency added to dep's finish
    bool backward;
  };

  // Finish times of ops k0.. of running row order[p] of `rows` at position p,
  // into tried_ (earlier ones read as they are). Stops early, returning a
  // lower bound >= `cutoff`, once an op's finish plus the work its stage has
  // left passes `cutoff` (a stage's total work does not depend on the order).
  double relax(const microbatch_times& rows, std::span<const std::uint32_t> order, std::size_t k0,
               double cutoff) {
    const std::size_t S = s_;
    slot* v = tried_.data();
    for (std::size_t k = k0; k < nodes_.size(); ++k) {
      const node& n = nodes_[k];
      const std::size_t cell = std::size_t{order[n.pos]} * S + n.stage;
      const double d = n.backward ? rows.backward[cell] : rows.forward[cell];
      v[k].finish = std::max(v[n.prev].finish, v[n.dep].finish + n.lat) + d;
      v[k].work = v[n.prev].work + d;
      // Bound with a relative margin far above the rounding of the sums: a
      // try stopped here is >= cutoff in exact arithmetic too.
      const double bound = v[k].finish + (stage_work_[n.stage] - v[k].work);
      if (bound * (1.0 - 1e-12) >= cutoff) return bound;
    }
    double end = 0.0;
    for (std::uint32_t k : last_op_) end = std::max(end, v[k].finish);
    return end;
  }

  // Per stage, its op sequence: op = (microbatch << 1) | is_backward.
  void build(std::size_t m, std::size_t S) {
    m_ = m;
    s_ = S;
    const std::size_t per_stage = 2 * m;
    ops_.assign(S * per_stage, 0);
    for (std::size_t s = 0; s < S; ++s) {
      std::uint32_t* o = ops_.data() + s * per_stage;
      std::size_t w = 0;
      const auto F = [&](std::size_t j) { o[w++] = static_cast<std::uint32_t>(j << 1); };
      const auto B = [&](std::size_t j) { o[w++] = static_cast<std::uint32_t>((j << 1) | 1u); };
      if (schedule_ == pipeline_kind::gpipe) {
        for (std::size_t j = 0; j < m; ++j) F(j);
        for (std::size_t j = 0; j < m; ++j) B(j);
      } else {
        const std::size_t warm = std::min(S - 1 - s, m);
        for (std::size_t j = 0; j < warm; ++j) F(j);
        for (std::size_t i = 0; i + warm < m; ++i) {
          F(warm + i);
          B(i);
        }
        for (std::size_t j = m - warm; j < m; ++j) B(j);
      }
    }
    // One topological order, independent of durations: repeatedly run every
    // stage as far as its dependencies allow.
    std::vector<char> fdone(m * S, 0), bdone(m * S, 0);
    std::vector<std::size_t> ptr(S, 0);
    topo_.clear();
    topo_.reserve(S * per_stage);
    while (topo_.size() < S * per_stage) {
      bool progress = false;
      for (std::size_t s = 0; s < S; ++s) {
        while (ptr[s] < per_stage) {
          const std::uint32_t op = ops_[s * per_stage + ptr[s]];
          const std::size_t j = op >> 1;
          const std::size_t cell = j * S + s;
          const bool bwd = (op & 1u) != 0u;
          const bool ready = bwd ? (s + 1 < S ? bdone[cell + 1] != 0 : fdone[cell] != 0)
                                 : (s == 0 || fdone[cell - 1] != 0);
          if (!ready) break;
          (bwd ? bdone : fdone)[cell] = 1;
          topo_.push_back(static_cast<std::uint32_t>(s * per_stage + ptr[s]));
          ++ptr[s];
          progress = true;
        }
      }
      ensure(progress, "pipeline_time", "schedule deadlocks for m=", m, " S=", S);
    }
    build_nodes(m, S);
  }

  // The incremental scorer's view of topo_ (see `node`).
  void build_nodes(std::size_t m, std::size_t S) {
    const std::size_t per_stage = 2 * m, n_ops = S * per_stage;
    // at[stage * per_stage + op]: topo index of `op` on `stage`.
    std::vector<std::uint32_t> at(n_ops);
    for (std::size_t k = 0; k < n_ops; ++k) {
      const std::size_t code = topo_[k], stage = code / per_stage;
      at[stage * per_stage + ops_[code]] = static_cast<std::uint32_t>(k);
    }
    const auto index_of = [&](std::size_t stage, std::uint32_t op) {
      return at[stage * per_stage + op];
    };
    nodes_.resize(n_ops);
    const auto none = static_cast<std::uint32_t>(n_ops);
    last_op_.assign(S, none);
    first_op_.assign(m + 1, none);
    for (std::size_t k = 0; k < n_ops; ++k) {
      const std::size_t code = topo_[k], s = code / per_stage;
      const std::uint32_t op = ops_[code];
      const std::uint32_t j = op >> 1;
      const bool bwd = (op & 1u) != 0u;
      node& n = nodes_[k];
      n.pos = j;
      n.stage = static_cast<std::uint32_t>(s);
      n.backward = bwd;
      n.prev = code % per_stage == 0 ? none : index_of(s, ops_[code - 1]);
      if (!bwd) {
        n.dep = s > 0 ? index_of(s - 1, op) : none;
        n.lat = s > 0 ? latency_ : 0.0;
      } else {
        n.dep = s + 1 < S ? index_of(s + 1, op) : index_of(s, op & ~1u);
        n.lat = s + 1 < S ? latency_ : 0.0;
      }
      last_op_[s] = static_cast<std::uint32_t>(k);  // topo order keeps each stage's order
      first_op_[j] = std::min(first_op_[j], static_cast<std::uint32_t>(k));
    }
    for (std::size_t p = m; p-- > 0;) first_op_[p] = std::min(first_op_[p], first_op_[p + 1]);
    anchored_.assign(n_ops + 1, slot{});
    tried_.assign(n_ops + 1, slot{});
    stage_work_.assign(S, 0.0);
    identity_.resize(m);
    for (std::size_t j = 0; j < m; ++j) identity_[j] = static_cast<std::uint32_t>(j);
  }

  pipeline_kind schedule_;
  double latency_;
  std::size_t m_ = 0, s_ = 0;
  std::vector<std::uint32_t> ops_, topo_;
  // The ops in topological order, per stage its last op, per position p the
  // first op of any position >= p, the identity order (operator()); finish
  // times of the anchored and the last tried order (+ a 0 past the last op).
  std::vector<node> nodes_;
  std::vector<std::uint32_t> last_op_, first_op_, identity_;
  struct slot {
    double finish = 0.0;  // the op's finish time
    double work = 0.0;    // its stage's durations up to and including it
  };
  std::vector<slot> anchored_, tried_;
  std::vector<double> stage_work_;  // per stage, the sum of its ops' durations
  std::vector<char> seen_;
  microbatch_times base_{};
  double anchor_end_ = 0.0, tried_end_ = 0.0;
  std::size_t dirty_from_ = 0, tried_from_ = 0;
};

}  // namespace disttrain
