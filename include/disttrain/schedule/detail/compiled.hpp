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

#include "disttrain/core/error.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain::detail {

inline constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

/// @brief A validated, flattened schedule (all indices are flat op indices).
struct compiled_schedule {
  pipeline_schedule meta;             ///< the schedule without its ops (names, segments, ranks)
  std::vector<schedule_op> ops;       ///< all ops, rank after rank
  std::vector<std::size_t> begin;     ///< rank r's ops are [begin[r], begin[r+1])
  std::vector<int> rank_of;           ///< flat op -> rank
  std::vector<std::size_t> link;      ///< recv -> its send, send -> its recv, grad sync -> collective
  std::vector<std::size_t> channel;   ///< send -> directed link id
  std::size_t num_channels = 0;
  std::vector<std::size_t> coll_group;  ///< collective -> DP group (its stage)
  std::vector<std::size_t> coll_begin;  ///< collective c has coll_begin[c+1] - coll_begin[c] members
  std::vector<std::vector<int>> group_ranks;  ///< stage -> ranks of the stage (its DP group)
  std::vector<std::size_t> releases;  ///< B or W -> the F whose activations it frees (npos otherwise)
  std::vector<char> holds;            ///< F -> keeps activations until released
  std::vector<int> peak_inflight;     ///< per rank: activations held at the peak (count)

  [[nodiscard]] std::size_t num_ranks() const noexcept { return begin.empty() ? 0 : begin.size() - 1; }
  [[nodiscard]] std::size_t num_collectives() const noexcept { return coll_group.size(); }
  /// @brief "rank 2 (pipeline stage 2 replica 0) op #5 F(stage 2, mb 1)".
  [[nodiscard]] std::string name_op(std::size_t i) const {
    const int r = rank_of[i];
    return cat(meta.rank_name(r), " op #", i - begin[static_cast<std::size_t>(r)], " ", describe(ops[i]));
  }
};

/// @brief Builds the compiled form; throws `schedule_error` naming the first problem.
inline compiled_schedule compile_schedule(const pipeline_schedule& s) {
  check_schedule_shape(s);
  compiled_schedule c;
  c.meta.name = s.name;
  c.meta.num_stages = s.num_stages;
  c.meta.num_chunks = s.num_chunks;
  c.meta.num_microbatches = s.num_microbatches;
  c.meta.split_backward = s.split_backward;
  c.meta.segments = s.segments;
  c.meta.ranks = s.ranks;
  const std::size_t R = s.ranks.size();
  const std::size_t n = s.num_ops();
  c.ops.reserve(n);
  c.begin.reserve(R + 1);
  c.rank_of.reserve(n);
  for (std::size_t r = 0; r < R; ++r) {
    c.begin.push_back(c.ops.size());
    c.ops.insert(c.ops.end(), s.ops[r].begin(), s.ops[r].end());
    c.rank_of.insert(c.rank_of.end(), s.ops[r].size(), static_cast<int>(r));
  }
  c.begin.push_back(c.ops.size());
  c.link.assign(n, npos);
  c.channel.assign(n, npos);
  c.releases.assign(n, npos);
  c.holds.assign(n, 0);

  const int V = s.num_virtual_stages();
  const std::size_t M = static_cast<std::size_t>(s.num_microbatches);
  const auto back = backward_mask(s);
  const auto key = [&](int vs, int mb) { return static_cast<std::size_t>(vs) * M + static_cast<std::size_t>(mb); };
  const auto vname = [&](int vs, int mb) {
    const int st = vs % s.num_stages;
    const auto& seg = s.segments[static_cast<std::size_t>(s.segment_of_stage(st))];
    std::string w = cat(seg.name, "/stage ", st);
    if (s.num_chunks > 1) w += cat(" chunk ", vs / s.num_stages);
    return cat(w, " mb ", mb);
  };
  const auto err = [](const std::string& where, const auto&... parts) { fail(errc::schedule_error, where, parts...); };

  // 1. Where each F, B, W, send and receive of (virtual stage, microbatch) is.
  const std::size_t slots = static_cast<std::size_t>(V) * M;
  enum { F_, B_, W_, SA_, RA_, SG_, RG_, NT_ };
  std::vector<std::size_t> pos[NT_];
  for (auto& v : pos) v.assign(slots, npos);
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
  for (std::size_t i = 0; i < n; ++i) {
    const auto& o = c.ops[i];
    const int t = table_of(o.kind);
    if (t < 0) continue;
    auto& slot = pos[t][key(s.virtual_stage(o), o.microbatch)];
    if (slot != npos) err(c.name_op(i), "duplicates ", c.name_op(slot));
    slot = i;
  }

  // 2. Compute ops: present exactly where required, in local dependency order.
  for (int vs = 0; vs < V; ++vs) {
    const bool need_b = back[static_cast<std::size_t>(vs)] != 0;
    const bool need_w = need_b && s.has_weight(vs);
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      const std::size_t k = key(vs, mb);
      const std::size_t f = pos[F_][k], b = pos[B_][k], w = pos[W_][k];
      if (f == npos) err(vname(vs, mb), "F is missing (every microbatch's F must run once per stage)");
      if (need_b && b == npos) err(vname(vs, mb), "B is missing (every microbatch's B must run once per stage)");
      if (!need_b && b != npos) err(c.name_op(b), "stage runs no backward pass (nothing up to it is trainable)");
      if (need_w && w == npos) err(vname(vs, mb), "W is missing (split backward of a trainable stage)");
      if (!need_w && w != npos)
        err(c.name_op(w), s.split_backward ? "frozen stage has no weight gradients" : "schedule does not split the backward pass");
      if (b != npos && (c.rank_of[b] != c.rank_of[f] || b < f))
        err(c.name_op(b), "must follow ", c.name_op(f), " on the same rank");
      if (w != npos && (c.rank_of[w] != c.rank_of[b] || w < b))
        err(c.name_op(w), "must follow ", c.name_op(b), " on the same rank");
      c.holds[f] = need_b ? 1 : 0;
      if (need_b) c.releases[need_w ? w : b] = f;
    }
  }

  // 3. Inputs: local ones earlier on the rank, remote ones received before use.
  const auto check_input = [&](std::size_t consumer, std::size_t producer, std::size_t recv, op_kind rk) {
    if (c.rank_of[producer] == c.rank_of[consumer]) {
      if (producer > consumer) err(c.name_op(consumer), "runs before its input ", c.name_op(producer), " on the same rank");
      if (recv != npos && c.rank_of[recv] == c.rank_of[consumer])
        err(c.name_op(recv), "receives a tensor produced on the same rank");
      return;
    }
    if (recv == npos || c.rank_of[recv] != c.rank_of[consumer] || recv > consumer)
      err(c.name_op(consumer), "has no preceding ", to_string(rk), " of the output of ", c.name_op(producer),
          " (missing receive)");
    if (c.ops[recv].peer != c.rank_of[producer])
      err(c.name_op(recv), "names peer rank ", c.ops[recv].peer, " but the tensor is produced on rank ", c.rank_of[producer]);
  };
  for (int vs = 0; vs < V; ++vs) {
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      const std::size_t k = key(vs, mb);
      if (vs > 0) check_input(pos[F_][k], pos[F_][key(vs - 1, mb)], pos[RA_][key(vs - 1, mb)], op_kind::recv_act);
      if (vs + 1 < V && pos[B_][k] != npos)
        check_input(pos[B_][k], pos[B_][key(vs + 1, mb)], pos[RG_][key(vs + 1, mb)], op_kind::recv_grad);
    }
  }

  // 4. Sends: after the producer, to the consumer, matched by a receive.
  for (int vs = 0; vs < V; ++vs) {
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      const std::size_t k = key(vs, mb);
      for (int act = 1; act >= 0; --act) {
        const std::size_t snd = pos[act ? SA_ : SG_][k];
        const std::size_t rcv = pos[act ? RA_ : RG_][k];
        const std::size_t producer = pos[act ? F_ : B_][k];
        if (rcv != npos && snd == npos)
          err(c.name_op(rcv), "has no matching ", act ? "send_act" : "send_grad", " on rank ", c.ops[rcv].peer,
              " (missing send)");
        if (snd == npos) continue;
        if (rcv == npos)
          err(c.name_op(snd), "has no matching ", act ? "recv_act" : "recv_grad", " on rank ", c.ops[snd].peer,
              " (missing receive)");
        if (producer == npos || c.rank_of[producer] != c.rank_of[snd] || snd < producer)
          err(c.name_op(snd), "must follow the op producing the tensor on the same rank");
        if (c.ops[snd].peer != c.rank_of[rcv])
          err(c.name_op(snd), "names peer rank ", c.ops[snd].peer, " but the receive is on rank ", c.rank_of[rcv]);
        c.link[snd] = rcv;
        c.link[rcv] = snd;
      }
    }
  }

  // 5. Links: messages between two ranks are matched in order (as NCCL p2p).
  //    Channel ids: rank-major, peers in order of first use (deterministic).
  {
    std::vector<std::vector<int>> peers(R);  // per sender: destinations, index = channel offset
    std::vector<std::size_t> chan_base(R + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (!is_send(c.ops[i].kind)) continue;
      auto& ps = peers[static_cast<std::size_t>(c.rank_of[i])];
      if (std::find(ps.begin(), ps.end(), c.ops[i].peer) == ps.end()) ps.push_back(c.ops[i].peer);
    }
    for (std::size_t r = 0; r < R; ++r) chan_base[r + 1] = chan_base[r] + peers[r].size();
    c.num_channels = chan_base[R];
    const auto chan = [&](std::size_t src, int dst) {
      const auto& ps = peers[src];
      const auto it = std::find(ps.begin(), ps.end(), dst);
      return it == ps.end() ? npos : chan_base[src] + static_cast<std::size_t>(it - ps.begin());
    };
    std::vector<std::size_t> sent(c.num_channels, 0), received(c.num_channels, 0), seq(n, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (is_send(c.ops[i].kind)) {
        const std::size_t ch = chan(static_cast<std::size_t>(c.rank_of[i]), c.ops[i].peer);
        c.channel[i] = ch;
        seq[i] = sent[ch]++;
      }
    for (std::size_t i = 0; i < n; ++i) {
      if (!is_recv(c.ops[i].kind)) continue;
      const std::size_t snd = c.link[i];  // its matching send (step 4)
      const std::size_t ch = c.channel[snd];
      const std::size_t k = received[ch]++;
      if (seq[snd] != k)
        err(c.name_op(i), "is receive #", k, " from rank ", c.rank_of[snd], ", but the message it matches is that rank's send #",
            seq[snd], " on this link, ", describe(c.ops[snd]),
            " (crossed order: messages between two ranks are matched in the order they are sent)");
    }
  }

  // 6. Gradient synchronisation: every DP member starts and then finishes each bucket once.
  {
    c.group_ranks.assign(static_cast<std::size_t>(s.num_stages), {});
    for (std::size_t r = 0; r < R; ++r) c.group_ranks[static_cast<std::size_t>(s.ranks[r].stage)].push_back(static_cast<int>(r));
    std::vector<std::uint64_t> keys;
    for (std::size_t i = 0; i < n; ++i)
      if (c.ops[i].kind == op_kind::grad_sync_start)
        keys.push_back((static_cast<std::uint64_t>(c.ops[i].stage) << 32) | static_cast<std::uint64_t>(c.ops[i].bucket));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<std::size_t> count(keys.size(), 0);
    const auto coll = [&](const schedule_op& o) {
      const std::uint64_t kk = (static_cast<std::uint64_t>(o.stage) << 32) | static_cast<std::uint64_t>(o.bucket);
      auto it = std::lower_bound(keys.begin(), keys.end(), kk);
      return it != keys.end() && *it == kk ? static_cast<std::size_t>(it - keys.begin()) : npos;
    };
    for (std::size_t r = 0; r < R; ++r) {
      std::vector<char> state(keys.size(), 0);  // 0 none, 1 started, 2 finished
      bool stepped = false;
      for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
        const auto& o = c.ops[i];
        if (o.kind == op_kind::optimizer_step) {
          if (stepped) err(c.name_op(i), "second optimizer step on this rank");
          stepped = true;
          continue;
        }
        if (o.kind != op_kind::grad_sync_start && o.kind != op_kind::grad_sync_finish) continue;
        const std::size_t id = coll(o);
        if (o.kind == op_kind::grad_sync_start) {
          if (state[id] != 0) err(c.name_op(i), "starts bucket ", o.bucket, " a second time");
          if (stepped) err(c.name_op(i), "comes after the optimizer step");
          state[id] = 1;
          ++count[id];
        } else {
          if (id == npos || state[id] != 1) err(c.name_op(i), "finishes a bucket this rank has not started");
          state[id] = 2;
        }
        c.link[i] = id;
      }
      for (std::size_t id = 0; id < keys.size(); ++id)
        if (state[id] == 1)
          err(cat(s.rank_name(static_cast<int>(r)), " bucket ", keys[id] & 0xffffffffu), "gradient sync started but never finished");
    }
    c.coll_group.resize(keys.size());
    c.coll_begin.assign(keys.size() + 1, 0);
    for (std::size_t id = 0; id < keys.size(); ++id) {
      const auto stage = static_cast<std::size_t>(keys[id] >> 32);
      c.coll_group[id] = stage;
      const std::size_t members = c.group_ranks[stage].size();
      if (count[id] != members)
        err(cat("stage ", stage, " bucket ", keys[id] & 0xffffffffu), "gradient sync started by ", count[id], " of the ",
            members, " data-parallel replicas; every replica must start it");
      c.coll_begin[id + 1] = c.coll_begin[id] + members;
    }
  }

  // 7. Activations held per rank at the peak, in program order.
  c.peak_inflight.assign(R, 0);
  for (std::size_t r = 0; r < R; ++r) {
    int cur = 0;
    int peak = 0;
    for (std::size_t i = c.begin[r]; i < c.begin[r + 1]; ++i) {
      if (c.holds[i]) peak = std::max(peak, ++cur);
      if (c.releases[i] != npos) --cur;
    }
    c.peak_inflight[r] = peak;
  }
  return c;
}

}  // namespace disttrain::detail
