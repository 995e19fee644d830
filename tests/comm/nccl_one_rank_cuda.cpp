// The NCCL backend, the CUDA stream pair and the copy_blocks kernel on ONE
// GPU, in one process: what a single-GPU machine can prove of the device path
// (NCCL rejects two ranks of one communicator on the same GPU, so the
// multi-rank tests, mpi.nccl.np2, need two GPUs). A one-rank communicator
// created from a host-provided unique id: point-to-point to itself inside a
// group, the three collectives, a fence after a kernel, and a receive nobody
// sends that must end in an error and an aborted communicator within the
// timeout, never in a hang or a "completed" request.
//
// Built only with disttrain::nccl and disttrain::kernels (not a test_*.cpp,
// so the CPU unit-test glob leaves it out): tests/mpi/CMakeLists.txt registers
// it as gpu.nccl_one_rank. It skips at run time, saying so, where no GPU is
// present.
#include <cstdio>

#include "disttrain_catch.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_device.hpp"
#include "disttrain/comm/nccl_backend.hpp"
#include "disttrain/exec/cuda_streams.hpp"
#include "disttrain/kernels/copy_blocks_cuda.hpp"

using disttrain::errc;
using namespace std::chrono_literals;

namespace {

disttrain::nccl_backend one_rank(cudaStream_t s, std::chrono::milliseconds timeout = 20000ms) {
  ncclUniqueId id{};
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  return disttrain::nccl_backend(id, 0, 1, s, {timeout});
}

std::vector<std::uint32_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = seed * 2654435761u + static_cast<std::uint32_t>(i);
  return v;
}

std::vector<std::uint32_t> to_host(const std::byte* d, std::size_t n) {
  std::vector<std::uint32_t> h(n);
  DISTTRAIN_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  return h;
}

// Elements of device `d` that differ from `want` (a count, so a failure does
// not print a million elements).
std::size_t mismatches(const std::byte* d, const std::vector<std::uint32_t>& want) {
  const auto got = to_host(d, want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
  return bad;
}

}  // namespace

TEST_CASE("NCCL backend on one GPU: self point-to-point, collectives, fence") {
  if (!disttrain::test::have_gpu()) {
    WARN("SKIPPED: no CUDA device present; the NCCL test was compiled but not run");
    return;
  }
  disttrain::cuda_stream_pair streams(0);
  auto b = one_rank(streams.comm());
  CHECK(b.rank() == 0);
  CHECK(b.size() == 1);

  disttrain::basic_buffer_pool<disttrain::device_allocator> pool;
  // 4 MiB and an odd size (not a multiple of 16 bytes): NCCL's self-copy path.
  for (std::size_t n : {std::size_t{1} << 20, std::size_t{12345}}) {
    INFO("elements " << n);
    const auto want = pattern(n, static_cast<std::uint32_t>(n));
    auto src = pool.acquire(n * sizeof(std::uint32_t));
    auto dst = pool.acquire(n * sizeof(std::uint32_t));
    DISTTRAIN_CUDA_CHECK(cudaMemcpy(src.data(), want.data(), src.size(), cudaMemcpyHostToDevice));
    DISTTRAIN_CUDA_CHECK(cudaMemset(dst.data(), 0, dst.size()));
    b.group_start();
    auto s = b.isend(src.span(), 0, 7);
    auto r = b.irecv(dst.span(), 0, 7);
    b.group_end();
    b.wait(s);
    b.wait(r);
    CHECK(!s.valid());
    CHECK(!r.valid());
    CHECK(mismatches(dst.data(), want) == 0);
  }

  // Collectives of a world of one: allgather copies, broadcast keeps, barrier returns.
  auto one = pool.acquire(2 * sizeof(std::uint32_t));
  const std::uint32_t v = 0xC0FFEEu;
  DISTTRAIN_CUDA_CHECK(cudaMemcpy(one.data(), &v, sizeof v, cudaMemcpyHostToDevice));
  b.allgather({one.data(), sizeof v}, {one.data() + sizeof v, sizeof v});
  b.broadcast({one.data(), sizeof v}, 0);
  b.barrier();
  CHECK(to_host(one.data(), 2) == std::vector<std::uint32_t>{v, v});

  // A fence completes only after the kernel enqueued before it on the stream:
  // pack every other element with copy_blocks on the compute stream, make the
  // communication stream wait for it, fence there, then read.
  const std::size_t n = 1 << 16;
  const auto src_h = pattern(n, 3);
  auto src = pool.acquire(n * sizeof(std::uint32_t));
  auto dst = pool.acquire(n / 2 * sizeof(std::uint32_t));
  DISTTRAIN_CUDA_CHECK(cudaMemcpy(src.data(), src_h.data(), src.size(), cudaMemcpyHostToDevice));
  const std::vector<disttrain::kernels::copy_block> blocks{
      {0, 0, static_cast<std::int64_t>(n / 2), 1, 2, 1}};  // rows of 1 element, stride 2
  disttrain::kernels::device_blocks dev(blocks, streams.compute());
  DISTTRAIN_CUDA_CHECK(disttrain::kernels::launch_copy_blocks(
      src.data(), dst.data(), dev.list(), sizeof(std::uint32_t), streams.compute()));
  streams.comm_waits_for_compute();
  auto f = b.fence(1);
  b.wait(f);
  std::vector<std::uint32_t> want(n / 2);
  for (std::size_t i = 0; i < n / 2; ++i) want[i] = src_h[2 * i];
  CHECK(mismatches(dst.data(), want) == 0);
  CHECK(!b.broken());
}

TEST_CASE("NCCL backend on one GPU: a receive nobody sends fails and aborts within the timeout") {
  if (!disttrain::test::have_gpu()) {
    WARN("SKIPPED: no CUDA device present; the NCCL test was compiled but not run");
    return;
  }
  cudaStream_t s = nullptr;
  DISTTRAIN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    auto b = one_rank(s);
    std::byte* d = nullptr;
    DISTTRAIN_CUDA_CHECK(cudaMalloc(&d, 4096));
    b.group_start();
    auto r = b.irecv({d, 4096}, 0, 5);
    // NCCL may refuse the unmatched self-receive at group end, or launch it
    // and never finish: either way the request must not complete.
    const auto t0 = std::chrono::steady_clock::now();
    bool threw = false;
    try {
      b.group_end();
      b.wait(r, 300ms);
    } catch (const disttrain::error& e) {
      threw = true;
      INFO(e.what());
      CHECK((e.code() == errc::timeout || e.code() == errc::comm_error));
      CHECK(e.where() != "");
      // A timeout aborts the communicator so that no kernel stays stuck.
      if (e.code() == errc::timeout) CHECK(b.broken());
    }
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(threw);
    CHECK(took < 20s);
    if (b.broken()) {
      // After the abort every call fails with comm_error instead of using the communicator.
      bool refused = false;
      try {
        b.barrier();
      } catch (const disttrain::error& e) {
        refused = e.code() == errc::comm_error;
      }
      CHECK(refused);
    }
    cudaFree(d);
  }
  cudaStreamDestroy(s);
}
