#pragma once
/// @file route.hpp
/// @brief Transfer plans between two pipeline stages: the last stage of module
/// A and the first stage of module B (different TP/DP), or two consecutive
/// stages of one module.
///
/// ## Model
/// On the sending stage every TP rank of a replica holds the full activation
/// of the replica's samples (a Megatron layer's output is replicated across
/// TP); the receiving stage needs the full activation on every TP rank.
/// Each sample is cut into `S = lcm(TP_a, TP_b)` slices, along the hidden
/// dimension (`split_axis::hidden`, default) or along its rows
/// (`split_axis::rows`); slice k goes from TP rank `k % TP_a` of the replica
/// that holds the sample in placement A to TP rank `k % TP_b` of the replica
/// that needs it in placement B (**phase 0**). Every element crosses the
/// boundary exactly once, spread over all TP ranks of both sides; none is
/// sent twice by TP ranks that hold the same data. Then (**phase 1**, the
/// fan-out, when `route_options::fan_out`) each receiving TP rank forwards its
/// slices to the other TP ranks of its replica (an all-gather on the fast
/// intra-node links), so that every rank ends with the full activation.
///
/// All pieces between one (sender, receiver) pair of a phase form one message.
///
/// ## One rank's part
/// A rank takes part in few of a route's messages (at 1000+ GPUs, 4 of 512).
/// `route_options::for_rank` plans only the messages that rank sends or
/// receives, each with its `route_message::index` in the whole route's order
/// (so two ranks that plan their own parts name each message alike), the
/// rank's buffer sizes and the whole route's fingerprint: the same messages,
/// byte for byte, as the whole plan's, at a cost in the rank's own pieces
/// plus O(n S) to number the crossing pairs. `route_options::headers_only`
/// leaves out pieces and blocks (src, dst, phase, elements and index only):
/// what a simulator needs from the whole world's routes, without an
/// allocation per message.
/// Any DP ratio works (2->3, 3->2, 4->1, 1->4, ...): the routes follow the two
/// placements sample by sample. Message sizes follow from the plan and the
/// `activation_shape`, which both sides hold: no shape exchange.
///
/// ## Determinism
/// Messages are ordered by (phase, sender, receiver); pieces inside a message
/// by (position of the sample in the receiving replica, slice index).
///
/// ## Complexity
/// O(n S TP_b) pieces for n samples (phase 1 dominates), O(log) per lookup;
/// for one rank (`for_rank`), O(n S log(n S)) plus its own pieces.
///

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "disttrain/comm/detail/route_builder.hpp"
#include "disttrain/comm/route_plan.hpp"
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"

namespace disttrain {

/// @brief Plans the route from stage `from` (samples placed by `pa`) to stage
/// `to` (samples placed by `pb`) of topology `t`. `from` and `to` are
/// consecutive stages of one module (or, in a module with chunks, its last
/// stage and its first: chunk c to chunk c + 1), or the last stage of a
/// module that owns ranks and the first stage of the next one
/// (`topology::owning_modules`).
/// Throws `invalid_argument` naming the field (`route.from.stage`,
/// `route.placement_b`, `activation_shape.rows[3]`, ...).
[[nodiscard]] inline route_plan plan_route(const topology& t, route_endpoint from,
                                           const sample_placement& pa, route_endpoint to,
                                           const sample_placement& pb,
                                           const activation_shape& shape, route_options opts = {}) {
  detail::check_route(t, from, pa, to, pb, shape, opts);
  return detail::make_route(t, from, pa, to, pb, shape, opts, {}, nullptr);
}

namespace detail {

/// plan_routes (below), the skeletons (which pieces cross, numbered) taken
/// from `cache` where an earlier route has the same one (bind: one
/// microbatch's routes).
[[nodiscard]] inline std::vector<route_plan> plan_routes_cached(
    const topology& t, route_endpoint from, const sample_placement& pa, route_endpoint to,
    const sample_placement& pb, std::span<const route_field> fields, route_options opts,
    skeleton_cache& cache) {
  require(!fields.empty(), "route.fields", "needs at least one field");
  std::vector<route_plan> out;
  out.reserve(fields.size());
  for (std::size_t f = 0; f < fields.size(); ++f) {
    opts.split = fields[f].split;
    if (fields.size() > 1) {
      fields[f].shape.validate(cat("route.fields[", f, "]"));
      require(
          fields[f].shape.rows.size() == fields[0].shape.rows.size(),
          [&] { return cat("route.fields[", f, "].rows"); }, "has ", fields[f].shape.rows.size(),
          " samples, field 0 ", fields[0].shape.rows.size());
    }
    check_route(t, from, pa, to, pb, fields[f].shape, opts);
  }
  const int tp_a = t.module(from.module).tp, tp_b = t.module(to.module).tp;
  if (fields.size() == 1) {
    const route_field& f = fields[0];
    out.push_back(make_route(t, from, pa, to, pb, f.shape, opts, {},
                             &cache.of(pa, pb, tp_a, tp_b, f.shape, f.split, {})));
    return out;
  }
  const std::vector<char> occupied = route_occupancy(t, from, to, fields);
  // A field without rows (the gradient of one that is not differentiable)
  // has the message set of one with rows and nothing in it: built from it.
  const auto empty = [](const route_field& f) {
    return std::all_of(f.shape.rows.begin(), f.shape.rows.end(),
                       [](std::int64_t r) { return r == 0; });
  };
  const auto model = static_cast<std::size_t>(
      std::find_if_not(fields.begin(), fields.end(), empty) - fields.begin());
  out.resize(fields.size());
  // The message set: built once, for every field.
  route_skeleton& skeleton = cache.of(pa, pb, tp_a, tp_b, fields[0].shape, fields[0].split,
                                      std::span<const char>(occupied));
  const auto plan_field = [&](std::size_t f) {
    opts.split = fields[f].split;
    out[f] = model < fields.size() && f != model && empty(fields[f])
                 ? empty_route(out[model], t, from, pa, to, pb, fields[f].shape, opts, occupied)
                 : make_route(t, from, pa, to, pb, fields[f].shape, opts, occupied, &skeleton);
  };
  if (model < fields.size()) plan_field(model);
  for (std::size_t f = 0; f < fields.size(); ++f)
    if (f != model) plan_field(f);
  return out;
}

}  // namespace detail

/// @brief The routes of several tensors that travel together between the
/// same two stages (a link's fields: hidden states, position ids, sequence
/// lengths, ...), one per field, with **one message set**: piece (sample,
/// slice) travels if any field's piece has elements, so every route has the
/// same messages (src, dst, phase, index) in the same order, and a message
/// of the link packs each field's part of it (`route_message::elements` may
/// be 0 for a field). One field gives `plan_route`'s route. Throws like
/// `plan_route`, the field named (`route.fields[1].rows[3]`), and
/// `invalid_argument` for no field or fields of different sample counts.
[[nodiscard]] inline std::vector<route_plan> plan_routes(
    const topology& t, route_endpoint from, const sample_placement& pa, route_endpoint to,
    const sample_placement& pb, std::span<const route_field> fields, route_options opts = {}) {
  detail::skeleton_cache cache;
  return detail::plan_routes_cached(t, from, pa, to, pb, fields, opts, cache);
}

/// @brief Route across module boundary `i` (`topology::boundary_group`: the
/// last stage of owning module i -> the first stage of owning module i + 1).
[[nodiscard]] inline route_plan plan_boundary_route(const topology& t, int boundary,
                                                    const sample_placement& pa,
                                                    const sample_placement& pb,
                                                    const activation_shape& shape,
                                                    route_options opts = {}) {
  require_in_range(boundary, 0, t.num_boundaries() - 1, "route.boundary");
  const auto i = static_cast<std::size_t>(boundary);
  const module_id a = t.owning_modules()[i], b = t.owning_modules()[i + 1];
  return plan_route(t, {a, stage_id{t.module(a).pp - 1}}, pa, {b, stage_id{0}}, pb, shape, opts);
}

/// @brief Route between stage `stage` and `stage + 1` of one module (same placement).
[[nodiscard]] inline route_plan plan_stage_route(const topology& t, module_id m, stage_id stage,
                                                 const sample_placement& p,
                                                 const activation_shape& shape,
                                                 route_options opts = {}) {
  return plan_route(t, {m, stage}, p, {m, stage_id{stage.value + 1}}, p, shape, opts);
}

}  // namespace disttrain
