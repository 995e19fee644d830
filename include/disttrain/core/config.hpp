#pragma once
/// @file config.hpp
/// @brief Portability macros shared by every part of disttrain.
///
/// - `DISTTRAIN_HD`: `__host__ __device__` under nvcc, empty otherwise, for the
///   few small value functions that device code may call.
/// - `DISTTRAIN_HOST_ONLY_HEADER(name)`: placed at the top of a header that
///   uses fmt (formatters, tables). Such headers are host-only because fmt 9's
///   compile-time format strings do not compile under nvcc in C++20 mode; in a
///   `.cu` translation unit they stop compilation with a clear message. See
///   docs/errors.md, "Where fmt may appear".

#if defined(__CUDACC__)
#define DISTTRAIN_HD __host__ __device__
#else
#define DISTTRAIN_HD
#endif

#if defined(__CUDACC__)
#define DISTTRAIN_HOST_ONLY_HEADER(name)                                           \
  static_assert(false, "disttrain: " name                                          \
                       " is host-only (it uses fmt, which does not compile under " \
                       "nvcc in C++20 mode); include it from a .cpp file")
#else
#define DISTTRAIN_HOST_ONLY_HEADER(name) static_assert(true, "")
#endif
