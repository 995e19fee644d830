#pragma once
/// @file activation_buffers.hpp
/// @brief The payload half of a `exec_host`, for any model: per
/// microbatch the rank's four activation buffers, packed into and unpacked
/// from the messages of its bound program.
///
/// Per microbatch j (and model chunk k of an interleaved module: every
/// accessor takes it, 0 otherwise) and per field f of the link (bind.hpp,
/// `link_shape`: 0 for a single-tensor link; `field_index` finds one by
/// name) a rank of chain stage c holds
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
/// every receive lands in `input` / `output_grad`. A message of several
/// fields packs each field's part at `bound_rank::field_offset`. Every field
/// has elements of type T (for fields of several dtypes, write the payload
/// side over bytes the same way).
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
    const bound_program& p = mine.program;
    const auto F = static_cast<std::size_t>(p.fields);
    const std::size_t M = p.input_elements.size() / F;  // microbatches x chunks
    mb_.assign(M, {});
    for (std::size_t j = 0; j < M; ++j)
      for (std::size_t f = 0; f < F; ++f) {
        const auto in = static_cast<std::size_t>(p.input_elements[j * F + f]);
        const auto out = static_cast<std::size_t>(p.output_elements[j * F + f]);
        mb_buf& b = mb_[j];
        b.x.emplace_back(in, T{});
        b.dx.emplace_back(in, T{});
        b.y.emplace_back(out, T{});
        b.dy.emplace_back(out, T{});
      }
    staging_.clear();
  }

  [[nodiscard]] std::span<T> input(int mb, int chunk = 0, std::size_t field = 0) {
    return field_of(at(mb, chunk).x, field);
  }
  [[nodiscard]] std::span<T> input_grad(int mb, int chunk = 0, std::size_t field = 0) {
    return field_of(at(mb, chunk).dx, field);
  }
  [[nodiscard]] std::span<T> output(int mb, int chunk = 0, std::size_t field = 0) {
    return field_of(at(mb, chunk).y, field);
  }
  [[nodiscard]] std::span<T> output_grad(int mb, int chunk = 0, std::size_t field = 0) {
    return field_of(at(mb, chunk).dy, field);
  }

  /// @brief The bytes of a point-to-point op: a send's packed data (valid
  /// until `reset`), a receive's landing buffer. Throws `invalid_argument`
  /// if the route's element size is not `sizeof(T)`.
  std::span<std::byte> payload(const bound_op& b) {
    const std::span<const route_plan> rs = rank().routes_of(b);
    for (const route_plan& r : rs)
      require(r.elem_size() == sizeof(T), "activation_buffers", "route of ", describe(b.op),
              " has ", r.elem_size(), "-byte elements, the buffers ", sizeof(T));
    std::vector<std::byte>& stage = staging_[key(b)];
    stage.assign(static_cast<std::size_t>(rank().field_offset(b, rs.size())), std::byte{});
    if (is_send(b.op.kind))
      for (std::size_t f = 0; f < rs.size(); ++f)
        kernels::copy_blocks_cpu(std::as_bytes(source_of(b, f)), part(stage, b, f),
                                 rank().message_of(b, f).send_blocks, sizeof(T));
    return stage;
  }

  /// @brief Unpacks a receive into `input` or `output_grad`.
  void received(const bound_op& b) {
    auto it = staging_.find(key(b));
    require(it != staging_.end(), "activation_buffers", describe(b.op),
            " received without a payload");
    mb_buf& buf = at(b);
    std::vector<std::vector<T>>& dst = b.op.kind == op_kind::recv_act ? buf.x : buf.dy;
    const std::size_t fields = rank().routes_of(b).size();
    for (std::size_t f = 0; f < fields; ++f)
      kernels::copy_blocks_cpu(std::as_bytes(part(it->second, b, f)),
                               std::as_writable_bytes(field_of(dst, f)),
                               rank().message_of(b, f).recv_blocks, sizeof(T));
    staging_.erase(it);
  }

 private:
  struct mb_buf {  // per field
    std::vector<std::vector<T>> x, y, dx, dy;
  };

  static std::span<T> field_of(std::vector<std::vector<T>>& v, std::size_t field) {
    require_in_range(field, std::size_t{0}, v.size() - 1, "activation_buffers.field");
    return v[field];
  }
  // Field f's part of a staged message.
  std::span<std::byte> part(std::vector<std::byte>& stage, const bound_op& b, std::size_t f) {
    return std::span(stage).subspan(static_cast<std::size_t>(rank().field_offset(b, f)));
  }
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
  std::span<const T> source_of(const bound_op& b, std::size_t f) {
    mb_buf& buf = at(b);
    const bool act = b.op.kind == op_kind::send_act;
    if (b.phase == 0) return field_of(act ? buf.y : buf.dx, f);
    return field_of(act ? buf.x : buf.dy, f);
  }

  const bound_rank* rank_ = nullptr;
  std::vector<mb_buf> mb_;
  std::map<op_key, std::vector<std::byte>> staging_;
};

}  // namespace disttrain
