#pragma once
/// @file local_backend.hpp
/// @brief In-process backend: the ranks are threads sharing one `local_world`.
///
/// Used by tests, examples and single-process runs. Transfers are rendezvous:
/// a send and its matching receive (same source, destination and tag; FIFO)
/// meet in the destination's mailbox and the thread that completes the match
/// copies the bytes once, straight from the send buffer into the receive
/// buffer (no intermediate copy). Buffers must stay valid until the request
/// completes; destroying an incomplete request cancels it if it has not been
/// matched yet (otherwise waits for the copy to finish).
///
/// Faults: every wait has a deadline (`comm_options::timeout`); a peer that
/// never posts the matching operation yields `errc::timeout`; a peer marked
/// dead with `local_world::mark_dead` fails its pending and future transfers
/// with `errc::comm_error`; a size mismatch fails both sides with
/// `errc::comm_error` naming both sizes.
///
/// @code
/// disttrain::local_world world(2);
/// std::thread t([&] {
///   auto b = world.endpoint(1);
///   std::vector<std::byte> in(16);
///   b.wait(b.irecv(in, 0, 5));
/// });
/// auto b = world.endpoint(0);
/// std::vector<std::byte> out(16);
/// b.wait(b.isend(out, 1, 5));
/// t.join();
/// @endcode

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/detail/p2p_collectives.hpp"
#include "disttrain/core/error.hpp"

namespace disttrain {

namespace detail {

/// One posted send or receive of the local backend.
struct local_op {
  enum state_t : int { pending = 0, matched = 1, done = 2, failed = 3, cancelled = 4 };
  transfer_info info;
  const std::byte* src = nullptr;  // send side
  std::byte* dst = nullptr;        // receive side
  std::atomic<int> state{pending};  // pending -> matched only under the mailbox lock
  std::mutex m;
  std::condition_variable cv;
  errc code = errc::comm_error;
  std::string where;
  std::string message;

  void finish(int st) {
    {
      std::lock_guard<std::mutex> lk(m);
      state.store(st);
    }
    cv.notify_all();
  }
  void fail_with(errc c, std::string w, std::string msg) {
    code = c;
    where = std::move(w);
    message = std::move(msg);
    finish(failed);
  }
};

/// Pending operations addressed to one destination rank, keyed by (source, tag).
struct local_mailbox {
  std::mutex m;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<local_op>>> sends;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<local_op>>> recvs;
};

}  // namespace detail

class local_backend;

/// @brief The shared state of an in-process world of `size` ranks; hands out
/// one `local_backend` endpoint per rank (each used by one thread).
///
/// @code
/// disttrain::local_world world(4, {std::chrono::milliseconds(500)});
/// auto ep = world.endpoint(2);  // ep.rank() == 2, ep.size() == 4
/// @endcode
class local_world {
 public:
  explicit local_world(int size, comm_options opts = {}) : opts_(opts) {
    detail::require_positive(size, "local_world.size");
    detail::require(opts.timeout.count() >= 0, "local_world.timeout", "must be >= 0 ms, got ",
                    opts.timeout.count());
    boxes_.reserve(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) boxes_.push_back(std::make_unique<detail::local_mailbox>());
    dead_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) dead_[static_cast<std::size_t>(i)].store(false);
  }
  local_world(const local_world&) = delete;
  local_world& operator=(const local_world&) = delete;

  /// @brief Number of ranks.
  [[nodiscard]] int size() const noexcept { return static_cast<int>(boxes_.size()); }
  /// @brief Default options of the endpoints.
  [[nodiscard]] const comm_options& options() const noexcept { return opts_; }
  /// @brief The endpoint of `rank` (the world must outlive it).
  [[nodiscard]] local_backend endpoint(int rank);
  /// @brief The endpoint of `rank` with its own options (e.g. a shorter timeout).
  [[nodiscard]] local_backend endpoint(int rank, comm_options opts);

  /// @brief Declares `rank` dead: its pending transfers and every later one
  /// that involves it fail with `errc::comm_error` (simulates a crashed peer).
  void mark_dead(int rank) {
    check_rank(rank, "local_world.mark_dead");
    dead_[static_cast<std::size_t>(rank)].store(true);
    std::vector<std::shared_ptr<detail::local_op>> victims;
    for (int d = 0; d < size(); ++d) {
      auto& box = *boxes_[static_cast<std::size_t>(d)];
      std::lock_guard<std::mutex> lk(box.m);
      for (auto* q : {&box.sends, &box.recvs}) {
        for (auto it = q->begin(); it != q->end();) {
          auto& dq = it->second;
          for (auto o = dq.begin(); o != dq.end();) {
            if ((*o)->info.self == rank || (*o)->info.peer == rank) {
              victims.push_back(*o);
              o = dq.erase(o);
            } else {
              ++o;
            }
          }
          it = dq.empty() ? q->erase(it) : std::next(it);
        }
      }
    }
    for (auto& v : victims) v->fail_with(errc::comm_error, v->info.where(), dead_message(v->info, rank));
  }
  /// @brief Whether `rank` was marked dead.
  [[nodiscard]] bool is_dead(int rank) const {
    check_rank(rank, "local_world.is_dead");
    return dead_[static_cast<std::size_t>(rank)].load();
  }

 private:
  friend class local_backend;

  void check_rank(int r, std::string_view where) const {
    detail::require(r >= 0 && r < size(), where, "rank ", r, " out of [0, ", size(), ")");
  }
  static std::string dead_message(const transfer_info& t, int dead) {
    return detail::cat(t.what(), " failed: rank ", dead, " is dead");
  }

  // Posts `op` (a send when op->info.is_send) and matches it if possible.
  void post(const std::shared_ptr<detail::local_op>& op) {
    const transfer_info& t = op->info;
    const int src = t.is_send ? t.self : t.peer;
    const int dst = t.is_send ? t.peer : t.self;
    const int dead = dead_[static_cast<std::size_t>(t.peer)].load()   ? t.peer
                     : dead_[static_cast<std::size_t>(t.self)].load() ? t.self
                                                                       : -1;
    if (dead >= 0) {
      op->fail_with(errc::comm_error, t.where(), dead_message(t, dead));
      return;
    }
    auto& box = *boxes_[static_cast<std::size_t>(dst)];
    std::shared_ptr<detail::local_op> other;
    {
      std::lock_guard<std::mutex> lk(box.m);
      auto& opposite = t.is_send ? box.recvs : box.sends;
      auto it = opposite.find({src, t.tag});
      if (it != opposite.end() && !it->second.empty()) {
        other = std::move(it->second.front());
        it->second.pop_front();
        // Empty queues are kept (no allocation churn on the hot path) unless
        // many (source, tag) keys accumulate.
        if (it->second.empty() && opposite.size() > max_idle_keys) opposite.erase(it);
        other->state.store(detail::local_op::matched);
        op->state.store(detail::local_op::matched);
      } else {
        (t.is_send ? box.sends : box.recvs)[{src, t.tag}].push_back(op);
        return;
      }
    }
    auto& snd = t.is_send ? op : other;
    auto& rcv = t.is_send ? other : op;
    complete(*snd, *rcv);
  }

  static void complete(detail::local_op& snd, detail::local_op& rcv) {
    if (snd.info.bytes != rcv.info.bytes) {
      const std::string msg = detail::cat("size mismatch: rank ", snd.info.self, " sends ", snd.info.bytes,
                                          " bytes but rank ", rcv.info.self, " posted a receive of ",
                                          rcv.info.bytes, " bytes (tag ", snd.info.tag, ")");
      snd.fail_with(errc::comm_error, snd.info.where(), msg);
      rcv.fail_with(errc::comm_error, rcv.info.where(), msg);
      return;
    }
    if (snd.info.bytes > 0) std::memcpy(rcv.dst, snd.src, snd.info.bytes);
    rcv.finish(detail::local_op::done);
    snd.finish(detail::local_op::done);
  }

  // Removes `op` from its mailbox if still unmatched; true if cancelled.
  bool try_cancel(const std::shared_ptr<detail::local_op>& op) {
    const transfer_info& t = op->info;
    const int src = t.is_send ? t.self : t.peer;
    const int dst = t.is_send ? t.peer : t.self;
    auto& box = *boxes_[static_cast<std::size_t>(dst)];
    std::lock_guard<std::mutex> lk(box.m);
    if (op->state.load() != detail::local_op::pending) return false;
    auto& q = t.is_send ? box.sends : box.recvs;
    auto it = q.find({src, t.tag});
    if (it != q.end()) {
      auto& dq = it->second;
      for (auto o = dq.begin(); o != dq.end(); ++o)
        if (*o == op) {
          dq.erase(o);
          break;
        }
      if (dq.empty() && q.size() > max_idle_keys) q.erase(it);
    }
    op->state.store(detail::local_op::cancelled);
    return true;
  }

  static constexpr std::size_t max_idle_keys = 64;

  comm_options opts_;
  std::vector<std::unique_ptr<detail::local_mailbox>> boxes_;
  std::unique_ptr<std::atomic<bool>[]> dead_;
};

/// @brief One rank's endpoint of a `local_world`; satisfies `comm_backend`.
///
/// @code
/// auto b = world.endpoint(0);
/// auto r = b.isend(std::as_bytes(std::span(data)), 1, 0);
/// b.wait(r, std::chrono::milliseconds(100));
/// @endcode
class local_backend {
 public:
  static constexpr memory_space memory = memory_space::host;

  /// @brief Handle of one posted transfer; movable, not copyable.
  class request {
   public:
    request() = default;
    request(request&&) noexcept = default;
    request& operator=(request&& o) noexcept {
      if (this != &o) {
        release();
        op_ = std::move(o.op_);
        world_ = o.world_;
      }
      return *this;
    }
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() { release(); }
    /// @brief The transfer this request stands for.
    [[nodiscard]] const transfer_info& info() const {
      detail::require(op_ != nullptr, "local_backend.request", "empty request");
      return op_->info;
    }
    /// @brief Whether the request refers to a posted transfer not yet waited for.
    [[nodiscard]] bool valid() const noexcept { return op_ != nullptr; }

   private:
    friend class local_backend;
    request(std::shared_ptr<detail::local_op> op, local_world* w) : op_(std::move(op)), world_(w) {}
    void release() noexcept {
      if (!op_ || world_ == nullptr) return;
      if (!world_->try_cancel(op_)) {
        std::unique_lock<std::mutex> lk(op_->m);
        op_->cv.wait(lk, [&] { return op_->state.load() >= detail::local_op::done; });
      }
      op_.reset();
    }
    std::shared_ptr<detail::local_op> op_;
    local_world* world_ = nullptr;
  };

  local_backend(local_world& world, int rank, comm_options opts) : world_(&world), rank_(rank), opts_(opts) {
    world.check_rank(rank, "local_world.endpoint");
    detail::require(opts.timeout.count() >= 0, "local_backend.timeout", "must be >= 0 ms, got ",
                    opts.timeout.count());
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return world_->size(); }
  [[nodiscard]] const comm_options& options() const noexcept { return opts_; }
  /// @brief Changes the default timeout of later waits.
  void set_timeout(std::chrono::milliseconds t) {
    detail::require(t.count() >= 0, "local_backend.timeout", "must be >= 0 ms, got ", t.count());
    opts_.timeout = t;
  }

  /// @brief Starts sending `data` to `peer` with `tag` (>= 0 for users).
  [[nodiscard]] request isend(std::span<const std::byte> data, int peer, int tag) {
    auto op = make_op(peer, tag, data.size(), true);
    op->src = data.data();
    world_->post(op);
    return request(std::move(op), world_);
  }
  /// @brief Starts receiving exactly `data.size()` bytes from `peer` with `tag`.
  [[nodiscard]] request irecv(std::span<std::byte> data, int peer, int tag) {
    auto op = make_op(peer, tag, data.size(), false);
    op->dst = data.data();
    world_->post(op);
    return request(std::move(op), world_);
  }
  /// @brief Waits with the default timeout.
  void wait(request& r) { wait(r, opts_.timeout); }
  /// @brief Waits at most `timeout`; throws `errc::timeout` / `errc::comm_error`.
  void wait(request& r, std::chrono::milliseconds timeout) {
    detail::require(r.op_ != nullptr, "local_backend.wait", "empty or already completed request");
    auto op = r.op_;
    // Spin briefly before sleeping: a thread hand-off through the condition
    // variable costs tens of microseconds, longer than copying 1 MiB.
    const auto spin_until = std::chrono::steady_clock::now() + std::min<std::chrono::microseconds>(timeout, spin_time);
    while (op->state.load(std::memory_order_acquire) < detail::local_op::done &&
           std::chrono::steady_clock::now() < spin_until)
      std::this_thread::yield();
    {
      std::unique_lock<std::mutex> lk(op->m);
      const bool ok = op->cv.wait_for(lk, timeout, [&] { return op->state.load() >= detail::local_op::done; });
      if (!ok) {
        lk.unlock();
        if (world_->try_cancel(op)) {
          r.op_.reset();
          detail::fail_timeout(op->info, timeout);
        }
        lk.lock();  // matched meanwhile: the copy is in flight, finish it
        op->cv.wait(lk, [&] { return op->state.load() >= detail::local_op::done; });
      }
    }
    r.op_.reset();
    if (op->state.load() == detail::local_op::failed) throw error(op->code, op->where, op->message);
  }
  /// @brief True if complete (then the request is consumed; a failure throws).
  bool test(request& r) {
    detail::require(r.op_ != nullptr, "local_backend.test", "empty or already completed request");
    if (r.op_->state.load() < detail::local_op::done) return false;
    wait(r, std::chrono::milliseconds(0));
    return true;
  }
  /// @brief No-op bracket (local transfers never need grouping); nesting is checked.
  void group_start() { ++group_depth_; }
  void group_end() {
    detail::require(group_depth_ > 0, detail::cat("rank ", rank_), "group_end without group_start");
    --group_depth_;
  }
  void barrier() { detail::p2p_barrier(*this); }
  void broadcast(std::span<std::byte> data, int root) {
    detail::require(root >= 0 && root < size(), "local_backend.broadcast.root", "root ", root, " out of [0, ",
                    size(), ")");
    detail::p2p_broadcast(*this, data, root);
  }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
    detail::require(all.size() == mine.size() * static_cast<std::size_t>(size()), "local_backend.allgather",
                    "output of ", all.size(), " bytes, need ", mine.size(), " x ", size());
    detail::p2p_allgather(*this, mine, all);
  }

 private:
  std::shared_ptr<detail::local_op> make_op(int peer, int tag, std::size_t bytes, bool is_send) {
    detail::require(peer >= 0 && peer < size(), detail::cat("rank ", rank_, is_send ? " -> " : " <- ", "rank ", peer),
                    "peer ", peer, " out of [0, ", size(), ")");
    auto op = std::make_shared<detail::local_op>();
    op->info = transfer_info{rank_, peer, tag, bytes, is_send};
    return op;
  }

  static constexpr std::chrono::microseconds spin_time{200};

  local_world* world_;
  int rank_;
  comm_options opts_;
  int group_depth_ = 0;
};

inline local_backend local_world::endpoint(int rank) { return local_backend(*this, rank, opts_); }
inline local_backend local_world::endpoint(int rank, comm_options opts) { return local_backend(*this, rank, opts); }

static_assert(comm_backend<local_backend>);

}  // namespace disttrain
