#pragma once
/// @file buffer.hpp
/// @brief Communication buffers: a non-owning, trivially copyable `buffer_ref`
/// and an owning `buffer_pool` that recycles staging buffers by size class.
///
/// Transfers of contiguous slices go straight from/to the caller's buffers
/// (zero copy); only non-contiguous messages are packed into pool buffers.
///
/// @snippet comm.cpp buffer_file

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Non-owning view of bytes (host or device memory): a pointer and a
/// size, trivially copyable so it can be passed to kernels and threads.
///
/// @snippet comm.cpp buffer_ref
struct buffer_ref {
  std::byte* data = nullptr;
  std::size_t size = 0;

  /// @brief View of a span of trivially copyable elements.
  template <class T>
  requires std::is_trivially_copyable_v<T>
  [[nodiscard]] static buffer_ref of(std::span<T> s) noexcept {
    return {reinterpret_cast<std::byte*>(s.data()), s.size_bytes()};
  }
  /// @brief Bytes [offset, offset + count); throws if out of range.
  [[nodiscard]] buffer_ref subref(std::size_t offset, std::size_t count) const {
    require(offset <= size && count <= size - offset, "buffer_ref.subref", "range of ", count,
            " bytes at offset ", offset, " outside ", size, " bytes");
    return {data + offset, count};
  }
  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data, size}; }
  [[nodiscard]] std::span<const std::byte> cspan() const noexcept { return {data, size}; }
};
static_assert(std::is_trivially_copyable_v<buffer_ref>);

/// @brief Allocator of raw host memory for `basic_buffer_pool` (64-byte aligned).
struct host_allocator {
  static constexpr std::size_t alignment = 64;
  [[nodiscard]] std::byte* allocate(std::size_t bytes) const {
    return static_cast<std::byte*>(::operator new (bytes, std::align_val_t{alignment}));
  }
  void deallocate(std::byte* p, std::size_t /*bytes*/) const noexcept {
    ::operator delete (p, std::align_val_t{alignment});
  }
};

/// @brief Requirements on a pool allocator (host: `host_allocator`; device:
/// `device_allocator` in nccl_backend.hpp).
template <class A>
concept buffer_allocator = requires(const A& a, std::byte* p, std::size_t n) {
  { a.allocate(n) } -> std::same_as<std::byte*>;
  { a.deallocate(p, n) }
  noexcept;
};

/// @brief Counters of a pool.
struct buffer_pool_stats {
  std::size_t allocations = 0;  ///< fresh allocations made
  std::size_t reuses = 0;       ///< acquisitions served from the free lists
  std::size_t bytes_held = 0;   ///< bytes owned (in use + free)
};

/// @brief Owning pool of staging buffers; sizes are rounded up to a power of
/// two (>= 4 KiB) and freed buffers are kept for reuse until `trim()` or
/// destruction. Thread-safe. The pool must outlive its leases.
template <buffer_allocator Alloc = host_allocator>
class basic_buffer_pool {
 public:
  /// @brief RAII lease of one buffer; returns it to the pool on destruction.
  class lease {
   public:
    lease() = default;
    lease(lease&& o) noexcept
        : pool_(std::exchange(o.pool_, nullptr)),
          ref_(std::exchange(o.ref_, {})),
          capacity_(o.capacity_),
          own_(std::move(o.own_)) {
      o.own_.reset();
    }
    lease& operator=(lease&& o) noexcept {
      if (this != &o) {
        reset();
        pool_ = std::exchange(o.pool_, nullptr);
        ref_ = std::exchange(o.ref_, {});
        capacity_ = o.capacity_;
        own_ = std::move(o.own_);
        o.own_.reset();
      }
      return *this;
    }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease() { reset(); }
    /// @brief The requested bytes (the capacity may be larger).
    [[nodiscard]] buffer_ref ref() const noexcept { return ref_; }
    [[nodiscard]] std::byte* data() const noexcept { return ref_.data; }
    [[nodiscard]] std::size_t size() const noexcept { return ref_.size; }
    [[nodiscard]] std::span<std::byte> span() const noexcept { return ref_.span(); }
    /// @brief Returns the buffer to the pool now (a detached lease frees it).
    void reset() noexcept {
      if (pool_ != nullptr) pool_->give_back(ref_.data, capacity_);
      if (own_ && ref_.data != nullptr) own_->deallocate(ref_.data, capacity_);
      pool_ = nullptr;
      own_.reset();
      ref_ = {};
    }
    /// @brief Takes the buffer out of the pool: the lease owns it from now on
    /// and frees it itself, so it may outlive the pool (used when a backend
    /// must keep a send buffer that the transport may still read).
    void detach() noexcept {
      if (pool_ == nullptr) return;
      own_.emplace(pool_->alloc_);
      pool_->forget(capacity_);
      pool_ = nullptr;
    }

   private:
    friend class basic_buffer_pool;
    lease(basic_buffer_pool* p, buffer_ref r, std::size_t cap)
        : pool_(p), ref_(r), capacity_(cap) {}
    basic_buffer_pool* pool_ = nullptr;
    buffer_ref ref_;
    std::size_t capacity_ = 0;
    std::optional<Alloc> own_;  // set once detached from the pool
  };

  explicit basic_buffer_pool(Alloc alloc = {}) : alloc_(std::move(alloc)) {}
  basic_buffer_pool(const basic_buffer_pool&) = delete;
  basic_buffer_pool& operator=(const basic_buffer_pool&) = delete;
  ~basic_buffer_pool() { trim(); }

  /// @brief A buffer of at least `bytes` (0 gives an empty lease).
  [[nodiscard]] lease acquire(std::size_t bytes) {
    if (bytes == 0) return lease(this, buffer_ref{}, 0);
    const std::size_t cap = size_class(bytes);
    std::lock_guard<std::mutex> lk(m_);
    auto it = free_.find(cap);
    if (it != free_.end() && !it->second.empty()) {
      std::byte* p = it->second.back();
      it->second.pop_back();
      ++stats_.reuses;
      return lease(this, buffer_ref{p, bytes}, cap);
    }
    std::byte* p = alloc_.allocate(cap);
    ++stats_.allocations;
    stats_.bytes_held += cap;
    return lease(this, buffer_ref{p, bytes}, cap);
  }
  /// @brief Frees every buffer not currently leased.
  void trim() noexcept {
    std::lock_guard<std::mutex> lk(m_);
    for (auto& [cap, v] : free_) {
      for (std::byte* p : v) alloc_.deallocate(p, cap);
      stats_.bytes_held -= cap * v.size();
      v.clear();
    }
  }
  [[nodiscard]] buffer_pool_stats stats() const {
    std::lock_guard<std::mutex> lk(m_);
    return stats_;
  }
  /// @brief The capacity an acquisition of `bytes` receives.
  [[nodiscard]] static std::size_t size_class(std::size_t bytes) {
    require(bytes <= (std::size_t{1} << 62), "buffer_pool.acquire", "request of ", bytes,
            " bytes too large");
    std::size_t c = 4096;
    while (c < bytes) c <<= 1;
    return c;
  }

 private:
  void forget(std::size_t cap) noexcept {
    std::lock_guard<std::mutex> lk(m_);
    stats_.bytes_held -= cap;
  }
  void give_back(std::byte* p, std::size_t cap) noexcept {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lk(m_);
    try {
      free_[cap].push_back(p);
    } catch (...) {  // out of memory while recording: free it instead
      alloc_.deallocate(p, cap);
      stats_.bytes_held -= cap;
    }
  }

  Alloc alloc_;
  mutable std::mutex m_;
  std::map<std::size_t, std::vector<std::byte*>> free_;
  buffer_pool_stats stats_;
};

/// @brief The host staging pool used by the local and MPI backends.
using buffer_pool = basic_buffer_pool<host_allocator>;

}  // namespace disttrain
