// Built only when the consumer asked for COMPONENTS calibration:
// disttrain::calibration must bring Eigen, and fit_efficiency must run.
#include <disttrain/cost/calibration.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include <Eigen/Core>

int main() {
  const Eigen::Vector3d v(1.0, 2.0, 2.0);
  if (v.norm() != 3.0) {
    std::fprintf(stderr, "FAILED: Eigen norm %g\n", v.norm());
    return 1;
  }
  // Times that grow with FLOPs at a constant 50% of a 1e15 peak: the fit must
  // reproduce them.
  std::vector<disttrain::profile_sample> samples;
  for (double f : {1e12, 4e12, 1.6e13, 6.4e13}) samples.push_back({f, 1, f / 5e14, "gemm"});
  const auto fit = disttrain::fit_efficiency(samples, 1e15);
  if (fit.samples != samples.size() || !(fit.max_relative_error < 0.05)) {
    std::fprintf(stderr, "FAILED: fit of %zu samples, max relative error %g\n", fit.samples,
                 fit.max_relative_error);
    return 1;
  }
  std::printf("disttrain calibration consumer: OK (max relative error %g)\n",
              fit.max_relative_error);
  return 0;
}
