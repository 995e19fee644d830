#pragma once
/// @file json.hpp
/// @brief JSON input/output of the model part's value types.
///
/// Kept apart from the value headers, so that a program including them parses
/// no JSON library (docs/header_cost.md); `disttrain/json.hpp` includes it (the
/// umbrella `disttrain/model.hpp` does not).

#include <tuple>
#include <utility>
#include <variant>

#include "disttrain/core/json.hpp"
#include "disttrain/model/architecture.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/distribution.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_spec.hpp"
#include "disttrain/model/sample.hpp"
#include "disttrain/model/sample_csv.hpp"
#include "disttrain/model/scenario.hpp"
#include "disttrain/model/workload.hpp"

namespace disttrain {

NLOHMANN_JSON_SERIALIZE_ENUM(diffusion_kind,
                             {{diffusion_kind::unet, "unet"}, {diffusion_kind::dit, "dit"}})

// ---- distribution.hpp ----
namespace detail {
// Each distribution kind's name (its "kind") and fields.
constexpr auto distribution_kind(const constant_dist&) {
  return std::pair{"constant", std::tuple{required_field("value", &constant_dist::value)}};
}
constexpr auto distribution_kind(const uniform_int_dist&) {
  return std::pair{"uniform_int", std::tuple{required_field("min", &uniform_int_dist::min),
                                             required_field("max", &uniform_int_dist::max)}};
}
constexpr auto distribution_kind(const lognormal_dist&) {
  return std::pair{"lognormal", std::tuple{required_field("median", &lognormal_dist::median),
                                           required_field("sigma", &lognormal_dist::sigma),
                                           optional_field("min", &lognormal_dist::min),
                                           optional_field("max", &lognormal_dist::max)}};
}
constexpr auto distribution_kind(const histogram_dist&) {
  return std::pair{"histogram", std::tuple{required_field("values", &histogram_dist::values),
                                           required_field("weights", &histogram_dist::weights)}};
}
}  // namespace detail

/// @brief JSON: `{"kind": "constant", "value": 1}`, `{"kind": "uniform_int", "min": 0,
/// "max": 4}`, `{"kind": "lognormal", "median": 300, "sigma": 0.8, "min": 8, "max":
/// 4096}` (min/max optional), `{"kind": "histogram", "values": [...], "weights": [...]}`.
inline void to_json(json& j, const distribution& d) {
  std::visit(
      [&](const auto& x) {
        const auto [kind, fields] = detail::distribution_kind(x);
        j = detail::fields_to_json(x, fields);
        j["kind"] = kind;
      },
      d.get());
  // An unbounded lognormal leaves "max" out.
  if (const auto* l = std::get_if<lognormal_dist>(&d.get()); l && !(l->max < 1e300)) j.erase("max");
}

namespace detail {
/// @brief Reads a distribution at `path`; errors name `path.<field>`.
[[nodiscard]] inline distribution read_distribution(const json& j, std::string_view path) {
  // A bare number is a constant.
  if (j.is_number()) return constant_dist{j.get<double>()};
  const auto kind = json_get<std::string>(j, "kind", path);
  distribution d;
  const auto read = [&](auto x) {  // false when `kind` is another
    const auto [name, fields] = distribution_kind(x);
    if (kind != name) return false;
    read_fields(j, x, fields, path, {"kind"});
    d = x;
    return true;
  };
  if (!read(constant_dist{}) && !read(uniform_int_dist{}) && !read(lognormal_dist{}) &&
      !read(histogram_dist{}))
    fail_unknown_name(join_path(path, "kind"), "distribution kind", kind,
                      {"constant", "uniform_int", "lognormal", "histogram"});
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
  return read_validated(j, vit_encoder_arch_fields, path, {"type"});
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
// module_role: core/json.hpp.
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
    fail_unknown_name(join_path(ap, "type"), "architecture type", type,
                      {"vit", "llm", "diffusion"});
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
  return read_validated(j, gpu_spec_fields, path);
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
/// @brief Reads an array of image sizes at `path`; errors name `path[i]`.
[[nodiscard]] inline std::vector<image_size> read_image_sizes(const json& j,
                                                              std::string_view path) {
  if (!j.is_array()) fail(errc::parse_error, path, "expected an array, got ", j.type_name());
  std::vector<image_size> out;
  out.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i)
    out.push_back(read_image_size(j[i], cat(path, "[", i, "]")));
  return out;
}
inline constexpr auto sample_fields = std::tuple{
    optional_field("id", &sample::id), required_field("text_tokens", &sample::text_tokens),
    optional_field("images", &sample::images, read_image_sizes),
    optional_field("generated", &sample::generated, read_image_sizes)};
}  // namespace detail

inline void from_json(const json& j, image_size& s) {
  s = detail::read_image_size(j, "image_size");
}

/// @brief JSON: `{"id": 7, "text_tokens": 120, "images": [[448, 448]], "generated": [[512, 512]]}`.
inline void to_json(json& j, const sample& s) {
  j = detail::fields_to_json(s, detail::sample_fields);
}

namespace detail {
/// @brief Reads a sample at `path` ("images" and "generated" optional, "id" optional).
[[nodiscard]] inline sample read_sample(const json& j, std::string_view path) {
  return read_validated(j, sample_fields, path);
}
}  // namespace detail

inline void from_json(const json& j, sample& s) { s = detail::read_sample(j, ""); }

// ---- data_spec.hpp ----
namespace detail {
inline constexpr auto data_spec_fields =
    std::tuple{optional_field("name", &data_spec::name), optional_field("seed", &data_spec::seed)};
// The distributions a stream draws from (unused, and not written, with records).
inline constexpr auto data_distribution_fields = std::tuple{
    optional_field("text_tokens", &data_spec::text_tokens, read_distribution),
    optional_field("images_per_sample", &data_spec::images_per_sample, read_distribution),
    optional_field("image_side", &data_spec::image_side, read_distribution),
    optional_field("image_aspect", &data_spec::image_aspect, read_distribution),
    optional_field("generated_per_sample", &data_spec::generated_per_sample, read_distribution),
    optional_field("generated_side", &data_spec::generated_side, read_distribution)};
}  // namespace detail

inline void to_json(json& j, const data_spec& d) {
  j = detail::fields_to_json(d, detail::data_spec_fields);
  if (!d.records.empty())
    j["records"] = d.records;
  else
    j.update(detail::fields_to_json(d, detail::data_distribution_fields));
}

namespace detail {
/// @brief Reads a data spec at `path`. `"records_file": "x.json"` (an array of
/// samples) or `"records_csv": "x.csv"` (`read_sample_csv`, with
/// `"patch_size"` for its `image_tokens` column, default 14) may replace
/// `"records"`; distributions not given keep defaults.
[[nodiscard]] inline data_spec read_data_spec(const json& j, std::string_view path) {
  data_spec d;
  read_fields(j, d, std::tuple_cat(data_spec_fields, data_distribution_fields), path,
              {"records", "records_file", "records_csv", "patch_size"});
  const int sources = (j.contains("records") ? 1 : 0) + (j.contains("records_file") ? 1 : 0) +
                      (j.contains("records_csv") ? 1 : 0);
  if (sources > 1)
    fail(errc::invalid_argument, path, "give one of records, records_file and records_csv");
  if (j.contains("patch_size") && !j.contains("records_csv"))
    fail(errc::invalid_argument, join_path(path, "patch_size"), "applies to records_csv only");
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
  } else if (j.contains("records_csv")) {
    sample_csv_options o;
    if (j.contains("patch_size")) o.patch_size = json_get<int>(j, "patch_size", path);
    d.records = read_sample_csv_file(json_get<std::string>(j, "records_csv", path), o);
  }
  d.validate(path);
  return d;
}
}  // namespace detail

inline void from_json(const json& j, data_spec& d) { d = detail::read_data_spec(j, "data"); }

// ---- workload.hpp ----
namespace detail {
inline constexpr auto module_workload_fields =
    std::tuple{required_field("sequences", &module_workload::sequences),
               required_field("tokens", &module_workload::tokens),
               required_field("tokens_sq", &module_workload::tokens_sq)};
}  // namespace detail

inline void to_json(json& j, const module_workload& w) {
  j = detail::fields_to_json(w, detail::module_workload_fields);
}
inline void from_json(const json& j, module_workload& w) {
  detail::read_fields(j, w, detail::module_workload_fields, "workload");
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
namespace detail {
inline constexpr auto scenario_fields =
    std::tuple{optional_field("name", &scenario::name),
               optional_field("description", &scenario::description),
               required_field("model", &scenario::model, read_model_spec),
               required_field("cluster", &scenario::cluster, read_cluster_spec),
               required_field("data", &scenario::data, read_data_spec),
               required_field("global_batch_size", &scenario::global_batch_size)};
}  // namespace detail

inline void to_json(json& j, const scenario& s) {
  j = detail::fields_to_json(s, detail::scenario_fields);
}

/// @brief Reads and validates a scenario at `path` (fields are
/// `path.model...`, `path.cluster...`): what `from_json` does, with the path
/// errors name (e.g. a tool reading a scenario out of a larger file).
[[nodiscard]] inline scenario read_scenario(const json& j, std::string_view path) {
  return detail::read_validated(j, detail::scenario_fields, path);
}

inline void from_json(const json& j, scenario& s) { s = read_scenario(j, ""); }

}  // namespace disttrain
