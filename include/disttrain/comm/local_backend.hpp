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
/// @snippet comm.cpp local_backend_file

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/detail/backend_parts.hpp"
#include "disttrain/comm/detail/p2p_collectives.hpp"
#include "disttrain/comm/detail/unique_handle.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/checked.hpp"

namespace disttrain {

namespace detail {

/// Pauses the CPU for a moment inside a spin loop (x86 `pause`, ARM `yield`).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("pause" ::: "memory");
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

/// One posted send or receive of the local backend.
///
/// Completion is published through `state` alone; the mutex and condition
/// variable are only touched when the waiter actually went to sleep
/// (`sleeping`), so a waiter that catches the completion while spinning costs
/// the completing thread no lock and no wake-up call.
struct local_op {
  enum state_t : int { pending = 0, matched = 1, done = 2, failed = 3, cancelled = 4 };
  transfer_info info;
  const std::byte* src = nullptr;   // send side
  std::byte* dst = nullptr;         // receive side
  std::atomic<int> state{pending};  // pending -> matched only under the mailbox lock
  std::atomic<bool> sleeping{false};
  std::mutex m;
  std::condition_variable cv;
  errc code = errc::comm_error;
  std::string where;
  std::string message;

  [[nodiscard]] bool finished() const noexcept { return state.load() >= done; }

  // Publishes the final state, waking the waiter only if it sleeps. The
  // seq_cst store/load pair here and in `wait_until` (store `sleeping`, then
  // load `state`) guarantees that either the waiter sees the final state or
  // this thread sees `sleeping` and notifies under the mutex.
  void finish(int st) {
    state.store(st);
    if (sleeping.load()) {
      { std::lock_guard<std::mutex> lk(m); }
      cv.notify_all();
    }
  }
  void fail_with(errc c, std::string w, std::string msg) {
    code = c;
    where = std::move(w);
    message = std::move(msg);
    finish(failed);
  }
  // How long a waiter polls before it sleeps: first `pause_time` of CPU
  // pauses (a peer running on the other core completes the match within
  // microseconds; no system call), then `yield` until `spin_time` (lets a
  // peer that waits for this very CPU run: the common case on an
  // oversubscribed machine, where spinning without yielding would starve it).
  // A matched op (the peer is copying) never sleeps: it completes when the
  // copy ends, and a sleeping waiter would pay a wake-up on top (up to a
  // scheduler time slice, milliseconds, on a loaded machine).
  static constexpr std::chrono::microseconds pause_time{2};
  static constexpr std::chrono::microseconds spin_time{50};

  // Polls (see above), then sleeps on the condition variable until
  // `deadline`; returns whether the op finished (a matched op is always
  // waited for, even past the deadline: its copy is in flight).
  bool wait_until(std::chrono::steady_clock::time_point deadline) {
    if (finished()) return true;
    const auto now = std::chrono::steady_clock::now();
    const auto spin_end = std::min(deadline, now + spin_time);
    const auto pause_end = std::min(spin_end, now + pause_time);
    for (unsigned i = 1;; ++i) {
      if (finished()) return true;
      if ((i & 15u) == 0) {
        const auto t = std::chrono::steady_clock::now();
        if (t >= spin_end && state.load() == pending) break;
        if (t >= pause_end) std::this_thread::yield();
      }
      cpu_relax();
    }
    std::unique_lock<std::mutex> lk(m);
    sleeping.store(true);
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      cv.wait(lk, [&] { return finished(); });
      return true;
    }
    return cv.wait_until(lk, deadline, [&] { return finished(); });
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
namespace detail {
struct local_request_state;
}  // namespace detail

/// @brief The shared state of an in-process world of `size` ranks; hands out
/// one `local_backend` endpoint per rank (each used by one thread).
///
/// @snippet comm.cpp local_world
class local_world {
 public:
  explicit local_world(int size, comm_options opts = {}) : opts_(opts) {
    require_positive(size, "local_world.size");
    require(opts.timeout.count() >= 0, "local_world.timeout", "must be >= 0 ms, got ",
            opts.timeout.count());
    boxes_.reserve(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) boxes_.push_back(std::make_unique<detail::local_mailbox>());
    dead_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) dead_[static_cast<std::size_t>(i)].store(false);
    sequences_.resize(static_cast<std::size_t>(size));
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
    for (auto& v : victims)
      v->fail_with(errc::comm_error, v->info.where(), dead_message(v->info, rank));
  }
  /// @brief Whether `rank` was marked dead.
  [[nodiscard]] bool is_dead(int rank) const {
    check_rank(rank, "local_world.is_dead");
    return dead_[static_cast<std::size_t>(rank)].load();
  }

 private:
  friend class local_backend;
  friend struct detail::local_request_state;  // cancels a released request

  void check_rank(int r, std::string_view where) const {
    require(r >= 0 && r < size(), where, "rank ", r, " out of [0, ", size(), ")");
  }
  static std::string dead_message(const transfer_info& t, int dead) {
    return cat(t.what(), " failed: ", detail::dead_ranks_text(std::span<const int>(&dead, 1)));
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
      const std::string msg =
          detail::size_mismatch(snd.info.self, std::to_string(snd.info.bytes), rcv.info);
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
    detail::erase_queued(t.is_send ? box.sends : box.recvs, {src, t.tag}, op, max_idle_keys);
    op->state.store(detail::local_op::cancelled);
    return true;
  }

  static constexpr std::size_t max_idle_keys = 64;

  comm_options opts_;
  std::vector<std::unique_ptr<detail::local_mailbox>> boxes_;
  std::unique_ptr<std::atomic<bool>[]> dead_;
  std::vector<detail::route_sequences> sequences_;  // per rank, used by its thread only
};

namespace detail {
/// What a `local_backend::request` owns: the posted op and the world it was
/// posted to. Releasing an incomplete one cancels it if still unmatched, else
/// waits for the copy in flight (the buffers must not go while the peer copies).
struct local_request_state {
  std::shared_ptr<local_op> op;
  local_world* world = nullptr;
  void release() noexcept {
    if (!op || world == nullptr) return;
    if (!world->try_cancel(op))  // matched: the copy is in flight, let it finish
      (void)op->wait_until(std::chrono::steady_clock::time_point::max());
    op.reset();
  }
};
}  // namespace detail

/// @brief One rank's endpoint of a `local_world`; satisfies `comm_backend`.
///
/// @snippet comm.cpp local_backend
class local_backend : public detail::deadline_waits<local_backend> {
 public:
  static constexpr memory_space memory = memory_space::host;

  /// @brief Handle of one posted transfer; movable, not copyable.
  class request : public detail::unique_handle<detail::local_request_state> {
   public:
    /// @brief The transfer this request stands for.
    [[nodiscard]] const transfer_info& info() const {
      require(state_.op != nullptr, "local_backend.request", "empty request");
      return state_.op->info;
    }
    /// @brief Whether the request refers to a posted transfer not yet waited for.
    [[nodiscard]] bool valid() const noexcept { return state_.op != nullptr; }

   private:
    friend class local_backend;
  };

  local_backend(local_world& world, int rank, comm_options opts)
      : world_(&world), rank_(rank), opts_(opts) {
    world.check_rank(rank, "local_world.endpoint");
    require(opts.timeout.count() >= 0, "local_backend.timeout", "must be >= 0 ms, got ",
            opts.timeout.count());
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return world_->size(); }
  [[nodiscard]] const comm_options& options() const noexcept { return opts_; }
  /// @brief Changes the default timeout of later waits.
  void set_timeout(std::chrono::milliseconds t) {
    require(t.count() >= 0, "local_backend.timeout", "must be >= 0 ms, got ", t.count());
    opts_.timeout = t;
  }

  /// @brief Starts sending `data` to `peer` with `tag` (>= 0, as with MPI:
  /// negative tags are reserved for the collectives).
  [[nodiscard]] request isend(std::span<const std::byte> data, int peer, int tag) {
    check_user_tag(peer, tag, data.size(), true);
    return post_send(data, peer, tag);
  }
  /// @brief Starts receiving exactly `data.size()` bytes from `peer` with `tag` (>= 0).
  [[nodiscard]] request irecv(std::span<std::byte> data, int peer, int tag) {
    check_user_tag(peer, tag, data.size(), false);
    return post_recv(data, peer, tag);
  }
  /// @brief `wait(r)` (the default timeout) and `wait(r, timeout)`; throw
  /// `errc::timeout` / `errc::comm_error`.
  using deadline_waits::wait;
  /// @brief Waits until `d.at`; a timeout error quotes `d.timeout`.
  void wait(request& r, const wait_deadline& d) {
    require(r.state_.op != nullptr, "local_backend.wait", "empty or already completed request");
    auto op = r.state_.op;
    if (!op->wait_until(d.at)) {
      if (world_->try_cancel(op)) {
        r.state_.op.reset();
        detail::fail_timeout(op->info, d.timeout);
      }
      // Matched meanwhile: the copy is in flight, let it finish.
      (void)op->wait_until(std::chrono::steady_clock::time_point::max());
    }
    r.state_.op.reset();
    if (op->state.load() == detail::local_op::failed) throw error(op->code, op->where, op->message);
  }
  /// @brief Waits for `r` like `wait` until `until`, but without giving up
  /// on it: true when it completed (consumed; a failure throws), false when
  /// `until` passed first (the request stays posted, nothing is cancelled).
  bool try_wait(request& r, std::chrono::steady_clock::time_point until) {
    require(r.state_.op != nullptr, "local_backend.try_wait", "empty or already completed request");
    if (!r.state_.op->wait_until(until)) return false;
    wait(r, wait_deadline{until, std::chrono::milliseconds(0)});  // finished: returns at once
    return true;
  }
  /// @brief This rank's route sequence numbers (kept by the world: shared by
  /// every endpoint of the rank), for `route_transfer`'s abort notices.
  [[nodiscard]] detail::route_sequences& route_sequences() noexcept {
    return world_->sequences_[static_cast<std::size_t>(rank_)];
  }
  /// @brief True if complete (then the request is consumed; a failure throws).
  bool test(request& r) {
    require(r.state_.op != nullptr, "local_backend.test", "empty or already completed request");
    if (r.state_.op->state.load() < detail::local_op::done) return false;
    wait(r, std::chrono::milliseconds(0));
    return true;
  }
  /// @brief No-op bracket (local transfers never need grouping); nesting is checked.
  void group_start() { group_.start(); }
  void group_end() { group_.end(rank_); }
  void barrier() {
    internal_view v{*this};
    detail::p2p_barrier(v);
  }
  void broadcast(std::span<std::byte> data, int root) {
    require(root >= 0 && root < size(), "local_backend.broadcast.root", "root ", root,
            " out of [0, ", size(), ")");
    internal_view v{*this};
    detail::p2p_broadcast(v, data, root);
  }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
    require(!mul_overflows(mine.size(), static_cast<std::size_t>(size())) &&
                all.size() == mine.size() * static_cast<std::size_t>(size()),
            "local_backend.allgather", "output of ", all.size(), " bytes, need ", mine.size(),
            " x ", size());
    internal_view v{*this};
    detail::p2p_allgather(v, mine, all);
  }

 private:
  // What the collectives (detail/p2p_collectives.hpp) see: the same
  // transfers, with the reserved negative tags allowed.
  struct internal_view {
    using request = local_backend::request;
    local_backend& b;
    [[nodiscard]] int rank() const noexcept { return b.rank(); }
    [[nodiscard]] int size() const noexcept { return b.size(); }
    [[nodiscard]] const comm_options& options() const noexcept { return b.options(); }
    [[nodiscard]] request isend(std::span<const std::byte> data, int peer, int tag) {
      return b.post_send(data, peer, tag);
    }
    [[nodiscard]] request irecv(std::span<std::byte> data, int peer, int tag) {
      return b.post_recv(data, peer, tag);
    }
    void wait(request& r, const wait_deadline& d) { b.wait(r, d); }
  };

  request post_send(std::span<const std::byte> data, int peer, int tag) {
    auto op = make_op(peer, tag, data.size(), true);
    op->src = data.data();
    return post(std::move(op));
  }
  request post_recv(std::span<std::byte> data, int peer, int tag) {
    auto op = make_op(peer, tag, data.size(), false);
    op->dst = data.data();
    return post(std::move(op));
  }
  request post(std::shared_ptr<detail::local_op> op) {
    world_->post(op);
    request r;
    r.state_ = {std::move(op), world_};
    return r;
  }
  void check_user_tag(int peer, int tag, std::size_t bytes, bool is_send) const {
    if (tag < 0)  // the text is only built on failure (per-message hot path)
      fail(errc::invalid_argument, transfer_info{rank_, peer, tag, bytes, is_send}.where(), "tag ",
           tag, " out of [0, ", INT_MAX,
           "]: negative tags are reserved for the backend's collectives (MPI rejects "
           "them too)");
  }

  std::shared_ptr<detail::local_op> make_op(int peer, int tag, std::size_t bytes, bool is_send) {
    const transfer_info info{rank_, peer, tag, bytes, is_send};
    // The error text is only built on failure (this is the per-message hot path).
    if (peer < 0 || peer >= size())
      fail(errc::invalid_argument, info.where(), "peer ", peer, " out of [0, ", size(), ")");
    auto op = std::make_shared<detail::local_op>();
    op->info = info;
    return op;
  }

  local_world* world_;
  int rank_;
  comm_options opts_;
  detail::group_nesting group_;
};

inline local_backend local_world::endpoint(int rank) { return local_backend(*this, rank, opts_); }
inline local_backend local_world::endpoint(int rank, comm_options opts) {
  return local_backend(*this, rank, opts);
}

static_assert(comm_backend<local_backend>);

}  // namespace disttrain
