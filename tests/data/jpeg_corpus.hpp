#pragma once
// An in-memory corpus of real JPEG images with captions, generated from ids
// (shared by tests/data, tests/mpi and benchmarks/mpi/bench_preprocess_mpi):
// image i is a w x h RGB picture (gradients and stripes set by the id, so
// every image differs and compresses like a photo-ish picture, not a flat
// colour), encoded by libturbojpeg at quality 90; its caption has 8..40 words.
// Ids listed in `undecodable` get bytes that are not a JPEG, ids in
// `empty_text` get a caption of spaces.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "disttrain/data/jpeg.hpp"

namespace disttrain::test {

inline image_u8 synthetic_image(std::uint64_t id, int w, int h) {
  image_u8 img{w, h, 3, std::vector<std::uint8_t>(static_cast<std::size_t>(w * h * 3))};
  const auto a = static_cast<int>(id % 7 + 1), b = static_cast<int>(id % 5 + 2);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      auto* p = &img.pixels[static_cast<std::size_t>((y * w + x) * 3)];
      p[0] = static_cast<std::uint8_t>((x * a + y) % 256);
      p[1] = static_cast<std::uint8_t>((y * b + ((x / 8 + y / 8) % 2) * 90) % 256);
      p[2] = static_cast<std::uint8_t>((x * y / (a + b) + static_cast<int>(id)) % 256);
    }
  return img;
}

inline std::string synthetic_caption(std::uint64_t id) {
  static const char* const words[] = {"a",     "photo", "of",   "the", "red",  "cat",
                                      "sits",  "on",    "mat,", "and", "blue", "sky",
                                      "above", "green", "hill", "at",  "dawn."};
  std::string s;
  const std::size_t n = 8 + (id * 13) % 33;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += words[(id * 7 + i * 3) % (sizeof(words) / sizeof(words[0]))];
  }
  return s;
}

// Samples 0..n-1, generated once; `fetch()` reads them (thread-safe: read-only).
class jpeg_corpus {
 public:
  // Image sides vary by id in [min_side, max_side].
  explicit jpeg_corpus(std::size_t samples, const std::set<std::uint64_t>& undecodable = {},
                       const std::set<std::uint64_t>& empty_text = {}, int min_side = 160,
                       int max_side = 320)
      : data_(std::make_shared<std::vector<raw_image_text>>()) {
    const int span = max_side - min_side + 1;
    for (std::uint64_t id = 0; id < samples; ++id) {
      const int w = min_side + static_cast<int>((id * 37) % static_cast<std::uint64_t>(span));
      const int h = min_side + static_cast<int>((id * 53) % static_cast<std::uint64_t>(span));
      raw_image_text r;
      r.jpeg = encode_jpeg(synthetic_image(id, w, h), 90);
      if (undecodable.contains(id)) r.jpeg.assign(r.jpeg.size() / 4, std::byte{0x42});
      r.text = empty_text.contains(id) ? std::string("   ") : synthetic_caption(id);
      data_->push_back(std::move(r));
    }
  }
  [[nodiscard]] image_text_source::fetch_fn fetch() const {
    return [d = data_](std::uint64_t id) { return d->at(id % d->size()); };
  }
  [[nodiscard]] std::size_t size() const { return data_->size(); }

 private:
  std::shared_ptr<std::vector<raw_image_text>> data_;
};

}  // namespace disttrain::test
