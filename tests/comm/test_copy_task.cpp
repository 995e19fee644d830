// The copy_blocks CUDA kernel's per-warp work (kernels/detail/copy_task.hpp)
// replayed on the CPU: every task of a block list, every lane of its warp,
// against copy_blocks_cpu. The kernel runs the same functions, so this checks
// its task split (long rows over several warps) and its alignment handling
// (head, words, tail) on machines without a GPU; gpu.copy_blocks checks the
// device build of them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "disttrain/kernels/copy_blocks.hpp"
#include "disttrain/kernels/detail/copy_task.hpp"
#include "disttrain_catch.hpp"

namespace {

using disttrain::kernels::copy_block;
using disttrain::kernels::copy_chunk_elements;
namespace kd = disttrain::kernels::detail;

// What one launch does: each task by each lane of its warp.
void replay(std::span<const std::byte> src, std::span<std::byte> dst,
            std::span<const copy_block> blocks, std::int64_t es) {
  const auto prefix = disttrain::kernels::task_prefix(blocks);
  const auto n = static_cast<std::int64_t>(blocks.size());
  for (std::int64_t t = 0; t < prefix.back(); ++t) {
    const kd::task_bytes k = kd::locate_task(blocks.data(), prefix.data(), n, t, es);
    for (int lane = 0; lane < kd::warp_lanes; ++lane)
      kd::copy_range(src.data() + k.src, dst.data() + k.dst, static_cast<std::size_t>(k.bytes),
                     lane);
  }
}

std::size_t mismatches(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace

TEST_CASE("copy_range copies every alignment and length with the lanes of one warp") {
  // 16-aligned storage; the copy starts at every offset 0..17 on each side.
  std::vector<kd::word16> sbuf(400), dbuf(400);
  auto* s0 = reinterpret_cast<std::byte*>(sbuf.data());
  auto* d0 = reinterpret_cast<std::byte*>(dbuf.data());
  for (std::size_t i = 0; i < sbuf.size() * 16; ++i) s0[i] = static_cast<std::byte>(i * 7 + 3);
  for (std::size_t so = 0; so < 18; ++so)
    for (std::size_t off = 0; off < 18; ++off)
      for (std::size_t n :
           {0u, 1u, 2u, 3u, 7u, 15u, 16u, 17u, 31u, 33u, 100u, 511u, 512u, 513u, 4097u}) {
        INFO("source offset " << so << ", destination offset " << off << ", bytes " << n);
        std::fill(d0, d0 + dbuf.size() * 16, std::byte{0xEE});
        for (int lane = 0; lane < kd::warp_lanes; ++lane)
          kd::copy_range(s0 + so, d0 + off, n, lane);
        CHECK(std::equal(s0 + so, s0 + so + n, d0 + off));
        // Nothing outside [off, off + n) is touched.
        CHECK(std::all_of(d0, d0 + off, [](std::byte b) { return b == std::byte{0xEE}; }));
        CHECK(std::all_of(d0 + off + n, d0 + dbuf.size() * 16,
                          [](std::byte b) { return b == std::byte{0xEE}; }));
      }
}

TEST_CASE("task_prefix splits long rows into chunks of copy_chunk_elements") {
  const std::int64_t c = copy_chunk_elements;
  const std::vector<copy_block> blocks{
      {0, 0, 3, 10, 20, 10},               // short rows: a task each
      {0, 0, 0, 5, 5, 5},                  // no rows: no task
      {0, 0, 2, c, c, c},                  // exactly one chunk per row
      {0, 0, 2, c + 1, c + 1, c + 1},      // one element more: two per row
      {0, 0, 1, 5 * c + 3, 1, 5 * c + 3},  // one long row: six
      {0, 0, 4, 0, 0, 0}};                 // no columns: no task
  CHECK(disttrain::kernels::task_prefix(blocks) ==
        std::vector<std::int64_t>{0, 3, 3, 5, 9, 15, 15});
}

TEST_CASE("the kernel's task split, replayed lane by lane, matches copy_blocks_cpu") {
  std::mt19937_64 rng(2026);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  for (std::int64_t es : {1, 2, 4, 8, 16})
    for (int round = 0; round < 6; ++round) {
      INFO("elem_size " << es << ", round " << round);
      // Bands of rows, each a column slice at a random offset, some rows
      // longer than several chunks, some blocks empty; packed back to back.
      const std::int64_t width = round % 2 == 0 ? 3 * copy_chunk_elements + 37 : 900;
      const std::int64_t height = round % 2 == 0 ? 24 : 300;
      std::vector<copy_block> blocks;
      std::int64_t packed = 0;
      for (std::int64_t r0 = 0; r0 < height;) {
        const std::int64_t rows = std::min(height - r0, pick(0, 5));
        const std::int64_t c0 = pick(0, width - 1);
        const std::int64_t cols = pick(0, width - c0);
        blocks.push_back({r0 * width + c0, packed, rows, cols, width, cols});
        packed += rows * cols;
        r0 += std::max<std::int64_t>(rows, 1);
      }
      // One contiguous row of several chunks and an odd tail, after the matrix.
      const std::int64_t tail = 2 * copy_chunk_elements + 5;
      blocks.push_back({height * width, packed, 1, tail, 1, 1});
      packed += tail;
      std::vector<std::byte> src(static_cast<std::size_t>((height * width + tail) * es));
      for (auto& b : src) b = static_cast<std::byte>(rng());
      std::vector<std::byte> want(static_cast<std::size_t>(packed * es), std::byte{0x5A});
      std::vector<std::byte> got = want;
      disttrain::kernels::copy_blocks_cpu(src, want, blocks, static_cast<std::size_t>(es));
      replay(src, got, blocks, es);
      CHECK(mismatches(got, want) == 0);
      // And back: the unpack direction scatters into the strided layout.
      std::vector<copy_block> unpack;
      for (const auto& b : blocks)
        unpack.push_back({b.dst_offset, b.src_offset, b.rows, b.cols, b.dst_ld, b.src_ld});
      std::vector<std::byte> back_want(src.size(), std::byte{0}), back_got = back_want;
      disttrain::kernels::copy_blocks_cpu(want, back_want, unpack, static_cast<std::size_t>(es));
      replay(want, back_got, unpack, es);
      CHECK(mismatches(back_got, back_want) == 0);
    }
}
