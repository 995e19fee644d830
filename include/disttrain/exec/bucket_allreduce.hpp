#pragma once
/// @file bucket_allreduce.hpp
/// @brief Asynchronous, deterministic sum-allreduce of one gradient bucket over
/// a data-parallel group, split into `start` (post every transfer, return at
/// once) and `finish` (wait, then sum), so the reduction runs while the rank
/// keeps computing.
///
/// Algorithm: every member sends its bucket to every other member and
/// receives theirs; `finish` adds the g contributions **in group order** (the
/// group is the list of ranks in ascending order, as `topology::dp_group`
/// returns it). Every member therefore computes bit-identical sums, so
/// replicas' parameters never drift apart. Traffic is (g-1) n elements each
/// way per member for g members and n elements: fine for the small DP groups
/// of module segments; a ring reduce-scatter/all-gather (2 n (g-1)/g) would
/// need a progress engine and is future work.
///
/// @snippet exec.cpp bucket_allreduce

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief One in-flight bucket reduction (see the file comment).
template <comm_backend B, class T>
requires std::is_arithmetic_v<T>
class bucket_allreduce {
 public:
  /// @brief Posts the sends and receives of `data` over `group` (ascending
  /// ranks including this one) with message tag `tag`. `data` must stay valid
  /// and unmodified until `finish` returns.
  void start(B& b, std::span<T> data, std::span<const int> group, int tag) {
    require(!active_, where(b, tag), "bucket reduction started twice");
    require(!group.empty(), where(b, tag), "empty data-parallel group");
    require(std::is_sorted(group.begin(), group.end()) &&
                std::adjacent_find(group.begin(), group.end()) == group.end(),
            where(b, tag), "group must list distinct ranks in ascending order");
    const auto me = std::find(group.begin(), group.end(), b.rank());
    require(me != group.end(), where(b, tag), "rank ", b.rank(),
            " is not in its data-parallel group");
    data_ = data;
    group_.assign(group.begin(), group.end());
    self_ = static_cast<std::size_t>(me - group.begin());
    tag_ = tag;
    const std::size_t n = data.size();
    scratch_.assign(n * (group.size() - 1), T{});
    requests_.clear();
    requests_.reserve(2 * (group.size() - 1));
    std::size_t slot = 0;
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (i == self_) continue;
      std::span<T> in(scratch_.data() + slot * n, n);
      requests_.push_back(b.irecv(std::as_writable_bytes(in), group[i], tag));
      requests_.push_back(b.isend(std::as_bytes(std::span<const T>(data)), group[i], tag));
      ++slot;
    }
    done_.assign(requests_.size(), 0);
    active_ = true;
  }

  /// @brief Polls the transfers (lets a transport progress); true when all are complete.
  bool test(B& b) {
    if (!active_) return true;
    bool all = true;
    for (std::size_t i = 0; i < requests_.size(); ++i)
      if (!done_[i]) {
        if (b.test(requests_[i]))
          done_[i] = 1;
        else
          all = false;
      }
    return all;
  }

  /// @brief Waits for every transfer (up to `timeout` in all), then overwrites
  /// the bucket with the sum over the group, added in group order.
  void finish(B& b, std::chrono::milliseconds timeout) {
    finish(b, wait_deadline::after(timeout),
           [&b](typename B::request& r, const wait_deadline& d) { detail::wait_until(b, r, d); });
  }
  /// @brief `finish` under deadline `d`, each transfer waited for by
  /// `wait(request, d)` (the executor's waits, which watch for abort notices).
  template <class Wait>
  void finish(B&, const wait_deadline& d, Wait&& wait) {
    require(active_, "bucket_allreduce", "finish without start");
    for (std::size_t i = 0; i < requests_.size(); ++i)
      if (!done_[i]) {
        wait(requests_[i], d);
        done_[i] = 1;
      }
    const std::size_t n = data_.size();
    for (std::size_t k = 0; k < n; ++k) {
      T sum{};
      std::size_t slot = 0;
      for (std::size_t i = 0; i < group_.size(); ++i) {
        if (i == self_) {
          sum += data_[k];
        } else {
          sum += scratch_[slot * n + k];
          ++slot;
        }
      }
      data_[k] = sum;
    }
    requests_.clear();
    active_ = false;
  }
  /// @brief `finish` with the backend's timeout.
  void finish(B& b) { finish(b, b.options().timeout); }

  /// @brief Whether a reduction is in flight.
  [[nodiscard]] bool active() const noexcept { return active_; }
  /// @brief Bytes this rank sends for the reduction.
  [[nodiscard]] std::size_t bytes_sent() const noexcept {
    return group_.empty() ? 0 : data_.size() * sizeof(T) * (group_.size() - 1);
  }

 private:
  static std::string where(const B& b, int tag) {
    return cat("rank ", b.rank(), " bucket tag ", tag);
  }

  std::span<T> data_;
  std::vector<int> group_;
  std::size_t self_ = 0;
  int tag_ = 0;
  std::vector<T> scratch_;
  std::vector<typename B::request> requests_;
  std::vector<char> done_;
  bool active_ = false;
};

}  // namespace disttrain
