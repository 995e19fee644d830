#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "brute_force.hpp"
#include "disttrain/reorder/ordering.hpp"
#include "disttrain/reorder/pipeline_time.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::microbatch_times;
using disttrain::order_method;

namespace {

// Random microbatches: a size per microbatch times a per-stage profile, so
// stages scale together (as stages of one module do) plus some per-stage noise.
void random_times(std::mt19937_64& rng, std::size_t m, std::size_t S, std::vector<double>& f,
                  std::vector<double>& b) {
  std::lognormal_distribution<double> size(0.0, 0.7);
  std::uniform_real_distribution<double> prof(0.5, 1.5), noise(0.9, 1.1);
  std::vector<double> p(S);
  for (auto& x : p) x = prof(rng);
  f.assign(m * S, 0.0);
  b.assign(m * S, 0.0);
  for (std::size_t j = 0; j < m; ++j) {
    const double sz = size(rng);
    for (std::size_t s = 0; s < S; ++s) {
      f[j * S + s] = sz * p[s] * noise(rng);
      b[j * S + s] = 2.0 * f[j * S + s];
    }
  }
}

bool is_permutation_of_iota(const std::vector<std::uint32_t>& p) {
  std::vector<std::uint32_t> q(p);
  std::sort(q.begin(), q.end());
  for (std::size_t i = 0; i < q.size(); ++i)
    if (q[i] != i) return false;
  return true;
}

}  // namespace

TEST_CASE("ordering: search is within 2% of the brute-force optimum (1F1B and GPipe)") {
  std::mt19937_64 rng(7);
  disttrain::microbatch_orderer ord;
  double worst = 1.0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t m = 3 + static_cast<std::size_t>(trial % 6);  // 3..8
    const std::size_t S = 2 + static_cast<std::size_t>(rng() % 3);  // 2..4
    std::vector<double> f, b;
    random_times(rng, m, S, f, b);
    disttrain::pipeline_time eval(trial % 4 == 3 ? disttrain::pipeline_kind::gpipe
                                                 : disttrain::pipeline_kind::one_f_one_b);
    const double opt = reorder_test::optimal_order(f, b, m, S, eval);
    std::vector<std::uint32_t> perm(m);
    const double got = ord.order(microbatch_times{m, S, f, b}, eval, order_method::search, perm);
    REQUIRE(is_permutation_of_iota(perm));
    // The returned value is the objective of the returned order.
    std::vector<double> pf(m * S), pb(m * S);
    for (std::size_t p = 0; p < m; ++p)
      for (std::size_t s = 0; s < S; ++s) {
        pf[p * S + s] = f[perm[p] * S + s];
        pb[p * S + s] = b[perm[p] * S + s];
      }
    CHECK(eval(microbatch_times{m, S, pf, pb}) == got);
    std::vector<std::uint32_t> pp(m), pi(m);
    const double paper = ord.order(microbatch_times{m, S, f, b}, eval, order_method::paper, pp);
    const double ident = ord.order(microbatch_times{m, S, f, b}, eval, order_method::identity, pi);
    INFO("trial " << trial << " m=" << m << " S=" << S << " opt=" << opt << " search=" << got
                  << " paper=" << paper << " identity=" << ident);
    CHECK(got >= opt * (1 - 1e-12));
    CHECK(got <= opt * 1.02);
    CHECK(got <= paper * (1 + 1e-12));
    CHECK(got <= ident * (1 + 1e-12));
    worst = std::max(worst, got / opt);
  }
  WARN("worst search / optimum: " << worst);
}

TEST_CASE(
    "ordering: the paper rule puts the smallest first and the next S-1 smallest at the tail") {
  // 6 microbatches of sizes 6,1,5,2,4,3 on 3 stages (uniform across stages).
  const std::size_t m = 6, S = 3;
  const double sizes[] = {6, 1, 5, 2, 4, 3};
  std::vector<double> f(m * S), b(m * S);
  for (std::size_t j = 0; j < m; ++j)
    for (std::size_t s = 0; s < S; ++s) {
      f[j * S + s] = sizes[j];
      b[j * S + s] = 2 * sizes[j];
    }
  disttrain::pipeline_time eval;
  disttrain::microbatch_orderer ord;
  std::vector<std::uint32_t> perm(m);
  ord.order(microbatch_times{m, S, f, b}, eval, order_method::paper, perm);
  CHECK(perm[0] == 1);      // size 1 first
  CHECK(perm[m - 1] == 3);  // size 2 last
  CHECK(perm[m - 2] == 5);  // size 3 before it
  // Middle (sizes 4,5,6): position 1 takes the smallest remaining (warm-up), then
  // position 2 best-fits size of position 0... the middle is a permutation of {0,2,4}.
  std::vector<std::uint32_t> mid(perm.begin() + 1, perm.begin() + 4);
  std::sort(mid.begin(), mid.end());
  CHECK(mid == std::vector<std::uint32_t>{0, 2, 4});
  ord.order(microbatch_times{m, S, f, b}, eval, order_method::identity, perm);
  CHECK(perm == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("ordering: any order_objective works (a custom one checked by brute force)") {
  // Weighted position sum: sum over positions of (position + 1) * size;
  // minimised by running the largest first.
  auto weighted = [](const microbatch_times& t) {
    double v = 0.0;
    for (std::size_t p = 0; p < t.microbatches; ++p)
      v += static_cast<double>(p + 1) * t.forward_at(p, 0);
    return v;
  };
  static_assert(disttrain::order_objective<decltype(weighted)>);
  const std::size_t m = 7;
  std::vector<double> f{5, 3, 9, 1, 4, 8, 2}, b(m, 0.0);
  disttrain::microbatch_orderer ord;
  std::vector<std::uint32_t> perm(m);
  const double got = ord.order(microbatch_times{m, 1, f, b}, weighted, order_method::search, perm);
  CHECK(got == reorder_test::optimal_order(f, b, m, 1, weighted));
  CHECK(perm ==
        std::vector<std::uint32_t>{2, 5, 0, 4, 1, 6, 3});  // largest first minimises sum (p+1)*size
}

TEST_CASE("ordering: deterministic and budget-bounded") {
  std::mt19937_64 rng(3);
  std::vector<double> f, b;
  random_times(rng, 32, 4, f, b);
  disttrain::pipeline_time e1, e2;
  disttrain::microbatch_orderer o1, o2;
  std::vector<std::uint32_t> p1(32), p2(32);
  const double t1 = o1.order(microbatch_times{32, 4, f, b}, e1, order_method::search, p1);
  const double t2 = o2.order(microbatch_times{32, 4, f, b}, e2, order_method::search, p2);
  CHECK(p1 == p2);
  CHECK(t1 == t2);
  std::size_t calls = 0;
  auto counting = [&](const microbatch_times& t) {
    ++calls;
    return e1(t);
  };
  o1.budget = 50;
  o1.order(microbatch_times{32, 4, f, b}, counting, order_method::search, p1);
  CHECK(calls <= 50 + 3);  // three seeds + budget
}

TEST_CASE("ordering: bad input") {
  disttrain::microbatch_orderer ord;
  disttrain::pipeline_time eval;
  std::vector<double> f{1, 2}, b{1, 2};
  std::vector<std::uint32_t> perm(3);
  DISTTRAIN_CHECK_ERROR(ord.order(microbatch_times{2, 1, f, b}, eval, order_method::search, perm),
                        errc::invalid_argument, "perm");
  auto nan_objective = [](const microbatch_times&) {
    return std::numeric_limits<double>::quiet_NaN();
  };
  std::vector<std::uint32_t> p2(2);
  DISTTRAIN_CHECK_ERROR(
      ord.order(microbatch_times{2, 1, f, b}, nan_objective, order_method::paper, p2),
      errc::invalid_argument, "order_objective");
}

TEST_CASE("ordering: the incremental path decides exactly as the copying path") {
  // pipeline_time is scored incrementally (anchor/try_order/accept); the same
  // evaluator behind a plain lambda is scored by copying rows. Both searches
  // must take the same decisions: the same order and the same value.
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 24; ++trial) {
    const std::size_t m = 2 + static_cast<std::size_t>(rng() % 30);
    const std::size_t S = 1 + static_cast<std::size_t>(rng() % 6);
    std::vector<double> f, b;
    random_times(rng, m, S, f, b);
    disttrain::pipeline_time inc(
        trial % 4 == 3 ? disttrain::pipeline_kind::gpipe : disttrain::pipeline_kind::one_f_one_b,
        trial % 2 == 0 ? 0.0 : 0.05);
    disttrain::pipeline_time plain = inc;
    auto copying = [&](const microbatch_times& t) { return plain(t); };
    disttrain::microbatch_orderer o1, o2;
    o1.budget = o2.budget = 1500;
    std::vector<std::uint32_t> p1(m), p2(m);
    INFO("trial " << trial << " m=" << m << " S=" << S);
    const double t1 = o1.order(microbatch_times{m, S, f, b}, inc, order_method::search, p1);
    const double t2 = o2.order(microbatch_times{m, S, f, b}, copying, order_method::search, p2);
    CHECK(p1 == p2);
    CHECK(t1 == t2);
  }
}

TEST_CASE("ordering: more patience never gives a worse order") {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 12; ++trial) {
    const std::size_t m = 8 + static_cast<std::size_t>(rng() % 17), S = 2 + rng() % 5;
    std::vector<double> f, b;
    random_times(rng, m, S, f, b);
    disttrain::pipeline_time eval;
    disttrain::microbatch_orderer ord;
    std::vector<std::uint32_t> perm(m);
    ord.budget = 100000;
    ord.patience = 0;
    const double descent =
        ord.order(microbatch_times{m, S, f, b}, eval, order_method::search, perm);
    ord.patience = 4;
    const double iterated =
        ord.order(microbatch_times{m, S, f, b}, eval, order_method::search, perm);
    CHECK(iterated <= descent);
  }
}
