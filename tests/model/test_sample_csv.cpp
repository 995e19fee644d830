// A data set's own statistics: per-sample CSV (model/sample_csv.hpp, and
// "records_csv" in a data spec) and the data presets built from public
// figures (llava-sft, obelics) against those figures.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "disttrain/model.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/model/sample_csv.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;

namespace {
std::vector<disttrain::sample> parse(const std::string& text, int patch = 14) {
  std::istringstream in(text);
  return disttrain::read_sample_csv(in, "t.csv", {.patch_size = patch});
}
}  // namespace

TEST_CASE("read_sample_csv: columns in any order, tokens to pixels, defaults") {
  const auto s = parse(
      "# my data set\n"
      "images, text_tokens, image_tokens, generated_images\n"
      "1, 120, 900, 0\n"
      "\n"
      "3,40,500,2\n"
      "0,7,1,0\n");
  REQUIRE(s.size() == 3);
  CHECK(s[0].id == 0);
  CHECK(s[0].text_tokens == 120);
  REQUIRE(s[0].images.size() == 1);
  CHECK(s[0].images[0].height == 30 * 14);  // ceil(sqrt(900)) = 30 patches a side
  CHECK(s[0].images[0].width == 30 * 14);
  CHECK(s[1].id == 1);
  REQUIRE(s[1].images.size() == 3);
  CHECK(s[1].images[2].width == 23 * 14);  // ceil(sqrt(500)) = 23
  REQUIRE(s[1].generated.size() == 2);
  CHECK(s[1].generated[0].width == 512);  // generated_side's default
  CHECK(s[2].images.empty());
  // The encoder sees at least the tokens given (patch 14, no resize).
  disttrain::vit_encoder_arch v;
  v.patch_size = 14;
  v.max_image_size = 4096;
  v.class_token = false;
  CHECK(disttrain::encoder_tokens(v, s[0].images[0]) == 900);
  CHECK(disttrain::encoder_tokens(v, s[1].images[0]) >= 500);

  const auto hw = parse(
      "text_tokens,images,image_height,image_width,generated_images,"
      "generated_side\n5,2,300,400,1,768\n");
  REQUIRE(hw.size() == 1);
  CHECK(hw[0].images[1].height == 300);
  CHECK(hw[0].images[1].width == 400);
  CHECK(hw[0].generated[0].height == 768);
  CHECK(parse("text_tokens,images,image_tokens\n1,1,100\n", 16)[0].images[0].width == 160);
}

TEST_CASE("read_sample_csv names the line and column of a mistake") {
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,imgs\n1,2\n"), errc::parse_error, "t.csv:1");
  DISTTRAIN_CHECK_ERROR(parse("images,image_side\n1,2\n"), errc::parse_error, "t.csv:1");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,images\n1,2\n"), errc::parse_error, "t.csv:1");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,image_side,image_tokens\n1,2,3\n"), errc::parse_error,
                        "t.csv:1");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,image_height\n1,2\n"), errc::parse_error, "t.csv:1");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,text_tokens\n1,2\n"), errc::parse_error, "t.csv:1");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,images,image_side\n1,2,3\n1,-2,3\n"), errc::parse_error,
                        "t.csv:3.images");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,images,image_side\n1,1,0\n"), errc::parse_error,
                        "t.csv:2.image_side");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens,images,image_side\n1,1\n"), errc::parse_error,
                        "t.csv:2");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens\n1.5\n"), errc::parse_error, "t.csv:2.text_tokens");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens\n"), errc::invalid_argument, "t.csv");
  DISTTRAIN_CHECK_ERROR(parse("# nothing\n"), errc::parse_error, "t.csv");
  DISTTRAIN_CHECK_ERROR(parse("text_tokens\n1\n", 0), errc::invalid_argument,
                        "sample_csv_options.patch_size");
  DISTTRAIN_CHECK_ERROR(disttrain::read_sample_csv_file("/nonexistent/x.csv"),
                        errc::invalid_argument, "/nonexistent/x.csv");
}

TEST_CASE("a data spec reads records_csv, and one records source only") {
  const std::string path = "disttrain_test_sample_csv.csv";
  {
    std::ofstream f(path);
    f << "text_tokens,images,image_tokens\n100,1,400\n200,2,900\n";
  }
  const auto d = disttrain::json::parse(R"({"records_csv": ")" + path + R"(", "patch_size": 16})")
                     .get<disttrain::data_spec>();
  REQUIRE(d.records.size() == 2);
  CHECK(d.records[1].images[0].width == 30 * 16);
  const disttrain::data_sampler s(d);
  CHECK(s.draw(3).text_tokens == 200);  // records cycle by id
  DISTTRAIN_CHECK_ERROR(
      disttrain::json::parse(R"({"records_csv": "a.csv", "records_file": "b.json"})")
          .get<disttrain::data_spec>(),
      errc::invalid_argument, "data");
  DISTTRAIN_CHECK_ERROR(disttrain::json::parse(R"({"patch_size": 14})").get<disttrain::data_spec>(),
                        errc::invalid_argument, "data.patch_size");
  std::remove(path.c_str());
}

TEST_CASE("data presets from public figures match them") {
  // llava-sft: ~99% of samples have 500-1500 image tokens (on hires-70b's
  // native-resolution patch-14 encoder).
  const auto model = disttrain::presets::model_preset("hires-70b");
  const auto& enc = std::get<disttrain::vit_encoder_arch>(model.modules[0].arch);
  const disttrain::data_sampler llava(disttrain::presets::data_preset("llava-sft"));
  const int n = 20000;
  int inside = 0;
  for (int i = 0; i < n; ++i) {
    const auto s = llava.draw(static_cast<std::uint64_t>(i));
    REQUIRE(s.images.size() == 1);
    const int t = disttrain::encoder_tokens(enc, s.images[0]) - (enc.class_token ? 1 : 0);
    inside += t >= 500 && t <= 1500 ? 1 : 0;
  }
  CHECK(static_cast<double>(inside) / n >= 0.98);
  // obelics: about 2.5 images and 815 text tokens per document.
  const disttrain::data_sampler ob(disttrain::presets::data_preset("obelics"));
  double images = 0, text = 0;
  for (int i = 0; i < n; ++i) {
    const auto s = ob.draw(static_cast<std::uint64_t>(i));
    images += static_cast<double>(s.images.size());
    text += s.text_tokens;
  }
  CHECK(images / n == Approx(2.5).epsilon(0.03));
  CHECK(text / n == Approx(815).epsilon(0.05));
}
