#pragma once
/// @file topology.hpp
/// @brief The one description of a disaggregated pipeline: for each module its
/// name, role, TP/PP/DP degrees, whether it trains, whether it is colocated,
/// and optionally its layers per stage; with strong ids and the one global
/// rank numbering.
///
/// Every other view of the pipeline is *derived* from a `topology` by a
/// library function (bind/topology_views.hpp): the communicator's
/// `rank_layout`, the schedule's chain spec, the reorderer's options, the
/// workload cost; a `parallel_plan` converts to one (`topology_of`). No
/// trainer copies degrees field by field.
///
/// ## Rank numbering (the only one)
/// Modules that own GPUs are numbered in pipeline order; inside a module
/// stage-major, then replica, then TP rank:
/// `rank = base(module) + (stage * dp + replica) * tp + tp_rank`. A colocated
/// module owns no ranks: it runs on the ranks of the backbone stage it sits on
/// (its first stage for an encoder, its last for a generator).
///
/// ## Chain stages
/// The pipeline as one chain: the stages of every non-colocated module in
/// order. Chain stage c runs on the ranks of `(module, stage) = chain_at(c)`;
/// link c joins chain stage c to c + 1.
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
  require_in_range(s.value, 0, g.pp - 1, cat("topology.", g.name, ".stage"));
  if (g.layers.empty()) return 1.0 / static_cast<double>(g.pp);
  long long total = 0;
  for (const int l : g.layers) total += l;
  return static_cast<double>(g.layers[static_cast<std::size_t>(s.value)]) /
         static_cast<double>(total);
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
  /// @brief Ascending global ranks of the data-parallel group of (module, stage, tp rank).
  [[nodiscard]] std::vector<int> dp_group(module_id m, stage_id s, int tp_rank) const {
    std::vector<int> out;
    out.reserve(static_cast<std::size_t>(module(m).dp));
    for (int d = 0; d < module(m).dp; ++d) out.push_back(rank({m, s, replica_id{d}, tp_rank}));
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
        for (int s = 0; s < g.pp; ++s)
          chain_.emplace_back(module_id{static_cast<int>(i)}, stage_id{s});
      }
    }
    require(backbones == 1, "topology.modules", "needs exactly one backbone, got ", backbones);
    world_ = static_cast<int>(world);
  }

  std::vector<topology_module> modules_;
  std::vector<int> bases_;        // per module: first rank (colocated: next module's base)
  std::vector<int> chain_first_;  // per module: its first chain stage
  std::vector<std::pair<module_id, stage_id>> chain_;
  std::vector<module_id> owning_;
  module_id backbone_;
  int world_ = 0;
};

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
    if (!g.trainable) s += " (frozen)";
  }
  return s;
}

}  // namespace disttrain
