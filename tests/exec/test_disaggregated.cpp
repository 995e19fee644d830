// The tiny multimodal model trained disaggregated on a local world (threads
// as ranks): encoder DP != backbone DP != generator DP, backbone pipelined.
#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "../../examples/tiny_mllm/planned.hpp"
#include "../../examples/tiny_mllm/serial.hpp"
#include "dist_harness.hpp"
#include "disttrain_catch.hpp"

using namespace std::chrono_literals;
using tiny_mllm::config;
using tiny_mllm::dist_plan;

namespace {

// Every parameter's gradient after one distributed iteration equals the
// serial gradient on the same batch. Tolerance: both runs compute the same
// double-precision terms; only the order of the sums differs (per
// microbatch and replica, then the DP reduction), which changes a result by
// a few ulps of the largest partial sum: |d| <= 1e-12 * (1 + max |g|) leaves
// a margin of ~1000x over that and fails for any real error (a lost,
// duplicated or mis-routed sample changes gradients by O(1/N) ~ 1e-1 relative).
void check_equivalence(const config& c, const dist_plan& plan) {
  const auto rec = tiny_mllm::test::run_world(c, plan, {}, 1);
  tiny_mllm::serial_trainer serial(c);
  const double serial_loss = serial.compute_gradients(
      tiny_mllm::make_batch(c, 0, static_cast<std::size_t>(plan.batch_size)));
  const auto ref = serial.params();
  std::map<std::string, int> holders;
  for (const auto& r : rec) {
    CHECK(std::abs(r.steps.at(0).loss - serial_loss) <= 1e-12 * serial_loss);
    for (const auto& [name, g] : r.grads) {
      INFO("parameter " << name << " on module " << r.coord.module.value << " stage "
                        << r.coord.stage.value << " replica " << r.coord.replica.value);
      REQUIRE(ref.contains(name));
      const tiny_mllm::matrix& want = ref.at(name)->grad;
      REQUIRE(g.rows() == want.rows());
      REQUIRE(g.cols() == want.cols());
      const double scale = 1.0 + want.cwiseAbs().maxCoeff();
      const double diff = (g - want).cwiseAbs().maxCoeff();
      CHECK(diff <= 1e-12 * scale);
      ++holders[name];
    }
  }
  // Every parameter is held (on each replica of its module) and replicas agree bit for bit.
  for (const auto& [name, p] : ref) {
    INFO(name);
    CHECK(holders[name] >= 1);
  }
  for (std::size_t a = 0; a < rec.size(); ++a)
    for (std::size_t b = a + 1; b < rec.size(); ++b)
      if (rec[a].coord.module == rec[b].coord.module && rec[a].coord.stage == rec[b].coord.stage)
        for (const auto& [name, g] : rec[a].grads) CHECK(g == rec[b].grads.at(name));
}

}  // namespace

TEST_CASE("equivalence: encoder DP 2, backbone PP 2 x DP 2, generator DP 1") {
  config c;
  check_equivalence(c, dist_plan{.enc_dp = 2, .bb_pp = 2, .bb_dp = 2, .gen_dp = 1});
}

TEST_CASE("equivalence: uneven DP ratios (2 -> 3 -> 2), split backward, three buckets") {
  config c;
  check_equivalence(c, dist_plan{.enc_dp = 2,
                                 .bb_pp = 2,
                                 .bb_dp = 3,
                                 .gen_dp = 2,
                                 .microbatches = 3,
                                 .batch_size = 13,
                                 .buckets = 3,
                                 .split_backward = true});
}

TEST_CASE("equivalence: backbone DP 1 with 4 stages, encoder DP 3") {
  config c;
  check_equivalence(
      c,
      dist_plan{
          .enc_dp = 3, .bb_pp = 4, .bb_dp = 1, .gen_dp = 1, .microbatches = 5, .batch_size = 10});
}

TEST_CASE("equivalence: the planner's layout for 7 ranks, and a planned uneven layer split") {
  config c;
  // The planner's layout of the tiny model on 7 ranks with at least 2 backbone
  // stages (what the example runs by default): every rank used, DP degrees differ.
  const auto pr = tiny_mllm::plan_layout(c, 7, 12, 1e9, 2);
  const dist_plan plan = tiny_mllm::to_dist_plan(pr.plan, c);
  CHECK(plan.world_size() == 7);
  CHECK(plan.bb_pp >= 2);
  CHECK(plan.batch_size == 12);
  CHECK(plan.microbatches == pr.plan.num_microbatches);
  CHECK(plan.bb_layers == pr.plan.modules[1].layers);
  CHECK((plan.enc_dp != plan.bb_dp || plan.bb_dp != plan.gen_dp));
  check_equivalence(c, plan);
  // Uneven stages as a planner may split them (1 + 3 layers).
  check_equivalence(c, dist_plan{.enc_dp = 1,
                                 .bb_pp = 2,
                                 .bb_dp = 1,
                                 .gen_dp = 2,
                                 .microbatches = 3,
                                 .bb_layers = {1, 3}});
}

TEST_CASE("a planner plan the tiny trainer cannot run is rejected naming the field") {
  config c;
  const disttrain::parallel_plan good = tiny_mllm::plan_layout(c, 7, 12, 1e9, 2).plan;
  auto bad = good;
  bad.modules[1].tp = 2;
  DISTTRAIN_CHECK_ERROR(tiny_mllm::to_dist_plan(bad, c), disttrain::errc::invalid_argument,
                        "plan.backbone.tp");
  bad = good;
  bad.modules[0].pp = 2;
  bad.modules[0].layers = {1, 1};
  DISTTRAIN_CHECK_ERROR(tiny_mllm::to_dist_plan(bad, c), disttrain::errc::invalid_argument,
                        "plan.encoder.pp");
  bad = good;
  bad.modules[2].colocated = true;
  bad.modules[2].dp = bad.modules[1].dp;
  DISTTRAIN_CHECK_ERROR(tiny_mllm::to_dist_plan(bad, c), disttrain::errc::invalid_argument,
                        "plan.generator.colocated");
  bad = good;
  bad.modules.pop_back();
  DISTTRAIN_CHECK_ERROR(tiny_mllm::to_dist_plan(bad, c), disttrain::errc::invalid_argument,
                        "plan.modules");
  bad = good;
  bad.modules[1].layers.back() += 1;
  DISTTRAIN_CHECK_ERROR(tiny_mllm::to_dist_plan(bad, c), disttrain::errc::invalid_argument,
                        "plan.backbone.layers");
  // A hand split that does not cover the backbone.
  dist_plan hand{.bb_layers = {1, 2}};
  DISTTRAIN_CHECK_ERROR(hand.stage_layers(c), disttrain::errc::invalid_argument,
                        "dist_plan.bb_layers");
  // Nothing fits: more backbone stages than ranks allow.
  DISTTRAIN_CHECK_ERROR(tiny_mllm::plan_layout(c, 3, 12, 1e9, 2), disttrain::errc::infeasible, "");
}

TEST_CASE("every sample is consumed exactly once per iteration by every module that needs it") {
  config c;
  const dist_plan plan{.enc_dp = 2, .bb_pp = 2, .bb_dp = 3, .gen_dp = 2};
  const auto rec = tiny_mllm::test::run_world(c, plan, {}, 2);
  for (int k = 0; k < 2; ++k) {
    std::set<std::uint64_t> batch;
    for (int i = 0; i < plan.batch_size; ++i)
      batch.insert(static_cast<std::uint64_t>(k * plan.batch_size + i));
    // (module, stage) -> ids consumed by all its replicas in iteration k
    std::map<std::pair<int, int>, std::multiset<std::uint64_t>> seen;
    for (const auto& r : rec)
      for (std::uint64_t id : r.steps.at(static_cast<std::size_t>(k)).consumed)
        seen[{r.coord.module.value, r.coord.stage.value}].insert(id);
    CHECK(seen.size() == 4);  // encoder, backbone stage 0 and 1, generator
    for (const auto& [where, ids] : seen) {
      INFO("iteration " << k << " module " << where.first << " stage " << where.second);
      CHECK(std::set<std::uint64_t>(ids.begin(), ids.end()) == batch);  // nothing lost or foreign
      CHECK(ids.size() == batch.size());                                // nothing twice
    }
  }
}

TEST_CASE("the loss falls over a few dozen iterations and tracks the serial trainer") {
  config c;
  const dist_plan plan{.enc_dp = 2, .bb_pp = 2, .bb_dp = 1, .gen_dp = 1};
  const int iterations = 25;
  const auto rec = tiny_mllm::test::run_world(c, plan, {}, iterations);
  tiny_mllm::serial_trainer serial(c,
                                   tiny_mllm::trainer_options{}.optimizer);  // same Adam settings
  std::vector<double> dist, ref;
  for (int k = 0; k < iterations; ++k) {
    dist.push_back(rec[0].steps[static_cast<std::size_t>(k)].loss);
    ref.push_back(serial.compute_gradients(
        tiny_mllm::make_batch(c, static_cast<std::uint64_t>(k * plan.batch_size),
                              static_cast<std::size_t>(plan.batch_size))));
    serial.step();
  }
  for (int k = 0; k < iterations; ++k) {
    INFO("iteration " << k);
    CHECK(std::abs(dist[static_cast<std::size_t>(k)] - ref[static_cast<std::size_t>(k)]) <=
          1e-9 * ref[static_cast<std::size_t>(k)]);
  }
  double first = 0, last = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    first += dist[i];
    last += dist[dist.size() - 1 - i];
  }
  INFO("mean loss of the first 5 iterations " << first / 5 << ", last 5 " << last / 5);
  CHECK(last < 0.75 * first);
}

TEST_CASE("a producer that stops delivering is a timeout on the trainer, not a hang") {
  config c;
  const dist_plan plan{.enc_dp = 2, .bb_pp = 2, .bb_dp = 1, .gen_dp = 1};
  tiny_mllm::trainer_options opts;
  opts.data_timeout = 200ms;
  std::atomic<bool> stalled{false};
  opts.loader = [&](std::uint64_t id) {
    if (id == 5) {  // this sample's producer goes silent for a long while
      stalled = true;
      const auto until = std::chrono::steady_clock::now() + 900ms;
      while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    }
    return tiny_mllm::make_sample(c, id);
  };
  std::vector<std::exception_ptr> errors;
  const auto t0 = std::chrono::steady_clock::now();
  tiny_mllm::test::run_world(c, plan, opts, 1, &errors, 600ms);
  CHECK(stalled);
  int data_timeouts = 0, failed = 0;
  for (const auto& e : errors) {
    if (!e) continue;
    ++failed;
    try {
      std::rethrow_exception(e);
    } catch (const disttrain::error& err) {
      INFO(err.what());
      // A timeout, or (exec/executor.hpp, "Failures") the abort notice of a
      // rank that timed out, naming the first failure.
      const bool notice = err.code() == disttrain::errc::comm_error &&
                          err.message().find("error (timeout;") != std::string::npos;
      CHECK((err.code() == disttrain::errc::timeout || notice));
      if (err.where().find("preprocess_pipeline") != std::string::npos) ++data_timeouts;
    }
  }
  CHECK(data_timeouts >= 1);  // the ranks waiting for sample 5 report the data wait
  CHECK(failed >= 1);
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);  // bounded by the timeouts, not a hang
}
