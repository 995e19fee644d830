#pragma once
/// @file copy_task.hpp
/// @brief The work of one warp of the `copy_blocks` CUDA kernel, written once
/// for the kernel (kernels/copy_blocks.cu) and for the CPU test that replays
/// the 32 lanes of every task (tests/comm/test_copy_task.cpp).
///
/// The kernel's work is split into tasks: a task is up to
/// `copy_chunk_elements` consecutive elements of one row of one block, so a
/// long row (a whole contiguous message, a long sample) is spread over many
/// warps instead of one. `task_prefix` (copy_blocks.hpp) numbers the tasks of
/// all blocks consecutively; `locate_task` finds a task's bytes by binary
/// search in it; `copy_range` copies them as one lane of a warp, with the
/// widest word that source and destination share an alignment for (16, 8 or
/// 4 bytes): a byte-wise head up to that alignment, the words, a byte-wise
/// tail; where they differ in their two lowest address bits, aligned 16-byte
/// destination words made of the two aligned source words each straddles,
/// shifted (4-byte words, then bytes, at the ends).

#include <cstddef>
#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cstdlib>
#include <cstring>
#endif

#include "disttrain/kernels/copy_blocks.hpp"

#if defined(__CUDACC__)
#define DISTTRAIN_HOST_DEVICE __host__ __device__
#else
#define DISTTRAIN_HOST_DEVICE
#endif

namespace disttrain::kernels::detail {

/// Lanes of a warp: every lane of a task calls `copy_range` with its index.
inline constexpr int warp_lanes = 32;

/// One task's source, destination and length, in bytes from the buffers' starts.
struct task_bytes {
  std::int64_t src = 0;
  std::int64_t dst = 0;
  std::int64_t bytes = 0;
};

/// Task `t` of `n_blocks` blocks whose task prefix sums are `prefix`
/// (`prefix[0] = 0`, `prefix[n_blocks]` = all tasks; `t` below that).
DISTTRAIN_HOST_DEVICE inline task_bytes locate_task(const copy_block* blocks,
                                                    const std::int64_t* prefix,
                                                    std::int64_t n_blocks, std::int64_t t,
                                                    std::int64_t elem_size) {
  // The last block b with prefix[b] <= t: empty blocks (no tasks) are skipped.
  std::int64_t lo = 0, hi = n_blocks - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (prefix[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const copy_block b = blocks[lo];
  const std::int64_t per_row = (b.cols + copy_chunk_elements - 1) / copy_chunk_elements;
  const std::int64_t local = t - prefix[lo];
  const std::int64_t row = local / per_row;
  const std::int64_t col = local % per_row * copy_chunk_elements;
  const std::int64_t cols = b.cols - col < copy_chunk_elements ? b.cols - col : copy_chunk_elements;
  return {(b.src_offset + row * b.src_ld + col) * elem_size,
          (b.dst_offset + row * b.dst_ld + col) * elem_size, cols * elem_size};
}

/// A 16-byte word (`uint4` on the device).
struct alignas(16) word16 {
  std::uint32_t v[4];
};

/// Lane `lane`'s share of copying `n` words of `W` bytes (both pointers W-aligned).
template <class Word>
DISTTRAIN_HOST_DEVICE inline void copy_words(const std::byte* s, std::byte* d, std::size_t n,
                                             int lane) {
  for (std::size_t i = static_cast<std::size_t>(lane); i < n; i += warp_lanes) {
#if defined(__CUDA_ARCH__)
    reinterpret_cast<Word*>(d)[i] = reinterpret_cast<const Word*>(s)[i];
#else
    // The host replay faults where the device would (a misaligned word access).
    if ((reinterpret_cast<std::uintptr_t>(s) | reinterpret_cast<std::uintptr_t>(d)) %
            sizeof(Word) !=
        0)
      std::abort();
    std::memcpy(d + i * sizeof(Word), s + i * sizeof(Word), sizeof(Word));
#endif
  }
}

/// Lane `lane`'s share of copying the bytes [first, last) of `s` to `d`, one byte each.
DISTTRAIN_HOST_DEVICE inline void copy_bytes(const std::byte* s, std::byte* d, std::size_t first,
                                             std::size_t last, int lane) {
  for (std::size_t i = first + static_cast<std::size_t>(lane); i < last; i += warp_lanes)
    d[i] = s[i];
}

/// The aligned `W` bytes at `p` (W = 4 or 16) as 4-byte words, into `w[0, W / 4)`.
template <std::size_t W>
DISTTRAIN_HOST_DEVICE inline void load_words(const std::byte* p, std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  if constexpr (W == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
  } else {
    w[0] = *reinterpret_cast<const std::uint32_t*>(p);
  }
#else
  if (reinterpret_cast<std::uintptr_t>(p) % W != 0) std::abort();  // as the device would fault
  std::memcpy(w, p, W);
#endif
}

/// Stores `w[0, W / 4)` as the aligned `W` bytes at `p`.
template <std::size_t W>
DISTTRAIN_HOST_DEVICE inline void store_words(std::byte* p, const std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  if constexpr (W == 16)
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  else
    *reinterpret_cast<std::uint32_t*>(p) = w[0];
#else
  if (reinterpret_cast<std::uintptr_t>(p) % W != 0) std::abort();
  std::memcpy(p, w, W);
#endif
}

/// `out[i]` = `w[Q + i]` and `w[Q + i + 1]` shifted right together by `shift`
/// bits, i < N: the 4N bytes that start `4 * Q + shift / 8` bytes into `w`.
template <int Q, int N>
DISTTRAIN_HOST_DEVICE inline void funnel(const std::uint32_t* w, unsigned shift,
                                         std::uint32_t* out) {
  for (int i = 0; i < N; ++i) {
#if defined(__CUDA_ARCH__)
    out[i] = __funnelshift_r(w[Q + i], w[Q + i + 1], shift);
#else
    out[i] = static_cast<std::uint32_t>(((std::uint64_t{w[Q + i + 1]} << 32) | w[Q + i]) >> shift);
#endif
  }
}

/// Lane `lane`'s share of copying `n` bytes when source and destination differ
/// in their two lowest address bits: each aligned `W`-byte word of the
/// destination (W = 16 or 4) is made of the two aligned `W`-byte source words
/// it straddles, shifted together (funnel shifts of their 4-byte parts). The
/// ends, and wherever a source word would reach outside [s, s + n), go
/// through `copy_shifted<4>`, whose ends are bytes.
template <std::size_t W>
DISTTRAIN_HOST_DEVICE inline void copy_shifted(const std::byte* s, std::byte* d, std::size_t n,
                                               int lane) {
  std::size_t head = (W - (reinterpret_cast<std::uintptr_t>(d) & (W - 1))) & (W - 1);
  if (head > n) head = n;  // d + head: aligned
  const std::size_t k =
      (reinterpret_cast<std::uintptr_t>(s) + head) & (W - 1);  // s + head's offset
  // Word j of the destination (at head + Wj) reads the source words at
  // head + Wj - k and W bytes on: j0 and j1 keep both inside [0, n).
  const std::size_t j0 = head < k ? 1 : 0;
  const std::size_t j1 = n + k >= head + 2 * W ? (n + k - head - 2 * W) / W + 1 : 0;
  const auto ends = [&](std::size_t from, std::size_t to) {
    if constexpr (W == 4)
      copy_bytes(s, d, from, to, lane);
    else
      copy_shifted<4>(s + from, d + from, to - from, lane);
  };
  if (k % 4 == 0 || j1 <= j0) {
    ends(0, n);
    return;
  }
  ends(0, head + W * j0);
  const auto shift = static_cast<unsigned>(8 * (k % 4));
  for (std::size_t j = j0 + static_cast<std::size_t>(lane); j < j1; j += warp_lanes) {
    const std::size_t at = head + W * j - k;
#if !defined(__CUDA_ARCH__)
    if (head + W * j < k || at + 2 * W > n) std::abort();  // the host replay checks j0 and j1
#endif
    std::uint32_t w[2 * W / 4], out[W / 4];
    load_words<W>(s + at, w);
    load_words<W>(s + at + W, w + W / 4);
    if constexpr (W == 4) {
      funnel<0, 1>(w, shift, out);
    } else {
      switch (k / 4) {
        case 0: funnel<0, 4>(w, shift, out); break;
        case 1: funnel<1, 4>(w, shift, out); break;
        case 2: funnel<2, 4>(w, shift, out); break;
        default: funnel<3, 4>(w, shift, out); break;
      }
    }
    store_words<W>(d + head + W * j, out);
  }
  ends(head + W * j1, n);
}

/// Lane `lane`'s share of copying `n` bytes from `s` to `d` (see the file comment).
DISTTRAIN_HOST_DEVICE inline void copy_range(const std::byte* s, std::byte* d, std::size_t n,
                                             int lane) {
  const auto sa = reinterpret_cast<std::uintptr_t>(s);
  const auto da = reinterpret_cast<std::uintptr_t>(d);
  const std::uintptr_t apart = sa ^ da;  // the low bits they differ in
  if ((apart & 3) != 0) {
    copy_shifted<16>(s, d, n, lane);
    return;
  }
  std::size_t w = 4;
  while (w < 16 && (apart & (2 * w - 1)) == 0) w *= 2;
  std::size_t head = (w - (da & (w - 1))) & (w - 1);  // bytes until both are w-aligned
  if (head > n) head = n;
  const std::size_t words = (n - head) / w;
  copy_bytes(s, d, 0, head, lane);
  const std::byte* sb = s + head;
  std::byte* db = d + head;
  switch (w) {
    case 16:
#if defined(__CUDA_ARCH__)
      copy_words<uint4>(sb, db, words, lane);
#else
      copy_words<word16>(sb, db, words, lane);
#endif
      break;
    case 8: copy_words<std::uint64_t>(sb, db, words, lane); break;
    default: copy_words<std::uint32_t>(sb, db, words, lane); break;
  }
  copy_bytes(s, d, head + words * w, n, lane);
}

}  // namespace disttrain::kernels::detail

#undef DISTTRAIN_HOST_DEVICE
