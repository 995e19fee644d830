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

/// The aligned 4-byte word at `p`.
DISTTRAIN_HOST_DEVICE inline std::uint32_t load_word(const std::byte* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const std::uint32_t*>(p);
#else
  if (reinterpret_cast<std::uintptr_t>(p) % 4 != 0) std::abort();  // as the device would fault
  std::uint32_t v = 0;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

/// Lane `lane`'s share of copying `n` bytes when source and destination differ
/// in their two lowest address bits: each aligned 4-byte word of the
/// destination is two aligned source words shifted together (a funnel shift);
/// bytes at the ends, and wherever a source word would reach outside [s, s + n).
DISTTRAIN_HOST_DEVICE inline void copy_shifted(const std::byte* s, std::byte* d, std::size_t n,
                                               int lane) {
  std::size_t head = (4 - (reinterpret_cast<std::uintptr_t>(d) & 3)) & 3;  // d + head: aligned
  if (head > n) head = n;
  const std::size_t k = (reinterpret_cast<std::uintptr_t>(s) + head) & 3;  // s + head's offset
  // Word j of the destination (at head + 4j) reads the source words at
  // head + 4j - k and 4 bytes on: j0 and j1 keep both inside [0, n).
  const std::size_t j0 = head < k ? 1 : 0;
  const std::size_t j1 = n + k >= head + 8 ? (n + k - head - 8) / 4 + 1 : 0;
  if (k == 0 || j1 <= j0) {
    copy_bytes(s, d, 0, n, lane);
    return;
  }
  copy_bytes(s, d, 0, head + 4 * j0, lane);
  const auto shift = static_cast<unsigned>(8 * k);
  for (std::size_t j = j0 + static_cast<std::size_t>(lane); j < j1; j += warp_lanes) {
    const std::size_t at = head + 4 * j - k;
#if !defined(__CUDA_ARCH__)
    if (head + 4 * j < k || at + 8 > n) std::abort();  // the host replay checks j0 and j1
#endif
    const std::uint32_t lo = load_word(s + at), hi = load_word(s + at + 4);
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<std::uint32_t*>(d + head + 4 * j) = __funnelshift_r(lo, hi, shift);
#else
    const auto v = static_cast<std::uint32_t>(((std::uint64_t{hi} << 32) | lo) >> shift);
    if (reinterpret_cast<std::uintptr_t>(d + head + 4 * j) % 4 != 0) std::abort();
    std::memcpy(d + head + 4 * j, &v, 4);
#endif
  }
  copy_bytes(s, d, head + 4 * j1, n, lane);
}

/// `w[Q + i]` and `w[Q + i + 1]` shifted right together by `shift` bits, for
/// i = 0..3: 16 bytes starting `4 * Q + shift / 8` bytes into the 32 of `w`.
template <int Q>
DISTTRAIN_HOST_DEVICE inline void funnel4(const std::uint32_t (&w)[8], unsigned shift,
                                          std::uint32_t (&out)[4]) {
  for (int i = 0; i < 4; ++i) {
#if defined(__CUDA_ARCH__)
    out[i] = __funnelshift_r(w[Q + i], w[Q + i + 1], shift);
#else
    out[i] = static_cast<std::uint32_t>(((std::uint64_t{w[Q + i + 1]} << 32) | w[Q + i]) >> shift);
#endif
  }
}

/// The aligned 16 bytes at `p` as four 4-byte words, into `w[0..3]`.
DISTTRAIN_HOST_DEVICE inline void load_16(const std::byte* p, std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
#else
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) std::abort();  // as the device would fault
  std::memcpy(w, p, 16);
#endif
}

/// Lane `lane`'s share of copying `n` bytes when source and destination differ
/// in their two lowest address bits, 16 bytes at a time: each aligned 16-byte
/// word of the destination is made of the two aligned 16-byte source words
/// it straddles (funnel shifts of their 4-byte parts); `copy_shifted` does
/// the ends, and wherever a source word would reach outside [s, s + n).
DISTTRAIN_HOST_DEVICE inline void copy_shifted_16(const std::byte* s, std::byte* d, std::size_t n,
                                                  int lane) {
  std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;  // d + head: aligned
  if (head > n) head = n;
  const std::size_t k = (reinterpret_cast<std::uintptr_t>(s) + head) & 15;  // s + head's offset
  // Word j (at head + 16j) reads source words at head + 16j - k and 16 on.
  const std::size_t j0 = head < k ? 1 : 0;
  const std::size_t j1 = n + k >= head + 32 ? (n + k - head - 32) / 16 + 1 : 0;
  if (k % 4 == 0 || j1 <= j0) {
    copy_shifted(s, d, n, lane);
    return;
  }
  copy_shifted(s, d, head + 16 * j0, lane);
  const auto shift = static_cast<unsigned>(8 * (k % 4));
  for (std::size_t j = j0 + static_cast<std::size_t>(lane); j < j1; j += warp_lanes) {
    const std::size_t at = head + 16 * j - k;
#if !defined(__CUDA_ARCH__)
    if (head + 16 * j < k || at + 32 > n) std::abort();  // the host replay checks j0 and j1
#endif
    std::uint32_t w[8], out[4];
    load_16(s + at, w);
    load_16(s + at + 16, w + 4);
    switch (k / 4) {
      case 0: funnel4<0>(w, shift, out); break;
      case 1: funnel4<1>(w, shift, out); break;
      case 2: funnel4<2>(w, shift, out); break;
      default: funnel4<3>(w, shift, out); break;
    }
    std::byte* to = d + head + 16 * j;
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint4*>(to) = make_uint4(out[0], out[1], out[2], out[3]);
#else
    if (reinterpret_cast<std::uintptr_t>(to) % 16 != 0) std::abort();
    std::memcpy(to, out, 16);
#endif
  }
  const std::size_t done = head + 16 * j1;
  copy_shifted(s + done, d + done, n - done, lane);
}

/// Lane `lane`'s share of copying `n` bytes from `s` to `d` (see the file comment).
DISTTRAIN_HOST_DEVICE inline void copy_range(const std::byte* s, std::byte* d, std::size_t n,
                                             int lane) {
  const auto sa = reinterpret_cast<std::uintptr_t>(s);
  const auto da = reinterpret_cast<std::uintptr_t>(d);
  const std::uintptr_t apart = sa ^ da;  // the low bits they differ in
  if ((apart & 3) != 0) {
    copy_shifted_16(s, d, n, lane);
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
