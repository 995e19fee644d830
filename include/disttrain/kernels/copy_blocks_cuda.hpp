#pragma once
/// @file copy_blocks_cuda.hpp
/// @brief CUDA version of `copy_blocks_cpu`: one launch performs every block
/// copy of a list (pack, unpack, variable-length gather/scatter) on a stream.
///
/// Needs the CMake target `disttrain::kernels` (configure with
/// `-DDISTTRAIN_ENABLE_CUDA=ON`), which defines `DISTTRAIN_HAS_CUDA_KERNELS`
/// and builds kernels/copy_blocks.cu. Usable from .cpp files (host compiler)
/// and .cu files alike.
///
/// Work split: one warp per task, a task being up to `copy_chunk_elements`
/// elements of one row of a block, so one long row (a contiguous message) is
/// spread over many warps. A warp finds its block by binary search in the task
/// prefix sums, then copies with the widest word (16 bytes down to 1) that
/// source and destination share an alignment for, bytes at the ends
/// (`detail/copy_task.hpp`). Blocks of any sizes share one launch, so a
/// message of many variable-length samples costs one kernel.
///
/// @code
/// disttrain::kernels::device_blocks d(blocks, stream);   // uploads blocks + prefix sums
/// DISTTRAIN_CUDA_CHECK(disttrain::kernels::launch_copy_blocks(src_dev, dst_dev, d.list(), 2, stream));
/// @endcode

#if !defined(DISTTRAIN_HAS_CUDA_KERNELS)
#error \
    "disttrain/kernels/copy_blocks_cuda.hpp needs the CUDA kernels: link disttrain::kernels (configure with -DDISTTRAIN_ENABLE_CUDA=ON), which defines DISTTRAIN_HAS_CUDA_KERNELS"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/kernels/copy_blocks.hpp"

/// Throws `disttrain::error(errc::comm_error)` naming the call if a CUDA runtime call fails.
#define DISTTRAIN_CUDA_CHECK(call)                                           \
  do {                                                                       \
    const cudaError_t disttrain_cuda_rc_ = (call);                           \
    if (disttrain_cuda_rc_ != cudaSuccess)                                   \
      ::disttrain::fail(::disttrain::errc::comm_error, #call, "CUDA error ", \
                        cudaGetErrorName(disttrain_cuda_rc_), ": ",          \
                        cudaGetErrorString(disttrain_cuda_rc_));             \
  } while (false)

namespace disttrain::kernels {

/// @brief A block list in device memory (non-owning, trivially copyable).
struct device_block_list {
  const copy_block* blocks = nullptr;         ///< device array of n_blocks blocks
  const std::int64_t* task_prefix = nullptr;  ///< device array of n_blocks + 1 task prefix sums
  std::int64_t n_blocks = 0;
  std::int64_t total_tasks = 0;
};

/// @brief Enqueues the copy of every block of `list` from `src` to `dst`
/// (device pointers) on `stream`. Returns the launch error, if any.
cudaError_t launch_copy_blocks(const std::byte* src, std::byte* dst, device_block_list list,
                               std::size_t elem_size, cudaStream_t stream);

/// @brief Owning device copy of a block list (uploaded with `cudaMemcpyAsync`
/// on `stream`); throws `errc::comm_error` on CUDA failures.
class device_blocks {
 public:
  device_blocks() = default;
  device_blocks(std::span<const copy_block> blocks, cudaStream_t stream) { upload(blocks, stream); }
  device_blocks(const device_blocks&) = delete;
  device_blocks& operator=(const device_blocks&) = delete;
  device_blocks(device_blocks&& o) noexcept
      : mem_(std::exchange(o.mem_, nullptr)),
        list_(std::exchange(o.list_, {})),
        host_(std::move(o.host_)) {}
  ~device_blocks() {
    if (mem_ != nullptr) cudaFree(mem_);
  }
  /// @brief Replaces the list (the previous upload must no longer be in use).
  void upload(std::span<const copy_block> blocks, cudaStream_t stream) {
    (void)extent(blocks);  // validates the blocks
    host_.assign(blocks.begin(), blocks.end());
    const auto prefix = task_prefix(blocks);
    const std::size_t bytes_blocks = blocks.size() * sizeof(copy_block);
    const std::size_t bytes = bytes_blocks + prefix.size() * sizeof(std::int64_t);
    if (mem_ != nullptr) cudaFree(mem_);
    mem_ = nullptr;
    DISTTRAIN_CUDA_CHECK(cudaMalloc(&mem_, bytes));
    auto* base = static_cast<std::byte*>(mem_);
    if (bytes_blocks > 0)
      DISTTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(base, blocks.data(), bytes_blocks, cudaMemcpyHostToDevice, stream));
    DISTTRAIN_CUDA_CHECK(cudaMemcpyAsync(base + bytes_blocks, prefix.data(),
                                         prefix.size() * sizeof(std::int64_t),
                                         cudaMemcpyHostToDevice, stream));
    // `prefix` is a local: make the copy complete before it goes away.
    DISTTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    list_ = {reinterpret_cast<const copy_block*>(base),
             reinterpret_cast<const std::int64_t*>(base + bytes_blocks),
             static_cast<std::int64_t>(blocks.size()), prefix.back()};
  }
  [[nodiscard]] device_block_list list() const noexcept { return list_; }
  /// @brief The host copy of the blocks.
  [[nodiscard]] std::span<const copy_block> host() const noexcept { return host_; }

 private:
  void* mem_ = nullptr;
  device_block_list list_;
  std::vector<copy_block> host_;
};

}  // namespace disttrain::kernels
