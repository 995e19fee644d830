#pragma once
/// @file host.hpp
/// @brief What the executor asks of the training code on one rank: the
/// `exec_host` concept and a gradient bucket (`grad_bucket`).
///
/// The executor decides *when* things happen (receives posted ahead of need,
/// sends asynchronous, bucket reductions started as soon as the bucket's
/// backward work is done); the host decides *what* they compute and *where*
/// the bytes are:
///
/// | callback | called | host does |
/// |---|---|---|
/// | `forward(op)` | at F | forward of (stage, chunk, microbatch); its input has been `received` |
/// | `backward(op)` | at B | activation gradient (and the weight gradient unless the program has W ops) |
/// | `weight(op)` | at W | weight gradient of a split backward |
/// | `payload(b)` | when a send op is reached; ahead of need for a receive op | the op's bytes, `b.bytes` long: a send's packed data (read until the iteration ends), a receive's landing buffer |
/// | `received(b)` | when a receive op's message has arrived (and its stamp checked) | unpacks it for the consuming F or B |
/// | `bucket_ready(op)` | at grad_sync_start | returns the bucket's gradients |
/// | `bucket_reduced(op)` | after grad_sync_finish | the bucket now holds the sum over the program's `dp_group` |
/// | `optimizer_step(op)` | at the optimizer step | updates the rank's parameters |
///
/// `op` is the schedule op (kind, stage, chunk, microbatch, bucket), `b` the
/// bound op around it (peer, bytes, tag, link, route phase and message).
/// `bind/activation_buffers.hpp` implements the payload side for any model.
///
/// @snippet exec.cpp host

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>

#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/op.hpp"

namespace disttrain {

/// @brief A gradient bucket handed to the executor for data-parallel reduction.
///
/// @snippet exec.cpp grad_bucket
template <class T>
struct grad_bucket {
  std::span<T>
      data;  ///< summed in place over the program's `dp_group`; valid until `bucket_reduced`
};

/// @brief Requirements on the training code driven by `executor` (see the file comment).
template <class H>
concept exec_host = requires(H& h, const schedule_op& op, const bound_op& b) {
  typename H::grad_type;
  requires std::is_arithmetic_v<typename H::grad_type>;
  { h.forward(op) } -> std::same_as<void>;
  { h.backward(op) } -> std::same_as<void>;
  { h.weight(op) } -> std::same_as<void>;
  { h.optimizer_step(op) } -> std::same_as<void>;
  { h.bucket_ready(op) } -> std::same_as<grad_bucket<typename H::grad_type>>;
  { h.bucket_reduced(op) } -> std::same_as<void>;
  { h.payload(b) } -> std::same_as<std::span<std::byte>>;
  { h.received(b) } -> std::same_as<void>;
};

}  // namespace disttrain
