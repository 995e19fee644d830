// libFuzzer target: `plan_route` with arbitrary layouts, placements, shapes
// and options. It must return a plan or throw `disttrain::error`; a plan must
// move every element across exactly once, and every block must lie inside
// the buffers the plan sizes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "disttrain/comm/route.hpp"
#include "fuzz_input.hpp"

namespace {

using disttrain::fuzz::expect;

disttrain::sample_placement placement(disttrain::fuzz::input& in, int n, int dp) {
  if (in.flag()) {  // a replica map
    std::vector<int> m(static_cast<std::size_t>(n));
    for (auto& r : m) r = in.in(0, dp - 1);
    return disttrain::sample_placement::from_replica_map(m, dp);
  }
  // arbitrary ordered lists (may be invalid: duplicates, gaps)
  std::vector<std::vector<int>> lists(static_cast<std::size_t>(dp));
  for (int s = 0; s < n; ++s)
    lists[static_cast<std::size_t>(in.in(0, dp - 1))].push_back(in.flag() ? s : in.in(-1, n));
  return disttrain::sample_placement(std::move(lists));
}

// Every block of `blocks` reads [0, src_elems) and writes [0, dst_elems).
void check_blocks(const std::vector<disttrain::kernels::copy_block>& blocks, std::int64_t src_elems,
                  std::int64_t dst_elems) {
  for (const auto& b : blocks) {
    if (b.rows == 0 || b.cols == 0) continue;
    expect(b.src_offset >= 0 && b.dst_offset >= 0 && b.rows > 0 && b.cols > 0);
    expect(b.src_offset + (b.rows - 1) * b.src_ld + b.cols <= src_elems);
    expect(b.dst_offset + (b.rows - 1) * b.dst_ld + b.cols <= dst_elems);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  disttrain::fuzz::input in(data, size);
  try {
    const int tp_a = in.in(1, 4), pp_a = in.in(1, 3), dp_a = in.in(1, 4);
    const int tp_b = in.in(1, 4), pp_b = in.in(1, 3), dp_b = in.in(1, 4);
    const disttrain::topology L({{"a", disttrain::module_role::encoder, tp_a, pp_a, dp_a},
                                 {"b", disttrain::module_role::backbone, tp_b, pp_b, dp_b}});
    const disttrain::route_endpoint from{disttrain::module_id{in.in(0, 1)},
                                         disttrain::stage_id{in.in(0, 2)}};
    const disttrain::route_endpoint to{disttrain::module_id{in.in(0, 1)},
                                       disttrain::stage_id{in.in(0, 2)}};
    const int n = in.in(0, 12);
    const int dpa = L.module(from.module).dp;
    const int dpb = in.flag() ? L.module(to.module).dp : in.in(1, 4);
    const auto pa = placement(in, n, dpa);
    const auto pb = in.flag() ? pa : placement(in, n, dpb);
    disttrain::activation_shape shape;
    const bool huge = in.byte() == 0xFF;  // sizes near the int64 limits (overflow checks)
    for (int s = 0; s < n + in.in(-1, 1); ++s)
      shape.rows.push_back(huge ? static_cast<std::int64_t>(in.u64()) : in.in(0, 9));
    shape.hidden = huge ? static_cast<std::int64_t>(in.u64()) : in.in(0, 17);
    shape.elem_size =
        huge ? static_cast<std::size_t>(in.u64()) : static_cast<std::size_t>(in.in(0, 8));
    const disttrain::route_options opts{
        in.flag() ? disttrain::split_axis::rows : disttrain::split_axis::hidden, in.flag()};
    const auto plan = disttrain::plan_route(L, from, pa, to, pb, shape, opts);
    // Invariants of a plan (its sizes are small here unless `huge`).
    expect(plan.phase_elements(0) == plan.minimum_crossing_elements());
    for (const auto& m : plan.messages()) {
      std::int64_t e = 0;
      for (const auto& p : m.pieces) e += p.elements();
      expect(e == m.elements && e > 0);
      const std::int64_t src_elems =
          m.phase == 0 ? plan.source_elements(m.src) : plan.destination_elements(m.src);
      check_blocks(m.send_blocks, src_elems, m.elements);
      check_blocks(m.recv_blocks, m.elements, plan.destination_elements(m.dst));
    }
    (void)plan.fingerprint();
  } catch (const disttrain::error&) {}
  return 0;
}
