#pragma once
/// @file route_plan.hpp
/// @brief The value types of a route (route.hpp plans them): its ends and
/// options, the pieces and messages it moves, the ranks taking part, and
/// `route_plan` with its fingerprint and message stamps.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"
#include "disttrain/core/rng.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/kernels/copy_blocks.hpp"

namespace disttrain {

/// @brief A stage of a module that owns ranks: where a route starts or ends.
struct route_endpoint {
  module_id module;  ///< index in `topology::modules()`
  stage_id stage;
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

/// @brief One tensor of an activation with several (`plan_routes`).
struct route_field {
  activation_shape shape;
  split_axis split = split_axis::hidden;  ///< replaces `route_options::split` for this field
};

class route_plan;

namespace detail {
struct route_skeleton;
route_plan make_route(const topology&, route_endpoint, const sample_placement&, route_endpoint,
                      const sample_placement&, const activation_shape&, const route_options&,
                      std::span<const char>, route_skeleton* = nullptr);
route_plan empty_route(const route_plan&, const topology&, route_endpoint, const sample_placement&,
                       route_endpoint, const sample_placement&, const activation_shape&,
                       const route_options&, std::span<const char>);
}  // namespace detail

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
    return i.src_rows < 0 ? 0 : checked_mul(i.src_rows, hidden_, "route.source_elements");
  }
  /// @brief Elements of `rank`'s destination buffer (0 if not a receiver).
  [[nodiscard]] std::int64_t destination_elements(int rank) const {
    const auto i = rank_info(rank);
    return i.dst_rows < 0 ? 0 : checked_mul(i.dst_rows, hidden_, "route.destination_elements");
  }
  /// @brief Elements moved in `phase` (0: crossing the boundary, 1: fan-out)
  /// by the messages planned (in a rank's part: its messages only).
  [[nodiscard]] std::int64_t phase_elements(int phase) const {
    std::int64_t e = 0;
    for (const auto& m : messages_)
      if (m.phase == phase) e = checked_add(e, m.elements, "route_plan.phase_elements");
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
  friend route_plan detail::make_route(const topology&, route_endpoint, const sample_placement&,
                                       route_endpoint, const sample_placement&,
                                       const activation_shape&, const route_options&,
                                       std::span<const char>, detail::route_skeleton*);
  friend route_plan detail::empty_route(const route_plan&, const topology&, route_endpoint,
                                        const sample_placement&, route_endpoint,
                                        const sample_placement&, const activation_shape&,
                                        const route_options&, std::span<const char>);

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

/// Bytes of `elements` elements of `elem_size` bytes (checked; `where` names the quantity).
[[nodiscard]] inline std::size_t element_bytes(std::int64_t elements, std::size_t elem_size,
                                               std::string_view where) {
  if (elements < 0) fail(errc::invalid_argument, where, "negative element count ", elements);
  return checked_mul(static_cast<std::size_t>(elements), elem_size, where);
}

}  // namespace detail

}  // namespace disttrain
