#pragma once
// Runs one function per rank of a local_world on its own thread and collects
// each rank's exception (Catch2 assertions are not thread-safe, so ranks
// report results through return values and exceptions only).

#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"

namespace disttrain::test {

inline std::vector<std::exception_ptr> run_ranks(local_world& world,
                                                 const std::function<void(local_backend&)>& body) {
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
  return errors;
}

// Rethrows the first rank's exception, if any.
inline void rethrow_first(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace disttrain::test
