// libFuzzer target: `reorderer::assign` with arbitrary options and costs
// (zero, tiny, huge, negative, NaN, infinite, duplicate ids). It must return
// a placement of every sample or throw `disttrain::error`; a result must
// put every sample in one microbatch and one replica of every module, each
// (module, replica, microbatch) cell's offsets running 0, 1, 2, ..., and keep
// every per-replica limit (max_samples, max_tokens).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "disttrain/reorder/reorderer.hpp"
#include "fuzz_input.hpp"

namespace {
double cost(disttrain::fuzz::input& in) {
  switch (in.in(0, 15)) {
    case 0: return 0.0;
    case 1: return -1.0;
    case 2: return std::numeric_limits<double>::quiet_NaN();
    case 3: return std::numeric_limits<double>::infinity();
    case 4: return std::numeric_limits<double>::max();
    case 5: return std::numeric_limits<double>::denorm_min();
    case 6: {
      const std::uint64_t bits = in.u64();
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
    default: return static_cast<double>(in.byte()) + 1.0;
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using disttrain::fuzz::expect;
  disttrain::fuzz::input in(data, size);
  disttrain::reorder_options o;
  const int K = in.in(1, 3);
  for (int k = 0; k < K; ++k) o.modules.push_back({"m", static_cast<std::uint32_t>(in.in(0, 5))});
  o.microbatches = static_cast<std::uint32_t>(in.in(0, 6));
  o.microbatch_group = static_cast<std::uint32_t>(in.in(1, 2));
  o.equal_count = in.flag();
  o.slots = static_cast<disttrain::slot_policy>(in.in(0, 4));
  o.balance = static_cast<disttrain::balance_method>(in.in(0, 4));
  o.order = static_cast<disttrain::order_method>(in.in(0, 2));
  o.order_budget = static_cast<std::uint32_t>(in.in(0, 64));
  o.slot_search_budget = static_cast<std::uint32_t>(in.in(0, 64));
  std::vector<disttrain::sample_meta> batch(static_cast<std::size_t>(in.in(0, 40)));
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].id = in.flag() ? i : in.byte();  // sometimes duplicate ids
    batch[i].modules = static_cast<std::uint32_t>(in.flag() ? K : in.in(0, 4));
    for (int k = 0; k < K; ++k) batch[i].cost[static_cast<std::size_t>(k)] = cost(in);
  }
  // Per-replica limits and token sizes (read last: inputs that end before
  // them run without limits, as before the limits existed).
  for (auto& mod : o.modules) {
    mod.max_samples = static_cast<std::uint32_t>(in.in(0, 5));
    switch (in.in(0, 3)) {
      case 0: mod.max_tokens = 0; break;
      case 1: mod.max_tokens = in.byte(); break;
      case 2: mod.max_tokens = in.u64(); break;
      default: mod.max_tokens = 64u * in.byte(); break;
    }
  }
  for (auto& s : batch)
    for (int k = 0; k < K; ++k)
      s.tokens[static_cast<std::size_t>(k)] =
          in.flag() ? std::uint32_t{0xffffffffu} : static_cast<std::uint32_t>(in.byte());
  try {
    disttrain::reorderer<> r(o);
    const auto res = r.assign(batch);
    expect(res.samples.size() == batch.size());
    for (std::size_t k = 0; k < o.modules.size(); ++k)
      for (std::uint32_t rep = 0; rep < o.modules[k].dp; ++rep)
        for (std::uint32_t j = 0; j < o.microbatches; ++j) {
          const auto cell = res.cell(k, rep, j);
          std::uint64_t tokens = 0;
          for (std::size_t pos = 0; pos < cell.size(); ++pos) {
            expect(cell[pos] < res.samples.size());
            const auto& s = res.samples[cell[pos]];
            expect(s.microbatch == j && s.module[k].replica == rep && s.module[k].offset == pos);
            for (const auto& b : batch)  // the sample's tokens (ids are unique in a result)
              if (b.id == s.id) tokens += b.tokens[k];
          }
          // A result keeps every per-replica limit.
          expect(o.modules[k].max_samples == 0 || cell.size() <= o.modules[k].max_samples);
          expect(o.modules[k].max_tokens == 0 || tokens <= o.modules[k].max_tokens);
        }
  } catch (const disttrain::error&) {}
  return 0;
}
