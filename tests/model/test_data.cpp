// Deterministic sampling, distribution means, and workload summaries.
#include <cmath>
#include <vector>

#include "disttrain/model.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

TEST_CASE("splitmix64 matches the reference sequence") {
  // Reference outputs of Vigna's splitmix64.c for seed 1234567.
  splitmix64 r(1234567);
  CHECK(r.next() == 6457827717110365317ULL);
  CHECK(r.next() == 3203168211198807973ULL);
  CHECK(r.next() == 9817491932198370423ULL);
  splitmix64 u(9);
  for (int i = 0; i < 1000; ++i) {
    const double x = u.uniform01();
    CHECK((x >= 0.0 && x < 1.0));
    CHECK(u.below(7) < 7);
  }
}

TEST_CASE("below(n) is uniform") {
  splitmix64 r(3);
  std::vector<int> counts(6, 0);
  const int n = 60000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(r.below(6))];
  for (int c : counts) CHECK(std::abs(c - n / 6) < 400);  // ~4.4 sigma
}

TEST_CASE("distribution draws have the analytic mean") {
  // A vector filled one by one, not a braced array of variants: g++ 12 -O2
  // reports a false -Wmaybe-uninitialized in the array's unwinding cleanup.
  std::vector<distribution> ds;
  ds.emplace_back(constant_dist{7});
  ds.emplace_back(uniform_int_dist{2, 9});
  ds.emplace_back(histogram_dist{{1, 2, 10}, {0.5, 0.25, 0.25}});
  ds.emplace_back(lognormal_dist{.median = 100, .sigma = 0.8, .min = 20, .max = 400});
  ds.emplace_back(lognormal_dist{.median = 50, .sigma = 0.3});
  for (const auto& d : ds) {
    d.validate("d");
    splitmix64 r(11);
    double sum = 0;
    const int n = 100000;
    for (int i = 0; i < n; ++i) sum += d.draw(r);
    CHECK(sum / n == Approx(d.mean()).epsilon(0.01));
  }
  CHECK(distribution(uniform_int_dist{2, 9}).mean() == 5.5);
  DISTTRAIN_CHECK_ERROR(distribution(lognormal_dist{.median = 1, .sigma = -1}).validate("x"),
                        errc::invalid_argument, "x.sigma");
  DISTTRAIN_CHECK_ERROR(distribution(uniform_int_dist{3, 2}).validate("x"), errc::invalid_argument,
                        "x.max");
  DISTTRAIN_CHECK_ERROR(distribution(histogram_dist{{}, {}}).validate("x"), errc::invalid_argument,
                        "x.values");
}

TEST_CASE("the sampler is deterministic and random-access") {
  data_sampler s(presets::interleaved_image_text());
  const auto batch = s.draw_batch(100, 50);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(batch[i].id == 100 + i);
    CHECK(s.draw(100 + i) == batch[i]);  // order-independent
  }
  data_sampler again(presets::interleaved_image_text());
  CHECK(again.draw_batch(100, 50) == batch);
  auto other = presets::interleaved_image_text();
  other.seed += 1;
  CHECK(data_sampler(other).draw_batch(100, 50) != batch);
  // Some heterogeneity is really there.
  int max_images = 0, min_images = 100;
  for (const auto& x : s.draw_batch(0, 500)) {
    max_images = std::max(max_images, static_cast<int>(x.images.size()));
    min_images = std::min(min_images, static_cast<int>(x.images.size()));
    for (const auto& im : x.images) CHECK(im.height <= im.width);
  }
  CHECK(max_images == 8);
  CHECK(min_images == 0);
}

TEST_CASE("records mode cycles through the records") {
  data_spec d;
  d.records = {sample{.id = 0, .text_tokens = 5}, sample{.id = 1, .text_tokens = 9}};
  data_sampler s(d);
  CHECK(s.draw(0).text_tokens == 5);
  CHECK(s.draw(3).text_tokens == 9);
  CHECK(s.draw(3).id == 3);
}

TEST_CASE("workload of a hand-built sample") {
  const auto m = presets::mllm_7b();  // ViT-H capped at 448, ratio 4, 64 condition tokens, SD-2.1
  const sample s{
      .id = 1, .text_tokens = 100, .images = {{448, 448}, {448, 896}}, .generated = {{512, 512}}};
  const auto w = workload_of(m, s);
  // Encoder: 448^2 -> 32*32 + 1 = 1025; 448x896 -> scaled to 224x448 -> 16*32 + 1 = 513.
  CHECK(w[0].sequences == 2);
  CHECK(w[0].tokens == 1025 + 513);
  CHECK(w[0].tokens_sq == 1025.0 * 1025 + 513.0 * 513);
  // Backbone: 100 + ceil(1025/4) + ceil(513/4) + 64 = 100 + 257 + 129 + 64.
  CHECK(w[1].sequences == 1);
  CHECK(w[1].tokens == 550);
  CHECK(w[1].tokens_sq == 550.0 * 550);
  // Generator: 512 / 8 = 64 -> 4096 latent tokens.
  CHECK(w[2].sequences == 1);
  CHECK(w[2].tokens == 4096);
  // Fixed-size ViT ignores resolution.
  CHECK(encoder_tokens(vit_encoder_arch{}, {1000, 30}) == 257);
}

TEST_CASE("workloads add up and the expectation is the sample mean") {
  const auto m = presets::mllm_13b();
  data_sampler s(presets::interleaved_image_text());
  const auto batch = s.draw_batch(0, 64);
  model_workload sum;
  for (const auto& x : batch) sum += workload_of(m, x);
  const auto all = workload_of(m, std::span<const sample>(batch));
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(all[i].tokens == Approx(sum[i].tokens));
    CHECK(all[i].tokens_sq == Approx(sum[i].tokens_sq));
  }
  const auto e = expected_workload(m, presets::interleaved_image_text(), 64);
  for (std::size_t i = 0; i < 3; ++i) CHECK(e[i].tokens == Approx(all[i].tokens / 64));
  // Mean images per sample of the interleaved preset is ~2.8.
  const auto big = expected_workload(m, presets::interleaved_image_text(), 20000);
  CHECK(big[0].sequences ==
        Approx(distribution(presets::interleaved_image_text().images_per_sample).mean())
            .epsilon(0.03));
}

TEST_CASE("workloads round-trip through JSON") {
  const auto e = expected_workload(presets::mllm_7b(), presets::laion400m_like(), 128);
  const json j = e;
  REQUIRE(j.size() == 3);
  CHECK(j.get<model_workload>() == e);
  DISTTRAIN_CHECK_ERROR(
      parse_json(R"([{"sequences": 1, "tokens": -2, "tokens_sq": 4}])").get<model_workload>(),
      errc::invalid_argument, "workload.tokens");
  // A misspelt field is an error, not a silently missing one.
  DISTTRAIN_CHECK_ERROR(
      parse_json(R"([{"sequences": 1, "tokens": 2, "tokens_sq": 4, "token_sq": 4}])")
          .get<model_workload>(),
      errc::parse_error, "workload.token_sq");
}
