#include <random>
#include <vector>

#include "../reorder/brute_force.hpp"
#include "disttrain/bind/sim_objective.hpp"
#include "disttrain/reorder.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/gpipe.hpp"
#include "disttrain/schedule/interleaved.hpp"
#include "disttrain/schedule/one_f_one_b.hpp"
#include "disttrain/schedule/zero_bubble.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::microbatch_times;

namespace {
void random_times(std::mt19937_64& rng, std::size_t m, std::size_t S, std::vector<double>& f,
                  std::vector<double>& b) {
  std::uniform_real_distribution<double> u(0.2, 3.0);
  f.resize(m * S);
  b.resize(m * S);
  for (auto& x : f) x = u(rng);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 2.0 * f[i];
}
}  // namespace

TEST_CASE("simulated_objective agrees with pipeline_time on 1F1B and GPipe") {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 20; ++trial) {
    const int S = 2 + trial % 3, m = 2 + trial % 7;
    std::vector<double> f, b;
    random_times(rng, static_cast<std::size_t>(m), static_cast<std::size_t>(S), f, b);
    const microbatch_times t{static_cast<std::size_t>(m), static_cast<std::size_t>(S), f, b};
    disttrain::simulated_objective one(disttrain::add_communication(disttrain::make_1f1b(S, m)));
    disttrain::simulated_objective gp(disttrain::add_communication(disttrain::make_gpipe(S, m)));
    disttrain::pipeline_time one_ref(disttrain::pipeline_kind::one_f_one_b),
        gp_ref(disttrain::pipeline_kind::gpipe);
    INFO("trial " << trial << " S=" << S << " m=" << m);
    CHECK(one(t) == Approx(one_ref(t)).epsilon(1e-12));
    CHECK(gp(t) == Approx(gp_ref(t)).epsilon(1e-12));
  }
}

TEST_CASE(
    "reorderer with the simulator scores an interleaved schedule; search within 2% of brute "
    "force") {
  std::mt19937_64 rng(22);
  const int S = 2, m = 6, v = 2;
  disttrain::simulated_objective sim(
      disttrain::add_communication(disttrain::make_interleaved_1f1b(S, m, v)));
  std::vector<double> f, b;
  random_times(rng, m, S, f, b);
  const double opt = reorder_test::optimal_order(f, b, m, S, sim);
  disttrain::microbatch_orderer ord;
  std::vector<std::uint32_t> perm(m);
  const double got =
      ord.order(microbatch_times{m, S, f, b}, sim, disttrain::order_method::search, perm);
  CHECK(got <= opt * 1.02);
  CHECK(got >= opt * (1 - 1e-12));

  disttrain::reorder_options o;
  o.modules = {{"backbone", 2}};
  o.microbatches = m;
  o.microbatch_group = S;  // interleaving needs m % S == 0
  o.stages = disttrain::chain_stages(std::vector<std::uint32_t>{S});
  disttrain::reorderer<disttrain::simulated_objective> r(o, sim);
  std::vector<disttrain::sample_meta> batch(24);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].id = i;
    batch[i].cost[0] = 1.0 + static_cast<double>(rng() % 10);
  }
  const auto res = r.assign(batch);
  CHECK_NOTHROW(disttrain::validate(res));
  CHECK(res.iteration_time > 0.0);
  // A zero-bubble (split B/W) schedule simulates too.
  disttrain::simulated_objective zb(disttrain::add_communication(disttrain::make_zb_h1(S, m)),
                                    {.weight_fraction = 0.5});
  CHECK(zb(microbatch_times{m, S, f, b}) > 0.0);
}

TEST_CASE("simulated_objective: bad input") {
  disttrain::simulated_objective sim(disttrain::add_communication(disttrain::make_1f1b(2, 4)));
  std::vector<double> f(6, 1.0), b(6, 2.0);
  DISTTRAIN_CHECK_ERROR(sim(microbatch_times{3, 2, f, b}), errc::invalid_argument,
                        "simulated_objective");
  DISTTRAIN_CHECK_ERROR(
      disttrain::simulated_objective(disttrain::add_communication(disttrain::make_1f1b(2, 4)),
                                     {.weight_fraction = 1.5}),
      errc::invalid_argument, "weight_fraction");
}
