#pragma once
/// @file collectives.hpp
/// @brief Alpha-beta times of point-to-point transfers and ring collectives.
///
/// A link has a latency alpha (seconds per message or ring step) and a
/// bandwidth 1/beta (bytes per second, one direction). For `n` ranks and a
/// buffer of `B` bytes (the full buffer, before sharding):
///
///     p2p            = alpha + B / bw
///     reduce_scatter = (n-1) * alpha + (n-1)/n * B / bw
///     all_gather     = (n-1) * alpha + (n-1)/n * B / bw
///     all_reduce     = 2 (n-1) * alpha + 2 (n-1)/n * B / bw   (ring: RS + AG)
///
/// (Thakur, Rabenseifner, Gropp 2005; the bandwidth term is optimal for rings.)
/// A group that spans nodes is limited by its slowest hop: the per-GPU NIC.

#include "disttrain/model/cluster_spec.hpp"

namespace disttrain {

/// @brief Effective latency and bandwidth of one hop.
/// @snippet cost.cpp link_spec
struct link_spec {
  double bandwidth_bytes_per_s = 1;
  double latency_s = 0;
};

/// @brief The link a group uses: NVLink when it stays in a node, else the NIC;
/// bandwidths scaled by the given achievable fractions.
[[nodiscard]] constexpr link_spec group_link(const cluster_spec& c, bool spans_nodes,
                                             double intra_efficiency = 1.0,
                                             double inter_efficiency = 1.0) noexcept {
  return spans_nodes ? link_spec{c.inter_node_bandwidth_bytes_per_s * inter_efficiency,
                                 c.inter_node_latency_s}
                     : link_spec{c.intra_node_bandwidth_bytes_per_s * intra_efficiency,
                                 c.intra_node_latency_s};
}

/// @brief One message of `bytes` over `l`.
[[nodiscard]] constexpr double p2p_time(double bytes, const link_spec& l) noexcept {
  return bytes > 0 ? l.latency_s + bytes / l.bandwidth_bytes_per_s : 0.0;
}
/// @brief Ring reduce-scatter of a `bytes` buffer over `n` ranks (0 for n <= 1).
[[nodiscard]] constexpr double reduce_scatter_time(double bytes, int n,
                                                   const link_spec& l) noexcept {
  if (n <= 1 || !(bytes > 0)) return 0.0;
  const double k = static_cast<double>(n - 1);
  return k * l.latency_s + k / static_cast<double>(n) * bytes / l.bandwidth_bytes_per_s;
}
/// @brief Ring all-gather producing a `bytes` buffer over `n` ranks.
[[nodiscard]] constexpr double all_gather_time(double bytes, int n, const link_spec& l) noexcept {
  return reduce_scatter_time(bytes, n, l);
}
/// @brief Ring all-reduce of a `bytes` buffer over `n` ranks.
[[nodiscard]] constexpr double all_reduce_time(double bytes, int n, const link_spec& l) noexcept {
  return 2.0 * reduce_scatter_time(bytes, n, l);
}

}  // namespace disttrain
