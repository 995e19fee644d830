#pragma once
/// @file copy_blocks.hpp
/// @brief Strided 2-D block copies: the one primitive behind pack, unpack and
/// variable-length gather/scatter. CPU reference here; the CUDA version is
/// `launch_copy_blocks` in `disttrain/kernels/copy_blocks_cuda.hpp`
/// (kernels/copy_blocks.cu, built into `disttrain::kernels`).
///
/// A `copy_block` copies `rows x cols` elements from `src + src_offset` (row
/// pitch `src_ld` elements) to `dst + dst_offset` (row pitch `dst_ld`).
/// - pack: `dst_ld == cols` and `dst_offset` = running sum of `rows * cols`;
/// - unpack: the same with src and dst swapped;
/// - gather/scatter of variable-length samples: one block per sample.
///
/// @snippet kernels.cpp copy_blocks

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"

namespace disttrain::detail {
/// `offset + (rows - 1) * pitch + cols` (one past the last element of a block), checked.
[[nodiscard]] inline std::int64_t block_end(std::int64_t offset, std::int64_t rows,
                                            std::int64_t pitch, std::int64_t cols,
                                            std::string_view where) {
  return checked_add(checked_add(offset, checked_mul(rows - 1, pitch, where), where), cols, where);
}
}  // namespace disttrain::detail

namespace disttrain::kernels {

/// @brief One strided 2-D block (all quantities in elements).
///
/// @snippet kernels.cpp copy_block
struct copy_block {
  std::int64_t src_offset = 0;  ///< first element in the source
  std::int64_t dst_offset = 0;  ///< first element in the destination
  std::int64_t rows = 0;        ///< number of rows
  std::int64_t cols = 0;        ///< elements per row
  std::int64_t src_ld = 0;      ///< source row pitch (>= cols when rows > 1)
  std::int64_t dst_ld = 0;      ///< destination row pitch (>= cols when rows > 1)

  /// @brief Elements copied: rows * cols (`invalid_argument` if that overflows).
  [[nodiscard]] std::int64_t elements() const {
    return checked_mul(rows, cols, "copy_block.elements");
  }
  /// @brief Whether the block copies nothing (no product, so never overflows).
  [[nodiscard]] constexpr bool empty() const noexcept { return rows == 0 || cols == 0; }
  /// @brief Whether both sides are one contiguous range.
  [[nodiscard]] constexpr bool contiguous() const noexcept {
    return rows <= 1 || (cols == src_ld && cols == dst_ld);
  }
  friend bool operator==(const copy_block&, const copy_block&) = default;
};

/// @brief `coalesce` in place, without allocating: `blocks` keeps the merged blocks.
inline void coalesce_in_place(std::vector<copy_block>& blocks) {
  std::size_t n = 0;  // blocks[0, n) are the merged ones; n <= the block being read
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    copy_block b = blocks[i];
    if (b.empty()) continue;
    if (b.contiguous()) {
      b.cols = b.elements();
      b.rows = 1;
      b.src_ld = b.cols;
      b.dst_ld = b.cols;
    }
    if (n > 0) {
      copy_block& p = blocks[n - 1];
      if (p.rows == 1 && b.rows == 1 && p.src_offset + p.cols == b.src_offset &&
          p.dst_offset + p.cols == b.dst_offset) {
        p.cols = checked_add(p.cols, b.cols, "copy_block.cols");
        p.src_ld = p.cols;
        p.dst_ld = p.cols;
        continue;
      }
    }
    blocks[n++] = b;
  }
  blocks.resize(n);
}

/// @brief Rewrites contiguous blocks as one row and merges neighbours that
/// continue each other in both source and destination (fewer, longer copies).
[[nodiscard]] inline std::vector<copy_block> coalesce(std::span<const copy_block> blocks) {
  std::vector<copy_block> out(blocks.begin(), blocks.end());
  coalesce_in_place(out);
  return out;
}

/// @brief Highest source / destination element touched + 1 (for bounds checks).
struct block_extent {
  std::int64_t src = 0;
  std::int64_t dst = 0;
};
/// @brief Extent of `blocks`; throws `invalid_argument` on negative fields,
/// pitches below cols, or an extent that overflows `int64_t`.
[[nodiscard]] inline block_extent extent(std::span<const copy_block> blocks) {
  block_extent e;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const copy_block& b = blocks[i];
    if (!(b.src_offset >= 0 && b.dst_offset >= 0 && b.rows >= 0 && b.cols >= 0))
      fail(errc::invalid_argument, cat("copy_block[", i, "]"), "offsets and sizes must be >= 0");
    if (b.empty()) continue;
    if (!(b.rows == 1 || (b.src_ld >= b.cols && b.dst_ld >= b.cols)))
      fail(errc::invalid_argument, cat("copy_block[", i, "]"), "row pitch (", b.src_ld, ", ",
           b.dst_ld, ") below cols ", b.cols);
    const std::int64_t sl = b.rows == 1 ? b.cols : b.src_ld;
    const std::int64_t dl = b.rows == 1 ? b.cols : b.dst_ld;
    e.src = std::max(e.src, detail::block_end(b.src_offset, b.rows, sl, b.cols, "copy_block.src"));
    e.dst = std::max(e.dst, detail::block_end(b.dst_offset, b.rows, dl, b.cols, "copy_block.dst"));
  }
  return e;
}

/// @brief Elements of one row that one warp of the CUDA kernel copies: a row
/// longer than this is split over several warps (kernels/copy_blocks.cu).
inline constexpr std::int64_t copy_chunk_elements = 4096;

/// @brief Task prefix sums: `out[i]` = tasks of the blocks before i,
/// `out.back()` = all tasks, where block b has `b.rows * ceil(b.cols /
/// copy_chunk_elements)` tasks (none when it is empty). The CUDA kernel maps
/// one warp to one task through a binary search in it
/// (`detail::locate_task`); `invalid_argument` if the count overflows.
[[nodiscard]] inline std::vector<std::int64_t> task_prefix(std::span<const copy_block> blocks) {
  std::vector<std::int64_t> p(blocks.size() + 1, 0);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const copy_block& b = blocks[i];
    const std::int64_t per_row =
        b.empty() ? 0 : b.cols / copy_chunk_elements + (b.cols % copy_chunk_elements != 0);
    p[i + 1] =
        checked_add(p[i], checked_mul(b.rows, per_row, "copy_block.tasks"), "copy_block.tasks");
  }
  return p;
}

/// @brief CPU reference: performs every block copy (no overlap allowed between
/// destinations and sources). Sizes are checked against the spans.
inline void copy_blocks_cpu(std::span<const std::byte> src, std::span<std::byte> dst,
                            std::span<const copy_block> blocks, std::size_t elem_size) {
  require(elem_size > 0 && elem_size <= static_cast<std::size_t>(INT64_MAX),
          "copy_blocks.elem_size", "must be in [1, ", INT64_MAX, "], got ", elem_size);
  const block_extent e = extent(blocks);
  const auto es = static_cast<std::int64_t>(elem_size);
  // Once the extents times the element size fit, every offset below does too.
  const std::int64_t src_end = checked_mul(e.src, es, "copy_blocks.elem_size");
  const std::int64_t dst_end = checked_mul(e.dst, es, "copy_blocks.elem_size");
  require(static_cast<std::uint64_t>(src_end) <= src.size(), "copy_blocks.src",
          "blocks reach byte ", src_end, " but the source has ", src.size());
  require(static_cast<std::uint64_t>(dst_end) <= dst.size(), "copy_blocks.dst",
          "blocks reach byte ", dst_end, " but the destination has ", dst.size());
  for (const copy_block& b : blocks) {
    if (b.empty()) continue;
    const auto row_bytes = static_cast<std::size_t>(b.cols * es);
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const auto so = static_cast<std::size_t>((b.src_offset + r * b.src_ld) * es);
      const auto d0 = static_cast<std::size_t>((b.dst_offset + r * b.dst_ld) * es);
      std::memcpy(dst.data() + d0, src.data() + so, row_bytes);
    }
  }
}

}  // namespace disttrain::kernels
