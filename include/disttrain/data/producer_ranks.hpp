#pragma once
/// @file producer_ranks.hpp
/// @brief Disaggregated preprocessing over a `comm_backend`: producer ranks
/// (CPU processes, on any node of the job) load, decode and tokenize samples
/// and send each trainer rank exactly its module's part of its samples, in the
/// order of the global sample map. `preprocess_pipeline.hpp` is the
/// in-process (threads) variant of the same flow.
///
/// The world is `producers` ∪ `consumers` (disjoint rank sets of one backend;
/// other ranks may exist and are not involved). Every rank is given the same
/// `producer_ranks_config` and the same `batch_sampler` (batch index -> sample
/// ids), so who prepares what needs no message: position i of batch k's ids
/// belongs to `producers[(i + k) % P]` (`producer_share`).
///
/// Per global batch k (batches are served in increasing order):
///  1. each producer prepares its share (`Source::load`, then `encode_part`
///     for every part and `encode_meta`) at most `prefetch` batches ahead of
///     the oldest batch not yet delivered (backpressure: it serves batch k
///     before preparing batch k + prefetch), so it prepares k+1.. while the
///     trainers train k;
///  2. it sends its share's metadata (id, meta, byte size of every part) once
///     to every consumer; `sample_feed::metadata(k)` gathers them and returns
///     the records sorted by id, so every trainer holds the same batch and
///     computes the same sample map with a deterministic reorderer (no
///     broadcast; `tests/data/test_producer_ranks.cpp` checks the maps are
///     identical on every trainer);
///  3. each consumer sends every producer its ordered list of (sample, part)
///     requests for batch k (`sample_feed::request`, possibly empty), built
///     from the map with `data/sample_requests.hpp`;
///  4. each producer sends each requested part straight to the requesting
///     rank, in that rank's order; `sample_feed::receive(k)` returns them in
///     request order. Part sizes are known from the metadata, so every receive
///     is posted with its exact size.
///
/// Faults: every wait has the config's timeout. A producer that dies or stalls
/// gives each waiting consumer a `disttrain::error` (the backend's code:
/// `errc::timeout` or `errc::comm_error`) whose `where()` is
/// `"producer rank P"` and whose message lists the samples of the batch it
/// held. A sample whose `load` throws (undecodable image, empty text) is
/// handled by `bad_sample_policy`: `fail` (default) makes `metadata(k)` throw
/// `errc::invalid_argument` at `"sample <id>"` naming the producer and the
/// loader's reason, and the producer's `run` throws the same error once it
/// reaches batch k; `skip` drops the sample from the batch on every rank and
/// reports it in `batch_metadata::skipped`.
///
/// @snippet data.cpp producer_ranks

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/data/preprocess_pipeline.hpp"
#include "disttrain/data/sample_requests.hpp"

namespace disttrain {

/// @brief A `sample_source` whose prepared samples can travel between ranks:
/// `parts()` parts per sample (e.g. 0 = encoder pixels/patches, 1 = backbone
/// token ids, 2 = generator targets), `encode_part(item, p, out)` appends part
/// p's bytes to `out`, `encode_meta` / `decode_meta` carry the metadata the
/// reorderer needs. Trainers hold a source object too, only for `parts()` and
/// `decode_meta`.
template <class S>
concept part_source = sample_source<S> &&
    requires(const S& s, const typename S::item_type& item, const typename S::meta_type& meta,
             std::size_t part, std::vector<std::byte>& out, std::span<const std::byte> bytes) {
  { s.parts() } -> std::convertible_to<std::size_t>;
  { s.encode_part(item, part, out) } -> std::same_as<void>;
  { s.encode_meta(meta, out) } -> std::same_as<void>;
  { s.decode_meta(bytes) } -> std::convertible_to<typename S::meta_type>;
};

/// @brief What to do with a sample whose `load` throws (see the file docs).
enum class bad_sample_policy {
  fail,  ///< every trainer's `metadata(k)` throws, naming the sample, producer and reason
  skip,  ///< the sample leaves the batch on every rank; listed in `batch_metadata::skipped`
};

/// @brief The sample ids of global batch k; must be the same function on every
/// rank (e.g. a seeded sampler), ids unique within a batch.
using batch_sampler = std::function<std::vector<std::uint64_t>(std::uint64_t batch)>;

/// @brief Settings shared by every producer and consumer rank of one feed.
///
/// @snippet data.cpp producer_ranks_config
struct producer_ranks_config {
  std::vector<int> producers;  ///< ranks that prepare samples (non-empty, disjoint from consumers)
  std::vector<int> consumers;  ///< trainer ranks that receive metadata and samples (non-empty)
  std::size_t prefetch = 2;    ///< batches a producer prepares ahead of the oldest undelivered
  std::chrono::milliseconds timeout{60000};  ///< deadline of every wait, on both sides
  bad_sample_policy on_bad_sample = bad_sample_policy::fail;
  int tag = 7000;  ///< first of the 5 consecutive message tags the feed uses
};

/// @brief One sample's metadata as every trainer receives it.
template <class Meta>
struct sample_record {
  std::uint64_t id = 0;                   ///< sample id
  int producer = -1;                      ///< rank that prepared it
  Meta meta{};                            ///< `Source::meta` of the prepared sample
  std::vector<std::uint64_t> part_bytes;  ///< byte size of each part
};

/// @brief A sample dropped under `bad_sample_policy::skip`.
struct skipped_sample {
  std::uint64_t id = 0;
  int producer = -1;
  std::string reason;  ///< what `load` threw
};

/// @brief One global batch's metadata: identical on every consumer rank.
template <class Meta>
struct batch_metadata {
  std::uint64_t batch = 0;
  std::vector<sample_record<Meta>> samples;  ///< sorted by id
  std::vector<skipped_sample> skipped;       ///< sorted by id
};

/// @brief One received part.
struct received_part {
  std::uint64_t id = 0;
  std::uint32_t part = 0;
  int producer = -1;
  std::vector<std::byte> bytes;
};

/// @brief Producer `index` of `count` producers (named fields: two adjacent
/// counts would be easy to swap).
struct producer_slot {
  std::size_t index = 0;
  std::size_t count = 1;
};

/// @brief Positions in `ids` (batch `batch`'s sample ids) of producer
/// `who.index`'s share: position i belongs to producer `(i + batch) % who.count`.
[[nodiscard]] inline std::vector<std::size_t> producer_share(std::span<const std::uint64_t> ids,
                                                             std::uint64_t batch,
                                                             producer_slot who) {
  const std::size_t n_ids = ids.size();
  require_positive(who.count, "producer_ranks_config.producers");
  require(who.index < who.count, "producer_share.index", "producer ", who.index,
          " out of range: ", who.count, " producers");
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < n_ids; ++i)
    if ((i + batch % who.count) % who.count == who.index) out.push_back(i);
  return out;
}

/// @brief The producer rank's side: prepares its share of each batch and
/// serves the consumers' requests (see the file docs).
template <comm_backend B, part_source S>
class sample_producer {
 public:
  using item_type = typename S::item_type;
  using meta_type = typename S::meta_type;

  /// @brief Validates `cfg` against the backend; this rank must be a producer.
  sample_producer(B& backend, const S& source, producer_ranks_config cfg, batch_sampler sampler);

  /// @brief Prepares and serves batches `first`, ..., `first + count - 1`;
  /// returns when every consumer has received its parts of the last one.
  void run(std::uint64_t first, std::uint64_t count);

  /// @brief Seconds spent in `load`/encode (the CPU work) during `run`.
  [[nodiscard]] double prepare_seconds() const noexcept { return prepare_s_; }
  /// @brief Samples prepared (bad ones included) during `run`.
  [[nodiscard]] std::uint64_t samples_prepared() const noexcept { return prepared_; }
  /// @brief Most batches held prepared-but-undelivered at once (<= prefetch).
  [[nodiscard]] std::size_t max_staged() const noexcept { return max_staged_; }

 private:
  struct staged;
  void prepare(std::uint64_t batch);
  void serve(staged& st);

  B& b_;
  const S& source_;
  producer_ranks_config cfg_;
  batch_sampler sampler_;
  std::size_t index_ = 0;  // position of this rank in cfg_.producers
  std::deque<staged> staged_;
  double prepare_s_ = 0.0;
  std::uint64_t prepared_ = 0;
  std::size_t max_staged_ = 0;
};

/// @brief The consumer (trainer) rank's side: per batch, in increasing
/// order, `metadata` -> `request` -> `receive` (see the file docs). Every
/// consumer must call `request` for every batch, with an empty list if it
/// needs nothing (producers wait for every consumer's list).
template <comm_backend B, part_source S>
class sample_feed {
 public:
  using meta_type = typename S::meta_type;

  /// @brief Validates `cfg` against the backend; this rank must be a consumer.
  sample_feed(B& backend, const S& source, producer_ranks_config cfg, batch_sampler sampler);

  /// @brief Waits for every producer's metadata of `batch` (the next batch)
  /// and returns it, sorted by id; the same on every consumer. The wait counts
  /// as exposed data wait.
  const batch_metadata<meta_type>& metadata(std::uint64_t batch);

  /// @brief Sends each producer this rank's ordered requests for `batch`
  /// (after `metadata(batch)`) and posts the receives. Ids must be in the
  /// batch and not skipped, parts < `parts()`; a (sample, part) at most once.
  void request(std::uint64_t batch, std::span<const sample_request> order);

  /// @brief Waits for the parts requested for `batch`; returns them in
  /// request order. The wait counts as exposed data wait.
  [[nodiscard]] std::vector<received_part> receive(std::uint64_t batch);

  /// @brief `request` then `receive`.
  [[nodiscard]] std::vector<received_part> fetch(std::uint64_t batch,
                                                 std::span<const sample_request> order) {
    request(batch, order);
    return receive(batch);
  }

  /// @brief Seconds blocked in `metadata`/`receive` since the last reset.
  [[nodiscard]] double exposed_wait_seconds() const noexcept { return wait_s_; }
  void reset_exposed_wait() noexcept { wait_s_ = 0.0; }

 private:
  enum class phase { metadata, request, receive };
  struct pending_part {
    std::size_t producer_index;
    received_part part;
    typename B::request req;
  };
  void expect(std::uint64_t batch, phase ph, const char* call) const;

  B& b_;
  const S& source_;
  producer_ranks_config cfg_;
  batch_sampler sampler_;
  std::uint64_t next_ = 0;  // batch in progress
  bool started_ = false;    // false until the first `metadata`: any first batch is accepted
  phase phase_ = phase::metadata;
  batch_metadata<meta_type> current_;
  std::vector<std::vector<std::uint64_t>> held_;  // per producer: ids of the current batch
  std::map<std::uint64_t, std::size_t> index_;    // id -> position in current_.samples
  std::vector<std::pair<std::size_t, typename B::request>> request_sends_;  // (producer, send)
  std::vector<std::shared_ptr<const std::vector<std::byte>>> request_bufs_;
  std::vector<pending_part> pending_;
  double wait_s_ = 0.0;
};

}  // namespace disttrain

#include "disttrain/data/detail/producer_ranks.inl"
