#pragma once
// Paired measurements of a communication backend against its raw transport
// (memcpy for the local backend, MPI_Send/MPI_Recv for MPI): each batch of
// the candidate is timed right next to a batch of the baseline doing the same
// work, so both see the same machine load; the ratio is computed per pair and
// summarised by its median and spread (min..max over the pairs), and the
// ratio of the best batches is shown too. Shared by
// bench_comm.cpp and benchmarks/mpi/bench_comm_mpi.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace disttrain::bench {

/// One message size of one benchmark: seconds per message of the candidate
/// and of the baseline, batch by batch (same length, batch i of both adjacent in time).
struct p2p_row {
  std::string what;       ///< e.g. "local stream", "mpi"
  std::size_t bytes = 0;  ///< message size
  double target = 0;      ///< required baseline/candidate time ratio (0: informative row)
  std::vector<double> candidate_s, baseline_s;

  [[nodiscard]] static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  }
  [[nodiscard]] std::vector<double> ratios() const {
    std::vector<double> r;
    for (std::size_t i = 0; i < candidate_s.size() && i < baseline_s.size(); ++i)
      r.push_back(baseline_s[i] / candidate_s[i]);
    std::sort(r.begin(), r.end());
    return r;
  }
  /// Median over the pairs of baseline time / candidate time (1 = as fast as the baseline).
  [[nodiscard]] double ratio() const { return median(ratios()); }
  [[nodiscard]] double ratio_min() const { return ratios().empty() ? 0.0 : ratios().front(); }
  [[nodiscard]] double ratio_max() const { return ratios().empty() ? 0.0 : ratios().back(); }
  /// Best batch of the baseline / best batch of the candidate: what each can
  /// do when the machine leaves it alone (load only ever adds time).
  [[nodiscard]] double ratio_best() const {
    if (candidate_s.empty() || baseline_s.empty()) return 0.0;
    return *std::min_element(baseline_s.begin(), baseline_s.end()) /
           *std::min_element(candidate_s.begin(), candidate_s.end());
  }
  [[nodiscard]] double candidate_GBps() const { return gbps(median(candidate_s)); }
  [[nodiscard]] double baseline_GBps() const { return gbps(median(baseline_s)); }
  [[nodiscard]] bool meets() const { return target <= 0 || ratio() >= target; }
  [[nodiscard]] std::string verdict() const {
    if (target <= 0) return "-";
    return fmt::format("{} (>= {:.2f})", meets() ? "yes" : "NO", target);
  }

 private:
  [[nodiscard]] double gbps(double s) const {
    return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0;
  }
};

/// Prints one table: size, both bandwidths, both latencies, the ratio (median
/// and min..max over the pairs, best vs best) and whether the target holds
/// (judged on the median).
inline void print_p2p_table(const std::string& title, const std::string& candidate,
                            const std::string& baseline, const std::vector<p2p_row>& rows) {
  fmt::print("{}\n", title);
  fmt::print("{:<10} {:>10} {:>13} {:>13} {:>11} {:>11} {:>6} {:>13} {:>5}  {}\n", "pattern",
             "bytes", candidate + " GB/s", baseline + " GB/s", candidate + " us", baseline + " us",
             "ratio", "(min..max)", "best", "meets target");
  for (const auto& r : rows)
    fmt::print(
        "{:<10} {:>10} {:>13.2f} {:>13.2f} {:>11.2f} {:>11.2f} {:>6.2f} {:>13} {:>5.2f}  {}\n",
        r.what, r.bytes, r.candidate_GBps(), r.baseline_GBps(),
        p2p_row::median(r.candidate_s) * 1e6, p2p_row::median(r.baseline_s) * 1e6, r.ratio(),
        fmt::format("({:.2f}..{:.2f})", r.ratio_min(), r.ratio_max()), r.ratio_best(), r.verdict());
}

/// JSON of a table: one object per row.
[[nodiscard]] inline nlohmann::json p2p_json(const std::string& candidate,
                                             const std::string& baseline,
                                             const std::vector<p2p_row>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json row{{"pattern", r.what},
                       {"bytes", r.bytes},
                       {candidate + "_GBps", r.candidate_GBps()},
                       {baseline + "_GBps", r.baseline_GBps()},
                       {candidate + "_us", p2p_row::median(r.candidate_s) * 1e6},
                       {baseline + "_us", p2p_row::median(r.baseline_s) * 1e6},
                       {"ratio", r.ratio()},
                       {"ratio_min", r.ratio_min()},
                       {"ratio_max", r.ratio_max()},
                       {"ratio_best", r.ratio_best()},
                       {"pairs", r.ratios().size()}};
    // An informative row (no target) says so instead of "meets_target": true.
    row["target"] = r.target > 0 ? nlohmann::json(r.target) : nlohmann::json(nullptr);
    row["meets_target"] = r.target > 0 ? nlohmann::json(r.meets()) : nlohmann::json(nullptr);
    j.push_back(std::move(row));
  }
  return j;
}

}  // namespace disttrain::bench
