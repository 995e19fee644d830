#pragma once
/// @file abort_notices.hpp
/// @brief Internal: the executor's abort notices (exec/executor.hpp,
/// "Failures"), on the notice protocol routes use (comm/notices.hpp). A rank
/// whose run fails tells every peer of its program, so that they fail at once
/// naming it instead of at their own timeout.
///
/// At the start of a run each peer gets one watch on the program's control
/// tag, numbered by the backend's `route_sequences` (side `executor`, counted
/// alike on both ends of every pair, so a stale notice of an earlier failed
/// run is ignored). The executor's waits go through `wait`, its steps through
/// `check`. A rank that fails sends each peer a notice naming the first
/// failure: `plan` = its error code, `bytes` = 1 + the rank whose error it
/// was (itself, or the origin of the notice that stopped it, so that the
/// whole chain of ranks names the first failure). On success the receives
/// are withdrawn.

#include <cstdint>
#include <span>
#include <string>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/notices.hpp"
#include "disttrain/core/check.hpp"

namespace disttrain::detail {

/// @brief The notice code of a failure that is not a `disttrain::error` (a host exception).
inline constexpr std::uint64_t foreign_failure = 63;

/// @brief One run's abort notices (see the file comment).
template <comm_backend B>
class abort_notices {
 public:
  using request = typename B::request;

  /// @brief Numbers this run with every peer and posts their notice receives
  /// (`tag` < 0: no notices). `peers` may repeat and contain `b.rank()`.
  abort_notices(B& b, std::span<const int> peers, int tag) : b_(&b), watches_(b, tag) {
    if constexpr (notice_watches<B>::supported) {
      if (tag < 0) return;
      for (const int p : peers) {
        if (p == b.rank() || watches_.find(p) != nullptr) continue;
        watches_.add(p).abort_seq = b.route_sequences().next(p, route_sequences::side::executor);
      }
      watches_.post_all();
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
    const auto between = [&] { check(where); };
    between();
    watches_.wait(r, d, between);
    between();
  }

  /// @brief Throws `comm_error` at `where()` (a callable giving the error's
  /// location) if a peer's notice of this run arrived; never blocks.
  template <class Where>
  void check(const Where& where) {
    watches_.poll();
    if (const auto* w = watches_.first_aborted()) fail_aborted(*w, where());
  }

  /// @brief After this rank failed with `code`: a notice to every peer (with
  /// the first failure's code and rank when a notice stopped it), their sends
  /// waited for at most `notice_batch::grace` in all. Never throws.
  void abort(std::uint64_t code) noexcept {
    watches_.withdraw();
    notice_batch<B> batch(*b_);
    for (const auto& w : watches_) {
      if (w.aborted) continue;  // that peer failed first: it listens no more
      const int origin = cause_rank_ >= 0 ? cause_rank_ : b_->rank();
      const notice_message n{.code = cause_rank_ >= 0 ? cause_code_ : code,
                             .seq = w.abort_seq,
                             .origin = static_cast<std::uint64_t>(origin) + 1};
      batch.post(n.stamp(), w.peer, watches_.tag());
    }
    batch.wait();
  }

 private:
  [[noreturn]] void fail_aborted(const notice_watch<B>& w, const std::string& where) {
    cause_code_ = w.notice.plan;
    cause_rank_ = w.origin(b_->size());
    const std::string what = cause_code_ == foreign_failure
                                 ? std::string("an exception of its host")
                                 : std::string(to_string(static_cast<errc>(cause_code_ % 64)));
    fail(errc::comm_error, where, "rank ", w.peer, " aborted the iteration after ",
         cause_rank_ == w.peer ? std::string("its own error")
                               : cat("rank ", cause_rank_, "'s error"),
         " (", what, "; abort notice on control tag ", watches_.tag(),
         "): this rank stops too; its receives of the iteration are withdrawn, its sends "
         "cancelled or kept by the backend as after a timeout (docs/comm.md)");
  }

  B* b_;
  notice_watches<B> watches_;  // one per distinct peer
  int cause_rank_ = -1;        // the first failure's rank, once a notice stopped this one
  std::uint64_t cause_code_ = 0;
};

}  // namespace disttrain::detail
