#pragma once
/// @file sample.hpp
/// @brief One training sample's metadata: text length, input images and images
/// to generate, with their resolutions. This is all the costs need to know.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief An image resolution in pixels.
/// @snippet model.cpp image_size
struct image_size {
  int height = 0;
  int width = 0;
  friend bool operator==(const image_size&, const image_size&) = default;
};

/// @brief Metadata of one multimodal sample.
///
/// @snippet model.cpp sample
struct sample {
  std::uint64_t id = 0;                 ///< global sample id (stable across ranks)
  int text_tokens = 0;                  ///< text tokens in the backbone sequence
  std::vector<image_size> images{};     ///< input images, seen by the encoder(s)
  std::vector<image_size> generated{};  ///< images the generator learns to produce
  friend bool operator==(const sample&, const sample&) = default;

  /// @brief Throws `invalid_argument` at `path.<field>` for negative counts or sizes.
  void validate(std::string_view path) const {
    require_non_negative(text_tokens, detail::join_path(path, "text_tokens"));
    for (std::size_t i = 0; i < images.size(); ++i) {
      require_positive(images[i].height,
                       cat(detail::join_path(path, "images"), "[", i, "].height"));
      require_positive(images[i].width, cat(detail::join_path(path, "images"), "[", i, "].width"));
    }
    for (std::size_t i = 0; i < generated.size(); ++i) {
      require_positive(generated[i].height,
                       cat(detail::join_path(path, "generated"), "[", i, "].height"));
      require_positive(generated[i].width,
                       cat(detail::join_path(path, "generated"), "[", i, "].width"));
    }
  }
};

}  // namespace disttrain
