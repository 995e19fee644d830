#pragma once
/// @file schedule.hpp
/// @brief Pipeline schedules: the per-rank op-list value type, generators
/// (GPipe, 1F1B, interleaved 1F1B, ZB-H1, the multi-module disaggregated
/// pipeline), the communication and gradient-sync passes, and validation.
/// nvcc-safe; the text table lives in the host-only `schedule/format.hpp`.
///
/// JSON I/O is not included: `disttrain/schedule/json.hpp` (or `disttrain/json.hpp`).
#include "disttrain/schedule/bind_schedule.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/gpipe.hpp"
#include "disttrain/schedule/interleaved.hpp"
#include "disttrain/schedule/message_tags.hpp"
#include "disttrain/schedule/multi_module.hpp"
#include "disttrain/schedule/one_f_one_b.hpp"
#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/op_cost.hpp"
#include "disttrain/schedule/rendezvous_order.hpp"
#include "disttrain/schedule/schedule.hpp"
#include "disttrain/schedule/validate.hpp"
#include "disttrain/schedule/zero_bubble.hpp"
