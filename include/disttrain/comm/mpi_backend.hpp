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
/// Waits poll `MPI_Test` until the deadline; on timeout the request is
/// cancelled (`MPI_Cancel`; a rendezvous send that MPI cannot cancel is
/// detached) and `errc::timeout` is thrown naming peer, tag and bytes; after a
/// timeout treat the communicator as broken. Collectives use the non-blocking
/// `MPI_Ibarrier` / `MPI_Ibcast` / `MPI_Iallgather` with the same deadline; a
/// collective that times out cannot be cancelled, so the backend must not be
/// used afterwards (the error says so). Note MPI semantics: a small (eager)
/// send can complete even though the peer never receives it; the receiver's
/// wait is what detects a silent peer.
///
/// @code
/// disttrain::mpi_session session(argc, argv);   // MPI_Init_thread / MPI_Finalize
/// disttrain::mpi_backend b(MPI_COMM_WORLD, {std::chrono::seconds(30)});
/// if (b.rank() == 0) b.wait(b.isend(bytes, 1, 0));
/// @endcode

#if !defined(DISTTRAIN_HAS_MPI)
#error \
    "disttrain/comm/mpi_backend.hpp needs MPI: link the CMake target disttrain::mpi (configure with -DDISTTRAIN_ENABLE_MPI=ON), which defines DISTTRAIN_HAS_MPI"
#endif

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "disttrain/comm/backend.hpp"
#include "disttrain/core/checked.hpp"
#include "disttrain/core/error.hpp"

namespace disttrain {

namespace detail {
/// Text of an MPI error code.
[[nodiscard]] inline std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return detail::cat("MPI error ", code);
  return std::string(buf, static_cast<std::size_t>(len));
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
}  // namespace detail

/// @brief RAII MPI initialisation (`MPI_Init_thread` with `MPI_THREAD_FUNNELED`
/// unless MPI is already initialised; `MPI_Finalize` at destruction if it
/// initialised MPI).
///
/// @code
/// int main(int argc, char** argv) { disttrain::mpi_session s(argc, argv); ... }
/// @endcode
class mpi_session {
 public:
  mpi_session(int& argc, char**& argv, int required = MPI_THREAD_FUNNELED) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      const int rc = MPI_Init_thread(&argc, &argv, required, &provided);
      if (rc != MPI_SUCCESS)
        detail::fail(errc::comm_error, "mpi_session",
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
class mpi_backend {
 public:
  static constexpr memory_space memory = memory_space::host;

  /// @brief Handle of one posted transfer; destroying an incomplete one cancels it.
  class request {
   public:
    request() = default;
    request(request&& o) noexcept : req_(std::exchange(o.req_, MPI_REQUEST_NULL)), info_(o.info_) {}
    request& operator=(request&& o) noexcept {
      if (this != &o) {
        cancel();
        req_ = std::exchange(o.req_, MPI_REQUEST_NULL);
        info_ = o.info_;
      }
      return *this;
    }
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() { cancel(); }
    [[nodiscard]] const transfer_info& info() const noexcept { return info_; }
    [[nodiscard]] bool valid() const noexcept { return req_ != MPI_REQUEST_NULL; }

   private:
    friend class mpi_backend;
    // Cancels and completes the request. Receives cancel at once; OpenMPI
    // cannot cancel a send already in its rendezvous protocol, so after a
    // short grace period such a send is detached with MPI_Request_free (MPI
    // may still read its buffer if the peer ever receives: after a timeout
    // the communicator must be treated as broken).
    void cancel() noexcept {
      if (req_ == MPI_REQUEST_NULL) return;
      MPI_Cancel(&req_);
      const auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      const bool done = detail::poll_until(grace, [&] {
        int flag = 0;
        return MPI_Test(&req_, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag != 0;
      });
      if (!done && req_ != MPI_REQUEST_NULL) MPI_Request_free(&req_);
      req_ = MPI_REQUEST_NULL;
    }
    MPI_Request req_ = MPI_REQUEST_NULL;
    transfer_info info_;
  };

  /// @brief Duplicates `comm` (collective over `comm`).
  explicit mpi_backend(MPI_Comm comm = MPI_COMM_WORLD, comm_options opts = {}) : opts_(opts) {
    detail::require(opts.timeout.count() >= 0, "mpi_backend.timeout", "must be >= 0 ms, got ",
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
        opts_(o.opts_) {}
  ~mpi_backend() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] const comm_options& options() const noexcept { return opts_; }
  /// @brief The duplicated communicator (e.g. to bootstrap NCCL).
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  /// @brief Largest tag MPI accepts here (>= 32767).
  [[nodiscard]] int tag_ub() const noexcept { return tag_ub_; }
  void set_timeout(std::chrono::milliseconds t) {
    detail::require(t.count() >= 0, "mpi_backend.timeout", "must be >= 0 ms, got ", t.count());
    opts_.timeout = t;
  }

  [[nodiscard]] request isend(std::span<const std::byte> data, int peer, int tag) {
    request r;
    r.info_ = checked(peer, tag, data.size(), true);
    check(
        MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_, &r.req_),
        r.info_, "MPI_Isend");
    return r;
  }
  [[nodiscard]] request irecv(std::span<std::byte> data, int peer, int tag) {
    request r;
    r.info_ = checked(peer, tag, data.size(), false);
    check(
        MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, tag, comm_, &r.req_),
        r.info_, "MPI_Irecv");
    return r;
  }
  void wait(request& r) { wait(r, opts_.timeout); }
  void wait(request& r, std::chrono::milliseconds timeout) {
    detail::require(r.valid(), "mpi_backend.wait", "empty or already completed request");
    const auto deadline = detail::deadline_after(timeout);
    MPI_Status st{};
    int rc = MPI_SUCCESS;
    const bool done = detail::poll_until(deadline, [&] {
      int flag = 0;
      rc = MPI_Test(&r.req_, &flag, &st);
      return rc != MPI_SUCCESS || flag != 0;
    });
    if (!done) {
      r.cancel();
      detail::fail_timeout(r.info_, timeout);
    }
    finish(r, rc, st);
  }
  bool test(request& r) {
    detail::require(r.valid(), "mpi_backend.test", "empty or already completed request");
    int flag = 0;
    MPI_Status st{};
    const int rc = MPI_Test(&r.req_, &flag, &st);
    if (rc == MPI_SUCCESS && flag == 0) return false;
    finish(r, rc, st);
    return true;
  }
  /// @brief No-op bracket (MPI point-to-point is already non-blocking); nesting checked.
  void group_start() { ++group_depth_; }
  void group_end() {
    detail::require(group_depth_ > 0, detail::cat("rank ", rank_), "group_end without group_start");
    --group_depth_;
  }
  void barrier() {
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &q), where_collective("barrier"), "MPI_Ibarrier");
    wait_collective(q, "barrier", 0);
  }
  void broadcast(std::span<std::byte> data, int root) {
    detail::require(root >= 0 && root < size_, "mpi_backend.broadcast.root", "root ", root,
                    " out of [0, ", size_, ")");
    require_int_count(data.size(), where_collective("broadcast"));
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Ibcast(data.data(), static_cast<int>(data.size()), MPI_BYTE, root, comm_, &q),
          where_collective("broadcast"), "MPI_Ibcast");
    wait_collective(q, "broadcast", data.size());
  }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
    detail::require(!detail::mul_overflows(mine.size(), static_cast<std::size_t>(size_)) &&
                        all.size() == mine.size() * static_cast<std::size_t>(size_),
                    "mpi_backend.allgather", "output of ", all.size(), " bytes, need ", mine.size(),
                    " x ", size_);
    require_int_count(mine.size(), where_collective("allgather"));
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                         static_cast<int>(mine.size()), MPI_BYTE, comm_, &q),
          where_collective("allgather"), "MPI_Iallgather");
    wait_collective(q, "allgather", all.size());
  }

 private:
  [[nodiscard]] std::string where_collective(const char* what) const {
    return detail::cat("rank ", rank_, " ", what);
  }

  static void require_int_count(std::size_t bytes, const std::string& where) {
    if (bytes > static_cast<std::size_t>(INT_MAX))
      detail::fail(errc::unsupported, where, "message of ", bytes,
                   " bytes exceeds MPI's int count (", INT_MAX,
                   "); split the transfer (e.g. a smaller microbatch)");
  }

  // Validates one point-to-point call. Per-message hot path: the error text
  // (`where()`) is only built when a check fails.
  transfer_info checked(int peer, int tag, std::size_t bytes, bool is_send) const {
    const transfer_info t{rank_, peer, tag, bytes, is_send};
    if (peer < 0 || peer >= size_)
      detail::fail(errc::invalid_argument, t.where(), "peer ", peer, " out of [0, ", size_, ")");
    if (tag < 0 || tag > tag_ub_)
      detail::fail(errc::invalid_argument, t.where(), "tag ", tag,
                   " out of [0, MPI_TAG_UB = ", tag_ub_, "]");
    if (bytes > static_cast<std::size_t>(INT_MAX)) require_int_count(bytes, t.where());
    return t;
  }

  static void check(int rc, const std::string& where, const char* call) {
    if (rc != MPI_SUCCESS)
      detail::fail(errc::comm_error, where, call, " failed: ", detail::mpi_error_string(rc));
  }
  static void check(int rc, const transfer_info& t, const char* call) {
    if (rc != MPI_SUCCESS) check(rc, t.where(), call);
  }

  void finish(request& r, int rc, const MPI_Status& st) {
    const transfer_info t = r.info_;
    r.req_ = MPI_REQUEST_NULL;
    if (rc != MPI_SUCCESS) {
      const int code = rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : rc;
      int cls = 0;
      MPI_Error_class(code, &cls);
      if (cls == MPI_ERR_TRUNCATE)
        detail::fail(errc::comm_error, t.where(), "size mismatch: rank ", t.peer,
                     " sent more than the ", t.bytes, " bytes of this ", t.what());
      detail::fail(errc::comm_error, t.where(), t.what(),
                   " failed: ", detail::mpi_error_string(code));
    }
    if (!t.is_send) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      if (static_cast<std::size_t>(count) != t.bytes)
        detail::fail(errc::comm_error, t.where(), "size mismatch: rank ", t.peer, " sends ", count,
                     " bytes but this rank posted a ", t.what());
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
    if (!done)
      detail::fail(errc::timeout, where_collective(what), what, " of ", bytes,
                   " bytes did not complete within ", opts_.timeout.count(),
                   " ms (a rank is silent or dead); this communicator can no longer be used");
    check(rc, where_collective(what), what);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  comm_options opts_;
  int group_depth_ = 0;
};

static_assert(comm_backend<mpi_backend>);

}  // namespace disttrain
