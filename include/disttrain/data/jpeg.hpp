#pragma once
/// @file jpeg.hpp
/// @brief JPEG decode and encode with libjpeg-turbo's TurboJPEG API
/// (Debian: libturbojpeg0-dev), and `image_text_source`: a ready
/// `part_source` that decodes a JPEG, resizes and patchifies it, tokenizes
/// the caption and derives a generator target.
///
/// Optional: link the CMake target `disttrain::jpeg` (found when
/// libturbojpeg's pkg-config file is installed), which defines
/// `DISTTRAIN_HAS_TURBOJPEG`. No other disttrain header includes this one, so
/// nothing else (in particular nothing nvcc compiles) depends on libjpeg.
///
/// @snippet data_jpeg.cpp jpeg

#if !defined(DISTTRAIN_HAS_TURBOJPEG)
#error "disttrain/data/jpeg.hpp needs libturbojpeg: link the CMake target disttrain::jpeg"
#endif

#include <turbojpeg.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/data/image.hpp"
#include "disttrain/data/tokenize.hpp"

namespace disttrain {
namespace detail {
struct tj_deleter {
  void operator()(void* h) const noexcept { tjDestroy(h); }
};
using tj_handle = std::unique_ptr<void, tj_deleter>;
inline tj_handle tj_make(bool decompress, std::string_view where) {
  tj_handle h(decompress ? tjInitDecompress() : tjInitCompress());
  if (!h) fail(errc::internal, where, "libturbojpeg: cannot create a handle");
  return h;
}
}  // namespace detail

/// @brief Decodes a JPEG into an RGB `image_u8`. Throws
/// `errc::invalid_argument` at `where` (e.g. "sample 17.image") for bytes
/// that are not a decodable JPEG, with libturbojpeg's reason.
[[nodiscard]] inline image_u8 decode_jpeg(std::span<const std::byte> jpeg,
                                          std::string_view where = "image") {
  require(!jpeg.empty(), where, "undecodable JPEG: 0 bytes");
  auto h = detail::tj_make(true, where);
  int w = 0, hgt = 0, subsamp = 0, colorspace = 0;
  const auto* src = reinterpret_cast<const unsigned char*>(jpeg.data());
  const auto n = static_cast<unsigned long>(jpeg.size());
  if (tjDecompressHeader3(h.get(), src, n, &w, &hgt, &subsamp, &colorspace) != 0)
    fail(errc::invalid_argument, where, "undecodable JPEG (", jpeg.size(),
         " bytes): ", tjGetErrorStr2(h.get()));
  require(w > 0 && hgt > 0 && w <= 1 << 14 && hgt <= 1 << 14, where, "JPEG of ", w, "x", hgt,
          " pixels: each side must be in [1, 16384]");
  image_u8 img{w, hgt, 3, {}};
  img.pixels.resize(static_cast<std::size_t>(w) * static_cast<std::size_t>(hgt) * 3);
  if (tjDecompress2(h.get(), src, n, img.pixels.data(), w, 0, hgt, TJPF_RGB, 0) != 0 &&
      tjGetErrorCode(h.get()) == TJERR_FATAL)
    fail(errc::invalid_argument, where, "undecodable JPEG (", jpeg.size(),
         " bytes): ", tjGetErrorStr2(h.get()));
  return img;
}

/// @brief Encodes an RGB (3-channel) or grey (1-channel) image as a baseline
/// JPEG with 4:2:0 chroma subsampling; `quality` in [1, 100].
[[nodiscard]] inline std::vector<std::byte> encode_jpeg(const image_u8& img, int quality = 90,
                                                        std::string_view where = "image") {
  img.validate(where);
  require(img.channels == 1 || img.channels == 3, where, "JPEG encode needs 1 or 3 ",
          "channels, got ", img.channels);
  require_in_range(quality, 1, 100, "encode_jpeg.quality");
  auto h = detail::tj_make(false, where);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(h.get(), img.pixels.data(), img.width, 0, img.height,
                             img.channels == 3 ? TJPF_RGB : TJPF_GRAY, &out, &size,
                             img.channels == 3 ? TJSAMP_420 : TJSAMP_GRAY, quality, 0);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(out, tjFree);
  if (rc != 0) fail(errc::internal, where, "JPEG encode failed: ", tjGetErrorStr2(h.get()));
  const auto* b = reinterpret_cast<const std::byte*>(out);
  return {b, b + size};
}

/// @brief One raw sample as a loader reads it from storage.
struct raw_image_text {
  std::vector<std::byte> jpeg;  ///< the encoded image
  std::string text;             ///< the caption / prompt
};

/// @brief Settings of `image_text_source`.
struct image_text_config {
  int image_size = 224;  ///< the encoder's input: image_size x image_size RGB
  int patch = 14;        ///< patch side; must divide image_size
  int target_size = 16;  ///< generator target: target_size^2 grey values in [-1, 1]
  tokenizer_config tokenizer{};
};

/// @brief A prepared image-text sample.
struct image_text_item {
  std::uint64_t id = 0;
  std::vector<float> patches;        ///< part 0 (encoder): (image_size/patch)^2 x patch^2*3
  std::vector<std::int32_t> tokens;  ///< part 1 (backbone): BOS, text, EOS
  std::vector<float> target;         ///< part 2 (generator): target_size^2 values
};

/// @brief What the reorderer needs of an image-text sample.
struct image_text_meta {
  std::uint32_t patches = 0;  ///< encoder tokens (patch count)
  std::uint32_t tokens = 0;   ///< backbone text tokens
};

/// @brief A `part_source`: `fetch(id)` reads the raw sample (from disk, a
/// store, memory; must be thread-safe), `load` decodes the JPEG, resizes it
/// to `image_size`, patchifies it, tokenizes the text and derives the
/// generator target (the image resized to `target_size`, grey). An
/// undecodable image or a text without tokens throws `errc::invalid_argument`
/// at `"sample <id>.image"` / `"sample <id>.text"`.
class image_text_source {
 public:
  using item_type = image_text_item;
  using meta_type = image_text_meta;
  using fetch_fn = std::function<raw_image_text(std::uint64_t)>;

  image_text_source(fetch_fn fetch, image_text_config cfg = {})
      : fetch_(std::move(fetch)), cfg_(cfg), tok_(cfg.tokenizer) {
    require(static_cast<bool>(fetch_), "image_text_source.fetch", "empty function");
    require(cfg_.image_size > 0 && cfg_.patch > 0 && cfg_.image_size % cfg_.patch == 0,
            "image_text_config.patch", "patch ", cfg_.patch, " must divide image_size ",
            cfg_.image_size);
    require_positive(cfg_.target_size, "image_text_config.target_size");
  }

  [[nodiscard]] item_type load(std::uint64_t id) const {
    const raw_image_text raw = fetch_(id);
    const auto where = cat("sample ", id);
    item_type it;
    it.id = id;
    it.tokens = tok_.encode(raw.text, where + ".text");
    const image_u8 img = decode_jpeg(raw.jpeg, where + ".image");
    it.patches = patchify(resize_bilinear(img, cfg_.image_size, cfg_.image_size), cfg_.patch);
    const image_u8 small = resize_bilinear(img, cfg_.target_size, cfg_.target_size);
    it.target.reserve(static_cast<std::size_t>(cfg_.target_size * cfg_.target_size));
    for (std::size_t i = 0; i < small.pixels.size(); i += 3) {
      const float grey =
          0.299f * small.pixels[i] + 0.587f * small.pixels[i + 1] + 0.114f * small.pixels[i + 2];
      it.target.push_back(grey / 127.5f - 1.0f);
    }
    return it;
  }
  [[nodiscard]] meta_type meta(const item_type& x) const {
    const auto per_patch = static_cast<std::size_t>(cfg_.patch * cfg_.patch * 3);
    return {static_cast<std::uint32_t>(x.patches.size() / per_patch),
            static_cast<std::uint32_t>(x.tokens.size())};
  }
  [[nodiscard]] std::size_t parts() const noexcept { return 3; }
  void encode_part(const item_type& x, std::size_t part, std::vector<std::byte>& out) const {
    switch (part) {
      case 0: append(x.patches, out); return;
      case 1: append(x.tokens, out); return;
      case 2: append(x.target, out); return;
      default:
        fail(errc::invalid_argument, "image_text_source.encode_part", "part ", part,
             " out of range (3 parts)");
    }
  }
  void encode_meta(const meta_type& m, std::vector<std::byte>& out) const {
    append(std::span(&m, 1), out);
  }
  [[nodiscard]] meta_type decode_meta(std::span<const std::byte> b) const {
    require(b.size() == sizeof(meta_type), "image_text_source.decode_meta", "got ", b.size(),
            " bytes, want ", sizeof(meta_type));
    meta_type m;
    std::memcpy(&m, b.data(), sizeof m);
    return m;
  }
  [[nodiscard]] const image_text_config& config() const noexcept { return cfg_; }

  /// @brief Decodes part `part` of a received sample back into values
  /// (float for parts 0 and 2, int32 for part 1).
  template <class T>
  [[nodiscard]] static std::vector<T> decode_part(std::span<const std::byte> bytes) {
    require(bytes.size() % sizeof(T) == 0, "image_text_source.decode_part", bytes.size(),
            " bytes is not a whole number of ", sizeof(T), "-byte values");
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }

 private:
  template <class R>
  static void append(const R& values, std::vector<std::byte>& out) {
    const auto b = std::as_bytes(std::span(values));
    out.insert(out.end(), b.begin(), b.end());
  }
  fetch_fn fetch_;
  image_text_config cfg_;
  hash_tokenizer tok_;
};

}  // namespace disttrain
