#pragma once
/// @file version.hpp
/// @brief Library version macros and a constexpr accessor.
///
/// @snippet core.cpp version

#define DISTTRAIN_VERSION_MAJOR 0
#define DISTTRAIN_VERSION_MINOR 1
#define DISTTRAIN_VERSION_PATCH 0
/// Single integer, e.g. 100 for 0.1.0: major*10000 + minor*100 + patch.
#define DISTTRAIN_VERSION \
  (DISTTRAIN_VERSION_MAJOR * 10000 + DISTTRAIN_VERSION_MINOR * 100 + DISTTRAIN_VERSION_PATCH)
#define DISTTRAIN_VERSION_STRING "0.1.0"

namespace disttrain {
inline constexpr int version_major = DISTTRAIN_VERSION_MAJOR;
inline constexpr int version_minor = DISTTRAIN_VERSION_MINOR;
inline constexpr int version_patch = DISTTRAIN_VERSION_PATCH;
/// @brief The version as "major.minor.patch".
inline constexpr const char* version_string = DISTTRAIN_VERSION_STRING;
}  // namespace disttrain
