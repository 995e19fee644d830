#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "disttrain/data.hpp"
#include "disttrain_catch.hpp"

using namespace std::chrono_literals;
using disttrain::errc;

namespace {
// A sample is a vector of (id-derived) tokens whose length varies by id.
struct synthetic_source {
  using item_type = std::vector<std::uint64_t>;
  using meta_type = std::size_t;
  mutable std::atomic<int> loads{0};
  item_type load(std::uint64_t id) const {
    ++loads;
    return item_type(static_cast<std::size_t>(1 + id % 7), id);
  }
  meta_type meta(const item_type& x) const { return x.size(); }
};

// Blocks in load() until released: a producer that stops delivering.
struct stalled_source {
  using item_type = int;
  using meta_type = int;
  std::atomic<bool>* release;
  item_type load(std::uint64_t) const {
    while (!release->load()) std::this_thread::sleep_for(1ms);
    return 0;
  }
  meta_type meta(const item_type& x) const { return x; }
};

struct failing_source {
  using item_type = int;
  using meta_type = int;
  item_type load(std::uint64_t id) const {
    if (id == 3) throw std::runtime_error("corrupt image");
    return static_cast<int>(id);
  }
  meta_type meta(const item_type& x) const { return x; }
};
}  // namespace

static_assert(disttrain::sample_source<synthetic_source>);
static_assert(!disttrain::sample_source<int>);

TEST_CASE("bounded_queue: FIFO, backpressure timeout, close") {
  disttrain::bounded_queue<int> q(2, "test.q");
  q.push(1);
  q.push(2);
  DISTTRAIN_CHECK_ERROR(q.push(3, 10ms), errc::timeout, "test.q");
  CHECK(q.pop(10ms) == 1);
  q.push(3);
  CHECK(q.pop() == 2);
  CHECK(q.pop() == 3);
  DISTTRAIN_CHECK_ERROR(q.pop(10ms), errc::timeout, "test.q");
  q.close();
  CHECK_FALSE(q.pop(10ms).has_value());
  DISTTRAIN_CHECK_ERROR(q.push(4), errc::invalid_argument, "test.q");
  DISTTRAIN_CHECK_ERROR(disttrain::bounded_queue<int>(0, "zero"), errc::invalid_argument,
                        "zero.capacity");
}

TEST_CASE("preprocess_pipeline delivers each consumer exactly its samples, in order") {
  synthetic_source src;
  disttrain::preprocess_pipeline<synthetic_source> pipe(src, {.producers = 3, .consumers = 3});
  for (std::uint64_t batch = 0; batch < 4; ++batch) {
    std::vector<std::uint64_t> ids;
    for (std::uint64_t i = 0; i < 10; ++i) ids.push_back(batch * 100 + i);
    pipe.submit(batch, ids);
    auto metas = pipe.metadata(batch);
    REQUIRE(metas.size() == ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) CHECK(metas[i] == 1 + ids[i] % 7);
    // consumer 0 and 1 split the batch in reverse order; consumer 2 (say a
    // generator rank) needs the even samples too.
    std::vector<std::vector<std::uint64_t>> order(3);
    for (std::size_t i = ids.size(); i-- > 0;) order[i % 2].push_back(ids[i]);
    for (std::size_t i = 0; i < ids.size(); i += 2) order[2].push_back(ids[i]);
    pipe.assign(batch, order);
    for (std::size_t c = 0; c < 3; ++c)
      for (std::uint64_t id : order[c]) {
        auto item = pipe.next(c);
        REQUIRE_FALSE(item.empty());
        CHECK(item.front() == id);
        CHECK(item.size() == 1 + id % 7);
      }
  }
  CHECK(src.loads.load() == 40);  // each sample prepared once, even when delivered twice
}

TEST_CASE("preprocess_pipeline prepares the next batch while the current one trains") {
  synthetic_source src;
  disttrain::preprocess_pipeline<synthetic_source> pipe(
      src, {.producers = 2, .consumers = 1, .max_batches_ahead = 2});
  pipe.submit(0, {1, 2, 3});
  pipe.submit(1, {4, 5, 6});
  (void)pipe.metadata(0);
  // Batch 1 gets prepared without anyone asking for it.
  for (int spin = 0; spin < 2000 && src.loads.load() < 6; ++spin) std::this_thread::sleep_for(1ms);
  CHECK(src.loads.load() == 6);
  // Staging is full: a third batch is refused (backpressure) until one is consumed.
  disttrain::preprocess_pipeline<synthetic_source> tight(
      src, {.producers = 1, .consumers = 1, .max_batches_ahead = 1, .timeout = 20ms});
  tight.submit(0, {1});
  DISTTRAIN_CHECK_ERROR(tight.submit(1, {2}), errc::timeout, "preprocess_pipeline");
  (void)tight.metadata(0);
  tight.assign(0, {{1}});
  CHECK(tight.next(0).front() == 1);
  CHECK_NOTHROW(tight.submit(1, {2}));
}

TEST_CASE("a producer that stops delivering is a timeout on the trainer, not a hang") {
  std::atomic<bool> release{false};
  stalled_source src{&release};
  {
    disttrain::preprocess_pipeline<stalled_source> pipe(
        src, {.producers = 1, .consumers = 1, .timeout = 30ms});
    pipe.submit(7, {1, 2});
    DISTTRAIN_CHECK_ERROR(pipe.metadata(7), errc::timeout, "preprocess_pipeline");
    CHECK(pipe.exposed_wait_seconds() > 0.0);
    release = true;  // let the stuck producer thread finish so the pipeline can join it
  }
}

TEST_CASE("preprocess_pipeline rejects bad use and propagates producer failures") {
  failing_source src;
  disttrain::preprocess_pipeline<failing_source> pipe(
      src, {.producers = 2, .consumers = 2, .timeout = 2000ms});
  DISTTRAIN_CHECK_ERROR(pipe.submit(0, {}), errc::invalid_argument, "submit");
  DISTTRAIN_CHECK_ERROR(pipe.submit(0, {1, 1}), errc::invalid_argument, "submit");
  pipe.submit(1, {1, 2});
  DISTTRAIN_CHECK_ERROR(pipe.submit(1, {5}), errc::invalid_argument, "submit");
  (void)pipe.metadata(1);
  DISTTRAIN_CHECK_ERROR(pipe.assign(1, {{1}}), errc::invalid_argument,
                        "assign");  // wrong consumer count
  DISTTRAIN_CHECK_ERROR(pipe.assign(1, {{1}, {9}}), errc::invalid_argument,
                        "assign");  // foreign id
  DISTTRAIN_CHECK_ERROR(pipe.assign(1, {{1}, {}}), errc::invalid_argument,
                        "assign");  // sample 2 lost
  DISTTRAIN_CHECK_ERROR(pipe.metadata(42), errc::invalid_argument,
                        "preprocess_pipeline");  // unknown batch
  DISTTRAIN_CHECK_ERROR((void)pipe.next(5), errc::invalid_argument, "next");
  pipe.submit(2, {3, 4});
  CHECK_THROWS_WITH(pipe.metadata(2), "corrupt image");
}
