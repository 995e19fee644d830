#pragma once
/// @file mpi_backend.hpp
/// @brief MPI backend: ranks are processes; satisfies `comm_backend`.
///
/// Only available with MPI: link the CMake target `disttrain::mpi`
/// (configure with `-DDISTTRAIN_ENABLE_MPI=ON`), which defines
/// `DISTTRAIN_HAS_MPI`. The backend duplicates the given communicator (so its
/// traffic never mixes with the application's) and sets `MPI_ERRORS_RETURN`
/// on the duplicate, so MPI failures become `disttrain::error` instead of
/// aborting the job.
///
/// **Probe before receive.** A receive is not handed to MPI until the matching
/// message's envelope has arrived: `MPI_Improbe` (polled by `wait`/`test`,
/// never blocking) reports its size, and only a message of exactly the posted
/// size is received into the caller's buffer (`MPI_Imrecv`). A message of any
/// other size is received into a scratch buffer and discarded, and the wait
/// throws `errc::comm_error` naming both sizes; the caller's buffer is never
/// written (OpenMPI's single-copy shared-memory path would otherwise write an
/// oversized message past the end of the buffer before reporting truncation).
/// Receives from one peer with one tag still match in posting order.
///
/// Waits poll `MPI_Test` until the deadline; on timeout the request is
/// cancelled (`MPI_Cancel`, checked with `MPI_Test_cancelled`) and
/// `errc::timeout` is thrown naming peer, tag and bytes and what became of a
/// send: cancelled (the peer never receives it), or, for a rendezvous send
/// MPI cannot cancel, still in flight: the backend then keeps the MPI request
/// and the buffer owner given with `request::keep_buffer` (route staging
/// buffers) until MPI completes it or the backend is destroyed, so a late
/// receiver gets the intact bytes; a caller-owned buffer must not be reused
/// while `sends_in_flight() > 0`. Likewise a receive withdrawn (a timeout,
/// a failed run) after MPI matched its message, which MPI cannot cancel: the
/// backend keeps it until the message is in, and the caller's buffer must
/// not be reused while `receives_in_flight() > 0`. After a timeout treat the communicator as
/// broken and create a new backend; the broken one's duplicate is then never
/// freed (OpenMPI would reuse its context id, and a late message of the old
/// communicator could match a receive of the new one). Collectives use the non-blocking
/// `MPI_Ibarrier` / `MPI_Ibcast` / `MPI_Iallgather` with the same deadline; a
/// collective that times out cannot be cancelled, so the backend must not be
/// used afterwards (the error says so). Note MPI semantics: a small (eager)
/// send can complete even though the peer never receives it; the receiver's
/// wait is what detects a silent peer.
///
/// **Dead peers (ULFM).** Built against an MPI with the User-Level Failure
/// Mitigation extension (`MPIX_ERR_PROC_FAILED` in `<mpi-ext.h>`, e.g. Open
/// MPI 5 run with `mpirun --with-ft ulfm`; `mpi_has_ulfm` says whether this
/// build has it), a transfer with a dead peer fails as soon as MPI detects
/// the death, with `errc::comm_error` naming it: `receive of 16 bytes failed:
/// rank 1 is dead (MPIX_ERR_PROC_FAILED) ...` (the local backend's
/// `mark_dead` words it the same way); a collective names the ranks MPI
/// knows to be dead. The communicator is then broken like after a timeout
/// (never freed; recover with `MPIX_Comm_shrink` and a new backend). Note:
/// Open MPI 5.0's `MPI_Finalize` can hang once a process died; tests/mpi/
/// test_mpi_ulfm.cpp ends its survivors with `std::_Exit`. Without ULFM a
/// dead peer is seen as a timeout (or an MPI error the job may abort on).
///
/// @snippet comm_mpi.cpp mpi_backend

#if !defined(DISTTRAIN_HAS_MPI)
#error \
    "disttrain/comm/mpi_backend.hpp needs MPI: link the CMake target disttrain::mpi (configure with -DDISTTRAIN_ENABLE_MPI=ON), which defines DISTTRAIN_HAS_MPI"
#endif

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // ULFM (MPIX_ERR_PROC_FAILED) where the MPI has it
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/detail/backend_parts.hpp"
#include "disttrain/comm/detail/unique_handle.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"

namespace disttrain {

namespace detail {
/// Text of an MPI error code.
[[nodiscard]] inline std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return cat("MPI error ", code);
  return std::string(buf, static_cast<std::size_t>(len));
}

/// What a failed MPI call says about its peers (ULFM's error classes;
/// always `none` without ULFM).
enum class mpi_peer_failure { none, peer_dead, other_dead, revoked };
[[nodiscard]] inline mpi_peer_failure mpi_classify_failure([[maybe_unused]] int code) noexcept {
#if defined(MPIX_ERR_PROC_FAILED)
  int cls = 0;
  if (MPI_Error_class(code, &cls) != MPI_SUCCESS) return mpi_peer_failure::none;
  if (cls == MPIX_ERR_PROC_FAILED) return mpi_peer_failure::peer_dead;
  if (cls == MPIX_ERR_PROC_FAILED_PENDING) return mpi_peer_failure::other_dead;
  if (cls == MPIX_ERR_REVOKED) return mpi_peer_failure::revoked;
#endif
  return mpi_peer_failure::none;
}

/// The ranks of `comm` that MPI knows to be dead, ascending (ULFM's
/// `MPIX_Comm_get_failed`, Open MPI >= 5 and MPICH >= 4.1); empty where
/// that call is missing.
[[nodiscard]] inline std::vector<int> mpi_failed_ranks([[maybe_unused]] MPI_Comm comm) {
  std::vector<int> out;
#if defined(MPIX_ERR_PROC_FAILED) && ((defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5) || \
                                      (defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40100000))
  MPI_Group failed = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) return out;
  int n = 0;
  if (MPI_Group_size(failed, &n) == MPI_SUCCESS && n > 0 &&
      MPI_Comm_group(comm, &all) == MPI_SUCCESS) {
    std::vector<int> in(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = i;
    out.resize(in.size());
    if (MPI_Group_translate_ranks(failed, n, in.data(), all, out.data()) != MPI_SUCCESS)
      out.clear();
    MPI_Group_free(&all);
  }
  MPI_Group_free(&failed);
  std::sort(out.begin(), out.end());
#endif
  return out;
}

/// Polls `test` until it returns true or `deadline` passes. Like `MPI_Wait`
/// it never sleeps or yields itself: each `MPI_Test` drives MPI's progress
/// engine, and OpenMPI yields inside it when the job is oversubscribed
/// (`mpi_yield_when_idle`, set automatically when ranks outnumber cores).
/// An own `sched_yield` here made 1 MiB transfers up to 2x slower than raw
/// `MPI_Recv` on a loaded machine (the yielding rank lost its CPU for a
/// whole time slice).
template <class Test>
bool poll_until(std::chrono::steady_clock::time_point deadline, Test&& test) {
  for (unsigned polls = 1;; ++polls) {
    if (test()) return true;
    // The clock is read every 16 polls (an MPI_Test is ~0.1 us).
    if ((polls & 15u) == 0 && std::chrono::steady_clock::now() >= deadline) return test();
  }
}

/// One receive of the MPI backend. It is matched lazily: `MPI_Improbe` first,
/// then `MPI_Imrecv` into the caller's buffer if the incoming size equals the
/// posted one, else into `drain` (the caller's buffer stays untouched).
struct mpi_recv_slot {
  std::byte* data = nullptr;
  std::size_t bytes = 0;
  int peer = 0;
  int tag = 0;
  MPI_Request req = MPI_REQUEST_NULL;  ///< the MPI_Imrecv, once matched
  bool matched = false;                ///< a message was matched to this receive
  bool abandoned = false;              ///< withdrawn (timeout, destroyed) before matching
  int rc = MPI_SUCCESS;                ///< failure of MPI_Improbe / MPI_Imrecv
  std::size_t incoming = 0;            ///< bytes of the matched message
  std::unique_ptr<std::byte[]> drain;  ///< receives a message of the wrong size
};

/// State of one backend that its requests share (stable when the backend moves).
struct mpi_shared {
  /// Unmatched receives per (peer, tag), in posting order.
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<mpi_recv_slot>>> waiting;
  /// Receives MPI may still write after their request went away, into their
  /// scratch buffer (`drain`) or, withdrawn after MPI matched them, the
  /// caller's; dropped once MPI completes them (or at the backend's destruction).
  std::vector<std::shared_ptr<mpi_recv_slot>> orphans;
  /// A timed-out send MPI could not cancel: MPI may still read its buffer.
  struct detached_send {
    MPI_Request req = MPI_REQUEST_NULL;
    std::unique_ptr<send_buffer_owner> owner;  ///< keeps a staging buffer alive, or null
  };
  /// Such sends, kept until MPI completes them (or the backend is destroyed).
  std::vector<detached_send> sends;
  /// This rank's route sequence numbers on this communicator (route_transfer's abort notices).
  route_sequences sequences;

  /// Takes an unmatched receive out of `waiting` (it will never take a
  /// message): a withdrawn receive leaves nothing behind, however many are
  /// posted and withdrawn on one (peer, tag) (route_transfer's abort-notice
  /// receives: one per route and destination, withdrawn on success). An
  /// emptied queue is kept for the next receive (no allocation per route)
  /// unless many (peer, tag) keys are there.
  void withdraw(const std::shared_ptr<mpi_recv_slot>& s) noexcept {
    erase_queued(waiting, {s->peer, s->tag}, s, max_idle_keys);
  }
  static constexpr std::size_t max_idle_keys = 64;
};

/// What an `mpi_backend::request` owns: a send's MPI request, or a receive's
/// slot, with the backend's shared state that keeps what MPI may still touch.
/// Releasing an incomplete one cancels it (`cancel`).
struct mpi_request_state {
  enum class cancel_result { none, cancelled, completed, detached };

  MPI_Request req = MPI_REQUEST_NULL;   // sends
  std::shared_ptr<mpi_recv_slot> slot;  // receives
  std::shared_ptr<mpi_shared> shared;
  std::unique_ptr<send_buffer_owner> owner;  // sends: keeps the buffer alive
  transfer_info info;

  void release() noexcept { (void)cancel(); }
  bool holds() const noexcept { return req != MPI_REQUEST_NULL || slot; }

  // Cancels and completes the request. An unmatched receive is withdrawn
  // (it will never take a message); a matched one is cancelled (MPI_Cancel),
  // or, if MPI cannot cancel it (its message is already arriving), kept by
  // the backend until MPI completes it (`detached` when it writes the
  // caller's buffer).
  // A send is cancelled with MPI_Cancel (checked with MPI_Test_cancelled);
  // OpenMPI cannot cancel a send already in its rendezvous protocol, so
  // after a short grace period such a send is *kept* by the backend, with
  // its buffer owner, until MPI completes it (a late receiver then gets the
  // intact bytes) or the backend is destroyed; the buffer is never freed
  // while MPI may read it.
  cancel_result cancel() noexcept {
    if (!slot) return cancel_send();
    mpi_recv_slot& s = *slot;
    cancel_result result = cancel_result::none;
    if (!s.matched) {
      s.abandoned = true;
      if (shared) shared->withdraw(slot);
    } else if (s.req != MPI_REQUEST_NULL && !cancel_request(s.req)) {
      // MPI may still write the message, into the scratch buffer or the
      // caller's (receives_in_flight()): the backend keeps the request until
      // MPI is done (or detaches it, leaking the scratch, if it cannot).
      bool kept = false;
      if (shared) {
        try {
          shared->orphans.push_back(slot);
          kept = true;
        } catch (...) {}
      }
      if (!kept) {
        MPI_Request_free(&s.req);
        (void)s.drain.release();
      }
      if (!s.drain) result = cancel_result::detached;
    }
    slot.reset();
    shared.reset();
    return result;
  }
  cancel_result cancel_send() noexcept {
    std::shared_ptr<mpi_shared> sh = std::move(shared);
    shared.reset();
    if (req == MPI_REQUEST_NULL) {
      owner.reset();
      return cancel_result::none;
    }
    MPI_Cancel(&req);
    MPI_Status st{};
    int rc = MPI_SUCCESS;
    const auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    const bool done = poll_until(grace, [&] {
      int flag = 0;
      rc = MPI_Test(&req, &flag, &st);
      return rc != MPI_SUCCESS || flag != 0;
    });
    if (done) {
      int cancelled = 0;
      if (rc == MPI_SUCCESS) MPI_Test_cancelled(&st, &cancelled);
      req = MPI_REQUEST_NULL;
      owner.reset();
      return cancelled != 0 ? cancel_result::cancelled : cancel_result::completed;
    }
    if (owner) owner->detach();
    mpi_shared::detached_send d{req, std::move(owner)};
    req = MPI_REQUEST_NULL;
    try {
      if (!sh) throw std::bad_alloc();
      sh->sends.push_back(std::move(d));
    } catch (...) {  // cannot record it: detach from MPI and leak the buffer
      MPI_Request_free(&d.req);
      (void)d.owner.release();
    }
    return cancel_result::detached;
  }
  // MPI_Cancel and up to 50 ms for the request to complete; false if it did not.
  static bool cancel_request(MPI_Request& q) noexcept {
    MPI_Cancel(&q);
    const auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    return poll_until(grace, [&] {
      int flag = 0;
      return MPI_Test(&q, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag != 0;
    });
  }
};
}  // namespace detail

/// @brief Whether this build's MPI has ULFM (`MPIX_ERR_PROC_FAILED`): a dead
/// peer is then `errc::comm_error` naming it (see `mpi_backend`).
#if defined(MPIX_ERR_PROC_FAILED)
inline constexpr bool mpi_has_ulfm = true;
#else
inline constexpr bool mpi_has_ulfm = false;
#endif

/// @brief RAII MPI initialisation (`MPI_Init_thread` with `MPI_THREAD_FUNNELED`
/// unless MPI is already initialised; `MPI_Finalize` at destruction if it
/// initialised MPI).
///
/// @snippet comm_mpi.cpp mpi_session
class mpi_session {
 public:
  mpi_session(int& argc, char**& argv, int required = MPI_THREAD_FUNNELED) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      const int rc = MPI_Init_thread(&argc, &argv, required, &provided);
      if (rc != MPI_SUCCESS)
        fail(errc::comm_error, "mpi_session",
             "MPI_Init_thread failed: ", detail::mpi_error_string(rc));
      owns_ = true;
    }
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  ~mpi_session() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }

 private:
  bool owns_ = false;
};

/// @brief The MPI backend (see the file comment).
class mpi_backend : public detail::deadline_waits<mpi_backend> {
 public:
  static constexpr memory_space memory = memory_space::host;

  /// @brief Handle of one posted transfer; destroying an incomplete one cancels it.
  class request : public detail::request_handle<detail::mpi_request_state> {
   public:
    /// @brief Gives the request ownership of its send buffer (e.g. a staging
    /// lease): released when the send completes or is cancelled; if the send
    /// times out and MPI cannot cancel it, the backend keeps it (detached
    /// from its pool) until MPI is done reading it or the backend is destroyed.
    void keep_buffer(std::unique_ptr<send_buffer_owner> owner) noexcept {
      state_.owner = std::move(owner);
    }

   private:
    friend class mpi_backend;
  };

  /// @brief Duplicates `comm` (collective over `comm`).
  explicit mpi_backend(MPI_Comm comm = MPI_COMM_WORLD, comm_options opts = {}) : opts_(opts) {
    require(opts.timeout.count() >= 0, "mpi_backend.timeout", "must be >= 0 ms, got ",
            opts.timeout.count());
    check(MPI_Comm_dup(comm, &comm_), "mpi_backend", "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "mpi_backend",
          "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "mpi_backend", "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "mpi_backend", "MPI_Comm_size");
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
    tag_ub_ = flag && ub ? *static_cast<int*>(ub) : 32767;
  }
  mpi_backend(const mpi_backend&) = delete;
  mpi_backend& operator=(const mpi_backend&) = delete;
  mpi_backend(mpi_backend&& o) noexcept
      : comm_(std::exchange(o.comm_, MPI_COMM_NULL)),
        rank_(o.rank_),
        size_(o.size_),
        tag_ub_(o.tag_ub_),
        opts_(o.opts_),
        shared_(std::move(o.shared_)),
        broken_(o.broken_) {}
  ~mpi_backend() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (shared_ && !finalized) {
      // Discarded messages still arriving: give them a short grace, then
      // detach them and leak their scratch buffers (never free memory MPI may write).
      sweep_orphans(std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
      for (auto& s : shared_->orphans) {
        MPI_Request_free(&s->req);
        (void)s->drain.release();
      }
      shared_->orphans.clear();
      sweep_sends(std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
      for (auto& d : shared_->sends) {
        MPI_Request_free(&d.req);
        (void)d.owner.release();
      }
      shared_->sends.clear();
    }
    // After a timeout (or a dead peer) the duplicate is never freed: OpenMPI would reuse its
    // context id for a later communicator, where a late message of this one
    // (a straggler's send) could then match a receive of the new one.
    if (comm_ != MPI_COMM_NULL && !finalized && !broken_) MPI_Comm_free(&comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] const comm_options& options() const noexcept { return opts_; }
  /// @brief The duplicated communicator (e.g. to bootstrap NCCL).
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  /// @brief Largest tag MPI accepts here (>= 32767).
  [[nodiscard]] int tag_ub() const noexcept { return tag_ub_; }
  /// @brief Timed-out sends that MPI could not cancel and has not completed
  /// yet: while > 0, MPI may still read their buffers.
  [[nodiscard]] std::size_t sends_in_flight() {
    if (!shared_) return 0;
    if (!shared_->sends.empty()) sweep_sends(std::chrono::steady_clock::time_point{});
    return shared_->sends.size();
  }
  /// @brief Withdrawn receives (a timeout, a failed run) whose message MPI
  /// had matched and could not cancel, writing into the caller's buffer, and
  /// has not completed yet: while > 0, MPI may still write their buffers.
  [[nodiscard]] std::size_t receives_in_flight() {
    if (!shared_) return 0;
    if (!shared_->orphans.empty()) sweep_orphans(std::chrono::steady_clock::time_point{});
    return static_cast<std::size_t>(
        std::count_if(shared_->orphans.begin(), shared_->orphans.end(),
                      [](const std::shared_ptr<detail::mpi_recv_slot>& o) { return !o->drain; }));
  }
  void set_timeout(std::chrono::milliseconds t) {
    require(t.count() >= 0, "mpi_backend.timeout", "must be >= 0 ms, got ", t.count());
    opts_.timeout = t;
  }

  [[nodiscard]] request isend(std::span<const std::byte> data, int peer, int tag) {
    request r;
    r.state_.info = checked(peer, tag, data.size(), true);
    if (!shared_->sends.empty()) sweep_sends(std::chrono::steady_clock::time_point{});
    check(MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_,
                    &r.state_.req),
          r.state_.info, "MPI_Isend");
    r.state_.shared = shared_;
    return r;
  }
  /// @brief Posts a receive; the message is probed before any byte lands in
  /// `data` (see the file comment), matching in posting order per (peer, tag).
  [[nodiscard]] request irecv(std::span<std::byte> data, int peer, int tag) {
    request r;
    r.state_.info = checked(peer, tag, data.size(), false);
    auto slot = std::make_shared<detail::mpi_recv_slot>();
    slot->data = data.data();
    slot->bytes = data.size();
    slot->peer = peer;
    slot->tag = tag;
    shared_->waiting[{peer, tag}].push_back(slot);
    r.state_.slot = std::move(slot);
    r.state_.shared = shared_;
    if (!shared_->orphans.empty()) sweep_orphans(std::chrono::steady_clock::time_point{});
    return r;
  }
  /// @brief `wait(r)` (the default timeout) and `wait(r, timeout)`.
  using deadline_waits::wait;
  /// @brief Waits until `d.at`; a timeout error quotes `d.timeout`.
  void wait(request& r, const wait_deadline& d) {
    require(r.valid(), "mpi_backend.wait", "empty or already completed request");
    const std::chrono::milliseconds timeout = d.timeout;
    MPI_Status st{};
    int rc = MPI_SUCCESS;
    const bool done = detail::poll_until(d.at, [&] { return progress(r, rc, st); });
    if (!done) {
      broken_ = true;
      switch (r.state_.cancel()) {
        case detail::mpi_request_state::cancel_result::cancelled:
          detail::fail_timeout(r.state_.info, timeout,
                               "; the send was cancelled: the peer will never receive it");
        case detail::mpi_request_state::cancel_result::completed:
          detail::fail_timeout(r.state_.info, timeout, "; it completed while being cancelled");
        case detail::mpi_request_state::cancel_result::detached:
          if (!r.state_.info.is_send)
            detail::fail_timeout(
                r.state_.info, timeout,
                "; MPI had matched the message and cannot cancel the receive: it may still "
                "write the buffer until the message is in; the backend keeps the request until "
                "then or until it is destroyed: do not reuse or free the buffer while "
                "receives_in_flight() > 0");
          detail::fail_timeout(
              r.state_.info, timeout,
              "; MPI cannot cancel the send and may still read its buffer until the peer "
              "receives it: the backend keeps the request (and a buffer handed to it with "
              "keep_buffer, e.g. a route's staging buffer) until then or until the backend is "
              "destroyed; a buffer of your own stays in use: do not reuse or free it while "
              "sends_in_flight() > 0");
        case detail::mpi_request_state::cancel_result::none: break;
      }
      detail::fail_timeout(r.state_.info, timeout);
    }
    finish(r, rc, st);
  }
  /// @brief Waits for `r` like `wait` (polling) until `until`, but without
  /// giving up on it: true when it completed (consumed; a failure throws),
  /// false when `until` passed first (the request stays posted, nothing is cancelled).
  bool try_wait(request& r, std::chrono::steady_clock::time_point until) {
    require(r.valid(), "mpi_backend.try_wait", "empty or already completed request");
    MPI_Status st{};
    int rc = MPI_SUCCESS;
    if (!detail::poll_until(until, [&] { return progress(r, rc, st); })) return false;
    finish(r, rc, st);
    return true;
  }
  /// @brief This rank's route sequence numbers on this communicator, for
  /// `route_transfer`'s abort notices.
  [[nodiscard]] detail::route_sequences& route_sequences() noexcept { return shared_->sequences; }
  bool test(request& r) {
    require(r.valid(), "mpi_backend.test", "empty or already completed request");
    MPI_Status st{};
    int rc = MPI_SUCCESS;
    if (!progress(r, rc, st)) return false;
    finish(r, rc, st);
    return true;
  }
  /// @brief No-op bracket (MPI point-to-point is already non-blocking); nesting checked.
  void group_start() { group_.start(); }
  void group_end() { group_.end(rank_); }
  void barrier() {
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &q), where_collective("barrier"), "MPI_Ibarrier");
    wait_collective(q, "barrier", 0);
  }
  void broadcast(std::span<std::byte> data, int root) {
    require(root >= 0 && root < size_, "mpi_backend.broadcast.root", "root ", root, " out of [0, ",
            size_, ")");
    require_int_count(data.size(), where_collective("broadcast"));
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Ibcast(data.data(), static_cast<int>(data.size()), MPI_BYTE, root, comm_, &q),
          where_collective("broadcast"), "MPI_Ibcast");
    wait_collective(q, "broadcast", data.size());
  }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
    require(!mul_overflows(mine.size(), static_cast<std::size_t>(size_)) &&
                all.size() == mine.size() * static_cast<std::size_t>(size_),
            "mpi_backend.allgather", "output of ", all.size(), " bytes, need ", mine.size(), " x ",
            size_);
    require_int_count(mine.size(), where_collective("allgather"));
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                         static_cast<int>(mine.size()), MPI_BYTE, comm_, &q),
          where_collective("allgather"), "MPI_Iallgather");
    wait_collective(q, "allgather", all.size());
  }

 private:
  [[nodiscard]] std::string where_collective(const char* what) const {
    return cat("rank ", rank_, " ", what);
  }

  static void require_int_count(std::size_t bytes, const std::string& where) {
    if (bytes > static_cast<std::size_t>(INT_MAX))
      fail(errc::unsupported, where, "message of ", bytes, " bytes exceeds MPI's int count (",
           INT_MAX, "); split the transfer (e.g. a smaller microbatch)");
  }

  // Validates one point-to-point call. Per-message hot path: the error text
  // (`where()`) is only built when a check fails.
  transfer_info checked(int peer, int tag, std::size_t bytes, bool is_send) const {
    const transfer_info t{rank_, peer, tag, bytes, is_send};
    if (peer < 0 || peer >= size_)
      fail(errc::invalid_argument, t.where(), "peer ", peer, " out of [0, ", size_, ")");
    if (tag < 0 || tag > tag_ub_)
      fail(errc::invalid_argument, t.where(), "tag ", tag, " out of [0, MPI_TAG_UB = ", tag_ub_,
           "]");
    if (bytes > static_cast<std::size_t>(INT_MAX)) require_int_count(bytes, t.where());
    return t;
  }

  // A failed call; one that reports a dead peer (ULFM) names it (`peer`:
  // the call's peer, or -1 for a collective) and breaks the communicator.
  void check(int rc, const std::string& where, std::string_view call, int peer = -1) {
    if (rc == MPI_SUCCESS) return;
    const detail::mpi_peer_failure f = detail::mpi_classify_failure(rc);
    if (f == detail::mpi_peer_failure::none)
      fail(errc::comm_error, where, call, " failed: ", detail::mpi_error_string(rc));
    broken_ = true;
    const std::vector<int> dead = f == detail::mpi_peer_failure::peer_dead && peer >= 0
                                      ? std::vector<int>{peer}
                                      : detail::mpi_failed_ranks(comm_);
    fail(errc::comm_error, where, call, " failed: ", detail::dead_ranks_text(dead),
         f == detail::mpi_peer_failure::revoked ? " and the communicator was revoked" : "", " (",
         detail::mpi_error_string(rc),
         "; ULFM): this communicator is broken; create a new backend from a communicator of the "
         "live ranks (e.g. MPIX_Comm_shrink)");
  }
  void check(int rc, const transfer_info& t, std::string_view call) {
    if (rc != MPI_SUCCESS) check(rc, t.where(), call, t.peer);
  }

  // Matches the unmatched receives of (peer, tag) in posting order, as far as
  // messages have arrived: probe, then receive into the caller's buffer if the
  // size agrees, else into the slot's scratch buffer.
  void match(int peer, int tag) {
    auto it = shared_->waiting.find({peer, tag});
    if (it == shared_->waiting.end()) return;
    auto& q = it->second;
    while (!q.empty()) {
      detail::mpi_recv_slot& s = *q.front();
      if (s.abandoned) {
        q.pop_front();
        continue;
      }
      int flag = 0;
      MPI_Message msg = MPI_MESSAGE_NULL;
      MPI_Status st{};
      const int prc = MPI_Improbe(peer, tag, comm_, &flag, &msg, &st);
      if (prc != MPI_SUCCESS) {
        s.rc = prc;
        s.matched = true;
        q.pop_front();
        continue;
      }
      if (flag == 0) break;
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      s.incoming = static_cast<std::size_t>(count < 0 ? 0 : count);
      s.matched = true;
      std::byte* into = s.data;
      if (s.incoming != s.bytes) {
        s.drain = std::make_unique<std::byte[]>(s.incoming > 0 ? s.incoming : 1);
        into = s.drain.get();
      }
      s.rc = MPI_Imrecv(into, count, MPI_BYTE, &msg, &s.req);
      q.pop_front();
    }
    if (q.empty()) shared_->waiting.erase(it);
  }

  // One poll of `r`: true when it finished (rc / st describe how).
  bool progress(request& r, int& rc, MPI_Status& st) {
    if (r.state_.slot) {
      detail::mpi_recv_slot& s = *r.state_.slot;
      if (!s.matched) match(s.peer, s.tag);
      if (!s.matched) return false;
      if (s.rc != MPI_SUCCESS) {
        rc = s.rc;
        return true;
      }
      // A wrong-sized message is reported at once; its scratch buffer is
      // kept until MPI is done with it.
      if (s.incoming != s.bytes) return true;
    }
    MPI_Request& q = r.state_.slot ? r.state_.slot->req : r.state_.req;
    int flag = 0;
    rc = MPI_Test(&q, &flag, &st);
    return rc != MPI_SUCCESS || flag != 0;
  }

  // Drops the detached sends MPI has completed (freeing their buffers),
  // polling until `until` for the others.
  void sweep_sends(std::chrono::steady_clock::time_point until) noexcept {
    auto& v = shared_->sends;
    detail::poll_until(until, [&] {
      for (std::size_t i = 0; i < v.size();) {
        int flag = 0;
        if (MPI_Test(&v[i].req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag != 0) {
          v[i] = std::move(v.back());
          v.pop_back();
        } else {
          ++i;
        }
      }
      return v.empty();
    });
  }

  // Frees the scratch buffers of discarded messages that MPI has finished,
  // polling until `until` for the others.
  void sweep_orphans(std::chrono::steady_clock::time_point until) noexcept {
    auto& v = shared_->orphans;
    detail::poll_until(until, [&] {
      for (std::size_t i = 0; i < v.size();) {
        int flag = 0;
        if (MPI_Test(&v[i]->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag != 0) {
          v[i] = std::move(v.back());
          v.pop_back();
        } else {
          ++i;
        }
      }
      return v.empty();
    });
  }

  void finish(request& r, int rc, const MPI_Status& st) {
    const transfer_info t = r.state_.info;
    if (r.state_.slot) {
      std::shared_ptr<detail::mpi_recv_slot> slot = std::move(r.state_.slot);
      r.state_.shared.reset();
      if (rc == MPI_SUCCESS && slot->incoming != slot->bytes) {
        if (slot->req != MPI_REQUEST_NULL) {
          int flag = 0;
          if (MPI_Test(&slot->req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag == 0)
            shared_->orphans.push_back(slot);  // MPI still writes the scratch buffer
        }
        fail(errc::comm_error, t.where(),
             detail::size_mismatch(t.peer, std::to_string(slot->incoming), t),
             "; the message was discarded and the receive buffer left untouched");
      }
    }
    r.state_.req = MPI_REQUEST_NULL;
    r.state_.shared.reset();
    r.state_.owner.reset();
    if (rc != MPI_SUCCESS) {
      const int code = rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : rc;
      int cls = 0;
      MPI_Error_class(code, &cls);
      if (cls == MPI_ERR_TRUNCATE)
        fail(errc::comm_error, t.where(),
             detail::size_mismatch(t.peer, cat("more than ", t.bytes), t),
             " (MPI reported truncation without the sender's size)");
      check(code, t, t.what());
    }
    if (!t.is_send) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      ensure(static_cast<std::size_t>(count) == t.bytes, t.where(), "probed message of ", t.bytes,
             " bytes arrived with ", count);
    }
  }

  void wait_collective(MPI_Request& q, const char* what, std::size_t bytes) {
    const auto deadline = detail::deadline_after(opts_.timeout);
    int rc = MPI_SUCCESS;
    const bool done = detail::poll_until(deadline, [&] {
      int flag = 0;
      rc = MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
      return rc != MPI_SUCCESS || flag != 0;
    });
    if (!done) broken_ = true;
    if (!done)
      fail(errc::timeout, where_collective(what), what, " of ", bytes,
           " bytes did not complete within ", opts_.timeout.count(),
           " ms (a rank is silent or dead); this communicator can no longer be used");
    check(rc, where_collective(what), what);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  comm_options opts_;
  std::shared_ptr<detail::mpi_shared> shared_ = std::make_shared<detail::mpi_shared>();
  detail::group_nesting group_;
  bool broken_ = false;  // a wait timed out or a peer died: never freed (see ~mpi_backend)
};

static_assert(comm_backend<mpi_backend>);

}  // namespace disttrain
