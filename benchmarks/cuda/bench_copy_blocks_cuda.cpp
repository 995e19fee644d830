// The CUDA copy_blocks kernel against cudaMemcpy device-to-device measured in
// the same run, on one GPU: run bench_copy_blocks_cuda [--json] [--quick].
// Registered as the smoke test gpu.bench_smoke.bench_copy_blocks_cuda
// (--quick); exits 77 (ctest: skipped), saying why, where no GPU exists.
//
// Patterns (bytes = bytes moved; baseline = what cudaMemcpy does for it):
//   contiguous  one block of `bytes`            vs one cudaMemcpyAsync D2D
//   column      a column slice of a row-major   vs cudaMemcpy2DAsync D2D with
//               matrix packed contiguously         the same pitches
//   varlen      256 samples of random lengths   vs one cudaMemcpyAsync of the
//               gathered into one buffer           total (the bandwidth ceiling)
// Each batch of the kernel is timed (CUDA events) right next to a batch of
// the baseline, alternating which goes first, so both see the same GPU state;
// ratio = baseline time / kernel time per pair, median and min..max
// (benchmarks/p2p_report.hpp). Informative rows: no target is asserted.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_device.hpp"
#include "disttrain/kernels/copy_blocks_cuda.hpp"
#include "harness.hpp"
#include "p2p_report.hpp"

using disttrain::kernels::copy_block;

namespace {

// Seconds per call of `fn` over `reps` calls enqueued on `s` (CUDA events).
double time_on_stream(cudaStream_t s, int reps, const std::function<void()>& fn) {
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  DISTTRAIN_CUDA_CHECK(cudaEventCreate(&t0));
  DISTTRAIN_CUDA_CHECK(cudaEventCreate(&t1));
  DISTTRAIN_CUDA_CHECK(cudaEventRecord(t0, s));
  for (int i = 0; i < reps; ++i) fn();
  DISTTRAIN_CUDA_CHECK(cudaEventRecord(t1, s));
  DISTTRAIN_CUDA_CHECK(cudaEventSynchronize(t1));
  float ms = 0;
  DISTTRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return static_cast<double>(ms) * 1e-3 / reps;
}

// Device allocation freed at scope exit.
struct device_bytes {
  explicit device_bytes(std::size_t n) {
    DISTTRAIN_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(n, 1)));
  }
  device_bytes(const device_bytes&) = delete;
  device_bytes& operator=(const device_bytes&) = delete;
  ~device_bytes() { cudaFree(p); }
  std::byte* p = nullptr;
};

struct pattern {
  const char* name;
  std::vector<copy_block> blocks;  // in bytes (elem_size 1)
  std::size_t src_bytes = 0, dst_bytes = 0, moved = 0;
  std::function<void(const std::byte*, std::byte*, cudaStream_t)> baseline;
};

pattern contiguous(std::size_t bytes) {
  const auto n = static_cast<std::int64_t>(bytes);
  return {"contiguous",
          {{0, 0, 1, n, n, n}},
          bytes,
          bytes,
          bytes,
          [bytes](const std::byte* src, std::byte* dst, cudaStream_t s) {
            DISTTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
          }};
}

// The first quarter of every row of a rows x 4096-byte matrix, packed.
pattern column(std::size_t bytes) {
  const std::int64_t cols = 1024, pitch = 4 * cols;
  const std::int64_t rows = std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes) / cols);
  const auto moved = static_cast<std::size_t>(rows * cols);
  return {"column",
          {{0, 0, rows, cols, pitch, cols}},
          static_cast<std::size_t>(rows * pitch),
          moved,
          moved,
          [=](const std::byte* src, std::byte* dst, cudaStream_t s) {
            DISTTRAIN_CUDA_CHECK(
                cudaMemcpy2DAsync(dst, static_cast<std::size_t>(cols), src,
                                  static_cast<std::size_t>(pitch), static_cast<std::size_t>(cols),
                                  static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, s));
          }};
}

// 256 samples of random lengths (mean bytes / 256) scattered in the source,
// gathered back to back.
pattern varlen(std::size_t bytes) {
  std::mt19937_64 rng(7);
  const std::int64_t mean = std::max<std::int64_t>(16, static_cast<std::int64_t>(bytes) / 256);
  std::vector<copy_block> blocks;
  std::int64_t src = 0, dst = 0;
  for (int i = 0; i < 256; ++i) {
    const std::int64_t len =
        1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * mean));
    src += static_cast<std::int64_t>(rng() % 64);  // gaps and odd offsets
    blocks.push_back({src, dst, 1, len, len, len});
    src += len;
    dst += len;
  }
  const auto moved = static_cast<std::size_t>(dst);
  return {"varlen",
          std::move(blocks),
          static_cast<std::size_t>(src),
          moved,
          moved,
          [moved](const std::byte* s_, std::byte* d_, cudaStream_t s) {
            DISTTRAIN_CUDA_CHECK(cudaMemcpyAsync(d_, s_, moved, cudaMemcpyDeviceToDevice, s));
          }};
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = disttrain::bench::parse_options(argc, argv);
  if (!disttrain::test::have_gpu()) return 77;  // it said why
  cudaStream_t s = nullptr;
  DISTTRAIN_CUDA_CHECK(cudaStreamCreate(&s));
  const std::vector<std::size_t> sizes =
      opt.quick ? std::vector<std::size_t>{64 << 10, 4 << 20}
                : std::vector<std::size_t>{64 << 10, 1 << 20, 16 << 20, 256 << 20};
  const int batches = opt.quick ? 2 : 11;
  std::vector<disttrain::bench::p2p_row> rows;
  for (std::size_t bytes : sizes) {
    for (const auto& make : {contiguous, column, varlen}) {
      const pattern p = make(bytes);
      device_bytes src(p.src_bytes), dst(p.dst_bytes);
      DISTTRAIN_CUDA_CHECK(cudaMemsetAsync(src.p, 1, p.src_bytes, s));
      const disttrain::kernels::device_blocks d(p.blocks, s);
      const int reps = static_cast<int>(std::clamp<std::size_t>((256u << 20) / p.moved, 4, 1000));
      const auto kernel = [&] {
        return time_on_stream(s, reps, [&] {
          DISTTRAIN_CUDA_CHECK(
              disttrain::kernels::launch_copy_blocks(src.p, dst.p, d.list(), 1, s));
        });
      };
      const auto memcpy_ = [&] {
        return time_on_stream(s, reps, [&] { p.baseline(src.p, dst.p, s); });
      };
      disttrain::bench::p2p_row row{p.name, p.moved, 0.0, {}, {}};
      for (int b = 0; b <= batches; ++b) {
        double tk = 0, tm = 0;
        if (b % 2 == 0) {
          tk = kernel();
          tm = memcpy_();
        } else {
          tm = memcpy_();
          tk = kernel();
        }
        if (b == 0) continue;  // warm-up
        row.candidate_s.push_back(tk);
        row.baseline_s.push_back(tm);
      }
      rows.push_back(std::move(row));
    }
  }
  cudaDeviceProp prop{};
  DISTTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (opt.json) {
    std::printf("%s\n", nlohmann::json{{"device", prop.name},
                                       {"copy_blocks",
                                        disttrain::bench::p2p_json("kernel", "memcpy", rows)}}
                            .dump(2)
                            .c_str());
  } else {
    disttrain::bench::print_p2p_table(
        std::string("copy_blocks kernel vs cudaMemcpy D2D on ") + prop.name +
            " (ratio = memcpy time / kernel time, median of paired batches)",
        "kernel", "memcpy", rows);
  }
  cudaStreamDestroy(s);
  return 0;
}
