#pragma once
/// @file preprocess_pipeline.hpp
/// @brief Disaggregated data preprocessing: producer threads load, decode,
/// augment and tokenize samples off the training path, hand per-sample
/// metadata to the reorderer, then deliver each trainer exactly its samples in
/// the reorderer's order.
///
/// The flow per global batch `k` (DistTrain §5.1):
///  1. `submit(k, ids)`: producers start preparing batch k at once, while the
///     trainers still run batch k-1 (at most `max_batches_ahead` batches are
///     staged: backpressure on the submitter).
///  2. `metadata(k)`: the trainer waits (exposed data-wait, measured) until
///     every sample of batch k is prepared and gets their metadata, in the
///     order of `ids`, for the reorderer.
///  3. `assign(k, order)`: the reorderer's result, per consumer the ordered
///     sample ids it trains on (a sample may go to several consumers, e.g. an
///     encoder rank and a backbone rank).
///  4. `next(c)`: consumer c receives its samples one by one in that order.
///
/// @snippet data.cpp preprocess_source
/// @snippet data.cpp preprocess_pipeline

#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief A host's sample loader: `load(id)` prepares one sample (must be
/// callable concurrently from several producer threads) and `meta(item)`
/// summarises it for the reorderer.
template <class S>
concept sample_source = requires(const S& s, std::uint64_t id, const typename S::item_type& item) {
  typename S::item_type;
  typename S::meta_type;
  { s.load(id) } -> std::convertible_to<typename S::item_type>;
  { s.meta(item) } -> std::convertible_to<typename S::meta_type>;
};

/// @brief Settings of a `preprocess_pipeline`.
struct preprocess_config {
  std::size_t producers = 2;                 ///< producer threads (stand-ins for CPU nodes)
  std::size_t consumers = 1;                 ///< trainer ranks served
  std::size_t max_batches_ahead = 2;         ///< staged batches before `submit` blocks
  std::chrono::milliseconds timeout{60000};  ///< every wait; a stalled producer -> errc::timeout
};

/// @brief Producers preparing global batches ahead of the trainers; see file docs.
template <sample_source Source>
class preprocess_pipeline {
 public:
  using item_type = typename Source::item_type;
  using meta_type = typename Source::meta_type;

  preprocess_pipeline(const Source& source, preprocess_config cfg) : source_(source), cfg_(cfg) {
    require_positive(cfg_.producers, "preprocess_config.producers");
    require_positive(cfg_.consumers, "preprocess_config.consumers");
    require_positive(cfg_.max_batches_ahead, "preprocess_config.max_batches_ahead");
    require(cfg_.timeout.count() > 0, "preprocess_config.timeout", "must be > 0 ms");
    consumers_.resize(cfg_.consumers);
    workers_.reserve(cfg_.producers);
    for (std::size_t i = 0; i < cfg_.producers; ++i) workers_.emplace_back([this] { produce(); });
  }

  preprocess_pipeline(const preprocess_pipeline&) = delete;
  preprocess_pipeline& operator=(const preprocess_pipeline&) = delete;

  ~preprocess_pipeline() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  /// @brief Starts preparing global batch `batch` (ids must be unique);
  /// blocks while `max_batches_ahead` batches are already staged.
  void submit(std::uint64_t batch, std::vector<std::uint64_t> sample_ids) {
    require(!sample_ids.empty(), "preprocess_pipeline.submit", "empty batch ", batch);
    std::unique_lock lock(mutex_);
    require(!batches_.contains(batch), "preprocess_pipeline.submit", "batch ", batch,
            " submitted twice");
    wait(
        lock, [&] { return batches_.size() < cfg_.max_batches_ahead; }, "submit of batch ", batch,
        ": staging full (", cfg_.max_batches_ahead, " batches), trainers not consuming");
    staged_batch& b = batches_[batch];
    b.ids = std::move(sample_ids);
    b.items.resize(b.ids.size());
    for (std::size_t i = 0; i < b.ids.size(); ++i) {
      auto [it, fresh] = b.index.emplace(b.ids[i], i);
      if (!fresh) {
        const std::uint64_t duplicate = it->first;  // read before erase frees the node
        batches_.erase(batch);
        fail(errc::invalid_argument, "preprocess_pipeline.submit", "sample id ", duplicate,
             " appears twice in batch ", batch);
      }
    }
    for (std::size_t i = 0; i < b.ids.size(); ++i) tasks_.push_back({batch, i});
    cv_.notify_all();
  }

  /// @brief Waits until batch `batch` is fully prepared and returns each
  /// sample's metadata in submission order. The wait is added to the exposed
  /// data-wait time.
  [[nodiscard]] std::vector<meta_type> metadata(std::uint64_t batch) {
    std::unique_lock lock(mutex_);
    staged_batch& b = find(batch);
    timed_wait(
        lock, [&] { return b.done == b.ids.size() || b.failure; }, "metadata of batch ", batch,
        ": ", b.ids.size() - b.done, " of ", b.ids.size(), " samples still unprepared");
    if (b.failure) std::rethrow_exception(b.failure);
    std::vector<meta_type> out;
    out.reserve(b.ids.size());
    for (const auto& item : b.items) out.push_back(source_.meta(*item));
    return out;
  }

  /// @brief Hands each consumer its ordered sample ids for batch `batch`;
  /// every id must belong to the batch and every sample must go somewhere.
  void assign(std::uint64_t batch, const std::vector<std::vector<std::uint64_t>>& order) {
    std::unique_lock lock(mutex_);
    staged_batch& b = find(batch);
    require(order.size() == cfg_.consumers, "preprocess_pipeline.assign", "order has ",
            order.size(), " consumers, pipeline serves ", cfg_.consumers);
    std::vector<std::size_t> uses(b.ids.size(), 0);
    for (std::size_t c = 0; c < order.size(); ++c)
      for (std::uint64_t id : order[c]) {
        auto it = b.index.find(id);
        require(it != b.index.end(), "preprocess_pipeline.assign", "consumer ", c,
                " assigned sample ", id, " not in batch ", batch);
        ++uses[it->second];
      }
    for (std::size_t i = 0; i < uses.size(); ++i)
      require(uses[i] > 0, "preprocess_pipeline.assign", "sample ", b.ids[i], " of batch ", batch,
              " assigned to no consumer");
    b.pending_uses = 0;
    for (std::size_t c = 0; c < order.size(); ++c) {
      for (std::uint64_t id : order[c]) consumers_[c].push_back({batch, b.index.at(id)});
      b.pending_uses += order[c].size();
    }
    cv_.notify_all();
  }

  /// @brief The next sample of consumer `c` in its assigned order. Waits (and
  /// counts the wait as exposed data-wait) until one is assigned and prepared.
  [[nodiscard]] item_type next(std::size_t c) {
    require(c < cfg_.consumers, "preprocess_pipeline.next", "consumer ", c, " out of range (",
            cfg_.consumers, " consumers)");
    std::unique_lock lock(mutex_);
    timed_wait(
        lock, [&] { return !consumers_[c].empty(); }, "consumer ", c, ": no sample assigned");
    // Plain copies, not structured bindings: clang 14 cannot capture bindings in a lambda.
    const std::uint64_t batch = consumers_[c].front().batch;
    const std::size_t index = consumers_[c].front().index;
    consumers_[c].pop_front();
    staged_batch& b = find(batch);
    timed_wait(
        lock, [&] { return b.items[index].has_value() || b.failure; }, "consumer ", c, ": sample ",
        b.ids[index], " of batch ", batch, " not prepared");
    if (b.failure) std::rethrow_exception(b.failure);
    item_type out = *b.items[index];  // a copy: the same sample may feed several consumers
    if (--b.pending_uses == 0) {
      batches_.erase(batch);  // fully delivered: frees a staging slot
      cv_.notify_all();
    }
    return out;
  }

  /// @brief Seconds trainers spent blocked in `metadata`/`next` since the last reset.
  [[nodiscard]] double exposed_wait_seconds() const {
    std::lock_guard lock(mutex_);
    return exposed_wait_;
  }
  void reset_exposed_wait() {
    std::lock_guard lock(mutex_);
    exposed_wait_ = 0.0;
  }

 private:
  struct staged_batch {
    std::vector<std::uint64_t> ids;
    std::map<std::uint64_t, std::size_t> index;  // id -> position
    std::vector<std::optional<item_type>> items;
    std::size_t done = 0;
    std::size_t pending_uses = 0;
    std::exception_ptr failure;
  };
  struct task {
    std::uint64_t batch;
    std::size_t index;
  };

  staged_batch& find(std::uint64_t batch) {
    auto it = batches_.find(batch);
    if (it == batches_.end())
      fail(errc::invalid_argument, "preprocess_pipeline", "batch ", batch,
           " was not submitted or is already delivered");
    return it->second;
  }

  template <class Pred, class... Ts>
  void wait(std::unique_lock<std::mutex>& lock, Pred pred, const Ts&... what) {
    if (!cv_.wait_for(lock, cfg_.timeout, pred))
      fail(errc::timeout, "preprocess_pipeline", what..., " (waited ", cfg_.timeout.count(),
           " ms)");
  }

  template <class Pred, class... Ts>
  void timed_wait(std::unique_lock<std::mutex>& lock, Pred pred, const Ts&... what) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      wait(lock, pred, what...);
    } catch (...) {
      exposed_wait_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      throw;
    }
    exposed_wait_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void produce() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task t = tasks_.front();
      tasks_.pop_front();
      auto pending = batches_.find(t.batch);
      if (pending == batches_.end()) continue;
      const std::uint64_t id = pending->second.ids[t.index];
      lock.unlock();
      std::optional<item_type> item;
      std::exception_ptr failure;
      try {
        item.emplace(source_.load(id));
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      auto it = batches_.find(t.batch);
      if (it == batches_.end()) continue;
      if (failure) {
        if (!it->second.failure) it->second.failure = failure;
      } else {
        it->second.items[t.index] = std::move(item);
      }
      ++it->second.done;
      cv_.notify_all();
    }
  }

  const Source& source_;
  preprocess_config cfg_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::uint64_t, staged_batch> batches_;
  std::deque<task> tasks_;
  std::vector<std::deque<task>> consumers_;
  std::vector<std::thread> workers_;
  double exposed_wait_ = 0.0;
  bool stopping_ = false;
};

}  // namespace disttrain
