#pragma once
/// @file link_shape.hpp
/// @brief What crosses one link of a chain: the named fields of its
/// activation (hidden states, position ids, sequence lengths, ...), each with
/// its rows per sample, how TP ranks slice it and whether its gradient flows
/// back. `bind_rank` / `bind_world` (bind/bind.hpp) take one `link_shape` per
/// link.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/comm/route_plan.hpp"
#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief One named tensor of a link's activation (`link_shape`).
struct link_field {
  std::string name = "hidden";     ///< unique within its link
  std::int64_t hidden = 1;         ///< elements per row
  std::size_t elem_size = 4;       ///< bytes per element
  std::vector<std::int64_t> rows;  ///< per sample of the map (index into reorder_result::samples)
  split_axis split = split_axis::hidden;  ///< how a sample is sliced across TP ranks
  /// Its gradient flows back along the reversed route (hidden states). A
  /// field that is not (position ids, sequence lengths, masks, offsets)
  /// travels forward only: its part of every gradient message is empty.
  bool differentiable = true;

  friend bool operator==(const link_field&, const link_field&) = default;
};

/// @brief The activation crossing one link (virtual stage v -> v + 1): one
/// or more named fields (hidden states, position ids, sequence lengths, ...).
/// Every field travels along the same sample map with one message set
/// (`plan_routes`): a message of the link packs, per field in order, its
/// part of that message, each part starting at a multiple of
/// `field_alignment` bytes (`bound_rank::field_offset`). One field is the
/// single-tensor link, packed as before.
struct link_shape {
  std::vector<link_field> fields;

  friend bool operator==(const link_shape&, const link_shape&) = default;
};

/// @brief Byte alignment of the second and later fields' parts in a message.
inline constexpr std::int64_t field_alignment = 16;

/// @brief Index of the field named `name` in `shape`; throws
/// `invalid_argument` at `link_shape.fields` listing the names there are.
[[nodiscard]] inline std::size_t field_index(const link_shape& shape, std::string_view name) {
  for (std::size_t f = 0; f < shape.fields.size(); ++f)
    if (shape.fields[f].name == name) return f;
  std::string names;
  for (const link_field& f : shape.fields)
    names += cat(names.empty() ? "" : ", ", "'", f.name, "'");
  fail(errc::invalid_argument, "link_shape.fields", "no field '", name, "' (fields: ", names, ")");
}

}  // namespace disttrain
