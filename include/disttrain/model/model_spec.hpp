#pragma once
/// @file model_spec.hpp
/// @brief A multimodal model: its modules in pipeline order and how they connect.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/model/module_spec.hpp"

namespace disttrain {

/// @brief Most modules a model may have (fixed so workloads are allocation-free values).
inline constexpr std::size_t max_modules = 8;

/// @brief Data flows from module `from` to module `to` (indices into `model_spec::modules`).
struct connection {
  std::size_t from = 0;
  std::size_t to = 0;
  friend bool operator==(const connection&, const connection&) = default;
};

/// @brief A multimodal model: encoders, then exactly one backbone, then generators.
///
/// - Every encoder sees every input image of a sample and hands the backbone
///   `projector_tokens_per_image` tokens per image (if > 0), or one token per
///   `projector_patch_ratio` patch tokens (rounded up) otherwise.
/// - The backbone sequence of a sample is its text tokens, plus the projected
///   image tokens, plus `generator_condition_tokens` query tokens per image to
///   generate, whose hidden states condition the generator.
/// - `connections` lists the data edges; empty means encoders -> backbone -> generators.
///
/// @snippet model.cpp model_spec
struct model_spec {
  std::string name{};
  std::vector<module_spec> modules{};
  std::vector<connection> connections{};  ///< empty: the default chain
  int projector_tokens_per_image = 0;     ///< > 0: fixed backbone tokens per image
  int projector_patch_ratio = 1;          ///< else: encoder patch tokens per backbone token
  int generator_condition_tokens = 64;    ///< backbone query tokens per generated image

  /// @brief Index of the backbone.
  [[nodiscard]] std::size_t backbone_index() const {
    for (std::size_t i = 0; i < modules.size(); ++i)
      if (modules[i].role == module_role::backbone) return i;
    fail(errc::invalid_argument, "model.modules", "the model has no backbone");
  }

  /// @brief Index of the module called `module_name`; `invalid_argument` naming it if absent.
  [[nodiscard]] std::size_t index_of(std::string_view module_name) const {
    for (std::size_t i = 0; i < modules.size(); ++i)
      if (modules[i].name == module_name) return i;
    fail(errc::invalid_argument, "model.modules", "no module named '", module_name, "'");
  }

  /// @brief The data edges (the default chain when `connections` is empty).
  [[nodiscard]] std::vector<connection> edges() const {
    if (!connections.empty()) return connections;
    std::vector<connection> e;
    std::size_t b = modules.size();
    for (std::size_t i = 0; i < modules.size(); ++i)
      if (modules[i].role == module_role::backbone) b = i;
    if (b == modules.size()) return e;
    for (std::size_t i = 0; i < modules.size(); ++i) {
      if (modules[i].role == module_role::encoder) e.push_back({i, b});
      if (modules[i].role == module_role::generator) e.push_back({b, i});
    }
    return e;
  }

  /// @brief True when a trainable module lies upstream of module `i` (transitively),
  /// so `i` must compute gradients with respect to its input.
  [[nodiscard]] bool input_grad_required(std::size_t i) const {
    require(i < modules.size(), "module", "index ", i, " out of range (", modules.size(),
            " modules)");
    const auto e = edges();
    // Modules are topologically ordered (validate checks from < to): one pass.
    std::vector<char> upstream_trainable(modules.size(),
                                         0);  // some trainable module reaches j's input
    for (std::size_t j = 0; j < modules.size(); ++j)
      for (const auto& c : e)
        if (c.to == j && (!modules[c.from].frozen || upstream_trainable[c.from]))
          upstream_trainable[j] = 1;
    return upstream_trainable[i] != 0;
  }

  /// @brief True when module `i` runs a backward pass: it trains, or a
  /// trainable module upstream needs its input gradient. Its outputs'
  /// gradients then flow back to it.
  [[nodiscard]] bool runs_backward(std::size_t i) const {
    require(i < modules.size(), "module", "index ", i, " out of range (", modules.size(),
            " modules)");
    return !modules[i].frozen || input_grad_required(i);
  }

  /// @brief Validates every module and the model's structure; errors name
  /// `path.modules[i].<field>` or `path.<field>`.
  void validate(std::string_view path = "model") const {
    using detail::join_path;
    const std::string mp = join_path(path, "modules");
    require(!modules.empty(), mp, "a model needs at least one module");
    require(modules.size() <= max_modules, mp, "has ", modules.size(), " modules, at most ",
            max_modules, " are supported");
    int backbones = 0;
    int last_rank = -1;
    for (std::size_t i = 0; i < modules.size(); ++i) {
      const std::string p = cat(mp, "[", i, "]");
      modules[i].validate(p);
      for (std::size_t k = 0; k < i; ++k)
        require(modules[k].name != modules[i].name, join_path(p, "name"), "duplicate module name '",
                modules[i].name, "'");
      const int rank = static_cast<int>(modules[i].role);
      require(rank >= last_rank, join_path(p, "role"),
              "modules must be in pipeline order (encoders, backbone, generators); '",
              modules[i].name, "' is a ", to_string(modules[i].role), " after a ",
              to_string(static_cast<module_role>(last_rank)));
      last_rank = rank;
      if (modules[i].role == module_role::backbone) ++backbones;
    }
    require(backbones == 1, mp, "needs exactly one backbone, got ", backbones);
    for (std::size_t k = 0; k < connections.size(); ++k) {
      const std::string p = cat(join_path(path, "connections"), "[", k, "]");
      require(connections[k].from < modules.size(), join_path(p, "from"), "module index ",
              connections[k].from, " out of range (", modules.size(), " modules)");
      require(connections[k].to < modules.size(), join_path(p, "to"), "module index ",
              connections[k].to, " out of range (", modules.size(), " modules)");
      require(connections[k].from < connections[k].to, join_path(p, "to"),
              "edges must go forward in pipeline order, got ", connections[k].from, " -> ",
              connections[k].to);
    }
    require_non_negative(projector_tokens_per_image, join_path(path, "projector_tokens_per_image"));
    require_positive(projector_patch_ratio, join_path(path, "projector_patch_ratio"));
    require_non_negative(generator_condition_tokens, join_path(path, "generator_condition_tokens"));
  }
};

}  // namespace disttrain
