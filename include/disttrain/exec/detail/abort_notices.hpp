#pragma once
/// @file abort_notices.hpp
/// @brief Internal: the executor's abort notices (exec/executor.hpp,
/// "Failures"). A rank whose run fails tells every peer of its program, so
/// that they fail at once naming it instead of at their own timeout.
///
/// At the start of a run each peer gets one posted 32-byte receive on the
/// program's control tag. The executor's waits go through `wait`: the
/// backend's own wait in slices of `poll_ms`, the notices tested in between.
/// A rank that fails sends each peer a notice (`plan_stamp` with
/// `notice_value`, `plan` = the error code, `message` = the run's sequence
/// number with that peer, `bytes` = 1 + the rank whose error it was: itself,
/// or the origin of the notice that stopped it, so that the whole chain of
/// ranks names the first failure) and waits for those sends at most `grace_ms`. On
/// success the receives are withdrawn. Sequence numbers come from the
/// backend's `route_sequences` (side `executor`), counted alike on both ends
/// of every pair, so a stale notice of an earlier failed run is ignored.
/// Backends without `try_wait` and `route_sequences` (NCCL) get none.

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/detail/backend_parts.hpp"
#include "disttrain/comm/plan_stamp.hpp"
#include "disttrain/core/check.hpp"

namespace disttrain::detail {

/// @brief The notice code of a failure that is not a `disttrain::error` (a host exception).
inline constexpr std::uint64_t foreign_failure = 63;

/// @brief One run's abort notices (see the file comment).
template <comm_backend B>
class abort_notices {
 public:
  using request = typename B::request;
  using clock = std::chrono::steady_clock;
  static constexpr bool supported = notice_backend<B>;
  static constexpr int poll_ms = 10;   ///< wait slice between two tests of the notices
  static constexpr int grace_ms = 50;  ///< how long a failed rank waits for its notices to leave

  /// @brief Numbers this run with every peer and posts their notice receives
  /// (`tag` < 0: no notices). `peers` may repeat and contain `b.rank()`.
  abort_notices(B& b, std::span<const int> peers, int tag) : b_(&b), tag_(tag) {
    if constexpr (supported) {
      if (tag < 0) return;
      for (const int p : peers) {
        if (p == b.rank() || std::ranges::find(watches_, p, &watch::peer) != watches_.end())
          continue;
        watches_.push_back({p, b.route_sequences().next(p, route_sequences::side::executor)});
      }
      for (watch& w : watches_) post(w);  // after the vector stopped growing: buffers stay put
    }
  }
  abort_notices(const abort_notices&) = delete;
  abort_notices& operator=(const abort_notices&) = delete;
  /// Withdraws the notice receives still posted (a run that ends either way).
  ~abort_notices() = default;

  /// @brief Waits for `r` until `d` like `detail::wait_until`, but fails with
  /// `comm_error` at `where()` as soon as a peer's notice of this run arrives,
  /// also once `r` completed: a receive whose sender aborted (e.g. after its
  /// send timed out, when its host may since have reused the buffer the
  /// transport still read) is not reported complete.
  template <class Where>
  void wait(request& r, const wait_deadline& d, const Where& where) {
    if constexpr (supported) {
      if (!watches_.empty()) {
        check(where);
        const bool done =
            wait_in_slices(*b_, r, d.at, std::chrono::milliseconds(poll_ms), [&] { check(where); });
        check(where);
        if (done) return;
      }
    }
    wait_until(*b_, r, d);
  }

  /// @brief Throws `comm_error` at `where()` (a callable giving the error's
  /// location) if a peer's notice of this run arrived; never blocks.
  template <class Where>
  void check(const Where& where) {
    if constexpr (supported) {
      for (watch& w : watches_) {
        try {
          while (!w.aborted && w.req.valid() && b_->test(w.req)) {
            if (w.notice.magic == plan_stamp::notice_value && w.notice.message == w.seq)
              w.aborted = true;
            else
              post(w);  // a stale notice (an earlier run's): listen again
          }
        } catch (...) {
          w.req = request{};  // a failed receive (a dead peer): the data waits report it
        }
        if (w.aborted) fail_aborted(w, where());
      }
    } else {
      (void)where;
    }
  }

  /// @brief After this rank failed with `code`: a notice to every peer (with
  /// the first failure's code and rank when a notice stopped it), their sends
  /// waited for at most grace_ms in all. Never throws.
  void abort(std::uint64_t code) noexcept {
    if constexpr (supported) {
      std::deque<plan_stamp> msgs;  // deque: a posted buffer never moves
      std::vector<request> reqs;
      try {
        for (watch& w : watches_) {
          w.req = request{};        // its own receive first: withdrawn
          if (w.aborted) continue;  // that peer failed first: it listens no more
          plan_stamp& s = msgs.emplace_back();
          s.magic = plan_stamp::notice_value;
          s.plan = cause_rank_ >= 0 ? cause_code_ : code;
          s.message = w.seq;
          s.bytes = static_cast<std::uint64_t>(cause_rank_ >= 0 ? cause_rank_ : b_->rank()) + 1;
          reqs.push_back(b_->isend(std::as_bytes(std::span(&s, 1)), w.peer, tag_));
        }
      } catch (...) {}
      const auto d = wait_deadline::after(std::chrono::milliseconds(grace_ms));
      for (request& r : reqs) {
        try {
          wait_until(*b_, r, d);
        } catch (...) {}
      }
      reqs.clear();  // before the buffers
    } else {
      (void)code;
    }
  }

 private:
  struct watch {
    int peer = -1;
    std::uint64_t seq = 0;  // this run's number with `peer`
    plan_stamp notice{};    // lands here
    request req{};
    bool aborted = false;
  };

  void post(watch& w) {
    w.req = b_->irecv(std::as_writable_bytes(std::span(&w.notice, 1)), w.peer, tag_);
  }

  [[noreturn]] void fail_aborted(const watch& w, const std::string& where) {
    cause_code_ = w.notice.plan;
    const std::uint64_t origin = w.notice.bytes;  // 1 + rank; 0 from no rank (never sent)
    cause_rank_ = origin > 0 && origin <= static_cast<std::uint64_t>(b_->size())
                      ? static_cast<int>(origin - 1)
                      : w.peer;
    const std::string what = cause_code_ == foreign_failure
                                 ? std::string("an exception of its host")
                                 : std::string(to_string(static_cast<errc>(cause_code_ % 64)));
    fail(errc::comm_error, where, "rank ", w.peer, " aborted the iteration after ",
         cause_rank_ == w.peer ? std::string("its own error")
                               : cat("rank ", cause_rank_, "'s error"),
         " (", what, "; abort notice on control tag ", tag_,
         "): this rank stops too; its receives of the iteration are withdrawn, its sends "
         "cancelled or kept by the backend as after a timeout (docs/comm.md)");
  }

  B* b_;
  int tag_ = -1;
  std::vector<watch> watches_;  // one per distinct peer; never grows once posted
  int cause_rank_ = -1;         // the first failure's rank, once a notice stopped this one
  std::uint64_t cause_code_ = 0;
};

}  // namespace disttrain::detail
