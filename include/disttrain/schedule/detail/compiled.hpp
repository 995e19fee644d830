#pragma once
/// @file compiled.hpp
/// @brief Internal: a schedule checked and flattened for fast replay.
///
/// `compile_schedule` performs every static check of `validate_schedule`
/// (shape, each F/B/W exactly once where required, local dependency order,
/// every cross-rank input received before use, every send matched by a receive,
/// per-link message order, gradient buckets started by every DP member) and
/// resolves each receive to its send and each grad-sync op to its collective,
/// so `replay` (replay.hpp) runs in O(ops). Complexity: O(n + b log b) for n
/// ops and b gradient buckets (times peers per rank for the link table).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain::detail {

inline constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

/// @brief A flat op index (32 bits: halves the memory the per-op tables touch).
using op_index = std::uint32_t;
/// @brief "No op" in an `op_index` table.
inline constexpr op_index no_op = std::numeric_limits<op_index>::max();

/// @brief Per rank, that rank's program: `pipeline_schedule::ops`.
using op_lists = std::vector<std::vector<schedule_op>>;

/// @brief A validated, flattened program: what `replay` (replay.hpp) reads.
/// Schedules (`compile_schedule`, below) and bound worlds (`compile_bound`,
/// compile_bound.hpp) compile into it, so both run on one replay.
///
/// All indices are flat op indices. `link[i]` depends on the op's kind:
/// receive -> its send, send -> its receive, grad_sync_start -> its
/// collective, grad_sync_finish -> the same rank's grad_sync_start of the
/// bucket, F -> the B or W that frees its activations (no_op if it keeps none
/// or the program does not say), that B or W -> its F.
///
/// A *channel* carries one message at a time: in a schedule the directed link
/// between two schedule ranks, in a bound world a GPU's outgoing messages (one
/// NIC). A *group* runs one collective at a time: in a schedule a stage's DP
/// replicas, in a bound world each bucket on its own (see compile_bound.hpp).
struct compiled_program {
  std::vector<op_kind> kind;       ///< flat op -> its kind
  std::vector<std::size_t> begin;  ///< rank r's ops are [begin[r], begin[r+1])
  std::vector<int> rank_of;        ///< flat op -> rank
  std::vector<op_index> link;      ///< see the struct comment
  std::vector<op_index> channel;   ///< send or receive -> its message's channel (no_op otherwise)
  std::size_t num_channels = 0;
  std::vector<std::size_t> coll_group;  ///< collective -> its group
  std::vector<std::size_t>
      coll_begin;  ///< collective c has coll_begin[c+1] - coll_begin[c] members
  std::vector<std::vector<int>> group_ranks;  ///< group -> its ranks

  [[nodiscard]] std::size_t num_ops() const noexcept { return kind.size(); }
  [[nodiscard]] std::size_t num_ranks() const noexcept {
    return begin.empty() ? 0 : begin.size() - 1;
  }
  [[nodiscard]] std::size_t num_collectives() const noexcept { return coll_group.size(); }
  /// @brief Whether op i (an F) keeps activations until a later B or W frees them.
  [[nodiscard]] bool holds(std::size_t i) const noexcept {
    return kind[i] == op_kind::forward && link[i] != no_op;
  }
  /// @brief The F whose activations op i (a B or W) frees, or no_op.
  [[nodiscard]] op_index releases(std::size_t i) const noexcept {
    return kind[i] == op_kind::backward || kind[i] == op_kind::weight ? link[i] : no_op;
  }
  /// @brief The collective of grad_sync_start or grad_sync_finish op i.
  [[nodiscard]] op_index collective(std::size_t i) const noexcept {
    return kind[i] == op_kind::grad_sync_finish ? link[link[i]] : link[i];
  }
  /// @brief Sizes the per-op tables for `R` ranks, rank r with `size_of(r)`
  /// ops of kinds `kind_of(r, k)`; clears the rest.
  template <class SizeOf, class KindOf>
  void reset(std::size_t R, const SizeOf& size_of, const KindOf& kind_of) {
    std::size_t n = 0;
    for (std::size_t r = 0; r < R; ++r) n += size_of(r);
    if (n >= static_cast<std::size_t>(no_op))
      fail(errc::invalid_argument, "program.ops", "has ", n, " ops, at most ", no_op - 1,
           " supported");
    kind.resize(n);
    rank_of.resize(n);
    begin.assign(R + 1, 0);
    for (std::size_t r = 0, i = 0; r < R; ++r) {
      begin[r] = i;
      for (std::size_t k = 0, m = size_of(r); k < m; ++k) {
        kind[i] = kind_of(r, k);
        rank_of[i++] = static_cast<int>(r);
      }
      begin[r + 1] = i;
    }
    link.assign(n, no_op);
    channel.assign(n, no_op);
    num_channels = 0;
    coll_group.clear();
    coll_begin.assign(1, 0);
    group_ranks.clear();
  }
};

/// @brief A compiled schedule: the program plus the schedule's shape.
///
/// It keeps no copy of the ops: members that need an op take the schedule's
/// `op_lists` (the one it was compiled from, or a copy of it).
struct compiled_schedule : compiled_program {
  pipeline_schedule meta;          ///< the schedule without its ops (names, segments, ranks)
  std::vector<int> peak_inflight;  ///< per rank: activations held at the peak (count)
  std::vector<op_index> scratch;   ///< compile_schedule's slot table, kept to reuse its storage

  /// @brief Flat op i of `ops`.
  [[nodiscard]] const schedule_op& op(const op_lists& ops, std::size_t i) const {
    const auto r = static_cast<std::size_t>(rank_of[i]);
    return ops[r][i - begin[r]];
  }
  /// @brief "rank 2 (pipeline stage 2 replica 0) op #5 F(stage 2, mb 1)".
  [[nodiscard]] std::string name_op(const op_lists& ops, std::size_t i) const {
    const int r = rank_of[i];
    return cat(meta.rank_name(r), " op #", i - begin[static_cast<std::size_t>(r)], " ",
               describe(op(ops, i)));
  }
};

/// @brief Builds the compiled form of `s` into `c`, reusing `c`'s storage;
/// throws `schedule_error` naming the first problem (`c` is then unspecified).
inline void compile_schedule(const pipeline_schedule& s, compiled_schedule& c) {
  check_schedule_shape(s);
  c.meta.name = s.name;
  c.meta.num_stages = s.num_stages;
  c.meta.num_chunks = s.num_chunks;
  c.meta.num_microbatches = s.num_microbatches;
  c.meta.split_backward = s.split_backward;
  c.meta.segments = s.segments;
  c.meta.ranks = s.ranks;
  c.meta.ops.clear();
  const std::size_t R = s.ranks.size();
  c.reset(
      R, [&](std::size_t r) { return s.ops[r].size(); },
      [&](std::size_t r, std::size_t k) { return s.ops[r][k].kind; });
  const std::size_t n = c.num_ops();
  const auto op = [&](std::size_t i) -> const schedule_op& { return c.op(s.ops, i); };
  const auto name = [&](std::size_t i) { return c.name_op(s.ops, i); };

  const int V = s.num_virtual_stages();
  const std::size_t M = static_cast<std::size_t>(s.num_microbatches);
  const auto back = backward_mask(s);
  const auto key = [&](int vs, int mb) {
    return static_cast<std::size_t>(vs) * M + static_cast<std::size_t>(mb);
  };
  const auto vname = [&](int vs, int mb) {
    const auto [st, chunk] = s.stage_chunk(vs);
    const auto& seg = s.segments[static_cast<std::size_t>(s.segment_of_stage(st))];
    std::string w = cat(seg.name, "/stage ", st);
    if (seg.chunks > 1) w += cat(" chunk ", chunk);
    return cat(w, " mb ", mb);
  };
  const auto err = [](const std::string& where, const auto&... parts) {
    fail(errc::schedule_error, where, parts...);
  };

  // 1. Where each F, B, W, send and receive of (virtual stage, microbatch) is:
  //    one record of NT_ entries per slot (the passes below read them together).
  const std::size_t slots = static_cast<std::size_t>(V) * M;
  enum { F_, B_, W_, SA_, RA_, SG_, RG_, NT_ };
  auto& pos_v = c.scratch;
  pos_v.assign(slots * NT_, no_op);
  const auto pos = [&](int t, std::size_t k) -> op_index& {
    return pos_v[k * NT_ + static_cast<std::size_t>(t)];
  };
  const auto table_of = [](op_kind k) -> int {
    switch (k) {
      case op_kind::forward: return F_;
      case op_kind::backward: return B_;
      case op_kind::weight: return W_;
      case op_kind::send_act: return SA_;
      case op_kind::recv_act: return RA_;
      case op_kind::send_grad: return SG_;
      case op_kind::recv_grad: return RG_;
      default: return -1;
    }
  };
  for (std::size_t r = 0; r < R; ++r) {
    std::size_t i = c.begin[r];
    for (const auto& o : s.ops[r]) {
      const int t = table_of(o.kind);
      if (t >= 0) {
        auto& slot = pos(t, key(s.virtual_stage(o), o.microbatch));
        if (slot != no_op) err(name(i), "duplicates ", name(slot));
        slot = static_cast<op_index>(i);
      }
      ++i;
    }
  }

  // 2. Compute ops: present exactly where required, in local dependency order.
  for (int vs = 0; vs < V; ++vs) {
    const bool need_b = back[static_cast<std::size_t>(vs)] != 0;
    const bool need_w = need_b && s.has_weight(vs);
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      const std::size_t k = key(vs, mb);
      const op_index f = pos(F_, k), b = pos(B_, k), w = pos(W_, k);
      if (f == no_op)
        err(vname(vs, mb), "F is missing (every microbatch's F must run once per stage)");
      if (need_b && b == no_op)
        err(vname(vs, mb), "B is missing (every microbatch's B must run once per stage)");
      if (!need_b && b != no_op)
        err(name(b), "stage runs no backward pass (nothing up to it is trainable)");
      if (need_w && w == no_op)
        err(vname(vs, mb), "W is missing (split backward of a trainable stage)");
      if (!need_w && w != no_op)
        err(name(w), s.split_backward ? "frozen stage has no weight gradients"
                                      : "schedule does not split the backward pass");
      if (b != no_op && (c.rank_of[b] != c.rank_of[f] || b < f))
        err(name(b), "must follow ", name(f), " on the same rank");
      if (w != no_op && (c.rank_of[w] != c.rank_of[b] || w < b))
        err(name(w), "must follow ", name(b), " on the same rank");
      if (need_b) {
        const op_index freer = need_w ? w : b;
        c.link[f] = freer;
        c.link[freer] = f;
      }
    }
  }

  // 3. Inputs: local ones earlier on the rank, remote ones received before use.
  const auto check_input = [&](op_index consumer, op_index producer, op_index recv, op_kind rk) {
    if (c.rank_of[producer] == c.rank_of[consumer]) {
      if (producer > consumer)
        err(name(consumer), "runs before its input ", name(producer), " on the same rank");
      if (recv != no_op && c.rank_of[recv] == c.rank_of[consumer])
        err(name(recv), "receives a tensor produced on the same rank");
      return;
    }
    if (recv == no_op || c.rank_of[recv] != c.rank_of[consumer] || recv > consumer)
      err(name(consumer), "has no preceding ", to_string(rk), " of the output of ", name(producer),
          " (missing receive)");
    if (op(recv).peer != c.rank_of[producer])
      err(name(recv), "names peer rank ", op(recv).peer, " but the tensor is produced on rank ",
          c.rank_of[producer]);
  };
  for (int vs = 0; vs < V; ++vs) {
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      const std::size_t k = key(vs, mb);
      if (vs > 0)
        check_input(pos(F_, k), pos(F_, key(vs - 1, mb)), pos(RA_, key(vs - 1, mb)),
                    op_kind::recv_act);
      if (vs + 1 < V && pos(B_, k) != no_op)
        check_input(pos(B_, k), pos(B_, key(vs + 1, mb)), pos(RG_, key(vs + 1, mb)),
                    op_kind::recv_grad);
    }
  }

  // 4. Sends: after the producer, to the consumer, matched by a receive.
  for (int vs = 0; vs < V; ++vs) {
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      const std::size_t k = key(vs, mb);
      for (int act = 1; act >= 0; --act) {
        const op_index snd = pos(act ? SA_ : SG_, k);
        const op_index rcv = pos(act ? RA_ : RG_, k);
        const op_index producer = pos(act ? F_ : B_, k);
        if (rcv != no_op && snd == no_op)
          err(name(rcv), "has no matching ", act ? "send_act" : "send_grad", " on rank ",
              op(rcv).peer, " (missing send)");
        if (snd == no_op) continue;
        if (rcv == no_op)
          err(name(snd), "has no matching ", act ? "recv_act" : "recv_grad", " on rank ",
              op(snd).peer, " (missing receive)");
        if (producer == no_op || c.rank_of[producer] != c.rank_of[snd] || snd < producer)
          err(name(snd), "must follow the op producing the tensor on the same rank");
        if (op(snd).peer != c.rank_of[rcv])
          err(name(snd), "names peer rank ", op(snd).peer, " but the receive is on rank ",
              c.rank_of[rcv]);
        c.link[snd] = rcv;
        c.link[rcv] = snd;
      }
    }
  }

  // 5. Links: messages between two ranks are matched in order (as NCCL p2p).
  //    Channel ids: rank-major, peers in order of first use (deterministic).
  //    Send and receive sets of a link are matched one to one (step 4), and a
  //    link's receives are all on one rank, so the order is right iff the
  //    receives of its sends, taken in send order, come in program order.
  {
    std::vector<int> peers;           // destinations of the current rank, index = channel offset
    std::vector<op_index> last_recv;  // per channel
    bool crossed = false;
    for (std::size_t r = 0; r < R; ++r) {
      const std::size_t base = c.num_channels;
      peers.clear();
      std::size_t i = c.begin[r];
      for (const auto& o : s.ops[r]) {
        if (is_send(o.kind)) {
          auto it = std::find(peers.begin(), peers.end(), o.peer);
          if (it == peers.end()) {
            peers.push_back(o.peer);
            last_recv.push_back(no_op);
            it = peers.end() - 1;
          }
          const std::size_t ch = base + static_cast<std::size_t>(it - peers.begin());
          const op_index rcv = c.link[i];
          c.channel[i] = c.channel[rcv] = static_cast<op_index>(ch);
          if (last_recv[ch] != no_op && rcv < last_recv[ch]) crossed = true;
          last_recv[ch] = rcv;
        }
        ++i;
      }
      c.num_channels = base + peers.size();
    }
    if (crossed) {  // name the first receive (in program order) whose message is not the next one sent
      std::vector<op_index> sent(c.num_channels, 0), received(c.num_channels, 0), seq(n, 0);
      for (std::size_t i = 0; i < n; ++i)
        if (is_send(c.kind[i])) seq[i] = sent[c.channel[i]]++;
      for (std::size_t i = 0; i < n; ++i) {
        if (!is_recv(c.kind[i])) continue;
        const op_index snd = c.link[i];
        const op_index k = received[c.channel[snd]]++;
        if (seq[snd] != k)
          err(name(i), "is receive #", k, " from rank ", c.rank_of[snd],
              ", but the message it matches is that rank's send #", seq[snd], " on this link, ",
              describe(op(snd)),
              " (crossed order: messages between two ranks are matched in the order they are "
              "sent)");
      }
    }
  }

  // 6. Gradient synchronisation: every DP member starts and then finishes each bucket once.
  {
    c.group_ranks.assign(static_cast<std::size_t>(s.num_stages), {});
    for (std::size_t r = 0; r < R; ++r)
      c.group_ranks[static_cast<std::size_t>(s.ranks[r].stage)].push_back(static_cast<int>(r));
    std::vector<std::uint64_t> keys;
    for (const auto& ops : s.ops)
      for (const auto& o : ops)
        if (o.kind == op_kind::grad_sync_start)
          keys.push_back((static_cast<std::uint64_t>(o.stage) << 32) |
                         static_cast<std::uint64_t>(o.bucket));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<std::size_t> count(keys.size(), 0);
    const auto coll = [&](const schedule_op& o) {
      const std::uint64_t kk =
          (static_cast<std::uint64_t>(o.stage) << 32) | static_cast<std::uint64_t>(o.bucket);
      auto it = std::lower_bound(keys.begin(), keys.end(), kk);
      return it != keys.end() && *it == kk ? static_cast<std::size_t>(it - keys.begin()) : npos;
    };
    std::vector<char> state(keys.size());        // per rank: 0 none, 1 started, 2 finished
    std::vector<op_index> started(keys.size());  // per rank: its grad_sync_start of the bucket
    for (std::size_t r = 0; r < R; ++r) {
      std::fill(state.begin(), state.end(), char{0});
      bool stepped = false;
      for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
        const auto& o = s.ops[r][i - c.begin[r]];
        if (o.kind == op_kind::optimizer_step) {
          if (stepped) err(name(i), "second optimizer step on this rank");
          stepped = true;
          continue;
        }
        if (o.kind != op_kind::grad_sync_start && o.kind != op_kind::grad_sync_finish) continue;
        const std::size_t id = coll(o);
        if (o.kind == op_kind::grad_sync_start) {
          if (state[id] != 0) err(name(i), "starts bucket ", o.bucket, " a second time");
          if (stepped) err(name(i), "comes after the optimizer step");
          state[id] = 1;
          started[id] = static_cast<op_index>(i);
          ++count[id];
          c.link[i] = static_cast<op_index>(id);
        } else {
          if (id == npos || state[id] != 1)
            err(name(i), "finishes a bucket this rank has not started");
          state[id] = 2;
          c.link[i] = started[id];
        }
      }
      for (std::size_t id = 0; id < keys.size(); ++id)
        if (state[id] == 1)
          err(cat(s.rank_name(static_cast<int>(r)), " bucket ", keys[id] & 0xffffffffu),
              "gradient sync started but never finished");
    }
    c.coll_group.resize(keys.size());
    c.coll_begin.assign(keys.size() + 1, 0);
    for (std::size_t id = 0; id < keys.size(); ++id) {
      const auto stage = static_cast<std::size_t>(keys[id] >> 32);
      c.coll_group[id] = stage;
      const std::size_t members = c.group_ranks[stage].size();
      if (count[id] != members)
        err(cat("stage ", stage, " bucket ", keys[id] & 0xffffffffu), "gradient sync started by ",
            count[id], " of the ", members, " data-parallel replicas; every replica must start it");
      c.coll_begin[id + 1] = c.coll_begin[id] + members;
    }
  }

  // 7. Activations held per rank at the peak, in program order.
  c.peak_inflight.assign(R, 0);
  for (std::size_t r = 0; r < R; ++r) {
    int cur = 0;
    int peak = 0;
    for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
      if (c.holds(i)) peak = std::max(peak, ++cur);
      if (c.releases(i) != no_op) --cur;
    }
    c.peak_inflight[r] = peak;
  }
}

/// @brief Builds the compiled form of `s`; throws `schedule_error` naming the first problem.
inline compiled_schedule compile_schedule(const pipeline_schedule& s) {
  compiled_schedule c;
  compile_schedule(s, c);
  return c;
}

}  // namespace disttrain::detail
