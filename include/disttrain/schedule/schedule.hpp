#pragma once
/// @file schedule.hpp
/// @brief The schedule value type: per pipeline rank an ordered list of ops.
///
/// A `pipeline_schedule` describes one training iteration of a chained
/// pipeline. Its ranks are *schedule ranks*: one per (stage, data-parallel
/// replica) of every segment; the tensor-parallel ranks of a group run the same
/// program and are represented once (the planner's rank layout maps a schedule
/// rank to its TP group of global ranks).
///
/// - `segments`: consecutive stage ranges, each a module (encoder, backbone,
///   generator) in the one module vocabulary, `topology_module`
///   (core/topology.hpp): its name, role, stages (`pp`), data-parallel
///   degree, `trainable` flag and `chunks` (a schedule rank stands for a TP
///   group, so `tp`, `layers` and `colocated` are not read). Segment `g`
///   starts at stage `first_stage(g)`, the sum of the `pp` before it.
///   Single-module schedules have one segment named "pipeline".
/// - Interleaving (virtual stages): a segment of `chunks` > 1 model chunks
///   per rank holds, at its stage `s`, one virtual stage per chunk. A
///   microbatch's path (its *virtual stages*, numbered in path order) runs
///   through the segments in order and through a segment's chunks in order,
///   each chunk over all the segment's stages: in a segment of P stages
///   starting at virtual stage o, stage `first_stage + i` chunk c is virtual
///   stage `o + c * P + i`. With one segment that is Megatron-LM's
///   `chunk * num_stages + stage`. `num_chunks` is the most chunks of any
///   segment (1: no interleaving).
/// - `num_microbatches`: global microbatch ids `0 .. num_microbatches-1`; each
///   microbatch passes through exactly one replica of every stage.
///
/// The schedule is a plain value: copy it, edit it, write it as JSON
/// (schedule/json.hpp). Check it with `validate_schedule` (validate.hpp)
/// before running it.
///
/// @snippet schedule.cpp schedule_file

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/schedule/op.hpp"

namespace disttrain {

/// @brief The segment of module `m` as a schedule keeps it: its name, role,
/// `pp`, `dp`, `trainable` and `chunks` (a schedule rank stands for a TP
/// group: `tp`, `layers` and `colocated` are left at their defaults).
[[nodiscard]] inline topology_module schedule_segment(const topology_module& m) {
  return topology_module{.name = m.name,
                         .role = m.role,
                         .pp = m.pp,
                         .dp = m.dp,
                         .trainable = m.trainable,
                         .chunks = m.chunks};
}

/// @brief Where a schedule rank sits: its segment, pipeline stage and DP replica.
///
/// @snippet schedule.cpp schedule_rank
struct schedule_rank {
  int segment = 0;  ///< index into `pipeline_schedule::segments`
  int stage = 0;    ///< pipeline stage (0-based, over the whole chain)
  int replica = 0;  ///< data-parallel replica within the segment

  friend bool operator==(const schedule_rank&, const schedule_rank&) = default;
};

/// @brief One training iteration of a chained pipeline, per rank an op list.
///
/// @snippet schedule.cpp pipeline_schedule
struct pipeline_schedule {
  std::string name;                           ///< generator name, e.g. "1f1b"
  int num_stages = 0;                         ///< pipeline stages (rank positions)
  int num_chunks = 1;                         ///< most chunks of any segment (interleaving)
  int num_microbatches = 0;                   ///< global microbatches in the iteration
  bool split_backward = false;                ///< B and W separate (zero-bubble schedules)
  std::vector<topology_module> segments;      ///< modules in pipeline order (file comment)
  std::vector<schedule_rank> ranks;           ///< one per (stage, replica)
  std::vector<std::vector<schedule_op>> ops;  ///< program of every rank

  /// @brief The length of a microbatch's path: per segment, stages times chunks.
  [[nodiscard]] int num_virtual_stages() const noexcept {
    if (segments.size() <= 1) return num_stages * num_chunks;
    int n = 0;
    for (const auto& g : segments) n += g.pp * g.chunks;
    return n;
  }
  /// @brief The first pipeline stage of segment `g`: the stages of the segments before it.
  [[nodiscard]] int first_stage(std::size_t g) const noexcept {
    int first = 0;
    for (std::size_t k = 0; k < g && k < segments.size(); ++k) first += segments[k].pp;
    return first;
  }
  /// @brief Virtual stage of (stage, chunk) (see the file comment); with one
  /// segment `chunk * num_stages + stage`. Throws if no segment holds `stage`.
  [[nodiscard]] int virtual_stage(int stage, int chunk) const {
    if (segments.size() <= 1) return chunk * num_stages + stage;
    int offset = 0, first = 0;
    for (const auto& g : segments) {
      if (stage < first + g.pp) return offset + chunk * g.pp + (stage - first);
      offset += g.pp * g.chunks;
      first += g.pp;
    }
    fail(errc::schedule_error, cat("stage ", stage), "no segment holds this stage");
  }
  /// @brief Virtual stage of an op (its stage and chunk).
  [[nodiscard]] int virtual_stage(const schedule_op& o) const {
    return virtual_stage(o.stage, o.chunk);
  }
  /// @brief The (stage, chunk) of virtual stage `vs`: the inverse of `virtual_stage`.
  [[nodiscard]] std::pair<int, int> stage_chunk(int vs) const {
    if (segments.size() <= 1) return {vs % num_stages, vs / num_stages};
    int first = 0;
    for (const auto& g : segments) {
      const int n = g.pp * g.chunks;
      if (vs < n) return {first + vs % g.pp, vs / g.pp};
      vs -= n;
      first += g.pp;
    }
    fail(errc::schedule_error, "virtual stage", "out of range: the path has ", num_virtual_stages(),
         " virtual stages");
  }
  /// @brief Model chunks of the rank(s) at `stage` (its segment's `chunks`).
  [[nodiscard]] int chunks_of_stage(int stage) const {
    return segments.size() <= 1
               ? num_chunks
               : segments[static_cast<std::size_t>(segment_of_stage(stage))].chunks;
  }
  /// @brief Number of schedule ranks.
  [[nodiscard]] int num_ranks() const noexcept { return static_cast<int>(ranks.size()); }
  /// @brief Total ops over all ranks.
  [[nodiscard]] std::size_t num_ops() const noexcept {
    std::size_t n = 0;
    for (const auto& v : ops) n += v.size();
    return n;
  }

  /// @brief Segment holding pipeline stage `stage` (throws if none).
  [[nodiscard]] int segment_of_stage(int stage) const {
    int first = 0;
    for (std::size_t i = 0; i < segments.size(); ++i) {
      if (stage >= first && stage < first + segments[i].pp) return static_cast<int>(i);
      first += segments[i].pp;
    }
    fail(errc::schedule_error, cat("stage ", stage), "no segment holds this stage");
  }
  /// @brief Whether the stage's module receives weight gradients.
  [[nodiscard]] bool stage_trainable(int stage) const {
    return segments[static_cast<std::size_t>(segment_of_stage(stage))].trainable;
  }
  /// @brief Whether virtual stage `vs` runs a backward pass: true iff it or
  /// some stage before it on the microbatch's path is trainable.
  [[nodiscard]] bool has_backward(int vs) const {
    for (int u = 0; u <= vs; ++u)
      if (stage_trainable(stage_chunk(u).first)) return true;
    return false;
  }
  /// @brief Whether virtual stage `vs` has W ops (split backward and trainable).
  [[nodiscard]] bool has_weight(int vs) const {
    return split_backward && stage_trainable(stage_chunk(vs).first);
  }
  /// @brief Readable name of rank `r`, e.g. "rank 4 (backbone stage 2 replica 1)".
  [[nodiscard]] std::string rank_name(int r) const {
    if (r < 0 || r >= num_ranks()) return cat("rank ", r);
    const auto& info = ranks[static_cast<std::size_t>(r)];
    const auto& seg = segments.at(static_cast<std::size_t>(info.segment));
    return cat("rank ", r, " (", seg.name, " stage ", info.stage, " replica ", info.replica, ")");
  }
};

/// @brief Checks the shape of a schedule (counts, segments, rank table, op
/// fields in range); throws `schedule_error` naming the offending item. Does
/// not check ordering or matching; `validate_schedule` does (and calls this).
inline void check_schedule_shape(const pipeline_schedule& s) {
  const auto bad = [](const std::string& where, const auto&... parts) {
    fail(errc::schedule_error, where, parts...);
  };
  if (s.num_stages <= 0) bad("schedule.num_stages", "must be > 0, got ", s.num_stages);
  if (s.num_chunks <= 0) bad("schedule.num_chunks", "must be > 0, got ", s.num_chunks);
  if (s.num_microbatches <= 0)
    bad("schedule.num_microbatches", "must be > 0, got ", s.num_microbatches);
  if (s.segments.empty()) bad("schedule.segments", "must hold at least one segment");
  int next = 0, chunks = 1;
  for (std::size_t i = 0; i < s.segments.size(); ++i) {
    const auto& g = s.segments[i];
    const std::string w = cat("schedule.segments[", i, "] (", g.name, ")");
    if (g.pp <= 0) bad(w, "pp (stages) must be > 0, got ", g.pp);
    if (g.dp <= 0) bad(w, "dp must be > 0, got ", g.dp);
    if (g.chunks <= 0 || g.chunks > s.num_chunks)
      bad(w, "chunks must be in [1, num_chunks = ", s.num_chunks, "], got ", g.chunks);
    if (s.segments.size() == 1 && g.chunks != s.num_chunks)
      bad(w, "chunks is ", g.chunks, ", the schedule's num_chunks ", s.num_chunks,
          " (one segment: the same)");
    if (g.chunks > 1 && g.pp < 2)
      bad(w, "interleaving (chunks ", g.chunks, ") needs at least 2 stages, got ", g.pp);
    chunks = std::max(chunks, g.chunks);
    next += g.pp;
  }
  if (!s.segments.empty() && chunks != s.num_chunks)
    bad("schedule.num_chunks", "is ", s.num_chunks, ", the segments' most chunks ", chunks);
  if (next != s.num_stages)
    bad("schedule.segments", "cover ", next, " stages, schedule has ", s.num_stages);
  if (s.ops.size() != s.ranks.size())
    bad("schedule.ops", "has ", s.ops.size(), " rank programs for ", s.ranks.size(), " ranks");
  std::size_t expected_ranks = 0;
  for (const auto& g : s.segments)
    expected_ranks += static_cast<std::size_t>(g.pp) * static_cast<std::size_t>(g.dp);
  if (s.ranks.size() != expected_ranks)
    bad("schedule.ranks", "has ", s.ranks.size(), " ranks, segments need ", expected_ranks,
        " (stages x dp)");
  std::vector<char> seen(expected_ranks, 0);
  std::vector<std::size_t> offset(s.segments.size(), 0);
  for (std::size_t i = 1; i < s.segments.size(); ++i)
    offset[i] = offset[i - 1] + static_cast<std::size_t>(s.segments[i - 1].pp) *
                                    static_cast<std::size_t>(s.segments[i - 1].dp);
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& info = s.ranks[r];
    const std::string w = cat("schedule.ranks[", r, "]");
    if (info.segment < 0 || static_cast<std::size_t>(info.segment) >= s.segments.size())
      bad(w, "segment ", info.segment, " out of range [0, ", s.segments.size(), ")");
    const auto& g = s.segments[static_cast<std::size_t>(info.segment)];
    const int g0 = s.first_stage(static_cast<std::size_t>(info.segment));
    if (info.stage < g0 || info.stage >= g0 + g.pp)
      bad(w, "stage ", info.stage, " is not in segment ", g.name, " [", g0, ", ", g0 + g.pp, ")");
    if (info.replica < 0 || info.replica >= g.dp)
      bad(w, "replica ", info.replica, " out of range [0, ", g.dp, ")");
    const std::size_t slot =
        offset[static_cast<std::size_t>(info.segment)] +
        static_cast<std::size_t>(info.stage - g0) * static_cast<std::size_t>(g.dp) +
        static_cast<std::size_t>(info.replica);
    if (seen[slot]) bad(w, "duplicate (stage ", info.stage, ", replica ", info.replica, ")");
    seen[slot] = 1;
  }
  const int nranks = s.num_ranks();
  for (std::size_t r = 0; r < s.ops.size(); ++r) {
    const auto& info = s.ranks[r];
    for (std::size_t i = 0; i < s.ops[r].size(); ++i) {
      const auto& o = s.ops[r][i];
      const auto where = [&] {
        return cat(s.rank_name(static_cast<int>(r)), " op #", i, " ", describe(o));
      };
      if (static_cast<int>(o.kind) >= num_op_kinds) bad(where(), "invalid op kind");
      if (o.stage < 0 || o.stage >= s.num_stages)
        bad(where(), "stage ", o.stage, " out of range [0, ", s.num_stages, ")");
      if (o.chunk < 0 || o.chunk >= s.chunks_of_stage(o.stage))
        bad(where(), "chunk ", o.chunk, " out of range [0, ", s.chunks_of_stage(o.stage), ")");
      const bool has_mb = is_compute(o.kind) && o.kind != op_kind::optimizer_step;
      if ((has_mb || is_p2p(o.kind)) && (o.microbatch < 0 || o.microbatch >= s.num_microbatches))
        bad(where(), "microbatch ", o.microbatch, " out of range [0, ", s.num_microbatches, ")");
      if (is_p2p(o.kind)) {
        if (o.peer < 0 || o.peer >= nranks || o.peer == static_cast<int>(r))
          bad(where(), "peer ", o.peer, " is not another rank in [0, ", nranks, ")");
      } else if (o.stage != info.stage) {
        bad(where(), "op of stage ", o.stage, " on a rank holding stage ", info.stage);
      }
      if ((o.kind == op_kind::grad_sync_start || o.kind == op_kind::grad_sync_finish) &&
          o.bucket < 0)
        bad(where(), "bucket must be >= 0, got ", o.bucket);
    }
  }
}

namespace detail {
/// @brief A single-segment schedule skeleton with `p` ranks (one per stage).
inline pipeline_schedule single_pipeline(std::string name, int p, int m, int chunks = 1) {
  pipeline_schedule s;
  s.name = std::move(name);
  s.num_stages = p;
  s.num_chunks = chunks;
  s.num_microbatches = m;
  s.segments = {topology_module{.name = "pipeline", .pp = p, .chunks = chunks}};
  for (int r = 0; r < p; ++r) s.ranks.push_back({0, r, 0});
  s.ops.assign(static_cast<std::size_t>(p), {});
  return s;
}
}  // namespace detail

}  // namespace disttrain
