#pragma once
/// @file data_spec.hpp
/// @brief The training data distribution and a seeded, deterministic sampler.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/rng.hpp"
#include "disttrain/model/distribution.hpp"
#include "disttrain/model/sample.hpp"

namespace disttrain {

/// @brief Distribution of samples, parametric/histogram or as recorded samples.
///
/// Parametric mode (`records` empty), per sample, in this order:
/// 1. text tokens  = round(`text_tokens`), at least 0;
/// 2. input images = round(`images_per_sample`); for each: longer side
///    L = round(`image_side`), shorter side = max(1, round(L * `image_aspect`))
///    (aspect = short/long in (0, 1]), stored as {height = short, width = long};
/// 3. generated images = round(`generated_per_sample`); each square with side
///    round(`generated_side`).
/// Records mode: sample `id` is `records[id % records.size()]` with its id set to `id`.
///
/// @snippet model.cpp data_sampler
struct data_spec {
  std::string name{};
  distribution text_tokens = constant_dist{128};
  distribution images_per_sample = constant_dist{1};
  distribution image_side = constant_dist{224};
  distribution image_aspect = constant_dist{1};
  distribution generated_per_sample = constant_dist{0};
  distribution generated_side = constant_dist{512};
  std::vector<sample> records{};  ///< non-empty: records mode
  std::uint64_t seed = 0;         ///< stream seed; sample `id` uses `derive_seed(seed, id)`

  void validate(std::string_view path = "data") const {
    using detail::join_path;
    if (!records.empty()) {
      bool any_text = false;
      for (std::size_t i = 0; i < records.size(); ++i) {
        records[i].validate(cat(join_path(path, "records"), "[", i, "]"));
        any_text = any_text || records[i].text_tokens > 0;
      }
      require(any_text, join_path(path, "records"), "every one of the ", records.size(),
              " records has 0 text_tokens: the workload is empty");
      return;
    }
    text_tokens.validate(join_path(path, "text_tokens"));
    images_per_sample.validate(join_path(path, "images_per_sample"));
    image_side.validate(join_path(path, "image_side"));
    image_aspect.validate(join_path(path, "image_aspect"));
    generated_per_sample.validate(join_path(path, "generated_per_sample"));
    generated_side.validate(join_path(path, "generated_side"));
    // Counts and sizes can be neither negative (a draw would be clamped
    // silently) nor all zero for the text (an empty workload plans in no time).
    auto non_negative = [&](const distribution& d, const char* key) {
      require(d.lowest() >= 0, join_path(path, key),
              "is a count or size and must be >= 0, can draw ", d.lowest());
    };
    non_negative(text_tokens, "text_tokens");
    non_negative(images_per_sample, "images_per_sample");
    non_negative(image_side, "image_side");
    non_negative(image_aspect, "image_aspect");
    non_negative(generated_per_sample, "generated_per_sample");
    non_negative(generated_side, "generated_side");
    require(text_tokens.highest() >= 0.5, join_path(path, "text_tokens"),
            "every sample has 0 text tokens (at most ", text_tokens.highest(),
            "): the workload is empty");
  }
};

/// @brief Draws samples of a `data_spec`; sample `id` depends only on
/// (spec, id), so any rank can draw any sample, in any order, identically.
///
/// Negative draws are clamped to 0 (counts) or 1 (sides, pixels); aspect to (0, 1].
class data_sampler {
 public:
  /// @brief Validates and keeps a copy of `spec`.
  explicit data_sampler(data_spec spec) : spec_(std::move(spec)) { spec_.validate(); }

  /// @brief The spec.
  [[nodiscard]] const data_spec& spec() const noexcept { return spec_; }

  /// @brief Sample number `id`.
  [[nodiscard]] sample draw(std::uint64_t id) const {
    sample s;
    draw_into(id, s);
    return s;
  }

  /// @brief Fills `out` with sample `id`, reusing its vectors' capacity.
  void draw_into(std::uint64_t id, sample& out) const {
    if (!spec_.records.empty()) {
      out = spec_.records[static_cast<std::size_t>(id % spec_.records.size())];
      out.id = id;
      return;
    }
    splitmix64 rng(derive_seed(spec_.seed, id));
    out.id = id;
    out.text_tokens = count(spec_.text_tokens.draw(rng));
    const int n_img = count(spec_.images_per_sample.draw(rng));
    out.images.resize(static_cast<std::size_t>(n_img));
    for (auto& im : out.images) {
      const int side = pixels(spec_.image_side.draw(rng));
      double aspect = spec_.image_aspect.draw(rng);
      aspect = aspect > 1 ? 1 : aspect;
      const int short_side = pixels(static_cast<double>(side) * aspect);
      im = image_size{short_side, side};
    }
    const int n_gen = count(spec_.generated_per_sample.draw(rng));
    out.generated.resize(static_cast<std::size_t>(n_gen));
    for (auto& im : out.generated) {
      const int side = pixels(spec_.generated_side.draw(rng));
      im = image_size{side, side};
    }
  }

  /// @brief Samples `first_id .. first_id + n - 1`.
  [[nodiscard]] std::vector<sample> draw_batch(std::uint64_t first_id, std::size_t n) const {
    std::vector<sample> out(n);
    for (std::size_t i = 0; i < n; ++i) draw_into(first_id + i, out[i]);
    return out;
  }

 private:
  static int count(double x) {
    if (!(x > 0)) return 0;
    return x > 1e9 ? 1000000000 : static_cast<int>(std::llround(x));
  }
  static int pixels(double x) {
    const int v = count(x);
    return v < 1 ? 1 : v;
  }
  data_spec spec_;
};

}  // namespace disttrain
