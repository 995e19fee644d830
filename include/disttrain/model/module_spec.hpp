#pragma once
/// @file module_spec.hpp
/// @brief One module of a multimodal model: its role, architecture, and whether
/// it is frozen or recomputes activations.

#include <string>
#include <string_view>
#include <variant>

#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/core/topology.hpp"  // module_role
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
    return std::visit([](const auto& a) { return a.layers; }, arch);
  }

  /// @brief Validates name, role/architecture agreement and the architecture.
  void validate(std::string_view path) const {
    require(!name.empty(), detail::join_path(path, "name"), "must not be empty");
    const std::string ap = detail::join_path(path, "arch");
    std::visit([&](const auto& a) { a.validate(ap); }, arch);
    const bool ok =
        (role == module_role::encoder && std::holds_alternative<vit_encoder_arch>(arch)) ||
        (role == module_role::backbone && std::holds_alternative<decoder_llm_arch>(arch)) ||
        (role == module_role::generator && std::holds_alternative<diffusion_arch>(arch));
    require(
        ok, detail::join_path(path, "role"), "role '", to_string(role),
        "' does not match the architecture (encoder: vit, backbone: llm, generator: diffusion)");
  }
};

inline void to_json(json& j, const module_spec& m) {
  json a;
  std::visit([&](const auto& x) { to_json(a, x); }, m.arch);
  j = json{{"name", m.name},
           {"role", std::string(to_string(m.role))},
           {"arch", a},
           {"frozen", m.frozen},
           {"recompute", m.recompute}};
}

namespace detail {
/// @brief Reads a module at `path`; `arch.type` is "vit", "llm" or "diffusion".
[[nodiscard]] inline module_spec read_module_spec(const json& j, std::string_view path) {
  check_keys(j, {"name", "role", "arch", "frozen", "recompute"}, path);
  module_spec m;
  m.name = json_get<std::string>(j, "name", path);
  const auto role = json_get<std::string>(j, "role", path);
  if (role == "encoder")
    m.role = module_role::encoder;
  else if (role == "backbone")
    m.role = module_role::backbone;
  else if (role == "generator")
    m.role = module_role::generator;
  else
    fail(errc::parse_error, join_path(path, "role"), "unknown role '", role,
         "' (expected encoder, backbone or generator)");
  const std::string ap = join_path(path, "arch");
  const json& a = [&]() -> const json& {
    if (!j.is_object() || !j.contains("arch"))
      fail(errc::parse_error, ap, "required field is missing");
    return j.at("arch");
  }();
  const auto type = json_get<std::string>(a, "type", ap);
  if (type == "vit")
    m.arch = read_vit_encoder_arch(a, ap);
  else if (type == "llm")
    m.arch = read_decoder_llm_arch(a, ap);
  else if (type == "diffusion")
    m.arch = read_diffusion_arch(a, ap);
  else
    fail(errc::parse_error, join_path(ap, "type"), "unknown architecture type '", type,
         "' (expected vit, llm or diffusion)");
  m.frozen = json_get_or<bool>(j, "frozen", false, path);
  m.recompute = json_get_or<bool>(j, "recompute", false, path);
  m.validate(path);
  return m;
}
}  // namespace detail

inline void from_json(const json& j, module_spec& m) { m = detail::read_module_spec(j, ""); }

}  // namespace disttrain
