#pragma once
/// @file sample_requests.hpp
/// @brief From the global sample map (`reorder_result`) to one trainer rank's
/// ordered `sample_request`s for `sample_feed::request`: the samples of its
/// module replica, microbatch by microbatch in execution order, each cell in
/// the map's order, and for each sample the parts the rank consumes.
///
/// A rank of module k, replica r (which ranks those are is the trainer's
/// `topology`; typically the first pipeline stage takes the inputs and the
/// last stage the targets) asks for exactly what its module trains on:
///
/// @snippet data.cpp sample_requests

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/assignment.hpp"

namespace disttrain {

/// @brief One part of one sample that a consumer rank wants (`sample_feed::request`).
struct sample_request {
  std::uint64_t id = 0;    ///< sample id
  std::uint32_t part = 0;  ///< part index, e.g. 0 encoder input, 1 token ids, 2 targets
  friend bool operator==(const sample_request&, const sample_request&) = default;
};

/// @brief The ordered requests of replica `replica` of module `module` in
/// `map`: for each microbatch j = 0, 1, ... (execution order), for each sample
/// of cell (module, replica, j) in cell order, one request per entry of
/// `parts`, in that order. Throws `errc::invalid_argument` for a module or
/// replica out of range or an empty `parts`.
[[nodiscard]] inline std::vector<sample_request> requests_for(
    const reorder_result& map, std::size_t module, std::size_t replica,
    std::span<const std::uint32_t> parts) {
  require(!parts.empty(), "requests_for.parts", "no part requested");
  std::vector<sample_request> out;
  for (std::size_t j = 0; j < map.microbatches; ++j)
    for (std::uint32_t s : map.cell(module, replica, j))
      for (std::uint32_t p : parts) out.push_back({map.samples[s].id, p});
  return out;
}

}  // namespace disttrain
