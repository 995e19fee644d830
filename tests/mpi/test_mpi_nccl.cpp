// NCCL backend bootstrapped from MPI (and from a shared file): device
// point-to-point in a group, collectives, timeout of a silent peer with
// communicator abort. Exits 77 (ctest: skipped) with a message where no
// usable GPU exists (or fewer GPUs than ranks: NCCL needs one GPU per rank).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/comm/nccl_backend.hpp"
#if defined(DISTTRAIN_HAS_CUDA_KERNELS)
#include "disttrain/comm/device_route_transfer.hpp"
#include "route_cases.hpp"
#endif
#include "mpi_harness.hpp"

using disttrain::errc;
using disttrain::mpitest::capture;
using namespace std::chrono_literals;

namespace {

cudaStream_t g_stream = nullptr;

std::vector<std::int32_t> to_host(const std::int32_t* d, std::size_t n) {
  std::vector<std::int32_t> h(n);
  cudaMemcpy(h.data(), d, n * sizeof(std::int32_t), cudaMemcpyDeviceToHost);
  return h;
}

void exchange_ring(disttrain::nccl_backend& b) {
  const std::size_t n = 1 << 16;
  std::int32_t *out = nullptr, *in = nullptr;
  cudaMalloc(&out, n * sizeof(std::int32_t));
  cudaMalloc(&in, n * sizeof(std::int32_t));
  std::vector<std::int32_t> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = b.rank() * 1000000 + static_cast<std::int32_t>(i);
  cudaMemcpy(out, h.data(), n * sizeof(std::int32_t), cudaMemcpyHostToDevice);
  const int next = (b.rank() + 1) % b.size(), prev = (b.rank() + b.size() - 1) % b.size();
  b.group_start();
  auto s = b.isend({reinterpret_cast<const std::byte*>(out), n * sizeof(std::int32_t)}, next, 0);
  auto r = b.irecv({reinterpret_cast<std::byte*>(in), n * sizeof(std::int32_t)}, prev, 0);
  b.group_end();
  b.wait(s);
  b.wait(r);
  const auto got = to_host(in, n);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i)
    bad += got[i] != prev * 1000000 + static_cast<std::int32_t>(i);
  MPI_CHECK(bad == 0);
  // Collectives.
  b.barrier();
  std::int32_t* one = nullptr;
  cudaMalloc(&one, sizeof(std::int32_t) * static_cast<std::size_t>(b.size() + 1));
  const std::int32_t mine = 10 + b.rank();
  cudaMemcpy(one, &mine, sizeof mine, cudaMemcpyHostToDevice);
  b.allgather(
      {reinterpret_cast<const std::byte*>(one), sizeof mine},
      {reinterpret_cast<std::byte*>(one + 1), sizeof mine * static_cast<std::size_t>(b.size())});
  const auto all = to_host(one + 1, static_cast<std::size_t>(b.size()));
  for (int q = 0; q < b.size(); ++q) MPI_CHECK(all[static_cast<std::size_t>(q)] == 10 + q);
  b.broadcast({reinterpret_cast<std::byte*>(one), sizeof mine}, b.size() - 1);
  MPI_CHECK(to_host(one, 1)[0] == 10 + b.size() - 1);
  cudaFree(one);
  cudaFree(out);
  cudaFree(in);
}

void from_mpi() {
  auto b = disttrain::nccl_backend::from_mpi(MPI_COMM_WORLD, g_stream, {20000ms});
  exchange_ring(b);
}

void from_file() {
  const std::string path = "/tmp/disttrain_nccl_id_test";
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (me == 0) std::remove(path.c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  auto b = disttrain::nccl_backend::from_file(path, me, n, g_stream, {20000ms});
  exchange_ring(b);
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) std::remove(path.c_str());
}

void silent_peer() {
  auto b = disttrain::nccl_backend::from_mpi(MPI_COMM_WORLD, g_stream, {20000ms});
  if (b.rank() == 1) {
    std::byte* d = nullptr;
    cudaMalloc(&d, 4096);
    auto r = b.irecv({d, 4096}, 0, 5);
    const auto e = capture([&] { b.wait(r, 200ms); });
    MPI_CHECK(e.code() == errc::timeout);
    MPI_CHECK(e.where() == "rank 1 <- rank 0 tag 5");
    MPI_CHECK(b.broken());
    MPI_CHECK(capture([&] { b.barrier(); }).code() == errc::comm_error);
    cudaFree(d);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

#if defined(DISTTRAIN_HAS_CUDA_KERNELS)
// Every route case that fits the world, on device buffers, plus a reordering
// 1 -> 1 route whose receive needs the unpack kernel; checked element by element.
void device_routes() {
  auto b = disttrain::nccl_backend::from_mpi(MPI_COMM_WORLD, g_stream, {20000ms});
  auto cases = disttrain::test::small_route_cases();
  cases.push_back({"reordered 1->1",
                   disttrain::topology({{"a", disttrain::module_role::encoder, 1, 1, 1},
                                        {"b", disttrain::module_role::backbone, 1, 1, 1}}),
                   disttrain::test::at(0, 0),
                   disttrain::test::at(1, 0),
                   disttrain::sample_placement({{0, 1, 2}}),
                   disttrain::sample_placement({{2, 0, 1}}),
                   disttrain::activation_shape{{3, 5, 2}, 6, 4},
                   {}});
  disttrain::device_route_transfer::pool_type pool;
  for (const auto& c : cases) {
    if (c.layout.world_size() > b.size()) continue;
    const int me = b.rank();
    if (me < c.layout.world_size()) {
      const auto plan = disttrain::plan_route(c.layout, c.from, c.pa, c.to, c.pb, c.shape, c.opts);
      auto bufs = disttrain::test::make_buffers(c, me);
      auto src = pool.acquire(bufs.source.size());
      auto dst = pool.acquire(bufs.destination.size());
      if (!bufs.source.empty())
        cudaMemcpy(src.data(), bufs.source.data(), bufs.source.size(), cudaMemcpyHostToDevice);
      if (!bufs.destination.empty())
        cudaMemcpy(dst.data(), bufs.destination.data(), bufs.destination.size(),
                   cudaMemcpyHostToDevice);
      disttrain::device_route_transfer t(b, plan, pool);
      t.start(src.span(), dst.span());
      t.wait();
      if (!bufs.destination.empty())
        cudaMemcpy(bufs.destination.data(), dst.data(), bufs.destination.size(),
                   cudaMemcpyDeviceToHost);
      MPI_CHECK(disttrain::test::count_mismatches(c, me, bufs) == 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  int me = 0, n = 0, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices < n) {
    std::printf(
        "[rank %d] SKIPPED: NCCL test needs one GPU per rank: %d rank(s), %d device(s)%s%s\n", me,
        n, rc == cudaSuccess ? devices : 0, rc != cudaSuccess ? ", cudaGetDeviceCount: " : "",
        rc != cudaSuccess ? cudaGetErrorString(rc) : "");
    return 77;
  }
  cudaSetDevice(me % devices);
  cudaStreamCreate(&g_stream);
  const int code = disttrain::mpitest::run_all({
    {"nccl from MPI: ring exchange and collectives", from_mpi},
        {"nccl from a shared file", from_file},
#if defined(DISTTRAIN_HAS_CUDA_KERNELS)
        {"device routes (copy_blocks kernels + NCCL)", device_routes},
#endif
    {
      "nccl silent peer times out and aborts", silent_peer
    }
  });
  cudaStreamDestroy(g_stream);
  return code;
}
