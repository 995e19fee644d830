#pragma once
/// @file executor.hpp
/// @brief Runs one rank's bound program (schedule/bound_program.hpp),
/// overlapping communication with compute.
///
/// A bound program comes from `bind_world` / `bind_rank` (bind/bind.hpp: a
/// plan's topology, with routes between modules of different parallel
/// degrees) or from `bind_schedule` (schedule/bind_schedule.hpp: a schedule,
/// one backend rank per schedule rank). Each point-to-point op is one message
/// whose peer, bytes and tag the program holds, so the host only provides
/// its bytes (`payload(b)`: packed for a send, the landing buffer for a
/// receive) and unpacks at `received(b)` (concept `exec_host`, host.hpp).
/// Route phases are ops like any other: the TP fan-out and the gradients'
/// reversed routes run with the same overlap.
///
/// The executor walks the rank's ops in order and calls the host for
/// compute; around it:
/// - **receives are posted ahead of need**: with `recv_lookahead < 0` (the
///   default) every receive of the iteration is posted when `run` starts, so
///   data lands while the rank computes, and no send can ever wait for a
///   receive that is not posted yet (no send/receive order can deadlock);
///   with `recv_lookahead = k` only the next k receive ops are kept posted
///   (bounds the receive buffers alive at once). At a receive op the executor
///   only waits for what has not arrived yet (that wait is the exposed
///   communication) and lets the host unpack.
/// - **sends are asynchronous**: posted right after the op that produced the
///   data (the schedule puts the send there) and drained at the end of the
///   iteration; the host keeps a send's bytes alive until `run` returns.
/// - **gradient buckets** are reduced across their data-parallel group
///   (`bucket_allreduce`) from `grad_sync_start`, which the schedule places
///   right after the bucket's last backward work, to `grad_sync_finish`,
///   before the optimizer step; in between the rank keeps computing.
/// - between compute ops it polls the outstanding requests, so transports
///   that need the caller to progress (MPI) move data during compute.
///
/// With `overlap = false` the same program runs as a naive executor would:
/// each receive is posted at its op and waited at once, each send and each
/// bucket reduction is completed before the next op. This is the baseline of
/// benchmarks/bench_exec.cpp; with a rendezvous transport (the local backend,
/// MPI above its eager limit) blocking sends can deadlock a 1F1B schedule,
/// which the timeout reports as `errc::timeout` naming the peer.
///
/// Every wait has a deadline (`exec_options::timeout`, or the backend's), so
/// a silent peer is an error naming the rank, tag and bytes, never a hang.
/// Each op is timed; `exec_stats::events` feeds `exec_trace_json`.
///
/// ## Failures
/// A rank whose run fails (a timeout, a plan disagreement, an exception of
/// its host) withdraws its receives and sends every peer of its program an
/// *abort notice* (32 bytes on the program's control tag:
/// `message_tags::control()`, `bound_program::control_tag`), then rethrows.
/// Each rank listens for its peers' notices from the start of `run` (one
/// posted receive per peer) and tests them between ops and while it waits
/// (the backend's `try_wait` in 10 ms slices): a notice fails its run at once
/// with `errc::comm_error` naming the peer and the first failure ("rank 2
/// aborted the iteration after rank 0's error (timeout; ...)"). A rank that
/// stops for a notice passes it on, so every rank of a chain learns it in
/// about one slice per hop instead of at its own timeout. Peers are the
/// point-to-point peers of the program and its `dp_group`. Notices are numbered
/// per pair of ranks (the backend's `route_sequences`, side `executor`), so
/// a stale one from an earlier failed run is ignored; they are best effort
/// (a failed rank waits at most 50 ms for them to leave). Backends without
/// `try_wait` (NCCL) have none. After a failure, run the next iteration
/// with fresh backends where the transport cannot cancel sends (MPI; see
/// docs/comm.md, "After a timeout"), and keep the host's `payload` buffers
/// of the failed run while the backend may still touch them (MPI:
/// `sends_in_flight()` or `receives_in_flight()` above 0).
///
/// ## Batches
/// Where a send waits for its receive and a rank's transfers share one
/// stream (NCCL, `nccl_backend`), receives posted ahead block the sends
/// behind them. With `exec_options::batched` the executor posts nothing
/// ahead: at the first op of each `p2p_batches` batch it waits for the
/// previous batch's sends, then posts the whole batch (sends and receives)
/// inside `group_start()` / `group_end()`; each receive is waited for at its
/// op as usual. The program must be in `order_for_rendezvous`'s order
/// (schedule/rendezvous_order.hpp), which `validate_bound(w,
/// p2p_semantics::rendezvous)` checks: bound as it is, interleaved 1F1B
/// deadlocks there.
///
/// ## Stamps
/// On host-memory backends each message is followed by its 32-byte stamp
/// (`bound_op::stamp`), which the receiver checks before `received(b)`:
/// programs bound from different inputs fail with `errc::comm_error` (plan
/// disagreement) instead of exchanging wrong data of the right size.
/// Gradient buckets are reduced over the program's `dp_group`.
///
/// @snippet exec.cpp executor_file
///
/// A plan's programs (bind/bind.hpp):
///
/// @snippet exec.cpp executor_bound

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/plan_stamp.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/exec/bucket_allreduce.hpp"
#include "disttrain/exec/detail/abort_notices.hpp"
#include "disttrain/exec/host.hpp"
#include "disttrain/exec/timeline.hpp"
#include "disttrain/schedule/bound_program.hpp"

namespace disttrain {

/// @brief Settings of an `executor`.
///
/// @snippet exec.cpp exec_options
struct exec_options {
  bool overlap = true;      ///< false: naive baseline (see the file comment)
  int recv_lookahead = -1;  ///< receive ops kept posted ahead; < 0: all, at the start
  /// Issue each batch of point-to-point ops (`p2p_batches`) together,
  /// inside the backend's `group_start()` / `group_end()`, after the previous
  /// batch's sends completed, with no receive posted ahead: NCCL's way (see
  /// the file comment, "Batches"); run programs in `order_for_rendezvous`'s
  /// order. Ignores `recv_lookahead`.
  bool batched = false;
  std::chrono::milliseconds timeout{-1};  ///< deadline of every wait; < 0: the backend's
  bool record = true;                     ///< record per-op events
};

/// @brief Executes one rank's bound program per call of `run` (see the file comment).
template <comm_backend B>
class executor {
 public:
  explicit executor(B& backend, exec_options opts = {}) : b_(&backend), opts_(opts) {}

  [[nodiscard]] const exec_options& options() const noexcept { return opts_; }
  void set_options(exec_options o) noexcept { opts_ = o; }

  /// @brief Runs `program` (this rank's ops, in order) once with `host`.
  /// Throws `errc::invalid_argument` when the program is another rank's or the
  /// host's payload size differs from the op's bytes, `errc::schedule_error`
  /// for an op the executor cannot run (a bucket finished before it started,
  /// a step while a reduction is in flight), the backend's `errc::timeout` /
  /// `errc::comm_error` for failed transfers, and whatever the host's
  /// callbacks throw.
  template <exec_host H>
  exec_stats run(const bound_program& program, H& host) {
    require(program.rank == b_->rank(), "executor.program.rank", "program of rank ", program.rank,
            " run on rank ", b_->rank());
    run_state<typename H::grad_type> st(*this, program);
    try {
      run_ops(st, host);
    } catch (const error& e) {
      st.abort(static_cast<std::uint64_t>(e.code()));
      throw;
    } catch (...) {
      st.abort(detail::foreign_failure);
      throw;
    }
    return std::move(st.stats);
  }

 private:
  template <class St, class H>
  void run_ops(St& st, H& host) {
    const std::span<const bound_op> program = st.program;
    for (std::size_t i = 0; i < program.size(); ++i) {
      const bound_op& item = program[i];
      const schedule_op& op = item.op;
      st.current = i;
      if (opts_.batched) {
        if (st.batch[i] >= 0 && (i == 0 || st.batch[i - 1] != st.batch[i])) st.issue_batch(host);
      } else if (opts_.overlap) {
        st.post_ahead(host);
      }
      switch (op.kind) {
        case op_kind::forward: st.compute(op, [&] { host.forward(op); }); break;
        case op_kind::backward: st.compute(op, [&] { host.backward(op); }); break;
        case op_kind::weight: st.compute(op, [&] { host.weight(op); }); break;
        case op_kind::optimizer_step:
          for (const auto& [bucket, b] : st.buckets)
            if (b.reduce.active())
              fail(errc::schedule_error, st.where(op), "optimizer step while bucket ", bucket,
                   " is still being reduced (grad_sync_finish must come first)");
          st.compute(op, [&] { host.optimizer_step(op); });
          break;
        case op_kind::recv_act:
        case op_kind::recv_grad: st.receive(host, item); break;
        case op_kind::send_act:
        case op_kind::send_grad:
          if (!opts_.batched) st.send(host, item);  // batched: posted with its batch
          break;
        case op_kind::grad_sync_start: st.sync_start(host, item); break;
        case op_kind::grad_sync_finish: st.sync_finish(host, op); break;
      }
      if (opts_.overlap) st.progress();
    }
    st.drain();
  }

  using clock = std::chrono::steady_clock;
  using request = typename B::request;

  // One message in flight: its payload and, on host memory, its stamp
  // (sent right after the payload on the same tag; see "Stamps").
  struct pending {
    std::span<std::byte> bytes;
    plan_stamp stamp;           // a receive's is overwritten by the sender's
    std::vector<request> reqs;  // payload, then stamp
    bool done[2] = {false, false};
    bool posted = false;
    std::size_t index = 0;  // program position of the op
    double posted_at = 0.0;
    bool reported = false;  // transfer event recorded

    [[nodiscard]] bool complete() const noexcept {
      return std::all_of(done, done + reqs.size(), [](bool d) { return d; });
    }
  };

  template <class T>
  struct bucket_state {
    bucket_allreduce<B, T> reduce;
    std::size_t index = 0;  // program position of grad_sync_start
    schedule_op op;
    double started = 0.0;
    bool reported = false;
  };

  static constexpr bool stamped = B::memory == memory_space::host;

  // The host's bytes of a point-to-point op, checked against the program
  // (the location is built only on failure: this runs per message).
  template <class H>
  void collect(H& host, const bound_op& b, pending& p) const {
    p.bytes = host.payload(b);
    const auto where = [&] { return cat("rank ", b_->rank(), " ", describe(b.op)); };
    require(static_cast<std::int64_t>(p.bytes.size()) == b.bytes, where, "the host's payload has ",
            p.bytes.size(), " bytes, the bound program ", b.bytes);
    require(b.op.peer >= 0 && b.op.peer < b_->size() && b.op.peer != b_->rank(), where, "peer ",
            b.op.peer, " is not another rank of the world of ", b_->size());
    p.stamp.message = b.stamp;
    p.stamp.bytes = static_cast<std::uint64_t>(b.bytes);
  }
  template <class Where>
  void check_stamp(const bound_op& b, const plan_stamp& got, const Where& where) const {
    if (got.magic == plan_stamp::magic_value && got.message == b.stamp &&
        got.bytes == static_cast<std::uint64_t>(b.bytes))
      return;
    fail(errc::comm_error, where(), "plan disagreement: rank ", b.op.peer, " sent stamp ",
         hex64(got.message), " (", got.bytes, " bytes) where this rank's program has ",
         hex64(b.stamp), " (", b.bytes,
         " bytes): the two programs were bound from different inputs (topology, chain, "
         "sample map or activation shapes) or run out of order; the received bytes are "
         "not used");
  }

  template <class T>
  struct run_state {
    run_state(executor& e, const bound_program& prog)
        : ex(e),
          program(prog.ops),
          group(prog.dp_group),
          t0(clock::now()),
          notices(*e.b_, peers_of(prog), prog.control_tag) {
      for (std::size_t i = 0; i < program.size(); ++i)
        if (is_recv(program[i].op.kind)) recv_at.push_back(i);
      recvs.resize(recv_at.size());
      if (e.opts_.batched) batch = p2p_batches(prog);
    }
    // The ranks this one exchanges with: point-to-point peers and the DP
    // group; both ends of every pair list each other.
    static std::vector<int> peers_of(const bound_program& prog) {
      std::vector<int> p(prog.dp_group);
      for (const bound_op& o : prog.ops)
        if (is_p2p(o.op.kind)) p.push_back(o.op.peer);
      return p;
    }

    executor& ex;
    std::span<const bound_op> program;
    std::span<const int> group;
    clock::time_point t0;
    exec_stats stats;
    std::size_t current = 0;
    std::vector<std::size_t> recv_at;  // program positions of receive ops
    std::vector<pending> recvs;        // parallel to recv_at
    std::size_t next_post = 0;         // next entry of recv_at to post
    std::deque<pending> sends;         // sends still in flight
    std::vector<int> batch;            // batched: p2p_batches of the program
    std::map<int, bucket_state<T>> buckets;
    detail::abort_notices<B> notices;  // from and to this run's peers (see "Failures")

    [[nodiscard]] std::string where(const schedule_op& op) const {
      return cat("rank ", ex.b_->rank(), " op #", current, " ", describe(op));
    }
    [[nodiscard]] double now() const {
      return std::chrono::duration<double>(clock::now() - t0).count();
    }
    [[nodiscard]] std::chrono::milliseconds timeout() const {
      return ex.opts_.timeout.count() >= 0 ? ex.opts_.timeout : ex.b_->options().timeout;
    }
    void record(const schedule_op& op, std::size_t index, double start, double end,
                exec_track track) {
      if (track == exec_track::compute) stats.compute_seconds += end - start;
      if (track == exec_track::wait) stats.exposed_comm_seconds += end - start;
      if (ex.opts_.record)
        stats.events.push_back({op, ex.b_->rank(), static_cast<int>(index), start, end, track});
    }
    template <class F>
    void compute(const schedule_op& op, F&& f) {
      const double s = now();
      f();
      record(op, current, s, now(), exec_track::compute);
    }
    // Waits for every request of `p` not yet complete; the time is exposed communication.
    void wait_all_of(const schedule_op& op, pending& p) {
      const double s = now();
      bool waited = false;
      const auto deadline = wait_deadline::after(timeout());
      for (std::size_t i = 0; i < p.reqs.size(); ++i) {
        if (p.done[i]) continue;
        if (!ex.b_->test(p.reqs[i])) {
          notices.wait(p.reqs[i], deadline, [&] { return where(op); });
          waited = true;
        }
        p.done[i] = true;
      }
      if (waited) record(op, current, s, now(), exec_track::wait);
    }

    template <class H>
    void post_receive(H& host, std::size_t k) {
      const bound_op& b = program[recv_at[k]];
      pending& p = recvs[k];
      const double s = now();
      ex.collect(host, b, p);
      p.reqs.push_back(ex.b_->irecv(p.bytes, b.op.peer, b.tag));
      if constexpr (stamped)
        p.reqs.push_back(
            ex.b_->irecv(std::as_writable_bytes(std::span(&p.stamp, 1)), b.op.peer, b.tag));
      p.posted = true;
      stats.compute_seconds += now() - s;
    }

    // Keeps the receives of the next `recv_lookahead` receive ops posted.
    template <class H>
    void post_ahead(H& host) {
      const int look = ex.opts_.recv_lookahead;
      std::size_t reached = 0;  // receive ops at or before the current position
      while (reached < recv_at.size() && recv_at[reached] <= current) ++reached;
      const std::size_t until =
          look < 0 ? recv_at.size()
                   : std::min(recv_at.size(), reached + static_cast<std::size_t>(look));
      for (; next_post < until; ++next_post)
        if (!recvs[next_post].posted) post_receive(host, next_post);
    }

    // Batched (see "Batches"): the batch starting at `current` once the
    // previous batch's sends are done, in one group.
    template <class H>
    void issue_batch(H& host) {
      const std::size_t first = current;
      for (auto& p : sends)
        if (!p.complete()) {
          current = p.index;  // the wait is the send's
          wait_all_of(program[p.index].op, p);
        }
      ex.b_->group_start();
      for (std::size_t j = first; j < program.size() && batch[j] == batch[first]; ++j) {
        current = j;
        if (is_send(program[j].op.kind)) {
          send(host, program[j]);
        } else {
          const auto k = static_cast<std::size_t>(
              std::lower_bound(recv_at.begin(), recv_at.end(), j) - recv_at.begin());
          post_receive(host, k);
        }
      }
      ex.b_->group_end();
      current = first;
    }

    template <class H>
    void receive(H& host, const bound_op& b) {
      const schedule_op& op = b.op;
      const std::size_t k = static_cast<std::size_t>(
          std::lower_bound(recv_at.begin(), recv_at.end(), current) - recv_at.begin());
      ensure(k < recv_at.size() && recv_at[k] == current, "executor", "receive op not indexed");
      pending& p = recvs[k];
      if (!p.posted) post_receive(host, k);
      next_post = std::max(next_post, k + 1);
      wait_all_of(op, p);
      if constexpr (stamped) ex.check_stamp(b, p.stamp, [&] { return where(op); });
      stats.bytes_received += p.bytes.size();
      ++stats.messages_received;
      compute(op, [&] { host.received(b); });
      p = pending{};  // the op is complete: drop its requests
      p.posted = true;
    }

    template <class H>
    void send(H& host, const bound_op& b) {
      const schedule_op& op = b.op;
      pending& p = sends.emplace_back();
      p.index = current;
      const double s = now();
      ex.collect(host, b, p);
      p.posted_at = now();
      p.reqs.push_back(ex.b_->isend(std::span<const std::byte>(p.bytes), op.peer, b.tag));
      if constexpr (stamped)
        p.reqs.push_back(ex.b_->isend(std::as_bytes(std::span(&p.stamp, 1)), op.peer, b.tag));
      stats.bytes_sent += p.bytes.size();
      ++stats.messages_sent;
      p.posted = true;
      record(op, current, s, now(), exec_track::compute);
      if (!ex.opts_.overlap) wait_all_of(op, p);
    }

    template <class H>
    void sync_start(H& host, const bound_op& b) {
      const schedule_op& op = b.op;
      auto& st = buckets[op.bucket];
      if (st.reduce.active() || st.reported)
        fail(errc::schedule_error, where(op), "bucket ", op.bucket,
             " started twice in one iteration");
      const double s = now();
      grad_bucket<T> g = host.bucket_ready(op);
      st.reduce.start(*ex.b_, g.data, group, b.tag);
      st.index = current;
      st.op = op;
      st.started = now();
      stats.bytes_sent += st.reduce.bytes_sent();
      stats.bytes_received += st.reduce.bytes_sent();
      record(op, current, s, now(), exec_track::compute);
      if (!ex.opts_.overlap) finish_bucket(op, st);
    }
    // Completes a reduction: waiting for peers is exposed, the summation is compute.
    void finish_bucket(const schedule_op& op, bucket_state<T>& st) {
      if (!st.reduce.active()) return;
      const double s = now();
      const bool ready = st.reduce.test(*ex.b_);
      st.reduce.finish(*ex.b_, wait_deadline::after(timeout()),
                       [&](request& r, const wait_deadline& d) {
                         notices.wait(r, d, [&] { return where(op); });
                       });
      if (!ready)
        record(op, current, s, now(), exec_track::wait);
      else
        stats.compute_seconds += now() - s;
      report_bucket(st, ready ? s : now());
    }
    void report_bucket(bucket_state<T>& st, double done_at) {
      if (st.reported) return;
      st.reported = true;
      record(st.op, st.index, st.started, done_at, exec_track::transfer);
    }

    template <class H>
    void sync_finish(H& host, const schedule_op& op) {
      auto it = buckets.find(op.bucket);
      if (it == buckets.end())
        fail(errc::schedule_error, where(op), "bucket ", op.bucket, " finished but never started");
      finish_bucket(op, it->second);
      compute(op, [&] { host.bucket_reduced(op); });
    }

    // Lets transports progress: polls outstanding sends and reductions and
    // notes when each completed (the transfer events of the trace).
    void progress() {
      notices.check([&] { return cat("rank ", ex.b_->rank(), " op #", current); });
      const double t = now();
      for (auto& p : sends) {
        for (std::size_t i = 0; i < p.reqs.size(); ++i)
          if (!p.done[i] && ex.b_->test(p.reqs[i])) p.done[i] = true;
        if (!p.reported && p.complete()) report_send(p, t);
      }
      while (!sends.empty() && sends.front().reported) sends.pop_front();
      for (auto& [bucket, st] : buckets)
        if (st.reduce.active() && !st.reported && st.reduce.test(*ex.b_)) report_bucket(st, t);
    }
    void report_send(pending& p, double done_at) {
      p.reported = true;
      record(program[p.index].op, p.index, p.posted_at, done_at, exec_track::transfer);
    }

    // After a failure (see "Failures"): this rank's receives are withdrawn
    // first (so that a peer's later messages are not taken by them), then
    // every peer gets an abort notice.
    void abort(std::uint64_t code) noexcept {
      recvs.clear();
      notices.abort(code);
    }

    // End of the iteration: every send complete, nothing left in flight.
    void drain() {
      const double s = now();
      bool waited = false;
      const auto deadline = wait_deadline::after(timeout());
      for (auto& p : sends) {
        for (std::size_t i = 0; i < p.reqs.size(); ++i)
          if (!p.done[i]) {
            notices.wait(p.reqs[i], deadline,
                         [&] { return cat("rank ", ex.b_->rank(), " end of the iteration"); });
            p.done[i] = true;
            waited = true;
          }
        if (!p.reported) report_send(p, now());
      }
      sends.clear();
      for (const auto& [bucket, st] : buckets)
        if (st.reduce.active())
          fail(errc::schedule_error, cat("rank ", ex.b_->rank(), " bucket ", bucket),
               "gradient reduction started but never finished (no grad_sync_finish)");
      const double e = now();
      if (waited) {
        // Sends still in flight at the end of the program: exposed, attributed to no op.
        stats.exposed_comm_seconds += e - s;
        if (ex.opts_.record)
          stats.events.push_back({program.empty() ? schedule_op{} : program.back().op,
                                  ex.b_->rank(), -1, s, e, exec_track::wait});
      }
      stats.iteration_seconds = e;
    }
  };

  B* b_;
  exec_options opts_;
};

}  // namespace disttrain
