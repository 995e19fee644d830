// Calibration recovers planted efficiency parameters; profiles as JSON.
#include <cmath>
#include <vector>

#include "disttrain/core/rng.hpp"
#include "disttrain/cost.hpp"
#include "disttrain/cost/calibration.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/cost/profiler.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
constexpr double peak = 989e12;
std::vector<profile_sample> synthetic(const efficiency_params& e, double noise, std::uint64_t seed,
                                      bool with_tp) {
  splitmix64 r(seed);
  std::vector<profile_sample> out;
  const int tps[] = {1, 2, 4, 8};
  for (int i = 0; i < 200; ++i) {
    // Op sizes log-uniform in [1e8, 1e13] FLOPs per GPU.
    const double f = std::pow(10.0, 8.0 + 5.0 * r.uniform01());
    const int tp = with_tp ? tps[r.below(4)] : 1;
    const double t = compute_time(f, tp, peak, e) * (1.0 + noise * (2.0 * r.uniform01() - 1.0));
    out.push_back(profile_sample{f, tp, t, "synthetic"});
  }
  return out;
}
}  // namespace

TEST_CASE("noise-free samples are fitted exactly") {
  const efficiency_params planted{0.72, 4e10, 0.05};
  const auto fit = fit_efficiency(synthetic(planted, 0.0, 1, true), peak);
  CHECK(fit.params.e_max == Approx(planted.e_max).epsilon(1e-9));
  CHECK(fit.params.flops_half == Approx(planted.flops_half).epsilon(1e-7));
  CHECK(fit.params.tp_penalty == Approx(planted.tp_penalty).epsilon(1e-7));
  CHECK(fit.r_squared == Approx(1.0).epsilon(1e-12));
  CHECK(fit.max_relative_error < 1e-9);
  CHECK(fit.tp_penalty_fitted);
}

TEST_CASE("noisy samples recover the planted parameters") {
  const efficiency_params planted{0.65, 2e10, 0.03};
  for (std::uint64_t seed : {2ULL, 3ULL, 4ULL}) {
    const auto fit =
        fit_efficiency(synthetic(planted, 0.03, seed, true), peak);  // +-3% uniform noise
    INFO("seed " << seed);
    CHECK(std::abs(fit.params.e_max - planted.e_max) / planted.e_max < 0.01);
    CHECK(std::abs(fit.params.flops_half - planted.flops_half) / planted.flops_half < 0.10);
    CHECK(std::abs(fit.params.tp_penalty - planted.tp_penalty) < 0.005);
    CHECK(fit.r_squared > 0.99);
    CHECK(fit.max_relative_error < 0.035);
    CHECK(fit.rms_relative_error < 0.025);
  }
}

TEST_CASE("without TP > 1 samples the penalty is fixed to zero") {
  const efficiency_params planted{0.8, 3e10, 0.0};
  const auto fit = fit_efficiency(synthetic(planted, 0.01, 5, false), peak);
  CHECK_FALSE(fit.tp_penalty_fitted);
  CHECK(fit.params.tp_penalty == 0);
  CHECK(fit.params.e_max == Approx(0.8).epsilon(0.01));
}

TEST_CASE("bad samples are rejected naming the sample") {
  auto s = synthetic(efficiency_params{}, 0.0, 6, true);
  s[2].seconds = -1;
  DISTTRAIN_CHECK_ERROR(fit_efficiency(s, peak), errc::invalid_argument, "samples[2].seconds");
  s = synthetic(efficiency_params{}, 0.0, 6, true);
  s[4].tp = 0;
  DISTTRAIN_CHECK_ERROR(fit_efficiency(s, peak), errc::invalid_argument, "samples[4].tp");
  std::vector<profile_sample> same(5, profile_sample{1e9, 1, 1e-3, ""});
  DISTTRAIN_CHECK_ERROR(fit_efficiency(same, peak), errc::invalid_argument, "samples");
  // Faster than peak: e_max would exceed 1.
  std::vector<profile_sample> fast{{1e12, 1, 1e-4, ""}, {2e12, 1, 2e-4, ""}, {4e12, 1, 4e-4, ""}};
  DISTTRAIN_CHECK_ERROR(fit_efficiency(fast, peak), errc::invalid_argument, "samples");
  DISTTRAIN_CHECK_ERROR(fit_efficiency(s, 0.0), errc::invalid_argument, "peak_flops");
}

TEST_CASE("profiles round-trip through JSON; malformed profiles name the field") {
  profile p{"H800", peak, synthetic(efficiency_params{}, 0.0, 7, true)};
  const json j = p;
  const auto back = j.get<profile>();
  REQUIRE(back.samples.size() == p.samples.size());
  CHECK(back.samples[3].flops == p.samples[3].flops);
  CHECK(back.samples[3].kind == "synthetic");
  CHECK(fit_efficiency(back).params.e_max == Approx(efficiency_params{}.e_max).epsilon(1e-9));
  auto bad = j;
  bad["samples"][1].erase("seconds");
  DISTTRAIN_CHECK_ERROR(bad.get<profile>(), errc::parse_error, "profile.samples[1].seconds");
  DISTTRAIN_CHECK_ERROR(parse_json("{\"gpu\": ", "prof.json"), errc::parse_error, "prof.json");
  const json fr = fit_efficiency(p);
  CHECK(fr.contains("r_squared"));
}

TEST_CASE("the profiler records scoped and explicit samples") {
  profiler prof;
  {
    auto t = prof.time(1e9, 2, "gemm");
    volatile double x = 0;
    for (int i = 0; i < 1000; ++i) x = x + 1.0;
  }
  {
    auto t = prof.time(1e9, 1, "warmup");
    t.cancel();
  }
  prof.record(2e9, 4, 1e-3, "event");
  REQUIRE(prof.samples().size() == 2);
  CHECK(prof.samples()[0].tp == 2);
  CHECK(prof.samples()[0].seconds > 0);
  CHECK(prof.samples()[1].seconds == 1e-3);
  const auto pr = prof.to_profile("test", peak);
  CHECK(pr.samples.size() == 2);
  DISTTRAIN_CHECK_ERROR(prof.record(0, 1, 1), errc::invalid_argument, "profiler.flops");
  DISTTRAIN_CHECK_ERROR((void)prof.time(1, 0), errc::invalid_argument, "profiler.tp");
}
