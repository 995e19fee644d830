#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "disttrain/comm/buffer.hpp"
#include "disttrain/kernels/copy_blocks.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::kernels::copy_block;

TEST_CASE("copy_blocks_cpu: pack a column slice, unpack it back, element by element") {
  // 5 x 8 row-major matrix of int32 with value 100 r + c.
  std::vector<std::int32_t> m(40);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 8; ++c) m[static_cast<std::size_t>(r * 8 + c)] = 100 * r + c;
  // Pack columns [3, 6) of rows 1..3 and column [0, 2) of row 4.
  const std::vector<copy_block> pack{{1 * 8 + 3, 0, 3, 3, 8, 3}, {4 * 8, 9, 1, 2, 0, 0}};
  std::vector<std::int32_t> packed(11, -1);
  disttrain::kernels::copy_blocks_cpu(std::as_bytes(std::span(m)),
                                      std::as_writable_bytes(std::span(packed)), pack, 4);
  CHECK(packed == std::vector<std::int32_t>{103, 104, 105, 203, 204, 205, 303, 304, 305, 400, 401});
  // Unpack into a zeroed matrix at the same places.
  std::vector<copy_block> unpack;
  for (const auto& b : pack)
    unpack.push_back({b.dst_offset, b.src_offset, b.rows, b.cols, b.dst_ld, b.src_ld});
  std::vector<std::int32_t> back(40, 0);
  disttrain::kernels::copy_blocks_cpu(std::as_bytes(std::span(packed)),
                                      std::as_writable_bytes(std::span(back)), unpack, 4);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 8; ++c) {
      const bool in = (r >= 1 && r <= 3 && c >= 3 && c < 6) || (r == 4 && c < 2);
      CHECK(back[static_cast<std::size_t>(r * 8 + c)] == (in ? 100 * r + c : 0));
    }
  const auto e = disttrain::kernels::extent(pack);
  CHECK(e.src == 34);
  CHECK(e.dst == 11);
  CHECK(disttrain::kernels::task_prefix(pack) == std::vector<std::int64_t>{0, 3, 4});
}

TEST_CASE("coalesce merges blocks that continue each other in both buffers") {
  const std::vector<copy_block> in{{0, 0, 2, 4, 4, 4},
                                   {8, 8, 1, 4, 4, 4},
                                   {12, 20, 1, 4, 4, 4},
                                   {20, 24, 2, 2, 4, 2},
                                   {30, 30, 0, 5, 5, 5}};
  const auto out = disttrain::kernels::coalesce(in);
  REQUIRE(out.size() == 3);
  CHECK(out[0] == copy_block{0, 0, 1, 12, 12, 12});
  CHECK(out[1] == copy_block{12, 20, 1, 4, 4, 4});
  CHECK(out[2] == copy_block{20, 24, 2, 2, 4, 2});
}

TEST_CASE("copy_blocks_cpu rejects out-of-range blocks") {
  std::vector<std::byte> a(16), b(16);
  DISTTRAIN_CHECK_ERROR(
      disttrain::kernels::copy_blocks_cpu(a, b, std::vector<copy_block>{{0, 0, 2, 3, 4, 4}}, 4),
      errc::invalid_argument, "copy_blocks.src");
  DISTTRAIN_CHECK_ERROR(
      disttrain::kernels::copy_blocks_cpu(a, b, std::vector<copy_block>{{0, 15, 1, 2, 2, 2}}, 1),
      errc::invalid_argument, "copy_blocks.dst");
  DISTTRAIN_CHECK_ERROR(
      disttrain::kernels::copy_blocks_cpu(a, b, std::vector<copy_block>{{0, 0, 2, 3, 2, 3}}, 1),
      errc::invalid_argument, "copy_block[0]");
  DISTTRAIN_CHECK_ERROR(
      disttrain::kernels::copy_blocks_cpu(a, b, std::vector<copy_block>{{-1, 0, 1, 1, 1, 1}}, 1),
      errc::invalid_argument, "copy_block[0]");
  DISTTRAIN_CHECK_ERROR(disttrain::kernels::copy_blocks_cpu(a, b, std::vector<copy_block>{}, 0),
                        errc::invalid_argument, "copy_blocks.elem_size");
}

TEST_CASE("buffer pool recycles by size class; leases return on destruction") {
  disttrain::buffer_pool pool;
  CHECK(disttrain::buffer_pool::size_class(1) == 4096);
  CHECK(disttrain::buffer_pool::size_class(4097) == 8192);
  std::byte* first = nullptr;
  {
    auto a = pool.acquire(5000);
    CHECK(a.size() == 5000);
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);
    first = a.data();
    std::memset(a.data(), 1, a.size());
  }
  auto b = pool.acquire(6000);  // same class (8 KiB): reused
  CHECK(b.data() == first);
  auto c = pool.acquire(6000);  // the first is leased: new allocation
  CHECK(c.data() != first);
  CHECK(pool.stats().allocations == 2);
  CHECK(pool.stats().reuses == 1);
  CHECK(pool.stats().bytes_held == 2 * 8192);
  auto moved = std::move(c);
  CHECK(c.data() == nullptr);
  moved.reset();
  pool.trim();
  CHECK(pool.stats().bytes_held == 8192);
  auto empty = pool.acquire(0);
  CHECK(empty.size() == 0);
  // buffer_ref views.
  std::vector<float> v(8);
  const auto r = disttrain::buffer_ref::of(std::span(v));
  CHECK(r.size == 32);
  CHECK(r.subref(16, 16).data == r.data + 16);
  DISTTRAIN_CHECK_ERROR(r.subref(20, 16), errc::invalid_argument, "buffer_ref.subref");
}

TEST_CASE("a detached lease leaves the pool, owns its memory and may outlive the pool") {
  disttrain::buffer_pool::lease kept;
  std::byte* p = nullptr;
  {
    disttrain::buffer_pool pool;
    auto a = pool.acquire(5000);
    p = a.data();
    a.detach();
    CHECK(pool.stats().bytes_held == 0);
    kept = std::move(a);
    CHECK(kept.data() == p);
    auto b = pool.acquire(5000);  // not reused: the detached buffer is not the pool's
    CHECK(b.data() != p);
  }  // the pool dies first; the lease frees its memory itself (ASan checks)
  std::memset(kept.data(), 3, kept.size());
  kept.reset();
  CHECK(kept.data() == nullptr);
}
