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
/// @snippet comm.cpp route

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"
#include "disttrain/kernels/copy_blocks.hpp"
#include "disttrain/model/rng.hpp"
#include "disttrain/plan/rank_layout.hpp"

namespace disttrain {

/// @brief A stage of a segment: where a route starts or ends.
struct route_endpoint {
  int segment = 0;
  int stage = 0;
  friend bool operator==(const route_endpoint&, const route_endpoint&) = default;
};

/// @brief How a sample is cut into slices for the crossing.
enum class split_axis {
  hidden,  ///< column slices of the hidden dimension (packed: non-contiguous)
  rows,    ///< row slices (contiguous: zero copy when a message is one range)
};

/// @brief Options of `plan_route`.
///
/// @snippet comm.cpp route_options
struct route_options {
  split_axis split = split_axis::hidden;
  bool fan_out = true;  ///< add phase 1 so every receiving TP rank gets the full activation
  /// The route carries gradients back: `from` is the *later* stage (the one
  /// after `to` in the pipeline). Pieces, phases and fan-out are planned the
  /// same way, from `from`'s placement to `to`'s.
  bool backward = false;
  /// >= 0: plan only the messages this global rank sends or receives (its
  /// part; `route_plan::for_rank`). -1: the whole route. Not part of the
  /// fingerprint: a rank's part and the whole plan agree on the wire.
  int for_rank = -1;
  /// Leave out the messages' pieces and blocks: each keeps src, dst, phase,
  /// elements and index (for simulators and `bind_world`; nothing to pack).
  bool headers_only = false;
};

/// @brief One rectangle of one sample carried by a message (rows and columns
/// relative to the sample).
struct route_piece {
  int sample = 0;
  int slice = 0;
  std::int64_t row0 = 0;
  std::int64_t rows = 0;
  std::int64_t col0 = 0;
  std::int64_t cols = 0;
  [[nodiscard]] std::int64_t elements() const noexcept { return rows * cols; }
  friend bool operator==(const route_piece&, const route_piece&) = default;
};

/// @brief One message of a route: what `src` packs from its buffer and what
/// `dst` unpacks into its buffer. Phase 0 reads the sender's *source* buffer
/// (its replica of placement A); phase 1 reads the sender's *destination*
/// buffer (its replica of placement B). Both write the receiver's destination
/// buffer. Block offsets are in elements.
struct route_message {
  int src = 0;                                   ///< sending rank
  int dst = 0;                                   ///< receiving rank
  int phase = 0;                                 ///< 0: crossing, 1: fan-out
  std::vector<route_piece> pieces;               ///< in packing order
  std::vector<kernels::copy_block> send_blocks;  ///< sender buffer -> packed message
  std::vector<kernels::copy_block> recv_blocks;  ///< packed message -> receiver buffer
  std::int64_t elements = 0;                     ///< elements in the message
  int index = 0;  ///< position in the whole route's (phase, sender, receiver) order

  /// @brief True if the sender's data is one contiguous range (sent in place).
  [[nodiscard]] bool contiguous_send() const noexcept {
    return send_blocks.size() == 1 && send_blocks[0].rows == 1;
  }
  /// @brief True if the receiver's data is one contiguous range (received in place).
  [[nodiscard]] bool contiguous_recv() const noexcept {
    return recv_blocks.size() == 1 && recv_blocks[0].rows == 1;
  }
};

/// @brief Role of one rank in a route and the rows of its buffers (-1: none).
struct route_rank_info {
  int rank = -1;
  std::int64_t src_rows = -1;  ///< rows of its source buffer (sending stage), -1 if not there
  std::int64_t dst_rows =
      -1;  ///< rows of its destination buffer (receiving stage), -1 if not there
  friend bool operator==(const route_rank_info&, const route_rank_info&) = default;
};

/// @brief The transfer plan of one route (see the file comment).
class route_plan {
 public:
  route_plan() = default;

  /// @brief The messages planned, in the whole route's order: all of them,
  /// or (`for_rank() >= 0`) those of that rank, each with its whole-route
  /// `index`. Positions in this vector are what `sends_of`/`recvs_of` return.
  [[nodiscard]] const std::vector<route_message>& messages() const noexcept { return messages_; }
  /// @brief The rank whose part this is (route_options::for_rank), -1 for the whole route.
  [[nodiscard]] int for_rank() const noexcept { return for_rank_; }
  /// @brief Messages of the whole route (also in a rank's part).
  [[nodiscard]] int total_messages() const noexcept { return total_messages_; }
  /// @brief The message at whole-route position `index` (`route_message::index`).
  /// Throws `invalid_argument` at `route_plan.message` when out of range or,
  /// in a rank's part, not one of that rank's messages.
  [[nodiscard]] const route_message& message(int index) const {
    require_in_range(index, 0, total_messages_ - 1, "route_plan.message");
    auto it = std::lower_bound(messages_.begin(), messages_.end(), index,
                               [](const route_message& m, int v) { return m.index < v; });
    if (it == messages_.end() || it->index != index)
      fail(errc::invalid_argument, "route_plan.message", "message ", index, " is not one of rank ",
           for_rank_, "'s (the plan holds that rank's part only)");
    return *it;
  }
  [[nodiscard]] route_endpoint from() const noexcept { return from_; }
  [[nodiscard]] route_endpoint to() const noexcept { return to_; }
  [[nodiscard]] std::int64_t hidden() const noexcept { return hidden_; }
  [[nodiscard]] std::size_t elem_size() const noexcept { return elem_size_; }
  /// @brief Number of slices per sample, lcm(TP_a, TP_b).
  [[nodiscard]] int slices() const noexcept { return slices_; }

  /// @brief Indices (into messages()) of the messages `rank` sends in `phase`,
  /// ascending. In a rank's part, another rank's come out empty.
  [[nodiscard]] std::vector<int> sends_of(int rank, int phase) const {
    return select(rank, phase, true);
  }
  /// @brief Indices of the messages `rank` receives in `phase`, ascending.
  [[nodiscard]] std::vector<int> recvs_of(int rank, int phase) const {
    return select(rank, phase, false);
  }
  /// @brief Role of `rank` (src_rows / dst_rows = -1 where it takes no part).
  [[nodiscard]] route_rank_info rank_info(int rank) const {
    auto it = std::lower_bound(ranks_.begin(), ranks_.end(), rank,
                               [](const route_rank_info& r, int v) { return r.rank < v; });
    if (it != ranks_.end() && it->rank == rank) return *it;
    return route_rank_info{rank, -1, -1};
  }
  /// @brief Elements of `rank`'s source buffer (0 if not a sender).
  [[nodiscard]] std::int64_t source_elements(int rank) const {
    const auto i = rank_info(rank);
    return i.src_rows < 0 ? 0 : detail::checked_mul(i.src_rows, hidden_, "route.source_elements");
  }
  /// @brief Elements of `rank`'s destination buffer (0 if not a receiver).
  [[nodiscard]] std::int64_t destination_elements(int rank) const {
    const auto i = rank_info(rank);
    return i.dst_rows < 0 ? 0
                          : detail::checked_mul(i.dst_rows, hidden_, "route.destination_elements");
  }
  /// @brief Elements moved in `phase` (0: crossing the boundary, 1: fan-out)
  /// by the messages planned (in a rank's part: its messages only).
  [[nodiscard]] std::int64_t phase_elements(int phase) const {
    std::int64_t e = 0;
    for (const auto& m : messages_)
      if (m.phase == phase) e = detail::checked_add(e, m.elements, "route_plan.phase_elements");
    return e;
  }
  /// @brief The least elements any plan must move across: sum of rows x hidden.
  [[nodiscard]] std::int64_t minimum_crossing_elements() const noexcept {
    return total_rows_ * hidden_;
  }
  /// @brief Ranks taking part, ascending (in a rank's part: that rank, if it takes part).
  [[nodiscard]] const std::vector<route_rank_info>& ranks() const noexcept { return ranks_; }
  /// @brief 64-bit fingerprint of everything the plan was built from: both
  /// endpoints and their TP/DP degrees and ranks, both placements (sample
  /// order included), every sample's rows, hidden, element size, split axis
  /// and fan-out. Two ranks that planned from different inputs get different
  /// fingerprints (up to hash collisions, ~2^-64); `route_transfer` sends it
  /// ahead of every message, so a disagreement is an error even without
  /// verify mode.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept { return fingerprint_; }
  /// @brief 64-bit stamp of message `m` of this plan: the fingerprint mixed
  /// with the message's ends, phase and element count. Both ends of a message
  /// compute the same stamp iff they planned from the same inputs (a rank's
  /// part gives the whole plan's stamps); `route_transfer` and the executor
  /// of bound programs send it with every message.
  [[nodiscard]] std::uint64_t stamp(const route_message& m) const noexcept;

 private:
  friend route_plan plan_route(const rank_layout&, route_endpoint, const sample_placement&,
                               route_endpoint, const sample_placement&, const activation_shape&,
                               route_options);

  [[nodiscard]] std::vector<int> select(int rank, int phase, bool sending) const {
    std::vector<int> out;
    for (std::size_t i = 0; i < messages_.size(); ++i) {
      const auto& m = messages_[i];
      if (m.phase == phase && (sending ? m.src : m.dst) == rank) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  std::vector<route_message> messages_;
  std::vector<route_rank_info> ranks_;
  route_endpoint from_;
  route_endpoint to_;
  std::int64_t hidden_ = 0;
  std::size_t elem_size_ = 0;
  std::int64_t total_rows_ = 0;
  int slices_ = 1;
  std::uint64_t fingerprint_ = 0;
  int for_rank_ = -1;
  int total_messages_ = 0;
};

namespace detail {

/// Order-sensitive 64-bit hash of a sequence of integers (SplitMix64's mixer
/// per word): not cryptographic, only to tell apart plans built from different inputs.
class fingerprint_builder {
 public:
  template <class T>
  fingerprint_builder& add(T v) noexcept {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>);
    std::uint64_t x;
    if constexpr (std::is_enum_v<T>)
      x = static_cast<std::uint64_t>(static_cast<std::underlying_type_t<T>>(v));
    else
      x = static_cast<std::uint64_t>(v);
    h_ = splitmix64::mix(h_ ^ x) + 0x9E3779B97F4A7C15ull;
    return *this;
  }
  [[nodiscard]] std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 0x6469737474726e31ull;  // "disttrn1": the fingerprint's version
};

}  // namespace detail

inline std::uint64_t route_plan::stamp(const route_message& m) const noexcept {
  detail::fingerprint_builder f;
  return f.add(fingerprint_).add(m.src).add(m.dst).add(m.phase).add(m.elements).value();
}

namespace detail {

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

/// Bytes of `elements` elements of `elem_size` bytes (checked; `where` names the quantity).
[[nodiscard]] inline std::size_t element_bytes(std::int64_t elements, std::size_t elem_size,
                                               std::string_view where) {
  if (elements < 0) fail(errc::invalid_argument, where, "negative element count ", elements);
  return checked_mul(static_cast<std::size_t>(elements), elem_size, where);
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

/// Appends `piece` (sample rows at `src_row` in the sender buffer, `dst_row` in
/// the receiver buffer) to message `m`, with its pack and unpack blocks.
inline void add_piece(route_message& m, const route_piece& pc, std::int64_t src_row,
                      std::int64_t dst_row, std::int64_t hidden) {
  // Offsets stay inside a buffer whose size plan_route checked
  // (activation_shape::total_bytes); checked anyway, as they are cheap here.
  constexpr std::string_view w = "route.offset";
  const std::int64_t packed = m.elements;
  m.pieces.push_back(pc);
  const std::int64_t src_off =
      checked_add(checked_mul(checked_add(src_row, pc.row0, w), hidden, w), pc.col0, w);
  const std::int64_t dst_off =
      checked_add(checked_mul(checked_add(dst_row, pc.row0, w), hidden, w), pc.col0, w);
  m.send_blocks.push_back({src_off, packed, pc.rows, pc.cols, hidden, pc.cols});
  m.recv_blocks.push_back({packed, dst_off, pc.rows, pc.cols, pc.cols, hidden});
  m.elements = checked_add(m.elements, checked_mul(pc.rows, pc.cols, w), w);
}

}  // namespace detail

/// @brief Plans the route from stage `from` (samples placed by `pa`) to stage
/// `to` (samples placed by `pb`). `from` and `to` are consecutive stages of
/// one segment, or the last stage of one segment and the first of another.
/// Throws `invalid_argument` naming the field (`route.from.stage`,
/// `route.placement_b`, `activation_shape.rows[3]`, ...).
[[nodiscard]] inline route_plan plan_route(const rank_layout& L, route_endpoint from,
                                           const sample_placement& pa, route_endpoint to,
                                           const sample_placement& pb,
                                           const activation_shape& shape, route_options opts = {}) {
  // ---- validation
  require_in_range(from.segment, 0, L.num_segments() - 1, "route.from.segment");
  require_in_range(to.segment, 0, L.num_segments() - 1, "route.to.segment");
  const segment_spec& A = L.segment(from.segment);
  const segment_spec& B = L.segment(to.segment);
  require_in_range(from.stage, 0, A.pp - 1, "route.from.stage");
  require_in_range(to.stage, 0, B.pp - 1, "route.to.stage");
  {
    // The pipeline order of the two ends: (up, down); a backward route
    // (gradients, route_options::backward) runs down -> up.
    const auto [up, down] = opts.backward ? std::pair{to, from} : std::pair{from, to};
    const char* up_field = opts.backward ? "route.to" : "route.from";
    const char* down_field = opts.backward ? "route.from" : "route.to";
    const segment_spec& U = L.segment(up.segment);
    const segment_spec& D = L.segment(down.segment);
    // (Field names are built only on failure: routes are planned per microbatch.)
    if (up.segment == down.segment) {
      if (down.stage != up.stage + 1)
        fail(errc::invalid_argument, cat(down_field, ".stage"), "within segment '", U.name,
             "' a route joins consecutive stages: stage ", up.stage, " and stage ", up.stage + 1,
             ", got ", down.stage);
      // Consecutive stages of one module hold the same replicas' samples in the
      // same order (Megatron hands the activation on as is).
      if (!(pa == pb))
        fail(errc::invalid_argument, "route.placement_b",
             "consecutive stages of one module need the same placement: stage ", from.stage,
             " and stage ", to.stage, " of '", A.name,
             "' were given different ones (first difference: ",
             detail::first_placement_difference(pa, pb), ")");
    } else {
      const int step = opts.backward ? -1 : 1;
      if (down.segment != up.segment + 1)
        fail(errc::invalid_argument, cat(down_field, ".segment"),
             opts.backward ? "a gradient route runs backward" : "a module boundary runs forward",
             ", from segment ", from.segment, " ('", A.name, "') to segment ", from.segment + step,
             ", got segment ", to.segment, " ('", B.name, "')",
             !opts.backward && to.segment < from.segment
                 ? " (a backward route: set route_options::backward for gradients)"
                 : "");
      if (up.stage != U.pp - 1)
        fail(errc::invalid_argument, cat(up_field, ".stage"),
             "a module boundary joins the last stage ", U.pp - 1, " of '", U.name, "', got ",
             up.stage);
      if (down.stage != 0)
        fail(errc::invalid_argument, cat(down_field, ".stage"),
             "a module boundary joins stage 0 of '", D.name, "', got ", down.stage);
    }
  }
  require_in_range(opts.for_rank, -1, L.world_size() - 1, "route_options.for_rank");
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

  route_plan plan;
  plan.from_ = from;
  plan.to_ = to;
  plan.hidden_ = shape.hidden;
  plan.elem_size_ = shape.elem_size;
  plan.total_rows_ = shape.total_rows();
  plan.for_rank_ = opts.for_rank;
  const std::int64_t lcm_tp = std::lcm(std::int64_t{A.tp}, std::int64_t{B.tp});
  require(lcm_tp <= INT_MAX, "route.slices", "lcm(tp ", A.tp, ", tp ", B.tp, ") = ", lcm_tp,
          " slices exceeds ", INT_MAX);
  const int S = static_cast<int>(lcm_tp);
  // The fan-out moves (TP_b - 1) more copies of everything: its totals must fit too.
  if (opts.fan_out)
    (void)detail::checked_mul(shape.total_bytes(), std::int64_t{B.tp}, "route.fan_out");
  plan.slices_ = S;
  const std::int64_t H = shape.hidden;
  const auto off_a = detail::row_offsets(pa, shape);
  const auto off_b = detail::row_offsets(pb, shape);
  // Global rank of (replica, TP rank) on each side (rank_layout's numbering:
  // TP innermost, replicas next).
  const int base_a = L.rank(from.segment, from.stage, 0, 0);
  const int base_b = L.rank(to.segment, to.stage, 0, 0);
  const auto rank_a = [&](int a, int t) { return base_a + a * A.tp + t; };
  const auto rank_b = [&](int b, int t) { return base_b + b * B.tp + t; };

  // Column slices of the hidden dimension, the same for every sample.
  std::vector<std::pair<std::int64_t, std::int64_t>> columns;
  if (opts.split == split_axis::hidden && n > 0)
    for (int k = 0; k < S; ++k) columns.push_back(detail::slice_bounds(H, k, S));
  auto piece_of = [&](int s, int k) {
    const std::int64_t rows = shape.rows[static_cast<std::size_t>(s)];
    route_piece pc{s, k, 0, rows, 0, H};
    if (opts.split == split_axis::hidden) {
      std::tie(pc.col0, pc.cols) = columns[static_cast<std::size_t>(k)];
    } else {
      std::tie(pc.row0, pc.rows) = detail::slice_bounds(rows, k, S);
    }
    return pc;
  };
  // Which messages are built: the whole route's, or those of one rank
  // (route_options::for_rank). Every message is numbered either way.
  const int me = opts.for_rank;
  const auto wanted = [me](int src, int dst) { return me < 0 || src == me || dst == me; };
  const auto add = [&](route_message& m, const route_piece& pc, std::int64_t src_row,
                       std::int64_t dst_row) {
    if (opts.headers_only)
      m.elements = detail::checked_add(m.elements, pc.elements(), "route.offset");
    else
      detail::add_piece(m, pc, src_row, dst_row, H);
  };
  const auto finish = [&](route_message& m) {
    kernels::coalesce_in_place(m.send_blocks);
    kernels::coalesce_in_place(m.recv_blocks);
  };
  const auto key_of = [](int src, int dst) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
           static_cast<std::uint32_t>(dst);
  };

  // ---- phase 0: crossing. Piece (s, k) goes from TP rank k % TP_a of the
  // replica holding s in A to TP rank k % TP_b of the one needing it in B. The
  // distinct (src, dst) pairs, ascending, are the phase-0 messages.
  struct crossing {
    std::uint64_t key;
    int sample, slice;
  };
  std::vector<crossing> crossings;
  crossings.reserve(n * static_cast<std::size_t>(S));
  // carries[b * TP_b + t]: TP rank t of replica b receives a piece (so it forwards in phase 1).
  std::vector<char> carries(static_cast<std::size_t>(B.dp) * static_cast<std::size_t>(B.tp), 0);
  for (int b = 0; b < B.dp; ++b)
    for (int s : pb.samples(b)) {
      const int a = pa.replica_of(s);
      for (int k = 0; k < S; ++k) {
        const route_piece pc = piece_of(s, k);
        if (pc.elements() == 0) continue;
        const int src = rank_a(a, k % A.tp);
        const int dst = rank_b(b, k % B.tp);
        crossings.push_back({key_of(src, dst), s, k});
        carries[static_cast<std::size_t>(b * B.tp + k % B.tp)] = 1;
      }
    }
  std::vector<std::uint64_t> pairs(crossings.size());
  for (std::size_t i = 0; i < crossings.size(); ++i) pairs[i] = crossings[i].key;
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  if (me < 0) {  // the whole route: every pair, then (TP_b - 1) copies of each template
    std::size_t all = pairs.size();
    if (opts.fan_out && B.tp > 1)
      for (const char c : carries) all += c ? static_cast<std::size_t>(B.tp - 1) : 0;
    plan.messages_.reserve(all);
  }
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const int src = static_cast<int>(pairs[i] >> 32);
    const int dst = static_cast<int>(pairs[i] & 0xffffffffu);
    if (!wanted(src, dst)) continue;
    route_message& m = plan.messages_.emplace_back();
    m.src = src;
    m.dst = dst;
    m.index = static_cast<int>(i);
  }
  // Pieces in generation order: by position in the receiving replica, then slice.
  for (const crossing& c : crossings) {
    const int src = static_cast<int>(c.key >> 32);
    const int dst = static_cast<int>(c.key & 0xffffffffu);
    if (!wanted(src, dst)) continue;
    auto it = std::lower_bound(
        plan.messages_.begin(), plan.messages_.end(), c.key,
        [&](const route_message& m, std::uint64_t v) { return key_of(m.src, m.dst) < v; });
    const auto s = static_cast<std::size_t>(c.sample);
    add(*it, piece_of(c.sample, c.slice), off_a[s], off_b[s]);
  }
  for (auto& m : plan.messages_) finish(m);
  int index = static_cast<int>(pairs.size());

  // ---- phase 1: fan-out inside each receiving TP group. The TP rank `owner`
  // of replica b forwards every slice it received (k % TP_b == owner) to each
  // other TP rank: one template message per (b, owner), copied per receiver.
  // Generated in (src, dst) order: src = rank(b, owner) grows with (b, owner).
  if (opts.fan_out && B.tp > 1) {
    // In a rank's part, only its own replica's TP group can hold its messages.
    int my_replica = -1;
    if (me >= 0) {
      const rank_coord mc = L.coord(me);
      if (mc.segment == to.segment && mc.stage == to.stage) my_replica = mc.replica;
    }
    for (int b = 0; b < B.dp; ++b)
      for (int owner = 0; owner < B.tp; ++owner) {
        if (!carries[static_cast<std::size_t>(b * B.tp + owner)]) continue;
        if (me >= 0 && b != my_replica) {
          index += B.tp - 1;
          continue;
        }
        route_message tmpl;
        bool built = false;
        tmpl.phase = 1;
        tmpl.src = rank_b(b, owner);
        for (int t = 0; t < B.tp; ++t) {
          if (t == owner) continue;
          const int i = index++;
          const int dst = rank_b(b, t);
          if (!wanted(tmpl.src, dst)) continue;
          if (!built) {
            for (int s : pb.samples(b))
              for (int k = owner; k < S; k += B.tp) {
                const route_piece pc = piece_of(s, k);
                if (pc.elements() == 0) continue;
                add(tmpl, pc, off_b[static_cast<std::size_t>(s)],
                    off_b[static_cast<std::size_t>(s)]);
              }
            finish(tmpl);
            built = true;
          }
          route_message& m = plan.messages_.emplace_back(tmpl);
          m.dst = dst;
          m.index = i;
        }
      }
  }
  plan.total_messages_ = index;

  // ---- per-rank buffer sizes
  for (int a = 0; a < A.dp; ++a)
    for (int t = 0; t < A.tp; ++t) {
      const int r = rank_a(a, t);
      if (me < 0 || r == me) plan.ranks_.push_back({r, shape.replica_rows(pa, a), -1});
    }
  for (int b = 0; b < B.dp; ++b)
    for (int t = 0; t < B.tp; ++t) {
      const int r = rank_b(b, t);
      if (me < 0 || r == me) plan.ranks_.push_back({r, -1, shape.replica_rows(pb, b)});
    }
  std::sort(plan.ranks_.begin(), plan.ranks_.end(),
            [](const route_rank_info& x, const route_rank_info& y) { return x.rank < y.rank; });

  // ---- fingerprint of the inputs (checked against the peer's on the wire)
  detail::fingerprint_builder f;
  for (const auto& [e, seg] : {std::pair{from, &A}, std::pair{to, &B}})
    f.add(e.segment).add(e.stage).add(seg->tp).add(seg->dp).add(L.rank(e.segment, e.stage, 0, 0));
  f.add(opts.split).add(opts.fan_out).add(shape.hidden).add(shape.elem_size).add(n);
  for (std::int64_t r : shape.rows) f.add(r);
  detail::add_placement(f, pa);
  detail::add_placement(f, pb);
  plan.fingerprint_ = f.value();
  return plan;
}

/// @brief Route across module boundary `i` (last stage of segment i -> first
/// stage of segment i+1).
[[nodiscard]] inline route_plan plan_boundary_route(const rank_layout& L, int boundary,
                                                    const sample_placement& pa,
                                                    const sample_placement& pb,
                                                    const activation_shape& shape,
                                                    route_options opts = {}) {
  require_in_range(boundary, 0, L.num_boundaries() - 1, "route.boundary");
  const int a = boundary;
  return plan_route(L, {a, L.segment(a).pp - 1}, pa, {a + 1, 0}, pb, shape, opts);
}

/// @brief Route between stage `stage` and `stage + 1` of one segment (same placement).
[[nodiscard]] inline route_plan plan_stage_route(const rank_layout& L, int segment, int stage,
                                                 const sample_placement& p,
                                                 const activation_shape& shape,
                                                 route_options opts = {}) {
  return plan_route(L, {segment, stage}, p, {segment, stage + 1}, p, shape, opts);
}

}  // namespace disttrain
