#pragma once
/// @file json.hpp
/// @brief JSON input/output of the model part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/model.hpp` does not).

#include <tuple>

#include "disttrain/core/json.hpp"
#include "disttrain/model/architecture.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/distribution.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_spec.hpp"
#include "disttrain/model/sample.hpp"
#include "disttrain/model/scenario.hpp"
#include "disttrain/model/workload.hpp"

namespace disttrain {

NLOHMANN_JSON_SERIALIZE_ENUM(diffusion_kind,
                             {{diffusion_kind::unet, "unet"}, {diffusion_kind::dit, "dit"}})

// ---- distribution.hpp ----
/// @brief JSON: `{"kind": "constant", "value": 1}`, `{"kind": "uniform_int", "min": 0,
/// "max": 4}`, `{"kind": "lognormal", "median": 300, "sigma": 0.8, "min": 8, "max":
/// 4096}` (min/max optional), `{"kind": "histogram", "values": [...], "weights": [...]}`.
inline void to_json(json& j, const distribution& d) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, constant_dist>) {
          j = json{{"kind", "constant"}, {"value", x.value}};
        } else if constexpr (std::is_same_v<T, uniform_int_dist>) {
          j = json{{"kind", "uniform_int"}, {"min", x.min}, {"max", x.max}};
        } else if constexpr (std::is_same_v<T, lognormal_dist>) {
          j = json{{"kind", "lognormal"}, {"median", x.median}, {"sigma", x.sigma}, {"min", x.min}};
          if (x.max < 1e300) j["max"] = x.max;
        } else {
          j = json{{"kind", "histogram"}, {"values", x.values}, {"weights", x.weights}};
        }
      },
      d.get());
}

namespace detail {
/// @brief Reads a distribution at `path`; errors name `path.<field>`.
[[nodiscard]] inline distribution read_distribution(const json& j, std::string_view path) {
  // A bare number is a constant.
  if (j.is_number()) return constant_dist{j.get<double>()};
  const auto kind = json_get<std::string>(j, "kind", path);
  distribution d;
  if (kind == "constant") {
    check_keys(j, {"kind", "value"}, path);
    d = constant_dist{json_get<double>(j, "value", path)};
  } else if (kind == "uniform_int") {
    check_keys(j, {"kind", "min", "max"}, path);
    d = uniform_int_dist{json_get<std::int64_t>(j, "min", path),
                         json_get<std::int64_t>(j, "max", path)};
  } else if (kind == "lognormal") {
    check_keys(j, {"kind", "median", "sigma", "min", "max"}, path);
    d = lognormal_dist{json_get<double>(j, "median", path), json_get<double>(j, "sigma", path),
                       json_get_or<double>(j, "min", 0.0, path),
                       json_get_or<double>(j, "max", 1e300, path)};
  } else if (kind == "histogram") {
    check_keys(j, {"kind", "values", "weights"}, path);
    d = histogram_dist{json_get<std::vector<double>>(j, "values", path),
                       json_get<std::vector<double>>(j, "weights", path)};
  } else {
    fail(errc::parse_error, join_path(path, "kind"), "unknown distribution kind '", kind,
         "' (expected constant, uniform_int, lognormal or histogram)");
  }
  d.validate(path);
  return d;
}
}  // namespace detail

inline void from_json(const json& j, distribution& d) { d = detail::read_distribution(j, ""); }

namespace detail {
// JSON descriptors (core/json.hpp, `json_field`): each field named once.
inline constexpr auto vit_encoder_arch_fields =
    std::tuple{required_field("image_size", &vit_encoder_arch::image_size),
               required_field("patch_size", &vit_encoder_arch::patch_size),
               required_field("layers", &vit_encoder_arch::layers),
               required_field("hidden", &vit_encoder_arch::hidden),
               required_field("heads", &vit_encoder_arch::heads),
               required_field("mlp", &vit_encoder_arch::mlp),
               optional_field("channels", &vit_encoder_arch::channels),
               optional_field("class_token", &vit_encoder_arch::class_token),
               optional_field("qkv_bias", &vit_encoder_arch::qkv_bias),
               optional_field("max_image_size", &vit_encoder_arch::max_image_size)};
inline constexpr auto decoder_llm_arch_fields =
    std::tuple{required_field("layers", &decoder_llm_arch::layers),
               required_field("hidden", &decoder_llm_arch::hidden),
               required_field("heads", &decoder_llm_arch::heads),
               optional_field("kv_heads", &decoder_llm_arch::kv_heads),
               required_field("mlp", &decoder_llm_arch::mlp),
               required_field("vocab", &decoder_llm_arch::vocab),
               required_field("max_seq", &decoder_llm_arch::max_seq),
               optional_field("gated_mlp", &decoder_llm_arch::gated_mlp),
               optional_field("qkv_bias", &decoder_llm_arch::qkv_bias),
               optional_field("tied_embeddings", &decoder_llm_arch::tied_embeddings)};
inline constexpr auto gpu_spec_fields =
    std::tuple{required_field("name", &gpu_spec::name),
               required_field("peak_bf16_tflops", &gpu_spec::peak_bf16_tflops),
               required_field("peak_fp32_tflops", &gpu_spec::peak_fp32_tflops),
               required_field("hbm_bytes", &gpu_spec::hbm_bytes),
               required_field("hbm_bandwidth_bytes_per_s", &gpu_spec::hbm_bandwidth_bytes_per_s)};
// The cluster's scalars ("gpu" is read apart, at its own path).
inline constexpr auto cluster_spec_fields =
    std::tuple{optional_field("name", &cluster_spec::name),
               required_field("num_gpus", &cluster_spec::num_gpus),
               required_field("gpus_per_node", &cluster_spec::gpus_per_node),
               required_field("intra_node_bandwidth_bytes_per_s",
                              &cluster_spec::intra_node_bandwidth_bytes_per_s),
               required_field("intra_node_latency_s", &cluster_spec::intra_node_latency_s),
               required_field("inter_node_bandwidth_bytes_per_s",
                              &cluster_spec::inter_node_bandwidth_bytes_per_s),
               required_field("inter_node_latency_s", &cluster_spec::inter_node_latency_s)};
// A diffusion generator's fields; a U-Net's cost totals come on top (and are
// only read, and allowed, for kind "unet").
inline constexpr auto diffusion_arch_fields =
    std::tuple{required_field("kind", &diffusion_arch::kind),
               required_field("resolution", &diffusion_arch::resolution),
               optional_field("latent_downsample", &diffusion_arch::latent_downsample),
               optional_field("latent_channels", &diffusion_arch::latent_channels),
               optional_field("patch_size", &diffusion_arch::patch_size),
               required_field("layers", &diffusion_arch::layers),
               required_field("hidden", &diffusion_arch::hidden),
               required_field("heads", &diffusion_arch::heads),
               optional_field("mlp", &diffusion_arch::mlp),
               optional_field("learn_sigma", &diffusion_arch::learn_sigma),
               optional_field("condition_params", &diffusion_arch::condition_params)};
inline constexpr auto unet_cost_fields = std::tuple_cat(
    diffusion_arch_fields,
    std::tuple{
        required_field("params", &diffusion_arch::params),
        required_field("forward_flops_per_token", &diffusion_arch::forward_flops_per_token),
        optional_field("forward_flops_per_token_sq", &diffusion_arch::forward_flops_per_token_sq),
        required_field("activation_bytes_per_token", &diffusion_arch::activation_bytes_per_token)});
}  // namespace detail

// ---- architecture.hpp ----
inline void to_json(json& j, const vit_encoder_arch& a) {
  j = detail::fields_to_json(a, detail::vit_encoder_arch_fields);
  j["type"] = "vit";
}
inline void to_json(json& j, const decoder_llm_arch& a) {
  j = detail::fields_to_json(a, detail::decoder_llm_arch_fields);
  j["type"] = "llm";
}
inline void to_json(json& j, const diffusion_arch& a) {
  j = a.kind == diffusion_kind::unet ? detail::fields_to_json(a, detail::unet_cost_fields)
                                     : detail::fields_to_json(a, detail::diffusion_arch_fields);
  j["type"] = "diffusion";
}

namespace detail {
/// @brief Reads a ViT encoder at `path` (missing optional fields keep defaults).
[[nodiscard]] inline vit_encoder_arch read_vit_encoder_arch(const json& j, std::string_view path) {
  vit_encoder_arch a;
  read_fields(j, a, vit_encoder_arch_fields, path, {"type"});
  a.validate(path);
  return a;
}
/// @brief Reads a decoder LLM at `path` (`kv_heads` defaults to `heads`).
[[nodiscard]] inline decoder_llm_arch read_decoder_llm_arch(const json& j, std::string_view path) {
  decoder_llm_arch a;
  read_fields(j, a, decoder_llm_arch_fields, path, {"type"});
  if (!j.contains("kv_heads")) a.kv_heads = a.heads;
  a.validate(path);
  return a;
}
/// @brief Reads a diffusion generator at `path` (a U-Net's `patch_size`
/// defaults to 1).
[[nodiscard]] inline diffusion_arch read_diffusion_arch(const json& j, std::string_view path) {
  diffusion_arch a;
  a.kind = json_get<diffusion_kind>(j, "kind", path);
  if (a.kind == diffusion_kind::unet) {
    a.patch_size = 1;
    read_fields(j, a, unet_cost_fields, path, {"type"});
  } else {
    read_fields(j, a, diffusion_arch_fields, path, {"type"});
  }
  a.validate(path);
  return a;
}
}  // namespace detail

inline void from_json(const json& j, vit_encoder_arch& a) {
  a = detail::read_vit_encoder_arch(j, "");
}
inline void from_json(const json& j, decoder_llm_arch& a) {
  a = detail::read_decoder_llm_arch(j, "");
}
inline void from_json(const json& j, diffusion_arch& a) { a = detail::read_diffusion_arch(j, ""); }

// ---- module_spec.hpp ----
// module_role by `to_string`'s names (core/topology.hpp), with the semantics
// of NLOHMANN_JSON_SERIALIZE_ENUM that `json_convert` relies on: a value
// outside the enumeration writes the first name, an unknown name reads as the
// first enumerator (which `json_convert` then rejects, listing the names).
inline void to_json(json& j, const module_role& r) {
  for (const module_role x : module_roles)
    if (x == r) {
      j = std::string(to_string(x));
      return;
    }
  j = std::string(to_string(module_roles[0]));
}
inline void from_json(const json& j, module_role& r) {
  r = module_roles[0];
  if (!j.is_string()) return;
  for (const module_role x : module_roles)
    if (j.get_ref<const std::string&>() == to_string(x)) r = x;
}

namespace detail {
// A module's fields but its architecture (a variant, read by its "type").
inline constexpr auto module_spec_fields = std::tuple{
    required_field("name", &module_spec::name), required_field("role", &module_spec::role),
    optional_field("frozen", &module_spec::frozen),
    optional_field("recompute", &module_spec::recompute)};
}  // namespace detail

inline void to_json(json& j, const module_spec& m) {
  j = detail::fields_to_json(m, detail::module_spec_fields);
  std::visit([&](const auto& x) { to_json(j["arch"], x); }, m.arch);
}

namespace detail {
/// @brief Reads a module at `path`; `arch.type` is "vit", "llm" or "diffusion".
[[nodiscard]] inline module_spec read_module_spec(const json& j, std::string_view path) {
  module_spec m;
  read_fields(j, m, module_spec_fields, path, {"arch"});
  const std::string ap = join_path(path, "arch");
  const json& a = [&]() -> const json& {
    if (!j.contains("arch")) fail(errc::parse_error, ap, "required field is missing");
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
  m.validate(path);
  return m;
}
}  // namespace detail

inline void from_json(const json& j, module_spec& m) { m = detail::read_module_spec(j, ""); }

// ---- model_spec.hpp ----
namespace detail {
inline constexpr auto connection_fields =
    std::tuple{required_field("from", &connection::from), required_field("to", &connection::to)};
// A model's fields but its module and connection arrays.
inline constexpr auto model_spec_fields = std::tuple{
    optional_field("name", &model_spec::name),
    optional_field("projector_tokens_per_image", &model_spec::projector_tokens_per_image),
    optional_field("projector_patch_ratio", &model_spec::projector_patch_ratio),
    optional_field("generator_condition_tokens", &model_spec::generator_condition_tokens)};
}  // namespace detail

inline void to_json(json& j, const connection& c) {
  j = detail::fields_to_json(c, detail::connection_fields);
}

inline void to_json(json& j, const model_spec& m) {
  j = detail::fields_to_json(m, detail::model_spec_fields);
  j["modules"] = m.modules;
  if (!m.connections.empty()) j["connections"] = m.connections;
}

namespace detail {
/// @brief Reads a model at `path` and validates it.
[[nodiscard]] inline model_spec read_model_spec(const json& j, std::string_view path) {
  model_spec m;
  read_fields(j, m, model_spec_fields, path, {"modules", "connections"});
  const std::string mp = join_path(path, "modules");
  if (!j.contains("modules")) fail(errc::parse_error, mp, "required field is missing");
  const json& mods = j.at("modules");
  if (!mods.is_array()) fail(errc::parse_error, mp, "expected an array, got ", mods.type_name());
  for (std::size_t i = 0; i < mods.size(); ++i)
    m.modules.push_back(read_module_spec(mods[i], cat(mp, "[", i, "]")));
  if (j.contains("connections")) {
    const json& cs = j.at("connections");
    const std::string cp = join_path(path, "connections");
    if (!cs.is_array()) fail(errc::parse_error, cp, "expected an array, got ", cs.type_name());
    for (std::size_t i = 0; i < cs.size(); ++i)
      read_fields(cs[i], m.connections.emplace_back(), connection_fields, cat(cp, "[", i, "]"));
  }
  m.validate(path);
  return m;
}
}  // namespace detail

inline void from_json(const json& j, model_spec& m) { m = detail::read_model_spec(j, "model"); }

// ---- cluster_spec.hpp ----
inline void to_json(json& j, const gpu_spec& g) {
  j = detail::fields_to_json(g, detail::gpu_spec_fields);
}
inline void to_json(json& j, const cluster_spec& c) {
  j = detail::fields_to_json(c, detail::cluster_spec_fields);
  to_json(j["gpu"], c.gpu);
}

namespace detail {
[[nodiscard]] inline gpu_spec read_gpu_spec(const json& j, std::string_view path) {
  gpu_spec g;
  read_fields(j, g, gpu_spec_fields, path);
  g.validate(path);
  return g;
}
/// @brief Reads a cluster at `path` and validates it.
[[nodiscard]] inline cluster_spec read_cluster_spec(const json& j, std::string_view path) {
  cluster_spec c;
  read_fields(j, c, cluster_spec_fields, path, {"gpu"});
  const std::string gp = join_path(path, "gpu");
  if (!j.contains("gpu")) fail(errc::parse_error, gp, "required field is missing");
  c.gpu = read_gpu_spec(j.at("gpu"), gp);
  c.validate(path);
  return c;
}
}  // namespace detail

inline void from_json(const json& j, gpu_spec& g) { g = detail::read_gpu_spec(j, "gpu"); }
inline void from_json(const json& j, cluster_spec& c) {
  c = detail::read_cluster_spec(j, "cluster");
}

// ---- sample.hpp ----
/// @brief JSON: `[height, width]`.
inline void to_json(json& j, const image_size& s) { j = json::array({s.height, s.width}); }

namespace detail {
/// @brief Reads `[height, width]` at `path`; errors name `path[0]` or `path[1]`.
[[nodiscard]] inline image_size read_image_size(const json& j, std::string_view path) {
  if (!j.is_array() || j.size() != 2)
    fail(errc::parse_error, path, "an image size is [height, width], got ", j.dump());
  return {json_to_integer<int>(j[0], cat(path, "[0]")),
          json_to_integer<int>(j[1], cat(path, "[1]"))};
}
/// @brief Reads optional array `key` of image sizes; errors name `path.key[i]`.
[[nodiscard]] inline std::vector<image_size> read_image_sizes(const json& j, std::string_view key,
                                                              std::string_view path) {
  const std::string where = join_path(path, key);
  const auto it = j.find(std::string(key));
  if (it == j.end()) return {};
  if (!it->is_array()) fail(errc::parse_error, where, "expected an array, got ", it->type_name());
  std::vector<image_size> out;
  out.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i)
    out.push_back(read_image_size((*it)[i], cat(where, "[", i, "]")));
  return out;
}
}  // namespace detail

inline void from_json(const json& j, image_size& s) {
  s = detail::read_image_size(j, "image_size");
}

/// @brief JSON: `{"id": 7, "text_tokens": 120, "images": [[448, 448]], "generated": [[512, 512]]}`.
inline void to_json(json& j, const sample& s) {
  j = json{{"id", s.id},
           {"text_tokens", s.text_tokens},
           {"images", s.images},
           {"generated", s.generated}};
}

namespace detail {
/// @brief Reads a sample at `path` ("images" and "generated" optional, "id" optional).
[[nodiscard]] inline sample read_sample(const json& j, std::string_view path) {
  check_keys(j, {"id", "text_tokens", "images", "generated"}, path);
  sample s;
  s.id = json_get_or<std::uint64_t>(j, "id", 0, path);
  s.text_tokens = json_get<int>(j, "text_tokens", path);
  s.images = read_image_sizes(j, "images", path);
  s.generated = read_image_sizes(j, "generated", path);
  s.validate(path);
  return s;
}
}  // namespace detail

inline void from_json(const json& j, sample& s) { s = detail::read_sample(j, ""); }

// ---- data_spec.hpp ----
inline void to_json(json& j, const data_spec& d) {
  j = json{{"name", d.name}, {"seed", d.seed}};
  if (!d.records.empty()) {
    j["records"] = d.records;
    return;
  }
  j["text_tokens"] = d.text_tokens;
  j["images_per_sample"] = d.images_per_sample;
  j["image_side"] = d.image_side;
  j["image_aspect"] = d.image_aspect;
  j["generated_per_sample"] = d.generated_per_sample;
  j["generated_side"] = d.generated_side;
}

namespace detail {
/// @brief Reads a data spec at `path`. `"records_file": "x.json"` (an array of
/// samples) may replace `"records"`; distributions not given keep defaults.
[[nodiscard]] inline data_spec read_data_spec(const json& j, std::string_view path) {
  check_keys(j,
             {"name", "seed", "records", "records_file", "text_tokens", "images_per_sample",
              "image_side", "image_aspect", "generated_per_sample", "generated_side"},
             path);
  data_spec d;
  d.name = json_get_or<std::string>(j, "name", "", path);
  d.seed = json_get_or<std::uint64_t>(j, "seed", 0, path);
  auto read_records = [&](const json& arr, const std::string& p) {
    if (!arr.is_array())
      fail(errc::parse_error, p, "expected an array of samples, got ", arr.type_name());
    for (std::size_t i = 0; i < arr.size(); ++i) {
      auto s = read_sample(arr[i], cat(p, "[", i, "]"));
      s.id = i;
      d.records.push_back(std::move(s));
    }
    if (d.records.empty()) fail(errc::invalid_argument, p, "records must not be empty");
  };
  if (j.contains("records")) {
    read_records(j.at("records"), join_path(path, "records"));
  } else if (j.contains("records_file")) {
    const auto file = json_get<std::string>(j, "records_file", path);
    read_records(read_json_file(file), file);
  } else {
    auto dist = [&](const char* key, distribution& target) {
      if (j.contains(key)) target = read_distribution(j.at(key), join_path(path, key));
    };
    dist("text_tokens", d.text_tokens);
    dist("images_per_sample", d.images_per_sample);
    dist("image_side", d.image_side);
    dist("image_aspect", d.image_aspect);
    dist("generated_per_sample", d.generated_per_sample);
    dist("generated_side", d.generated_side);
  }
  d.validate(path);
  return d;
}
}  // namespace detail

inline void from_json(const json& j, data_spec& d) { d = detail::read_data_spec(j, "data"); }

// ---- workload.hpp ----
inline void to_json(json& j, const module_workload& w) {
  j = json{{"sequences", w.sequences}, {"tokens", w.tokens}, {"tokens_sq", w.tokens_sq}};
}
inline void from_json(const json& j, module_workload& w) {
  w.sequences = detail::json_get<double>(j, "sequences", "workload");
  w.tokens = detail::json_get<double>(j, "tokens", "workload");
  w.tokens_sq = detail::json_get<double>(j, "tokens_sq", "workload");
  require_non_negative(w.sequences, "workload.sequences");
  require_non_negative(w.tokens, "workload.tokens");
  require_non_negative(w.tokens_sq, "workload.tokens_sq");
}

/// @brief JSON: an array with one `{"sequences", "tokens", "tokens_sq"}` object per module.
inline void to_json(json& j, const model_workload& w) {
  j = json::array();
  for (std::size_t i = 0; i < w.size; ++i) {
    json e;
    to_json(e, w.modules[i]);
    j.push_back(std::move(e));
  }
}
inline void from_json(const json& j, model_workload& w) {
  if (!j.is_array()) fail(errc::parse_error, "workload", "expected an array, got ", j.type_name());
  if (j.size() > max_modules)
    fail(errc::invalid_argument, "workload", "has ", j.size(), " modules, at most ", max_modules);
  w = model_workload{};
  w.size = j.size();
  for (std::size_t i = 0; i < j.size(); ++i) w.modules[i] = j[i].get<module_workload>();
}

// ---- scenario.hpp ----
inline void to_json(json& j, const scenario& s) {
  json m, c, d;
  to_json(m, s.model);
  to_json(c, s.cluster);
  to_json(d, s.data);
  j = json{{"name", s.name}, {"description", s.description},
           {"model", m},     {"cluster", c},
           {"data", d},      {"global_batch_size", s.global_batch_size}};
}

namespace detail {
[[nodiscard]] inline const json& json_child(const json& j, std::string_view key,
                                            std::string_view path) {
  if (!j.is_object()) fail(errc::parse_error, path, "expected a JSON object, got ", j.type_name());
  auto it = j.find(std::string(key));
  if (it == j.end()) fail(errc::parse_error, join_path(path, key), "required field is missing");
  return *it;
}
/// @brief Reads a scenario at `path` (fields are `path.model...`, `path.cluster...`).
[[nodiscard]] inline scenario read_scenario(const json& j, std::string_view path) {
  check_keys(j, {"name", "description", "model", "cluster", "data", "global_batch_size"}, path);
  scenario s;
  s.name = json_get_or<std::string>(j, "name", "", path);
  s.description = json_get_or<std::string>(j, "description", "", path);
  s.model = read_model_spec(json_child(j, "model", path), join_path(path, "model"));
  s.cluster = read_cluster_spec(json_child(j, "cluster", path), join_path(path, "cluster"));
  s.data = read_data_spec(json_child(j, "data", path), join_path(path, "data"));
  s.global_batch_size = json_get<int>(j, "global_batch_size", path);
  s.validate(path);
  return s;
}
}  // namespace detail

inline void from_json(const json& j, scenario& s) { s = detail::read_scenario(j, ""); }

}  // namespace disttrain
