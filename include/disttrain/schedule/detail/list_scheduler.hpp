#pragma once
/// @file list_scheduler.hpp
/// @brief Internal: greedy list scheduling of a chained pipeline under
/// per-rank activation caps, used by the multi-module generator.
///
/// Ranks of a one-chunk segment are scheduled greedily (below). Ranks given a
/// fixed order (`fixed[r]`, e.g. an interleaved segment's Megatron-LM order)
/// run it as written, each op once its input has arrived; the event
/// simulation still decides when, and so what the greedy ranks around them
/// see. Messages are keyed by virtual stage, so a rank may hold several.
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
/// (the forward order of first-stage ranks); `cap[r]` its activation cap;
/// `owner[vs * M + mb]` the rank running (virtual stage vs, mb); `fixed[r]`,
/// when not empty, rank r's compute ops in their order (the rank is then not
/// scheduled greedily).
inline void list_schedule(pipeline_schedule& s, const std::vector<std::vector<int>>& flows,
                          const std::vector<int>& cap, const std::vector<int>& owner,
                          const std::vector<std::vector<schedule_op>>& fixed,
                          const op_cost_fn& cost) {
  const std::size_t R = s.ranks.size();
  const auto M = static_cast<std::size_t>(s.num_microbatches);
  const int V = s.num_virtual_stages();
  const auto back = backward_mask(s);
  const auto key = [M](int vs, int mb) {
    return static_cast<std::size_t>(vs) * M + static_cast<std::size_t>(mb);
  };
  s.ops.assign(R, {});
  // Fixed-order ranks: what has arrived, and the next op of each.
  std::vector<char> act_ready(static_cast<std::size_t>(V) * M, 0), grad_ready(act_ready);
  std::vector<std::size_t> next(R, 0);
  // A greedy rank's one virtual stage.
  std::vector<int> vs_of(R, 0);
  for (std::size_t r = 0; r < R; ++r) vs_of[r] = s.virtual_stage(s.ranks[r].stage, 0);

  struct event {
    double t;
    std::uint64_t seq;
    int kind;  // 0: rank r finished its op; 1: activation for (vs, mb) arrived; 2: gradient arrived
    int rank;
    int vs;
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
    const int vs = vs_of[r];
    const std::size_t per = 1U + (back[static_cast<std::size_t>(vs)] ? 1U : 0U) +
                            (back[static_cast<std::size_t>(vs)] && s.has_weight(vs) ? 1U : 0U);
    remaining += fixed[r].empty() ? per * flows[r].size() : fixed[r].size();
    if (vs == 0 && fixed[r].empty())
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
  // The next op of a fixed-order rank, if its input has arrived.
  const auto next_fixed = [&](std::size_t r, schedule_op& o) {
    if (next[r] == fixed[r].size()) return false;
    o = fixed[r][next[r]];
    const int vs = s.virtual_stage(o);
    const std::size_t k = key(vs, o.microbatch);
    const bool ready = o.kind == op_kind::forward    ? (vs == 0 || act_ready[k] != 0)
                       : o.kind == op_kind::backward ? grad_ready[k] != 0
                                                     : true;
    if (ready) ++next[r];
    return ready;
  };
  // The next op of a greedy rank by the priorities in the file comment, if any.
  const auto next_greedy = [&](std::size_t r, schedule_op& o) {
    const int stage = s.ranks[r].stage;
    const bool has_b = back[static_cast<std::size_t>(vs_of[r])] != 0;
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
      return false;
    }
    return true;
  };
  const auto try_start = [&](std::size_t r, double now) {
    schedule_op o;
    if (busy[r] || !(fixed[r].empty() ? next_greedy(r, o) : next_fixed(r, o))) return;
    busy[r] = 1;
    running[r] = o;
    s.ops[r].push_back(o);
    q.push({now + cost_of(r, o), seq++, 0, static_cast<int>(r), 0, o.microbatch});
  };
  // An arrival at rank r: queued for a greedy rank, marked for a fixed one.
  const auto arrive = [&](std::size_t r, bool grad, int vs, int mb) {
    if (!fixed[r].empty())
      (grad ? grad_ready : act_ready)[key(vs, mb)] = 1;
    else
      (grad ? bq : fq)[r].push_back(mb);
  };
  // Sends the tensor of (vs, mb) produced on rank r to the owner of `to_vs`.
  const auto send = [&](std::size_t r, const schedule_op& o, int to_vs, double now) {
    const bool grad = o.kind != op_kind::forward;
    const int to = owner[key(to_vs, o.microbatch)];
    const schedule_op snd = schedule_op::send(grad ? op_kind::send_grad : op_kind::send_act,
                                              o.stage, o.chunk, o.microbatch, to);
    const double at = to == static_cast<int>(r) ? now : deliver(r, to, now, cost_of(r, snd));
    q.push({at, seq++, grad ? 2 : 1, to, to_vs, o.microbatch});
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
      if (e.kind != 0) {
        arrive(r, e.kind == 2, e.vs, e.mb);
      } else {
        busy[r] = 0;
        --remaining;
        const schedule_op o = running[r];
        const int vs = s.virtual_stage(o);
        const bool has_b = back[static_cast<std::size_t>(vs)] != 0;
        if (o.kind == op_kind::forward) {
          if (vs + 1 < V)
            send(r, o, vs + 1, now);
          else if (has_b)
            arrive(r, true, vs, o.microbatch);
        } else if (o.kind == op_kind::backward) {
          if (s.has_weight(vs) && fixed[r].empty())
            wq[r].push_back(o.microbatch);
          else
            --inflight[r];
          if (vs > 0 && back[static_cast<std::size_t>(vs - 1)]) send(r, o, vs - 1, now);
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
