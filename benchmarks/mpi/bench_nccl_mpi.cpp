// NCCL backend against raw ncclSend/ncclRecv measured in the same run, 2
// ranks: mpiexec -n 2 bench_nccl_mpi [--json] [--quick]. Registered as the
// smoke test mpi.nccl.bench_smoke.bench_nccl_mpi.np2 (--quick).
//
// Needs one GPU per rank: NCCL rejects two ranks of one communicator on the
// same GPU ("duplicate GPU"), so on a machine with fewer GPUs than ranks it
// exits 77 (ctest: skipped) and says so.
//
// Both variants move the same device buffer on their own communicator and
// stream: rank 0 sends `reps` messages one after the other (raw: ncclSend,
// then cudaStreamSynchronize; backend: isend + wait), rank 1 receives them
// (raw: ncclRecv + synchronize; backend: irecv + wait), then rank 1 sends a
// 1-byte MPI acknowledgement that ends rank 0's clock. Batches alternate as
// in bench_comm_mpi (benchmarks/p2p_report.hpp); informative rows, no target.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/comm/nccl_backend.hpp"
#include "harness.hpp"
#include "nccl_checks.hpp"
#include "one_way.hpp"
#include "p2p_report.hpp"

using disttrain::bench::one_way;

using disttrain::bench::cuda_ok;
using disttrain::bench::nccl_ok;
#define CUDA_OK(call) cuda_ok((call), #call)

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  const auto opt = disttrain::bench::parse_options(argc, argv);
  int me = 0, n = 0, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (n < 2 || rc != cudaSuccess || devices < n) {
    if (me == 0)
      std::printf(
          "SKIPPED: the NCCL benchmark needs 2 ranks and one GPU per rank (NCCL rejects two ranks "
          "of one communicator on the same GPU): %d rank(s), %d device(s)%s%s\n",
          n, rc == cudaSuccess ? devices : 0, rc != cudaSuccess ? ", cudaGetDeviceCount: " : "",
          rc != cudaSuccess ? cudaGetErrorString(rc) : "");
    return 77;
  }
  CUDA_OK(cudaSetDevice(me % devices));
  cudaStream_t backend_stream = nullptr, raw_stream = nullptr;
  CUDA_OK(cudaStreamCreate(&backend_stream));
  CUDA_OK(cudaStreamCreate(&raw_stream));
  auto b = disttrain::nccl_backend::from_mpi(MPI_COMM_WORLD, backend_stream,
                                             {std::chrono::seconds(120)});
  ncclUniqueId id{};
  if (me == 0) nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(id.internal, static_cast<int>(sizeof(id.internal)), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t raw = nullptr;
  nccl_ok(ncclCommInitRank(&raw, n, id, me), "ncclCommInitRank");

  const std::vector<std::size_t> sizes =
      opt.quick ? std::vector<std::size_t>{64 << 10, 4 << 20}
                : std::vector<std::size_t>{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  std::vector<disttrain::bench::p2p_row> rows;
  for (std::size_t s : sizes) {
    std::byte* buf = nullptr;
    CUDA_OK(cudaMalloc(&buf, s));
    const std::size_t budget = opt.quick ? (16u << 20) : (256u << 20);  // bytes per batch
    const int reps = static_cast<int>(std::clamp<std::size_t>(budget / s, 4, 512));
    const int batches = opt.quick ? 2 : 11;
    const auto raw_batch = [&] {
      return one_way(
          me, reps,
          [&] {
            nccl_ok(ncclSend(buf, s, ncclUint8, 1, raw, raw_stream), "ncclSend");
            CUDA_OK(cudaStreamSynchronize(raw_stream));
          },
          [&] {
            nccl_ok(ncclRecv(buf, s, ncclUint8, 0, raw, raw_stream), "ncclRecv");
            CUDA_OK(cudaStreamSynchronize(raw_stream));
          });
    };
    const auto backend_batch = [&] {
      return one_way(
          me, reps,
          [&] {
            auto r = b.isend({buf, s}, 1, 0);
            b.wait(r);
          },
          [&] {
            auto r = b.irecv({buf, s}, 0, 0);
            b.wait(r);
          });
    };
    disttrain::bench::p2p_row row{"one-way", s, 0.0, {}, {}};
    for (int bt = 0; bt <= batches; ++bt) {
      double tr = 0, to = 0;
      if (bt % 2 == 0) {
        tr = raw_batch();
        to = backend_batch();
      } else {
        to = backend_batch();
        tr = raw_batch();
      }
      if (bt == 0) continue;  // warm-up
      row.candidate_s.push_back(to);
      row.baseline_s.push_back(tr);
    }
    cudaFree(buf);
    rows.push_back(std::move(row));
  }
  ncclCommDestroy(raw);
  if (me == 0) {
    if (opt.json) {
      std::printf("%s\n", nlohmann::json{{"nccl_p2p",
                                          disttrain::bench::p2p_json("backend", "raw_nccl", rows)}}
                              .dump(2)
                              .c_str());
    } else {
      disttrain::bench::print_p2p_table(
          "NCCL backend vs raw ncclSend/ncclRecv, 2 ranks (ratio = raw time / backend time, "
          "median of paired batches)",
          "backend", "raw", rows);
    }
  }
  cudaStreamDestroy(backend_stream);
  cudaStreamDestroy(raw_stream);
  return 0;
}
