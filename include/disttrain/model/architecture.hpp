#pragma once
/// @file architecture.hpp
/// @brief The three module architectures: ViT-style image encoder, decoder-only
/// LLM backbone, diffusion generator (UNet or DiT). Plain values; `validate`
/// names the offending field; JSON in/out in model/json.hpp.
///
/// These describe *what a module is*; `module_shape.hpp` turns one into the
/// per-layer parameter, FLOP and activation coefficients the costs use.

#include <cstdint>
#include <string>
#include <string_view>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief A ViT image encoder (patch embedding + `layers` pre-norm transformer
/// layers with LayerNorm and a plain GELU MLP).
///
/// Resolution policy: with `max_image_size == 0` every image is resized to
/// `image_size` x `image_size` (fixed tokens, as in CLIP); with
/// `max_image_size > 0` an image keeps its own resolution, scaled down so its
/// longer side is at most `max_image_size`, and yields
/// `ceil(h/patch) * ceil(w/patch)` patch tokens (native resolution, the source
/// of the encoder's data heterogeneity).
///
/// @snippet model.cpp vit_encoder_arch
struct vit_encoder_arch {
  int image_size = 224;     ///< native (pre-training) side in pixels
  int patch_size = 14;      ///< patch side in pixels
  int layers = 32;          ///< transformer layers
  int hidden = 1280;        ///< model width
  int heads = 16;           ///< attention heads (must divide hidden)
  int mlp = 5120;           ///< MLP inner size
  int channels = 3;         ///< input image channels
  bool class_token = true;  ///< one extra [CLS] token per image
  bool qkv_bias = true;     ///< biases on Q, K, V (and all other linears)
  int max_image_size =
      0;  ///< 0: fixed resize to image_size; > 0: native resolution capped at this side

  void validate(std::string_view path) const {
    using detail::join_path;
    require_positive(image_size, join_path(path, "image_size"));
    require_positive(patch_size, join_path(path, "patch_size"));
    require(patch_size <= image_size, join_path(path, "patch_size"), "must be <= image_size (",
            image_size, "), got ", patch_size);
    require_positive(layers, join_path(path, "layers"));
    require_positive(hidden, join_path(path, "hidden"));
    require_positive(heads, join_path(path, "heads"));
    require(hidden % heads == 0, join_path(path, "heads"), "must divide hidden (", hidden,
            "), got ", heads);
    require_positive(mlp, join_path(path, "mlp"));
    require_positive(channels, join_path(path, "channels"));
    require_non_negative(max_image_size, join_path(path, "max_image_size"));
    require(max_image_size == 0 || max_image_size >= patch_size, join_path(path, "max_image_size"),
            "must be 0 or >= patch_size (", patch_size, "), got ", max_image_size);
  }
};

/// @brief A decoder-only LLM (Llama / Qwen style): token embedding, `layers`
/// pre-norm layers with RMSNorm, grouped-query attention and an MLP (SwiGLU when
/// `gated_mlp`), final norm and LM head.
///
/// @snippet model.cpp decoder_llm_arch
struct decoder_llm_arch {
  int layers = 32;
  int hidden = 4096;
  int heads = 32;
  int kv_heads = 32;  ///< key/value heads (GQA); must divide heads
  int mlp = 11008;    ///< MLP inner size
  int vocab = 32000;
  int max_seq = 4096;            ///< longest sequence the model accepts
  bool gated_mlp = true;         ///< SwiGLU (three matrices) instead of two
  bool qkv_bias = false;         ///< biases on Q, K, V only (Qwen2)
  bool tied_embeddings = false;  ///< LM head shares the embedding matrix

  void validate(std::string_view path) const {
    using detail::join_path;
    require_positive(layers, join_path(path, "layers"));
    require_positive(hidden, join_path(path, "hidden"));
    require_positive(heads, join_path(path, "heads"));
    require(hidden % heads == 0, join_path(path, "heads"), "must divide hidden (", hidden,
            "), got ", heads);
    require_positive(kv_heads, join_path(path, "kv_heads"));
    require(heads % kv_heads == 0, join_path(path, "kv_heads"), "must divide heads (", heads,
            "), got ", kv_heads);
    require_positive(mlp, join_path(path, "mlp"));
    require_positive(vocab, join_path(path, "vocab"));
    require_positive(max_seq, join_path(path, "max_seq"));
  }
};

/// @brief Kind of diffusion generator.
enum class diffusion_kind {
  unet,  ///< convolutional UNet: described by totals (params, FLOPs per latent token)
  dit,   ///< diffusion transformer: described like a ViT over latent patches
};

/// @brief A latent-diffusion generator: the VAE maps a `h x w` image to a
/// `h/latent_downsample x w/latent_downsample` latent; the denoiser sees
/// `ceil(h/(ds*patch)) * ceil(w/(ds*patch))` latent tokens (patch = 1 for UNet).
/// Training costs one denoiser forward/backward per generated image (one
/// sampled timestep); the frozen VAE encoder is not modelled.
///
/// A DiT is described structurally (`layers, hidden, heads, mlp, patch_size`,
/// adaLN-Zero blocks). A UNet is described by totals that come from its
/// publications: `params`, `forward_flops_per_token` (linear part) and
/// `forward_flops_per_token_sq` (self-attention part, times the sum of squared
/// token counts), `activation_bytes_per_token`; `layers` then only says in how
/// many equal slices it may be cut into pipeline stages.
///
/// @snippet model.cpp diffusion_arch
struct diffusion_arch {
  diffusion_kind kind = diffusion_kind::dit;
  int resolution = 256;       ///< default side of generated images (pixels)
  int latent_downsample = 8;  ///< VAE spatial downsampling
  int latent_channels = 4;    ///< VAE latent channels
  int patch_size = 2;         ///< DiT latent patch side (UNet: must be 1)
  int layers = 28;            ///< DiT blocks, or UNet slices for pipeline cuts
  int hidden = 1152;          ///< DiT width / UNet base channels (TP must divide it)
  int heads = 16;             ///< DiT attention heads (UNet: attention heads at the base level)
  int mlp = 4608;             ///< DiT MLP inner size (UNet: unused)
  bool learn_sigma = true;    ///< DiT predicts variance too (doubles output channels)
  double condition_params =
      0;  ///< DiT conditioning embedding parameters (class table or text projector)
  // UNet totals (kind == unet):
  double params = 0;                      ///< total parameters
  double forward_flops_per_token = 0;     ///< forward FLOPs per latent token, linear part
  double forward_flops_per_token_sq = 0;  ///< forward FLOPs per squared latent token (attention)
  double activation_bytes_per_token = 0;  ///< bytes saved for backward per latent token (bf16)

  void validate(std::string_view path) const {
    using detail::join_path;
    require_positive(resolution, join_path(path, "resolution"));
    require_positive(latent_downsample, join_path(path, "latent_downsample"));
    require_positive(latent_channels, join_path(path, "latent_channels"));
    require_positive(patch_size, join_path(path, "patch_size"));
    require_positive(layers, join_path(path, "layers"));
    require_positive(hidden, join_path(path, "hidden"));
    require_positive(heads, join_path(path, "heads"));
    require(hidden % heads == 0, join_path(path, "heads"), "must divide hidden (", hidden,
            "), got ", heads);
    require_non_negative(condition_params, join_path(path, "condition_params"));
    if (kind == diffusion_kind::dit) {
      require_positive(mlp, join_path(path, "mlp"));
    } else {
      require(patch_size == 1, join_path(path, "patch_size"), "must be 1 for a UNet, got ",
              patch_size);
      require_positive(params, join_path(path, "params"));
      require_positive(forward_flops_per_token, join_path(path, "forward_flops_per_token"));
      require_non_negative(forward_flops_per_token_sq,
                           join_path(path, "forward_flops_per_token_sq"));
      require_positive(activation_bytes_per_token, join_path(path, "activation_bytes_per_token"));
    }
  }
};

// ---- names -------------------------------------------------------------------

/// @brief Name of a diffusion kind ("unet" / "dit").
[[nodiscard]] constexpr std::string_view to_string(diffusion_kind k) noexcept {
  return k == diffusion_kind::unet ? "unet" : "dit";
}

}  // namespace disttrain
