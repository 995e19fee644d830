#pragma once
/// @file route_builder.hpp
/// @brief Internal: how `plan_route` (route.hpp) builds a route: the checks
/// of its inputs, then its messages phase by phase (the crossing, the
/// fan-out), the ranks taking part and the fingerprint.

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "disttrain/comm/route_plan.hpp"
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/kernels/copy_blocks.hpp"

namespace disttrain::detail {

/// Fingerprint of placement `p` (replica sizes and sample order).
inline void add_placement(fingerprint_builder& f, const sample_placement& p) {
  f.add(p.dp());
  for (int d = 0; d < p.dp(); ++d) {
    f.add(p.samples(d).size());
    for (int s : p.samples(d)) f.add(s);
  }
}

/// "replica 1 position 0: sample 3 vs 5" (or a replica count / length difference).
[[nodiscard]] inline std::string first_placement_difference(const sample_placement& a,
                                                            const sample_placement& b) {
  if (a.dp() != b.dp()) return cat(a.dp(), " vs ", b.dp(), " replicas");
  for (int d = 0; d < a.dp(); ++d) {
    const auto& x = a.samples(d);
    const auto& y = b.samples(d);
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (x[i] != y[i]) return cat("replica ", d, " position ", i, ": sample ", x[i], " vs ", y[i]);
    if (x.size() != y.size())
      return cat("replica ", d, ": ", x.size(), " vs ", y.size(), " samples");
  }
  return "none";
}

/// floor(n k / s) for 0 <= k <= s, without forming n k (which can overflow):
/// n = q s + r gives n k / s = q k + r k / s, and r k < s^2 fits.
inline std::int64_t scaled_floor(std::int64_t n, int k, int s) {
  const std::int64_t q = n / s;
  const std::int64_t r = n % s;
  return q * k + r * k / s;
}

/// Bounds of slice k of `n` items cut in `s` parts: [k n / s, (k+1) n / s).
inline std::pair<std::int64_t, std::int64_t> slice_bounds(std::int64_t n, int k, int s) {
  const std::int64_t lo = scaled_floor(n, k, s);
  const std::int64_t hi = scaled_floor(n, k + 1, s);
  return {lo, hi - lo};
}

/// Row offset of every sample inside its replica's buffer under `p`.
inline std::vector<std::int64_t> row_offsets(const sample_placement& p, const activation_shape& a) {
  std::vector<std::int64_t> off(static_cast<std::size_t>(p.num_samples()), 0);
  for (int d = 0; d < p.dp(); ++d) {
    std::int64_t r = 0;
    for (int s : p.samples(d)) {
      off[static_cast<std::size_t>(s)] = r;
      r = checked_add(r, a.rows[static_cast<std::size_t>(s)], "activation_shape.rows");
    }
  }
  return off;
}

/// Checks a route's ends, placements and shape (plan_route's errors, named by
/// field: `route.from.stage`, `route.placement_b`, `activation_shape.rows[3]`, ...).
inline void check_route(const topology& t, route_endpoint from, const sample_placement& pa,
                        route_endpoint to, const sample_placement& pb,
                        const activation_shape& shape, const route_options& opts) {
  require_in_range(from.module.value, 0, t.num_modules() - 1, "route.from.module");
  require_in_range(to.module.value, 0, t.num_modules() - 1, "route.to.module");
  const topology_module& A = t.module(from.module);
  const topology_module& B = t.module(to.module);
  for (const auto& [g, w] : {std::pair{&A, "route.from"}, std::pair{&B, "route.to"}})
    if (g->colocated)
      fail(errc::invalid_argument, cat(w, ".module"), "module '", g->name,
           "' is colocated: it owns no ranks, so no route starts or ends on it");
  require_in_range(from.stage.value, 0, A.pp - 1, "route.from.stage");
  require_in_range(to.stage.value, 0, B.pp - 1, "route.to.stage");
  // The pipeline order of the two ends: (up, down); a backward route
  // (gradients, route_options::backward) runs down -> up.
  const auto [up, down] = opts.backward ? std::pair{to, from} : std::pair{from, to};
  const char* up_field = opts.backward ? "route.to" : "route.from";
  const char* down_field = opts.backward ? "route.from" : "route.to";
  const topology_module& U = t.module(up.module);
  const topology_module& D = t.module(down.module);
  // (Field names are built only on failure: routes are planned per microbatch.)
  if (up.module == down.module) {
    // Consecutive stages, or (interleaved) chunk c on the last stage to chunk c + 1 on the first.
    const bool wrap = U.chunks > 1 && up.stage.value == U.pp - 1 && down.stage.value == 0;
    if (down.stage.value != up.stage.value + 1 && !wrap)
      fail(errc::invalid_argument, cat(down_field, ".stage"), "within module '", U.name,
           "' a route joins consecutive stages: stage ", up.stage.value, " and stage ",
           up.stage.value + 1,
           U.chunks > 1 && up.stage.value == U.pp - 1 ? " or 0 (next chunk)" : "", ", got ",
           down.stage.value);
    // Consecutive stages of one module hold the same replicas' samples in the
    // same order (Megatron hands the activation on as is).
    if (!(pa == pb))
      fail(errc::invalid_argument, "route.placement_b",
           "consecutive stages of one module need the same placement: stage ", from.stage.value,
           " and stage ", to.stage.value, " of '", A.name,
           "' were given different ones (first difference: ", first_placement_difference(pa, pb),
           ")");
  } else {
    // Module boundaries join consecutive modules that own ranks.
    const int ku = t.owning_index(up.module), kd = t.owning_index(down.module);
    if (kd != ku + 1) {
      const int next = t.owning_index(from.module) + (opts.backward ? -1 : 1);
      const bool exists = next >= 0 && next < static_cast<int>(t.owning_modules().size());
      fail(errc::invalid_argument, cat(down_field, ".module"),
           opts.backward ? "a gradient route runs backward" : "a module boundary runs forward",
           ", from '", A.name, "' to ",
           exists ? cat("'", t.module(t.owning_modules()[static_cast<std::size_t>(next)]).name, "'")
                  : std::string("no module"),
           " (the next module that owns ranks), got '", B.name, "'",
           !opts.backward && kd < ku
               ? " (a backward route: set route_options::backward for gradients)"
               : "");
    }
    if (up.stage.value != U.pp - 1)
      fail(errc::invalid_argument, cat(up_field, ".stage"),
           "a module boundary joins the last stage ", U.pp - 1, " of '", U.name, "', got ",
           up.stage.value);
    if (down.stage.value != 0)
      fail(errc::invalid_argument, cat(down_field, ".stage"),
           "a module boundary joins stage 0 of '", D.name, "', got ", down.stage.value);
  }
  require_in_range(opts.for_rank, -1, t.world_size() - 1, "route_options.for_rank");
  require(pa.dp() == A.dp, "route.placement_a", "has ", pa.dp(), " replicas but '", A.name,
          "' has dp ", A.dp);
  require(pb.dp() == B.dp, "route.placement_b", "has ", pb.dp(), " replicas but '", B.name,
          "' has dp ", B.dp);
  shape.validate();  // also: sum(rows) x hidden x elem_size fits in int64_t
  const auto n = static_cast<std::size_t>(shape.rows.size());
  require(static_cast<std::size_t>(pa.num_samples()) == n, "route.placement_a", "places ",
          pa.num_samples(), " samples but activation_shape has ", n);
  require(static_cast<std::size_t>(pb.num_samples()) == n, "route.placement_b", "places ",
          pb.num_samples(), " samples but activation_shape has ", n);
  const std::int64_t lcm_tp = std::lcm(std::int64_t{A.tp}, std::int64_t{B.tp});
  require(lcm_tp <= INT_MAX, "route.slices", "lcm(tp ", A.tp, ", tp ", B.tp, ") = ", lcm_tp,
          " slices exceeds ", INT_MAX);
  // The fan-out moves (TP_b - 1) more copies of everything: its totals must fit too.
  if (opts.fan_out) (void)checked_mul(shape.total_bytes(), std::int64_t{B.tp}, "route.fan_out");
}

/// A phase-0 piece: its (src, dst) key, sample and slice.
struct crossing_piece {
  std::uint64_t key;
  int sample, slice;
};

/// What a route's message set is made of, the same for every field of one
/// link (plan_routes: one occupancy): phase 0's pieces in generation order,
/// which receiving TP ranks forward (`[b TP_b + t]`) and the distinct (src,
/// dst) keys, ascending. Ranks are numbered inside their side (`rank - base`,
/// base: the rank of replica 0's TP rank 0), so routes between other stages
/// with the same placements, degrees and pieces share it (skeleton_cache):
/// a side's ranks are consecutive, so this order is the ranks' order. Built
/// by the first route that needs it.
struct route_skeleton {
  std::vector<crossing_piece> crossings;
  std::vector<char> carries;
  std::vector<std::uint64_t> pairs;
  bool built = false;
};

/// @brief Skeletons shared by routes (bind: one microbatch's routes, where a
/// link's gradient route and the links inside a module have the same one).
/// A route takes the skeleton of an earlier route with equal placements, TP
/// degrees and travelling pieces (the split, hidden size and rows, or the
/// occupancy of a route of several fields), else a new one. Placements are
/// held by address: clear() before they go away. clear() keeps the storage.
/// A skeleton `of` returns stays valid until the next call.
class skeleton_cache {
 public:
  [[nodiscard]] route_skeleton& of(const sample_placement& pa, const sample_placement& pb, int tp_a,
                                   int tp_b, const activation_shape& shape, split_axis split,
                                   std::span<const char> occupied) {
    const auto same = [](const sample_placement* x, const sample_placement& y) {
      return x == &y || *x == y;
    };
    // A route of several fields: which pieces travel is the occupancy alone.
    const bool by_rows = occupied.empty();
    for (std::size_t i = 0; i < used_; ++i) {
      entry& e = entries_[i];
      if (e.tp_a == tp_a && e.tp_b == tp_b && e.by_rows == by_rows && same(e.pa, pa) &&
          same(e.pb, pb) &&
          (by_rows
               ? e.split == split && e.hidden == shape.hidden &&
                     std::equal(e.rows.begin(), e.rows.end(), shape.rows.begin(), shape.rows.end())
               : std::equal(e.occupied.begin(), e.occupied.end(), occupied.begin(),
                            occupied.end())))
        return e.skeleton;
    }
    if (used_ == entries_.size()) entries_.emplace_back();
    entry& e = entries_[used_++];
    e.pa = &pa;
    e.pb = &pb;
    e.tp_a = tp_a;
    e.tp_b = tp_b;
    e.by_rows = by_rows;
    e.split = split;
    e.hidden = shape.hidden;
    if (by_rows) {
      e.rows.assign(shape.rows.begin(), shape.rows.end());
      e.occupied.clear();
    } else {
      e.rows.clear();
      e.occupied.assign(occupied.begin(), occupied.end());
    }
    e.skeleton.built = false;
    return e.skeleton;
  }
  void clear() noexcept { used_ = 0; }
  /// Skeletons held (distinct ones since the last clear()).
  [[nodiscard]] std::size_t size() const noexcept { return used_; }

 private:
  struct entry {
    const sample_placement* pa = nullptr;
    const sample_placement* pb = nullptr;
    int tp_a = 0, tp_b = 0;
    bool by_rows = true;
    split_axis split = split_axis::hidden;
    std::int64_t hidden = 0;
    std::vector<std::int64_t> rows;
    std::vector<char> occupied;
    route_skeleton skeleton;
  };
  std::vector<entry> entries_;
  std::size_t used_ = 0;
};

/// @brief The messages of one checked route (check_route), phase by phase:
/// what plan_route's phases share (both stages, the slices, every sample's
/// row offsets on both sides, which messages are built) and the phases.
class route_builder {
 public:
  route_builder(const topology& t, route_endpoint from, const sample_placement& pa,
                route_endpoint to, const sample_placement& pb, const activation_shape& shape,
                const route_options& opts, std::span<const char> occupied = {},
                route_skeleton* shared = nullptr)
      : T_(t),
        from_(from),
        to_(to),
        pa_(pa),
        pb_(pb),
        shape_(shape),
        opts_(opts),
        occupied_(occupied),
        A_(t.module(from.module)),
        B_(t.module(to.module)),
        S_(static_cast<int>(std::lcm(std::int64_t{A_.tp}, std::int64_t{B_.tp}))),
        off_a_(row_offsets(pa, shape)),
        off_b_(row_offsets(pb, shape)),
        base_a_(t.rank({from.module, from.stage, replica_id{0}, 0})),
        base_b_(t.rank({to.module, to.stage, replica_id{0}, 0})) {
    // Column slices of the hidden dimension, the same for every sample.
    if (opts.split == split_axis::hidden && !shape.rows.empty())
      for (int k = 0; k < S_; ++k) columns_.push_back(slice_bounds(shape.hidden, k, S_));
    sk_ = shared != nullptr ? shared : &own_;
  }

  /// @brief Slices per sample, lcm(TP_a, TP_b).
  [[nodiscard]] int slices() const noexcept { return S_; }

  /// @brief Phase 0, the crossing: piece (s, k) goes from TP rank k % TP_a of
  /// the replica holding s in A to TP rank k % TP_b of the one needing it in
  /// B. The distinct (src, dst) pairs, ascending, are the phase-0 messages;
  /// the wanted ones are appended to `out`. Returns the route's phase-0 message count.
  int crossing(std::vector<route_message>& out) {
    if (!sk_->built) build_skeleton();
    const std::vector<std::uint64_t>& pairs = sk_->pairs;
    if (opts_.for_rank <
        0) {  // the whole route: every pair, then (TP_b - 1) copies of each template
      std::size_t all = pairs.size();
      if (opts_.fan_out && B_.tp > 1)
        for (const char c : sk_->carries) all += c ? static_cast<std::size_t>(B_.tp - 1) : 0;
      out.reserve(all);
    }
    // The skeleton's keys plus `base` are the ranks' keys (no carry: both
    // sides' ranks fit in 31 bits).
    const std::uint64_t base = key_of(base_a_, base_b_);
    const std::size_t first = out.size();
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const std::uint64_t key = pairs[i] + base;
      const int src = static_cast<int>(key >> 32);
      const int dst = static_cast<int>(key & 0xffffffffu);
      if (!wanted(src, dst)) continue;
      route_message& m = out.emplace_back();
      m.src = src;
      m.dst = dst;
      m.index = static_cast<int>(i);
    }
    const auto mine = std::span(out).subspan(first);
    // Pieces in generation order: by position in the receiving replica, then slice.
    for (const crossing_piece& c : sk_->crossings) {
      const std::uint64_t key = c.key + base;
      if (!wanted(static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu))) continue;
      auto it = std::lower_bound(
          mine.begin(), mine.end(), key,
          [&](const route_message& m, std::uint64_t v) { return key_of(m.src, m.dst) < v; });
      const auto s = static_cast<std::size_t>(c.sample);
      add(*it, piece_of(c.sample, c.slice), off_a_[s], off_b_[s]);
    }
    for (auto& m : mine) finish(m);
    return static_cast<int>(pairs.size());
  }

  /// @brief Phase 1, the fan-out inside each receiving TP group (after
  /// crossing): the TP rank `owner` of replica b forwards every slice it
  /// received (k % TP_b == owner) to each other TP rank: one template message
  /// per (b, owner), copied per receiver, numbered from `index` in (src, dst)
  /// order (src = rank(b, owner) grows with (b, owner)). Appends the wanted
  /// ones to `out`; returns the route's message count.
  int fan_out(std::vector<route_message>& out, int index) const {
    if (!opts_.fan_out || B_.tp <= 1) return index;
    // Every carrying (b, owner) numbers TP_b - 1 messages; only replica b's
    // TP group can hold them, so a rank's part builds its own replica's only.
    const std::vector<char>& carries = sk_->carries;
    const auto numbered = [&](int b0, int b1) {  // the messages of replicas [b0, b1)
      const auto at = [&](int b) { return carries.begin() + std::ptrdiff_t{b} * B_.tp; };
      return static_cast<int>(std::count(at(b0), at(b1), char{1})) * (B_.tp - 1);
    };
    int lo = 0, hi = B_.dp;
    if (const int me = opts_.for_rank; me >= 0) {
      const int mine = replica_at(me, base_b_, B_);
      lo = mine >= 0 ? mine : B_.dp;
      hi = std::min(lo + 1, B_.dp);
    }
    index += numbered(0, lo);
    for (int b = lo; b < hi; ++b)
      for (int owner = 0; owner < B_.tp; ++owner) {
        if (!carries[static_cast<std::size_t>(b * B_.tp + owner)]) continue;
        route_message tmpl;
        bool built = false;
        tmpl.phase = 1;
        tmpl.src = rank_b(b, owner);
        for (int t = 0; t < B_.tp; ++t) {
          if (t == owner) continue;
          const int i = index++;
          const int dst = rank_b(b, t);
          if (!wanted(tmpl.src, dst)) continue;
          if (!built) {
            for (int s : pb_.samples(b))
              for (int k = owner; k < S_; k += B_.tp) {
                const route_piece pc = piece_of(s, k);
                if (pc.elements() == 0) continue;
                const std::int64_t row = off_b_[static_cast<std::size_t>(s)];
                add(tmpl, pc, row, row);
              }
            finish(tmpl);
            built = true;
          }
          route_message& m = out.emplace_back(tmpl);
          m.dst = dst;
          m.index = i;
        }
      }
    return index + numbered(hi, B_.dp);
  }

  /// @brief The ranks taking part (the wanted ones) and their buffers' rows, by rank.
  [[nodiscard]] std::vector<route_rank_info> ranks() const {
    std::vector<route_rank_info> out;
    const int me = opts_.for_rank;
    // Each side's ranks are consecutive from its base, TP innermost: a rank's
    // part looks its replica up instead of visiting every rank.
    const auto side = [&](int base, const topology_module& g, const sample_placement& p,
                          bool sending) {
      const auto add = [&](int r, int replica) {
        const std::int64_t rows = shape_.replica_rows(p, replica);
        out.push_back({r, sending ? rows : -1, sending ? -1 : rows});
      };
      if (me >= 0) {
        if (const int d = replica_at(me, base, g); d >= 0) add(me, d);
        return;
      }
      for (int d = 0; d < g.dp; ++d)
        for (int t = 0; t < g.tp; ++t) add(base + d * g.tp + t, d);
    };
    side(base_a_, A_, pa_, true);
    side(base_b_, B_, pb_, false);
    std::sort(out.begin(), out.end(),
              [](const route_rank_info& x, const route_rank_info& y) { return x.rank < y.rank; });
    return out;
  }

  /// @brief Fingerprint of the inputs (checked against the peer's on the wire).
  [[nodiscard]] std::uint64_t fingerprint() const {
    fingerprint_builder f;
    // A module is hashed by its index among the modules that own ranks (the
    // fingerprints of the earlier per-segment layout, kept bit-identical).
    for (const auto& [e, g, base] :
         {std::tuple{from_, &A_, base_a_}, std::tuple{to_, &B_, base_b_}})
      f.add(T_.owning_index(e.module)).add(e.stage.value).add(g->tp).add(g->dp).add(base);
    f.add(opts_.split).add(opts_.fan_out).add(shape_.hidden).add(shape_.elem_size);
    f.add(shape_.rows.size());
    for (std::int64_t r : shape_.rows) f.add(r);
    add_placement(f, pa_);
    add_placement(f, pb_);
    // A field of several (plan_routes): which pieces travel depends on the others.
    if (!occupied_.empty()) {  // eight entries (0 or 1) per word
      f.add(occupied_.size());
      for (std::size_t i = 0; i < occupied_.size(); i += 8) {
        std::uint64_t w = 0;
        for (std::size_t b = i; b < std::min(i + 8, occupied_.size()); ++b)
          w = (w << 8) | static_cast<std::uint8_t>(occupied_[b]);
        f.add(w);
      }
    }
    return f.value();
  }

 private:
  // The crossing's pieces (those that travel), who forwards, and the pairs.
  void build_skeleton() {
    route_skeleton& sk = *sk_;
    sk.crossings.clear();
    sk.crossings.reserve(shape_.rows.size() * static_cast<std::size_t>(S_));
    sk.carries.assign(static_cast<std::size_t>(B_.dp) * static_cast<std::size_t>(B_.tp), 0);
    for (int b = 0; b < B_.dp; ++b)
      for (int s : pb_.samples(b)) {
        const int a = pa_.replica_of(s);
        // Slice k goes from TP rank k % TP_a to TP rank k % TP_b (counted, not divided).
        for (int k = 0, ka = 0, kb = 0; k < S_; ++k) {
          if (present(s, k)) {
            sk.crossings.push_back({key_of(a * A_.tp + ka, b * B_.tp + kb), s, k});
            sk.carries[static_cast<std::size_t>(b * B_.tp + kb)] = 1;
          }
          if (++ka == A_.tp) ka = 0;
          if (++kb == B_.tp) kb = 0;
        }
      }
    sk.pairs.resize(sk.crossings.size());
    for (std::size_t i = 0; i < sk.crossings.size(); ++i) sk.pairs[i] = sk.crossings[i].key;
    std::sort(sk.pairs.begin(), sk.pairs.end());
    sk.pairs.erase(std::unique(sk.pairs.begin(), sk.pairs.end()), sk.pairs.end());
    sk.built = true;
  }

  // The replica of `rank` on the side whose ranks start at `base` (module
  // `g`: consecutive, TP innermost), -1 if the rank is not on that side.
  [[nodiscard]] static int replica_at(int rank, int base, const topology_module& g) noexcept {
    return rank >= base && rank - base < g.dp * g.tp ? (rank - base) / g.tp : -1;
  }
  [[nodiscard]] static std::uint64_t key_of(int src, int dst) noexcept {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
           static_cast<std::uint32_t>(dst);
  }
  // Global rank of (replica, TP rank) on each side (the topology's numbering:
  // TP innermost, replicas next).
  [[nodiscard]] int rank_a(int replica, int tp_rank) const noexcept {
    return base_a_ + replica * A_.tp + tp_rank;
  }
  [[nodiscard]] int rank_b(int replica, int tp_rank) const noexcept {
    return base_b_ + replica * B_.tp + tp_rank;
  }
  // Which messages are built: the whole route's, or those of one rank
  // (route_options::for_rank). Every message is numbered either way.
  [[nodiscard]] bool wanted(int src, int dst) const noexcept {
    return opts_.for_rank < 0 || src == opts_.for_rank || dst == opts_.for_rank;
  }
  // Whether piece (sample, slice) travels: it has elements or, in a route of
  // several fields (plan_routes), some field's piece has.
  [[nodiscard]] bool present(int sample, int slice) const {
    if (!occupied_.empty())
      return occupied_[static_cast<std::size_t>(sample) * static_cast<std::size_t>(S_) +
                       static_cast<std::size_t>(slice)] != 0;
    // piece_of(sample, slice).elements() != 0, without dividing where it can
    // (hidden > 0: activation_shape::validate).
    const std::int64_t rows = shape_.rows[static_cast<std::size_t>(sample)];
    if (rows == 0) return false;
    if (opts_.split == split_axis::hidden)
      return columns_[static_cast<std::size_t>(slice)].second > 0;
    return rows >= S_ || slice_bounds(rows, slice, S_).second > 0;
  }
  // Slice `slice` of sample `sample`: a range of its columns or of its rows.
  [[nodiscard]] route_piece piece_of(int sample, int slice) const {
    const std::int64_t rows = shape_.rows[static_cast<std::size_t>(sample)];
    route_piece pc{sample, slice, 0, rows, 0, shape_.hidden};
    if (opts_.split == split_axis::hidden)
      std::tie(pc.col0, pc.cols) = columns_[static_cast<std::size_t>(slice)];
    else
      std::tie(pc.row0, pc.rows) = slice_bounds(rows, slice, S_);
    return pc;
  }
  // Appends piece `pc` (sample rows at `src_row` in the sender buffer,
  // `dst_row` in the receiver buffer) to message `m`, with its pack and
  // unpack blocks (route_options::headers_only: its element count only).
  void add(route_message& m, const route_piece& pc, std::int64_t src_row,
           std::int64_t dst_row) const {
    // Offsets stay inside a buffer whose size check_route checked
    // (activation_shape::total_bytes); checked anyway, as they are cheap here.
    constexpr std::string_view w = "route.offset";
    if (pc.elements() == 0) return;  // another field's piece makes it travel
    if (opts_.headers_only) {
      m.elements = checked_add(m.elements, pc.elements(), w);
      return;
    }
    const std::int64_t H = shape_.hidden;
    const std::int64_t packed = m.elements;
    m.pieces.push_back(pc);
    const std::int64_t src_off =
        checked_add(checked_mul(checked_add(src_row, pc.row0, w), H, w), pc.col0, w);
    const std::int64_t dst_off =
        checked_add(checked_mul(checked_add(dst_row, pc.row0, w), H, w), pc.col0, w);
    m.send_blocks.push_back({src_off, packed, pc.rows, pc.cols, H, pc.cols});
    m.recv_blocks.push_back({packed, dst_off, pc.rows, pc.cols, pc.cols, H});
    m.elements = checked_add(m.elements, checked_mul(pc.rows, pc.cols, w), w);
  }
  static void finish(route_message& m) {
    kernels::coalesce_in_place(m.send_blocks);
    kernels::coalesce_in_place(m.recv_blocks);
  }

  const topology& T_;
  route_endpoint from_, to_;
  const sample_placement& pa_;
  const sample_placement& pb_;
  const activation_shape& shape_;
  const route_options& opts_;
  std::span<const char>
      occupied_;  // [sample S + slice]: travels (plan_routes); empty: has elements
  const topology_module& A_;
  const topology_module& B_;
  int S_;                                    // slices per sample
  std::vector<std::int64_t> off_a_, off_b_;  // row offset of every sample on each side
  int base_a_, base_b_;                      // rank of (replica 0, TP rank 0) on each side
  std::vector<std::pair<std::int64_t, std::int64_t>> columns_;  // split_axis::hidden
  route_skeleton own_;            // the skeleton when no other route shares one
  route_skeleton* sk_ = nullptr;  // own_ or the shared one
};

/// Builds a checked route (check_route); `occupied` as route_builder's;
/// `shared`: the skeleton of another field of the same link (plan_routes),
/// built here if it is not yet.
inline route_plan make_route(const topology& t, route_endpoint from, const sample_placement& pa,
                             route_endpoint to, const sample_placement& pb,
                             const activation_shape& shape, const route_options& opts,
                             std::span<const char> occupied, route_skeleton* shared) {
  route_builder build(t, from, pa, to, pb, shape, opts, occupied, shared);
  route_plan plan;
  plan.from_ = from;
  plan.to_ = to;
  plan.hidden_ = shape.hidden;
  plan.elem_size_ = shape.elem_size;
  plan.total_rows_ = shape.total_rows();
  plan.for_rank_ = opts.for_rank;
  plan.slices_ = build.slices();
  const int crossing = build.crossing(plan.messages_);             // phase 0
  plan.total_messages_ = build.fan_out(plan.messages_, crossing);  // phase 1
  plan.ranks_ = build.ranks();
  plan.fingerprint_ = build.fingerprint();
  return plan;
}

/// Per (sample, slice) at `sample * S + slice` (S = lcm of the two ends' TP
/// degrees), whether any of `fields`' pieces has elements: which pieces of
/// a route of several fields travel (plan_routes).
inline std::vector<char> route_occupancy(const topology& t, route_endpoint from, route_endpoint to,
                                         std::span<const route_field> fields) {
  const int S = static_cast<int>(
      std::lcm(std::int64_t{t.module(from.module).tp}, std::int64_t{t.module(to.module).tp}));
  const auto s_count = static_cast<std::size_t>(S);
  const std::size_t n = fields.empty() ? 0 : fields[0].shape.rows.size();
  std::vector<char> occupied(n * s_count, 0);
  std::vector<char> columns(s_count);  // a hidden split's non-empty column slices
  for (const route_field& f : fields) {
    if (f.split == split_axis::hidden)
      for (int k = 0; k < S; ++k)
        columns[static_cast<std::size_t>(k)] = slice_bounds(f.shape.hidden, k, S).second > 0;
    for (std::size_t s = 0; s < n; ++s) {
      const std::int64_t rows = f.shape.rows[s];
      if (rows == 0) continue;
      char* at = occupied.data() + s * s_count;
      if (f.split == split_axis::hidden)
        for (std::size_t k = 0; k < s_count; ++k) at[k] = static_cast<char>(at[k] | columns[k]);
      else if (rows >= S)  // every row slice holds a row
        std::fill(at, at + s_count, char{1});
      else
        for (int k = 0; k < S; ++k)
          if (slice_bounds(rows, k, S).second > 0) at[k] = 1;
    }
  }
  return occupied;
}

/// The route make_route builds for `shape` when it has no rows (all zero),
/// from `like`, a route of the same ends, placements, options and occupancy:
/// the same messages (none carries anything) and ranks (buffers of 0 rows),
/// without planning them again.
inline route_plan empty_route(const route_plan& like, const topology& t, route_endpoint from,
                              const sample_placement& pa, route_endpoint to,
                              const sample_placement& pb, const activation_shape& shape,
                              const route_options& opts, std::span<const char> occupied) {
  route_plan plan;
  plan.from_ = from;
  plan.to_ = to;
  plan.hidden_ = shape.hidden;
  plan.elem_size_ = shape.elem_size;
  plan.total_rows_ = 0;
  plan.for_rank_ = opts.for_rank;
  plan.slices_ = like.slices_;
  plan.total_messages_ = like.total_messages_;
  plan.messages_.reserve(like.messages_.size());
  for (const route_message& m : like.messages_) {
    route_message& e = plan.messages_.emplace_back();
    e.src = m.src;
    e.dst = m.dst;
    e.phase = m.phase;
    e.index = m.index;
  }
  plan.ranks_ = like.ranks_;
  for (route_rank_info& r : plan.ranks_) {
    if (r.src_rows >= 0) r.src_rows = 0;
    if (r.dst_rows >= 0) r.dst_rows = 0;
  }
  plan.fingerprint_ = route_builder(t, from, pa, to, pb, shape, opts, occupied).fingerprint();
  return plan;
}

}  // namespace disttrain::detail
