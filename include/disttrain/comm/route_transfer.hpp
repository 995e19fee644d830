#pragma once
/// @file route_transfer.hpp
/// @brief Runs one rank's part of a `route_plan` over a host-memory backend
/// (local or MPI): zero copy for contiguous messages, pack/unpack through a
/// `buffer_pool` for the others, optional verify mode.
///
/// Every rank of the route calls `start(source, destination)` then `wait()`
/// (or `run_route`). `source` is the rank's activation buffer on the sending
/// stage (`plan.source_elements(rank)` elements, empty elsewhere) and
/// `destination` its buffer on the receiving stage
/// (`plan.destination_elements(rank)`, empty elsewhere). `start` posts all
/// receives and the phase-0 sends and returns at once, so the caller can
/// compute while data moves; `wait` completes phase 0, forwards the fan-out
/// (phase 1) and returns when this rank's part is done.
///
/// Sizes come from the plan, which both sides compute from the same
/// placements and shapes: nothing about shapes is exchanged. **Plan
/// agreement is always checked**: a 32-byte stamp (the sender's
/// `route_plan::fingerprint()` mixed with the message's identity) goes ahead
/// of every message, posted together with it (one small extra message, no
/// extra round trip); a receiver whose own plan gives another stamp throws
/// `errc::comm_error` ("plan disagreement"), also when both plans give the
/// message the same byte count (swapped samples, a reshape, another split
/// axis). With
/// `transfer_options::verify`, each message is preceded by a header (the
/// sender's pieces, i.e. samples and slice shapes, element count and payload
/// checksum); the receiver compares it with its own plan and throws
/// `errc::comm_error` naming both sides' shapes on any mismatch, or the two
/// checksums if the payload was corrupted.
///
/// Errors: timeouts (`errc::timeout`) and transport failures name the peer,
/// tag and bytes (see backend.hpp); a wrong buffer size is `invalid_argument`
/// naming the rank and both sizes.
///
/// **Fault propagation.** A rank that fails tells the ranks that wait for it,
/// best effort (each abort message is waited for at most 50 ms), so they fail
/// at once naming it (`comm_error`) instead of at their own timeout:
/// - *abort stamps* (forward), to its receivers: a rank whose `start` fails
///   sends one in place of every message it has not sent; a rank whose
///   phase 0 fails, in place of the fan-out it owes.
/// - *abort notices* (reverse), to its senders: a rank that fails in `start`
///   or `wait` sends one to every rank it has not fully received from in this
///   route, on the route's *control tag* `route_control_tag(tag)` = `tag +
///   16384`. Route tags are therefore limited to [0, `route_max_tag` =
///   16383] (`invalid_argument` otherwise); control tags lie in [16384,
///   32767], within the smallest `MPI_TAG_UB` MPI allows, and no other
///   traffic on the backend may use them. A rank that sends posts one
///   32-byte receive per destination on the control tag at `start`; while it
///   completes its sends (the end of `wait`) it waits for each with the
///   backend's own wait in slices of 10 ms (`try_wait`: nothing is given up
///   between slices) and tests the notices in between. A notice from rank R
///   ends its sends to R: they are withdrawn as after a timeout (MPI: cancelled,
///   or kept with their buffer until MPI completes them: see
///   `mpi_backend::sends_in_flight()`), its sends to the other ranks still
///   complete, then `wait` throws `comm_error` naming R, the tag and R's
///   error code. On success nothing extra is sent: the notice receives are
///   withdrawn. Each notice carries the route's sequence number between the
///   two ranks (`detail::route_sequences`, counted alike on both sides, no
///   message exchanged): a stale notice, left over from an earlier failed
///   route with the same tag (MPI delivers a small message even when nobody
///   waits for it), carries an older number and is ignored. Reverse notices
///   need a backend with `try_wait` and `route_sequences()` (local, MPI,
///   `fault_backend` over them); elsewhere a sender learns of a failed
///   receiver from its own timeout.
/// - *void notices* (forward), to its receivers: a rank whose sends fail
///   after they were posted (a timeout in `wait`) sends one, on the control
///   tag, to every destination of a message that did not complete and is
///   sent zero copy from the caller's buffer (a packed message's staging
///   buffer stays with the backend until MPI is done with it). MPI cannot
///   take back a posted send: a receiver that posts late could still get
///   the bytes of the sender's buffer as they are *then*, after the sender's
///   application caught the timeout and reused the buffer. So every rank
///   watches the control tag of the ranks it receives from as well (one
///   receive per peer), and a message whose sender voided it fails
///   (`comm_error` naming the sender) before its receive is reported
///   complete: correct bytes or an error, never silently the reused ones.
///   The notice is posted before `wait` throws, and with it ahead of the
///   reused bytes on the pair's transport, a receiver that takes them sees
///   the notice first.
///
/// @snippet comm.cpp route_transfer

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/buffer.hpp"
#include "disttrain/comm/detail/backend_parts.hpp"
#include "disttrain/comm/detail/wire_header.hpp"
#include "disttrain/comm/notices.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/kernels/copy_blocks.hpp"

namespace disttrain {

/// @brief The largest `transfer_options::tag` (16383): the tags above it, up
/// to 32767 (the smallest `MPI_TAG_UB` MPI allows), are the routes' control
/// tags (`route_control_tag`).
inline constexpr int route_max_tag = 16383;

/// @brief The control tag of a route with tag `tag` (in [0, `route_max_tag`]):
/// `tag + 16384`, in [16384, 32767]. It carries the route's abort notices
/// (see the file comment); no other traffic on the backend may use it.
[[nodiscard]] constexpr int route_control_tag(int tag) noexcept { return tag + route_max_tag + 1; }

/// @brief Options of one route transfer.
///
/// @snippet comm.cpp transfer_options
struct transfer_options {
  int tag = 0;          ///< message tag in [0, `route_max_tag`], e.g. the microbatch id
  bool verify = false;  ///< send and check headers (shapes, samples, checksum)
  std::chrono::milliseconds timeout{-1};  ///< whole-transfer deadline; < 0: the backend's timeout
};

/// @brief One rank's execution of a route plan (see the file comment).
template <comm_backend B>
class route_transfer {
  static_assert(B::memory == memory_space::host,
                "route_transfer packs on the host; device backends pack with disttrain::kernels");

 public:
  route_transfer(B& backend, const route_plan& plan, buffer_pool& pool, transfer_options opts = {})
      : b_(&backend),
        plan_(&plan),
        pool_(&pool),
        opts_(opts),
        me_(backend.rank()),
        watches_(backend, route_control_tag(opts.tag)) {
    require(opts.tag >= 0 && opts.tag <= route_max_tag, "transfer_options.tag", "must be in [0, ",
            route_max_tag, "], got ", opts.tag, ": the tags from ", route_max_tag + 1,
            " up are reserved for the routes' abort notices (control tag = tag + ",
            route_max_tag + 1, ")");
    require(plan.for_rank() < 0 || plan.for_rank() == me_, "route_transfer.plan", "is rank ",
            plan.for_rank(), "'s part of the route (route_options::for_rank)", "; this is rank ",
            me_);
  }
  route_transfer(const route_transfer&) = delete;
  route_transfer& operator=(const route_transfer&) = delete;

  /// @brief Posts every receive and the phase-0 sends. If this fails, every
  /// message this rank has not sent yet is replaced by an abort stamp, so its
  /// receivers fail at once, naming this rank, rather than at their timeout,
  /// and its senders get an abort notice (see the file comment).
  void start(std::span<const std::byte> source, std::span<std::byte> destination) {
    check(!started_, "route_transfer started twice");
    started_ = true;
    try {
      number_peers();
      post_all(source, destination);
    } catch (const error& e) {
      abort_route({.code = e.code(), .owed_from = 0});
      throw;
    }
  }

  /// @brief Completes this rank's part (phase 0, then the fan-out). A failure
  /// sends the abort stamps and notices this rank owes (see the file comment);
  /// an abort notice from a destination throws `comm_error` naming it.
  void wait() {
    check(started_, "route_transfer::wait before start");
    if (done_) return;
    watch_receives_ = true;
    try {
      complete_receives(0);
    } catch (const error& e) {
      // The fan-out this rank owes its TP peers will not come.
      abort_route({.code = e.code(), .owed_from = 1, .drained = 0});
      throw;
    }
    for (int i : plan_->sends_of(me_, 1)) post_send(i, std::span<const std::byte>(dst_));
    try {
      complete_receives(1);
    } catch (const error& e) {
      abort_route({.code = e.code(), .drained = 1});
      throw;
    }
    watch_receives_ = false;
    try {
      complete_sends();
    } catch (const error& e) {
      void_sends(e.code());
      throw;
    }
    done_ = true;
  }

  /// @brief Bytes this rank sent from pool staging buffers (0 = all zero copy).
  [[nodiscard]] std::size_t packed_send_bytes() const noexcept { return packed_send_bytes_; }

 private:
  void post_all(std::span<const std::byte> source, std::span<std::byte> destination) {
    const std::size_t es = plan_->elem_size();
    const auto want_src =
        detail::element_bytes(plan_->source_elements(me_), es, "route.source_bytes");
    const auto want_dst =
        detail::element_bytes(plan_->destination_elements(me_), es, "route.destination_bytes");
    check(source.size() == want_src, "source buffer has ", source.size(),
          " bytes, the route needs ", want_src);
    check(destination.size() == want_dst, "destination buffer has ", destination.size(),
          " bytes, the route needs ", want_dst);
    src_ = source;
    dst_ = destination;
    deadline_ =
        wait_deadline::after(opts_.timeout.count() >= 0 ? opts_.timeout : b_->options().timeout);
    for (int phase = 0; phase < 2; ++phase)
      for (int i : plan_->recvs_of(me_, phase)) post_receive(i);
    watches_.post_all();
    for (int i : plan_->sends_of(me_, 0)) {
      post_send(i, source);
      ++sent0_;
    }
  }

  using request = typename B::request;
  using clock = std::chrono::steady_clock;
  using watch = notice_watch<B>;
  // Requests are declared last so that they are destroyed (cancelled or
  // finished) before the buffers they point into.
  struct outgoing {
    int dst = -1;
    std::size_t bytes = 0;  // the payload's
    buffer_pool::lease staging;
    plan_stamp stamp;
    detail::wire_header hdr;
    std::vector<std::int64_t> piece_words;
    bool completed = false;  // every part of it sent (complete_sends)
    bool borrowed = false;   // the payload is read from the caller's buffer (zero copy)
    request stamp_req, header, pieces, payload;
  };
  struct incoming {
    int msg = 0;
    buffer_pool::lease staging;
    plan_stamp stamp;
    detail::wire_header hdr;
    std::vector<std::int64_t> piece_words;  // verify: the sender's pieces
    std::span<std::byte> landing;           // where the payload arrives
    // How far the message got (drain takes in only what follows a success).
    bool stamped = false, header_ok = false, pieces_posted = false, pieces_ok = false;
    bool payload_posted = false, received = false, finished = false;
    request stamp_req, header, pieces, payload;
  };
  [[nodiscard]] std::string where_self() const {
    return cat("rank ", me_, " route tag ", opts_.tag);
  }
  // `invalid_argument` at where_self() unless `ok`; the text is only built on
  // failure (building it on every call cost ~0.5 us, a tenth of a 64 KiB route).
  template <class... Ts>
  void check(bool ok, const Ts&... parts) const {
    if (!ok) fail(errc::invalid_argument, where_self(), parts...);
  }
  // Waits for `r` under the transfer's deadline (a timeout quotes the
  // configured timeout). While this rank takes its receives
  // (`watch_receives_`) and the backend has notices, it waits in slices of
  // notice_watches::poll_interval and tests its destinations' abort notices in between: a
  // destination that failed fails this rank at once (it would not take this
  // rank's data anyway), not after its receives.
  void wait_for(request& r) {
    if (!watch_receives_) return detail::wait_until(*b_, r, deadline_);
    // The wait comes first: a message that is already here is taken (its
    // stamp may show this rank's own, more precise, error).
    watches_.wait(r, deadline_, [&] {
      watches_.poll();
      if (const watch* w = watches_.first_aborted()) fail_aborted(*w);
    });
  }
  [[nodiscard]] const route_message& msg(int i) const {
    return plan_->messages()[static_cast<std::size_t>(i)];
  }

  void post_receive(int i) {
    const route_message& m = msg(i);
    const std::size_t es = plan_->elem_size();
    incoming& in = in_.emplace_back();
    in.msg = i;
    const auto bytes = detail::element_bytes(m.elements, es, "route.message_bytes");
    if (m.contiguous_recv()) {
      in.landing = dst_.subspan(
          detail::element_bytes(m.recv_blocks[0].dst_offset, es, "route.offset"), bytes);
    } else {
      in.staging = pool_->acquire(bytes);
      in.landing = in.staging.span();
    }
    // The stamp and the payload (or verify header) are posted together: no
    // extra round trip, they match in posting order.
    in.stamp_req = b_->irecv(std::as_writable_bytes(std::span(&in.stamp, 1)), m.src, opts_.tag);
    if (opts_.verify)
      in.header = b_->irecv(std::as_writable_bytes(std::span(&in.hdr, 1)), m.src, opts_.tag);
    else
      post_payload(in, m);
  }
  void post_payload(incoming& in, const route_message& m) {
    in.payload_posted = true;
    in.payload = b_->irecv(in.landing, m.src, opts_.tag);
  }

  void post_send(int i, std::span<const std::byte> from) {
    const route_message& m = msg(i);
    const std::size_t es = plan_->elem_size();
    const auto bytes = detail::element_bytes(m.elements, es, "route.message_bytes");
    outgoing& o = out_.emplace_back();
    o.dst = m.dst;
    o.bytes = bytes;
    std::span<const std::byte> data;
    if (m.contiguous_send()) {
      data = from.subspan(detail::element_bytes(m.send_blocks[0].src_offset, es, "route.offset"),
                          bytes);
      o.borrowed = true;
    } else {
      o.staging = pool_->acquire(bytes);
      kernels::copy_blocks_cpu(from, o.staging.span(), m.send_blocks, es);
      data = o.staging.span();
      packed_send_bytes_ += bytes;
    }
    o.stamp.plan = plan_->fingerprint();
    o.stamp.message = plan_->stamp(m);
    o.stamp.bytes = bytes;
    o.stamp_req = b_->isend(std::as_bytes(std::span(&o.stamp, 1)), m.dst, opts_.tag);
    if (opts_.verify) {
      o.hdr = detail::make_header(m, *plan_);
      o.hdr.checksum = static_cast<std::int64_t>(detail::checksum64(data));
      o.piece_words = detail::encode_pieces(m.pieces);
      o.header = b_->isend(std::as_bytes(std::span(&o.hdr, 1)), m.dst, opts_.tag);
      o.pieces = b_->isend(std::as_bytes(std::span(o.piece_words)), m.dst, opts_.tag);
    }
    o.payload = b_->isend(data, m.dst, opts_.tag);
    // Backends that may have to keep a timed-out send's buffer (MPI) own the
    // staging lease from now on: it is never reused while the transport may read it.
    if constexpr (requires(request & r, std::unique_ptr<send_buffer_owner> p) {
                    r.keep_buffer(std::move(p));
                  }) {
      if (o.staging.data() != nullptr)
        o.payload.keep_buffer(std::make_unique<lease_owner>(std::move(o.staging)));
    }
  }

  // A staging lease handed to the backend with its send.
  struct lease_owner final : send_buffer_owner {
    explicit lease_owner(buffer_pool::lease l) noexcept : lease(std::move(l)) {}
    void detach() noexcept override { lease.detach(); }
    buffer_pool::lease lease;
  };

  void complete_receives(int phase) {
    const std::size_t es = plan_->elem_size();
    for (auto& in : in_) {
      const route_message& m = msg(in.msg);
      if (m.phase != phase) continue;
      // The stamp first (it arrives first): an abort from the peer fails at
      // once; verify mode then names both shapes before the stamp's verdict.
      receive_stamp(in, m);
      if (opts_.verify) check_header(in, m);
      check_stamp(in, m);
      wait_for(in.payload);
      // Its sender may have voided it (a timeout, then its caller reused the
      // buffer): the notice is tested before the bytes count as received.
      watches_.poll();
      if (const watch* w = watches_.find(m.src); w != nullptr && w->aborted) fail_aborted(*w);
      in.received = true;
      if (opts_.verify) {
        const auto got = static_cast<std::int64_t>(detail::checksum64(in.landing));
        if (got != in.hdr.checksum)
          fail(errc::comm_error,
               transfer_info{me_, m.src, opts_.tag, in.landing.size(), false}.where(),
               "verify: payload checksum mismatch: sender rank ", m.src, " computed ",
               static_cast<std::uint64_t>(in.hdr.checksum), ", received bytes give ",
               static_cast<std::uint64_t>(got), " (", in.landing.size(), " bytes)");
      }
      if (!m.contiguous_recv()) {
        kernels::copy_blocks_cpu(in.landing, dst_, m.recv_blocks, es);
        in.staging.reset();
      }
      in.finished = true;
    }
  }

  // After this rank failed in `phase`: takes in the messages of that phase
  // that its live senders have committed to, as far as they fit this rank's
  // plan. A sender cannot tell that its receiver disagreed, so without this
  // its sends, left unmatched by the failed receiver's cancelled receives,
  // would time out or not depending on which rank ran first. A sender is live
  // if one of its stamps of the phase has arrived: it posts all its messages
  // of a phase in one go, so the rest follow at once. Others (a dead or slow
  // peer) are not waited for. Errors here are dropped (the caller rethrows its own).
  void drain(int phase) noexcept {
    std::vector<int> live;
    for (auto& in : in_)
      if (msg(in.msg).phase == phase && stamp_arrived(in)) live.push_back(msg(in.msg).src);
    for (auto& in : in_) {
      const route_message& m = msg(in.msg);
      if (in.finished || m.phase != phase || std::ranges::find(live, m.src) == live.end()) continue;
      try {
        drain_one(in);
      } catch (...) {}
    }
  }
  // Whether `in`'s stamp has arrived; a pending one is tested, not waited for.
  bool stamp_arrived(incoming& in) noexcept {
    try {
      if (!in.stamped && in.stamp_req.valid()) in.stamped = b_->test(in.stamp_req);
    } catch (...) {}
    return in.stamped;
  }
  // The rest of a message whose stamp has arrived (under the transfer's
  // deadline): if the stamp is a data stamp of the planned size, the verify
  // header and pieces and the payload.
  void drain_one(incoming& in) {
    if (in.stamp.magic != plan_stamp::magic_value || in.stamp.bytes != in.landing.size())
      return;  // an abort or a foreign message: nothing of ours follows; another size: not taken
    if (opts_.verify && !in.payload_posted) {
      if (in.header.valid()) receive_header(in);
      if (!in.header_ok) return;  // the header's receive failed: nothing more to take
      if (!in.pieces_posted) post_pieces(in, msg(in.msg));
      if (in.pieces.valid()) receive_pieces(in);
      if (!in.pieces_ok) return;
      post_payload(in, msg(in.msg));
    }
    if (!in.payload.valid()) return;  // received already, or its receive failed
    wait_for(in.payload);
    in.received = true;
  }

  // Waits for the stamp of `in`'s message. Its timeout names the message
  // (the stamp is only its first part); an abort stamp fails at once.
  void receive_stamp(incoming& in, const route_message& m) {
    const transfer_info payload{me_, m.src, opts_.tag, in.landing.size(), false};
    try {
      wait_for(in.stamp_req);
      in.stamped = true;
    } catch (const error& e) {
      if (e.code() == errc::timeout) detail::fail_timeout(payload, deadline_.timeout);
      // A notice, or a dead peer, as is; other errors get the stamp's hint.
      if (e.code() != errc::comm_error || watches_.first_aborted() != nullptr ||
          detail::names_dead_rank(e.message()))
        throw;
      fail(errc::comm_error, e.where(), e.message(), " (this was the ", sizeof(plan_stamp),
           "-byte plan stamp sent ahead of every message of a route: is the peer running "
           "route_transfer for this route?)");
    }
    if (in.stamp.magic == plan_stamp::abort_value)
      fail(errc::comm_error, payload.where(), "rank ", m.src,
           " aborted the route after its own error (",
           to_string(static_cast<errc>(in.stamp.plan % 64)), "): its message of ", payload.bytes,
           " bytes will not come");
  }

  // The always-on plan agreement check: the sender's stamp must be the one
  // this rank's plan gives for the message (a size disagreement names both sizes).
  void check_stamp(const incoming& in, const route_message& m) const {
    const transfer_info t{me_, m.src, opts_.tag, in.landing.size(), false};
    if (in.stamp.magic != plan_stamp::magic_value)
      fail(errc::comm_error, t.where(),
           "the first message of the pair is not a plan stamp (is the peer running "
           "route_transfer for this route?)");
    if (in.stamp.bytes != t.bytes)
      fail(errc::comm_error, t.where(),
           detail::size_mismatch(m.src, std::to_string(in.stamp.bytes), t),
           ": the two ranks planned this route differently (plan fingerprints ",
           hex64(in.stamp.plan), " vs ", hex64(plan_->fingerprint()), ")");
    const std::uint64_t want = plan_->stamp(m);
    if (in.stamp.message != want)
      fail(errc::comm_error, t.where(), "plan disagreement: rank ", m.src, " and rank ", me_,
           " planned this route from different inputs (plan fingerprints ", hex64(in.stamp.plan),
           " vs ", hex64(plan_->fingerprint()), ", message of ", m.elements, " elements, phase ",
           m.phase,
           "): different placements, sample orders, shapes, split axes or options; "
           "transfer_options::verify names both shapes. The destination buffer's "
           "content is unspecified");
  }

  // What a failed rank owes: abort stamps in place of its messages of the
  // phases from `owed_from` on (2: none; phase 0 from its first unsent
  // message), the drain of phase `drained` (< 0: none), abort notices to its
  // senders.
  struct failure {
    errc code = errc::comm_error;
    int owed_from = 2;
    int drained = -1;
  };
  // After this rank failed (see `failure`): its receivers learn it from abort
  // stamps (they fail now rather than at their timeout), its senders from
  // abort notices on the control tag.
  void abort_route(const failure& f) noexcept {
    watch_receives_ = false;  // the drain below takes what live senders sent
    notice_batch<B> batch(*b_);
    try {
      for (int phase = f.owed_from; phase < 2; ++phase) {
        const auto sends = plan_->sends_of(me_, phase);
        for (std::size_t k = phase == 0 ? sent0_ : 0; k < sends.size(); ++k) {
          plan_stamp st;
          st.magic = plan_stamp::abort_value;
          st.plan = static_cast<std::uint64_t>(f.code);
          batch.post(st, msg(sends[k]).dst, opts_.tag);
        }
      }
    } catch (...) {}
    if (f.drained >= 0) drain(f.drained);
    // Its receives are of no use now: withdrawn before the notices, so that
    // a sender that goes on to another route with the same tag does not
    // have its messages taken by them while this rank waits for its notices.
    for (auto& in : in_) {
      in.payload = request{};
      in.pieces = request{};
      in.header = request{};
      in.stamp_req = request{};
    }
    try {
      for (const watch& w : watches_) {
        // A peer that sends to this rank, unless its sends are complete: nothing to tell.
        if (w.void_seq == no_notice_seq || fully_received_from(w.peer)) continue;
        const notice_message n{.code = static_cast<std::uint64_t>(f.code), .seq = w.void_seq};
        batch.post(n.stamp(), w.peer, watches_.tag());
      }
    } catch (...) {}
    batch.wait();
  }
  // After this rank's sends failed in `complete_sends` (e.g. a timeout): a
  // void notice to every destination with a message that did not complete
  // and is read from the caller's buffer (zero copy), so that a late
  // receiver fails instead of taking bytes the caller may reuse (see the
  // file comment). A packed message's staging buffer stays with the backend
  // until the transport is done with it: its late receiver gets its bytes.
  void void_sends(errc code) noexcept {
    notice_batch<B> batch(*b_);
    for (const watch& w : watches_) {
      if (w.abort_seq == no_notice_seq) continue;
      const bool open = std::ranges::any_of(
          out_, [&](const outgoing& o) { return o.dst == w.peer && !o.completed && o.borrowed; });
      if (!open) continue;
      const notice_message n{.magic = plan_stamp::void_value,
                             .code = static_cast<std::uint64_t>(code),
                             .seq = w.abort_seq};
      batch.post(n.stamp(), w.peer, watches_.tag());
    }
    batch.wait();
  }
  // Whether every message `peer` sends this rank in this route has arrived.
  [[nodiscard]] bool fully_received_from(int peer) const {
    for (int phase = 0; phase < 2; ++phase)
      for (int i : plan_->recvs_of(me_, phase)) {
        if (msg(i).src != peer) continue;
        const auto it = std::ranges::find_if(in_, [&](const incoming& in) { return in.msg == i; });
        if (it == in_.end() || !it->received) return false;
      }
    return true;
  }

  // Numbers this route with each peer (see the file comment), first thing in
  // `start`: both ends count it even if one of them fails right after. One
  // pass over the messages, in order: each distinct peer gets a watch, with
  // its number as a destination and as a source (none for this rank itself).
  void number_peers() {
    if constexpr (notice_watches<B>::supported) {
      using side = detail::route_sequences::side;
      auto& seq = b_->route_sequences();
      for (const route_message& m : plan_->messages()) {
        if (m.src == me_ && m.dst != me_) {
          watch& w = watches_.add(m.dst);
          if (w.abort_seq == no_notice_seq) w.abort_seq = seq.next(m.dst, side::sender);
        }
        if (m.dst == me_ && m.src != me_) {
          watch& w = watches_.add(m.src);
          if (w.void_seq == no_notice_seq) w.void_seq = seq.next(m.src, side::receiver);
        }
      }
    }
  }

  // The end of `wait`: completes this rank's sends under the transfer's
  // deadline, watching for abort notices from their destinations. On success
  // the notice receives are withdrawn (nothing was sent on them).
  void complete_sends() {
    if (!watches_.empty()) slice_end_ = clock::now() + notice_watches<B>::poll_interval;
    for (auto& o : out_) {
      bool all = true;  // (a timeout throws out of the loop: `completed` stays false)
      for (request* r : {&o.stamp_req, &o.header, &o.pieces, &o.payload})
        if (!complete_send(o.dst, *r)) {
          all = false;
          break;
        }
      o.completed = all;
      if (!o.payload.valid()) o.staging.reset();
    }
    if (const watch* w = watches_.first_aborted()) fail_aborted(*w);
    watches_.clear();
  }
  // Waits for `r` (a send to `peer`): the backend's own wait, in slices of
  // notice_watches::poll_interval with the notices tested in between where the backend has
  // notices. False (`r` left posted) once `peer` has sent an abort notice.
  bool complete_send(int peer, request& r) {
    if (!r.valid()) return true;
    if constexpr (notice_watches<B>::supported) {
      if (watch* w = watches_.find(peer)) {
        for (;;) {
          if (w->aborted) return false;
          if (b_->try_wait(r, std::min(deadline_.at, slice_end_))) return true;
          watches_.poll();
          if (w->aborted) return false;
          const auto now = clock::now();
          if (now >= deadline_.at) break;
          slice_end_ = now + notice_watches<B>::poll_interval;
        }
        // The deadline passed: the first rank that aborted is the news, else the timeout.
        if (const watch* a = watches_.first_aborted()) fail_aborted(*a);
      }
    }
    wait_for(r);
    return true;
  }
  clock::time_point slice_end_{};  // end of the current wait slice (complete_sends)
  bool watch_receives_ = false;    // wait_for tests the notices (see there)

  // Throws for the abort notice of `w.peer`, after withdrawing this rank's
  // sends to it as after a timeout.
  [[noreturn]] void fail_aborted(const watch& w) {
    if (w.notice.magic == plan_stamp::void_value) fail_voided(w);
    std::size_t bytes = 0, count = 0;
    for (auto& o : out_) {
      const bool pending =
          o.stamp_req.valid() || o.header.valid() || o.pieces.valid() || o.payload.valid();
      if (o.dst != w.peer || !pending) continue;
      bytes += o.bytes;
      ++count;
      o.payload = request{};  // withdrawn (cancelled, or kept by the backend)
      o.pieces = request{};
      o.header = request{};
      o.stamp_req = request{};
    }
    std::string state = "this rank's send was withdrawn";
    if constexpr (requires { b_->sends_in_flight(); }) {
      if (b_->sends_in_flight() > 0)
        state +=
            ", but MPI cannot cancel it and may still read its buffer until the peer receives "
            "it: the backend keeps the request (and a route staging buffer) until then or "
            "until it is destroyed; do not reuse or free a buffer of your own while "
            "sends_in_flight() > 0";
      else
        state += " (cancelled, or it completed meanwhile): its buffer is free";
    } else {
      state += " as after a timeout (see docs/comm.md, \"After a timeout\")";
    }
    fail(errc::comm_error, transfer_info{me_, w.peer, opts_.tag, bytes, true}.where(), "rank ",
         w.peer, " aborted the route after its own error (",
         to_string(static_cast<errc>(w.notice.plan % 64)), "): ",
         count == 0 ? std::string("this rank stops before it sends its messages to it")
                    : cat("it will not receive this rank's ",
                          count == 1 ? std::string("message") : cat(count, " messages"), " of ",
                          bytes, " bytes"),
         " (abort notice on control tag ", route_control_tag(opts_.tag), ")",
         count == 0 ? std::string() : cat("; ", state));
  }

  // Throws for the void notice of `w.peer` (it sends to this rank).
  [[noreturn]] void fail_voided(const watch& w) {
    std::size_t bytes = 0;
    for (const auto& in : in_)
      if (msg(in.msg).src == w.peer) bytes += in.landing.size();
    fail(errc::comm_error, transfer_info{me_, w.peer, opts_.tag, bytes, false}.where(), "rank ",
         w.peer, " voided its messages to this rank after its own error (",
         to_string(static_cast<errc>(w.notice.plan % 64)),
         "): its sends did not complete, and its caller may since have reused the buffer they "
         "read, so their bytes are not taken (void notice on control tag ",
         route_control_tag(opts_.tag), "); the destination buffer's content is unspecified");
  }

  void check_header(incoming& in, const route_message& m) {
    try {
      receive_header(in);
    } catch (const error& e) {
      if (e.code() != errc::comm_error) throw;
      fail(errc::comm_error, e.where(), e.message(), " (verify: this was the ",
           sizeof(detail::wire_header),
           "-byte header of the message; is the sender in verify mode?)");
    }
    const detail::wire_header expect = detail::make_header(m, *plan_);
    const transfer_info t{me_, m.src, opts_.tag, sizeof(detail::wire_header), false};
    post_pieces(in, m);
    receive_pieces(in);
    const auto theirs = detail::decode_pieces(in.piece_words);
    const bool same = in.hdr.src == expect.src && in.hdr.dst == expect.dst &&
                      in.hdr.phase == expect.phase && in.hdr.elements == expect.elements &&
                      in.hdr.elem_size == expect.elem_size && in.hdr.hidden == expect.hidden &&
                      theirs == m.pieces;
    if (!same)
      fail(errc::comm_error, t.where(), "verify: shape mismatch: rank ", me_, " expects ",
           detail::describe_shape(expect, m.pieces), " but rank ", m.src, " sends ",
           detail::describe_shape(in.hdr, theirs));
    post_payload(in, m);
  }
  // Each receive of verify mode, remembering that it succeeded (for drain).
  void receive_header(incoming& in) {
    wait_for(in.header);
    in.header_ok = true;
  }
  void receive_pieces(incoming& in) {
    wait_for(in.pieces);
    in.pieces_ok = true;
  }
  // Verify mode: posts the receive of the sender's pieces, sized by its header.
  void post_pieces(incoming& in, const route_message& m) {
    in.pieces_posted = true;
    const transfer_info t{me_, m.src, opts_.tag, sizeof(detail::wire_header), false};
    in.piece_words.resize(detail::checked_piece_words(in.hdr, m.pieces.size(), m.src, t.where()));
    in.pieces = b_->irecv(std::as_writable_bytes(std::span(in.piece_words)), m.src, opts_.tag);
  }

  B* b_;
  const route_plan* plan_;
  buffer_pool* pool_;
  transfer_options opts_;
  int me_;
  bool started_ = false;
  bool done_ = false;
  std::size_t sent0_ = 0;  // phase-0 sends posted
  std::span<const std::byte> src_;
  std::span<std::byte> dst_;
  wait_deadline deadline_{};
  std::deque<outgoing> out_;  // deque: elements never move (buffers are in flight)
  std::deque<incoming> in_;
  // One per peer: abort notices (abort_seq: this rank sends to it) and void
  // notices (void_seq: it sends to this rank); all are added in number_peers,
  // before any is posted.
  notice_watches<B> watches_;
  std::size_t packed_send_bytes_ = 0;
};

/// @brief `start` + `wait` of a `route_transfer` (blocking).
template <comm_backend B>
void run_route(B& backend, const route_plan& plan, std::span<const std::byte> source,
               std::span<std::byte> destination, buffer_pool& pool, transfer_options opts = {}) {
  route_transfer<B> t(backend, plan, pool, opts);
  t.start(source, destination);
  t.wait();
}

}  // namespace disttrain
