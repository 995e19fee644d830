#pragma once
/// @file module_shape.hpp
/// @brief Token counts per image/sample, and the per-layer coefficients
/// (parameters, forward FLOPs, saved activation bytes, communicated bytes)
/// that the costs in `cost/` multiply by a workload.
///
/// Conventions (see docs/cost_model.md for derivations and sources):
/// - a matmul of an `m x k` by `k x n` matrix is `2 m k n` FLOPs;
/// - attention costs `4 * hidden * s^2` forward FLOPs per layer for a sequence
///   of `s` tokens (`Q K^T` and `A V`, full square, the Megatron/PaLM MFU
///   convention), hence `flops_per_token_sq = 4 * hidden` times `sum s^2`;
/// - activations are bf16, attention is fused (flash: no `s^2` storage), no
///   dropout; with TP, sequence parallelism divides all of them by `tp`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "disttrain/core/error.hpp"
#include "disttrain/model/architecture.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_spec.hpp"
#include "disttrain/model/sample.hpp"

namespace disttrain {

/// @brief Coefficients of one layer (or of the pre/post block of a module).
struct layer_shape {
  double params = 0;                      ///< parameters
  double flops_per_token = 0;             ///< forward FLOPs per token (linear part)
  double flops_per_token_sq = 0;          ///< forward FLOPs per unit of sum(s^2) (attention)
  double activation_bytes_per_token = 0;  ///< bytes saved for backward per token (tp = 1)
  /// Of `activation_bytes_per_token`, the bytes every TP rank holds whole unless
  /// the stage runs sequence parallelism (Korthikanti et al. 2022): the inputs of
  /// the norms and of the first GEMM of each block, which TP alone replicates.
  double replicated_bytes_per_token = 0;
};

/// @brief Everything the costs need to know about a module, precomputed once.
///
/// A module is `pre` (embeddings; on the stage holding layer 0), `layers`
/// identical layers, and `post` (final norm, LM head; on the stage holding the
/// last layer). `post.activation_bytes_per_token` is transient (logits), not
/// kept per in-flight microbatch.
///
/// @snippet model.cpp module_shape
struct module_shape {
  int layers = 0;
  int hidden = 0;
  int heads = 0;     ///< TP must divide (0: no constraint)
  int kv_heads = 0;  ///< TP must divide it or be a multiple of it (0: no constraint)
  int mlp = 0;       ///< TP must divide (0: no constraint)
  layer_shape layer;
  layer_shape pre;
  layer_shape post;
  double checkpoint_bytes_per_token = 0;     ///< per layer under full recompute (the layer input)
  double output_bytes_per_token = 0;         ///< activation a stage sends downstream, per token
  double tp_collective_bytes_per_token = 0;  ///< bytes of one TP all-reduce, per token
  int tp_collectives_per_layer = 2;          ///< all-reduces per layer per pass (attention, MLP)

  /// @brief All parameters of the module.
  [[nodiscard]] double total_params() const noexcept {
    return static_cast<double>(layers) * layer.params + pre.params + post.params;
  }
  /// @brief Forward FLOPs of the whole module for a workload given as token sums.
  [[nodiscard]] double forward_flops(double tokens, double tokens_sq) const noexcept {
    return static_cast<double>(layers) *
               (layer.flops_per_token * tokens + layer.flops_per_token_sq * tokens_sq) +
           (pre.flops_per_token + post.flops_per_token) * tokens;
  }
  /// @brief True when tensor parallelism of degree `tp` splits the module evenly.
  [[nodiscard]] bool tp_supported(int tp) const noexcept {
    if (tp <= 0) return false;
    if (hidden % tp != 0) return false;
    if (heads > 0 && heads % tp != 0) return false;
    if (kv_heads > 0 && kv_heads % tp != 0 && tp % kv_heads != 0) return false;
    if (mlp > 0 && mlp % tp != 0) return false;
    return true;
  }
};

namespace detail {
/// @brief One pre-norm transformer layer (shared by ViT, LLM and DiT).
struct transformer_layer_desc {
  double hidden, heads, kv_heads, mlp;
  bool gated, qkv_bias, linear_bias;
  double norm_params;   ///< parameters per norm (LayerNorm 2h, RMSNorm h, none 0)
  double extra_params;  ///< e.g. adaLN modulation
};

[[nodiscard]] inline layer_shape transformer_layer(const transformer_layer_desc& d) {
  const double h = d.hidden;
  const double kv = h / d.heads * d.kv_heads;
  const double mlp_mats = d.gated ? 3.0 : 2.0;
  const double matmul = 2.0 * h * h + 2.0 * h * kv + mlp_mats * h * d.mlp;
  double bias = 0;
  if (d.qkv_bias) bias += h + 2.0 * kv;
  if (d.linear_bias) bias += h + (d.gated ? 2.0 : 1.0) * d.mlp + h;
  layer_shape s;
  s.params = matmul + bias + 2.0 * d.norm_params + d.extra_params;
  s.flops_per_token = 2.0 * matmul;
  s.flops_per_token_sq = 4.0 * h;
  // bf16: attention saves norm input, QKV input, Q, K, V, attention output;
  // MLP saves norm input, fc1 input, fc1 output(s), activation output. Without
  // sequence parallelism the two norm inputs and the QKV / fc1 inputs are whole
  // on every TP rank (the rest is split by the column/row-parallel GEMMs).
  s.activation_bytes_per_token = 2.0 * (6.0 * h + 2.0 * kv + mlp_mats * d.mlp);
  s.replicated_bytes_per_token = 2.0 * (4.0 * h);
  return s;
}

inline void fill_transformer_common(module_shape& s, int layers, int hidden) {
  s.layers = layers;
  s.hidden = hidden;
  s.checkpoint_bytes_per_token = 2.0 * hidden;
  s.output_bytes_per_token = 2.0 * hidden;
  s.tp_collective_bytes_per_token = 2.0 * hidden;
  s.tp_collectives_per_layer = 2;
}

inline int ceil_div(std::int64_t a, std::int64_t b) { return static_cast<int>((a + b - 1) / b); }
}  // namespace detail

/// @brief Tokens a ViT produces for an image: `(image_size/patch)^2` when it
/// resizes every image, else `ceil(h'/p) * ceil(w'/p)` where the image is scaled
/// down (integer arithmetic, rounding up) so its longer side is at most
/// `max_image_size`; plus one class token if present.
/// @snippet model.cpp encoder_tokens
[[nodiscard]] inline int encoder_tokens(const vit_encoder_arch& a, image_size img) {
  const int cls = a.class_token ? 1 : 0;
  if (a.max_image_size == 0) {
    const int n = detail::ceil_div(a.image_size, a.patch_size);
    return n * n + cls;
  }
  std::int64_t h = img.height < 1 ? 1 : img.height, w = img.width < 1 ? 1 : img.width;
  const std::int64_t longer = h > w ? h : w;
  if (longer > a.max_image_size) {
    h = (h * a.max_image_size + longer - 1) / longer;
    w = (w * a.max_image_size + longer - 1) / longer;
  }
  return detail::ceil_div(h, a.patch_size) * detail::ceil_div(w, a.patch_size) + cls;
}

/// @brief Latent tokens the denoiser sees for an image: `ceil(h/(ds*p)) * ceil(w/(ds*p))`.
[[nodiscard]] inline int latent_tokens(const diffusion_arch& a, image_size img) {
  const std::int64_t f = static_cast<std::int64_t>(a.latent_downsample) * a.patch_size;
  return detail::ceil_div(img.height < 1 ? 1 : img.height, f) *
         detail::ceil_div(img.width < 1 ? 1 : img.width, f);
}

/// @brief Backbone tokens an image contributes after the projector, given the
/// encoder's token count for it.
[[nodiscard]] inline int projected_tokens(const model_spec& m, int encoder_token_count) {
  if (m.projector_tokens_per_image > 0) return m.projector_tokens_per_image;
  return detail::ceil_div(encoder_token_count, m.projector_patch_ratio);
}

/// @brief The per-layer coefficients of a module (see the file comment).
///
/// ViT: LayerNorm (2h per norm), biases everywhere, GELU MLP; pre = patch
/// embedding + learned position embedding (native grid) + class token; post =
/// final LayerNorm. LLM: RMSNorm (h), SwiGLU if gated; pre = token embedding;
/// post = final norm + LM head (2*h*vocab FLOPs per token; logits kept as bf16
/// + fp32, 6*vocab bytes per token, transient). DiT: adaLN-Zero blocks
/// (non-affine LayerNorm + 6h^2+6h modulation), pre = latent patch embedding +
/// timestep MLP (256 -> h -> h) + condition_params, post = adaLN (2h^2+2h) +
/// linear to p*p*out_channels. UNet: totals divided evenly over `layers`.
[[nodiscard]] inline module_shape shape_of(const module_spec& m) {
  module_shape s;
  if (const auto* v = std::get_if<vit_encoder_arch>(&m.arch)) {
    const double h = v->hidden;
    detail::fill_transformer_common(s, v->layers, v->hidden);
    s.heads = v->heads;
    s.kv_heads = v->heads;
    s.mlp = v->mlp;
    s.layer = detail::transformer_layer({h, static_cast<double>(v->heads),
                                         static_cast<double>(v->heads), static_cast<double>(v->mlp),
                                         false, v->qkv_bias, v->qkv_bias, 2.0 * h, 0.0});
    const double patch_in = static_cast<double>(v->channels) * v->patch_size * v->patch_size;
    const int grid = detail::ceil_div(v->image_size, v->patch_size);
    const double cls = v->class_token ? 1.0 : 0.0;
    s.pre.params = patch_in * h + h + (static_cast<double>(grid) * grid + cls) * h + cls * h;
    s.pre.flops_per_token = 2.0 * patch_in * h;
    s.post.params = 2.0 * h;
  } else if (const auto* l = std::get_if<decoder_llm_arch>(&m.arch)) {
    const double h = l->hidden;
    detail::fill_transformer_common(s, l->layers, l->hidden);
    s.heads = l->heads;
    s.kv_heads = l->kv_heads;
    s.mlp = l->mlp;
    s.layer = detail::transformer_layer(
        {h, static_cast<double>(l->heads), static_cast<double>(l->kv_heads),
         static_cast<double>(l->mlp), l->gated_mlp, l->qkv_bias, false, h, 0.0});
    const double vocab = l->vocab;
    s.pre.params = vocab * h;
    s.post.params = h + (l->tied_embeddings ? 0.0 : vocab * h);
    s.post.flops_per_token = 2.0 * h * vocab;
    s.post.activation_bytes_per_token = 6.0 * vocab;
  } else {
    const auto& d = std::get<diffusion_arch>(m.arch);
    const double h = d.hidden;
    if (d.kind == diffusion_kind::dit) {
      detail::fill_transformer_common(s, d.layers, d.hidden);
      s.heads = d.heads;
      s.kv_heads = d.heads;
      s.mlp = d.mlp;
      s.layer = detail::transformer_layer({h, static_cast<double>(d.heads),
                                           static_cast<double>(d.heads), static_cast<double>(d.mlp),
                                           false, true, true, 0.0, 6.0 * h * h + 6.0 * h});
      const double pp = static_cast<double>(d.patch_size) * d.patch_size;
      const double in_ch = d.latent_channels;
      const double out_ch = in_ch * (d.learn_sigma ? 2.0 : 1.0);
      s.pre.params = in_ch * pp * h + h + (256.0 * h + h) + (h * h + h) + d.condition_params;
      s.pre.flops_per_token = 2.0 * in_ch * pp * h;
      s.post.params = 2.0 * h * h + 2.0 * h + h * pp * out_ch + pp * out_ch;
      s.post.flops_per_token = 2.0 * h * pp * out_ch;
    } else {
      const double n = d.layers;
      s.layers = d.layers;
      s.hidden = d.hidden;
      s.layer.params = d.params / n;
      s.layer.flops_per_token = d.forward_flops_per_token / n;
      s.layer.flops_per_token_sq = d.forward_flops_per_token_sq / n;
      s.layer.activation_bytes_per_token = d.activation_bytes_per_token / n;
      // Opaque layers: without sequence parallelism only the layer input (bf16,
      // hidden wide) is assumed whole on every TP rank.
      s.layer.replicated_bytes_per_token = std::min(2.0 * h, s.layer.activation_bytes_per_token);
      s.checkpoint_bytes_per_token = 2.0 * h;
      s.output_bytes_per_token = 4.0 * h;  // main path + one skip tensor (approximation)
      s.tp_collective_bytes_per_token = 2.0 * h;
      s.tp_collectives_per_layer = 2;
    }
  }
  return s;
}

/// @brief Total parameters of a module.
[[nodiscard]] inline double module_params(const module_spec& m) {
  return shape_of(m).total_params();
}

}  // namespace disttrain
