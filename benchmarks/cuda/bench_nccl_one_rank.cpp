// NCCL backend against raw ncclSend/ncclRecv measured in the same run, on ONE
// GPU: bench_nccl_one_rank [--json] [--quick]. Registered as the smoke test
// gpu.bench_smoke.bench_nccl_one_rank (--quick); exits 77 (ctest: skipped),
// saying why, where no GPU exists.
//
// What one GPU can measure of the backend's own cost: NCCL rejects two ranks
// of one communicator on the same GPU, so the 2-rank comparison
// (benchmarks/mpi/bench_nccl_mpi.cpp) needs two GPUs. Here each variant has
// its own one-rank communicator and stream and exchanges a device buffer with
// itself, one message at a time: raw = ncclGroupStart, ncclSend, ncclRecv,
// ncclGroupEnd, cudaStreamSynchronize; backend = group_start, isend, irecv,
// group_end, wait, wait (an event per request, polled). The data path is the
// same NCCL self-copy, so the ratio is the backend's overhead per message.
// Batches alternate which variant goes first (benchmarks/p2p_report.hpp);
// informative rows, no target.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "disttrain/comm/nccl_backend.hpp"
#include "harness.hpp"
#include "p2p_report.hpp"

namespace {

void nccl_ok(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess)
    disttrain::fail(disttrain::errc::comm_error, "bench_nccl_one_rank", call, ": ",
                    ncclGetErrorString(rc));
}
void cuda_ok(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess)
    disttrain::fail(disttrain::errc::comm_error, "bench_nccl_one_rank", call, ": ",
                    cudaGetErrorString(rc));
}

// Seconds per message of `reps` messages.
template <class F>
double per_message(int reps, F&& one) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) one();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = disttrain::bench::parse_options(argc, argv);
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
    return 77;
  }
  cuda_ok(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t backend_stream = nullptr, raw_stream = nullptr;
  cuda_ok(cudaStreamCreate(&backend_stream), "cudaStreamCreate");
  cuda_ok(cudaStreamCreate(&raw_stream), "cudaStreamCreate");
  ncclUniqueId id{};
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  disttrain::nccl_backend b(id, 0, 1, backend_stream, {std::chrono::seconds(120)});
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  ncclComm_t raw = nullptr;
  nccl_ok(ncclCommInitRank(&raw, 1, id, 0), "ncclCommInitRank");

  const std::vector<std::size_t> sizes =
      opt.quick ? std::vector<std::size_t>{64 << 10, 4 << 20}
                : std::vector<std::size_t>{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  std::vector<disttrain::bench::p2p_row> rows;
  for (std::size_t s : sizes) {
    std::byte *from = nullptr, *to = nullptr;
    cuda_ok(cudaMalloc(&from, s), "cudaMalloc");
    cuda_ok(cudaMalloc(&to, s), "cudaMalloc");
    cuda_ok(cudaMemset(from, 1, s), "cudaMemset");
    const std::size_t budget = opt.quick ? (16u << 20) : (1u << 30);  // bytes per batch
    const int reps = static_cast<int>(std::clamp<std::size_t>(budget / s, 4, 2000));
    const int batches = opt.quick ? 2 : 11;
    const auto raw_batch = [&] {
      return per_message(reps, [&] {
        nccl_ok(ncclGroupStart(), "ncclGroupStart");
        nccl_ok(ncclSend(from, s, ncclUint8, 0, raw, raw_stream), "ncclSend");
        nccl_ok(ncclRecv(to, s, ncclUint8, 0, raw, raw_stream), "ncclRecv");
        nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
        cuda_ok(cudaStreamSynchronize(raw_stream), "cudaStreamSynchronize");
      });
    };
    const auto backend_batch = [&] {
      return per_message(reps, [&] {
        b.group_start();
        auto sr = b.isend({from, s}, 0, 0);
        auto rr = b.irecv({to, s}, 0, 0);
        b.group_end();
        b.wait(sr);
        b.wait(rr);
      });
    };
    disttrain::bench::p2p_row row{"self", s, 0.0, {}, {}};
    for (int bt = 0; bt <= batches; ++bt) {
      double tr = 0, tb = 0;
      if (bt % 2 == 0) {
        tr = raw_batch();
        tb = backend_batch();
      } else {
        tb = backend_batch();
        tr = raw_batch();
      }
      if (bt == 0) continue;  // warm-up
      row.candidate_s.push_back(tb);
      row.baseline_s.push_back(tr);
    }
    cudaFree(from);
    cudaFree(to);
    rows.push_back(std::move(row));
  }
  ncclCommDestroy(raw);
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (opt.json) {
    std::printf("%s\n", nlohmann::json{{"device", prop.name},
                                       {"nccl_self",
                                        disttrain::bench::p2p_json("backend", "raw_nccl", rows)}}
                            .dump(2)
                            .c_str());
  } else {
    disttrain::bench::print_p2p_table(
        std::string("NCCL backend vs raw ncclSend/ncclRecv, one rank exchanging with itself on ") +
            prop.name + " (ratio = raw time / backend time, median of paired batches)",
        "backend", "raw", rows);
  }
  cudaStreamDestroy(backend_stream);
  cudaStreamDestroy(raw_stream);
  return 0;
}
