#pragma once
// Includes Catch2 v2 or v3 behind one name, plus matchers used by the tests.
#if defined(DISTTRAIN_CATCH2_V3)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#else
#include <catch2/catch.hpp>
#endif

#include <string>

#include "disttrain/core/error.hpp"

/// Checks that `expr` throws disttrain::error with category `expected_code` and a
/// where() containing `where_part`.
#define DISTTRAIN_CHECK_ERROR(expr, expected_code, where_part)                        \
  do {                                                                                \
    bool disttrain_thrown_ = false;                                                   \
    try {                                                                             \
      (void)(expr);                                                                   \
    } catch (const disttrain::error& disttrain_e_) {                                  \
      disttrain_thrown_ = true;                                                       \
      INFO("what(): " << disttrain_e_.what());                                        \
      CHECK(disttrain_e_.code() == (expected_code));                                  \
      CHECK(std::string(disttrain_e_.where()).find(where_part) != std::string::npos); \
    }                                                                                 \
    CHECK(disttrain_thrown_);                                                         \
  } while (false)
