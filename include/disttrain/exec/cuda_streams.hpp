#pragma once
/// @file cuda_streams.hpp
/// @brief A compute stream and a communication stream ordered by events: how
/// a CUDA host of the executor overlaps transfers with kernels.
///
/// A host that runs on a GPU enqueues F/B/W kernels on `compute()` and its
/// transfers (NCCL send/recv, pack/unpack kernels, peer copies on the copy
/// engines) on `comm()`, which has the device's highest priority:
/// - after enqueueing the kernel that produces a tensor to send, call
///   `comm_waits_for_compute()` before enqueueing the send (the send starts
///   when the data exists, without blocking the host or the compute stream);
/// - after enqueueing a receive (and its unpack) on `comm()`, call
///   `compute_waits_for_comm()` before the kernel that consumes it.
/// The executor calls the host in schedule order; with these two calls the
/// GPU runs compute and communication concurrently, in the order the schedule
/// implies. (`cudaStreamWaitEvent` captures the event's latest record at call
/// time, so one event per direction is enough.)
///
/// Only available with CUDA (`disttrain::kernels` or `disttrain::nccl`, or a
/// `.cu` translation unit); CUDA failures throw `errc::comm_error` naming the call.
///
/// @code
/// disttrain::cuda_stream_pair sp;                 // on the current device
/// my_forward_kernel<<<g, b, 0, sp.compute()>>>(...);
/// sp.comm_waits_for_compute();
/// ncclSend(act, n, ncclFloat, peer, comm, sp.comm());
/// sp.compute_waits_for_comm();                   // before a kernel reading received data
/// @endcode

#if !defined(__CUDACC__) && !defined(DISTTRAIN_HAS_CUDA_KERNELS) && !defined(DISTTRAIN_HAS_NCCL)
#error \
    "disttrain/exec/cuda_streams.hpp needs CUDA: link disttrain::kernels (-DDISTTRAIN_ENABLE_CUDA=ON) or disttrain::nccl, or include it from a .cu file"
#endif

#include <cuda_runtime_api.h>

#include <string>

#include "disttrain/core/check.hpp"

namespace disttrain {

namespace detail {
inline void exec_cuda_check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess)
    fail(errc::comm_error, "cuda_stream_pair", call, " failed: ", cudaGetErrorString(rc));
}
}  // namespace detail

/// @brief Two streams of one device and the events that order them (see the file comment).
class cuda_stream_pair {
 public:
  /// @brief Creates the streams on `device` (-1: the current device).
  explicit cuda_stream_pair(int device = -1) {
    if (device >= 0) detail::exec_cuda_check(cudaSetDevice(device), "cudaSetDevice");
    int least = 0, greatest = 0;
    detail::exec_cuda_check(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                            "cudaDeviceGetStreamPriorityRange");
    detail::exec_cuda_check(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, least),
                            "cudaStreamCreateWithPriority(compute)");
    detail::exec_cuda_check(cudaStreamCreateWithPriority(&comm_, cudaStreamNonBlocking, greatest),
                            "cudaStreamCreateWithPriority(comm)");
    detail::exec_cuda_check(cudaEventCreateWithFlags(&produced_, cudaEventDisableTiming),
                            "cudaEventCreate");
    detail::exec_cuda_check(cudaEventCreateWithFlags(&arrived_, cudaEventDisableTiming),
                            "cudaEventCreate");
  }
  cuda_stream_pair(const cuda_stream_pair&) = delete;
  cuda_stream_pair& operator=(const cuda_stream_pair&) = delete;
  ~cuda_stream_pair() {
    cudaEventDestroy(produced_);
    cudaEventDestroy(arrived_);
    cudaStreamDestroy(comm_);
    cudaStreamDestroy(compute_);
  }

  /// @brief Stream of F, B, W and optimizer kernels.
  [[nodiscard]] cudaStream_t compute() const noexcept { return compute_; }
  /// @brief Stream of sends, receives, pack/unpack and peer copies (highest priority).
  [[nodiscard]] cudaStream_t comm() const noexcept { return comm_; }

  /// @brief Work enqueued on `comm()` from now on starts after everything enqueued on `compute()` so far.
  void comm_waits_for_compute() {
    detail::exec_cuda_check(cudaEventRecord(produced_, compute_), "cudaEventRecord(compute)");
    detail::exec_cuda_check(cudaStreamWaitEvent(comm_, produced_, 0), "cudaStreamWaitEvent(comm)");
  }
  /// @brief Work enqueued on `compute()` from now on starts after everything enqueued on `comm()` so far.
  void compute_waits_for_comm() {
    detail::exec_cuda_check(cudaEventRecord(arrived_, comm_), "cudaEventRecord(comm)");
    detail::exec_cuda_check(cudaStreamWaitEvent(compute_, arrived_, 0),
                            "cudaStreamWaitEvent(compute)");
  }
  /// @brief Whether all communication enqueued so far has finished (non-blocking poll).
  [[nodiscard]] bool comm_done() const {
    const cudaError_t rc = cudaStreamQuery(comm_);
    if (rc == cudaErrorNotReady) return false;
    detail::exec_cuda_check(rc, "cudaStreamQuery(comm)");
    return true;
  }
  /// @brief Blocks the host until both streams are idle (end of an iteration).
  void synchronize() {
    detail::exec_cuda_check(cudaStreamSynchronize(comm_), "cudaStreamSynchronize(comm)");
    detail::exec_cuda_check(cudaStreamSynchronize(compute_), "cudaStreamSynchronize(compute)");
  }

 private:
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  cudaEvent_t produced_ = nullptr;
  cudaEvent_t arrived_ = nullptr;
};

}  // namespace disttrain
