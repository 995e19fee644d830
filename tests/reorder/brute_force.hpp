#pragma once
// Independent references for the reorder tests: exhaustive partitioning and
// exhaustive microbatch ordering. Deliberately simple (no shared code with the
// library beyond the public evaluator where a test says so).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "disttrain/reorder/pipeline_time.hpp"

namespace reorder_test {

// Smallest possible max bin load over all assignments of `c` to `k` bins
// (equal_count: every bin gets floor or ceil of n/k items). Depth-first search
// over every assignment, pruned only by "already no better than the best"
// (exact) and by skipping empty bins after the first (pure relabelling).
inline double optimal_max_load(const std::vector<double>& c, std::size_t k, bool equal_count) {
  const std::size_t n = c.size();
  std::vector<double> load(k, 0.0);
  std::vector<std::size_t> cnt(k, 0);
  double best = std::numeric_limits<double>::infinity();
  const std::size_t q = n / k, rem = n % k;
  auto feasible_counts = [&]() {
    std::size_t big = 0;
    for (std::size_t b = 0; b < k; ++b) {
      if (cnt[b] != q && cnt[b] != q + 1) return false;
      if (cnt[b] == q + 1) ++big;
    }
    return big == rem;
  };
  auto rec = [&](auto&& self, std::size_t i) -> void {
    const double cur = *std::max_element(load.begin(), load.end());
    if (cur >= best) return;
    if (i == n) {
      if (!equal_count || feasible_counts()) best = cur;
      return;
    }
    bool used_empty = false;
    for (std::size_t b = 0; b < k; ++b) {
      if (cnt[b] == 0) {
        if (used_empty) continue;
        used_empty = true;
      }
      if (equal_count && cnt[b] >= q + (rem ? 1 : 0)) continue;
      load[b] += c[i];
      ++cnt[b];
      self(self, i + 1);
      load[b] -= c[i];
      --cnt[b];
    }
  };
  rec(rec, 0);
  return best;
}

inline std::vector<double> random_costs(std::mt19937_64& rng, std::size_t n, int kind) {
  std::vector<double> c(n);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::lognormal_distribution<double> ln(0.0, 1.0);
  std::uniform_int_distribution<int> patches(1, 16);
  for (auto& x : c) {
    switch (kind % 3) {
      case 0: x = 1.0 + 99.0 * u(rng); break;  // uniform
      case 1: x = ln(rng); break;              // heavy tail
      default: {                               // image patches, quadratic attention
        const double p = 64.0 * patches(rng);
        x = p + p * p / 1024.0;
      }
    }
  }
  return c;
}

// Best objective over every permutation of the rows of (f, b) (m x S).
template <class Objective>
double optimal_order(const std::vector<double>& f, const std::vector<double>& b, std::size_t m,
                     std::size_t S, Objective& objective) {
  std::vector<std::size_t> p(m);
  std::iota(p.begin(), p.end(), std::size_t{0});
  std::vector<double> pf(m * S), pb(m * S);
  double best = std::numeric_limits<double>::infinity();
  do {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t s = 0; s < S; ++s) {
        pf[i * S + s] = f[p[i] * S + s];
        pb[i * S + s] = b[p[i] * S + s];
      }
    best =
        std::min(best, static_cast<double>(objective(disttrain::microbatch_times{m, S, pf, pb})));
  } while (std::next_permutation(p.begin(), p.end()));
  return best;
}

}  // namespace reorder_test
