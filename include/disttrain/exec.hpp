#pragma once
/// @file exec.hpp
/// @brief The executor: runs one rank's program of a schedule, overlapping
/// communication with compute (receives posted ahead, asynchronous sends,
/// bucket reductions during backward), with per-op timing. The
/// trace export (Perfetto JSON) is `disttrain/exec/trace.hpp` (in `disttrain/json.hpp`).
#include "disttrain/exec/bucket_allreduce.hpp"
#include "disttrain/exec/executor.hpp"
#include "disttrain/exec/host.hpp"
#include "disttrain/exec/timeline.hpp"
