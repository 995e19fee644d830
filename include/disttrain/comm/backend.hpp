#pragma once
/// @file backend.hpp
/// @brief The `comm_backend` concept every transport satisfies (local threads,
/// MPI, NCCL), the description of one transfer used in error messages, and
/// `wait_all`.
///
/// A backend moves bytes between ranks of one world:
/// - `isend(bytes, peer, tag)` / `irecv(bytes, peer, tag)` start a transfer and
///   return a `request`; messages between one pair of ranks with one tag are
///   matched in posting order (MPI semantics); the receive size must equal
///   the send size (a mismatch is `errc::comm_error` naming both sizes).
/// - `wait(request)` blocks until completion or the backend's timeout
///   (`options().timeout`), `wait(request, timeout)` with an explicit one;
///   `test(request)` polls. A timeout throws `errc::timeout` and a transport
///   failure `errc::comm_error`, both with `where` = `"rank R -> rank P tag T"`
///   (or `<-` for a receive) and the byte count in the message.
/// - `group_start()` / `group_end()` bracket a batch of sends and receives
///   that the backend may submit together (required by NCCL for
///   send/receive pairs that would otherwise deadlock; no-ops elsewhere).
/// - `barrier()`, `broadcast(bytes, root)`, `allgather(mine, all)`: the few
///   collectives bootstrap needs; they honour the timeout too.
/// - Optional, for `route_transfer`'s abort notices (route_transfer.hpp):
///   `try_wait(request, time_point)` waits like `wait` but returns false at
///   the time point without giving up on the request, and
///   `route_sequences()` hands out the rank's `detail::route_sequences`
///   (local, MPI and `fault_backend` over them have both).
///
/// Buffers live in `B::memory` (`memory_space::host` for local and MPI,
/// `memory_space::device` for NCCL).
///
/// @snippet comm.cpp backend

#include <chrono>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Where a backend's buffers live.
enum class memory_space { host, device };

/// @brief Options shared by every backend.
///
/// @snippet comm.cpp comm_options
struct comm_options {
  /// Deadline of every wait (point-to-point and collectives). Default 5 minutes.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

/// @brief One point-to-point transfer as seen from `self`: used to name the
/// peer, tag and byte count in errors.
///
/// @snippet comm.cpp transfer_info
struct transfer_info {
  int self = -1;          ///< this rank
  int peer = -1;          ///< the other rank
  int tag = 0;            ///< message tag
  std::size_t bytes = 0;  ///< bytes of this side's buffer
  bool is_send = true;    ///< true: self sends to peer; false: self receives from peer

  /// @brief `"rank S -> rank P tag T"` for a send, `"rank S <- rank P tag T"` for a receive.
  [[nodiscard]] std::string where() const {
    return cat("rank ", self, is_send ? " -> " : " <- ", "rank ", peer, " tag ", tag);
  }
  /// @brief `"send of N bytes"` / `"receive of N bytes"`.
  [[nodiscard]] std::string what() const {
    return cat(is_send ? "send of " : "receive of ", bytes, " bytes");
  }
};

/// @brief Owner of a send buffer that a backend may have to keep alive after
/// the transfer's request is gone (a timed-out send that MPI could not
/// cancel still reads its buffer). `route_transfer` hands its staging leases
/// to backends that accept them (`request::keep_buffer`).
class send_buffer_owner {
 public:
  send_buffer_owner() = default;
  send_buffer_owner(const send_buffer_owner&) = delete;
  send_buffer_owner& operator=(const send_buffer_owner&) = delete;
  virtual ~send_buffer_owner() = default;
  /// @brief The backend keeps the buffer beyond the transfer: cut every tie
  /// to objects that may be destroyed first (e.g. return nothing to a pool).
  virtual void detach() noexcept = 0;
};

namespace detail {
/// @brief Throws `errc::timeout` for transfer `t` after `waited`; `note` is
/// appended to the message (what became of the request and its buffer).
[[noreturn]] inline void fail_timeout(const transfer_info& t, std::chrono::milliseconds waited,
                                      std::string_view note = {}) {
  fail(errc::timeout, t.where(), t.what(), " did not complete within ", waited.count(),
       " ms (peer silent, dead or not posting the matching ", t.is_send ? "receive" : "send", ")",
       note);
}
/// @brief The text of a size mismatch, the same on every backend and on both
/// sides: `size mismatch: rank 0 sends 262144 bytes but rank 1 posted a
/// receive of 8192 bytes (tag 3)`. `sent` is the sender's size as text (a
/// number, or "more than N" where the transport does not tell).
[[nodiscard]] inline std::string size_mismatch(int sender, std::string_view sent,
                                               const transfer_info& receive) {
  return cat("size mismatch: rank ", sender, " sends ", sent, " bytes but rank ", receive.self,
             " posted a ", receive.what(), " (tag ", receive.tag, ")");
}
/// @brief The text of dead peers, the same on every backend (local:
/// `local_world::mark_dead`; MPI: ULFM): `rank 1 is dead`, `ranks 1, 3 are
/// dead`, or `a rank is dead` where the transport does not say which.
[[nodiscard]] inline std::string dead_ranks_text(std::span<const int> ranks) {
  if (ranks.empty()) return "a rank is dead";
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += cat(i ? ", " : "", ranks[i]);
  return s + (ranks.size() == 1 ? " is dead" : " are dead");
}
/// @brief Whether an error message names a dead peer (`dead_ranks_text`).
[[nodiscard]] inline bool names_dead_rank(std::string_view message) noexcept {
  return message.find(" is dead") != std::string_view::npos ||
         message.find(" are dead") != std::string_view::npos;
}
/// @brief The deadline `timeout` from now, saturated at `time_point::max()`
/// (a huge timeout such as `milliseconds::max()` means "never", not an overflow).
/// Every wait in comm/ and exec/ computes its deadline here.
[[nodiscard]] inline std::chrono::steady_clock::time_point deadline_after(
    std::chrono::milliseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::time_point::max() - now);
  return timeout >= room ? std::chrono::steady_clock::time_point::max() : now + timeout;
}
/// @brief Remaining time to `deadline` (never negative).
[[nodiscard]] inline std::chrono::milliseconds remaining(
    std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}
}  // namespace detail

/// @brief The deadline of a group of waits together with the timeout it was
/// set from. Waiting for several requests under one deadline passes this
/// instead of the time left, so a timeout error quotes the configured timeout
/// (`within 2000 ms`), not what was left of it when the last wait began
/// (`within 1999 ms`). Backends accept it in `wait(request, wait_deadline)`;
/// `detail::wait_until` falls back to `wait(request, remaining())` for a
/// backend without that overload.
///
/// @snippet comm.cpp wait_deadline
struct wait_deadline {
  std::chrono::steady_clock::time_point at{};  ///< when the waits give up
  std::chrono::milliseconds timeout{0};        ///< the configured timeout `at` was set from

  /// @brief The deadline `timeout` from now (saturated: a huge timeout means "never").
  [[nodiscard]] static wait_deadline after(std::chrono::milliseconds timeout) {
    return {detail::deadline_after(timeout), timeout};
  }
  /// @brief Time left (never negative).
  [[nodiscard]] std::chrono::milliseconds remaining() const { return detail::remaining(at); }
};

namespace detail {
/// @brief `b.wait(r, d)` where the backend takes a `wait_deadline`, else
/// `b.wait(r, d.remaining())` (its timeout error then quotes the time left).
template <class B>
void wait_until(B& b, typename B::request& r, const wait_deadline& d) {
  if constexpr (requires { b.wait(r, d); })
    b.wait(r, d);
  else
    b.wait(r, d.remaining());
}
}  // namespace detail

/// @brief Requirements on a communication backend (see the file comment).
template <class B>
concept comm_backend = requires(B& b, const B& cb, std::span<const std::byte> out,
                                std::span<std::byte> in, typename B::request& req,
                                std::chrono::milliseconds ms) {
  typename B::request;
  requires std::movable<typename B::request>;
  { B::memory } -> std::convertible_to<memory_space>;
  { cb.rank() } -> std::same_as<int>;
  { cb.size() } -> std::same_as<int>;
  { cb.options() } -> std::convertible_to<const comm_options&>;
  { b.isend(out, 1, 1) } -> std::same_as<typename B::request>;
  { b.irecv(in, 1, 1) } -> std::same_as<typename B::request>;
  { b.wait(req) } -> std::same_as<void>;
  { b.wait(req, ms) } -> std::same_as<void>;
  { b.test(req) } -> std::same_as<bool>;
  { b.group_start() } -> std::same_as<void>;
  { b.group_end() } -> std::same_as<void>;
  { b.barrier() } -> std::same_as<void>;
  { b.broadcast(in, 0) } -> std::same_as<void>;
  { b.allgather(out, in) } -> std::same_as<void>;
};

/// @brief `wait_all` with an explicit timeout (a timeout error quotes it).
template <comm_backend B>
void wait_all(B& b, std::span<typename B::request> reqs, std::chrono::milliseconds timeout) {
  const auto d = wait_deadline::after(timeout);
  for (auto& r : reqs) detail::wait_until(b, r, d);
}

/// @brief Waits for every request in `reqs` under one deadline (`timeout`, or
/// the backend's default), in order; throws at the first failure or when the
/// deadline passes (a request already complete at the deadline still counts).
///
/// @snippet comm.cpp wait_all
template <comm_backend B>
void wait_all(B& b, std::span<typename B::request> reqs) {
  wait_all(b, reqs, b.options().timeout);
}

}  // namespace disttrain
