#pragma once
/// @file multimodal_cost.hpp
/// @brief A built-in `sample_cost`: encoder, backbone and generator costs of a
/// multimodal sample from its token counts, with attention's quadratic term.
///
/// Per module the cost of one item of `t` tokens is
/// `per_item + linear * t + quadratic * t^2`:
/// - encoder (module 0): one item per input image, `t` = its patch tokens
///   (ViT attention is quadratic in the patches of one image);
/// - backbone (module 1): one item, `t` = text tokens + `tokens_per_patch` x
///   all input patch tokens (the projector's output joins the sequence);
/// - generator (module 2): one item per generated image, `t` = its latent tokens.
///
/// For a transformer, `linear ~ 2 * params / (peak * efficiency)` per forward
/// token and `quadratic ~ 4 * layers * hidden / (peak * efficiency)`; the cost
/// model supplies calibrated values, tests use simple ones.
///
/// @snippet reorder.cpp multimodal_cost_file

#include <array>
#include <cstdint>
#include <vector>

namespace disttrain {

/// @brief A multimodal sample's shape: text tokens, input images' patch
/// tokens, generated images' latent tokens.
/// @snippet reorder.cpp multimodal_sample
struct multimodal_sample {
  std::uint64_t id = 0;                           ///< unique id within the global batch
  std::uint32_t text_tokens = 0;                  ///< text tokens in the backbone sequence
  std::vector<std::uint32_t> image_tokens{};      ///< patch tokens of each input image
  std::vector<std::uint32_t> generated_tokens{};  ///< latent tokens of each generated image
};

/// @brief Cost of one item of `t` tokens: `per_item + linear * t + quadratic * t^2`.
/// @snippet reorder.cpp token_cost
struct token_cost {
  double per_item = 0.0;   ///< fixed cost per item (kernel launches, per-image overhead)
  double linear = 0.0;     ///< cost per token (dense layers)
  double quadratic = 0.0;  ///< cost per token pair (attention scores)
  [[nodiscard]] constexpr double operator()(double t) const noexcept {
    return per_item + t * (linear + quadratic * t);
  }
};

/// @brief `sample_cost` for `multimodal_sample`: {encoder, backbone, generator}.
/// @snippet reorder.cpp multimodal_cost
struct multimodal_cost {
  token_cost encoder{};           ///< per input image, t = patch tokens
  token_cost backbone{};          ///< per sample, t = sequence length
  token_cost generator{};         ///< per generated image, t = latent tokens
  double tokens_per_patch = 1.0;  ///< backbone tokens per encoder patch (projector merge ratio)

  [[nodiscard]] std::array<double, 3> operator()(const multimodal_sample& s) const {
    double enc = 0.0;
    double patches = 0.0;
    for (std::uint32_t t : s.image_tokens) {
      enc += encoder(static_cast<double>(t));
      patches += static_cast<double>(t);
    }
    const double seq = static_cast<double>(s.text_tokens) + tokens_per_patch * patches;
    const double llm = seq > 0.0 ? backbone(seq) : 0.0;
    double gen = 0.0;
    for (std::uint32_t t : s.generated_tokens) gen += generator(static_cast<double>(t));
    return {enc, llm, gen};
  }
};

}  // namespace disttrain
