// The examples of the data part (disttrain/data/*.hpp): see snippets.hpp.
// The JPEG ones (image.hpp, jpeg.hpp) are in data_jpeg.cpp.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"
#include "disttrain/data.hpp"
#include "disttrain/data/producer_ranks.hpp"
#include "disttrain/data/sample_requests.hpp"
#include "disttrain/data/tokenize.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "local_ranks.hpp"
#include "snippets.hpp"

namespace {

using namespace std::chrono_literals;
using snippets::check;

void bounded_queue() {
  //! [bounded_queue]
  disttrain::bounded_queue<int> q(4, "rank3.samples");
  q.push(1);                                              // blocks while full
  std::optional<int> v = q.pop(std::chrono::seconds(5));  // errc::timeout after 5 s of silence
  q.close();  // pop() on an empty closed queue returns std::nullopt
  //! [bounded_queue]
  check(v == 1 && !q.pop(std::chrono::seconds(1)).has_value(), "pop, then closed and drained");
}

//! [preprocess_source]
struct my_source {
  using item_type = std::vector<float>;
  using meta_type = std::size_t;           // e.g. tokens of the sample
  item_type load(std::uint64_t id) const;  // thread-safe
  meta_type meta(const item_type& x) const { return x.size(); }
};
//! [preprocess_source]
my_source::item_type my_source::load(std::uint64_t id) const {
  return item_type(static_cast<std::size_t>(id % 7 + 1), 1.0f);
}

void preprocess_pipeline() {
  //! [preprocess_pipeline]
  my_source src;
  disttrain::preprocess_pipeline<my_source> pipe(src, {.producers = 4, .consumers = 2});
  pipe.submit(0, {10, 11, 12});
  auto metas = pipe.metadata(0);  // feed the reorderer
  pipe.assign(0, {{12, 10}, {11}});
  auto first = pipe.next(0);  // sample 12
  //! [preprocess_pipeline]
  check(metas == std::vector<std::size_t>{4, 5, 6}, "metadata in the order of the ids");
  check(first.size() == 12 % 7 + 1, "consumer 0 gets sample 12 first");
  check(pipe.next(0).size() == 10 % 7 + 1 && pipe.next(1).size() == 11 % 7 + 1, "the rest");
}

// The feed examples: 2 producer ranks (4, 5) and 4 trainers (encoder
// replicas on ranks 0 and 1, backbone replicas on ranks 2 and 3); a sample
// has 2 parts (0: 4 x (id % 3 + 1) pixel bytes, 1: its token ids), its
// metadata is its token count.
struct two_part_source {
  using item_type = std::vector<std::vector<std::byte>>;
  using meta_type = std::uint32_t;
  item_type load(std::uint64_t id) const {
    return {std::vector<std::byte>(4 * (id % 3 + 1), std::byte{1}),
            std::vector<std::byte>(8 * (id % 5 + 1), std::byte{2})};
  }
  meta_type meta(const item_type& x) const { return static_cast<meta_type>(x[1].size() / 8); }
  std::size_t parts() const { return 2; }
  mutable std::atomic<int> encoded{0};  // parts sent
  void encode_part(const item_type& x, std::size_t p, std::vector<std::byte>& out) const {
    ++encoded;
    out.insert(out.end(), x[p].begin(), x[p].end());
  }
  void encode_meta(const meta_type& m, std::vector<std::byte>& out) const {
    const auto b = std::as_bytes(std::span(&m, 1));
    out.insert(out.end(), b.begin(), b.end());
  }
  meta_type decode_meta(std::span<const std::byte> b) const {
    meta_type m = 0;
    std::memcpy(&m, b.data(), sizeof m);
    return m;
  }
};

// Batch k: 8 sample ids from 100 k.
std::vector<std::uint64_t> ids_of_batch(std::uint64_t k) {
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = 0; i < 8; ++i) ids.push_back(100 * k + i);
  return ids;
}

// Every trainer's reorderer input: one cost per module from the metadata.
std::vector<disttrain::sample_meta> costs_of(
    const disttrain::batch_metadata<two_part_source::meta_type>& md) {
  std::vector<disttrain::sample_meta> out;
  for (const auto& rec : md.samples) {
    disttrain::sample_meta m;
    m.id = rec.id;
    m.cost[0] = 1.0;
    m.cost[1] = static_cast<double>(rec.meta);
    out.push_back(m);
  }
  return out;
}

disttrain::reorder_options feed_options() {
  disttrain::reorder_options o;
  o.modules = {{"encoder", 2}, {"backbone", 2}};
  o.microbatches = 2;
  return o;
}

// Runs body(rank's endpoint) for ranks 0..5 on their own threads.
void run_feed_world(const std::function<void(disttrain::local_backend&)>& body) {
  snippets::run_ranks(6, body);
}

void producer_ranks() {
  const two_part_source source;
  run_feed_world([&](disttrain::local_backend& backend) {
    const bool is_producer = backend.rank() >= 4;
    const std::uint64_t batches = 2;
    disttrain::reorderer<> reorderer(feed_options());
    const std::size_t my_module = backend.rank() < 2 ? 0 : 1;
    const std::size_t my_replica = static_cast<std::size_t>(backend.rank() % 2);
    const std::uint32_t my_part = static_cast<std::uint32_t>(my_module);
    //! [producer_ranks]
    disttrain::producer_ranks_config cfg;
    cfg.producers = {4, 5};
    cfg.consumers = {0, 1, 2, 3};
    auto sampler = [](std::uint64_t k) { return ids_of_batch(k); };  // same on every rank
    if (is_producer) {
      disttrain::sample_producer prod(backend, source, cfg, sampler);
      prod.run(0, batches);
    } else {
      disttrain::sample_feed feed(backend, source, cfg, sampler);
      for (std::uint64_t k = 0; k < batches; ++k) {
        const auto& md = feed.metadata(k);          // same on every trainer
        auto map = reorderer.assign(costs_of(md));  // same on every trainer
        feed.request(k, disttrain::requests_for(map, my_module, my_replica, std::array{my_part}));
        auto parts = feed.receive(k);  // my samples, in the map's order
      }
    }
    //! [producer_ranks]
  });
  check(source.encoded == 2 * 8 * 2, "both batches' samples were sent to both modules");
}

void producer_ranks_config() {
  //! [producer_ranks_config]
  disttrain::producer_ranks_config cfg;
  cfg.producers = {2};     // rank 2 prepares
  cfg.consumers = {0, 1};  // ranks 0 and 1 train
  cfg.prefetch = 2;
  //! [producer_ranks_config]
  check(cfg.producers.size() == 1 && cfg.consumers.size() == 2, "producer_ranks_config");
}

void sample_requests() {
  const two_part_source source;
  std::array<std::size_t, 6> received{};
  run_feed_world([&](disttrain::local_backend& backend) {
    disttrain::producer_ranks_config cfg;
    cfg.producers = {4, 5};
    cfg.consumers = {0, 1, 2, 3};
    if (backend.rank() >= 4) {
      disttrain::sample_producer prod(backend, source, cfg, ids_of_batch);
      prod.run(0, 1);
      return;
    }
    disttrain::sample_feed feed(backend, source, cfg, ids_of_batch);
    disttrain::reorderer<> reorderer(feed_options());
    const std::uint64_t k = 0;
    const auto costs = costs_of(feed.metadata(k));
    const auto replica = static_cast<std::size_t>(backend.rank() % 2);
    if (backend.rank() < 2) {  // the encoder replicas ask for their pixels
      auto map = reorderer.assign(costs);
      feed.request(k, disttrain::requests_for(map, 0, replica, std::array<std::uint32_t, 1>{0}));
    } else {
      //! [sample_requests]
      auto map = reorderer.assign(costs);  // identical on every trainer
      auto mine = disttrain::requests_for(map, 1, replica, std::array<std::uint32_t, 1>{1});
      feed.request(k, mine);  // token ids of backbone replica `replica`
      //! [sample_requests]
    }
    received[static_cast<std::size_t>(backend.rank())] = feed.receive(k).size();
  });
  check(received[2] + received[3] == 8, "the backbone replicas received the batch's token ids");
}

void tokenize() {
  //! [tokenize]
  disttrain::hash_tokenizer tok({.vocab = 32000, .max_tokens = 512});
  std::vector<std::int32_t> ids = tok.encode("A cat, on a mat.", "sample 7.text");
  // ids.front() == tok.bos, ids.back() == tok.eos
  //! [tokenize]
  check(ids.front() == tok.bos && ids.back() == tok.eos, "BOS ... EOS");
  check(ids.size() == 2 + 7, "7 tokens: a cat , on a mat .");
}

}  // namespace

int main() {
  snippets::runner r("data");
  r.run("bounded_queue", bounded_queue);
  r.run("preprocess_pipeline", preprocess_pipeline);
  r.run("producer_ranks", producer_ranks);
  r.run("producer_ranks_config", producer_ranks_config);
  r.run("sample_requests", sample_requests);
  r.run("tokenize", tokenize);
  return r.finish();
}
