#pragma once
/// @file format.hpp
/// @brief fmt formatters for cost results (host-only: uses fmt).
///
/// @snippet cost.cpp format

#include "disttrain/core/config.hpp"
DISTTRAIN_HOST_ONLY_HEADER("disttrain/cost/format.hpp");

#include <fmt/format.h>

#include "disttrain/cost/calibration.hpp"
#include "disttrain/cost/stage.hpp"

template <>
struct fmt::formatter<disttrain::stage_times> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const disttrain::stage_times& t, FormatContext& ctx) const {
    return fmt::format_to(ctx.out(), "F {:.3f} ms  B {:.3f} ms  W {:.3f} ms", t.forward_s * 1e3,
                          t.backward_s * 1e3, t.weight_grad_s * 1e3);
  }
};

template <>
struct fmt::formatter<disttrain::memory_breakdown> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const disttrain::memory_breakdown& m, FormatContext& ctx) const {
    return fmt::format_to(
        ctx.out(), "{:.2f} GB (params {:.2f}, grads {:.2f}, optimizer {:.2f}, activations {:.2f})",
        m.total() / 1e9, m.params / 1e9, m.grads / 1e9, m.optimizer / 1e9, m.activations / 1e9);
  }
};

template <>
struct fmt::formatter<disttrain::fit_result> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const disttrain::fit_result& r, FormatContext& ctx) const {
    return fmt::format_to(
        ctx.out(),
        "e_max {:.4f}, flops_half {:.3e}, tp_penalty {:.4f}; R^2 {:.5f}, max rel. error {:.2f}%, "
        "{} samples",
        r.params.e_max, r.params.flops_half, r.params.tp_penalty, r.r_squared,
        r.max_relative_error * 100, r.samples);
  }
};
