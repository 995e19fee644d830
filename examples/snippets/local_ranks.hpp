#pragma once
// Peers for the snippets that run a collective or a route: one thread per
// rank of a disttrain::local_world, the first error rethrown on the caller.

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"

namespace snippets {

/// @brief Runs body(rank's endpoint) on one thread per rank of `world`;
/// rethrows the first error once every thread has finished.
inline void run_ranks(disttrain::local_world& world,
                      const std::function<void(disttrain::local_backend&)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < world.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        auto b = world.endpoint(r);
        body(b);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// @brief The same on a fresh world of `ranks` ranks (5 s timeout).
inline void run_ranks(int ranks, const std::function<void(disttrain::local_backend&)>& body) {
  disttrain::local_world world(ranks, {std::chrono::milliseconds(5000)});
  run_ranks(world, body);
}

}  // namespace snippets
