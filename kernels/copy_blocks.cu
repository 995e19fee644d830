// CUDA implementation of disttrain::kernels::launch_copy_blocks (see
// include/disttrain/kernels/copy_blocks_cuda.hpp). One warp copies one task
// (up to copy_chunk_elements elements of one row of one block); the tasks of
// all blocks are numbered consecutively. What a warp does with its task is
// include/disttrain/kernels/detail/copy_task.hpp, shared with the CPU test
// that replays it lane by lane.
#include <cstddef>
#include <cstdint>

#include "disttrain/kernels/copy_blocks_cuda.hpp"
#include "disttrain/kernels/detail/copy_task.hpp"

namespace disttrain::kernels {
namespace {

constexpr int threads_per_block = 256;
constexpr int warps_per_block = threads_per_block / detail::warp_lanes;

__global__ void copy_blocks_kernel(const std::byte* __restrict__ src, std::byte* __restrict__ dst,
                                   device_block_list list, std::int64_t es) {
  const std::int64_t warps_total = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * warps_per_block +
                             static_cast<std::int64_t>(threadIdx.x / detail::warp_lanes);
  const int lane = static_cast<int>(threadIdx.x % detail::warp_lanes);
  for (std::int64_t t = first; t < list.total_tasks; t += warps_total) {
    const detail::task_bytes k =
        detail::locate_task(list.blocks, list.task_prefix, list.n_blocks, t, es);
    detail::copy_range(src + k.src, dst + k.dst, static_cast<std::size_t>(k.bytes), lane);
  }
}

}  // namespace

cudaError_t launch_copy_blocks(const std::byte* src, std::byte* dst, device_block_list list,
                               std::size_t elem_size, cudaStream_t stream) {
  if (list.total_tasks <= 0 || list.n_blocks <= 0) return cudaSuccess;
  if (elem_size == 0) return cudaErrorInvalidValue;
  std::int64_t blocks = (list.total_tasks + warps_per_block - 1) / warps_per_block;
  if (blocks > 65535) blocks = 65535;  // grid-stride beyond this
  copy_blocks_kernel<<<static_cast<unsigned>(blocks), threads_per_block, 0, stream>>>(
      src, dst, list, static_cast<std::int64_t>(elem_size));
  return cudaGetLastError();
}

}  // namespace disttrain::kernels
