#pragma once
/// @file list_scheduler.hpp
/// @brief Internal: greedy list scheduling of a chained pipeline (non-interleaved)
/// under per-rank activation caps, used by the ZB-H1 and multi-module generators.
///
/// An event-driven simulation with the given op costs decides each rank's op
/// order. When a rank is idle it starts, in priority order:
///   1. a B or an F, alternating as 1F1B does when both are ready (after a
///      B an F, after an F a B); B is the one whose gradient arrived first, F
///      the one whose input arrived first (first-stage ranks: their
///      microbatch list in order) and only while fewer than `cap`
///      microbatches hold activations;
///   2. the oldest pending W (split backward only).
/// Messages on one directed link arrive in the order they were sent (each
/// link carries one message at a time, as in the simulator), so taking inputs
/// in arrival order keeps every link's receives in its send order. Events at
/// one instant apply in the order they were created, all before any rank
/// picks; ranks pick in rank order: the result is deterministic. Every held
/// microbatch's backward eventually returns (the last stage runs B right after
/// F, and by induction every stage finishes what it took), so the scheduler
/// never stalls (a stall would be reported as an internal error).
/// Cost: O(n log n) for n compute ops.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <queue>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/op_cost.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain::detail {

/// @brief Fills `s.ops` (compute only). `flows[r]` lists rank r's microbatches
/// (the forward order of first-stage ranks);
/// `cap[r]` its activation cap; `owner[stage * M + mb]` the rank running (stage, mb).
inline void list_schedule(pipeline_schedule& s, const std::vector<std::vector<int>>& flows,
                          const std::vector<int>& cap, const std::vector<int>& owner,
                          const op_cost_fn& cost) {
  const std::size_t R = s.ranks.size();
  const auto M = static_cast<std::size_t>(s.num_microbatches);
  const int S = s.num_stages;
  const auto back = backward_mask(s);
  const auto key = [M](int stage, int mb) {
    return static_cast<std::size_t>(stage) * M + static_cast<std::size_t>(mb);
  };
  s.ops.assign(R, {});

  struct event {
    double t;
    std::uint64_t seq;
    int kind;  // 0: rank r finished its op; 1: activation for (stage, mb) arrived; 2: gradient arrived
    int rank;
    int mb;
    bool operator>(const event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  std::priority_queue<event, std::vector<event>, std::greater<event>> q;
  std::uint64_t seq = 0;
  std::vector<std::deque<int>> fq(R), bq(R), wq(R);  // arrived inputs, arrived gradients, pending W
  std::vector<std::vector<std::pair<int, double>>> link_free(
      R);  // per sender: (receiver, link free time)
  std::vector<int> inflight(R, 0);
  std::vector<char> last_b(R, 0);  // last F/B started was a B: alternate when both are ready
  std::vector<char> busy(R, 0);
  std::vector<schedule_op> running(R);
  std::size_t remaining = 0;
  for (std::size_t r = 0; r < R; ++r) {
    const int stage = s.ranks[r].stage;
    const std::size_t per =
        1U + (back[static_cast<std::size_t>(stage)] ? 1U : 0U) +
        (back[static_cast<std::size_t>(stage)] && s.has_weight(stage) ? 1U : 0U);
    remaining += per * flows[r].size();
    if (stage == 0)
      for (const int mb : flows[r]) fq[r].push_back(mb);
  }
  // Arrival time of a message sent now from `from` to `to` taking `dur`: after the link's previous one.
  const auto deliver = [&](std::size_t from, int to, double now, double dur) {
    auto& links = link_free[from];
    auto it =
        std::find_if(links.begin(), links.end(), [to](const auto& l) { return l.first == to; });
    if (it == links.end()) {
      links.push_back({to, 0.0});
      it = links.end() - 1;
    }
    it->second = std::max(it->second, now) + dur;
    return it->second;
  };
  const auto cost_of = [&](std::size_t r, const schedule_op& o) {
    const double v = cost(s.ranks[r], o);
    if (!(v >= 0.0))
      fail(errc::invalid_argument, s.rank_name(static_cast<int>(r)), "op cost of ", describe(o),
           " is ", v, " (must be >= 0)");
    return v;
  };
  const auto try_start = [&](std::size_t r, double now) {
    if (busy[r]) return;
    const int stage = s.ranks[r].stage;
    const bool has_b = back[static_cast<std::size_t>(stage)] != 0;
    schedule_op o;
    const bool can_b = !bq[r].empty();
    const bool can_f = !fq[r].empty() && (!has_b || inflight[r] < cap[r]);
    if (can_b && (!can_f || !last_b[r])) {
      o = schedule_op::backward(stage, 0, bq[r].front());
      bq[r].pop_front();
      last_b[r] = 1;
    } else if (can_f) {
      o = schedule_op::forward(stage, 0, fq[r].front());
      fq[r].pop_front();
      if (has_b) ++inflight[r];
      last_b[r] = 0;
    } else if (!wq[r].empty()) {
      o = schedule_op::weight(stage, 0, wq[r].front());
      wq[r].pop_front();
    } else {
      return;
    }
    busy[r] = 1;
    running[r] = o;
    s.ops[r].push_back(o);
    q.push({now + cost_of(r, o), seq++, 0, static_cast<int>(r), o.microbatch});
  };

  std::vector<std::size_t> dirty;
  for (std::size_t r = 0; r < R; ++r) try_start(r, 0.0);
  while (!q.empty()) {
    const double now = q.top().t;
    dirty.clear();
    while (!q.empty() && q.top().t == now) {
      const event e = q.top();
      q.pop();
      const auto r = static_cast<std::size_t>(e.rank);
      if (e.kind == 1) {
        fq[r].push_back(e.mb);
      } else if (e.kind == 2) {
        bq[r].push_back(e.mb);
      } else {
        busy[r] = 0;
        --remaining;
        const schedule_op o = running[r];
        const int stage = o.stage;
        const bool has_b = back[static_cast<std::size_t>(stage)] != 0;
        if (o.kind == op_kind::forward) {
          if (stage + 1 < S) {
            const int to = owner[key(stage + 1, o.microbatch)];
            const schedule_op snd =
                schedule_op::send(op_kind::send_act, stage, 0, o.microbatch, to);
            q.push({deliver(r, to, now, cost_of(r, snd)), seq++, 1, to, o.microbatch});
          } else if (has_b) {
            bq[r].push_back(o.microbatch);
          }
        } else if (o.kind == op_kind::backward) {
          if (s.has_weight(stage))
            wq[r].push_back(o.microbatch);
          else
            --inflight[r];
          if (stage > 0 && back[static_cast<std::size_t>(stage - 1)]) {
            const int to = owner[key(stage - 1, o.microbatch)];
            const schedule_op snd =
                schedule_op::send(op_kind::send_grad, stage, 0, o.microbatch, to);
            q.push({deliver(r, to, now, cost_of(r, snd)), seq++, 2, to, o.microbatch});
          }
        } else {
          --inflight[r];
        }
      }
      dirty.push_back(r);
    }
    // Ranks pick in rank order (dirty ones only: no one else's state changed).
    std::sort(dirty.begin(), dirty.end());
    dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
    for (std::size_t r : dirty) try_start(r, now);
  }
  ensure(remaining == 0, "list_schedule", remaining,
         " ops never became ready (caps too small for the microbatch order)");
}

}  // namespace disttrain::detail
