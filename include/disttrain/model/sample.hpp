#pragma once
/// @file sample.hpp
/// @brief One training sample's metadata: text length, input images and images
/// to generate, with their resolutions. This is all the costs need to know.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"

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

}  // namespace disttrain
