#pragma once
/// @file fault_backend.hpp
/// @brief Fault injection: a `comm_backend` that wraps another one and, with
/// a seed, delays, drops, duplicates, truncates or corrupts its sends, or
/// kills its rank. For tests of the failure contract (docs/comm.md): under
/// every fault a transfer must deliver the correct bytes or throw a
/// `disttrain::error` within its timeout, never hand back wrong data silently.
///
/// Each rank wraps its own endpoint. Whether the n-th send of a rank is
/// faulted, and how, depends only on (seed, rank, n): a run is reproduced by
/// its seed. Faults hit point-to-point sends (`isend`); receives, `wait`,
/// `test` and the collectives pass through (a killed rank fails them all).
///
/// | kind | what the peer sees |
/// |---|---|
/// | `delay` | the send is posted `min_delay`..`max_delay` later (the sender's thread sleeps) |
/// | `drop` | nothing; the sender's request completes at once (a lost eager message) |
/// | `duplicate` | the message twice; the copy is never waited for |
/// | `truncate` | a message of another size: the first half (an empty one: 1 byte) |
/// | `corrupt` | the right size, one byte flipped (non-empty messages only) |
/// | `kill` | the rank stops: this and every later call throws `errc::comm_error`; `on_kill` runs first (e.g. `local_world::mark_dead`) |
///
/// Copies (duplicate, truncate, corrupt) live in buffers of the wrapper; a
/// backend that may keep a timed-out send's buffer (MPI, `keep_buffer`) is
/// handed them, so they are never freed while the transport may read them.
/// Buffers must be host memory.
///
/// Rank 1 of `disttrain::local_world world(3, {std::chrono::milliseconds(100)})`
/// behind a fault backend, while ranks 0 and 2 run their part of the route
/// on other threads:
/// @snippet comm.cpp fault_backend

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/detail/backend_parts.hpp"
#include "disttrain/comm/detail/unique_handle.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/rng.hpp"

namespace disttrain {

/// @brief What `fault_backend` does to a faulted send (see the file comment).
enum class fault_kind : int { delay, drop, duplicate, truncate, corrupt, kill };

/// @brief Number of `fault_kind`s.
inline constexpr int fault_kind_count = 6;

/// @brief `"delay"`, `"drop"`, ...
[[nodiscard]] constexpr const char* to_string(fault_kind k) noexcept {
  constexpr std::array<const char*, fault_kind_count> names{"delay",    "drop",    "duplicate",
                                                            "truncate", "corrupt", "kill"};
  const int i = static_cast<int>(k);
  return i >= 0 && i < fault_kind_count ? names[static_cast<std::size_t>(i)] : "?";
}

/// @brief Settings of a `fault_backend`.
///
/// @snippet comm.cpp fault_options
struct fault_options {
  std::uint64_t seed = 0;  ///< with the rank and the send's index, decides every fault
  double rate = 0.1;       ///< probability that a send is faulted, in [0, 1]
  /// Kinds to draw from (uniformly; `truncate`/`corrupt` are skipped for
  /// empty messages where another kind is listed).
  std::vector<fault_kind> kinds{fault_kind::delay,    fault_kind::drop,    fault_kind::duplicate,
                                fault_kind::truncate, fault_kind::corrupt, fault_kind::kill};
  std::chrono::milliseconds min_delay{0};   ///< shortest `delay`
  std::chrono::milliseconds max_delay{20};  ///< longest `delay` (>= `min_delay`)
  int max_faults = -1;                      ///< stop injecting after this many (< 0: no limit)
  std::function<void(int)> on_kill{};       ///< called with the rank when it is killed
};

/// @brief One injected fault.
struct fault_record {
  fault_kind kind = fault_kind::delay;
  transfer_info send;                  ///< the faulted send as posted by the caller
  std::size_t index = 0;               ///< the send's index among this rank's sends
  std::chrono::milliseconds delay{0};  ///< `delay` only
};

namespace detail {
/// Owner of a wrapper's copy of a message; chained to the owner the caller
/// handed over with `keep_buffer`, if any.
struct fault_copy final : send_buffer_owner {
  explicit fault_copy(std::vector<std::byte> d) noexcept : data(std::move(d)) {}
  void detach() noexcept override {
    if (next) next->detach();
  }
  std::vector<std::byte> data;
  std::unique_ptr<send_buffer_owner> next;
};

/// What a `fault_backend<B>::request` owns: the inner backend's request
/// (`Inner`), the copy it may send from and a buffer owner handed over with
/// `keep_buffer`, or a dropped send. Releasing gives back the inner request
/// first: it may still read the copy and the buffers.
template <class Inner>
struct fault_request_state {
  std::unique_ptr<send_buffer_owner> owner;
  std::unique_ptr<fault_copy> own_copy;  // the copy, unless handed to inner
  fault_copy* copy = nullptr;            // the copy, wherever it lives
  Inner inner;
  bool dropped = false;
  void release() noexcept {
    inner = Inner{};  // first: the old inner request may read the old copy
    own_copy.reset();
    owner.reset();
    copy = nullptr;
    dropped = false;
  }
};
}  // namespace detail

/// @brief A `comm_backend` injecting seeded faults into `B`'s sends (see the file comment).
template <comm_backend B>
class fault_backend : public detail::deadline_waits<fault_backend<B>> {
  static_assert(B::memory == memory_space::host, "fault_backend copies and edits host buffers");
  static constexpr bool inner_keeps_buffers =
      requires(typename B::request & r, std::unique_ptr<send_buffer_owner> p) {
    r.keep_buffer(std::move(p));
  };

 public:
  static constexpr memory_space memory = B::memory;

  /// @brief A request of the inner backend, or a dropped send (complete at once).
  class request : public detail::unique_handle<detail::fault_request_state<typename B::request>> {
   public:
    [[nodiscard]] bool valid() const noexcept {
      return this->state_.dropped || this->state_.inner.valid();
    }
    /// @brief Hands the send's buffer owner on (to the inner request where it
    /// keeps buffers; call it right after `isend`, as `route_transfer` does).
    void keep_buffer(std::unique_ptr<send_buffer_owner> owner) noexcept {
      auto& st = this->state_;
      if (st.copy != nullptr)
        st.copy->next = std::move(owner);
      else if constexpr (inner_keeps_buffers)
        st.inner.keep_buffer(std::move(owner));
      else
        st.owner = std::move(owner);
    }

   private:
    friend class fault_backend;
  };

  /// @brief Wraps `inner` (which must outlive this object).
  fault_backend(B& inner, fault_options opts) : inner_(&inner), opts_(std::move(opts)) {
    require(opts_.rate >= 0.0 && opts_.rate <= 1.0, "fault_options.rate", "must be in [0, 1], got ",
            opts_.rate);
    require(!opts_.kinds.empty() || opts_.rate == 0.0, "fault_options.kinds",
            "no kind to inject with rate ", opts_.rate);
    require(opts_.min_delay.count() >= 0, "fault_options.min_delay", "must be >= 0 ms, got ",
            opts_.min_delay.count());
    require(opts_.max_delay >= opts_.min_delay, "fault_options.max_delay", "must be >= min_delay (",
            opts_.min_delay.count(), " ms), got ", opts_.max_delay.count(), " ms");
  }
  fault_backend(const fault_backend&) = delete;
  fault_backend& operator=(const fault_backend&) = delete;
  ~fault_backend() = default;  // duplicates still unmatched are cancelled by their requests

  [[nodiscard]] int rank() const noexcept { return inner_->rank(); }
  [[nodiscard]] int size() const noexcept { return inner_->size(); }
  [[nodiscard]] const comm_options& options() const noexcept { return inner_->options(); }
  /// @brief Faults injected so far, in order.
  [[nodiscard]] const std::vector<fault_record>& faults() const noexcept { return faults_; }
  /// @brief Whether a `kill` fault has stopped this rank.
  [[nodiscard]] bool killed() const noexcept { return killed_; }
  /// @brief The wrapped backend.
  [[nodiscard]] B& inner() noexcept { return *inner_; }

  [[nodiscard]] request isend(std::span<const std::byte> data, int peer, int tag) {
    check_alive(peer, tag, data.size(), true);
    const std::size_t index = sends_++;
    request r;
    if (!decide(index, data)) {
      r.state_.inner = inner_->isend(data, peer, tag);
      return r;
    }
    fault_record& f = faults_.back();
    f.send = transfer_info{rank(), peer, tag, data.size(), true};
    switch (f.kind) {
      case fault_kind::delay:
        std::this_thread::sleep_for(f.delay);
        r.state_.inner = inner_->isend(data, peer, tag);
        break;
      case fault_kind::drop: r.state_.dropped = true; break;
      case fault_kind::duplicate:
        r.state_.inner = inner_->isend(data, peer, tag);
        duplicates_.push_back(post_copy({data.begin(), data.end()}, peer, tag));
        break;
      case fault_kind::truncate: {
        std::vector<std::byte> part(data.empty() ? std::size_t{1} : data.size() / 2);
        for (std::size_t i = 0; i < part.size() && i < data.size(); ++i) part[i] = data[i];
        r = post_copy(std::move(part), peer, tag);
        break;
      }
      case fault_kind::corrupt: {
        std::vector<std::byte> bad(data.begin(), data.end());
        const std::uint64_t h = draw(index, 3);
        bad[static_cast<std::size_t>(h % bad.size())] ^=
            static_cast<std::byte>(1u + (h >> 32) % 255u);
        r = post_copy(std::move(bad), peer, tag);
        break;
      }
      case fault_kind::kill: kill(f.send);
    }
    return r;
  }
  [[nodiscard]] request irecv(std::span<std::byte> data, int peer, int tag) {
    check_alive(peer, tag, data.size(), false);
    request r;
    r.state_.inner = inner_->irecv(data, peer, tag);
    return r;
  }
  /// @brief `wait(r)` (the default timeout) and `wait(r, timeout)`.
  using detail::deadline_waits<fault_backend>::wait;
  void wait(request& r, const wait_deadline& d) {
    if (consume_dropped(r)) return;
    check_alive_request();
    detail::wait_until(*inner_, r.state_.inner, d);
  }
  bool test(request& r) {
    if (consume_dropped(r)) return true;
    check_alive_request();
    return inner_->test(r.state_.inner);
  }
  /// @brief The inner backend's `try_wait` (where it has one): waits until
  /// `until` without giving up on the request.
  bool try_wait(request& r, std::chrono::steady_clock::time_point until) requires
      requires(B& b, typename B::request& q) {
    b.try_wait(q, until);
  }
  {
    if (consume_dropped(r)) return true;
    check_alive_request();
    return inner_->try_wait(r.state_.inner, until);
  }
  /// @brief The inner backend's route sequence numbers (where it keeps them).
  [[nodiscard]] detail::route_sequences& route_sequences() noexcept requires requires(B& b) {
    b.route_sequences();
  }
  { return inner_->route_sequences(); }
  void group_start() { inner_->group_start(); }
  void group_end() { inner_->group_end(); }
  void barrier() {
    check_alive_collective("barrier");
    inner_->barrier();
  }
  void broadcast(std::span<std::byte> data, int root) {
    check_alive_collective("broadcast");
    inner_->broadcast(data, root);
  }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
    check_alive_collective("allgather");
    inner_->allgather(mine, all);
  }

 private:
  // 64 random bits for (seed, rank, send index, purpose): independent of
  // everything else the program does.
  [[nodiscard]] std::uint64_t draw(std::size_t index, std::uint64_t purpose) const noexcept {
    const std::uint64_t stream = (static_cast<std::uint64_t>(static_cast<unsigned>(rank())) << 40) ^
                                 (static_cast<std::uint64_t>(index) << 3) ^ purpose;
    return derive_seed(opts_.seed, stream);
  }

  // Whether send `index` (of `data`) is faulted; if so, appends its record.
  bool decide(std::size_t index, std::span<const std::byte> data) {
    if (opts_.rate <= 0.0) return false;
    if (opts_.max_faults >= 0 && faults_.size() >= static_cast<std::size_t>(opts_.max_faults))
      return false;
    const double u = static_cast<double>(draw(index, 0) >> 11) * 0x1.0p-53;
    if (u >= opts_.rate) return false;
    std::vector<fault_kind> usable;
    for (fault_kind k : opts_.kinds)
      if (!data.empty() || (k != fault_kind::corrupt && k != fault_kind::truncate))
        usable.push_back(k);
    if (usable.empty()) return false;
    fault_record f;
    f.kind = usable[static_cast<std::size_t>(draw(index, 1) % usable.size())];
    f.index = index;
    if (f.kind == fault_kind::delay) {
      const auto span =
          static_cast<std::uint64_t>(opts_.max_delay.count() - opts_.min_delay.count());
      f.delay = opts_.min_delay +
                std::chrono::milliseconds(static_cast<std::int64_t>(draw(index, 2) % (span + 1)));
    }
    faults_.push_back(f);
    return true;
  }

  // Sends a copy owned by the request (or, where the inner backend keeps
  // buffers of timed-out sends, by the inner request).
  request post_copy(std::vector<std::byte> bytes, int peer, int tag) {
    request r;
    auto copy = std::make_unique<detail::fault_copy>(std::move(bytes));
    r.state_.copy = copy.get();
    r.state_.inner = inner_->isend(std::span<const std::byte>(copy->data), peer, tag);
    if constexpr (inner_keeps_buffers)
      r.state_.inner.keep_buffer(std::move(copy));
    else
      r.state_.own_copy = std::move(copy);
    return r;
  }

  [[noreturn]] void kill(const transfer_info& t) {
    killed_ = true;
    if (opts_.on_kill) opts_.on_kill(rank());
    fail(errc::comm_error, t.where(), "rank ", rank(), " was killed by fault injection (seed ",
         opts_.seed, ")");
  }
  bool consume_dropped(request& r) const {
    if (!r.state_.dropped) return false;
    r.state_.dropped = false;
    return true;
  }
  void check_alive(int peer, int tag, std::size_t bytes, bool is_send) const {
    if (killed_)
      fail(errc::comm_error, transfer_info{rank(), peer, tag, bytes, is_send}.where(), "rank ",
           rank(), " was killed by fault injection");
  }
  void check_alive_request() const {
    if (killed_) fail(errc::comm_error, cat("rank ", rank()), "was killed by fault injection");
  }
  void check_alive_collective(const char* what) const {
    if (killed_)
      fail(errc::comm_error, cat("rank ", rank(), " ", what), "rank ", rank(),
           " was killed by fault injection");
  }

  B* inner_;
  fault_options opts_;
  std::size_t sends_ = 0;
  bool killed_ = false;
  std::vector<fault_record> faults_;
  std::vector<request> duplicates_;  // the extra copies, never waited for
};

}  // namespace disttrain
