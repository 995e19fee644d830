#pragma once
/// @file replay.hpp
/// @brief Internal: the one event-driven replay of a compiled program
/// (compiled.hpp): schedules and bound worlds, simulated or validated.
///
/// Semantics (the executor's): each rank runs its ops in order on one compute
/// stream. A send is issued on the stream and moves on its channel (a link
/// between schedule ranks, or a GPU's NIC in a bound world), one message at a
/// time in issue order, taking its duration; with overlap the stream
/// continues at once, without it the stream waits for the transfer. A receive
/// blocks the stream until its message has arrived. A grad_sync_start issues
/// the bucket's collective; the collective starts when every member has
/// issued it and its group's previous collective is done; a member's
/// grad_sync_finish blocks until the collective's start plus that member's
/// duration (the group is busy for the longest). The replay is a worklist over
/// ranks: each advances until it blocks, and a send or completed collective
/// wakes the ranks waiting on it. O(ops). If the worklist empties while a rank
/// still has ops, the program deadlocks.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "disttrain/schedule/detail/compiled.hpp"

namespace disttrain::detail {

/// @brief Start and end of one replayed op, seconds (the validators' interval;
/// the simulators use their own with the same two members).
struct interval {
  double start = 0.0;
  double end = 0.0;
};

/// @brief Buffers of one replay, reused across runs (no allocation once sized).
struct replay_state {
  std::vector<op_index> pred;     ///< per op: the op whose completion set its start (critical path)
  std::vector<double> rank_end;   ///< per rank: when its stream finished
  std::vector<std::size_t> pc;    ///< per rank: next op
  std::vector<char> blocked;      ///< per rank
  std::vector<double> chan_free;  ///< per link
  std::vector<op_index> chan_last;
  std::vector<std::size_t> coll_count;
  std::vector<op_index> coll_bind;
  std::vector<op_index> coll_ops;  ///< start ops of each collective (arrival order)
  std::vector<double> coll_ready;
  std::vector<char> coll_done;
  std::vector<double> group_free;  ///< per DP group (stage)
  std::vector<op_index> group_last;
  std::vector<int> work;
  bool deadlocked = false;
};

/// @brief Replays `c`. On entry `times[i].end` holds op i's duration (compute:
/// run time; send: transfer time; grad_sync_start: the member's collective
/// time; others ignored; all >= 0); the replay reads it, then overwrites
/// `times[i]` with the op's interval (sends: the transfer; grad_sync_start:
/// the collective as this member sees it).
/// `times` has one entry per op (no separate duration table to fill).
/// Returns false on deadlock (`st.pc` then shows each rank's blocked op).
/// A receive's message has arrived once its sender's program counter has
/// passed the send (ranks advance one at a time), at `times[send].end`.
template <class Interval>
inline bool replay(const compiled_program& c, bool overlap, replay_state& st, Interval* times) {
  const std::size_t n = c.num_ops();
  const std::size_t R = c.num_ranks();
  const std::size_t C = c.num_collectives();
  st.pred.resize(n);
  st.rank_end.assign(R, 0.0);
  st.pc.assign(c.begin.begin(), c.begin.end() - 1);
  st.blocked.assign(R, 0);
  st.chan_free.assign(c.num_channels, 0.0);
  st.chan_last.assign(c.num_channels, no_op);
  st.coll_count.assign(C, 0);
  st.coll_bind.assign(C, no_op);
  st.coll_ready.assign(C, 0.0);
  st.coll_done.assign(C, 0);
  st.group_free.assign(c.group_ranks.size(), 0.0);
  st.group_last.assign(c.group_ranks.size(), no_op);
  st.coll_ops.assign(c.coll_begin.back(), no_op);
  st.work.clear();
  for (std::size_t r = R; r-- > 0;) st.work.push_back(static_cast<int>(r));

  // Raw pointers: the hot loop stores through them without the vectors being reloaded.
  const op_kind* const kind = c.kind.data();
  const int* const rank_of = c.rank_of.data();
  const op_index* const link = c.link.data();
  const op_index* const channel = c.channel.data();
  const std::size_t* const begin = c.begin.data();
  op_index* const pred = st.pred.data();
  double* const chan_free = st.chan_free.data();
  op_index* const chan_last = st.chan_last.data();
  std::size_t* const pc = st.pc.data();
  char* const blocked = st.blocked.data();

  const auto wake = [&](std::size_t rank) {
    if (blocked[rank]) {
      blocked[rank] = 0;
      st.work.push_back(static_cast<int>(rank));
    }
  };

  while (!st.work.empty()) {
    const auto r = static_cast<std::size_t>(st.work.back());
    st.work.pop_back();
    std::size_t i = pc[r];
    const std::size_t first = begin[r];
    const std::size_t stop = begin[r + 1];
    double t = st.rank_end[r];
    bool waiting = false;
    for (; i < stop; ++i) {
      const op_index prev = i > first ? static_cast<op_index>(i - 1) : no_op;
      switch (kind[i]) {
        case op_kind::forward:
        case op_kind::backward:
        case op_kind::weight:
        case op_kind::optimizer_step:
          times[i].start = t;
          t += times[i].end;  // the duration (read before it is overwritten)
          times[i].end = t;
          pred[i] = prev;
          break;
        case op_kind::send_act:
        case op_kind::send_grad: {
          const std::size_t ch = channel[i];
          const bool busy = chan_free[ch] > t;
          const double xs = busy ? chan_free[ch] : t;
          const double xe = xs + times[i].end;
          times[i].start = xs;
          times[i].end = xe;
          pred[i] = busy ? chan_last[ch] : prev;
          chan_free[ch] = xe;
          chan_last[ch] = static_cast<op_index>(i);
          if (!overlap) t = xe;
          const auto rr = static_cast<std::size_t>(rank_of[link[i]]);
          if (pc[rr] == link[i]) wake(rr);
          break;
        }
        case op_kind::recv_act:
        case op_kind::recv_grad: {
          const op_index snd = link[i];
          if (pc[static_cast<std::size_t>(rank_of[snd])] <= snd) {  // not sent yet
            waiting = true;
            break;
          }
          const double a = times[snd].end;
          times[i].start = t;
          if (a > t) {
            t = a;
            pred[i] = snd;
          } else {
            pred[i] = prev;
          }
          times[i].end = t;
          break;
        }
        case op_kind::grad_sync_start: {
          // times[i].end keeps this member's duration until the collective starts.
          const std::size_t id = link[i];
          times[i].start = t;
          pred[i] = prev;
          st.coll_ops[c.coll_begin[id] + st.coll_count[id]] = static_cast<op_index>(i);
          if (st.coll_count[id] == 0 || t > st.coll_ready[id]) {
            st.coll_ready[id] = t;
            st.coll_bind[id] = static_cast<op_index>(i);
          }
          if (++st.coll_count[id] == c.coll_begin[id + 1] - c.coll_begin[id]) {
            const std::size_t g = c.coll_group[id];
            double cs = st.coll_ready[id];
            if (st.group_free[g] > cs) {  // the group is still busy with its previous collective
              cs = st.group_free[g];
              pred[st.coll_bind[id]] = st.group_last[g];
            }
            double ce = cs;
            for (std::size_t k = c.coll_begin[id]; k < c.coll_begin[id + 1]; ++k) {
              const std::size_t m = st.coll_ops[k];
              times[m].end += cs;  // the member's duration -> its end
              times[m].start = cs;
              ce = std::max(ce, times[m].end);
            }
            st.coll_done[id] = 1;
            st.group_free[g] = ce;
            st.group_last[g] = st.coll_bind[id];
            for (const int mr : c.group_ranks[g]) {
              const auto mrs = static_cast<std::size_t>(mr);
              if (mrs != r && pc[mrs] < begin[mrs + 1] &&
                  kind[pc[mrs]] == op_kind::grad_sync_finish && c.collective(pc[mrs]) == id)
                wake(mrs);
            }
          }
          break;
        }
        case op_kind::grad_sync_finish: {
          const op_index start = link[i];  // this rank's grad_sync_start of the bucket
          const std::size_t id = link[start];
          if (!st.coll_done[id]) {
            waiting = true;
            break;
          }
          times[i].start = t;
          if (times[start].end > t) {
            t = times[start].end;
            pred[i] = st.coll_bind[id];
          } else {
            pred[i] = prev;
          }
          times[i].end = t;
          break;
        }
      }
      if (waiting) break;
    }
    pc[r] = i;
    st.rank_end[r] = t;
    if (waiting) blocked[r] = 1;
  }
  st.deadlocked = false;
  for (std::size_t r = 0; r < R; ++r)
    if (pc[r] < begin[r + 1]) st.deadlocked = true;
  return !st.deadlocked;
}

/// @brief Throws `schedule_error` at `where` (or at the first blocked op when
/// empty) listing the first blocked op of every unfinished rank; `name(i)`
/// names flat op i.
template <class Name>
[[noreturn]] void report_deadlock(const compiled_program& c, const replay_state& st,
                                  std::string where, const Name& name) {
  std::string msg = "deadlock: no rank can proceed; blocked at: ";
  bool first = true;
  for (std::size_t r = 0; r < c.num_ranks(); ++r) {
    const std::size_t i = st.pc[r];
    if (i >= c.begin[r + 1]) continue;
    const std::string n = name(i);
    if (where.empty()) where = n;
    msg += first ? "" : "; ";
    msg += n;
    if (is_recv(c.kind[i]))
      msg += cat(" waits for ", name(c.link[i]));
    else if (c.kind[i] == op_kind::grad_sync_finish)
      msg += " waits for the other members to start the bucket";
    first = false;
  }
  fail(errc::schedule_error, where, msg);
}

}  // namespace disttrain::detail
