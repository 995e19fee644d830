#pragma once
// Shared by tests/data/test_producer_ranks.cpp (local backend, threads) and
// tests/mpi/test_mpi_producers.cpp (MPI ranks): a synthetic part_source with
// three parts (encoder pixels, backbone token ids, generator target) whose
// bytes are a pure function of the id, faults injected by id, and one trainer
// step: metadata -> sample map -> request this rank's module part -> receive,
// checked sample by sample against the map.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "disttrain/data/producer_ranks.hpp"
#include "disttrain/data/sample_requests.hpp"
#include "disttrain/reorder/reorderer.hpp"

namespace disttrain::test {

struct synthetic_item {
  std::uint64_t id = 0;
  std::vector<std::vector<std::byte>> parts;
};
struct synthetic_meta {
  std::uint32_t pixels = 0, tokens = 0;
};

// Part p of sample id: (id % 5 + 1) * (p + 1) bytes of an id-derived pattern;
// the metadata is the pixel and token counts. `bad` ids throw in load,
// `stall_id` blocks load until `release` is set.
struct synthetic_parts_source {
  using item_type = synthetic_item;
  using meta_type = synthetic_meta;
  std::set<std::uint64_t> bad;
  std::uint64_t stall_id = ~0ULL;
  std::atomic<bool>* release = nullptr;
  mutable std::atomic<int> loads{0};

  static std::vector<std::byte> part_bytes(std::uint64_t id, std::size_t p) {
    std::vector<std::byte> v((id % 5 + 1) * (p + 1) * 8);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<std::byte>((id * 31 + p * 7 + i) % 251);
    return v;
  }
  item_type load(std::uint64_t id) const {
    ++loads;
    if (bad.contains(id))
      throw std::runtime_error("undecodable image in sample " + std::to_string(id));
    if (id == stall_id)
      while (release != nullptr && !release->load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    item_type it{id, {}};
    for (std::size_t p = 0; p < 3; ++p) it.parts.push_back(part_bytes(id, p));
    return it;
  }
  meta_type meta(const item_type& x) const {
    return {static_cast<std::uint32_t>(x.parts[0].size()),
            static_cast<std::uint32_t>(x.parts[1].size())};
  }
  std::size_t parts() const { return 3; }
  void encode_part(const item_type& x, std::size_t p, std::vector<std::byte>& out) const {
    out.insert(out.end(), x.parts[p].begin(), x.parts[p].end());
  }
  void encode_meta(const meta_type& m, std::vector<std::byte>& out) const {
    const auto b = std::as_bytes(std::span(&m, 1));
    out.insert(out.end(), b.begin(), b.end());
  }
  meta_type decode_meta(std::span<const std::byte> b) const {
    if (b.size() != sizeof(meta_type)) throw std::runtime_error("bad meta size");
    meta_type m;
    std::memcpy(&m, b.data(), sizeof m);
    return m;
  }
};

// Batch k: 12 ids starting at 100 k, in a k-dependent shuffled order.
inline std::vector<std::uint64_t> synthetic_batch(std::uint64_t k) {
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = 0; i < 12; ++i) ids.push_back(100 * k + (i * 5 + k) % 12);
  return ids;
}

// Modules and their DP degrees; consumer c (in config order) is the
// (module, replica) of `roles[c]` and consumes part `module` (0 encoder
// pixels, 1 backbone tokens, 2 generator targets).
struct feed_layout {
  std::vector<std::uint32_t> dp;  // per module
  struct role {
    std::size_t module, replica;
  };
  [[nodiscard]] std::vector<role> roles() const {
    std::vector<role> out;
    for (std::size_t k = 0; k < dp.size(); ++k)
      for (std::size_t r = 0; r < dp[k]; ++r) out.push_back({k, r});
    return out;
  }
  [[nodiscard]] reorder_options options() const {
    reorder_options o;
    for (std::size_t k = 0; k < dp.size(); ++k)
      o.modules.push_back({"m" + std::to_string(k), dp[k]});
    o.microbatches = 2;
    return o;
  }
};

// The sample map every trainer computes from the metadata alone.
inline reorder_result sample_map(const feed_layout& layout,
                                 const batch_metadata<synthetic_meta>& md) {
  std::vector<sample_meta> costs;
  for (const auto& rec : md.samples) {
    sample_meta m;
    m.id = rec.id;
    m.modules = static_cast<std::uint32_t>(layout.dp.size());
    for (std::size_t k = 0; k < layout.dp.size(); ++k)
      m.cost[k] = 1.0 + (k == 0 ? rec.meta.pixels : rec.meta.tokens);
    costs.push_back(m);
  }
  reorderer<> r(layout.options());
  return r.assign(costs);
}

// One trainer step for consumer `c`; returns "" or what went wrong. `map_out`
// receives the map (to compare across trainers), `skipped_out` the skipped samples.
template <class Feed>
std::string consume_batch(Feed& feed, const feed_layout& layout, std::size_t c, std::uint64_t k,
                          reorder_result* map_out = nullptr,
                          std::vector<skipped_sample>* skipped_out = nullptr) {
  const auto& md = feed.metadata(k);
  const auto map = sample_map(layout, md);
  if (map_out != nullptr) *map_out = map;
  if (skipped_out != nullptr) *skipped_out = md.skipped;
  const auto role = layout.roles().at(c);
  const std::uint32_t part = static_cast<std::uint32_t>(role.module);
  const auto want = requests_for(map, role.module, role.replica, std::span(&part, 1));
  const auto got = feed.fetch(k, want);
  if (got.size() != want.size())
    return "consumer " + std::to_string(c) + ": got " + std::to_string(got.size()) +
           " parts, want " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].id != want[i].id || got[i].part != want[i].part)
      return "consumer " + std::to_string(c) + ": position " + std::to_string(i) +
             " holds sample " + std::to_string(got[i].id) + ", the map says " +
             std::to_string(want[i].id);
    if (got[i].bytes != synthetic_parts_source::part_bytes(got[i].id, got[i].part))
      return "consumer " + std::to_string(c) + ": wrong bytes for sample " +
             std::to_string(got[i].id);
  }
  return {};
}

}  // namespace disttrain::test
