// CUDA implementation of disttrain::kernels::launch_copy_blocks (see
// include/disttrain/kernels/copy_blocks_cuda.hpp). One warp copies one row of
// one block; rows of all blocks are numbered consecutively and a warp finds
// its block by binary search in the row prefix sums.
#include <cstddef>
#include <cstdint>

#include "disttrain/kernels/copy_blocks_cuda.hpp"

namespace disttrain::kernels {
namespace {

constexpr int warp = 32;
constexpr int threads_per_block = 256;

__device__ inline std::int64_t find_block(const std::int64_t* prefix, std::int64_t n,
                                          std::int64_t row) {
  // Largest b with prefix[b] <= row (prefix[0] = 0, prefix[n] = total rows).
  std::int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (prefix[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

template <class V>
__device__ inline void copy_row(const std::byte* s, std::byte* d, std::size_t bytes, int lane) {
  const auto* sv = reinterpret_cast<const V*>(s);
  auto* dv = reinterpret_cast<V*>(d);
  const std::size_t n = bytes / sizeof(V);
  for (std::size_t i = static_cast<std::size_t>(lane); i < n; i += warp) dv[i] = sv[i];
}

__global__ void copy_blocks_kernel(const std::byte* __restrict__ src, std::byte* __restrict__ dst,
                                   device_block_list list, std::size_t es) {
  const std::int64_t warps_total =
      static_cast<std::int64_t>(gridDim.x) * (static_cast<std::int64_t>(blockDim.x) / warp);
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / warp) +
                             static_cast<std::int64_t>(threadIdx.x / warp);
  const int lane = static_cast<int>(threadIdx.x % warp);
  const auto e = static_cast<std::int64_t>(es);
  for (std::int64_t row = first; row < list.total_rows; row += warps_total) {
    const std::int64_t b = find_block(list.row_prefix, list.n_blocks, row);
    const copy_block blk = list.blocks[b];
    const std::int64_t r = row - list.row_prefix[b];
    const std::byte* s = src + (blk.src_offset + r * blk.src_ld) * e;
    std::byte* d = dst + (blk.dst_offset + r * blk.dst_ld) * e;
    const auto bytes = static_cast<std::size_t>(blk.cols * e);
    const auto align =
        reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d) | bytes;
    if (align % 16 == 0)
      copy_row<uint4>(s, d, bytes, lane);
    else if (align % 4 == 0)
      copy_row<std::uint32_t>(s, d, bytes, lane);
    else
      copy_row<unsigned char>(s, d, bytes, lane);
  }
}

}  // namespace

cudaError_t launch_copy_blocks(const std::byte* src, std::byte* dst, device_block_list list,
                               std::size_t elem_size, cudaStream_t stream) {
  if (list.total_rows <= 0 || list.n_blocks <= 0) return cudaSuccess;
  if (elem_size == 0) return cudaErrorInvalidValue;
  const std::int64_t warps_per_block = threads_per_block / warp;
  std::int64_t blocks = (list.total_rows + warps_per_block - 1) / warps_per_block;
  if (blocks > 65535) blocks = 65535;  // grid-stride beyond this
  copy_blocks_kernel<<<static_cast<unsigned>(blocks), threads_per_block, 0, stream>>>(
      src, dst, list, elem_size);
  return cudaGetLastError();
}

}  // namespace disttrain::kernels
