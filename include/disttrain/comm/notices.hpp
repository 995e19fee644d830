#pragma once
/// @file notices.hpp
/// @brief The notice protocol, written once for routes (route_transfer.hpp,
/// "Abort notices") and the executor (exec/executor.hpp, "Failures"): how a
/// rank that fails tells its peers at once instead of leaving them to their
/// timeouts.
///
/// - **Watching** (`notice_watches`): one posted 32-byte receive per peer on
///   the exchange's control tag. `poll` tests them without blocking: a notice
///   whose (magic, sequence number) is this exchange's marks the peer
///   `aborted`; another (a stale notice of an earlier exchange) is dropped
///   and the receive posted again. `wait` waits for a request with the
///   backend's own wait in slices of `poll_interval`, calling back in between,
///   so that a notice stops the wait within a slice.
/// - **Telling** (`notice_batch`): the failed rank's notices (and any other
///   best-effort failure messages) posted together and waited for at most
///   `grace` in all, never throwing: a peer that is gone already is not
///   waited for long.
///
/// A notice is a `plan_stamp` (`notice_message::stamp`): `magic` = `notice_value` (an
/// abort: the sender failed; to a rank that sends to it, or to an executor
/// peer) or `void_value` (the sender's messages are void; to its receivers),
/// `plan` = the error code, `message` = the exchange's sequence number between
/// the two ranks (`detail::route_sequences`, counted alike on both ends),
/// `bytes` = 1 + the rank whose failure it reports (0: not said). Backends
/// without `try_wait` and `route_sequences` (NCCL) have no notices:
/// `notice_watches<B>::supported` is false and its members do nothing but
/// the plain wait.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/detail/backend_parts.hpp"
#include "disttrain/comm/plan_stamp.hpp"
#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief "No sequence number": a watch that accepts no notice of that kind.
inline constexpr std::uint64_t no_notice_seq = ~std::uint64_t{0};

/// @brief A notice's content (see the file comment); `stamp()` is what is sent.
struct notice_message {
  std::int64_t magic = plan_stamp::notice_value;  ///< `notice_value` or `void_value`
  std::uint64_t code = 0;                         ///< the error code
  std::uint64_t seq = 0;     ///< the exchange's sequence number between the two ranks
  std::uint64_t origin = 0;  ///< 1 + the rank whose failure it reports; 0: not said

  [[nodiscard]] plan_stamp stamp() const noexcept {
    plan_stamp s;
    s.magic = magic;
    s.plan = code;
    s.message = seq;
    s.bytes = origin;
    return s;
  }
};

/// @brief One peer's watch: the notices of this exchange it accepts, and
/// where the next one lands.
template <comm_backend B>
struct notice_watch {
  int peer = -1;
  std::uint64_t abort_seq = no_notice_seq;  ///< accepted with `plan_stamp::notice_value`
  std::uint64_t void_seq = no_notice_seq;   ///< accepted with `plan_stamp::void_value`
  plan_stamp notice{};                      ///< the landed notice
  bool aborted = false;                     ///< a notice of this exchange came
  typename B::request req{};

  /// @brief Whether the landed notice is this exchange's (not a stale one).
  [[nodiscard]] bool ours() const noexcept {
    return (notice.magic == plan_stamp::notice_value && notice.message == abort_seq) ||
           (notice.magic == plan_stamp::void_value && notice.message == void_seq);
  }
  /// @brief The rank whose failure the landed notice reports (`peer` unless it names another).
  [[nodiscard]] int origin(int world_size) const noexcept {
    const std::uint64_t o = notice.bytes;  // 1 + rank; 0: not said
    return o > 0 && o <= static_cast<std::uint64_t>(world_size) ? static_cast<int>(o - 1) : peer;
  }
};

/// @brief The watches of one exchange on one control tag (see the file comment).
/// Watches are added first (`add`), then posted together (`post_all`): a
/// posted buffer never moves. Not copyable.
template <comm_backend B>
class notice_watches {
 public:
  using watch = notice_watch<B>;
  using request = typename B::request;
  /// Whether `B` carries notices at all.
  static constexpr bool supported = detail::notice_backend<B>;
  /// The wait slice between two polls.
  static constexpr std::chrono::milliseconds poll_interval{10};

  notice_watches(B& b, int tag) : b_(&b), tag_(tag) {}
  notice_watches(const notice_watches&) = delete;
  notice_watches& operator=(const notice_watches&) = delete;

  /// @brief The watch of `peer`, created if new; only before `post_all`.
  watch& add(int peer) {
    if (watch* w = find(peer)) return *w;
    require(!posted_, "notice_watches.add", "after post_all");
    return watches_.emplace_back(watch{.peer = peer});
  }
  /// @brief Posts every watch's receive.
  void post_all() {
    posted_ = true;
    for (watch& w : watches_) post(w);
  }
  /// @brief Tests every posted watch (never blocks, never throws). A failed
  /// receive (e.g. a dead peer, which the data waits report) ends that watch.
  void poll() noexcept {
    if constexpr (supported) {
      for (watch& w : watches_) {
        try {
          while (!w.aborted && w.req.valid() && b_->test(w.req)) {
            if (w.ours())
              w.aborted = true;
            else
              post(w);  // stale: listen again
          }
        } catch (...) {
          w.req = request{};
        }
      }
    }
  }
  /// @brief Waits for `r` until `d`: where notices are supported and watched,
  /// the backend's wait in slices of `poll_interval` with `between()` (which
  /// may throw) after each; then, or otherwise, `detail::wait_until` (which
  /// throws `comm_error` at the deadline).
  template <class Between>
  void wait(request& r, const wait_deadline& d, Between&& between) {
    if constexpr (supported) {
      if (!watches_.empty() && detail::wait_in_slices(*b_, r, d.at, poll_interval, between)) return;
    }
    detail::wait_until(*b_, r, d);
  }
  /// @brief Withdraws every watch's receive (a failed rank listens no more).
  void withdraw() noexcept {
    for (watch& w : watches_) w.req = request{};
  }

  [[nodiscard]] watch* find(int peer) {
    const auto it = std::ranges::find(watches_, peer, &watch::peer);
    return it == watches_.end() ? nullptr : &*it;
  }
  /// @brief The first watch whose peer's notice came, or null.
  [[nodiscard]] const watch* first_aborted() const {
    const auto it = std::ranges::find(watches_, true, &watch::aborted);
    return it == watches_.end() ? nullptr : &*it;
  }
  [[nodiscard]] bool empty() const noexcept { return watches_.empty(); }
  [[nodiscard]] int tag() const noexcept { return tag_; }
  [[nodiscard]] auto begin() const noexcept { return watches_.begin(); }
  [[nodiscard]] auto end() const noexcept { return watches_.end(); }
  /// @brief Drops every watch (their receives withdrawn); watching may start anew.
  void clear() noexcept {
    watches_.clear();
    posted_ = false;
  }

 private:
  void post(watch& w) {
    w.req = b_->irecv(std::as_writable_bytes(std::span(&w.notice, 1)), w.peer, tag_);
  }

  B* b_;
  int tag_ = -1;
  bool posted_ = false;
  std::vector<watch> watches_;  // never grows once posted
};

/// @brief A failed rank's messages, posted best effort and waited for
/// together at most `grace` (see the file comment). Never throws.
template <comm_backend B>
class notice_batch {
 public:
  /// How long a failed rank waits for its notices to leave, in all.
  static constexpr std::chrono::milliseconds grace{50};

  explicit notice_batch(B& b) noexcept : b_(&b) {}
  notice_batch(const notice_batch&) = delete;
  notice_batch& operator=(const notice_batch&) = delete;

  /// @brief Sends `s` to `peer` on `tag` (a failure to post is ignored).
  void post(const plan_stamp& s, int peer, int tag) noexcept {
    try {
      msgs_.push_back(s);
      reqs_.push_back(b_->isend(std::as_bytes(std::span(&msgs_.back(), 1)), peer, tag));
    } catch (...) {}
  }
  /// @brief Waits for the posted sends, at most `grace` in all.
  void wait() noexcept {
    const auto d = wait_deadline::after(grace);
    for (auto& r : reqs_) {
      try {
        detail::wait_until(*b_, r, d);
      } catch (...) {}
    }
  }

 private:
  B* b_;
  std::deque<plan_stamp> msgs_;            // deque: a posted buffer never moves
  std::vector<typename B::request> reqs_;  // declared last: gone before the buffers they read
};

}  // namespace disttrain
