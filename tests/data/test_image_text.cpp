// The dependency-free CPU preprocessing: tokenizer, bilinear resize, patchify.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "disttrain/data/image.hpp"
#include "disttrain/data/tokenize.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::image_u8;

TEST_CASE("hash_tokenizer: words and punctuation between BOS and EOS, deterministic") {
  disttrain::hash_tokenizer tok({.vocab = 100, .max_tokens = 64});
  const auto a = tok.encode("A cat, on a mat.");
  REQUIRE(a.size() == 2 + 7);  // a cat , on a mat .
  CHECK(a.front() == tok.bos);
  CHECK(a.back() == tok.eos);
  CHECK(a[1] == a[5]);  // "A" and "a": case-folded
  CHECK(a[1] != a[2]);
  for (auto t : a) CHECK((t >= 0 && t < 100));
  CHECK(tok.encode("A cat, on a mat.") == a);
  CHECK(tok.encode(std::string(500, 'x') + " y").size() == 4);
  disttrain::hash_tokenizer short_tok({.vocab = 100, .max_tokens = 4});
  CHECK(short_tok.encode("one two three four five").size() == 4);  // truncated, EOS kept
}

TEST_CASE("hash_tokenizer: empty text is a located error") {
  disttrain::hash_tokenizer tok;
  DISTTRAIN_CHECK_ERROR(tok.encode("", "sample 9.text"), errc::invalid_argument, "sample 9.text");
  DISTTRAIN_CHECK_ERROR(tok.encode(" \t\n ", "sample 9.text"), errc::invalid_argument,
                        "sample 9.text");
  DISTTRAIN_CHECK_ERROR(disttrain::hash_tokenizer({.vocab = 3}), errc::invalid_argument,
                        "tokenizer_config.vocab");
}

TEST_CASE("resize_bilinear and patchify") {
  image_u8 img{4, 2, 1, {0, 10, 20, 30, 40, 50, 60, 70}};
  const auto same = disttrain::resize_bilinear(img, 4, 2);
  CHECK(same.pixels == img.pixels);
  const auto half = disttrain::resize_bilinear(img, 2, 1);
  CHECK(half.pixels == std::vector<std::uint8_t>{25, 45});  // means of 2x2 blocks
  const auto p = disttrain::patchify(img, 2);
  REQUIRE(p.size() == 8);
  // tile 0 = pixels (0,0) (0,1) (1,0) (1,1) = 0 10 40 50
  CHECK(p[0] == -1.0f);
  CHECK(std::abs(p[2] - (40 / 127.5f - 1)) < 1e-6f);
  CHECK(std::abs(p[4] - (20 / 127.5f - 1)) < 1e-6f);  // tile 1 starts with pixel (0,2)
  DISTTRAIN_CHECK_ERROR(disttrain::patchify(img, 3), errc::invalid_argument, "image");
  image_u8 broken{4, 2, 3, {1, 2, 3}};
  DISTTRAIN_CHECK_ERROR(disttrain::resize_bilinear(broken, 2, 2, "sample 1.image"),
                        errc::invalid_argument, "sample 1.image");
  DISTTRAIN_CHECK_ERROR(disttrain::resize_bilinear(img, 0, 2), errc::invalid_argument, "image");
}
