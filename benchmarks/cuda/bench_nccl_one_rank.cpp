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
// ncclGroupEnd, cudaStreamSynchronize on a blocking communicator (NCCL's
// default); backend = group_start, isend, irecv, group_end, wait, wait (an
// event per request, polled) on the backend's non-blocking communicator; and
// raw on a non-blocking communicator (blocking = 0, as the backend creates
// it, so that it can time out and abort), polling ncclCommGetAsyncError after
// ncclGroupEnd. The data path is the same NCCL self-copy, so row "self" is
// the backend's whole overhead per message and row "self-nb" the part of it
// that is not the non-blocking mode. Batches rotate which variant goes first
// (benchmarks/p2p_report.hpp); informative rows, no target.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_device.hpp"
#include "disttrain/comm/nccl_backend.hpp"
#include "harness.hpp"
#include "nccl_checks.hpp"
#include "p2p_report.hpp"

using disttrain::bench::cuda_ok;
using disttrain::bench::nccl_ok;

namespace {

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
  if (!disttrain::test::have_gpu()) return 77;  // it said why
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
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  ncclComm_t raw_nb = nullptr;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  const auto settle = [](ncclComm_t c, const char* what) {  // a non-blocking call's end
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) nccl_ok(ncclCommGetAsyncError(c, &st), "ncclCommGetAsyncError");
    nccl_ok(st, what);
  };
  const ncclResult_t init = ncclCommInitRankConfig(&raw_nb, 1, id, 0, &cfg);
  if (init != ncclInProgress) nccl_ok(init, "ncclCommInitRankConfig");
  settle(raw_nb, "ncclCommInitRankConfig");

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
    const auto raw_nb_batch = [&] {
      return per_message(reps, [&] {
        nccl_ok(ncclGroupStart(), "ncclGroupStart");
        nccl_ok(ncclSend(from, s, ncclUint8, 0, raw_nb, raw_stream), "ncclSend");
        nccl_ok(ncclRecv(to, s, ncclUint8, 0, raw_nb, raw_stream), "ncclRecv");
        const ncclResult_t end = ncclGroupEnd();
        if (end != ncclInProgress) nccl_ok(end, "ncclGroupEnd");
        settle(raw_nb, "ncclGroupEnd");
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
    disttrain::bench::p2p_row row{"self", s, 0.0, {}, {}}, row_nb{"self-nb", s, 0.0, {}, {}};
    for (int bt = 0; bt <= batches; ++bt) {
      double t[3] = {0, 0, 0};       // backend, raw, raw non-blocking
      for (int i = 0; i < 3; ++i) {  // rotate which goes first
        const int v = (bt + i) % 3;
        t[v] = v == 0 ? backend_batch() : v == 1 ? raw_batch() : raw_nb_batch();
      }
      if (bt == 0) continue;  // warm-up
      row.candidate_s.push_back(t[0]);
      row.baseline_s.push_back(t[1]);
      row_nb.candidate_s.push_back(t[0]);
      row_nb.baseline_s.push_back(t[2]);
    }
    cudaFree(from);
    cudaFree(to);
    rows.push_back(std::move(row));
    rows.push_back(std::move(row_nb));
  }
  ncclCommDestroy(raw);
  ncclCommDestroy(raw_nb);
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
        std::string("NCCL backend vs raw ncclSend/ncclRecv (self: blocking communicator; self-nb: "
                    "non-blocking), one rank exchanging with itself on ") +
            prop.name + " (ratio = raw time / backend time, median of paired batches)",
        "backend", "raw", rows);
  }
  cudaStreamDestroy(backend_stream);
  cudaStreamDestroy(raw_stream);
  return 0;
}
