#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "disttrain/reorder/pipeline_time.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::microbatch_times;
using disttrain::pipeline_kind;
using disttrain::pipeline_time;

namespace {

// Reference: per-stage op lists written out independently, finish times by
// fixpoint relaxation (Bellman-Ford style) from zero. Returns the makespan.
double reference_time(pipeline_kind kind, std::size_t m, std::size_t S,
                      const std::vector<double>& f, const std::vector<double>& b, double lat) {
  struct op {
    bool bwd;
    std::size_t j;
  };
  std::vector<std::vector<op>> ops(S);
  for (std::size_t s = 0; s < S; ++s) {
    if (kind == pipeline_kind::gpipe) {
      for (std::size_t j = 0; j < m; ++j) ops[s].push_back({false, j});
      for (std::size_t j = 0; j < m; ++j) ops[s].push_back({true, j});
      continue;
    }
    // 1F1B as usually drawn: warm-up forwards, steady F/B pairs, cool-down backwards.
    const std::size_t warm = std::min(S - s - 1, m);
    std::size_t nf = 0, nb = 0;
    for (; nf < warm; ++nf) ops[s].push_back({false, nf});
    while (nf < m) {
      ops[s].push_back({false, nf++});
      ops[s].push_back({true, nb++});
    }
    while (nb < m) ops[s].push_back({true, nb++});
  }
  std::vector<double> ff(m * S, 0.0), bf(m * S, 0.0);
  for (std::size_t round = 0; round < 4 * m * S + 4; ++round) {
    bool changed = false;
    for (std::size_t s = 0; s < S; ++s) {
      double free_at = 0.0;
      for (const op& o : ops[s]) {
        const std::size_t c = o.j * S + s;
        double dep;
        if (!o.bwd)
          dep = s == 0 ? 0.0 : ff[c - 1] + lat;
        else
          dep = s + 1 == S ? ff[c] : bf[c + 1] + lat;
        const double fin = std::max(free_at, dep) + (o.bwd ? b[c] : f[c]);
        double& slot = o.bwd ? bf[c] : ff[c];
        if (fin != slot) {
          slot = fin;
          changed = true;
        }
        free_at = fin;
      }
    }
    if (!changed) break;
  }
  double end = 0.0;
  for (std::size_t c = 0; c < m * S; ++c) end = std::max({end, ff[c], bf[c]});
  return end;
}

}  // namespace

TEST_CASE("pipeline_time: uniform microbatches give the closed forms") {
  for (std::size_t S : {1u, 2u, 4u, 7u}) {
    for (std::size_t m : {1u, 3u, 8u, 16u}) {
      std::vector<double> f(m * S, 1.5), b(m * S, 3.0);
      const microbatch_times t{m, S, f, b};
      // 1F1B and GPipe: (m + S - 1) * (f + b).
      pipeline_time one(pipeline_kind::one_f_one_b), gp(pipeline_kind::gpipe);
      INFO("m=" << m << " S=" << S);
      CHECK(one(t) == Approx(static_cast<double>(m + S - 1) * 4.5));
      CHECK(gp(t) == Approx(static_cast<double>(m + S - 1) * 4.5));
    }
  }
}

TEST_CASE("pipeline_time: hand-computed heterogeneous case") {
  // 2 stages, 2 microbatches. mb0: f=1,b=2 per stage; mb1: f=3,b=1 per stage.
  // stage0: F0[0,1] F1[1,4] B0 B1 ; stage1: F0[1,2] B0[2,4] F1[4,7] B1[7,8]
  // stage0: B0 after stage1 B0 (4) and F1 (4): [4,6]; B1 after 8: [8,9].
  const std::vector<double> f{1, 1, 3, 3}, b{2, 2, 1, 1};
  pipeline_time eval;
  CHECK(eval(microbatch_times{2, 2, f, b}) == 9.0);
  // With 0.5 latency per hop: F0 s1 [1.5,2.5], B0 s1 [2.5,4.5], F1 s0 [1,4] -> F1 s1 [4.5,7.5],
  // B1 s1 [7.5,8.5]; stage0: B0 [5,7], B1 [9,10].
  pipeline_time lat(pipeline_kind::one_f_one_b, 0.5);
  CHECK(lat(microbatch_times{2, 2, f, b}) == 10.0);
}

TEST_CASE("pipeline_time: matches an independent fixpoint reference on random instances") {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u(0.1, 5.0);
  pipeline_time one(pipeline_kind::one_f_one_b), gp(pipeline_kind::gpipe);
  pipeline_time one_lat(pipeline_kind::one_f_one_b, 0.25);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t m = 1 + rng() % 12, S = 1 + rng() % 6;
    std::vector<double> f(m * S), b(m * S);
    for (auto& x : f) x = u(rng);
    for (auto& x : b) x = u(rng);
    const microbatch_times t{m, S, f, b};
    INFO("trial " << trial << " m=" << m << " S=" << S);
    CHECK(one(t) ==
          Approx(reference_time(pipeline_kind::one_f_one_b, m, S, f, b, 0.0)).epsilon(1e-12));
    CHECK(gp(t) == Approx(reference_time(pipeline_kind::gpipe, m, S, f, b, 0.0)).epsilon(1e-12));
    CHECK(one_lat(t) ==
          Approx(reference_time(pipeline_kind::one_f_one_b, m, S, f, b, 0.25)).epsilon(1e-12));
  }
}

TEST_CASE("pipeline_time: bad input") {
  pipeline_time eval;
  std::vector<double> f{1, 2}, b{1};
  DISTTRAIN_CHECK_ERROR(eval(microbatch_times{2, 1, f, b}), errc::invalid_argument,
                        "microbatch_times.backward");
  DISTTRAIN_CHECK_ERROR(eval(microbatch_times{0, 1, {}, {}}), errc::invalid_argument,
                        "microbatch_times.microbatches");
  std::vector<double> neg{1, -1};
  DISTTRAIN_CHECK_ERROR(eval(microbatch_times{2, 1, neg, f}), errc::invalid_argument,
                        "microbatch_times.forward[1]");
  DISTTRAIN_CHECK_ERROR(pipeline_time(pipeline_kind::gpipe, -1.0), errc::invalid_argument,
                        "p2p_latency");
}

TEST_CASE("pipeline_time: incremental scoring equals operator() bit for bit") {
  // Random walks of swaps and moves: every try equals a fresh evaluation of
  // the permuted rows; a try stopped by its cutoff returns a value >= the
  // cutoff that the true time also reaches; accepted tries move the anchor.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.1, 5.0);
  for (int trial = 0; trial < 120; ++trial) {
    const std::size_t m = 1 + rng() % 20, S = 1 + rng() % 7;
    const auto kind = trial % 3 == 2 ? pipeline_kind::gpipe : pipeline_kind::one_f_one_b;
    const double lat = trial % 2 == 0 ? 0.0 : 0.3;
    std::vector<double> f(m * S), b(m * S);
    for (auto& x : f) x = u(rng);
    for (auto& x : b) x = u(rng);
    const microbatch_times base{m, S, f, b};
    pipeline_time inc(kind, lat), fresh(kind, lat);
    std::vector<double> pf(m * S), pb(m * S);
    const auto direct = [&](const std::vector<std::uint32_t>& o) {
      for (std::size_t p = 0; p < m; ++p)
        for (std::size_t s = 0; s < S; ++s) {
          pf[p * S + s] = f[o[p] * S + s];
          pb[p * S + s] = b[o[p] * S + s];
        }
      return fresh(microbatch_times{m, S, pf, pb});
    };
    std::vector<std::uint32_t> anchor(m);
    for (std::size_t j = 0; j < m; ++j) anchor[j] = static_cast<std::uint32_t>(m - 1 - j);
    INFO("trial " << trial << " m=" << m << " S=" << S);
    double anchored = inc.anchor(base, anchor);
    REQUIRE(anchored == direct(anchor));
    for (int step = 0; step < 40; ++step) {
      auto cand = anchor;
      const std::size_t i = rng() % m, j = rng() % m;
      if (step % 2 == 0) {
        std::swap(cand[i], cand[j]);
      } else {
        const auto x = cand[i];
        cand.erase(cand.begin() + static_cast<std::ptrdiff_t>(i));
        cand.insert(cand.begin() + static_cast<std::ptrdiff_t>(j), x);
      }
      const double want = direct(cand);
      const bool cut = step % 3 == 0;
      const double cutoff = cut ? anchored : std::numeric_limits<double>::infinity();
      const double got = inc.try_order(cand, std::min(i, j), cutoff);
      if (got < cutoff) {
        CHECK(got == want);
      } else {
        CHECK(want >= cutoff);
      }
      if (got < cutoff && rng() % 2 == 0) {
        inc.accept();
        anchor = cand;
        anchored = got;
      }
    }
    // The anchor is still exact after the walk (a try from position m recomputes nothing).
    CHECK(inc.try_order(anchor, m) == direct(anchor));
  }
}

TEST_CASE("pipeline_time: anchor checks its order") {
  pipeline_time eval;
  std::vector<double> f{1, 2, 3}, b{1, 2, 3};
  const std::vector<std::uint32_t> dup{0, 0, 2}, short_order{0, 1}, big{0, 1, 3};
  DISTTRAIN_CHECK_ERROR(eval.anchor(microbatch_times{3, 1, f, b}, dup), errc::invalid_argument,
                        "pipeline_time.anchor.order");
  DISTTRAIN_CHECK_ERROR(eval.anchor(microbatch_times{3, 1, f, b}, big), errc::invalid_argument,
                        "pipeline_time.anchor.order");
  DISTTRAIN_CHECK_ERROR(eval.anchor(microbatch_times{3, 1, f, b}, short_order),
                        errc::invalid_argument, "pipeline_time.anchor.order");
  std::vector<double> nan{1, std::numeric_limits<double>::quiet_NaN(), 3};
  DISTTRAIN_CHECK_ERROR(
      eval.anchor(microbatch_times{3, 1, nan, b}, std::vector<std::uint32_t>{0, 1, 2}),
      errc::invalid_argument, "microbatch_times.forward[1]");
}

TEST_CASE("pipeline_time: lower_bound is below every order and exact for identical rows") {
  // Below the time of every order (brute force over all orders at m <= 6),
  // both schedules, with and without latency, and below any row set with
  // larger durations; equal to (m + S - 1)(f + b) for identical rows without
  // latency.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.1, 5.0);
  for (const pipeline_kind kind : {pipeline_kind::one_f_one_b, pipeline_kind::gpipe}) {
    for (const double lat : {0.0, 0.3}) {
      pipeline_time eval(kind, lat);
      for (int trial = 0; trial < 60; ++trial) {
        const std::size_t m = 1 + rng() % 6, S = 1 + rng() % 5;
        std::vector<double> f(m * S), b(m * S);
        for (auto& x : f) x = u(rng);
        for (auto& x : b) x = u(rng);
        const double bound = eval.lower_bound(microbatch_times{m, S, f, b});
        std::vector<std::uint32_t> order(m);
        for (std::uint32_t j = 0; j < m; ++j) order[j] = j;
        double best = std::numeric_limits<double>::infinity();
        do {
          std::vector<double> pf(m * S), pb(m * S);
          for (std::size_t p = 0; p < m; ++p)
            for (std::size_t s = 0; s < S; ++s) {
              pf[p * S + s] = f[order[p] * S + s];
              pb[p * S + s] = b[order[p] * S + s];
            }
          best = std::min(best, eval(microbatch_times{m, S, pf, pb}));
        } while (std::next_permutation(order.begin(), order.end()));
        INFO("trial " << trial << " m=" << m << " S=" << S << " lat=" << lat);
        CHECK(bound <= best * (1 + 1e-12));
        CHECK(bound > 0.0);
        // Larger durations: the bound of the smaller rows stays below.
        std::vector<double> f2 = f, b2 = b;
        for (auto& x : f2) x *= 1.0 + 0.5 * u(rng);
        for (auto& x : b2) x += u(rng);
        CHECK(bound <= eval(microbatch_times{m, S, f2, b2}) * (1 + 1e-12));
      }
      for (std::size_t S : {1u, 3u, 6u})
        for (std::size_t m : {1u, 4u, 9u}) {
          std::vector<double> f(m * S, 1.25), b(m * S, 2.5);
          const microbatch_times t{m, S, f, b};
          INFO("identical rows m=" << m << " S=" << S << " lat=" << lat);
          if (lat == 0.0)
            CHECK(eval.lower_bound(t) == Approx(eval(t)).epsilon(1e-12));
          else  // the steady state also waits on hops: below, not exact
            CHECK(eval.lower_bound(t) <= eval(t));
        }
    }
  }
  pipeline_time eval;
  std::vector<double> f{1, 2}, b{1};
  DISTTRAIN_CHECK_ERROR((void)eval.lower_bound(microbatch_times{2, 1, f, b}),
                        errc::invalid_argument, "microbatch_times.backward");
}
