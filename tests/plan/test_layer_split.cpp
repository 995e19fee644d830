// The layer-split rule (plan/detail/layer_split.hpp): the balanced split, and
// the same rule with per-stage caps (the planner's memory caps), checked
// against brute force over every split of small modules.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "disttrain/plan/detail/layer_split.hpp"
#include "disttrain_catch.hpp"

namespace {

using disttrain::detail::balanced_split;
using disttrain::detail::stage_type;
using disttrain::detail::type_of_stage;

// Stage times non-decreasing in the layer count: a base per stage type (the
// embeddings on the first stage, the head on the last) plus a per-layer cost
// with random non-negative increments.
struct random_times {
  std::vector<double> table;  // 4 * (L + 1)
  int L = 0;
  random_times(int layers, std::mt19937& rng)
      : table(4 * static_cast<std::size_t>(layers + 1)), L(layers) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int t = 0; t < 4; ++t) {
      double x = 2.0 * u(rng);
      for (int c = 1; c <= L; ++c) {
        x += 0.5 + u(rng);
        table[static_cast<std::size_t>(t * (L + 1) + c)] = x;
      }
    }
  }
  double operator()(stage_type t, int c) const {
    return table[static_cast<std::size_t>(static_cast<int>(t) * (L + 1) + c)];
  }
};

// Every split of L layers into pp stages of at least one layer.
void compositions(int L, int pp, std::vector<int>& cur, const std::function<void()>& visit) {
  if (static_cast<int>(cur.size()) == pp - 1) {
    cur.push_back(L);
    visit();
    cur.pop_back();
    return;
  }
  const int left = pp - static_cast<int>(cur.size()) - 1;
  for (int c = 1; c <= L - left; ++c) {
    cur.push_back(c);
    compositions(L - c, pp, cur, visit);
    cur.pop_back();
  }
}

template <class Fn>
double slowest(const std::vector<int>& split, const Fn& time) {
  double t = 0;
  const int pp = static_cast<int>(split.size());
  for (int j = 0; j < pp; ++j)
    t = std::max(t, time(type_of_stage(j, pp), split[static_cast<std::size_t>(j)]));
  return t;
}

}  // namespace

TEST_CASE("the capped split minimises the slowest stage within the caps (brute force)") {
  std::mt19937 rng(20261202);
  int capped_cases = 0, infeasible_cases = 0, binding_cases = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int L = 2 + static_cast<int>(rng() % 11);  // 2..12 layers
    const int pp = 2 + static_cast<int>(rng() % static_cast<unsigned>(std::min(L, 5) - 1));
    const random_times time(L, rng);
    std::vector<int> caps(static_cast<std::size_t>(pp));
    for (int& c : caps) c = static_cast<int>(rng() % static_cast<unsigned>(L + 1));  // 0..L
    INFO("L " << L << ", pp " << pp << ", iteration " << iter);
    // Brute force: the smallest slowest stage over the splits within the caps.
    double best = std::numeric_limits<double>::infinity();
    std::vector<int> cur;
    compositions(L, pp, cur, [&] {
      for (int j = 0; j < pp; ++j)
        if (cur[static_cast<std::size_t>(j)] > caps[static_cast<std::size_t>(j)]) return;
      best = std::min(best, slowest(cur, time));
    });
    const auto got = balanced_split(L, pp, time, std::span<const int>(caps));
    ++capped_cases;
    if (best == std::numeric_limits<double>::infinity()) {
      CHECK(got.empty());
      ++infeasible_cases;
      continue;
    }
    REQUIRE(got.size() == static_cast<std::size_t>(pp));
    int sum = 0;
    for (int j = 0; j < pp; ++j) {
      CHECK(got[static_cast<std::size_t>(j)] >= 1);
      CHECK(got[static_cast<std::size_t>(j)] <= caps[static_cast<std::size_t>(j)]);
      sum += got[static_cast<std::size_t>(j)];
    }
    CHECK(sum == L);
    CHECK(slowest(got, time) == best);
    const auto free = balanced_split(L, pp, time);
    if (free != got) ++binding_cases;
  }
  // The instances cover infeasible caps, binding caps and caps that change nothing.
  CHECK(infeasible_cases > 20);
  CHECK(binding_cases > 20);
  CHECK(capped_cases - infeasible_cases - binding_cases > 20);
}

TEST_CASE("caps the balanced split keeps give the balanced split back, bit for bit") {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const int L = 1 + static_cast<int>(rng() % 80);
    const int pp = 1 + static_cast<int>(rng() % static_cast<unsigned>(std::min(L, 20)));
    const random_times time(L, rng);
    const auto free = balanced_split(L, pp, time);
    REQUIRE(free.size() == static_cast<std::size_t>(pp));
    std::vector<int> caps(free);
    for (int& c : caps) c += static_cast<int>(rng() % 3);  // at or above each stage's layers
    INFO("L " << L << ", pp " << pp);
    CHECK(balanced_split(L, pp, time, std::span<const int>(caps)) == free);
  }
}

TEST_CASE("the uncapped split is the brute-force min-max") {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 200; ++iter) {
    const int L = 2 + static_cast<int>(rng() % 10);
    const int pp = 2 + static_cast<int>(rng() % static_cast<unsigned>(std::min(L, 5) - 1));
    const random_times time(L, rng);
    double best = std::numeric_limits<double>::infinity();
    std::vector<int> cur;
    compositions(L, pp, cur, [&] { best = std::min(best, slowest(cur, time)); });
    const auto got = balanced_split(L, pp, time);
    REQUIRE(got.size() == static_cast<std::size_t>(pp));
    CHECK(slowest(got, time) == best);
  }
}

TEST_CASE("split edge cases: more stages than layers, wrong cap counts, zero caps") {
  const auto time = [](stage_type, int c) { return static_cast<double>(c); };
  CHECK(balanced_split(3, 4, time).empty());
  CHECK(balanced_split(4, 0, time).empty());
  CHECK(balanced_split(1, 1, time) == std::vector<int>{1});
  const std::vector<int> two{4, 4};
  CHECK(balanced_split(6, 3, time, std::span<const int>(two)).empty());  // one cap per stage
  const std::vector<int> zero{0, 6, 6};
  CHECK(balanced_split(6, 3, time, std::span<const int>(zero)).empty());  // a stage gets >= 1
  const std::vector<int> tight{1, 1, 3};
  CHECK(balanced_split(6, 3, time, std::span<const int>(tight)).empty());  // caps hold 5 < 6
  const std::vector<int> exact{1, 2, 3};
  CHECK(balanced_split(6, 3, time, std::span<const int>(exact)) == std::vector<int>{1, 2, 3});
  // Uniform stages: the surplus comes off the first stages.
  CHECK(balanced_split(10, 4, time) == std::vector<int>{1, 3, 3, 3});
  const std::vector<int> late{9, 9, 2, 2};
  CHECK(balanced_split(10, 4, time, std::span<const int>(late)) == std::vector<int>{3, 3, 2, 2});
}
