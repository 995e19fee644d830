#pragma once
/// @file parts.hpp
/// @brief The tiny model's samples as a `part_source` (data/producer_ranks.hpp):
/// producer ranks load them and send each trainer only its module's part,
/// part 0 the images (encoder), 1 the text tokens (backbone), 2 the generated
/// image's latent (generator). Metadata travels as (id, text length, patches
/// per image).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/data/producer_ranks.hpp"

#include "data.hpp"

namespace tiny_mllm {

/// @brief Loads, encodes and decodes the tiny model's samples (see the file comment).
struct sample_parts {
  using item_type = sample;
  using meta_type = sample_meta;
  config c;

  sample load(std::uint64_t id) const { return make_sample(c, id); }
  sample_meta meta(const sample& s) const { return s.meta; }
  static std::size_t parts() { return 3; }
  /// @brief The part a module consumes.
  static std::uint32_t part_of(disttrain::module_role r) {
    return r == disttrain::module_role::encoder    ? 0U
           : r == disttrain::module_role::backbone ? 1U
                                                   : 2U;
  }

  void encode_part(const sample& s, std::size_t part, std::vector<std::byte>& out) const {
    if (part == 0) {
      for (const matrix& img : s.images) put(out, img.data(), static_cast<std::size_t>(img.size()));
    } else if (part == 1) {
      put(out, s.text.data(), s.text.size());
    } else {
      put(out, s.target.data(), static_cast<std::size_t>(s.target.size()));
    }
  }
  void encode_meta(const sample_meta& m, std::vector<std::byte>& out) const {
    const std::int64_t head[2] = {static_cast<std::int64_t>(m.id), m.text_len};
    put(out, head, 2);
    put(out, m.patches.data(), m.patches.size());
  }
  sample_meta decode_meta(std::span<const std::byte> b) const {
    sample_meta m;
    std::int64_t head[2];
    take(b, head, 2);
    m.id = static_cast<std::uint64_t>(head[0]);
    m.text_len = static_cast<int>(head[1]);
    m.patches.resize(b.size() / sizeof(int));
    take(b, m.patches.data(), m.patches.size());
    return m;
  }
  /// @brief `s` (whose `meta` is set) with part `part` filled from `bytes`.
  void decode_part(sample& s, std::uint32_t part, std::span<const std::byte> b) const {
    if (part == 0) {
      for (int p : s.meta.patches) {
        matrix img(p, c.patch_dim);
        take(b, img.data(), static_cast<std::size_t>(img.size()));
        s.images.push_back(std::move(img));
      }
    } else if (part == 1) {
      s.text.resize(static_cast<std::size_t>(s.meta.text_len));
      take(b, s.text.data(), s.text.size());
    } else {
      s.target.resize(c.latent_dim);
      take(b, s.target.data(), static_cast<std::size_t>(s.target.size()));
    }
    disttrain::require(b.empty(), disttrain::cat("sample ", s.meta.id, " part ", part), b.size(),
                       " bytes left over: producer and trainer disagree");
  }

 private:
  template <class T>
  static void put(std::vector<std::byte>& out, const T* p, std::size_t n) {
    const auto* bytes = reinterpret_cast<const std::byte*>(p);
    out.insert(out.end(), bytes, bytes + n * sizeof(T));
  }
  template <class T>
  static void take(std::span<const std::byte>& in, T* p, std::size_t n) {
    disttrain::require(in.size() >= n * sizeof(T), "sample_parts", "truncated part: need ",
                       n * sizeof(T), " bytes, have ", in.size());
    std::memcpy(p, in.data(), n * sizeof(T));
    in = in.subspan(n * sizeof(T));
  }
};
static_assert(disttrain::part_source<sample_parts>);

/// @brief A trainer rank's samples from producer ranks: per batch the ids the
/// producers announced, then this rank's parts of the sample map, handed to
/// `bound_host` in the map's order.
template <disttrain::comm_backend B>
class remote_samples {
 public:
  remote_samples(B& world, const config& c, disttrain::producer_ranks_config cfg,
                 disttrain::batch_sampler sampler)
      : source_{c}, feed_(world, source_, std::move(cfg), std::move(sampler)) {}

  /// @brief Batch k's sample ids (sorted), once every producer announced its share.
  std::vector<std::uint64_t> ids(std::uint64_t k) {
    std::vector<std::uint64_t> out;
    for (const auto& r : feed_.metadata(k).samples) {
      meta_[r.id] = r.meta;
      out.push_back(r.id);
    }
    return out;
  }
  /// @brief Requests and receives this rank's parts of batch k (module `module`,
  /// `replica`, in `map`'s order); returns the fetch for `bound_host::begin`.
  std::function<sample(std::uint64_t)> fetch(std::uint64_t k, const disttrain::reorder_result& map,
                                             std::size_t module, std::size_t replica,
                                             disttrain::module_role role) {
    const std::uint32_t part = sample_parts::part_of(role);
    received_ = feed_.fetch(k, disttrain::requests_for(map, module, replica, std::span(&part, 1)));
    next_ = 0;
    return [this](std::uint64_t id) {
      disttrain::require(next_ < received_.size() && received_[next_].id == id, "remote_samples",
                         "the producers did not deliver sample ", id,
                         " next (the sample map's order)");
      sample s;
      s.meta = meta_.at(id);
      source_.decode_part(s, received_[next_].part, received_[next_].bytes);
      ++next_;
      return s;
    };
  }
  [[nodiscard]] double exposed_wait_seconds() const { return feed_.exposed_wait_seconds(); }

 private:
  sample_parts source_;
  disttrain::sample_feed<B, sample_parts> feed_;
  std::map<std::uint64_t, sample_meta> meta_;
  std::vector<disttrain::received_part> received_;
  std::size_t next_ = 0;
};

}  // namespace tiny_mllm
