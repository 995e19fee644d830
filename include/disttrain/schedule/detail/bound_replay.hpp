#pragma once
/// @file bound_replay.hpp
/// @brief Internal: replays a `bound_world` as the executor runs it, with
/// durations (the simulator) or without (the validator).
///
/// Semantics (those of exec/executor.hpp): each rank runs its ops in order on
/// one compute stream. A send is posted when reached; the rank's outgoing
/// messages leave one at a time in program order (one NIC per GPU), each
/// taking `transfer` seconds from when the previous one left, while the rank
/// goes on computing; a receive waits for the next message on its link (sender,
/// receiver), which must carry the same tag, byte count and stamp (messages
/// between two ranks match in program order, as NCCL requires). `grad_sync_start`
/// joins the bucket's collective; `grad_sync_finish` waits until every member
/// of the DP group joined, plus `reduce` seconds. Receivers do not contend.
///
/// The replay sweeps the ranks, running every op that can run, until all
/// finish; a sweep without progress is a deadlock, reported with the op each
/// blocked rank waits at. O(ops + messages) per sweep of progress.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/bound_program.hpp"

namespace disttrain::detail {

/// @brief Start and end of one replayed op (seconds from the iteration start):
/// compute ops on the rank's stream; a send from posting to arrival (queued
/// behind the rank's earlier sends; the rank does not wait for it); a receive from reaching the op until its message is
/// there; `grad_sync_start` zero-length; `grad_sync_finish` the wait for the
/// bucket's reduction.
struct bound_interval {
  double start = 0.0;
  double end = 0.0;
};

/// @brief Checks what can be checked op by op: peers, bytes, tags, groups.
inline void check_bound_shape(const bound_world& w) {
  const int R = w.world_size();
  for (int r = 0; r < R; ++r) {
    const bound_program& p = w.programs[static_cast<std::size_t>(r)];
    require(p.rank == r, cat("bound_world.programs[", r, "].rank"), "is ", p.rank, ", expected ",
            r);
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const bound_op& b = p.ops[i];
      if (is_p2p(b.op.kind)) {
        if (b.op.peer < 0 || b.op.peer >= R || b.op.peer == r)
          fail(errc::schedule_error, describe(w, r, i), "peer ", b.op.peer,
               " is not another rank of the world of ", R);
        if (b.bytes < 0 || b.tag < 0)
          fail(errc::schedule_error, describe(w, r, i), "needs bytes >= 0 and tag >= 0");
      }
      if ((b.op.kind == op_kind::grad_sync_start || b.op.kind == op_kind::grad_sync_finish) &&
          !std::binary_search(p.dp_group.begin(), p.dp_group.end(), r))
        fail(errc::schedule_error, describe(w, r, i), "rank ", r,
             " is not in its own DP group (bound_program.dp_group)");
    }
  }
}

/// @brief Replays `w` (see the file comment). `D` provides
/// `compute(rank, op)`, `transfer(src, dst, bytes)` and `reduce(rank, op)`
/// in seconds. Fills `times` (per rank, per op; `I` is `bound_interval` or
/// another aggregate `{start, end}` of doubles, e.g. the simulator's); throws
/// `schedule_error` naming the op for a mismatched message, a missing receive
/// or a deadlock.
template <class D, class I = bound_interval>
void replay_bound(const bound_world& w, const D& d, std::vector<std::vector<I>>& times) {
  check_bound_shape(w);
  const std::size_t R = w.programs.size();
  times.assign(R, {});
  for (std::size_t r = 0; r < R; ++r) times[r].assign(w.programs[r].ops.size(), {});
  struct in_flight {
    int rank;
    std::size_t index;
    double arrival;
  };
  std::map<std::pair<int, int>, std::deque<in_flight>> links;  // (src, dst) -> sent, unreceived
  struct collective {
    std::vector<int> group;
    std::size_t joined = 0;
    double last_join = 0.0;
  };
  std::map<std::pair<int, int>, collective> colls;  // (first rank of the group, tag) -> state
  std::vector<std::size_t> pc(R, 0);
  std::vector<double> clock(R, 0.0);
  std::vector<double> sent(R, 0.0);  // per rank: when its last message left
  const auto key_of = [&](std::size_t r, const bound_op& b) {
    const auto& g = w.programs[r].dp_group;
    return std::pair<int, int>{g.front(), b.tag};
  };
  std::size_t finished = 0;
  for (std::size_t r = 0; r < R; ++r) finished += w.programs[r].ops.empty() ? 1U : 0U;
  while (finished < R) {
    bool progress = false;
    for (std::size_t r = 0; r < R; ++r) {
      const bound_program& p = w.programs[r];
      while (pc[r] < p.ops.size()) {
        const std::size_t i = pc[r];
        const bound_op& b = p.ops[i];
        const int me = static_cast<int>(r);
        double& t = clock[r];
        I& iv = times[r][i];
        if (is_send(b.op.kind)) {
          // Posted at t, leaves after the rank's earlier messages; the rank goes on.
          iv = {t, std::max(t, sent[r]) + d.transfer(me, b.op.peer, b.bytes)};
          sent[r] = iv.end;
          links[{me, b.op.peer}].push_back({me, i, iv.end});
        } else if (is_recv(b.op.kind)) {
          auto it = links.find({b.op.peer, me});
          if (it == links.end() || it->second.empty()) break;  // blocked
          const in_flight m = it->second.front();
          const bound_op& s = w.programs[static_cast<std::size_t>(m.rank)].ops[m.index];
          if (s.tag != b.tag || s.bytes != b.bytes || s.stamp != b.stamp ||
              (s.op.kind == op_kind::send_act) != (b.op.kind == op_kind::recv_act))
            fail(errc::schedule_error, describe(w, me, i), "matches ", describe(w, m.rank, m.index),
                 " (messages between two ranks match in program order; tag, bytes, kind and "
                 "stamp must agree: a different stamp means the two were bound from different "
                 "inputs)");
          it->second.pop_front();
          iv = {t, std::max(t, m.arrival)};
          t = iv.end;
        } else if (b.op.kind == op_kind::grad_sync_start) {
          collective& c = colls[key_of(r, b)];
          if (c.group.empty()) c.group = p.dp_group;
          if (c.group != p.dp_group)
            fail(errc::schedule_error, describe(w, me, i),
                 "DP group differs from another member's for the same bucket");
          ++c.joined;
          c.last_join = std::max(c.last_join, t);
          iv = {t, t};
        } else if (b.op.kind == op_kind::grad_sync_finish) {
          auto it = colls.find(key_of(r, b));
          if (it == colls.end())
            fail(errc::schedule_error, describe(w, me, i), "finishes a bucket it never started");
          if (it->second.joined < it->second.group.size()) break;  // blocked
          iv = {t, std::max(t, it->second.last_join + d.reduce(me, b))};
          t = iv.end;
        } else {
          iv = {t, t + d.compute(me, b)};
          t = iv.end;
        }
        ++pc[r];
        progress = true;
        if (pc[r] == p.ops.size()) ++finished;
      }
    }
    if (!progress) {
      std::string msg;
      for (std::size_t r = 0; r < R; ++r)
        if (pc[r] < w.programs[r].ops.size())
          msg += cat("\n  ", describe(w, static_cast<int>(r), pc[r]));
      fail(errc::schedule_error, "bound_world", "deadlock: no rank can proceed; blocked at:", msg);
    }
  }
  for (const auto& [link, q] : links)
    if (!q.empty())
      fail(errc::schedule_error, describe(w, q.front().rank, q.front().index),
           "has no matching receive on rank ", link.second);
}

}  // namespace disttrain::detail
