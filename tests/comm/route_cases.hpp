#pragma once
// Route cases shared by the local-backend tests (tests/comm) and the MPI
// multi-process tests (tests/mpi): layouts, placements, shapes, a fill
// function giving every element a value determined by (sample, row, col),
// and an element-by-element check of every destination buffer.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "disttrain/comm/route.hpp"
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/topology.hpp"

namespace disttrain::test {

// A route's end: stage `stage` of module `module` (its index in
// topology::modules()).
inline route_endpoint at(int module, int stage) { return {module_id{module}, stage_id{stage}}; }

struct route_case {
  std::string name;
  topology layout;
  route_endpoint from;
  route_endpoint to;
  sample_placement pa;
  sample_placement pb;
  activation_shape shape;
  route_options opts;
};

// Value of element (sample, row, col): 64-bit mix, truncated to elem_size bytes.
inline std::uint64_t element_value(int sample, std::int64_t row, std::int64_t col) {
  std::uint64_t x = (static_cast<std::uint64_t>(sample) << 40) ^
                    (static_cast<std::uint64_t>(row) << 20) ^ static_cast<std::uint64_t>(col);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

// Activation buffer of `replica` under placement `p`, as the reference has it.
inline std::vector<std::byte> replica_buffer(const sample_placement& p, int replica,
                                             const activation_shape& a) {
  const auto es = a.elem_size;
  std::vector<std::byte> buf(static_cast<std::size_t>(a.replica_rows(p, replica) * a.hidden) * es);
  std::size_t pos = 0;
  for (int s : p.samples(replica))
    for (std::int64_t r = 0; r < a.rows[static_cast<std::size_t>(s)]; ++r)
      for (std::int64_t c = 0; c < a.hidden; ++c) {
        const std::uint64_t v = element_value(s, r, c);
        std::memcpy(buf.data() + pos, &v, es);  // little-endian truncation
        pos += es;
      }
  return buf;
}

// Buffers of one rank for a case; the source is filled, the destination is
// poisoned with 0xAB so missing elements are detected.
struct rank_buffers {
  std::vector<std::byte> source;
  std::vector<std::byte> destination;
  std::vector<std::byte> expected;
};

inline rank_buffers make_buffers(const route_case& c, int rank) {
  rank_buffers b;
  const auto co = c.layout.coord(rank);
  if (co.module == c.from.module && co.stage == c.from.stage)
    b.source = replica_buffer(c.pa, co.replica.value, c.shape);
  if (co.module == c.to.module && co.stage == c.to.stage) {
    b.expected = replica_buffer(c.pb, co.replica.value, c.shape);
    b.destination.assign(b.expected.size(), std::byte{0xAB});
  }
  return b;
}

// Number of destination bytes that differ from the expectation. With
// fan_out off, a receiver must hold exactly its own slices (k % TP_b ==
// tp_rank) and nothing else (the rest keeps the 0xAB poison).
inline std::size_t count_mismatches(const route_case& c, int rank, const rank_buffers& b) {
  if (b.destination.size() != b.expected.size()) return b.expected.size() + 1;
  const auto co = c.layout.coord(rank);
  if (co.module != c.to.module || co.stage != c.to.stage) return b.destination.empty() ? 0 : 1;
  const int tp_b = c.layout.module(c.to.module).tp;
  const int S = std::lcm(c.layout.module(c.from.module).tp, tp_b);
  const auto es = c.shape.elem_size;
  const std::int64_t H = c.shape.hidden;
  auto slice_of = [S](std::int64_t i, std::int64_t n) {  // slice k with i in [k n / S, (k+1) n / S)
    for (int k = 0; k < S; ++k)
      if (i < n * (k + 1) / S) return k;
    return S - 1;
  };
  std::size_t bad = 0, pos = 0;
  for (int s : c.pb.samples(co.replica.value)) {
    const std::int64_t rows = c.shape.rows[static_cast<std::size_t>(s)];
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t col = 0; col < H; ++col, pos += es) {
        const int k = c.opts.split == split_axis::hidden ? slice_of(col, H) : slice_of(r, rows);
        const bool mine = c.opts.fan_out || k % tp_b == co.tp_rank;
        for (std::size_t e = 0; e < es; ++e)
          bad += b.destination[pos + e] != (mine ? b.expected[pos + e] : std::byte{0xAB});
      }
  }
  return bad;
}

inline std::vector<route_case> local_route_cases() {
  using L = topology;
  using enum module_role;
  std::vector<route_case> v;
  const activation_shape uneven{{5, 0, 7, 1, 9, 3, 4, 11, 2, 6, 8, 13}, 24, 4};
  const int n = static_cast<int>(uneven.rows.size());
  auto rr = [&](int dp) { return sample_placement::round_robin(n, dp); };
  // 2 -> 3 with TP 2 -> 4 (the paper's encoder/backbone example, one stage).
  v.push_back({"dp2tp2->dp3tp4",
               L({{"enc", encoder, 2, 1, 2}, {"llm", backbone, 4, 1, 3}}),
               at(0, 0),
               at(1, 0),
               rr(2),
               rr(3),
               uneven,
               {}});
  // 3 -> 2, TP 4 -> 2.
  v.push_back({"dp3tp4->dp2tp2",
               L({{"llm", backbone, 4, 1, 3}, {"gen", generator, 2, 1, 2}}),
               at(0, 0),
               at(1, 0),
               rr(3),
               rr(2),
               uneven,
               {}});
  // 4 -> 1, TP 1 -> 8 (hidden 24 not a multiple of... S = 8 divides; fine).
  v.push_back({"dp4tp1->dp1tp8",
               L({{"enc", encoder, 1, 1, 4}, {"llm", backbone, 8, 1, 1}}),
               at(0, 0),
               at(1, 0),
               rr(4),
               rr(1),
               uneven,
               {}});
  // 1 -> 4, TP 2 -> 1.
  v.push_back({"dp1tp2->dp4tp1",
               L({{"llm", backbone, 2, 1, 1}, {"gen", generator, 1, 1, 4}}),
               at(0, 0),
               at(1, 0),
               rr(1),
               rr(4),
               uneven,
               {}});
  // Reorderer-driven, irregular maps (a replica with no samples), TP 3 -> 2 (S = 6, hidden 7: uneven slices).
  {
    activation_shape odd{{4, 9, 1, 0, 6, 3, 5}, 7, 2};
    const std::vector<int> ma{2, 0, 2, 2, 0, 0, 2};  // replica 1 empty
    const std::vector<int> mb{1, 1, 0, 1, 0, 1, 1};
    v.push_back({"irregular tp3->tp2",
                 L({{"a", encoder, 3, 1, 3}, {"b", backbone, 2, 1, 2}}),
                 at(0, 0),
                 at(1, 0),
                 sample_placement::from_replica_map(ma, 3),
                 sample_placement::from_replica_map(mb, 2),
                 odd,
                 {}});
  }
  // Hidden smaller than the slice count (hidden 3, S = 4): empty slices are skipped.
  v.push_back({"hidden<slices",
               L({{"a", encoder, 4, 1, 1}, {"b", backbone, 1, 1, 2}}),
               at(0, 0),
               at(1, 0),
               rr(1),
               rr(2),
               activation_shape{uneven.rows, 3, 8},
               {}});
  // Consecutive stages of one module (TP 2, DP 2, PP 3): stage 1 -> 2.
  v.push_back({"stage1->stage2",
               L({{"enc", encoder, 1, 1, 1}, {"llm", backbone, 2, 3, 2}}),
               at(1, 1),
               at(1, 2),
               rr(2),
               rr(2),
               uneven,
               {}});
  // Row split (zero copy for single-piece messages), 2 -> 3 with custom orders.
  {
    sample_placement pa({{11, 3, 5, 7, 9, 1}, {0, 2, 4, 6, 8, 10}});
    sample_placement pb({{0, 5}, {11, 10, 9, 8}, {1, 2, 3, 4, 6, 7}});
    v.push_back({"rows split 2->3",
                 L({{"a", encoder, 2, 1, 2}, {"b", backbone, 2, 1, 3}}),
                 at(0, 0),
                 at(1, 0),
                 pa,
                 pb,
                 uneven,
                 {split_axis::rows, true}});
  }
  // Without fan-out (receivers keep their slices only).
  v.push_back({"no fan-out",
               L({{"a", encoder, 1, 1, 2}, {"b", backbone, 4, 1, 1}}),
               at(0, 0),
               at(1, 0),
               rr(2),
               rr(1),
               uneven,
               {split_axis::hidden, false}});
  return v;
}

}  // namespace disttrain::test

namespace disttrain::test {

// Cases of at most 8 ranks (for the MPI multi-process runs), covering the same
// DP ratios 2->3, 3->2, 4->1, 1->4, consecutive stages and uneven samples.
inline std::vector<route_case> small_route_cases() {
  using L = topology;
  using enum module_role;
  std::vector<route_case> v;
  const activation_shape uneven{{5, 0, 7, 1, 9, 3, 4, 11, 2, 6, 8, 13}, 12, 4};
  const int n = static_cast<int>(uneven.rows.size());
  auto rr = [&](int dp) { return sample_placement::round_robin(n, dp); };
  v.push_back({"dp2tp1->dp3tp2",
               L({{"enc", encoder, 1, 1, 2}, {"llm", backbone, 2, 1, 3}}),
               at(0, 0),
               at(1, 0),
               rr(2),
               rr(3),
               uneven,
               {}});
  v.push_back({"dp3tp2->dp2tp1",
               L({{"llm", backbone, 2, 1, 3}, {"gen", generator, 1, 1, 2}}),
               at(0, 0),
               at(1, 0),
               rr(3),
               rr(2),
               uneven,
               {}});
  v.push_back({"dp4tp1->dp1tp4",
               L({{"enc", encoder, 1, 1, 4}, {"llm", backbone, 4, 1, 1}}),
               at(0, 0),
               at(1, 0),
               rr(4),
               rr(1),
               uneven,
               {}});
  v.push_back({"dp1tp2->dp4tp1",
               L({{"llm", backbone, 2, 1, 1}, {"gen", generator, 1, 1, 4}}),
               at(0, 0),
               at(1, 0),
               rr(1),
               rr(4),
               uneven,
               {split_axis::rows, true}});
  v.push_back({"stage0->stage1 tp2 dp2",
               L({{"llm", backbone, 2, 2, 2}}),
               at(0, 0),
               at(0, 1),
               rr(2),
               rr(2),
               uneven,
               {}});
  {
    const std::vector<int> ma{2, 0, 2, 2, 0, 0, 2, 1, 1, 0, 2, 2};
    const std::vector<int> mb{1, 1, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1};
    v.push_back({"irregular dp3->dp2 tp1->tp2",
                 L({{"a", encoder, 1, 1, 3}, {"b", backbone, 2, 1, 2}}),
                 at(0, 0),
                 at(1, 0),
                 sample_placement::from_replica_map(ma, 3),
                 sample_placement::from_replica_map(mb, 2),
                 activation_shape{uneven.rows, 7, 2},
                 {}});
  }
  return v;
}

}  // namespace disttrain::test
