#pragma once
/// @file topology.hpp
/// @brief The one description of a disaggregated pipeline: for each module its
/// name, role, TP/PP/DP degrees, whether it trains, whether it is colocated,
/// and optionally its layers per stage; with strong ids and the one global
/// rank numbering.
///
/// The communicator plans its routes on a `topology` (comm/route.hpp), and
/// every other view of the pipeline is *derived* from one by a library
/// function (bind/topology_views.hpp): the schedule's chain spec, the
/// reorderer's options, the workload cost; a `parallel_plan` converts to one
/// (`topology_of`, plan/layout.hpp). No trainer copies degrees field by field.
///
/// ## Rank numbering (the only one)
/// Modules that own GPUs are numbered in pipeline order; inside a module
/// stage-major, then replica, then TP rank:
/// `rank = base(module) + (stage * dp + replica) * tp + tp_rank`. A colocated
/// module owns no ranks: it runs on the ranks of the backbone stage it sits on
/// (its first stage for an encoder, its last for a generator).
///
/// ## Groups and the order used to create communicators
/// Every group is a list of ranks in **ascending rank order**, so with
/// `MPI_Comm_split(world, color, key)` use `key = rank` (or the position in the
/// list; same order), and with `ncclCommInitRank` the group-local rank is the
/// position in the list. Groups of one kind are enumerated in a fixed order
/// and `color` = index in that enumeration (`group_color`); modules that own
/// ranks, in pipeline order:
///
/// | kind | members | enumeration order (color) |
/// |---|---|---|
/// | TP | same module, stage, replica | module, stage, replica |
/// | PP | same module, replica, tp_rank (a replica's chain of stages) | module, replica, tp_rank |
/// | DP | same module, stage, tp_rank | module, stage, tp_rank |
/// | boundary | last stage of owning module i + first stage of owning module i+1 | i |
///
/// TP, PP and DP groups each partition the world, so one `MPI_Comm_split` per
/// kind creates them all. Boundary groups overlap when a module has a single
/// stage (its ranks are both the tail of one boundary and the head of the
/// next), so create boundary i with its own split: color 0 for members and
/// `MPI_UNDEFINED` for the others (or `MPI_Comm_create_group`).
///
/// @snippet core.cpp topology_groups
///
/// ## Chain stages
/// The pipeline as one chain: the stages of every non-colocated module in
/// order. Chain stage c runs on the ranks of `(module, stage) = chain_at(c)`;
/// link c joins chain stage c to c + 1.
///
/// ## Virtual stages (a microbatch's path)
/// A module with `chunks` > 1 holds, on each stage's ranks, that many model
/// chunks (Megatron-LM's interleaving): the path runs chunk 0 over all its
/// stages, then chunk 1, and so on. Virtual stage v is the v-th step of the
/// path over the owning modules: a module of P stages and V chunks whose
/// path starts at o has stage s chunk c at `o + c * P + s`. Link v joins
/// virtual stages v and v + 1 (`num_links`); without chunks, virtual stages
/// are chain stages and links join chain stages c and c + 1.
///
/// @snippet core.cpp topology

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Where a module sits in the multimodal pipeline.
enum class module_role : std::uint8_t {
  encoder,    ///< modality encoder (ViT): runs first, on input images
  backbone,   ///< the LLM: runs on the whole interleaved sequence
  generator,  ///< modality generator (diffusion): runs last, on generated images
};

/// @brief Every role, in enumerator order.
inline constexpr module_role module_roles[] = {module_role::encoder, module_role::backbone,
                                               module_role::generator};

/// @brief "encoder" / "backbone" / "generator": the one list of the role
/// names (parsing and JSON use it).
[[nodiscard]] constexpr std::string_view to_string(module_role r) noexcept {
  switch (r) {
    case module_role::encoder: return "encoder";
    case module_role::backbone: return "backbone";
    case module_role::generator: return "generator";
  }
  return "unknown";
}

/// @brief Parses "encoder" / "backbone" / "generator"; throws `invalid_argument` at `where`.
[[nodiscard]] inline module_role parse_module_role(std::string_view s, std::string_view where) {
  for (const module_role r : module_roles)
    if (to_string(r) == s) return r;
  fail(errc::invalid_argument, where, "unknown role '", s,
       "' (expected encoder, backbone or generator)");
}

/// @brief A strong integer id: a `module_id` never passes for a `stage_id`.
template <class Tag>
struct strong_id {
  int value = 0;
  constexpr strong_id() = default;
  constexpr explicit strong_id(int v) noexcept : value(v) {}
  friend constexpr auto operator<=>(strong_id, strong_id) = default;
};
/// @brief Index of a module in `topology::modules()` (pipeline order).
using module_id = strong_id<struct module_id_tag>;
/// @brief A pipeline stage inside one module (0-based).
using stage_id = strong_id<struct stage_id_tag>;
/// @brief A data-parallel replica inside one module (0-based).
using replica_id = strong_id<struct replica_id_tag>;

/// @brief One module of a topology.
struct topology_module {
  std::string name;                          ///< unique, non-empty
  module_role role = module_role::backbone;  ///< pipeline position
  int tp = 1;                                ///< tensor-parallel degree
  int pp = 1;                                ///< pipeline stages
  int dp = 1;                                ///< data-parallel replicas
  bool trainable = true;                     ///< false: frozen (no weight gradients)
  bool colocated = false;                    ///< runs on a backbone stage's ranks (owns none)
  /// Layers of each stage (size pp, each >= 1; empty: stages of equal
  /// weight). Only their ratios are read: `stage_share`.
  std::vector<int> layers{};
  /// Model chunks per device (Megatron-LM's virtual pipeline stages; > 1:
  /// interleaved 1F1B, needs pp >= 2, an owning module, and layers that
  /// split into equal chunks). Chunk c of stage s holds layers[s] / chunks
  /// layers; see "Virtual stages" in the file comment.
  int chunks = 1;

  /// @brief GPUs the module owns: tp * pp * dp, or 0 when colocated.
  [[nodiscard]] long long gpus() const noexcept {
    return colocated ? 0 : static_cast<long long>(tp) * pp * dp;
  }
  friend bool operator==(const topology_module&, const topology_module&) = default;
};

/// @brief The share of its module's per-microbatch work that stage `s` runs:
/// `layers[s] / sum(layers)`, or `1 / pp` without layers. The one stage-weight
/// rule: the reorderer's scoring pipeline (`reorder_options_of`) uses it,
/// whether the topology came from a plan or was written by hand.
[[nodiscard]] inline double stage_share(const topology_module& g, stage_id s) {
  if (s.value < 0 || s.value >= g.pp)
    require_in_range(s.value, 0, g.pp - 1, cat("topology.", g.name, ".stage"));
  if (g.layers.empty()) return 1.0 / static_cast<double>(g.pp);
  long long total = 0;
  for (const int l : g.layers) total += l;
  return static_cast<double>(g.layers[static_cast<std::size_t>(s.value)]) /
         static_cast<double>(total);
}

/// @brief Kind of a process group (see the file comment).
enum class group_kind : std::uint8_t { tp, pp, dp, boundary };

/// @brief Name of a group kind: "tp", "pp", "dp", "boundary".
[[nodiscard]] constexpr std::string_view to_string(group_kind k) noexcept {
  switch (k) {
    case group_kind::tp: return "tp";
    case group_kind::pp: return "pp";
    case group_kind::dp: return "dp";
    case group_kind::boundary: return "boundary";
  }
  return "unknown";
}

/// @brief Where a global rank sits.
struct topology_coord {
  module_id module;
  stage_id stage;
  replica_id replica;
  int tp_rank = 0;
  friend bool operator==(const topology_coord&, const topology_coord&) = default;
};

/// @brief The pipeline's modules and the one rank numbering (see the file comment).
class topology {
 public:
  topology() = default;
  /// @brief Checks the modules (throws `invalid_argument` naming the field):
  /// names unique and non-empty, degrees >= 1, exactly one backbone, roles in
  /// pipeline order (encoders, the backbone, generators), only encoders and
  /// generators colocated, and the world within `int`.
  explicit topology(std::vector<topology_module> modules) : modules_(std::move(modules)) {
    index();
  }

  [[nodiscard]] const std::vector<topology_module>& modules() const noexcept { return modules_; }
  [[nodiscard]] int num_modules() const noexcept { return static_cast<int>(modules_.size()); }
  [[nodiscard]] const topology_module& module(module_id m) const {
    require_in_range(m.value, 0, num_modules() - 1, "topology.module");
    return modules_[static_cast<std::size_t>(m.value)];
  }
  /// @brief The module named `name`; throws `invalid_argument` if none.
  [[nodiscard]] module_id find(std::string_view name) const {
    for (std::size_t i = 0; i < modules_.size(); ++i)
      if (modules_[i].name == name) return module_id{static_cast<int>(i)};
    fail(errc::invalid_argument, "topology.modules", "no module named '", name, "'");
  }
  /// @brief The backbone module.
  [[nodiscard]] module_id backbone() const noexcept { return backbone_; }
  /// @brief Ranks of the whole pipeline.
  [[nodiscard]] int world_size() const noexcept { return world_; }
  /// @brief First global rank of a module that owns ranks.
  [[nodiscard]] int base(module_id m) const {
    // (Field names and texts are built only on failure: these are on hot paths.)
    if (module(m).colocated)
      fail(errc::invalid_argument, cat("topology.modules[", m.value, "]"),
           "module '" + module(m).name + "' is colocated and owns no ranks");
    return bases_[static_cast<std::size_t>(m.value)];
  }

  /// @brief Global rank of a coordinate; throws `invalid_argument` naming the field.
  [[nodiscard]] int rank(const topology_coord& c) const {
    const topology_module& g = module(c.module);
    if (c.stage.value < 0 || c.stage.value >= g.pp || c.replica.value < 0 ||
        c.replica.value >= g.dp || c.tp_rank < 0 || c.tp_rank >= g.tp) {
      const std::string w = cat("topology.", g.name);
      require_in_range(c.stage.value, 0, g.pp - 1, w + ".stage");
      require_in_range(c.replica.value, 0, g.dp - 1, w + ".replica");
      require_in_range(c.tp_rank, 0, g.tp - 1, w + ".tp_rank");
    }
    return base(c.module) + (c.stage.value * g.dp + c.replica.value) * g.tp + c.tp_rank;
  }
  /// @brief Coordinate of global rank `r` (in a module that owns ranks).
  [[nodiscard]] topology_coord coord(int r) const {
    require_in_range(r, 0, world_ - 1, "topology.rank");
    std::size_t m = 0;
    for (std::size_t i = 0; i < modules_.size(); ++i)
      if (!modules_[i].colocated && bases_[i] <= r) m = i;
    const topology_module& g = modules_[m];
    int off = r - bases_[m];
    topology_coord c;
    c.module = module_id{static_cast<int>(m)};
    c.tp_rank = off % g.tp;
    off /= g.tp;
    c.replica = replica_id{off % g.dp};
    c.stage = stage_id{off / g.dp};
    return c;
  }
  /// @brief Node of rank `r` on nodes of `gpus_per_node` GPUs (`r / gpus_per_node`).
  [[nodiscard]] int node(int r, int gpus_per_node) const {
    require_in_range(r, 0, world_ - 1, "topology.rank");
    require_positive(gpus_per_node, "topology.gpus_per_node");
    return r / gpus_per_node;
  }

  // ---- groups (see the file comment); every list ascends ----
  /// @brief The tensor-parallel group of (module, stage, replica).
  [[nodiscard]] std::vector<int> tp_group(module_id m, stage_id s, replica_id d) const {
    std::vector<int> out;
    for (int t = 0; t < module(m).tp; ++t) out.push_back(rank({m, s, d, t}));
    return out;
  }
  /// @brief The pipeline group of (module, replica, tp rank), in stage order.
  [[nodiscard]] std::vector<int> pp_group(module_id m, replica_id d, int tp_rank) const {
    std::vector<int> out;
    for (int p = 0; p < module(m).pp; ++p) out.push_back(rank({m, stage_id{p}, d, tp_rank}));
    return out;
  }
  /// @brief The data-parallel group of (module, stage, tp rank), in replica order.
  [[nodiscard]] std::vector<int> dp_group(module_id m, stage_id s, int tp_rank) const {
    std::vector<int> out;
    for (int d = 0; d < module(m).dp; ++d) out.push_back(rank({m, s, replica_id{d}, tp_rank}));
    return out;
  }
  /// @brief Every rank of one stage of a module (all replicas and TP ranks).
  [[nodiscard]] std::vector<int> stage_ranks(module_id m, stage_id s) const {
    const int first = rank({m, s, replica_id{0}, 0});
    std::vector<int> out(static_cast<std::size_t>(module(m).dp * module(m).tp));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = first + static_cast<int>(i);
    return out;
  }
  /// @brief Module boundaries: owning modules minus one (0 with one module).
  [[nodiscard]] int num_boundaries() const noexcept { return static_cast<int>(owning_.size()) - 1; }
  /// @brief Boundary group `i`: the last stage of owning module i, then the
  /// first stage of owning module i + 1.
  [[nodiscard]] std::vector<int> boundary_group(int i) const {
    require_in_range(i, 0, num_boundaries() - 1, "topology.boundary");
    return boundary_group(owning_[static_cast<std::size_t>(i)],
                          owning_[static_cast<std::size_t>(i) + 1]);
  }
  /// @brief The last stage of module `a`, then the first stage of module `b`
  /// (any two modules that own ranks, e.g. a second encoder feeding the backbone).
  [[nodiscard]] std::vector<int> boundary_group(module_id a, module_id b) const {
    require(a != b, "topology.boundary", "modules must differ, got ", a.value, " twice");
    std::vector<int> out = stage_ranks(a, stage_id{module(a).pp - 1});
    for (const int r : stage_ranks(b, stage_id{0})) out.push_back(r);
    return out;
  }
  /// @brief Every group of `kind`, in enumeration order (index = color).
  [[nodiscard]] std::vector<std::vector<int>> groups(group_kind kind) const {
    std::vector<std::vector<int>> out;
    if (kind == group_kind::boundary) {
      for (int i = 0; i < num_boundaries(); ++i) out.push_back(boundary_group(i));
      return out;
    }
    for (const module_id m : owning_) {
      const topology_module& g = module(m);
      const auto [outer, inner] = group_extents(kind, g);
      for (int a = 0; a < outer; ++a)
        for (int b = 0; b < inner; ++b) {
          switch (kind) {
            case group_kind::tp: out.push_back(tp_group(m, stage_id{a}, replica_id{b})); break;
            case group_kind::pp: out.push_back(pp_group(m, replica_id{a}, b)); break;
            default: out.push_back(dp_group(m, stage_id{a}, b)); break;
          }
        }
    }
    return out;
  }
  /// @brief Color of rank `r`'s group of `kind` for `MPI_Comm_split` (its
  /// index in `groups(kind)`). Boundary groups overlap: use `boundary_colors`
  /// (this throws for them).
  [[nodiscard]] int group_color(group_kind kind, int r) const {
    require(kind != group_kind::boundary, "topology.group_color",
            "boundary groups overlap; use boundary_colors(rank)");
    const topology_coord c = coord(r);
    int color = 0;
    for (const module_id m : owning_) {
      if (m == c.module) break;
      const auto [outer, inner] = group_extents(kind, module(m));
      color += outer * inner;
    }
    const int inner = group_extents(kind, module(c.module)).second;
    switch (kind) {
      case group_kind::tp: return color + c.stage.value * inner + c.replica.value;
      case group_kind::pp: return color + c.replica.value * inner + c.tp_rank;
      default: return color + c.stage.value * inner + c.tp_rank;
    }
  }
  /// @brief Position of rank `r` in its group of `kind` (the `key`, the
  /// group-local rank): tp rank, stage or replica. Throws for boundaries.
  [[nodiscard]] int group_rank(group_kind kind, int r) const {
    require(kind != group_kind::boundary, "topology.group_rank",
            "boundary groups overlap; find the rank in boundary_group(i)");
    const topology_coord c = coord(r);
    switch (kind) {
      case group_kind::tp: return c.tp_rank;
      case group_kind::pp: return c.stage.value;
      default: return c.replica.value;
    }
  }
  /// @brief The boundary groups rank `r` belongs to (0, 1 or 2), ascending.
  [[nodiscard]] std::vector<int> boundary_colors(int r) const {
    const topology_coord c = coord(r);
    const int k = owning_index(c.module);
    std::vector<int> out;
    if (c.stage.value == 0 && k > 0) out.push_back(k - 1);
    if (c.stage.value == module(c.module).pp - 1 && k < num_boundaries()) out.push_back(k);
    return out;
  }

  /// @brief Chain stages: stages of the non-colocated modules, in order.
  [[nodiscard]] int num_chain_stages() const noexcept { return static_cast<int>(chain_.size()); }
  /// @brief (module, stage) of chain stage `c`.
  [[nodiscard]] std::pair<module_id, stage_id> chain_at(int c) const {
    require_in_range(c, 0, num_chain_stages() - 1, "topology.chain_stage");
    return chain_[static_cast<std::size_t>(c)];
  }
  /// @brief Chain stage of (module, stage); the module must own ranks.
  [[nodiscard]] int chain_stage(module_id m, stage_id s) const {
    (void)base(m);
    if (s.value < 0 || s.value >= module(m).pp)
      require_in_range(s.value, 0, module(m).pp - 1, cat("topology.", module(m).name, ".stage"));
    return chain_first_[static_cast<std::size_t>(m.value)] + s.value;
  }
  /// @brief Steps of a microbatch's path (see "Virtual stages"): the chain
  /// stages when no module has chunks.
  [[nodiscard]] int num_virtual_stages() const noexcept { return static_cast<int>(path_.size()); }
  /// @brief Links between consecutive virtual stages: `num_virtual_stages() - 1`.
  [[nodiscard]] int num_links() const noexcept { return num_virtual_stages() - 1; }
  /// @brief (chain stage, chunk) of virtual stage `v`.
  [[nodiscard]] std::pair<int, int> virtual_at(int v) const {
    require_in_range(v, 0, num_virtual_stages() - 1, "topology.virtual_stage");
    return path_[static_cast<std::size_t>(v)];
  }
  /// @brief Virtual stage of chunk `chunk` of stage `s` of module `m` (one
  /// that owns ranks).
  [[nodiscard]] int virtual_stage(module_id m, stage_id s, int chunk) const {
    const topology_module& g = module(m);
    (void)chain_stage(m, s);  // checks the module and the stage
    if (chunk < 0 || chunk >= g.chunks)
      require_in_range(chunk, 0, g.chunks - 1, cat("topology.", g.name, ".chunk"));
    return path_first_[static_cast<std::size_t>(m.value)] + chunk * g.pp + s.value;
  }
  /// @brief Model chunks of chain stage `c` (its module's `chunks`).
  [[nodiscard]] int chunks_of(int c) const { return module(chain_at(c).first).chunks; }

  /// @brief Non-colocated modules in order: the modules a sample map (the
  /// reorderer's result) lists, index k of the map = entry k here.
  [[nodiscard]] const std::vector<module_id>& owning_modules() const noexcept { return owning_; }
  /// @brief Index of `m` among `owning_modules()`; throws if colocated.
  [[nodiscard]] int owning_index(module_id m) const {
    (void)base(m);
    const auto it = std::find(owning_.begin(), owning_.end(), m);
    return static_cast<int>(it - owning_.begin());
  }

  friend bool operator==(const topology& a, const topology& b) { return a.modules_ == b.modules_; }

 private:
  // (outer, inner) loop extents of a module's groups of `kind` in enumeration
  // order: TP (stage, replica), PP (replica, tp rank), DP (stage, tp rank).
  [[nodiscard]] static std::pair<int, int> group_extents(group_kind kind,
                                                         const topology_module& g) noexcept {
    switch (kind) {
      case group_kind::tp: return {g.pp, g.dp};
      case group_kind::pp: return {g.dp, g.tp};
      default: return {g.pp, g.tp};
    }
  }
  void index() {
    require(!modules_.empty(), "topology.modules", "must hold at least one module");
    int backbones = 0;
    long long world = 0;
    int last_role = 0;
    for (std::size_t i = 0; i < modules_.size(); ++i) {
      const topology_module& g = modules_[i];
      const std::string w = cat("topology.modules[", i, "]");
      require(!g.name.empty(), w + ".name", "must not be empty");
      for (std::size_t j = 0; j < i; ++j)
        require(modules_[j].name != g.name, w + ".name", "duplicate module name '", g.name, "'");
      require_in_range(g.tp, 1, 1 << 20, w + ".tp");
      require_in_range(g.pp, 1, 1 << 20, w + ".pp");
      require_in_range(g.dp, 1, 1 << 20, w + ".dp");
      require(g.layers.empty() || g.layers.size() == static_cast<std::size_t>(g.pp), w + ".layers",
              "has ", g.layers.size(), " entries, need pp = ", g.pp, " (one per stage) or none");
      for (std::size_t s = 0; s < g.layers.size(); ++s)
        require_in_range(g.layers[s], 1, 1 << 20, cat(w, ".layers[", s, "]"));
      require_in_range(g.chunks, 1, 1 << 10, w + ".chunks");
      if (g.chunks > 1) {
        require(g.pp >= 2 && !g.colocated, w + ".chunks", "interleaving (", g.chunks,
                " chunks) needs a module that owns ranks with pp >= 2, got pp ", g.pp,
                g.colocated ? " (colocated)" : "");
        for (std::size_t s = 0; s < g.layers.size(); ++s)
          require(
              g.layers[s] % g.chunks == 0, [&] { return cat(w, ".layers[", s, "]"); }, g.layers[s],
              " layers do not split into ", g.chunks, " equal chunks");
      }
      const int role = static_cast<int>(g.role);
      require(role >= last_role, w + ".role", "a ", to_string(g.role),
              " after a later role: modules must be in pipeline order (encoders, the "
              "backbone, generators)");
      last_role = role;
      if (g.role == module_role::backbone) {
        ++backbones;
        backbone_ = module_id{static_cast<int>(i)};
        require(!g.colocated, w + ".colocated", "the backbone cannot be colocated");
      }
      bases_.push_back(static_cast<int>(world));
      chain_first_.push_back(static_cast<int>(chain_.size()));
      if (!g.colocated) {
        world += g.gpus();
        require(world <= (1LL << 30), w, "the world reaches ", world,
                " ranks, at most 2^30 supported");
        owning_.push_back(module_id{static_cast<int>(i)});
        path_first_.push_back(static_cast<int>(path_.size()));
        for (int c = 0; c < g.chunks; ++c)
          for (int s = 0; s < g.pp; ++s) path_.emplace_back(static_cast<int>(chain_.size()) + s, c);
        for (int s = 0; s < g.pp; ++s)
          chain_.emplace_back(module_id{static_cast<int>(i)}, stage_id{s});
      } else {
        path_first_.push_back(static_cast<int>(path_.size()));
      }
    }
    require(backbones == 1, "topology.modules", "needs exactly one backbone, got ", backbones);
    world_ = static_cast<int>(world);
  }

  std::vector<topology_module> modules_;
  std::vector<int> bases_;        // per module: first rank (colocated: next module's base)
  std::vector<int> chain_first_;  // per module: its first chain stage
  std::vector<std::pair<module_id, stage_id>> chain_;
  std::vector<int> path_first_;            // per module: its first virtual stage
  std::vector<std::pair<int, int>> path_;  // per virtual stage: (chain stage, chunk)
  std::vector<module_id> owning_;
  module_id backbone_;
  int world_ = 0;
};

/// @brief Checks that every TP group of `t` sits inside one node of
/// `gpus_per_node` GPUs: each TP degree divides `gpus_per_node` and each
/// owning module's first rank is a multiple of its TP degree. Throws
/// `invalid_argument` at `where.<module>.tp`.
inline void require_tp_in_nodes(const topology& t, int gpus_per_node, std::string_view where) {
  require_positive(gpus_per_node, cat(where, ".gpus_per_node"));
  for (const module_id m : t.owning_modules()) {
    const topology_module& g = t.module(m);
    const int base = t.base(m);
    if (gpus_per_node % g.tp != 0 || base % g.tp != 0)
      fail(
          errc::invalid_argument, cat(where, ".", g.name, ".tp"), "tp ", g.tp,
          gpus_per_node % g.tp != 0
              ? cat(" must divide gpus_per_node ", gpus_per_node, " (TP groups stay inside a node)")
              : cat(" does not divide the module's first rank ", base,
                    " (a TP group would straddle two nodes); reorder or pad modules"));
  }
}

/// @brief "encoder TP2 PP1 DP2 -> backbone TP2 PP2 DP3 -> generator (colocated)".
[[nodiscard]] inline std::string describe(const topology& t) {
  std::string s;
  for (const topology_module& g : t.modules()) {
    if (!s.empty()) s += " -> ";
    s += g.name;
    if (g.colocated) {
      s += " (colocated)";
      continue;
    }
    s += cat(" TP", g.tp, " PP", g.pp, " DP", g.dp);
    if (g.chunks > 1) s += cat(" x", g.chunks, " chunks");
    if (!g.trainable) s += " (frozen)";
  }
  return s;
}

}  // namespace disttrain
