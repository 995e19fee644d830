#pragma once
// A tiny test harness for MPI programs: CHECK-like macros that count failures
// per rank and print them with the rank, and a runner that reduces the
// failure count over the world. Exit code: 0 all passed, 1 any failure.

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/core/error.hpp"

namespace disttrain::mpitest {

inline int& failures() {
  static int f = 0;
  return f;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

#define MPI_CHECK(cond)                                                          \
  do {                                                                           \
    if (!(cond)) {                                                               \
      ++disttrain::mpitest::failures();                                          \
      std::fprintf(stderr, "[rank %d] %s:%d: CHECK failed: %s\n",                \
                   disttrain::mpitest::world_rank(), __FILE__, __LINE__, #cond); \
    }                                                                            \
  } while (false)

// ctest's skip code (77) after a "SKIPPED" line when the world has fewer than
// `min_ranks` ranks, else 0: `if (int rc = skip_unless_ranks(2, "x")) return rc;`.
inline int skip_unless_ranks(int min_ranks, const char* test) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n >= min_ranks) return 0;
  if (world_rank() == 0)
    std::printf("SKIPPED: %s needs at least %d ranks (got %d)\n", test, min_ranks, n);
  return 77;
}

// Runs the named test cases in order; a case's exception counts as a failure.
// Returns the process exit code (identical on every rank).
inline int run_all(const std::vector<std::pair<std::string, std::function<void()>>>& cases) {
  const int me = world_rank();
  for (const auto& [name, fn] : cases) {
    const int before = failures();
    try {
      fn();
    } catch (const std::exception& e) {
      ++failures();
      std::fprintf(stderr, "[rank %d] %s: unexpected exception: %s\n", me, name.c_str(), e.what());
    }
    int mine = failures() - before, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) std::printf("%-60s %s\n", name.c_str(), total == 0 ? "passed" : "FAILED");
  }
  int mine = failures(), total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) std::printf("%s: %d failure(s)\n", total == 0 ? "ALL PASSED" : "FAILED", total);
  return total == 0 ? 0 : 1;
}

// Whether `s` contains `part`.
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs `fn`, expecting a disttrain::error; returns it (code internal + empty where if none).
inline disttrain::error capture(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const disttrain::error& e) {
    return e;
  }
  return disttrain::error(disttrain::errc::internal, "", "no exception");
}

}  // namespace disttrain::mpitest
