#pragma once
/// @file activation_buffers.hpp
/// @brief The payload half of a `exec_host`, for any model: per
/// microbatch the rank's four activation buffers, packed into and unpacked
/// from the messages of its bound program.
///
/// Per microbatch j (and model chunk k of an interleaved module: every
/// accessor takes it, 0 otherwise) a rank of chain stage c holds
/// - `input(j)`: the activation it receives from stage c - 1 (its replica's
///   samples in placement order, `rows x hidden` row-major per sample), and
///   `input_grad(j)`, the gradient of it that it sends back;
/// - `output(j)`: the activation it sends to stage c + 1, and
///   `output_grad(j)`, the gradient of it that it receives.
///
/// The model reads `input` / `output_grad` and writes `output` / `input_grad`
/// in F and B; `payload` and `received` do the rest: a crossing send packs its
/// route's source buffer (`output`, or `input_grad` for a gradient), a fan-out
/// send forwards the slices it received (from `input` / `output_grad`), and
/// every receive lands in `input` / `output_grad`.
///
/// @snippet bind.cpp activation_buffers

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "disttrain/bind/bind.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/kernels/copy_blocks.hpp"

namespace disttrain {

/// @brief Per-microbatch activation buffers of one rank (see the file comment).
template <class T>
class activation_buffers {
 public:
  /// @brief Sizes (and zeroes) the buffers for `mine`, which must outlive the iteration.
  void reset(const bound_rank& mine) {
    rank_ = &mine;
    const std::size_t M = mine.program.input_elements.size();  // microbatches x chunks
    mb_.assign(M, {});
    for (std::size_t j = 0; j < M; ++j) {
      const auto in = static_cast<std::size_t>(mine.program.input_elements[j]);
      const auto out = static_cast<std::size_t>(mine.program.output_elements[j]);
      mb_[j].x.assign(in, T{});
      mb_[j].dx.assign(in, T{});
      mb_[j].y.assign(out, T{});
      mb_[j].dy.assign(out, T{});
    }
    staging_.clear();
  }

  [[nodiscard]] std::span<T> input(int mb, int chunk = 0) { return at(mb, chunk).x; }
  [[nodiscard]] std::span<T> input_grad(int mb, int chunk = 0) { return at(mb, chunk).dx; }
  [[nodiscard]] std::span<T> output(int mb, int chunk = 0) { return at(mb, chunk).y; }
  [[nodiscard]] std::span<T> output_grad(int mb, int chunk = 0) { return at(mb, chunk).dy; }

  /// @brief The bytes of a point-to-point op: a send's packed data (valid
  /// until `reset`), a receive's landing buffer. Throws `invalid_argument`
  /// if the route's element size is not `sizeof(T)`.
  std::span<std::byte> payload(const bound_op& b) {
    const route_plan& r = rank().route_of(b);
    require(r.elem_size() == sizeof(T), "activation_buffers", "route of ", describe(b.op), " has ",
            r.elem_size(), "-byte elements, the buffers ", sizeof(T));
    const route_message& m = rank().message_of(b);
    std::vector<T>& stage = staging_[key(b)];
    stage.assign(static_cast<std::size_t>(m.elements), T{});
    if (is_send(b.op.kind))
      kernels::copy_blocks_cpu(std::as_bytes(source_of(b)),
                               std::as_writable_bytes(std::span(stage)), m.send_blocks, sizeof(T));
    return std::as_writable_bytes(std::span(stage));
  }

  /// @brief Unpacks a receive into `input` or `output_grad`.
  void received(const bound_op& b) {
    const route_message& m = rank().message_of(b);
    auto it = staging_.find(key(b));
    require(it != staging_.end(), "activation_buffers", describe(b.op),
            " received without a payload");
    mb_buf& buf = at(b);
    std::vector<T>& dst = b.op.kind == op_kind::recv_act ? buf.x : buf.dy;
    kernels::copy_blocks_cpu(std::as_bytes(std::span(it->second)),
                             std::as_writable_bytes(std::span(dst)), m.recv_blocks, sizeof(T));
    staging_.erase(it);
  }

 private:
  struct mb_buf {
    std::vector<T> x, y, dx, dy;
  };
  using op_key = std::tuple<int, int, int, int, int>;  // kind, mb, link, phase, message

  [[nodiscard]] const bound_rank& rank() const {
    require(rank_ != nullptr, "activation_buffers", "used before reset()");
    return *rank_;
  }
  mb_buf& at(int mb, int chunk) {
    const int chunks = rank().program.chunks();
    require_in_range(chunk, 0, chunks - 1, "activation_buffers.chunk");
    require_in_range(mb, 0, static_cast<int>(mb_.size()) / chunks - 1,
                     "activation_buffers.microbatch");
    return mb_[static_cast<std::size_t>(mb * chunks + chunk)];
  }
  // The buffers of a point-to-point op: its microbatch, this rank's chunk at its link.
  mb_buf& at(const bound_op& b) {
    return at(b.op.microbatch, rank().program.chunk_at_link(b.link).first);
  }
  static op_key key(const bound_op& b) {
    return {static_cast<int>(b.op.kind), b.op.microbatch, b.link, b.phase, b.message};
  }
  // A crossing send packs its route's source buffer; a fan-out send the
  // buffer its slices arrived in.
  std::span<const T> source_of(const bound_op& b) {
    mb_buf& buf = at(b);
    const bool act = b.op.kind == op_kind::send_act;
    if (b.phase == 0) return act ? buf.y : buf.dx;
    return act ? buf.x : buf.dy;
  }

  const bound_rank* rank_ = nullptr;
  std::vector<mb_buf> mb_;
  std::map<op_key, std::vector<T>> staging_;
};

}  // namespace disttrain
