#pragma once
/// @file replay.hpp
/// @brief Internal: event-driven replay of a compiled schedule.
///
/// Semantics (the executor's): each rank runs its ops in order on one compute
/// stream. A send is issued on the stream and moves on the directed link
/// (src, dst), one message at a time in issue order, taking its duration; with
/// overlap the stream continues at once, without it the stream waits for the
/// transfer. A receive blocks the stream until its message has arrived. A
/// grad_sync_start issues bucket b's collective on the rank's DP group; the
/// collective starts when every member has issued it and the group's previous
/// collective is done, and occupies the group's channel for its duration;
/// grad_sync_finish blocks until it is done. The replay is a worklist over
/// ranks: each advances until it blocks, and a send or completed collective
/// wakes the ranks waiting on it. O(ops). If the worklist empties while a rank
/// still has ops, the schedule deadlocks.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "disttrain/schedule/detail/compiled.hpp"

namespace disttrain::detail {

/// @brief Buffers of one replay, reused across runs (no allocation once sized).
struct replay_state {
  std::vector<double> start, end;    ///< per op; sends: transfer interval; grad_sync_start: collective interval
  std::vector<std::size_t> pred;     ///< per op: the op whose completion set its start (critical path)
  std::vector<double> rank_end;      ///< per rank: when its stream finished
  std::vector<std::size_t> pc;       ///< per rank: next op
  std::vector<char> blocked;         ///< per rank
  std::vector<char> issued;          ///< per op (sends)
  std::vector<double> chan_free;     ///< per link
  std::vector<std::size_t> chan_last;
  std::vector<std::size_t> coll_count, coll_bind;
  std::vector<std::size_t> coll_ops;  ///< start ops of each collective (arrival order)
  std::vector<double> coll_ready, coll_start, coll_end;
  std::vector<char> coll_done;
  std::vector<double> group_free;    ///< per DP group (stage)
  std::vector<std::size_t> group_last;
  std::vector<int> work;
  bool deadlocked = false;
};

/// @brief Replays `c` with per-op durations `dur` (compute: run time; send:
/// transfer time; grad_sync_start: collective time; others ignored).
/// Returns false on deadlock (`st.pc` then shows each rank's blocked op).
inline bool replay(const compiled_schedule& c, const std::vector<double>& dur, bool overlap, replay_state& st) {
  const std::size_t n = c.ops.size();
  const std::size_t R = c.num_ranks();
  const std::size_t C = c.num_collectives();
  st.start.assign(n, 0.0);
  st.end.assign(n, 0.0);
  st.pred.assign(n, npos);
  st.rank_end.assign(R, 0.0);
  st.pc.assign(c.begin.begin(), c.begin.end() - 1);
  st.blocked.assign(R, 0);
  st.issued.assign(n, 0);
  st.chan_free.assign(c.num_channels, 0.0);
  st.chan_last.assign(c.num_channels, npos);
  st.coll_count.assign(C, 0);
  st.coll_bind.assign(C, npos);
  st.coll_ready.assign(C, 0.0);
  st.coll_start.assign(C, 0.0);
  st.coll_end.assign(C, 0.0);
  st.coll_done.assign(C, 0);
  st.group_free.assign(c.group_ranks.size(), 0.0);
  st.group_last.assign(c.group_ranks.size(), npos);
  st.work.clear();
  for (std::size_t r = R; r-- > 0;) st.work.push_back(static_cast<int>(r));
  std::vector<std::size_t>& coll_ops = st.coll_ops;
  coll_ops.assign(c.coll_begin.back(), npos);

  const auto wake = [&](std::size_t rank) {
    if (st.blocked[rank]) {
      st.blocked[rank] = 0;
      st.work.push_back(static_cast<int>(rank));
    }
  };

  while (!st.work.empty()) {
    const auto r = static_cast<std::size_t>(st.work.back());
    st.work.pop_back();
    std::size_t& i = st.pc[r];
    const std::size_t stop = c.begin[r + 1];
    double t = st.rank_end[r];
    for (; i < stop; ++i) {
      const std::size_t prev = i > c.begin[r] ? i - 1 : npos;
      const auto& o = c.ops[i];
      switch (o.kind) {
        case op_kind::forward:
        case op_kind::backward:
        case op_kind::weight:
        case op_kind::optimizer_step:
          st.start[i] = t;
          t += dur[i];
          st.end[i] = t;
          st.pred[i] = prev;
          break;
        case op_kind::send_act:
        case op_kind::send_grad: {
          const std::size_t ch = c.channel[i];
          const bool busy = st.chan_free[ch] > t;
          const double xs = busy ? st.chan_free[ch] : t;
          st.start[i] = xs;
          st.end[i] = xs + dur[i];
          st.pred[i] = busy ? st.chan_last[ch] : prev;
          st.chan_free[ch] = st.end[i];
          st.chan_last[ch] = i;
          st.issued[i] = 1;
          if (!overlap) t = st.end[i];
          const std::size_t rcv = c.link[i];
          const auto rr = static_cast<std::size_t>(c.rank_of[rcv]);
          if (st.pc[rr] == rcv) wake(rr);
          break;
        }
        case op_kind::recv_act:
        case op_kind::recv_grad: {
          const std::size_t snd = c.link[i];
          if (!st.issued[snd]) {
            st.blocked[r] = 1;
            st.rank_end[r] = t;
            goto next_rank;
          }
          st.start[i] = t;
          if (st.end[snd] > t) {
            t = st.end[snd];
            st.pred[i] = snd;
          } else {
            st.pred[i] = prev;
          }
          st.end[i] = t;
          break;
        }
        case op_kind::grad_sync_start: {
          const std::size_t id = c.link[i];
          st.start[i] = t;
          st.end[i] = t;
          st.pred[i] = prev;
          coll_ops[c.coll_begin[id] + st.coll_count[id]] = i;
          if (st.coll_count[id] == 0 || t > st.coll_ready[id]) {
            st.coll_ready[id] = t;
            st.coll_bind[id] = i;
          }
          if (++st.coll_count[id] == c.coll_begin[id + 1] - c.coll_begin[id]) {
            const std::size_t g = c.coll_group[id];
            double cs = st.coll_ready[id];
            if (st.group_free[g] > cs) {  // the group's channel is still busy with its previous bucket
              cs = st.group_free[g];
              st.pred[st.coll_bind[id]] = st.group_last[g];
            }
            const double ce = cs + dur[i];
            st.coll_start[id] = cs;
            st.coll_end[id] = ce;
            st.coll_done[id] = 1;
            st.group_free[g] = ce;
            st.group_last[g] = st.coll_bind[id];
            for (std::size_t k = c.coll_begin[id]; k < c.coll_begin[id + 1]; ++k) {
              const std::size_t m = coll_ops[k];
              st.start[m] = cs;
              st.end[m] = ce;
            }
            for (const int mr : c.group_ranks[g]) {
              const auto mrs = static_cast<std::size_t>(mr);
              if (mrs != r && st.pc[mrs] < c.begin[mrs + 1] && c.ops[st.pc[mrs]].kind == op_kind::grad_sync_finish &&
                  c.link[st.pc[mrs]] == id)
                wake(mrs);
            }
          }
          break;
        }
        case op_kind::grad_sync_finish: {
          const std::size_t id = c.link[i];
          if (!st.coll_done[id]) {
            st.blocked[r] = 1;
            st.rank_end[r] = t;
            goto next_rank;
          }
          st.start[i] = t;
          if (st.coll_end[id] > t) {
            t = st.coll_end[id];
            st.pred[i] = st.coll_bind[id];
          } else {
            st.pred[i] = prev;
          }
          st.end[i] = t;
          break;
        }
      }
    }
    st.rank_end[r] = t;
  next_rank:;
  }
  st.deadlocked = false;
  for (std::size_t r = 0; r < R; ++r)
    if (st.pc[r] < c.begin[r + 1]) st.deadlocked = true;
  return !st.deadlocked;
}

/// @brief Throws `schedule_error` listing the first blocked op of every unfinished rank.
[[noreturn]] inline void report_deadlock(const compiled_schedule& c, const replay_state& st) {
  std::string msg = "deadlock: ";
  std::string where;
  bool first = true;
  for (std::size_t r = 0; r < c.num_ranks(); ++r) {
    const std::size_t i = st.pc[r];
    if (i >= c.begin[r + 1]) continue;
    const std::string name = c.name_op(i);
    if (first) where = name;
    msg += first ? "" : "; ";
    msg += name;
    const auto& o = c.ops[i];
    if (is_recv(o.kind)) msg += cat(" waits for ", c.name_op(c.link[i]));
    else if (o.kind == op_kind::grad_sync_finish) msg += " waits for the other replicas to start the bucket";
    first = false;
  }
  fail(errc::schedule_error, where, msg);
}

}  // namespace disttrain::detail
