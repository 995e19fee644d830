#pragma once
/// @file fmt.hpp
/// @brief Read by Doxygen only (docs/Doxyfile), never compiled: it declares
/// fmt's formatter template, so that Doxygen can place the specialisations in
/// the `<part>/format.hpp` headers (without it Doxygen 1.9 stops on an
/// "internal inconsistency").

/// @brief {fmt}, the formatting library (https://fmt.dev): disttrain's
/// host-only `<part>/format.hpp` headers specialise its `formatter`.
namespace fmt {
/// @brief fmt's formatter template; see the specialisations listed below.
template <class T, class Char>
struct formatter;
}  // namespace fmt
