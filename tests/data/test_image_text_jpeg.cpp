// Real JPEGs through libturbojpeg: round trip, undecodable bytes and empty
// captions as located errors, image_text_source's parts, and producer ranks
// (local backend) delivering decoded, patchified, tokenized samples with an
// undecodable sample skipped or reported.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../comm/local_harness.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "disttrain/data/producer_ranks.hpp"
#include "disttrain_catch.hpp"
#include "jpeg_corpus.hpp"

using namespace std::chrono_literals;
using disttrain::errc;
using disttrain::image_text_source;

namespace {
disttrain::image_text_config small_images() {
  disttrain::image_text_config c;
  c.image_size = 56;
  c.patch = 14;
  c.target_size = 8;
  return c;
}
}  // namespace

TEST_CASE("JPEG round trip through libturbojpeg") {
  const auto img = disttrain::test::synthetic_image(3, 64, 48);
  const auto bytes = disttrain::encode_jpeg(img, 95);
  CHECK(bytes.size() < img.pixels.size());
  const auto back = disttrain::decode_jpeg(bytes);
  REQUIRE(back.width == 64);
  REQUIRE(back.height == 48);
  double err = 0.0;
  for (std::size_t i = 0; i < img.pixels.size(); ++i)
    err += std::abs(static_cast<double>(img.pixels[i]) - back.pixels[i]);
  CHECK(err / static_cast<double>(img.pixels.size()) < 12.0);  // lossy, but close
}

TEST_CASE("undecodable JPEG and empty caption: located errors") {
  std::vector<std::byte> junk(100, std::byte{0x42});
  DISTTRAIN_CHECK_ERROR(disttrain::decode_jpeg(junk, "sample 5.image"), errc::invalid_argument,
                        "sample 5.image");
  DISTTRAIN_CHECK_ERROR(disttrain::decode_jpeg({}, "sample 5.image"), errc::invalid_argument,
                        "sample 5.image");
  disttrain::test::jpeg_corpus corpus(4, {1}, {2});
  image_text_source src(corpus.fetch(), small_images());
  DISTTRAIN_CHECK_ERROR(src.load(1), errc::invalid_argument, "sample 1.image");
  DISTTRAIN_CHECK_ERROR(src.load(2), errc::invalid_argument, "sample 2.text");
}

TEST_CASE("image_text_source: patches, tokens and target of a real JPEG") {
  disttrain::test::jpeg_corpus corpus(2);
  image_text_source src(corpus.fetch(), small_images());
  const auto item = src.load(1);
  CHECK(item.patches.size() == 16u * 14 * 14 * 3);
  CHECK(item.target.size() == 64u);
  CHECK(item.tokens.size() >= 10u);  // BOS + >= 8 words + EOS
  const auto m = src.meta(item);
  CHECK(m.patches == 16u);
  CHECK(m.tokens == item.tokens.size());
  std::vector<std::byte> b;
  src.encode_meta(m, b);
  CHECK(src.decode_meta(b).tokens == m.tokens);
  b.clear();
  src.encode_part(item, 1, b);
  CHECK(image_text_source::decode_part<std::int32_t>(b) == item.tokens);
  DISTTRAIN_CHECK_ERROR(src.encode_part(item, 3, b), errc::invalid_argument, "encode_part");
}

TEST_CASE("producer ranks deliver decoded JPEG samples; an undecodable one is skipped") {
  disttrain::test::jpeg_corpus corpus(24, {13});
  image_text_source src(corpus.fetch(), small_images());
  disttrain::producer_ranks_config cfg;
  cfg.producers = {2, 3};
  cfg.consumers = {0, 1};
  cfg.on_bad_sample = disttrain::bad_sample_policy::skip;
  auto sampler = [](std::uint64_t k) {
    std::vector<std::uint64_t> ids;
    for (std::uint64_t i = 0; i < 8; ++i) ids.push_back(8 * k + i);
    return ids;
  };
  disttrain::local_world world(4);
  std::vector<std::string> problems(2);
  auto errors = disttrain::test::run_ranks(world, [&](disttrain::local_backend& b) {
    if (b.rank() >= 2) {
      disttrain::sample_producer<disttrain::local_backend, image_text_source>(b, src, cfg, sampler)
          .run(0, 3);
      return;
    }
    const auto me = static_cast<std::size_t>(b.rank());
    disttrain::sample_feed<disttrain::local_backend, image_text_source> feed(b, src, cfg, sampler);
    for (std::uint64_t k = 0; k < 3; ++k) {
      const auto& md = feed.metadata(k);
      if (k == 1 && (md.skipped.size() != 1 || md.skipped[0].id != 13 ||
                     md.skipped[0].reason.find("sample 13.image") == std::string::npos))
        problems[me] += "batch 1 must skip sample 13; ";
      // Rank 0 takes the encoder's patches of every sample, rank 1 the tokens.
      std::vector<disttrain::sample_request> want;
      for (const auto& r : md.samples) want.push_back({r.id, static_cast<std::uint32_t>(me)});
      for (const auto& got : feed.fetch(k, want)) {
        const auto item = src.load(got.id);
        std::vector<std::byte> expect;
        src.encode_part(item, me, expect);
        if (got.bytes != expect) problems[me] += "sample " + std::to_string(got.id) + " differs; ";
      }
    }
  });
  disttrain::test::rethrow_first(errors);
  CHECK(problems[0].empty());
  CHECK(problems[1].empty());
}
