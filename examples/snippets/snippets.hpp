#pragma once
// The harness of examples/snippets/<part>.cpp. Each file holds the examples
// that the headers of one part show with `@snippet <part>.cpp <name>`: every
// example is the body of a function `<name>()` between the Doxygen markers
// `//! [<name>]`, with what it needs declared before the first marker and its
// result checked after the second. main() runs every function (an unused one
// is a -Wunused-function error) through `runner`; ctest runs each file as
// snippets.<part> (examples/snippets/CMakeLists.txt).

#include <chrono>
#include <cstdio>
#include <exception>
#include <string_view>

#include "disttrain/core/check.hpp"
#include "disttrain/core/error.hpp"

namespace snippets {

/// @brief Throws `errc::internal` naming the failed check unless `cond`.
inline void check(bool cond, std::string_view what) { disttrain::ensure(cond, "snippet", what); }

/// @brief Runs `body`, which must throw `disttrain::error` with code `code`.
template <class F>
void check_throws(disttrain::errc code, F&& body, std::string_view what) {
  try {
    body();
  } catch (const disttrain::error& e) {
    check(e.code() == code, what);
    return;
  }
  check(false, what);
}

/// @brief Runs the examples of one part; the exit status of main().
class runner {
 public:
  explicit runner(const char* part) : part_(part) {}
  template <class F>
  void run(const char* name, F&& example) {
    const auto start = std::chrono::steady_clock::now();
    try {
      example();
      ++passed_;
    } catch (const std::exception& e) {
      ++failed_;
      std::fprintf(stderr, "FAIL %s.%s: %s\n", part_, name, e.what());
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > 0.5) std::printf("slow: %s.%s took %.1f s\n", part_, name, s);
  }
  [[nodiscard]] int finish() const {
    std::printf("snippets.%s: %d examples passed, %d failed\n", part_, passed_, failed_);
    return failed_ == 0 && passed_ > 0 ? 0 : 1;
  }

 private:
  const char* part_;
  int passed_ = 0;
  int failed_ = 0;
};

}  // namespace snippets
