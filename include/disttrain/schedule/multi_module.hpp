#pragma once
/// @file multi_module.hpp
/// @brief The disaggregated multi-module pipeline: encoder segment, backbone
/// stages and generator segment chained into one pipeline, each segment with
/// its own data-parallel degree.
///
/// Segments are modules in the one module vocabulary, `topology_module`
/// (core/topology.hpp: name, `pp` stages, `dp` replicas, `trainable`,
/// `chunks`; `tp`, `layers` and the role are not read), with optional
/// per-segment ordering settings (`module_order`).
///
/// Microbatches are global (ids 0..M-1). Each passes through one replica of
/// every stage: `module_order::replica_of[mb]` names it (default
/// round-robin, `mb % dp`), so with encoder DP 2 and backbone DP 3 the
/// backbone replica 1 takes microbatches 1, 4, 7, ... from encoder replicas
/// 1, 0, 1, .... Every stage of a segment uses the same replica for a
/// microbatch (a segment replica is one pipeline). First-stage ranks start
/// their microbatches in increasing id order, later ranks in the order inputs
/// arrive (a generator replica fed by several backbone replicas serves
/// whichever is ready; each link's messages stay in send order). Forwards and
/// backwards interleave as in 1F1B: a greedy event simulation
/// (detail/list_scheduler.hpp) prefers B, then F while fewer than
/// `max_inflight` microbatches hold activations, then W.
///
/// Default `max_inflight` for stage s of S: ceil((S - s) * D / dp(s)), where
/// D is the largest DP degree from stage s on: 1F1B's count, scaled up for a
/// replica that feeds several downstream replicas.
///
/// The order is decided with `multi_module_spec::cost` (pass the cost model
/// the plan will be simulated with; e.g. wrap a `duration_model`). Without
/// one, modules are assumed balanced as a planner sizes them: F costs
/// dp / max_dp (B twice that, or B = W = F when split), so a replica serving
/// more microbatches runs each faster; a chunk op of an interleaved segment
/// takes 1 / chunks of that.
///
/// Interleaved segments (`chunks` > 1, Megatron-LM's virtual pipeline
/// stages; needs >= 2 stages and no split backward): each rank holds `chunks`
/// model chunks and runs Megatron-LM's interleaved 1F1B order over its
/// microbatches (`interleaved_ops`, interleaved.hpp), so a replica's
/// microbatch count must be a multiple of the segment's stages. Its warm-up
/// grows by `chunks` per virtual stage after the segment (a later stage's
/// op, balanced, takes as long as `chunks` chunk ops). A microbatch's path
/// runs the segment's chunks in order (schedule.hpp, "virtual stages").
///
/// Frozen segments (`trainable = false`) have no W ops and no grad sync; a
/// stage has B ops only if it or a stage before it is trainable (a frozen
/// leading encoder runs forward only and receives no gradients).
///
/// Rank numbering: segment by segment, then stage, then replica:
/// rank = offset(segment) + (stage - first_stage(segment)) * dp + replica.
///
/// @snippet schedule.cpp multi_module_file

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/detail/list_scheduler.hpp"
#include "disttrain/schedule/interleaved.hpp"
#include "disttrain/schedule/op_cost.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief How `make_multi_module` orders one segment's microbatches (both optional).
///
/// @snippet schedule.cpp module_order
struct module_order {
  std::vector<int> replica_of{};  ///< microbatch -> replica (size M); empty: mb % dp
  int max_inflight = 0;           ///< activation cap per rank; 0: the default (file comment)
};

/// @brief Input of `make_multi_module`.
///
/// @snippet schedule.cpp multi_module_spec
struct multi_module_spec {
  std::vector<topology_module> segments;  ///< in pipeline order (see the file comment)
  std::vector<module_order> order;        ///< per segment, or empty: defaults for all
  int num_microbatches = 0;               ///< global microbatches
  bool split_backward = false;            ///< B/W split (W deferred as in ZB-H1)
  op_cost_fn cost;  ///< (rank, op) -> seconds used to order ops; empty: balanced (file comment)
};

/// @brief Compute-only multi-module schedule (see the file comment).
[[nodiscard]] inline pipeline_schedule make_multi_module(const multi_module_spec& spec) {
  require(!spec.segments.empty(), "multi_module.segments", "must hold at least one segment");
  require(spec.order.empty() || spec.order.size() == spec.segments.size(), "multi_module.order",
          "has ", spec.order.size(), " entries, need none or one per segment (",
          spec.segments.size(), ")");
  require_positive(spec.num_microbatches, "multi_module.num_microbatches");
  const module_order defaults;
  const auto order_of = [&](std::size_t g) -> const module_order& {
    return spec.order.empty() ? defaults : spec.order[g];
  };
  const int M = spec.num_microbatches;
  pipeline_schedule s;
  s.name = "multi_module";
  s.num_microbatches = M;
  s.split_backward = spec.split_backward;
  int stage = 0;
  for (std::size_t g = 0; g < spec.segments.size(); ++g) {
    const auto& seg = spec.segments[g];
    const module_order& ord = order_of(g);
    const std::string w = cat("multi_module.segments[", g, "] (", seg.name, ")");
    require_positive(seg.pp, w + ".pp");
    require_positive(seg.dp, w + ".dp");
    require_non_negative(ord.max_inflight, cat("multi_module.order[", g, "].max_inflight"));
    require_positive(seg.chunks, w + ".chunks");
    if (seg.chunks > 1) {
      require(seg.pp >= 2, w + ".chunks", "interleaving (", seg.chunks,
              " chunks) needs >= 2 stages, got ", seg.pp);
      require(!spec.split_backward, w + ".chunks",
              "interleaved 1F1B does not split the backward pass (no zero-bubble with chunks)");
    }
    require(seg.dp <= M, w + ".dp", "dp ", seg.dp, " exceeds the ", M,
            " microbatches: a replica would get none");
    if (!ord.replica_of.empty()) {
      const std::string wo = cat("multi_module.order[", g, "] (", seg.name, ").replica_of");
      require(ord.replica_of.size() == static_cast<std::size_t>(M), wo, "has ",
              ord.replica_of.size(), " entries, need one per microbatch (", M, ")");
      std::vector<int> count(static_cast<std::size_t>(seg.dp), 0);
      for (std::size_t mb = 0; mb < ord.replica_of.size(); ++mb) {
        const int rep = ord.replica_of[mb];
        if (rep < 0 || rep >= seg.dp) require_in_range(rep, 0, seg.dp - 1, cat(wo, "[", mb, "]"));
        ++count[static_cast<std::size_t>(rep)];
      }
      for (std::size_t rep = 0; rep < count.size(); ++rep)
        require(count[rep] > 0, wo, "replica ", rep, " receives no microbatch");
    }
    s.segments.push_back(schedule_segment(seg));
    s.num_chunks = std::max(s.num_chunks, seg.chunks);
    for (int st = stage; st < stage + seg.pp; ++st)
      for (int rep = 0; rep < seg.dp; ++rep) s.ranks.push_back({static_cast<int>(g), st, rep});
    stage += seg.pp;
  }
  s.num_stages = stage;
  const std::size_t R = s.ranks.size();
  const auto MM = static_cast<std::size_t>(M);

  // Owners (per virtual stage), forward orders, caps and fixed orders.
  const int V = s.num_virtual_stages();
  std::vector<int> owner(static_cast<std::size_t>(V) * MM, -1);
  std::vector<std::vector<int>> flows(R);
  std::vector<int> cap(R, 1);
  std::vector<std::vector<schedule_op>> fixed(R);
  std::vector<int> max_dp_from(static_cast<std::size_t>(s.num_stages) + 1, 0);
  for (int st = s.num_stages - 1; st >= 0; --st)
    max_dp_from[static_cast<std::size_t>(st)] =
        std::max(max_dp_from[static_cast<std::size_t>(st) + 1],
                 s.segments[static_cast<std::size_t>(s.segment_of_stage(st))].dp);
  const auto back = detail::backward_mask(s);
  std::size_t base = 0;
  for (std::size_t g = 0; g < spec.segments.size(); ++g) {
    const auto& seg = spec.segments[g];
    const module_order& ord = order_of(g);
    const int first = s.first_stage(g);
    // Virtual stages after the segment's last one.
    const int after = V - s.virtual_stage(first + seg.pp - 1, seg.chunks - 1) - 1;
    for (int st = first; st < first + seg.pp; ++st) {
      const std::size_t row =
          base + static_cast<std::size_t>(st - first) * static_cast<std::size_t>(seg.dp);
      for (int mb = 0; mb < M; ++mb) {
        const int rep =
            ord.replica_of.empty() ? mb % seg.dp : ord.replica_of[static_cast<std::size_t>(mb)];
        const std::size_t r = row + static_cast<std::size_t>(rep);
        for (int c = 0; c < seg.chunks; ++c)
          owner[static_cast<std::size_t>(s.virtual_stage(st, c)) * MM +
                static_cast<std::size_t>(mb)] = static_cast<int>(r);
        flows[r].push_back(mb);
      }
      const int left = V - s.virtual_stage(st, 0);
      const int d = max_dp_from[static_cast<std::size_t>(st)];
      for (int rep = 0; rep < seg.dp; ++rep) {
        const std::size_t r = row + static_cast<std::size_t>(rep);
        cap[r] = ord.max_inflight > 0 ? ord.max_inflight : (left * d + seg.dp - 1) / seg.dp;
        if (seg.chunks > 1) {
          fixed[r] = interleaved_ops(
              {.stages = seg.pp,
               .position = st - first,
               .chunks = seg.chunks,
               .microbatches = flows[r],
               .op_stage = st,
               .extra_warmup = seg.chunks * after,
               .backward = back[static_cast<std::size_t>(s.virtual_stage(st, 0))] != 0,
               .where = cat("multi_module.segments[", g, "] (", seg.name, ") replica ", rep)});
        }
      }
    }
    base += static_cast<std::size_t>(seg.pp) * static_cast<std::size_t>(seg.dp);
  }
  op_cost_fn cost = spec.cost;
  if (!cost) {
    // Balanced modules: a replica of DP degree dp serves max_dp/dp times as many
    // microbatches, so a planner gives it that much less time per microbatch.
    const bool split = spec.split_backward;
    const auto max_dp = static_cast<double>(max_dp_from[0]);
    std::vector<double> unit(s.segments.size());
    for (std::size_t g = 0; g < unit.size(); ++g)
      unit[g] = static_cast<double>(s.segments[g].dp) / max_dp / s.segments[g].chunks;
    cost = [split, unit](const schedule_rank& r, const schedule_op& o) {
      const double u = unit[static_cast<std::size_t>(r.segment)];
      switch (o.kind) {
        case op_kind::forward: return u;
        case op_kind::backward: return split ? u : 2.0 * u;
        case op_kind::weight: return u;
        default: return 0.0;
      }
    };
  }
  detail::list_schedule(s, flows, cap, owner, fixed, cost);
  return s;
}

}  // namespace disttrain
