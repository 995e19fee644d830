#pragma once
/// @file image.hpp
/// @brief 8-bit images and the CPU preprocessing a vision encoder's input
/// needs: bilinear resize and patchify into normalised float patches.
/// Decoding is in `data/jpeg.hpp` (optional, libturbojpeg); this header has
/// no dependency.
///
/// @snippet data_jpeg.cpp image

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"

namespace disttrain {

/// @brief Interleaved 8-bit image, row-major: `pixels[(y * width + x) * channels + c]`.
struct image_u8 {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;

  /// @brief Throws `errc::invalid_argument` at `where` if sizes and pixels disagree.
  void validate(std::string_view where) const {
    require(width > 0 && height > 0 && channels > 0, where, "image of ", width, "x", height, "x",
            channels, ": every dimension must be > 0");
    const auto n = checked_mul(
        checked_mul(static_cast<std::size_t>(width), static_cast<std::size_t>(height), where),
        static_cast<std::size_t>(channels), where);
    require(pixels.size() == n, where, "image of ", width, "x", height, "x", channels, " needs ", n,
            " bytes, has ", pixels.size());
  }
};

/// @brief Bilinear resize to `width` x `height` (pixel centres aligned).
[[nodiscard]] inline image_u8 resize_bilinear(const image_u8& in, int width, int height,
                                              std::string_view where = "image") {
  in.validate(where);
  require(width > 0 && height > 0, where, "resize target ", width, "x", height, " must be > 0");
  image_u8 out{width, height, in.channels, {}};
  const auto ch = static_cast<std::size_t>(in.channels);
  out.pixels.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * ch);
  const double sx = static_cast<double>(in.width) / width;
  const double sy = static_cast<double>(in.height) / height;
  for (int y = 0; y < height; ++y) {
    const double fy = std::clamp((y + 0.5) * sy - 0.5, 0.0, static_cast<double>(in.height - 1));
    const int y0 = static_cast<int>(fy);
    const int y1 = std::min(y0 + 1, in.height - 1);
    const double wy = fy - y0;
    for (int x = 0; x < width; ++x) {
      const double fx = std::clamp((x + 0.5) * sx - 0.5, 0.0, static_cast<double>(in.width - 1));
      const int x0 = static_cast<int>(fx);
      const int x1 = std::min(x0 + 1, in.width - 1);
      const double wx = fx - x0;
      const auto at = [&](int yy, int xx, std::size_t c) {
        return static_cast<double>(
            in.pixels[(static_cast<std::size_t>(yy) * static_cast<std::size_t>(in.width) +
                       static_cast<std::size_t>(xx)) *
                          ch +
                      c]);
      };
      for (std::size_t c = 0; c < ch; ++c) {
        const double v = (1 - wy) * ((1 - wx) * at(y0, x0, c) + wx * at(y0, x1, c)) +
                         wy * ((1 - wx) * at(y1, x0, c) + wx * at(y1, x1, c));
        out.pixels[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                    static_cast<std::size_t>(x)) *
                       ch +
                   c] = static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0, 255.0)));
      }
    }
  }
  return out;
}

/// @brief Splits `in` into `patch` x `patch` tiles, row-major over tiles;
/// tile t occupies floats `[t * patch*patch*channels, ...)`, row-major inside
/// the tile, channels interleaved, each value `pixel / 127.5 - 1` (in [-1, 1]).
/// Throws `errc::invalid_argument` unless `patch` divides both sides.
[[nodiscard]] inline std::vector<float> patchify(const image_u8& in, int patch,
                                                 std::string_view where = "image") {
  in.validate(where);
  require(patch > 0 && in.width % patch == 0 && in.height % patch == 0, where, "patch ", patch,
          " must divide the ", in.width, "x", in.height, " image");
  const auto ch = static_cast<std::size_t>(in.channels);
  const auto p = static_cast<std::size_t>(patch);
  const auto w = static_cast<std::size_t>(in.width);
  std::vector<float> out;
  out.reserve(in.pixels.size());
  for (std::size_t ty = 0; ty < static_cast<std::size_t>(in.height) / p; ++ty)
    for (std::size_t tx = 0; tx < w / p; ++tx)
      for (std::size_t y = ty * p; y < (ty + 1) * p; ++y)
        for (std::size_t i = (y * w + tx * p) * ch; i < (y * w + (tx + 1) * p) * ch; ++i)
          out.push_back(static_cast<float>(in.pixels[i]) / 127.5f - 1.0f);
  return out;
}

}  // namespace disttrain
