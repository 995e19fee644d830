#pragma once
/// @file sample_placement.hpp
/// @brief Which DP replica of a segment processes which sample, and in what
/// order the samples sit in that replica's activation buffer; plus the
/// per-sample activation shape both ends of a route hold.
///
/// The reorderer produces one placement per segment per microbatch (its
/// sample -> replica map); routes between segments are derived from the two
/// placements, so no shape or sample list ever travels on the wire.
///
/// @snippet comm.cpp sample_placement_file

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"

namespace disttrain {

/// @brief Assignment of samples 0..n-1 to the DP replicas of one segment,
/// with the order of the samples inside each replica's buffer.
///
/// @snippet comm.cpp sample_placement
class sample_placement {
 public:
  sample_placement() = default;

  /// @brief From ordered per-replica lists; the ids must be a permutation of
  /// 0..n-1 (n = total count). Throws `invalid_argument` naming the entry.
  explicit sample_placement(std::vector<std::vector<int>> samples_of_replica)
      : lists_(std::move(samples_of_replica)) {
    require(!lists_.empty(), "sample_placement", "needs at least one replica");
    std::size_t n = 0;
    for (const auto& l : lists_) n += l.size();
    replica_.assign(n, -1);
    position_.assign(n, -1);
    for (std::size_t d = 0; d < lists_.size(); ++d)
      for (std::size_t p = 0; p < lists_[d].size(); ++p) {
        const int s = lists_[d][p];
        // The field name is built only on failure (placements are built per microbatch).
        if (!(s >= 0 && static_cast<std::size_t>(s) < n))
          fail(errc::invalid_argument, cat("sample_placement.replica[", d, "][", p, "]"),
               "sample id ", s, " out of [0, ", n, ")");
        if (replica_[static_cast<std::size_t>(s)] >= 0)
          fail(errc::invalid_argument, cat("sample_placement.replica[", d, "][", p, "]"), "sample ",
               s, " placed twice (also replica ", replica_[static_cast<std::size_t>(s)], ")");
        replica_[static_cast<std::size_t>(s)] = static_cast<int>(d);
        position_[static_cast<std::size_t>(s)] = static_cast<int>(p);
      }
  }

  /// @brief From a sample -> replica map; samples keep ascending id order
  /// inside each replica.
  [[nodiscard]] static sample_placement from_replica_map(std::span<const int> replica_of_sample,
                                                         int dp) {
    require_positive(dp, "sample_placement.dp");
    std::vector<std::vector<int>> lists(static_cast<std::size_t>(dp));
    for (std::size_t s = 0; s < replica_of_sample.size(); ++s) {
      const int d = replica_of_sample[s];
      require(
          d >= 0 && d < dp, [&] { return cat("sample_placement.replica_of[", s, "]"); }, "replica ",
          d, " out of [0, ", dp, ")");
      lists[static_cast<std::size_t>(d)].push_back(static_cast<int>(s));
    }
    return sample_placement(std::move(lists));
  }
  /// @brief Round-robin assignment of n samples on dp replicas (sample s on s % dp).
  [[nodiscard]] static sample_placement round_robin(int n, int dp) {
    require_non_negative(n, "sample_placement.n");
    require_positive(dp, "sample_placement.dp");
    std::vector<int> m(static_cast<std::size_t>(n));
    for (int s = 0; s < n; ++s) m[static_cast<std::size_t>(s)] = s % dp;
    return from_replica_map(m, dp);
  }

  /// @brief Number of replicas.
  [[nodiscard]] int dp() const noexcept { return static_cast<int>(lists_.size()); }
  /// @brief Number of samples.
  [[nodiscard]] int num_samples() const noexcept { return static_cast<int>(replica_.size()); }
  /// @brief Samples of `replica`, in buffer order.
  [[nodiscard]] const std::vector<int>& samples(int replica) const {
    require_in_range(replica, 0, dp() - 1, "sample_placement.replica");
    return lists_[static_cast<std::size_t>(replica)];
  }
  /// @brief Replica holding sample `s`.
  [[nodiscard]] int replica_of(int s) const {
    check_sample(s);
    return replica_[static_cast<std::size_t>(s)];
  }
  /// @brief Position of sample `s` in its replica's list.
  [[nodiscard]] int position_of(int s) const {
    check_sample(s);
    return position_[static_cast<std::size_t>(s)];
  }
  friend bool operator==(const sample_placement& a, const sample_placement& b) {
    return a.lists_ == b.lists_;
  }

 private:
  void check_sample(int s) const {
    require(s >= 0 && s < num_samples(), "sample_placement.sample", "sample ", s, " out of [0, ",
            num_samples(), ")");
  }
  std::vector<std::vector<int>> lists_;
  std::vector<int> replica_;
  std::vector<int> position_;
};

/// @brief Shape of the activations crossing a route: sample s is a row-major
/// `rows[s] x hidden` matrix of `elem_size`-byte elements; a replica's buffer
/// concatenates its samples along the rows in placement order.
///
/// @snippet comm.cpp activation_shape
struct activation_shape {
  std::vector<std::int64_t> rows;  ///< per-sample rows (tokens), >= 0
  std::int64_t hidden = 1;         ///< elements per row, > 0
  std::size_t elem_size = 4;       ///< bytes per element, > 0

  /// @brief Throws `invalid_argument` naming the field, also when the whole
  /// activation (`sum(rows) x hidden x elem_size` bytes) does not fit in
  /// `int64_t`: every offset, count and byte size derived from the shape fits then.
  void validate(std::string_view where = "activation_shape") const {
    // (Field names are built only on failure: a shape is checked per route.)
    if (hidden <= 0) require_positive(hidden, cat(where, ".hidden"));
    if (elem_size == 0)
      fail(errc::invalid_argument, cat(where, ".elem_size"), "must be > 0, got ", elem_size);
    if (elem_size > static_cast<std::size_t>(INT64_MAX))
      fail(errc::invalid_argument, cat(where, ".elem_size"), "must be <= ", INT64_MAX, ", got ",
           elem_size);
    for (std::size_t s = 0; s < rows.size(); ++s)
      if (rows[s] < 0) require_non_negative(rows[s], cat(where, ".rows[", s, "]"));
    (void)total_bytes(where);
  }
  /// @brief Rows of all samples together (overflow: `invalid_argument` at `<where>.rows`).
  [[nodiscard]] std::int64_t total_rows(std::string_view where = "activation_shape") const {
    std::int64_t r = 0;
    for (std::int64_t x : rows) {
      if (add_overflows(r, x)) (void)checked_add(r, x, cat(where, ".rows"));
      r += x;
    }
    return r;
  }
  /// @brief Elements of all samples: `total_rows() x hidden` (checked; the
  /// overflow names `<where>.hidden`).
  [[nodiscard]] std::int64_t total_elements(std::string_view where = "activation_shape") const {
    const std::int64_t r = total_rows(where);
    if (mul_overflows(r, hidden)) (void)checked_mul(r, hidden, cat(where, ".hidden"));
    return r * hidden;
  }
  /// @brief Bytes of all samples: `total_elements() x elem_size` (checked
  /// against `int64_t`; the overflow names `<where>.elem_size`).
  [[nodiscard]] std::int64_t total_bytes(std::string_view where = "activation_shape") const {
    const std::int64_t e = total_elements(where);
    const auto es = static_cast<std::int64_t>(elem_size);
    if (elem_size > static_cast<std::size_t>(INT64_MAX) || mul_overflows(e, es))
      fail(errc::invalid_argument, cat(where, ".elem_size"), "size overflow: ", e, " elements x ",
           elem_size, " bytes exceeds ", INT64_MAX, " bytes");
    return e * es;
  }
  /// @brief Rows of one replica's buffer under `p` (checked).
  [[nodiscard]] std::int64_t replica_rows(const sample_placement& p, int replica) const {
    std::int64_t r = 0;
    for (int s : p.samples(replica))
      r = checked_add(r, rows.at(static_cast<std::size_t>(s)), "activation_shape.rows");
    return r;
  }
  friend bool operator==(const activation_shape&, const activation_shape&) = default;
};

}  // namespace disttrain
