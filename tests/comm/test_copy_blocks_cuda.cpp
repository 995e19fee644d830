// disttrain-test: own executable (see tests/CMakeLists.txt)
// The CUDA copy_blocks kernel against the CPU reference, byte by byte, for
// pack/unpack of column slices with variable row counts, unaligned offsets and
// element sizes 1..16. Compiled twice: as a plain unit test (no CUDA: it only
// reports that it was skipped) and, when disttrain::kernels exists, linked
// against it (tests/mpi/CMakeLists.txt registers it as gpu.copy_blocks); that
// build skips at run time, saying so, where no GPU is present.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "disttrain/kernels/copy_blocks.hpp"
#include "disttrain_catch.hpp"

#if defined(DISTTRAIN_HAS_CUDA_KERNELS)
#include <cuda_runtime.h>  // typed cudaMalloc overloads

#include "cuda_device.hpp"
#include "disttrain/kernels/copy_blocks_cuda.hpp"

using disttrain::kernels::copy_block;

TEST_CASE("CUDA copy_blocks matches the CPU reference byte by byte") {
  if (!disttrain::test::have_gpu()) {
    WARN("SKIPPED: no CUDA device present; the kernel was compiled but not run");
    return;
  }
  std::mt19937_64 rng(12345);
  // Rows shorter than a chunk (a warp each), then rows of several chunks
  // (split over warps, disttrain::kernels::copy_chunk_elements).
  const std::int64_t long_row = 3 * disttrain::kernels::copy_chunk_elements + 37;
  for (const auto& [width, R] : {std::pair<std::int64_t, std::int64_t>{1000, 600}, {long_row, 40}})
    for (std::size_t es : {1u, 2u, 4u, 8u, 16u}) {
      INFO("elem_size " << es << ", row width " << width);
      const std::int64_t H = width + static_cast<std::int64_t>(rng() % 200);
      std::vector<std::byte> src(static_cast<std::size_t>(H * R) * es);
      for (auto& b : src) b = static_cast<std::byte>(rng());
      // Disjoint bands of random heights, each a random column slice (variable
      // lengths, odd offsets): pack, then unpack into a zeroed matrix.
      std::vector<copy_block> blocks;
      std::int64_t packed = 0;
      for (std::int64_t r0 = 0; r0 < R;) {
        const std::int64_t rows =
            std::min<std::int64_t>(R - r0, 1 + static_cast<std::int64_t>(rng() % 9));
        const std::int64_t c0 =
            static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(H - 1));
        const std::int64_t cols =
            1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(H - c0));
        blocks.push_back({r0 * H + c0, packed, rows, cols, H, cols});
        packed += rows * cols;
        r0 += rows;
      }
      std::vector<copy_block> unpack;
      for (const auto& b : blocks)
        unpack.push_back({b.dst_offset, b.src_offset, b.rows, b.cols, b.dst_ld, b.src_ld});
      std::vector<std::byte> want(static_cast<std::size_t>(packed) * es), got(want.size());
      std::vector<std::byte> back_want(src.size(), std::byte{0}), back_got(src.size());
      disttrain::kernels::copy_blocks_cpu(src, want, blocks, es);
      disttrain::kernels::copy_blocks_cpu(want, back_want, unpack, es);

      cudaStream_t s = nullptr;
      DISTTRAIN_CUDA_CHECK(cudaStreamCreate(&s));
      std::byte *dsrc = nullptr, *dpacked = nullptr, *dback = nullptr;
      DISTTRAIN_CUDA_CHECK(cudaMalloc(&dsrc, src.size()));
      DISTTRAIN_CUDA_CHECK(cudaMalloc(&dpacked, got.size()));
      DISTTRAIN_CUDA_CHECK(cudaMalloc(&dback, src.size()));
      DISTTRAIN_CUDA_CHECK(cudaMemcpy(dsrc, src.data(), src.size(), cudaMemcpyHostToDevice));
      DISTTRAIN_CUDA_CHECK(cudaMemset(dback, 0, src.size()));
      disttrain::kernels::device_blocks dp(blocks, s), du(unpack, s);
      DISTTRAIN_CUDA_CHECK(disttrain::kernels::launch_copy_blocks(dsrc, dpacked, dp.list(), es, s));
      DISTTRAIN_CUDA_CHECK(
          disttrain::kernels::launch_copy_blocks(dpacked, dback, du.list(), es, s));
      DISTTRAIN_CUDA_CHECK(cudaStreamSynchronize(s));
      DISTTRAIN_CUDA_CHECK(cudaMemcpy(got.data(), dpacked, got.size(), cudaMemcpyDeviceToHost));
      DISTTRAIN_CUDA_CHECK(
          cudaMemcpy(back_got.data(), dback, back_got.size(), cudaMemcpyDeviceToHost));
      std::size_t bad_pack = 0, bad_unpack = 0;
      for (std::size_t i = 0; i < got.size(); ++i) bad_pack += got[i] != want[i];
      for (std::size_t i = 0; i < back_got.size(); ++i) bad_unpack += back_got[i] != back_want[i];
      CHECK(bad_pack == 0);
      CHECK(bad_unpack == 0);
      cudaFree(dsrc);
      cudaFree(dpacked);
      cudaFree(dback);
      cudaStreamDestroy(s);
    }
}

#else

TEST_CASE("CUDA copy_blocks (skipped: built without disttrain::kernels)") {
  std::printf(
      "SKIPPED: CUDA kernels not built (configure with -DDISTTRAIN_ENABLE_CUDA=ON to build "
      "gpu.copy_blocks)\n");
  // The CPU reference still runs here: a 2-row block.
  std::vector<std::int16_t> a{1, 2, 3, 4, 5, 6}, b(4);
  const std::vector<disttrain::kernels::copy_block> blocks{{1, 0, 2, 2, 3, 2}};
  disttrain::kernels::copy_blocks_cpu(std::as_bytes(std::span(a)),
                                      std::as_writable_bytes(std::span(b)), blocks, 2);
  CHECK(b == std::vector<std::int16_t>{2, 3, 5, 6});
}

#endif
