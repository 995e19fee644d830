#pragma once
/// @file bounded_queue.hpp
/// @brief A bounded multi-producer multi-consumer queue with backpressure,
/// timeouts and close, the channel between preprocessing producers and trainers.
///
/// @snippet data.cpp bounded_queue

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Bounded FIFO; `push` blocks while full (backpressure), `pop` blocks
/// while empty. Every blocking call takes a timeout and throws
/// `errc::timeout` naming the queue, so a stalled producer or consumer is an
/// error rather than a hang.
template <class T>
class bounded_queue {
 public:
  using duration = std::chrono::steady_clock::duration;

  /// @param capacity maximum items held (>= 1)
  /// @param name     names the queue in errors, e.g. "trainer 3 samples"
  explicit bounded_queue(std::size_t capacity, std::string name = "queue")
      : capacity_(capacity), name_(std::move(name)) {
    require_positive(capacity, name_ + ".capacity");
  }

  bounded_queue(const bounded_queue&) = delete;
  bounded_queue& operator=(const bounded_queue&) = delete;

  /// @brief Appends `value`, waiting up to `timeout` for room.
  /// Throws `errc::timeout` if still full, `errc::invalid_argument` if closed.
  void push(T value, duration timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mutex_);
    if (!not_full_.wait_for(lock, timeout, [&] { return closed_ || items_.size() < capacity_; }))
      fail(errc::timeout, name_, "push waited ", seconds(timeout), " s: queue full (capacity ",
           capacity_, "), consumer not draining");
    if (closed_) fail(errc::invalid_argument, name_, "push on a closed queue");
    items_.push_back(std::move(value));
    not_empty_.notify_one();
  }

  /// @brief Removes the oldest item, waiting up to `timeout`; returns
  /// `std::nullopt` once the queue is closed and drained.
  /// Throws `errc::timeout` if nothing arrives in time.
  [[nodiscard]] std::optional<T> pop(duration timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mutex_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); }))
      fail(errc::timeout, name_, "pop waited ", seconds(timeout),
           " s: no item arrived (producer stalled or dead)");
    if (items_.empty()) return std::nullopt;  // closed and drained
    T v = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return v;
  }

  /// @brief Ends the stream: pending items remain poppable, further pushes fail.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  [[nodiscard]] std::size_t size() const {
    std::lock_guard lock(mutex_);
    return items_.size();
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  static double seconds(duration d) { return std::chrono::duration<double>(d).count(); }

  std::size_t capacity_;
  std::string name_;
  mutable std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace disttrain
