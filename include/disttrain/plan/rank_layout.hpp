#pragma once
/// @file rank_layout.hpp
/// @brief The map from global rank to (segment, PP stage, DP replica, TP rank)
/// and back, plus the rank lists of every TP, PP, DP and module-boundary group.
///
/// This map is the single source of truth for the communicator (comm/), the
/// reorderer (reorder/) and the executor (exec/). Everything here is a pure
/// function of the segment list, so every rank computes the same answer.
///
/// ## Numbering
/// Segments (encoder(s), backbone, generator(s)) are laid out in pipeline order,
/// each on a contiguous block of ranks starting at `base(s)`. Inside a segment
///
///     rank = base(s) + (stage * dp + replica) * tp + tp_rank
///
/// i.e. TP is innermost (TP groups are contiguous, hence inside one node when
/// `tp` divides `gpus_per_node` and the base is a multiple of `tp`), then DP,
/// then PP.
///
/// ## Groups and the order used to create communicators
/// Every group is a list of ranks in **ascending rank order**, so with
/// `MPI_Comm_split(world, color, key)` use `key = rank` (or the position in the
/// list; same order), and with `ncclCommInitRank` the group-local rank is the
/// position in the list. Groups of one kind are enumerated in a fixed order
/// and `color` = index in that enumeration (`group_color`):
///
/// | kind | members | enumeration order (color) |
/// |---|---|---|
/// | TP | same segment, stage, replica | segment, stage, replica |
/// | PP | same segment, replica, tp_rank (a replica's chain of stages) | segment, replica, tp_rank |
/// | DP | same segment, stage, tp_rank | segment, stage, tp_rank |
/// | boundary | last stage of segment i + first stage of segment i+1 | i |
///
/// TP, PP and DP groups each partition the world, so one `MPI_Comm_split` per
/// kind creates them all. Boundary groups overlap when a segment has a single
/// stage (its ranks are both the tail of one boundary and the head of the
/// next), so create boundary i with its own split: color 0 for members and
/// `MPI_UNDEFINED` for the others (or `MPI_Comm_create_group`).
///
/// @snippet plan.cpp rank_layout_file

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"

namespace disttrain {

/// @brief One module segment of the pipeline: a name, a free-form role
/// ("encoder", "backbone", "generator", ...) and its TP/PP/DP degrees.
///
/// @snippet plan.cpp segment_spec
struct segment_spec {
  std::string name;  ///< unique, non-empty
  std::string role;  ///< informative only (e.g. "encoder"); may be empty
  int tp = 1;        ///< tensor-parallel degree, >= 1
  int pp = 1;        ///< pipeline stages, >= 1
  int dp = 1;        ///< data-parallel replicas, >= 1

  /// @brief Ranks this segment occupies: tp * pp * dp.
  [[nodiscard]] long long size() const noexcept { return static_cast<long long>(tp) * pp * dp; }
  friend bool operator==(const segment_spec&, const segment_spec&) = default;
};

/// @brief Coordinates of one rank.
///
/// @snippet plan.cpp rank_coord
struct rank_coord {
  int segment = 0;  ///< index into rank_layout::segments()
  int stage = 0;    ///< PP stage within the segment
  int replica = 0;  ///< DP replica within the segment
  int tp_rank = 0;  ///< rank within the TP group
  friend bool operator==(const rank_coord&, const rank_coord&) = default;
};

/// @brief Kind of a process group.
enum class group_kind { tp, pp, dp, boundary };

/// @brief Name of a group kind: "tp", "pp", "dp", "boundary".
constexpr std::string_view to_string(group_kind k) noexcept {
  switch (k) {
    case group_kind::tp: return "tp";
    case group_kind::pp: return "pp";
    case group_kind::dp: return "dp";
    case group_kind::boundary: return "boundary";
  }
  return "unknown";
}

/// @brief The rank layout of a disaggregated pipeline (see the file comment
/// for the numbering and the group order).
///
/// @snippet plan.cpp rank_layout
class rank_layout {
 public:
  rank_layout() = default;

  /// @brief Builds the layout; `gpus_per_node` = 0 means "no node placement
  /// constraints". Throws `errc::invalid_argument` naming the segment field.
  explicit rank_layout(std::vector<segment_spec> segments, int gpus_per_node = 0)
      : segments_(std::move(segments)), gpus_per_node_(gpus_per_node) {
    validate_and_index();
  }

  /// @brief The segments in pipeline order.
  [[nodiscard]] const std::vector<segment_spec>& segments() const noexcept { return segments_; }
  /// @brief Number of segments.
  [[nodiscard]] int num_segments() const noexcept { return static_cast<int>(segments_.size()); }
  /// @brief One segment; throws if `s` is out of range.
  [[nodiscard]] const segment_spec& segment(int s) const {
    check_segment(s);
    return segments_[static_cast<std::size_t>(s)];
  }
  /// @brief Index of the segment called `name`; throws `invalid_argument` if none.
  [[nodiscard]] int segment_index(std::string_view name) const {
    for (std::size_t i = 0; i < segments_.size(); ++i)
      if (segments_[i].name == name) return static_cast<int>(i);
    fail(errc::invalid_argument, "rank_layout.segments", "no segment named '", name, "'");
  }
  /// @brief GPUs per node (0 = unconstrained).
  [[nodiscard]] int gpus_per_node() const noexcept { return gpus_per_node_; }
  /// @brief Total number of ranks.
  [[nodiscard]] int world_size() const noexcept { return world_; }
  /// @brief First rank of segment `s`.
  [[nodiscard]] int base(int s) const {
    check_segment(s);
    return bases_[static_cast<std::size_t>(s)];
  }
  /// @brief Number of ranks of segment `s`.
  [[nodiscard]] int segment_size(int s) const { return static_cast<int>(segment(s).size()); }
  /// @brief Number of nodes used (ceil(world / gpus_per_node)); 0 if unconstrained.
  [[nodiscard]] int num_nodes() const noexcept {
    return gpus_per_node_ > 0 ? (world_ + gpus_per_node_ - 1) / gpus_per_node_ : 0;
  }
  /// @brief Node of `rank` (rank / gpus_per_node); throws if unconstrained.
  [[nodiscard]] int node(int rank) const {
    check_rank(rank);
    require(gpus_per_node_ > 0, "rank_layout.gpus_per_node",
            "node placement needs gpus_per_node > 0");
    return rank / gpus_per_node_;
  }

  /// @brief Coordinates of `rank`; throws if out of [0, world_size).
  [[nodiscard]] rank_coord coord(int rank) const {
    check_rank(rank);
    // Segment: last base <= rank (bases_ strictly increasing).
    auto it = std::upper_bound(bases_.begin(), bases_.end(), rank);
    const int s = static_cast<int>(it - bases_.begin()) - 1;
    const segment_spec& g = segments_[static_cast<std::size_t>(s)];
    int off = rank - bases_[static_cast<std::size_t>(s)];
    rank_coord c;
    c.segment = s;
    c.tp_rank = off % g.tp;
    off /= g.tp;
    c.replica = off % g.dp;
    c.stage = off / g.dp;
    return c;
  }

  /// @brief Global rank at `c`; throws naming the coordinate out of range.
  [[nodiscard]] int rank(const rank_coord& c) const {
    check_segment(c.segment);
    const segment_spec& g = segments_[static_cast<std::size_t>(c.segment)];
    if (c.stage < 0 || c.stage >= g.pp || c.replica < 0 || c.replica >= g.dp || c.tp_rank < 0 ||
        c.tp_rank >= g.tp) {
      // Build the field path only on failure (rank() is on hot paths).
      const std::string w = cat("rank_layout.", g.name);
      require_in_range(c.stage, 0, g.pp - 1, w + ".stage");
      require_in_range(c.replica, 0, g.dp - 1, w + ".replica");
      require_in_range(c.tp_rank, 0, g.tp - 1, w + ".tp_rank");
    }
    return bases_[static_cast<std::size_t>(c.segment)] + (c.stage * g.dp + c.replica) * g.tp +
           c.tp_rank;
  }
  /// @brief Shorthand for `rank({segment, stage, replica, tp_rank})`.
  [[nodiscard]] int rank(int segment, int stage, int replica, int tp_rank) const {
    return rank(rank_coord{segment, stage, replica, tp_rank});
  }

  // The group queries take the stage and the replica as strong ids
  // (core/topology.hpp), as `topology` does: a stage never passes for a
  // replica, whatever the argument order.

  /// @brief Ranks of the TP group (segment, stage, replica), ascending.
  [[nodiscard]] std::vector<int> tp_group(int s, stage_id stage, replica_id replica) const {
    const segment_spec& g = segment(s);
    std::vector<int> out;
    out.reserve(static_cast<std::size_t>(g.tp));
    for (int t = 0; t < g.tp; ++t) out.push_back(rank(s, stage.value, replica.value, t));
    return out;
  }
  /// @brief Ranks of the PP group (segment, replica, tp_rank) in stage order (ascending).
  [[nodiscard]] std::vector<int> pp_group(int s, replica_id replica, int tp_rank) const {
    const segment_spec& g = segment(s);
    std::vector<int> out;
    out.reserve(static_cast<std::size_t>(g.pp));
    for (int p = 0; p < g.pp; ++p) out.push_back(rank(s, p, replica.value, tp_rank));
    return out;
  }
  /// @brief Ranks of the DP group (segment, stage, tp_rank) in replica order (ascending).
  [[nodiscard]] std::vector<int> dp_group(int s, stage_id stage, int tp_rank) const {
    const segment_spec& g = segment(s);
    std::vector<int> out;
    out.reserve(static_cast<std::size_t>(g.dp));
    for (int d = 0; d < g.dp; ++d) out.push_back(rank(s, stage.value, d, tp_rank));
    return out;
  }
  /// @brief Ranks of one whole stage of segment `s` (all replicas and TP ranks), ascending.
  [[nodiscard]] std::vector<int> stage_ranks(int s, stage_id stage) const {
    const segment_spec& g = segment(s);
    require_in_range(stage.value, 0, g.pp - 1, cat("rank_layout.", g.name, ".stage"));
    const int first = rank(s, stage.value, 0, 0);
    std::vector<int> out(static_cast<std::size_t>(g.dp * g.tp));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = first + static_cast<int>(i);
    return out;
  }
  /// @brief Number of boundaries (num_segments() - 1, or 0).
  [[nodiscard]] int num_boundaries() const noexcept {
    return segments_.empty() ? 0 : num_segments() - 1;
  }
  /// @brief Boundary group `i`: last stage of segment i then first stage of
  /// segment i+1 (ascending ranks).
  [[nodiscard]] std::vector<int> boundary_group(int i) const {
    require_in_range(i, 0, num_boundaries() - 1, "rank_layout.boundary");
    return boundary_group(i, i + 1);
  }
  /// @brief Group of the last stage of segment `a` and the first stage of
  /// segment `b` (any a != b, e.g. a second encoder feeding the backbone),
  /// ordered: segment a's ranks first, then segment b's.
  [[nodiscard]] std::vector<int> boundary_group(int a, int b) const {
    check_segment(a);
    check_segment(b);
    require(a != b, "rank_layout.boundary", "segments must differ, got ", a, " twice");
    std::vector<int> out = stage_ranks(a, stage_id{segment(a).pp - 1});
    for (const int r : stage_ranks(b, stage_id{0})) out.push_back(r);
    return out;
  }

  /// @brief All groups of `kind`, in the enumeration order of the file comment
  /// (index = color).
  [[nodiscard]] std::vector<std::vector<int>> groups(group_kind kind) const {
    std::vector<std::vector<int>> out;
    for (int s = 0; s < num_segments(); ++s) {
      const segment_spec& g = segments_[static_cast<std::size_t>(s)];
      switch (kind) {
        case group_kind::tp:
          for (int p = 0; p < g.pp; ++p)
            for (int d = 0; d < g.dp; ++d) out.push_back(tp_group(s, stage_id{p}, replica_id{d}));
          break;
        case group_kind::pp:
          for (int d = 0; d < g.dp; ++d)
            for (int t = 0; t < g.tp; ++t) out.push_back(pp_group(s, replica_id{d}, t));
          break;
        case group_kind::dp:
          for (int p = 0; p < g.pp; ++p)
            for (int t = 0; t < g.tp; ++t) out.push_back(dp_group(s, stage_id{p}, t));
          break;
        case group_kind::boundary:
          if (s + 1 < num_segments()) out.push_back(boundary_group(s));
          break;
      }
    }
    return out;
  }

  /// @brief Color of `rank`'s group of `kind` for `MPI_Comm_split` (index in
  /// `groups(kind)`). For `group_kind::boundary` use `boundary_colors` instead
  /// (a rank may belong to two boundary groups); this throws for it.
  [[nodiscard]] int group_color(group_kind kind, int r) const {
    const rank_coord c = coord(r);
    int color = 0;
    for (int s = 0; s < c.segment; ++s) color += groups_per_segment(kind, s);
    const segment_spec& g = segments_[static_cast<std::size_t>(c.segment)];
    switch (kind) {
      case group_kind::tp: return color + c.stage * g.dp + c.replica;
      case group_kind::pp: return color + c.replica * g.tp + c.tp_rank;
      case group_kind::dp: return color + c.stage * g.tp + c.tp_rank;
      case group_kind::boundary: break;
    }
    fail(errc::invalid_argument, "rank_layout.group_color",
         "boundary groups overlap; use boundary_colors(rank)");
  }
  /// @brief Position of `rank` inside its group of `kind` (the `key` /
  /// group-local rank): tp_rank, stage or replica.
  [[nodiscard]] int group_rank(group_kind kind, int r) const {
    const rank_coord c = coord(r);
    switch (kind) {
      case group_kind::tp: return c.tp_rank;
      case group_kind::pp: return c.stage;
      case group_kind::dp: return c.replica;
      case group_kind::boundary: break;
    }
    fail(errc::invalid_argument, "rank_layout.group_rank",
         "boundary groups overlap; find the rank in boundary_group(i)");
  }
  /// @brief Indices of the boundary groups `rank` belongs to (0, 1 or 2), ascending.
  [[nodiscard]] std::vector<int> boundary_colors(int r) const {
    const rank_coord c = coord(r);
    std::vector<int> out;
    const segment_spec& g = segments_[static_cast<std::size_t>(c.segment)];
    if (c.stage == 0 && c.segment > 0) out.push_back(c.segment - 1);
    if (c.stage == g.pp - 1 && c.segment + 1 < num_segments()) out.push_back(c.segment);
    return out;
  }

  friend bool operator==(const rank_layout& a, const rank_layout& b) {
    return a.segments_ == b.segments_ && a.gpus_per_node_ == b.gpus_per_node_;
  }

 private:
  [[nodiscard]] int groups_per_segment(group_kind kind, int s) const {
    const segment_spec& g = segments_[static_cast<std::size_t>(s)];
    switch (kind) {
      case group_kind::tp: return g.pp * g.dp;
      case group_kind::pp: return g.dp * g.tp;
      case group_kind::dp: return g.pp * g.tp;
      case group_kind::boundary: return s + 1 < num_segments() ? 1 : 0;
    }
    return 0;
  }

  void check_segment(int s) const {
    if (s < 0 || s >= num_segments())
      require_in_range(s, 0, num_segments() - 1, "rank_layout.segment");
  }
  void check_rank(int r) const {
    require(r >= 0 && r < world_, "rank_layout.rank", "rank ", r, " out of [0, ", world_, ")");
  }

  void validate_and_index() {
    require(!segments_.empty(), "rank_layout.segments", "needs at least one segment");
    require_non_negative(gpus_per_node_, "rank_layout.gpus_per_node");
    long long total = 0;
    bases_.clear();
    for (std::size_t i = 0; i < segments_.size(); ++i) {
      const segment_spec& g = segments_[i];
      const std::string w = cat("rank_layout.segments[", i, "]");
      require(!g.name.empty(), w + ".name", "must not be empty");
      for (std::size_t j = 0; j < i; ++j)
        require(segments_[j].name != g.name, w + ".name", "duplicate segment name '", g.name,
                "' (also segments[", j, "])");
      const std::string wn = cat("rank_layout.", g.name);
      require_positive(g.tp, wn + ".tp");
      require_positive(g.pp, wn + ".pp");
      require_positive(g.dp, wn + ".dp");
      if (gpus_per_node_ > 0) {
        require(gpus_per_node_ % g.tp == 0, wn + ".tp", "tp ", g.tp, " must divide gpus_per_node ",
                gpus_per_node_, " (TP groups stay inside a node)");
        require(total % g.tp == 0, wn + ".tp", "segment base rank ", total,
                " is not a multiple of tp ", g.tp,
                " (a TP group would straddle two nodes); reorder or pad segments");
      }
      bases_.push_back(static_cast<int>(total));
      total += g.size();
      require(total <= static_cast<long long>(INT_MAX), wn, "world size ", total,
              " exceeds INT_MAX");
    }
    world_ = static_cast<int>(total);
  }

  std::vector<segment_spec> segments_;
  std::vector<int> bases_;
  int gpus_per_node_ = 0;
  int world_ = 0;
};

}  // namespace disttrain
