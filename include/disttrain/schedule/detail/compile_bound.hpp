#pragma once
/// @file compile_bound.hpp
/// @brief Internal: a bound world (schedule/bound_program.hpp) checked and
/// compiled into the program the one replay runs (replay.hpp), for
/// `validate_bound` and `simulate_bound`.
///
/// Checks: every peer is another rank of the world with bytes and tag >= 0;
/// messages between two ranks match in program order (the k-th send from A to
/// B is the k-th receive on B from A, as MPI and NCCL match them) and agree on
/// tag, byte count, kind and stamp; every send has its receive and every
/// receive its send; a rank is in its own DP group, starts each bucket once and
/// finishes only buckets it started; the members of a bucket name one group.
/// A bucket is the collective (first rank of its DP group, tag).
///
/// Timing conventions of a bound world: a channel is a GPU's outgoing messages
/// (one NIC: they leave one at a time in program order, each arriving
/// `transfer` after it left, while the rank computes on); each bucket is its
/// own group, so a bucket's reduction starts when its last member joined,
/// whatever the group's other buckets do. Receivers do not contend.
/// O(ops x peers per rank).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/detail/compiled.hpp"

namespace disttrain::detail {

/// @brief Checks what can be checked op by op: peers, bytes, tags, groups.
inline void check_bound_shape(const bound_world& w) {
  const int R = w.world_size();
  for (int r = 0; r < R; ++r) {
    const bound_program& p = w.programs[static_cast<std::size_t>(r)];
    require(
        p.rank == r, [&] { return cat("bound_world.programs[", r, "].rank"); }, "is ", p.rank,
        ", expected ", r);
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

/// @brief Names flat op i of a world compiled by `compile_bound`.
inline std::string name_bound_op(const bound_world& w, const compiled_program& c, std::size_t i) {
  const int r = c.rank_of[i];
  return describe(w, r, i - c.begin[static_cast<std::size_t>(r)]);
}

/// @brief Compiles `w` into `c` (see the file comment), reusing `c`'s storage;
/// throws `schedule_error` naming the op for a mismatched or unmatched message.
inline void compile_bound(const bound_world& w, compiled_program& c) {
  check_bound_shape(w);
  const std::size_t R = w.programs.size();
  c.reset(
      R, [&](std::size_t r) { return w.programs[r].ops.size(); },
      [&](std::size_t r, std::size_t k) { return w.programs[r].ops[k].op.kind; });
  const std::size_t n = c.num_ops();
  const auto name = [&](std::size_t i) { return name_bound_op(w, c, i); };
  const auto op = [&](std::size_t i) -> const bound_op& {
    const auto r = static_cast<std::size_t>(c.rank_of[i]);
    return w.programs[r].ops[i - c.begin[r]];
  };
  // 1. Messages: per (sender, receiver) pair, sends and receives matched in
  //    program order. Pairs are numbered per sender (a rank has few peers:
  //    a linear search of its list), sends grouped by pair in program order
  //    (a counting sort), and each receive takes its pair's next send.
  c.num_channels = R;                                                // one per sender: its NIC
  std::vector<std::vector<std::pair<int, std::uint32_t>>> peers(R);  // sender -> (receiver, pair)
  std::uint32_t pairs = 0;
  const auto pair_of = [&](std::size_t src, int dst, bool add) -> std::uint32_t {
    auto& list = peers[src];
    for (const auto& [d, id] : list)
      if (d == dst) return id;
    if (!add) return UINT32_MAX;
    list.emplace_back(dst, pairs);
    return pairs++;
  };
  std::vector<std::uint32_t> send_pair(n, UINT32_MAX);
  for (std::size_t i = 0; i < n; ++i)
    if (is_send(c.kind[i])) {
      const auto src = static_cast<std::size_t>(c.rank_of[i]);
      send_pair[i] = pair_of(src, op(i).op.peer, true);
      c.channel[i] = static_cast<op_index>(src);
    }
  // Pair p's sends are sends[first[p] .. first[p + 1]), in program order.
  std::vector<std::size_t> first(std::size_t{pairs} + 1, 0);
  for (std::size_t i = 0; i < n; ++i)
    if (send_pair[i] != UINT32_MAX) ++first[send_pair[i] + 1];
  for (std::size_t p = 0; p < pairs; ++p) first[p + 1] += first[p];
  std::vector<op_index> sends(first.back());
  std::vector<std::size_t> cursor(first.begin(), first.end() - 1);  // fill, then take
  for (std::size_t i = 0; i < n; ++i)
    if (send_pair[i] != UINT32_MAX) sends[cursor[send_pair[i]]++] = static_cast<op_index>(i);
  std::copy(first.begin(), first.end() - 1, cursor.begin());
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_recv(c.kind[i])) continue;
    const bound_op& b = op(i);
    const std::uint32_t p = pair_of(static_cast<std::size_t>(b.op.peer), c.rank_of[i], false);
    if (p == UINT32_MAX || cursor[p] == first[p + 1])
      fail(errc::schedule_error, name(i), "has no matching send on rank ", b.op.peer);
    const op_index snd = sends[cursor[p]++];
    const bound_op& m = op(snd);
    if (m.tag != b.tag || m.bytes != b.bytes || m.stamp != b.stamp ||
        (m.op.kind == op_kind::send_act) != (b.op.kind == op_kind::recv_act))
      fail(errc::schedule_error, name(i), "matches ", name(snd),
           " (messages between two ranks match in program order; tag, bytes, kind and "
           "stamp must agree: a different stamp means the two were bound from different "
           "inputs)");
    c.link[i] = snd;
    c.link[snd] = static_cast<op_index>(i);
    c.channel[i] = c.channel[snd];
  }
  for (std::size_t i = 0; i < n; ++i)
    if (is_send(c.kind[i]) && c.link[i] == no_op)
      fail(errc::schedule_error, name(i), "has no matching receive on rank ", op(i).op.peer);

  // 2. Buckets: (first rank of the DP group, tag) -> collective, each its own group.
  std::map<std::pair<int, int>, std::size_t> ids;
  const auto key_of = [&](std::size_t i) {
    const bound_program& p = w.programs[static_cast<std::size_t>(c.rank_of[i])];
    return std::pair<int, int>{p.dp_group.front(), op(i).tag};
  };
  for (std::size_t i = 0; i < n; ++i)
    if (c.kind[i] == op_kind::grad_sync_start) ids.emplace(key_of(i), 0);
  std::size_t next = 0;
  for (auto& [key, id] : ids) id = next++;
  c.coll_group.resize(ids.size());
  c.group_ranks.assign(ids.size(), {});
  c.coll_begin.assign(ids.size() + 1, 0);
  std::vector<op_index> started(ids.size(), no_op);  // per rank: its start of each bucket
  for (std::size_t r = 0; r < R; ++r) {
    const bound_program& p = w.programs[r];
    for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
      if (c.kind[i] != op_kind::grad_sync_start && c.kind[i] != op_kind::grad_sync_finish) continue;
      const auto it = ids.find(key_of(i));
      if (c.kind[i] == op_kind::grad_sync_finish) {
        if (it == ids.end() || started[it->second] == no_op)
          fail(errc::schedule_error, name(i), "finishes a bucket it never started");
        c.link[i] = started[it->second];
        continue;
      }
      const std::size_t id = it->second;
      if (started[id] != no_op) fail(errc::schedule_error, name(i), "starts its bucket twice");
      started[id] = static_cast<op_index>(i);
      c.link[i] = static_cast<op_index>(id);
      auto& group = c.group_ranks[id];
      if (group.empty()) group = p.dp_group;
      if (group != p.dp_group)
        fail(errc::schedule_error, name(i),
             "DP group differs from another member's for the same bucket");
    }
    for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i)
      if (c.kind[i] == op_kind::grad_sync_start) started[c.link[i]] = no_op;
  }
  for (std::size_t id = 0; id < ids.size(); ++id) {
    c.coll_group[id] = id;
    c.coll_begin[id + 1] = c.coll_begin[id] + c.group_ranks[id].size();
  }
}

}  // namespace disttrain::detail
