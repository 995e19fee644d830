#pragma once
/// @file workload.hpp
/// @brief What a microbatch asks of each module, summarised as three sums that
/// every cost in `cost/` is a function of: sequences, tokens, squared tokens.
///
/// - encoder: one sequence per input image, of `encoder_tokens(image)` tokens;
/// - backbone: one sequence per sample: text + projected image tokens +
///   `generator_condition_tokens` per generated image;
/// - generator: one sequence per generated image, of `latent_tokens(image)`.
///
/// Costs are affine in these sums (see docs/cost_model.md), so the expected cost
/// of a microbatch is the cost of its expected workload, and the workload of a
/// set of samples is the sum of theirs.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "disttrain/core/check.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_shape.hpp"
#include "disttrain/model/sample.hpp"

namespace disttrain {

/// @brief One module's work in a microbatch (or its expectation per sample).
///
/// @snippet model.cpp module_workload
struct module_workload {
  double sequences = 0;  ///< independent sequences (attention does not cross them)
  double tokens = 0;     ///< sum of sequence lengths
  double tokens_sq = 0;  ///< sum of squared sequence lengths (attention's quadratic term)

  /// @brief Adds one sequence of `n` tokens.
  constexpr void add_sequence(double n) noexcept {
    sequences += 1;
    tokens += n;
    tokens_sq += n * n;
  }
  constexpr module_workload& operator+=(const module_workload& o) noexcept {
    sequences += o.sequences;
    tokens += o.tokens;
    tokens_sq += o.tokens_sq;
    return *this;
  }
  friend constexpr module_workload operator+(module_workload a, const module_workload& b) noexcept {
    return a += b;
  }
  friend constexpr module_workload operator*(module_workload a, double k) noexcept {
    a.sequences *= k;
    a.tokens *= k;
    a.tokens_sq *= k;
    return a;
  }
  friend constexpr module_workload operator*(double k, const module_workload& a) noexcept {
    return a * k;
  }
  friend constexpr bool operator==(const module_workload&, const module_workload&) = default;
  /// @brief True when the module has nothing to do.
  [[nodiscard]] constexpr bool empty() const noexcept { return tokens <= 0; }
};

/// @brief The workload of every module of a model (indexed like `model_spec::modules`);
/// a fixed-size value, no allocation.
struct model_workload {
  std::array<module_workload, max_modules> modules{};
  std::size_t size = 0;  ///< number of modules in use

  [[nodiscard]] constexpr module_workload& operator[](std::size_t i) noexcept { return modules[i]; }
  [[nodiscard]] constexpr const module_workload& operator[](std::size_t i) const noexcept {
    return modules[i];
  }
  constexpr model_workload& operator+=(const model_workload& o) noexcept {
    if (o.size > size) size = o.size;
    for (std::size_t i = 0; i < max_modules; ++i) modules[i] += o.modules[i];
    return *this;
  }
  friend constexpr model_workload operator+(model_workload a, const model_workload& b) noexcept {
    return a += b;
  }
  friend constexpr model_workload operator*(model_workload a, double k) noexcept {
    for (auto& m : a.modules) m = m * k;
    return a;
  }
  friend constexpr bool operator==(const model_workload&, const model_workload&) = default;
};

/// @brief Adds sample `s`'s work to `w` (sized to the model). No allocation.
inline void add_workload(const model_spec& m, const sample& s, model_workload& w) {
  w.size = m.modules.size();
  // Projected image tokens: from the first encoder's token counts (all encoders see all images).
  double image_tokens_in_backbone = 0;
  bool projected = false;
  for (std::size_t i = 0; i < m.modules.size(); ++i) {
    const auto& mod = m.modules[i];
    if (const auto* v = std::get_if<vit_encoder_arch>(&mod.arch)) {
      for (const auto& img : s.images) {
        const int t = encoder_tokens(*v, img);
        w[i].add_sequence(static_cast<double>(t));
        if (!projected) image_tokens_in_backbone += projected_tokens(m, t);
      }
      projected = true;
    }
  }
  if (!projected && m.projector_tokens_per_image > 0)
    image_tokens_in_backbone = static_cast<double>(s.images.size()) * m.projector_tokens_per_image;
  for (std::size_t i = 0; i < m.modules.size(); ++i) {
    const auto& mod = m.modules[i];
    if (std::holds_alternative<decoder_llm_arch>(mod.arch)) {
      const double n = static_cast<double>(s.text_tokens) + image_tokens_in_backbone +
                       static_cast<double>(s.generated.size()) * m.generator_condition_tokens;
      w[i].add_sequence(n);
    } else if (const auto* d = std::get_if<diffusion_arch>(&mod.arch)) {
      for (const auto& img : s.generated)
        w[i].add_sequence(static_cast<double>(latent_tokens(*d, img)));
    }
  }
}

/// @brief The workload of one sample.
/// @snippet model.cpp workload_of
[[nodiscard]] inline model_workload workload_of(const model_spec& m, const sample& s) {
  model_workload w;
  add_workload(m, s, w);
  return w;
}

/// @brief The workload of a set of samples (a microbatch): the sum of theirs.
[[nodiscard]] inline model_workload workload_of(const model_spec& m,
                                                std::span<const sample> samples) {
  model_workload w;
  w.size = m.modules.size();
  for (const auto& s : samples) add_workload(m, s, w);
  return w;
}

/// @brief Expected workload of one sample of `data`: the mean over samples
/// `0 .. draws-1` of `data_sampler(data)` (a fixed, reproducible Monte-Carlo
/// estimate; in records mode with `draws >= records.size()`, the mean over the
/// first `draws` records cyclically). Multiply by a microbatch size for the
/// expected microbatch workload.
/// @snippet model.cpp expected_workload
[[nodiscard]] inline model_workload expected_workload(const model_spec& m, const data_spec& data,
                                                      std::size_t draws = 4096) {
  require_positive(draws, "draws");
  data_sampler sampler(data);
  model_workload w;
  w.size = m.modules.size();
  sample s;
  for (std::size_t i = 0; i < draws; ++i) {
    sampler.draw_into(static_cast<std::uint64_t>(i), s);
    add_workload(m, s, w);
  }
  w = w * (1.0 / static_cast<double>(draws));
  w.size = m.modules.size();
  return w;
}

}  // namespace disttrain
