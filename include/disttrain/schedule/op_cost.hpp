#pragma once
/// @file op_cost.hpp
/// @brief `op_cost_fn`: what an op costs while a schedule generator decides
/// the op order (`multi_module_spec::cost`).

#include <functional>

#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain {

/// @brief Seconds op `o` takes on schedule rank `r`, for ordering ops while a
/// schedule is generated (e.g. a cost model's stage times). A negative or NaN
/// result makes the generator throw `invalid_argument` naming the op.
using op_cost_fn = std::function<double(const schedule_rank& r, const schedule_op& o)>;

}  // namespace disttrain
