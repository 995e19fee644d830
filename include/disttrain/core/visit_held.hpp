#pragma once
/// @file visit_held.hpp
/// @brief `visit_held(f, v)`: calls `f` with the alternative a `std::variant`
/// holds, through a chain of index tests. It replaces `std::visit` in the
/// headers: `std::visit` builds a dispatch table per call site, which cost
/// parse time in every translation unit that includes them
/// (docs/header_cost.md). Public: model/ uses it, and so may a trainer.

#include <cstddef>
#include <variant>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief `f(alternative held by v)`; `f` returns the same type for every
/// alternative. Throws `errc::internal` for a valueless variant (one whose
/// assignment threw), where `std::visit` would throw `bad_variant_access`.
template <std::size_t I = 0, class F, class... Ts>
decltype(auto) visit_held(F&& f, const std::variant<Ts...>& v) {
  if constexpr (I + 1 < sizeof...(Ts)) {
    if (v.index() == I) return f(*std::get_if<I>(&v));
    return visit_held<I + 1>(static_cast<F&&>(f), v);
  } else {
    ensure(v.index() == I, "visit_held", "valueless variant");
    return f(*std::get_if<I>(&v));
  }
}

}  // namespace disttrain
