// libFuzzer target: every JSON reader of a spec, plan or option type. Any
// input must parse or throw `disttrain::error` (the one documented error
// type); any other exception, crash or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>

#include "disttrain/comm.hpp"
#include "disttrain/comm/json.hpp"
#include "disttrain/cost.hpp"
#include "disttrain/cost/calibration.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/plan.hpp"
#include "disttrain/plan/fidelity.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/reorder.hpp"
#include "disttrain/reorder/json.hpp"
#include "disttrain/schedule.hpp"
#include "disttrain/schedule/json.hpp"

namespace {
template <class T>
void read_as(const disttrain::json& j) {
  try {
    (void)j.get<T>();
  } catch (const disttrain::error&) {}
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the reader; the rest is the document.
  const auto j = disttrain::json::parse(data + 1, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  switch (data[0] % 14) {
    case 0: read_as<disttrain::model_spec>(j); break;
    case 1: read_as<disttrain::cluster_spec>(j); break;
    case 2: read_as<disttrain::data_spec>(j); break;
    case 3: read_as<disttrain::scenario>(j); break;
    case 4: read_as<disttrain::module_spec>(j); break;
    case 5: read_as<disttrain::cost_params>(j); break;
    case 6: read_as<disttrain::profile>(j); break;
    case 7: read_as<disttrain::efficiency_params>(j); break;
    case 8: read_as<disttrain::parallel_plan>(j); break;
    case 9: read_as<disttrain::topology>(j); break;
    case 10: read_as<disttrain::reorder_options>(j); break;
    case 11: read_as<disttrain::pipeline_schedule>(j); break;
    case 12: read_as<disttrain::sample_placement>(j); break;
    case 13: read_as<disttrain::activation_shape>(j); break;
  }
  return 0;
}
