#pragma once
/// @file nccl_backend.hpp
/// @brief NCCL backend: device buffers, transfers on a CUDA stream; satisfies
/// `comm_backend` with `memory == memory_space::device`.
///
/// Only available with NCCL: link the CMake target `disttrain::nccl`
/// (configure with `-DDISTTRAIN_ENABLE_NCCL=ON`), which defines
/// `DISTTRAIN_HAS_NCCL`. The MPI bootstrap additionally needs
/// `disttrain::mpi` (`DISTTRAIN_HAS_MPI`).
///
/// Bootstrap (the three ways C++ trainers share the `ncclUniqueId`):
/// - `nccl_backend::from_mpi(comm, stream)`: rank 0 creates the id and
///   broadcasts it with MPI;
/// - `nccl_backend::from_file(path, rank, size, stream)`: rank 0 writes the id
///   to a shared file (atomically, via rename) and the others poll for it
///   until the timeout;
/// - `nccl_backend(id, rank, size, stream)`: the host program provides the id
///   (e.g. through its own launcher or key-value store).
///
/// Semantics: NCCL has no tags; sends and receives between one pair of ranks
/// match in issue order (the tag only appears in error messages). Requests
/// complete when the stream reaches them (a CUDA event). Sends and receives
/// that depend on each other must be issued inside `group_start()` /
/// `group_end()` (ncclGroupStart/End); requests created inside a group
/// become waitable at `group_end()`.
///
/// Faults: the communicator is created non-blocking; every wait polls the
/// request's event and `ncclCommGetAsyncError` until the deadline; on an
/// asynchronous error or a timeout it calls `ncclCommAbort` (so no kernel
/// stays stuck) and throws `errc::comm_error` / `errc::timeout` naming the
/// peer, tag and bytes (for `ncclRemoteError`, the async error NCCL reports
/// when a remote process dies or its network fails, it adds that the peer may
/// be dead: NCCL does not say which rank). After that the backend is unusable
/// (every call throws).
///
/// Cost: the non-blocking mode is what makes these timeouts possible, and it
/// is most of what the backend costs per message. On an H200, a one-rank
/// self-exchange took about 70 us per group through the backend, 60 us
/// through raw NCCL on a non-blocking communicator and 16-24 us on a blocking
/// one, up to 16 MiB (docs/benchmarks.md, `bench_nccl_one_rank`). Batch
/// messages into one group where the schedule allows.
///
/// @code
/// cudaStream_t s; cudaStreamCreate(&s);
/// auto b = disttrain::nccl_backend::from_mpi(MPI_COMM_WORLD, s);
/// b.group_start();
/// auto r = b.isend({dev_ptr, bytes}, peer, 0);
/// b.group_end();
/// b.wait(r);
/// @endcode

#if !defined(DISTTRAIN_HAS_NCCL)
#error \
    "disttrain/comm/nccl_backend.hpp needs NCCL: link the CMake target disttrain::nccl (configure with -DDISTTRAIN_ENABLE_NCCL=ON), which defines DISTTRAIN_HAS_NCCL"
#endif

#include <cuda_runtime_api.h>
#include <nccl.h>

#if defined(DISTTRAIN_HAS_MPI)
#include <mpi.h>
#endif

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/buffer.hpp"
#include "disttrain/comm/detail/backend_parts.hpp"
#include "disttrain/comm/detail/unique_handle.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"

namespace disttrain {

/// @brief `basic_buffer_pool` allocator of device memory (`cudaMalloc`).
///
/// @code
/// disttrain::basic_buffer_pool<disttrain::device_allocator> pool;
/// auto staging = pool.acquire(1 << 20);  // device memory
/// @endcode
struct device_allocator {
  [[nodiscard]] std::byte* allocate(std::size_t bytes) const {
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc != cudaSuccess)
      fail(errc::comm_error, "device_allocator", "cudaMalloc of ", bytes,
           " bytes failed: ", cudaGetErrorString(rc));
    return static_cast<std::byte*>(p);
  }
  void deallocate(std::byte* p, std::size_t /*bytes*/) const noexcept { cudaFree(p); }
};

namespace detail {
inline void nccl_check(ncclResult_t rc, const std::string& where, const char* call) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    fail(errc::comm_error, where, call, " failed: ", ncclGetErrorString(rc));
}
inline void cuda_check(cudaError_t rc, const std::string& where, const char* call) {
  if (rc != cudaSuccess) fail(errc::comm_error, where, call, " failed: ", cudaGetErrorString(rc));
}
/// What an `nccl_backend::request` owns: the CUDA event recorded after the
/// transfer (destroyed at release) and the transfer's description.
struct nccl_request_state {
  cudaEvent_t ev = nullptr;
  transfer_info info;
  void release() noexcept {
    if (ev != nullptr) cudaEventDestroy(ev);
    ev = nullptr;
  }
  bool holds() const noexcept { return ev != nullptr; }
};
}  // namespace detail

/// @brief The NCCL backend (see the file comment).
class nccl_backend : public detail::deadline_waits<nccl_backend> {
 public:
  static constexpr memory_space memory = memory_space::device;

  /// @brief Handle of one transfer: a CUDA event recorded after it on the stream.
  class request : public detail::request_handle<detail::nccl_request_state> {
   private:
    friend class nccl_backend;
  };

  /// @brief Creates the communicator from a host-provided unique id
  /// (collective over the `size` ranks); waits for initialisation up to the timeout.
  nccl_backend(const ncclUniqueId& id, int rank, int size, cudaStream_t stream,
               comm_options opts = {})
      : rank_(rank), size_(size), stream_(stream), opts_(opts) {
    require_positive(size, "nccl_backend.size");
    require(rank >= 0 && rank < size, "nccl_backend.rank", "rank ", rank, " out of [0, ", size,
            ")");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // non-blocking: lets us time out and abort instead of hanging
    detail::nccl_check(ncclCommInitRankConfig(&comm_, size, id, rank, &cfg), where(),
                       "ncclCommInitRankConfig");
    const auto deadline = detail::deadline_after(opts_.timeout);
    wait_ready(deadline, "communicator initialisation");
    detail::cuda_check(cudaMalloc(&scratch_, sizeof(int)), where(), "cudaMalloc");
  }

  /// @brief Bootstrap through a shared file: rank 0 creates the id and writes
  /// it to `path` (write to `path.tmp`, then rename); the others poll for the
  /// file until the timeout. Remove the file before the next job.
  [[nodiscard]] static nccl_backend from_file(const std::string& path, int rank, int size,
                                              cudaStream_t stream, comm_options opts = {}) {
    return nccl_backend(unique_id_from_file(path, rank, opts.timeout), rank, size, stream, opts);
  }
  /// @brief Reads (or, on rank 0, creates and writes) the unique id of `path`.
  [[nodiscard]] static ncclUniqueId unique_id_from_file(const std::string& path, int rank,
                                                        std::chrono::milliseconds timeout) {
    ncclUniqueId id{};
    if (rank == 0) {
      detail::nccl_check(ncclGetUniqueId(&id), path, "ncclGetUniqueId");
      const std::string tmp = path + ".tmp";
      {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(id.internal, sizeof(id.internal));
        if (!out) fail(errc::comm_error, path, "cannot write the NCCL unique id to ", tmp);
      }
      std::error_code ec;
      std::filesystem::rename(tmp, path, ec);
      if (ec) fail(errc::comm_error, path, "cannot rename ", tmp, ": ", ec.message());
      return id;
    }
    const auto deadline = detail::deadline_after(timeout);
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in && in.read(id.internal, sizeof(id.internal)) && in.gcount() == sizeof(id.internal))
        return id;
      if (std::chrono::steady_clock::now() >= deadline)
        fail(errc::timeout, path, "rank ", rank, " waited ", timeout.count(),
             " ms for rank 0 to write the NCCL unique id (", sizeof(id.internal), " bytes)");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
#if defined(DISTTRAIN_HAS_MPI)
  /// @brief Bootstrap through MPI: rank 0 of `comm` creates the id, `MPI_Bcast` shares it.
  [[nodiscard]] static nccl_backend from_mpi(MPI_Comm comm, cudaStream_t stream,
                                             comm_options opts = {}) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ncclUniqueId id{};
    if (rank == 0)
      detail::nccl_check(ncclGetUniqueId(&id), "nccl_backend.from_mpi", "ncclGetUniqueId");
    if (MPI_Bcast(id.internal, static_cast<int>(sizeof(id.internal)), MPI_BYTE, 0, comm) !=
        MPI_SUCCESS)
      fail(errc::comm_error, "nccl_backend.from_mpi", "MPI_Bcast of the NCCL unique id failed");
    return nccl_backend(id, rank, size, stream, opts);
  }
#endif

  nccl_backend(const nccl_backend&) = delete;
  nccl_backend& operator=(const nccl_backend&) = delete;
  nccl_backend(nccl_backend&& o) noexcept
      : comm_(std::exchange(o.comm_, nullptr)),
        rank_(o.rank_),
        size_(o.size_),
        stream_(o.stream_),
        opts_(o.opts_),
        broken_(o.broken_),
        group_(o.group_),
        in_group_(std::move(o.in_group_)),
        scratch_(std::exchange(o.scratch_, nullptr)) {}
  ~nccl_backend() {
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (comm_ == nullptr) return;
    if (broken_)
      ncclCommAbort(comm_);
    else
      ncclCommDestroy(comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] const comm_options& options() const noexcept { return opts_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] ncclComm_t comm() const noexcept { return comm_; }
  /// @brief True after an abort (timeout or asynchronous error).
  [[nodiscard]] bool broken() const noexcept { return broken_; }

  /// @brief Enqueues a send of device bytes to `peer` on the stream.
  [[nodiscard]] request isend(std::span<const std::byte> data, int peer, int tag) {
    request r = make_request(peer, tag, data.size(), true);
    detail::nccl_check(ncclSend(data.data(), data.size(), ncclUint8, peer, comm_, stream_),
                       r.state_.info.where(), "ncclSend");
    after_enqueue(r);
    return r;
  }
  /// @brief Enqueues a receive of device bytes from `peer` on the stream.
  [[nodiscard]] request irecv(std::span<std::byte> data, int peer, int tag) {
    request r = make_request(peer, tag, data.size(), false);
    detail::nccl_check(ncclRecv(data.data(), data.size(), ncclUint8, peer, comm_, stream_),
                       r.state_.info.where(), "ncclRecv");
    after_enqueue(r);
    return r;
  }
  /// @brief A request that completes when the stream reaches this point (after
  /// kernels enqueued since, e.g. unpacking); `tag` only names it in errors.
  [[nodiscard]] request fence(int tag = -1) {
    request r = make_request(rank_, tag, 0, true);
    after_enqueue(r);
    return r;
  }
  /// @brief `wait(r)` (the default timeout) and `wait(r, timeout)`.
  using deadline_waits::wait;
  /// @brief Waits until `d.at`; a timeout error quotes `d.timeout`.
  void wait(request& r, const wait_deadline& d) {
    require(r.valid(), "nccl_backend.wait", "empty or already completed request");
    require(group_.depth() == 0, r.state_.info.where(), "wait inside group_start/group_end");
    for (long spins = 0;; ++spins) {
      if (poll(r)) return;
      if (std::chrono::steady_clock::now() >= d.at) {
        if (poll(r)) return;
        abort_comm();
        const transfer_info t = r.state_.info;
        r.state_.release();
        detail::fail_timeout(t, d.timeout);
      }
      if (spins > 1000) std::this_thread::yield();
    }
  }
  bool test(request& r) {
    require(r.valid(), "nccl_backend.test", "empty or already completed request");
    return poll(r);
  }
  void group_start() {
    require_usable("group_start");
    detail::nccl_check(ncclGroupStart(), where(), "ncclGroupStart");
    group_.start();
  }
  void group_end() {
    group_.end(rank_, " (nccl)");
    const ncclResult_t rc = ncclGroupEnd();
    detail::nccl_check(rc, where(), "ncclGroupEnd");
    if (group_.depth() == 0) {
      if (rc == ncclInProgress)
        wait_ready(detail::deadline_after(opts_.timeout), "group submission");
      for (cudaEvent_t ev : in_group_)
        detail::cuda_check(cudaEventRecord(ev, stream_), where(), "cudaEventRecord");
      in_group_.clear();
    }
  }
  void barrier() {
    require_usable("barrier");
    detail::nccl_check(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_),
                       where(), "ncclAllReduce");
    sync_collective("barrier", 0);
  }
  /// @brief Broadcast of device bytes from `root`.
  void broadcast(std::span<std::byte> data, int root) {
    require_usable("broadcast");
    require(root >= 0 && root < size_, "nccl_backend.broadcast.root", "root ", root, " out of [0, ",
            size_, ")");
    detail::nccl_check(
        ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_),
        where(), "ncclBroadcast");
    sync_collective("broadcast", data.size());
  }
  /// @brief All-gather of device bytes.
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
    require_usable("allgather");
    require(!mul_overflows(mine.size(), static_cast<std::size_t>(size_)) &&
                all.size() == mine.size() * static_cast<std::size_t>(size_),
            "nccl_backend.allgather", "output of ", all.size(), " bytes, need ", mine.size(), " x ",
            size_);
    detail::nccl_check(
        ncclAllGather(mine.data(), all.data(), mine.size(), ncclUint8, comm_, stream_), where(),
        "ncclAllGather");
    sync_collective("allgather", all.size());
  }

 private:
  [[nodiscard]] std::string where() const { return cat("rank ", rank_, " (nccl)"); }

  void require_usable(const char* what) const {
    if (broken_)
      fail(errc::comm_error, where(), what,
           ": the NCCL communicator was aborted after an earlier failure");
  }

  request make_request(int peer, int tag, std::size_t bytes, bool is_send) {
    request r;
    r.state_.info = transfer_info{rank_, peer, tag, bytes, is_send};
    require_usable(is_send ? "isend" : "irecv");
    require(peer >= 0 && peer < size_, r.state_.info.where(), "peer ", peer, " out of [0, ", size_,
            ")");
    detail::cuda_check(cudaEventCreateWithFlags(&r.state_.ev, cudaEventDisableTiming),
                       r.state_.info.where(), "cudaEventCreateWithFlags");
    return r;
  }
  void after_enqueue(request& r) {
    if (group_.depth() > 0)
      in_group_.push_back(r.state_.ev);  // recorded at group_end, when NCCL launches
    else
      detail::cuda_check(cudaEventRecord(r.state_.ev, stream_), r.state_.info.where(),
                         "cudaEventRecord");
  }

  // True when complete (then the request is consumed); throws on an asynchronous NCCL error.
  bool poll(request& r) {
    require_usable("wait");
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      abort_comm();
      const transfer_info t = r.state_.info;
      r.state_.release();
      // ncclRemoteError: a remote process or its network failed. NCCL does
      // not say which rank; this request's peer is the one it waited on.
      fail(errc::comm_error, t.where(), t.what(), " failed: NCCL asynchronous error ",
           ncclGetErrorString(async),
           async == ncclRemoteError ? cat(" (a remote failure: rank ", t.peer,
                                          ", or a rank it depends on, may be dead or unreachable)")
                                    : std::string(),
           "; communicator aborted");
    }
    const cudaError_t q = cudaEventQuery(r.state_.ev);
    if (q == cudaErrorNotReady) return false;
    const transfer_info t = r.state_.info;
    r.state_.release();
    detail::cuda_check(q, t.where(), "cudaEventQuery");
    return true;
  }

  void wait_ready(std::chrono::steady_clock::time_point deadline, const char* what) {
    for (;;) {
      ncclResult_t st = ncclSuccess;
      ncclCommGetAsyncError(comm_, &st);
      if (st == ncclSuccess) return;
      if (st != ncclInProgress) {
        abort_comm();
        fail(errc::comm_error, where(), what, " failed: ", ncclGetErrorString(st));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        abort_comm();
        fail(errc::timeout, where(), what, " did not finish within ", opts_.timeout.count(),
             " ms (a rank is missing or silent); communicator aborted");
      }
      std::this_thread::yield();
    }
  }

  void sync_collective(const char* what, std::size_t bytes) {
    request r = make_request(rank_, -1, bytes, true);
    detail::cuda_check(cudaEventRecord(r.state_.ev, stream_), where(), "cudaEventRecord");
    const auto deadline = detail::deadline_after(opts_.timeout);
    while (!poll(r)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        abort_comm();
        fail(errc::timeout, where(), what, " of ", bytes, " bytes did not complete within ",
             opts_.timeout.count(), " ms; communicator aborted");
      }
      std::this_thread::yield();
    }
  }

  void abort_comm() noexcept {
    if (comm_ != nullptr && !broken_) ncclCommAbort(comm_);
    if (comm_ != nullptr) comm_ = nullptr;
    broken_ = true;
  }

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t stream_ = nullptr;
  comm_options opts_;
  bool broken_ = false;
  detail::group_nesting group_;
  std::vector<cudaEvent_t> in_group_;
  void* scratch_ = nullptr;
};

static_assert(comm_backend<nccl_backend>);

}  // namespace disttrain
