#pragma once
/// @file backend_parts.hpp
/// @brief Pieces every backend writes the same way: the two `wait`
/// overloads that forward to the backend's `wait(request&, const
/// wait_deadline&)`, the nesting count of `group_start` / `group_end`, and
/// the per-rank route sequence numbers behind `route_transfer`'s abort
/// notices (`route_sequences`).
///
/// @code
/// class my_backend : public disttrain::detail::deadline_waits<my_backend> {
///  public:
///   using deadline_waits::wait;  // wait(r), wait(r, timeout)
///   void wait(request& r, const disttrain::wait_deadline& d);
///   void group_start() { group_.start(); }
///   void group_end() { group_.end(rank_); }
///  private:
///   disttrain::detail::group_nesting group_;
/// };
/// @endcode

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/core/check.hpp"

namespace disttrain::detail {

/// @brief CRTP base giving `Backend` the `wait(r)` (default timeout,
/// `options().timeout`) and `wait(r, timeout)` overloads of `comm_backend`
/// on top of its own `wait(request&, const wait_deadline&)`. `Backend`
/// brings them into scope with `using deadline_waits::wait;`.
///
/// They are templates only so that `Backend::request` is looked up at the
/// call, when `Backend` is complete: the constraint admits exactly that type.
/// (`B = Backend` defers the look-up; a constraint naming `Backend::request`
/// directly is substituted by nvcc as soon as the base is instantiated.)
template <class Backend>
class deadline_waits {
 public:
  /// @brief Waits with the default timeout (`options().timeout`).
  template <class Request, class B = Backend>
  requires std::same_as<Request, typename B::request>
  void wait(Request& r) { self().wait(r, wait_deadline::after(self().options().timeout)); }
  /// @brief Waits at most `timeout`; a timeout error quotes it.
  template <class Request, class B = Backend>
  requires std::same_as<Request, typename B::request>
  void wait(Request& r, std::chrono::milliseconds timeout) {
    self().wait(r, wait_deadline::after(timeout));
  }

 private:
  Backend& self() noexcept { return static_cast<Backend&>(*this); }
};

/// @brief Nesting count of a backend's `group_start` / `group_end` bracket:
/// `end` without a matching `start` throws `errc::invalid_argument` at
/// `"rank <rank><suffix>"` (e.g. `"rank 3 (nccl)"`), built only then: `end`
/// runs once per transfer group.
class group_nesting {
 public:
  void start() noexcept { ++depth_; }
  void end(int rank, std::string_view suffix = {}) {
    if (depth_ <= 0)
      fail(errc::invalid_argument, cat("rank ", rank, suffix), "group_end without group_start");
    --depth_;
  }
  /// @brief Open brackets (0: outside any group).
  [[nodiscard]] int depth() const noexcept { return depth_; }

 private:
  int depth_ = 0;
};

/// @brief Removes `item` from `queues[key]` (a backend's unmatched
/// operations per (peer, tag), in posting order), if there. An emptied queue
/// is kept for the next operation (no allocation per message) unless more
/// than `max_idle` keys are there.
template <class Map>
void erase_queued(Map& queues, const typename Map::key_type& key,
                  const typename Map::mapped_type::value_type& item,
                  std::size_t max_idle) noexcept {
  const auto it = queues.find(key);
  if (it == queues.end()) return;
  auto& q = it->second;
  for (auto o = q.begin(); o != q.end(); ++o)
    if (*o == item) {
      q.erase(o);
      break;
    }
  if (q.empty() && queues.size() > max_idle) queues.erase(it);
}

/// @brief How many routes one rank has run with each peer, per direction:
/// `route_transfer` numbers its abort notices with these counts
/// (route_transfer.hpp, "Abort notices"). A sender and its receiver count the
/// same routes (every route in which the one sends to the other), so the
/// sender's count for a route equals the receiver's, with no message
/// exchanged; a notice that carries another number is stale (from an
/// earlier route) and is ignored. A backend keeps one table per rank and
/// hands it out with `route_sequences()` (local: in the `local_world`, shared
/// by all endpoints of the rank; MPI: per backend, i.e. per communicator).
/// One thread per rank uses it, as it uses the rank's endpoint. The
/// executor's abort notices count its runs the same way, on a third side
/// (`executor`: every run in which the two ranks are peers, counted by both).
class route_sequences {
 public:
  /// @brief Which end of the route's messages this rank is (`executor`: an
  /// executor run, symmetric).
  enum class side { sender, receiver, executor };
  /// @brief The number of this route (run) with `peer` (0, 1, ... per side), counted.
  [[nodiscard]] std::uint64_t next(int peer, side s) {
    auto& counts = s == side::sender ? sent_ : s == side::receiver ? received_ : runs_;
    const auto i = static_cast<std::size_t>(peer);
    if (counts.size() <= i) counts.resize(i + 1, 0);
    return counts[i]++;
  }

 private:
  std::vector<std::uint64_t> sent_, received_, runs_;
};

/// @brief Whether `B` can carry abort notices (`route_transfer`'s and the
/// executor's): waits that give nothing up at a time point (`try_wait`) and
/// per-peer sequence numbers (`route_sequences()`).
template <class B>
concept notice_backend = comm_backend<B> &&
    requires(B& b, typename B::request& r, std::chrono::steady_clock::time_point t) {
  { b.try_wait(r, t) } -> std::same_as<bool>;
  { b.route_sequences() } -> std::same_as<route_sequences&>;
};

/// @brief Waits for `r` until `until` with the backend's own wait in slices
/// of `slice`, calling `between()` (which may throw, e.g. for an abort
/// notice) after each slice that did not complete it. True when `r`
/// completed, false when `until` passed (`r` stays posted).
template <notice_backend B, class Between>
bool wait_in_slices(B& b, typename B::request& r, std::chrono::steady_clock::time_point until,
                    std::chrono::milliseconds slice, Between&& between) {
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return false;
    if (b.try_wait(r, std::min(until, now + slice))) return true;
    between();
  }
}

}  // namespace disttrain::detail
