// Producer ranks as MPI processes (issue 17): delivery in the map's order at
// two layouts with different DP per module, identical maps on every trainer,
// a stalled producer, a producer that dies after batch 0 (it stops serving;
// see docs/data.md for why a real kill cannot be tested under mpirun), a bad
// sample. Run with 6 ranks.
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "../data/feed_cases.hpp"
#include "disttrain/comm/mpi_backend.hpp"
#include "mpi_harness.hpp"

using namespace std::chrono_literals;
using disttrain::errc;
using disttrain::mpi_backend;
using disttrain::mpitest::capture;
using disttrain::test::feed_layout;
using disttrain::test::synthetic_parts_source;
using feed = disttrain::sample_feed<mpi_backend, synthetic_parts_source>;
using producer = disttrain::sample_producer<mpi_backend, synthetic_parts_source>;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Consumers 0..C-1 (the layout's roles), producers C..5.
disttrain::producer_ranks_config config_for(const feed_layout& layout, int tag) {
  disttrain::producer_ranks_config cfg;
  const auto nc = static_cast<int>(layout.roles().size());
  for (int r = 0; r < 6; ++r) (r < nc ? cfg.consumers : cfg.producers).push_back(r);
  cfg.tag = tag;
  cfg.timeout = 20000ms;
  return cfg;
}

std::uint64_t hash_of(const disttrain::reorder_result& m) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  for (const auto& s : m.samples) mix(s.id);
  for (auto v : m.cell_begin) mix(v);
  for (auto v : m.cell_samples) mix(v);
  return h;
}

void delivery(const feed_layout& layout, int tag) {
  mpi_backend b(MPI_COMM_WORLD, {30000ms});
  const auto cfg = config_for(layout, tag);
  synthetic_parts_source src;
  const auto me = static_cast<std::size_t>(b.rank());
  const std::uint64_t batches = 4;
  std::vector<std::uint64_t> hashes(batches, 0);
  if (me >= cfg.consumers.size()) {
    producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, batches);
  } else {
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    for (std::uint64_t k = 0; k < batches; ++k) {
      disttrain::reorder_result map;
      const auto problem = disttrain::test::consume_batch(f, layout, me, k, &map);
      if (!problem.empty()) std::fprintf(stderr, "[rank %zu] %s\n", me, problem.c_str());
      MPI_CHECK(problem.empty());
      hashes[k] = hash_of(map);
    }
  }
  std::vector<std::uint64_t> all(6 * batches);
  MPI_Allgather(hashes.data(), static_cast<int>(batches), MPI_UINT64_T, all.data(),
                static_cast<int>(batches), MPI_UINT64_T, MPI_COMM_WORLD);
  for (std::size_t c = 1; c < cfg.consumers.size(); ++c)
    for (std::size_t k = 0; k < batches; ++k) MPI_CHECK(all[c * batches + k] == all[k]);
  b.barrier();
}

void layout_a() { delivery({{2, 1, 1}}, 100); }  // 4 trainers, 2 producers
void layout_b() { delivery({{1, 2, 2}}, 200); }  // 5 trainers, 1 producer

// Layout {2, 1, 1}: producers are ranks 4 and 5. `fault` runs on rank 5.
template <class Fault>
void producer_fault(int tag, Fault fault, errc want_code, std::uint64_t failing_batch) {
  mpi_backend b(MPI_COMM_WORLD, {30000ms});
  const feed_layout layout{{2, 1, 1}};
  auto cfg = config_for(layout, tag);
  cfg.timeout = 1500ms;
  cfg.prefetch = 1;
  synthetic_parts_source src;
  const auto me = static_cast<std::size_t>(b.rank());
  if (me == 5) {
    fault(b, cfg, src);
  } else if (me == 4) {
    const auto e =
        capture([&] { producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 2); });
    MPI_CHECK(e.code() == errc::timeout);  // its trainers gave up: an error, not a hang
  } else {
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = capture([&] {
      for (std::uint64_t k = 0; k < 2; ++k)
        MPI_CHECK(disttrain::test::consume_batch(f, layout, me, k).empty());
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto ids = disttrain::test::synthetic_batch(failing_batch);
    std::string held = "[";
    for (std::size_t i : disttrain::producer_share(ids, failing_batch, {.index = 1, .count = 2}))
      held += (held.size() > 1 ? ", " : "") + std::to_string(ids[i]);
    held += "]";
    if (e.code() != want_code || e.where() != "producer rank 5")
      std::fprintf(stderr, "[rank %zu] got: %s\n", me, e.what());
    MPI_CHECK(e.code() == want_code);
    MPI_CHECK(e.where() == "producer rank 5");
    MPI_CHECK(contains(e.message(),
                       "holds samples " + held + " of batch " + std::to_string(failing_batch)));
    MPI_CHECK(s < 10.0);  // within the timeout (1.5 s per wait), never a hang
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void stalled_producer() {
  producer_fault(
      300,
      [](mpi_backend& b, const disttrain::producer_ranks_config& cfg, synthetic_parts_source& src) {
        std::this_thread::sleep_for(3000ms);  // stalls past the trainers' 1.5 s timeout
        const auto e =
            capture([&] { producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 2); });
        MPI_CHECK(e.code() == errc::timeout);
      },
      errc::timeout, 0);
}

void dead_producer() {
  producer_fault(
      400,
      [](mpi_backend& b, const disttrain::producer_ranks_config& cfg, synthetic_parts_source& src) {
        producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 1);  // then "dies"
      },
      errc::timeout, 1);
}

void bad_sample() {
  mpi_backend b(MPI_COMM_WORLD, {30000ms});
  const feed_layout layout{{2, 1, 1}};
  auto cfg = config_for(layout, 500);
  cfg.timeout = 1500ms;
  synthetic_parts_source src;
  const std::uint64_t bad = disttrain::test::synthetic_batch(1)[3];
  src.bad = {bad};
  const auto me = static_cast<std::size_t>(b.rank());
  const auto ids = disttrain::test::synthetic_batch(1);
  const int holder =
      4 +
      static_cast<int>(disttrain::producer_share(ids, 1, {.index = 1, .count = 2}).front() == 3);
  const auto e = capture([&] {
    if (me >= 4) {
      producer(b, src, cfg, disttrain::test::synthetic_batch).run(0, 2);
      return;
    }
    feed f(b, src, cfg, disttrain::test::synthetic_batch);
    for (std::uint64_t k = 0; k < 2; ++k)
      MPI_CHECK(disttrain::test::consume_batch(f, layout, me, k).empty());
  });
  if (me < 4 || static_cast<int>(me) == holder) {
    MPI_CHECK(e.code() == errc::invalid_argument);
    MPI_CHECK(e.where() == "sample " + std::to_string(bad));
    MPI_CHECK(
        contains(e.message(), "producer rank " + std::to_string(holder) + ": undecodable image"));
  } else {
    MPI_CHECK(e.code() == errc::timeout);  // the other producer: its trainers stopped
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  if (int rc = disttrain::mpitest::skip_unless_ranks(6, "test_mpi_producers")) return rc;
  return disttrain::mpitest::run_all(
      {{"layout enc2/bb1/gen1, 2 producers: parts in the map's order", layout_a},
       {"layout enc1/bb2/gen2, 1 producer: parts in the map's order", layout_b},
       {"stalled producer: timeout naming it and its samples", stalled_producer},
       {"producer dead after batch 0: error naming it and its samples", dead_producer},
       {"bad sample: located error on every trainer and its producer", bad_sample}});
}
