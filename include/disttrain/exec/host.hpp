#pragma once
/// @file host.hpp
/// @brief What the executor asks of the training code on one rank: the
/// `exec_host` concept, the messages of a point-to-point op (`exec_message`)
/// and a gradient bucket (`grad_bucket`).
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
/// | `messages(op, out)` | when a send op is reached; ahead of need for a receive op | appends the op's messages: peer and bytes (a send's bytes are read until the iteration ends; a receive's are filled) |
/// | `received(op)` | when every message of a receive op has arrived | unpacks them for the consuming F or B |
/// | `bucket_ready(op)` | at grad_sync_start | returns the bucket's gradients and its data-parallel group |
/// | `bucket_reduced(op)` | after grad_sync_finish | the bucket now holds the sum over the group |
/// | `optimizer_step(op)` | at the optimizer step | updates the rank's parameters |
///
/// A point-to-point op may carry several messages (a route between modules
/// with different data-parallel degrees: one per peer), each to or from its
/// own peer; `exec_message::sub` tells apart several messages between the
/// same two ranks for one op (both sides must number them alike).
///
/// @snippet exec.cpp host

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/op.hpp"

namespace disttrain {

/// @brief One message of a point-to-point op.
///
/// @snippet exec.cpp exec_message
struct exec_message {
  int peer = -1;               ///< the other rank (global rank of the backend)
  std::span<std::byte> bytes;  ///< send: read until the iteration ends; receive: written
  int sub = 0;                 ///< index among messages to the same peer for this op
};

/// @brief A gradient bucket handed to the executor for data-parallel reduction.
///
/// @snippet exec.cpp grad_bucket
template <class T>
struct grad_bucket {
  std::span<T> data;           ///< summed in place over `group`; valid until `bucket_reduced`
  std::span<const int> group;  ///< ascending global ranks of the DP group, this rank included
};

/// @brief The compute callbacks every host provides (F, B, W, step, buckets).
template <class H>
concept compute_host = requires(H& h, const schedule_op& op) {
  typename H::grad_type;
  requires std::is_arithmetic_v<typename H::grad_type>;
  { h.forward(op) } -> std::same_as<void>;
  { h.backward(op) } -> std::same_as<void>;
  { h.weight(op) } -> std::same_as<void>;
  { h.optimizer_step(op) } -> std::same_as<void>;
  { h.bucket_ready(op) } -> std::same_as<grad_bucket<typename H::grad_type>>;
  { h.bucket_reduced(op) } -> std::same_as<void>;
};

/// @brief Requirements on the training code driven by `executor` (see the file comment).
template <class H>
concept exec_host = compute_host<H> &&
    requires(H& h, const schedule_op& op, std::vector<exec_message>& out) {
  { h.messages(op, out) } -> std::same_as<void>;
  { h.received(op) } -> std::same_as<void>;
};

/// @brief A host of bound programs (schedule/bound_program.hpp): compute as
/// `exec_host`; for each point-to-point op (one message, sized by the
/// program) `payload(op)` gives its bytes (a send's packed data, kept alive
/// until the iteration ends; a receive's landing buffer) and `received(op)`
/// unpacks a receive. `bucket_ready`'s group is ignored: the program's
/// `dp_group` is used. `bind/activation_buffers.hpp` implements the
/// payload side for any model.
template <class H>
concept bound_exec_host = compute_host<H> && requires(H& h, const bound_op& b) {
  { h.payload(b) } -> std::same_as<std::span<std::byte>>;
  { h.received(b) } -> std::same_as<void>;
};

}  // namespace disttrain
