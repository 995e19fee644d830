#pragma once
/// @file p2p_collectives.hpp
/// @brief Bootstrap collectives (barrier, broadcast, allgather) written on top
/// of a backend's own isend/irecv/wait, for backends without native ones (the
/// local backend). Linear algorithms: they move bootstrap-sized data only.
/// Every wait uses the backend's timeout, so a missing rank is reported by the
/// point-to-point error (which names the peer).

#include <chrono>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "disttrain/comm/backend.hpp"

namespace disttrain::detail {

/// Internal tags, reserved for these collectives: backends reject negative
/// user tags (as MPI does) and give the collectives a view that accepts them.
inline constexpr int tag_barrier = -1;
inline constexpr int tag_broadcast = -2;
inline constexpr int tag_allgather = -3;

/// @brief Barrier: everyone sends an empty message to rank 0, which answers
/// each once all have arrived.
template <class B>
void p2p_barrier(B& b) {
  const int n = b.size();
  const int me = b.rank();
  const auto d = wait_deadline::after(b.options().timeout);
  std::span<std::byte> none;
  if (me == 0) {
    std::vector<typename B::request> reqs;
    for (int r = 1; r < n; ++r) reqs.push_back(b.irecv(none, r, tag_barrier));
    for (auto& q : reqs) wait_until(b, q, d);
    reqs.clear();
    for (int r = 1; r < n; ++r) reqs.push_back(b.isend(none, r, tag_barrier));
    for (auto& q : reqs) wait_until(b, q, d);
  } else {
    auto s = b.isend(none, 0, tag_barrier);
    auto r = b.irecv(none, 0, tag_barrier);
    wait_until(b, s, d);
    wait_until(b, r, d);
  }
}

/// @brief Broadcast `data` from `root` to every rank (same size everywhere).
template <class B>
void p2p_broadcast(B& b, std::span<std::byte> data, int root) {
  const int n = b.size();
  const auto d = wait_deadline::after(b.options().timeout);
  if (b.rank() == root) {
    std::vector<typename B::request> reqs;
    for (int r = 0; r < n; ++r)
      if (r != root) reqs.push_back(b.isend(data, r, tag_broadcast));
    for (auto& q : reqs) wait_until(b, q, d);
  } else {
    auto q = b.irecv(data, root, tag_broadcast);
    wait_until(b, q, d);
  }
}

/// @brief Allgather: `all` receives every rank's `mine` in rank order
/// (`all.size() == size() * mine.size()`).
template <class B>
void p2p_allgather(B& b, std::span<const std::byte> mine, std::span<std::byte> all) {
  const int n = b.size();
  const int me = b.rank();
  const std::size_t k = mine.size();
  const auto d = wait_deadline::after(b.options().timeout);
  std::vector<typename B::request> reqs;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    reqs.push_back(b.irecv(all.subspan(static_cast<std::size_t>(r) * k, k), r, tag_allgather));
    reqs.push_back(b.isend(mine, r, tag_allgather));
  }
  if (k > 0) std::memcpy(all.data() + static_cast<std::size_t>(me) * k, mine.data(), k);
  for (auto& q : reqs) wait_until(b, q, d);
}

}  // namespace disttrain::detail
