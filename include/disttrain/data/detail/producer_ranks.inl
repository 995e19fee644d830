#pragma once
/// @file producer_ranks.inl
/// @brief Bodies of `sample_producer` and `sample_feed` (included at the end
/// of `data/producer_ranks.hpp`) and the wire protocol between them.
///
/// Tags (t = `producer_ranks_config::tag`), per batch, in order:
///   t+0 producer -> consumer  metadata head: u64 batch, u64 payload bytes
///   t+1 producer -> consumer  metadata: u64 batch, u64 n, n records
///                             (u64 id, u8 ok, then ok: u32 parts, u64 size per
///                             part, bytes meta; bad: string reason)
///   t+2 consumer -> producer  request head: u64 batch, u64 n
///   t+3 consumer -> producer  request: n x (u64 id, u64 part)   (only if n > 0)
///   t+4 producer -> consumer  one message per requested non-empty part, in order

#include <algorithm>
#include <array>
#include <exception>
#include <set>

#include "disttrain/data/detail/wire.hpp"

namespace disttrain {
namespace detail {

enum feed_tag : int { meta_head = 0, meta_body = 1, req_head = 2, req_body = 3, part_data = 4 };

inline void validate_feed_config(const producer_ranks_config& c, int world, int self, bool producer,
                                 const batch_sampler& sampler) {
  require(!c.producers.empty(), "producer_ranks_config.producers", "no producer rank");
  require(!c.consumers.empty(), "producer_ranks_config.consumers", "no consumer rank");
  require_positive(c.prefetch, "producer_ranks_config.prefetch");
  require(c.timeout.count() > 0, "producer_ranks_config.timeout", "must be > 0 ms");
  require(c.tag >= 0, "producer_ranks_config.tag", "must be >= 0, got ", c.tag);
  require(static_cast<bool>(sampler), "batch_sampler", "empty function");
  std::set<int> seen;
  auto check = [&](const std::vector<int>& ranks, const char* field) {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      require(ranks[i] >= 0 && ranks[i] < world, [&] { return cat("producer_ranks_config.", field, "[", i, "]"); },
              "rank ", ranks[i], " outside the world of ", world, " ranks");
      require(seen.insert(ranks[i]).second, [&] { return cat("producer_ranks_config.", field, "[", i, "]"); },
              "rank ", ranks[i], " listed twice (producers and consumers are disjoint)");
    }
  };
  check(c.producers, "producers");
  check(c.consumers, "consumers");
  const auto& mine = producer ? c.producers : c.consumers;
  require(std::find(mine.begin(), mine.end(), self) != mine.end(),
          producer ? "sample_producer" : "sample_feed", "rank ", self, " is not among the ",
          producer ? "producers" : "consumers");
}

// The batch's ids, checked unique (the same check on every rank).
inline std::vector<std::uint64_t> batch_ids(const batch_sampler& sampler, std::uint64_t batch) {
  auto ids = sampler(batch);
  require(!ids.empty(), "batch_sampler", "batch ", batch, " is empty");
  auto sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  require(dup == sorted.end(), "batch_sampler", "sample id ", dup == sorted.end() ? 0 : *dup,
          " appears twice in batch ", batch);
  return ids;
}

inline std::string id_list(const std::vector<std::uint64_t>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += cat(i ? ", " : "", ids[i]);
  return s + "]";
}

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span<const T>(&v, 1));
}
template <class T>
std::span<std::byte> writable_bytes_of(T& v) {
  return std::as_writable_bytes(std::span<T>(&v, 1));
}

// Keeps a send buffer alive for a backend that may still read it after a
// timed-out send (MPI): see `send_buffer_owner`.
struct shared_bytes_owner final : send_buffer_owner {
  explicit shared_bytes_owner(std::shared_ptr<const std::vector<std::byte>> b)
      : bytes(std::move(b)) {}
  void detach() noexcept override {}
  std::shared_ptr<const std::vector<std::byte>> bytes;
};

// A shared byte copy of a contiguous range of trivially copyable values.
template <class R>
std::shared_ptr<const std::vector<std::byte>> shared_copy(const R& range) {
  const auto b = std::as_bytes(std::span(range));
  return std::make_shared<const std::vector<std::byte>>(b.begin(), b.end());
}

template <comm_backend B>
typename B::request send_shared(B& b, const std::shared_ptr<const std::vector<std::byte>>& buf,
                                int peer, int tag) {
  auto req = b.isend(std::span<const std::byte>(*buf), peer, tag);
  if constexpr (requires(typename B::request & r, std::unique_ptr<send_buffer_owner> p) {
                  r.keep_buffer(std::move(p));
                })
    req.keep_buffer(std::make_unique<shared_bytes_owner>(buf));
  return req;
}

// Waits for `req` until `deadline`; a failure is rethrown with the same code at
// `who` ("producer rank P" / "consumer rank C"), saying what was awaited.
template <comm_backend B, class... Ts>
void wait_naming(B& b, typename B::request& req, const wait_deadline& deadline,
                 const std::string& who, const Ts&... what) {
  try {
    wait_until(b, req, deadline);
  } catch (const error& e) {
    fail(e.code(), who, what..., " (", e.what(), ")");
  }
}

}  // namespace detail

// ---- sample_producer ---------------------------------------------------------

template <comm_backend B, part_source S>
struct sample_producer<B, S>::staged {
  std::uint64_t batch = 0;
  std::vector<std::uint64_t> ids;  // my share, batch order
  // id -> its parts (good samples only), shared with the backend (see send_shared)
  std::map<std::uint64_t, std::vector<std::shared_ptr<const std::vector<std::byte>>>> parts;
  std::shared_ptr<const std::vector<std::byte>> head, body;  // metadata messages
  std::vector<typename B::request> meta_sends;
  std::unique_ptr<error> failure;  // bad sample under bad_sample_policy::fail
};

template <comm_backend B, part_source S>
sample_producer<B, S>::sample_producer(B& backend, const S& source, producer_ranks_config cfg,
                                       batch_sampler sampler)
    : b_(backend), source_(source), cfg_(std::move(cfg)), sampler_(std::move(sampler)) {
  detail::validate_feed_config(cfg_, b_.size(), b_.rank(), true, sampler_);
  index_ = static_cast<std::size_t>(
      std::find(cfg_.producers.begin(), cfg_.producers.end(), b_.rank()) - cfg_.producers.begin());
}

template <comm_backend B, part_source S>
void sample_producer<B, S>::run(std::uint64_t first, std::uint64_t count) {
  staged_.clear();
  for (std::uint64_t k = first; k < first + count; ++k) {
    if (staged_.size() == cfg_.prefetch) {  // backpressure: deliver the oldest first
      serve(staged_.front());
      staged_.pop_front();
    }
    prepare(k);
    max_staged_ = std::max(max_staged_, staged_.size());
  }
  while (!staged_.empty()) {
    serve(staged_.front());
    staged_.pop_front();
  }
}

template <comm_backend B, part_source S>
void sample_producer<B, S>::prepare(std::uint64_t batch) {
  staged& st = staged_.emplace_back();
  st.batch = batch;
  const auto ids = detail::batch_ids(sampler_, batch);
  for (std::size_t i :
       producer_share(ids, batch, {.index = index_, .count = cfg_.producers.size()}))
    st.ids.push_back(ids[i]);

  const std::size_t n_parts = source_.parts();
  auto body = std::make_shared<std::vector<std::byte>>();
  detail::byte_writer w(*body);
  w.put(batch);
  w.put(static_cast<std::uint64_t>(st.ids.size()));
  std::vector<std::byte> meta_bytes;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t id : st.ids) {
    std::vector<std::vector<std::byte>> parts(n_parts);
    std::string reason;
    meta_bytes.clear();
    try {
      const item_type item = source_.load(id);
      for (std::size_t p = 0; p < n_parts; ++p) source_.encode_part(item, p, parts[p]);
      source_.encode_meta(source_.meta(item), meta_bytes);
    } catch (const std::exception& e) {
      reason = e.what();
    } catch (...) {
      reason = "unknown exception from Source::load";
    }
    ++prepared_;
    w.put(id);
    w.put(static_cast<std::uint8_t>(reason.empty() ? 1 : 0));
    if (!reason.empty()) {
      w.put_string(reason);
      if (cfg_.on_bad_sample == bad_sample_policy::fail && !st.failure)
        st.failure = std::make_unique<error>(
            errc::invalid_argument, cat("sample ", id),
            cat("batch ", batch, ", producer rank ", b_.rank(), ": ", reason));
      continue;
    }
    w.put(static_cast<std::uint32_t>(n_parts));
    for (const auto& p : parts) w.put(static_cast<std::uint64_t>(p.size()));
    w.put_bytes(meta_bytes);
    auto& shared = st.parts[id];
    for (auto& p : parts)
      shared.push_back(std::make_shared<const std::vector<std::byte>>(std::move(p)));
  }
  prepare_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  st.head = detail::shared_copy(std::array<std::uint64_t, 2>{batch, body->size()});
  st.body = std::move(body);
  for (int c : cfg_.consumers) {
    st.meta_sends.push_back(detail::send_shared(b_, st.head, c, cfg_.tag + detail::meta_head));
    st.meta_sends.push_back(detail::send_shared(b_, st.body, c, cfg_.tag + detail::meta_body));
  }
}

template <comm_backend B, part_source S>
void sample_producer<B, S>::serve(staged& st) {
  const auto deadline = wait_deadline::after(cfg_.timeout);
  const auto consumer_name = [](int c) { return cat("consumer rank ", c); };
  for (std::size_t i = 0; i < st.meta_sends.size(); ++i)
    detail::wait_naming(b_, st.meta_sends[i], deadline, consumer_name(cfg_.consumers[i / 2]),
                        "metadata of batch ", st.batch, " not received");
  if (st.failure) throw *st.failure;

  const std::size_t n = cfg_.consumers.size();
  std::vector<std::array<std::uint64_t, 2>> heads(n);
  std::vector<typename B::request> head_reqs;
  for (std::size_t c = 0; c < n; ++c)
    head_reqs.push_back(b_.irecv(detail::writable_bytes_of(heads[c]), cfg_.consumers[c],
                                 cfg_.tag + detail::req_head));
  std::vector<typename B::request> sends;
  for (std::size_t c = 0; c < n; ++c) {
    const int rank = cfg_.consumers[c];
    detail::wait_naming(b_, head_reqs[c], deadline, consumer_name(rank), "requests for batch ",
                        st.batch, " never arrived");
    if (heads[c][0] != st.batch)
      fail(errc::comm_error, consumer_name(rank), "requested batch ", heads[c][0],
           " while producer rank ", b_.rank(), " serves batch ", st.batch);
    std::vector<std::uint64_t> wanted(static_cast<std::size_t>(2 * heads[c][1]));
    if (!wanted.empty()) {
      auto r =
          b_.irecv(std::as_writable_bytes(std::span(wanted)), rank, cfg_.tag + detail::req_body);
      detail::wait_naming(b_, r, deadline, consumer_name(rank), "request list of batch ", st.batch,
                          " never arrived");
    }
    for (std::size_t q = 0; q < wanted.size(); q += 2) {
      const auto it = st.parts.find(wanted[q]);
      if (it == st.parts.end() || wanted[q + 1] >= it->second.size())
        fail(errc::comm_error, consumer_name(rank), "requested sample ", wanted[q], " part ",
             wanted[q + 1], " of batch ", st.batch, ", which producer rank ", b_.rank(),
             " does not hold");
      const auto& bytes = it->second[static_cast<std::size_t>(wanted[q + 1])];
      if (bytes->empty()) continue;  // both sides know the size: nothing to send
      sends.push_back(detail::send_shared(b_, bytes, rank, cfg_.tag + detail::part_data));
    }
  }
  for (auto& r : sends)
    detail::wait_naming(b_, r, deadline, cat("producer rank ", b_.rank()),
                        "a sample part of batch ", st.batch, " was not received by its consumer");
}

// ---- sample_feed -------------------------------------------------------------

template <comm_backend B, part_source S>
sample_feed<B, S>::sample_feed(B& backend, const S& source, producer_ranks_config cfg,
                               batch_sampler sampler)
    : b_(backend), source_(source), cfg_(std::move(cfg)), sampler_(std::move(sampler)) {
  detail::validate_feed_config(cfg_, b_.size(), b_.rank(), false, sampler_);
}

template <comm_backend B, part_source S>
void sample_feed<B, S>::expect(std::uint64_t batch, phase ph, const char* call) const {
  static constexpr const char* names[] = {"metadata", "request", "receive"};
  if (phase_ == ph && (batch == next_ || (ph == phase::metadata && !started_))) return;
  fail(errc::invalid_argument, cat("sample_feed.", call), "called for batch ", batch,
       " while batch ", next_, " awaits ", names[static_cast<int>(phase_)],
       " (per batch, in increasing order: metadata, request, receive)");
}

template <comm_backend B, part_source S>
const batch_metadata<typename S::meta_type>& sample_feed<B, S>::metadata(std::uint64_t batch) {
  expect(batch, phase::metadata, "metadata");
  started_ = true;
  next_ = batch;
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = wait_deadline::after(cfg_.timeout);
  const std::size_t np = cfg_.producers.size();
  const auto ids = detail::batch_ids(sampler_, batch);
  held_.assign(np, {});
  for (std::size_t p = 0; p < np; ++p)
    for (std::size_t i : producer_share(ids, batch, {.index = p, .count = np}))
      held_[p].push_back(ids[i]);
  const auto producer_name = [&](std::size_t p) {
    return cat("producer rank ", cfg_.producers[p]);
  };
  const auto held_text = [&](std::size_t p) {
    return cat("; it holds samples ", detail::id_list(held_[p]), " of batch ", batch);
  };

  std::vector<std::array<std::uint64_t, 2>> heads(np);
  std::vector<typename B::request> reqs;
  for (std::size_t p = 0; p < np; ++p)
    reqs.push_back(b_.irecv(detail::writable_bytes_of(heads[p]), cfg_.producers[p],
                            cfg_.tag + detail::meta_head));
  batch_metadata<meta_type> md;
  md.batch = batch;
  const std::size_t n_parts = source_.parts();
  for (std::size_t p = 0; p < np; ++p) {
    detail::wait_naming(b_, reqs[p], deadline, producer_name(p), "metadata of batch ", batch,
                        " did not arrive", held_text(p));
    if (heads[p][0] != batch)
      fail(errc::comm_error, producer_name(p), "sent metadata of batch ", heads[p][0],
           " where batch ", batch, " was expected");
    std::vector<std::byte> body(static_cast<std::size_t>(heads[p][1]));
    auto r = b_.irecv(std::span<std::byte>(body), cfg_.producers[p], cfg_.tag + detail::meta_body);
    detail::wait_naming(b_, r, deadline, producer_name(p), "metadata of batch ", batch,
                        " did not arrive", held_text(p));
    detail::byte_reader in(body, cat(producer_name(p), " metadata of batch ", batch));
    const auto got_batch = in.get<std::uint64_t>();
    const auto n = in.get<std::uint64_t>();
    if (got_batch != batch || n != held_[p].size())
      fail(errc::comm_error, producer_name(p), "metadata describes batch ", got_batch, " with ", n,
           " samples; expected batch ", batch, " with ", held_[p].size());
    for (std::uint64_t id : held_[p]) {
      const auto got_id = in.get<std::uint64_t>();
      if (got_id != id)
        fail(errc::comm_error, producer_name(p), "metadata of batch ", batch, " lists sample ",
             got_id, " where sample ", id, " was expected");
      if (in.get<std::uint8_t>() == 0) {
        skipped_sample bad{id, cfg_.producers[p], in.get_string()};
        if (cfg_.on_bad_sample == bad_sample_policy::fail)
          fail(errc::invalid_argument, cat("sample ", id), "batch ", batch, ", producer rank ",
               bad.producer, ": ", bad.reason);
        md.skipped.push_back(std::move(bad));
        continue;
      }
      sample_record<meta_type> rec;
      rec.id = id;
      rec.producer = cfg_.producers[p];
      const auto parts = in.get<std::uint32_t>();
      if (parts != n_parts)
        fail(errc::comm_error, producer_name(p), "sample ", id, " has ", parts,
             " parts, the source on this rank has ", n_parts);
      for (std::size_t q = 0; q < n_parts; ++q) rec.part_bytes.push_back(in.get<std::uint64_t>());
      rec.meta = source_.decode_meta(in.get_bytes());
      md.samples.push_back(std::move(rec));
    }
    if (!in.done())
      fail(errc::comm_error, producer_name(p), "metadata of batch ", batch, " has trailing bytes");
  }
  const auto by_id = [](const auto& a, const auto& b) { return a.id < b.id; };
  std::sort(md.samples.begin(), md.samples.end(), by_id);
  std::sort(md.skipped.begin(), md.skipped.end(), by_id);
  current_ = std::move(md);
  index_.clear();
  for (std::size_t i = 0; i < current_.samples.size(); ++i) index_[current_.samples[i].id] = i;
  phase_ = phase::request;
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return current_;
}

template <comm_backend B, part_source S>
void sample_feed<B, S>::request(std::uint64_t batch, std::span<const sample_request> order) {
  expect(batch, phase::request, "request");
  const std::size_t np = cfg_.producers.size();
  std::map<int, std::size_t> producer_index;
  for (std::size_t p = 0; p < np; ++p) producer_index[cfg_.producers[p]] = p;
  std::vector<std::vector<std::uint64_t>> lists(np);
  std::set<std::pair<std::uint64_t, std::uint32_t>> seen;
  pending_.clear();
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& q = order[i];
    const auto where = cat("sample_feed.request[", i, "]");
    const auto it = index_.find(q.id);
    require(it != index_.end(), where, "sample ", q.id, " is not in batch ", batch,
            " (or was skipped)");
    const auto& rec = current_.samples[it->second];
    require(q.part < rec.part_bytes.size(), where, "part ", q.part, " of sample ", q.id,
            " out of range (", rec.part_bytes.size(), " parts)");
    require(seen.emplace(q.id, q.part).second, where, "sample ", q.id, " part ", q.part,
            " requested twice");
    const std::size_t p = producer_index.at(rec.producer);
    lists[p].push_back(q.id);
    lists[p].push_back(q.part);
    pending_.push_back({p, {q.id, q.part, rec.producer, {}}, {}});
    pending_.back().part.bytes.resize(static_cast<std::size_t>(rec.part_bytes[q.part]));
  }
  // The buffers live until the next request (local backends read them when
  // the producer matches; MPI also keeps them itself after a timeout).
  request_sends_.clear();
  request_bufs_.clear();
  for (std::size_t p = 0; p < np; ++p) {
    const int peer = cfg_.producers[p];
    auto send = [&](std::shared_ptr<const std::vector<std::byte>> buf, int tag) {
      request_sends_.emplace_back(p, detail::send_shared(b_, buf, peer, cfg_.tag + tag));
      request_bufs_.push_back(std::move(buf));
    };
    send(detail::shared_copy(std::array<std::uint64_t, 2>{batch, lists[p].size() / 2}),
         detail::req_head);
    if (!lists[p].empty()) send(detail::shared_copy(lists[p]), detail::req_body);
  }
  // Receives in request order: per producer, the order it sends in.
  for (auto& pp : pending_)
    if (!pp.part.bytes.empty())
      pp.req = b_.irecv(std::span<std::byte>(pp.part.bytes), cfg_.producers[pp.producer_index],
                        cfg_.tag + detail::part_data);
  phase_ = phase::receive;
}

template <comm_backend B, part_source S>
std::vector<received_part> sample_feed<B, S>::receive(std::uint64_t batch) {
  expect(batch, phase::receive, "receive");
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = wait_deadline::after(cfg_.timeout);
  const auto held_text = [&](std::size_t p) {
    return cat("; it holds samples ", detail::id_list(held_[p]), " of batch ", batch);
  };
  for (auto& [p, req] : request_sends_)
    detail::wait_naming(b_, req, deadline, cat("producer rank ", cfg_.producers[p]),
                        "the request list of batch ", batch, " was not taken", held_text(p));
  std::vector<received_part> out;
  out.reserve(pending_.size());
  for (auto& pp : pending_) {
    if (!pp.part.bytes.empty()) {
      const std::size_t p = pp.producer_index;
      detail::wait_naming(b_, pp.req, deadline, cat("producer rank ", cfg_.producers[p]), "sample ",
                          pp.part.id, " part ", pp.part.part, " of batch ", batch,
                          " did not arrive", held_text(p));
    }
    out.push_back(std::move(pp.part));
  }
  pending_.clear();
  phase_ = phase::metadata;
  ++next_;
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace disttrain
