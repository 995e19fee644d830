#pragma once
/// @file module_spec.hpp
/// @brief One module of a multimodal model: its role, architecture, and whether
/// it is frozen or recomputes activations.

#include <string>
#include <string_view>
#include <variant>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"  // module_role
#include "disttrain/core/visit_held.hpp"
#include "disttrain/model/architecture.hpp"

namespace disttrain {

/// @brief Any of the architectures a module can have.
using module_arch = std::variant<vit_encoder_arch, decoder_llm_arch, diffusion_arch>;

/// @brief A module: name, role, architecture, training flags.
///
/// A `frozen` module has no weight gradients, no gradients to synchronise and no
/// optimizer state; it computes activation gradients only where an upstream
/// module is trainable (see `model_spec::input_grad_required`). `recompute` is
/// the default for full activation recomputation (the planner may choose it per
/// plan).
///
/// @snippet model.cpp module_spec
struct module_spec {
  std::string name{};
  module_role role = module_role::backbone;
  module_arch arch = decoder_llm_arch{};
  bool frozen = false;
  bool recompute = false;

  /// @brief Number of layers (pipeline cut points + 1).
  [[nodiscard]] int layers() const noexcept {
    return visit_held([](const auto& a) { return a.layers; }, arch);
  }

  /// @brief Validates name, role/architecture agreement and the architecture.
  void validate(std::string_view path) const {
    require(!name.empty(), detail::join_path(path, "name"), "must not be empty");
    const std::string ap = detail::join_path(path, "arch");
    visit_held([&](const auto& a) { a.validate(ap); }, arch);
    const bool ok =
        (role == module_role::encoder && std::holds_alternative<vit_encoder_arch>(arch)) ||
        (role == module_role::backbone && std::holds_alternative<decoder_llm_arch>(arch)) ||
        (role == module_role::generator && std::holds_alternative<diffusion_arch>(arch));
    require(
        ok, detail::join_path(path, "role"), "role '", to_string(role),
        "' does not match the architecture (encoder: vit, backbone: llm, generator: diffusion)");
  }
};

}  // namespace disttrain
