#pragma once
// Shared by the NCCL benchmarks (cuda/bench_nccl_one_rank.cpp,
// mpi/bench_nccl_mpi.cpp): a failed NCCL or CUDA call throws
// disttrain::error(errc::comm_error) naming the benchmark and the call.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "disttrain/core/check.hpp"

namespace disttrain::bench {

inline void nccl_ok(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess)
    fail(errc::comm_error, "NCCL benchmark", call, ": ", ncclGetErrorString(rc));
}

inline void cuda_ok(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess)
    fail(errc::comm_error, "NCCL benchmark", call, ": ", cudaGetErrorString(rc));
}

}  // namespace disttrain::bench
