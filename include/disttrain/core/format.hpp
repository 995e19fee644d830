#pragma once
/// @file format.hpp
/// @brief fmt support for core types (host-only: fmt does not compile under
/// nvcc in C++20 mode, see docs/errors.md).
///
/// @snippet core.cpp format

#include "disttrain/core/config.hpp"
DISTTRAIN_HOST_ONLY_HEADER("disttrain/core/format.hpp");

#include <fmt/format.h>

#include "disttrain/core/error.hpp"

template <>
struct fmt::formatter<disttrain::errc> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(disttrain::errc c, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(disttrain::to_string(c), ctx);
  }
};
