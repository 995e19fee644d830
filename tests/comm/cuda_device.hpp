#pragma once
// Shared by the device tests (test_copy_blocks_cuda.cpp,
// nccl_one_rank_cuda.cpp): whether a CUDA device exists, printing
// "SKIPPED: ..." with the reason when it does not.
#include <cuda_runtime_api.h>

#include <cstdio>

namespace disttrain::test {

inline bool have_gpu() {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
    return false;
  }
  return true;
}

}  // namespace disttrain::test
