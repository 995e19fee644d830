#pragma once
/// @file device_route_transfer.hpp
/// @brief Runs one rank's part of a `route_plan` on device buffers over the
/// NCCL backend, packing and unpacking with the CUDA `copy_blocks` kernel.
///
/// Needs both `disttrain::nccl` and `disttrain::kernels` (CMake options
/// `DISTTRAIN_ENABLE_NCCL=ON` and `DISTTRAIN_ENABLE_CUDA=ON`).
///
/// Everything is stream-ordered on the backend's stream, so `start` enqueues
/// the whole route and returns: pack phase-0 sends, one NCCL group with the
/// phase-0 receives and sends, unpack, pack the fan-out, a second group for
/// phase 1, unpack. `wait` waits for the last requests with the deadline
/// (asynchronous NCCL errors abort the communicator, see nccl_backend.hpp).
/// Contiguous messages go straight from / into the caller's buffers. The
/// device block lists are uploaded once in the constructor, so one object can
/// serve every microbatch with the same plan. Verify mode is host-only
/// (`route_transfer`); requesting it here is `errc::unsupported`.
///
/// @code
/// disttrain::basic_buffer_pool<disttrain::device_allocator> pool;
/// disttrain::device_route_transfer t(nccl, plan, pool);
/// t.start(src_dev, dst_dev);   // enqueued on nccl.stream()
/// t.wait();
/// @endcode

#if !defined(DISTTRAIN_HAS_NCCL)
#error \
    "disttrain/comm/device_route_transfer.hpp needs NCCL: link disttrain::nccl (-DDISTTRAIN_ENABLE_NCCL=ON), which defines DISTTRAIN_HAS_NCCL"
#endif
#if !defined(DISTTRAIN_HAS_CUDA_KERNELS)
#error \
    "disttrain/comm/device_route_transfer.hpp needs the CUDA kernels: link disttrain::kernels (-DDISTTRAIN_ENABLE_CUDA=ON), which defines DISTTRAIN_HAS_CUDA_KERNELS"
#endif

#include <chrono>
#include <cstddef>
#include <deque>
#include <span>
#include <vector>

#include "disttrain/comm/buffer.hpp"
#include "disttrain/comm/nccl_backend.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "disttrain/kernels/copy_blocks_cuda.hpp"

namespace disttrain {

/// @brief One rank's execution of a route plan on device memory (see the file comment).
class device_route_transfer {
 public:
  using pool_type = basic_buffer_pool<device_allocator>;

  device_route_transfer(nccl_backend& backend, const route_plan& plan, pool_type& pool,
                        transfer_options opts = {})
      : b_(&backend), plan_(&plan), pool_(&pool), opts_(opts), me_(backend.rank()) {
    require(plan.for_rank() < 0 || plan.for_rank() == me_, "route_transfer.plan", "is rank ",
            plan.for_rank(), "'s part of the route (route_options::for_rank)", "; this is rank ",
            me_);
    if (opts.verify)
      fail(errc::unsupported, cat("rank ", me_, " route tag ", opts.tag),
           "verify mode runs on host buffers only (route_transfer); disable it for device routes");
    for (int phase = 0; phase < 2; ++phase) {
      for (int i : plan.sends_of(me_, phase)) add_step(i, phase, true);
      for (int i : plan.recvs_of(me_, phase)) add_step(i, phase, false);
    }
  }
  device_route_transfer(const device_route_transfer&) = delete;
  device_route_transfer& operator=(const device_route_transfer&) = delete;

  /// @brief Enqueues the whole route on the backend's stream.
  void start(std::span<const std::byte> source, std::span<std::byte> destination) {
    const std::size_t es = plan_->elem_size();
    const auto want_src =
        detail::element_bytes(plan_->source_elements(me_), es, "route.source_bytes");
    const auto want_dst =
        detail::element_bytes(plan_->destination_elements(me_), es, "route.destination_bytes");
    const std::string w = cat("rank ", me_, " route tag ", opts_.tag);
    require(source.size() == want_src, w, "source buffer has ", source.size(),
            " bytes, the route needs ", want_src);
    require(destination.size() == want_dst, w, "destination buffer has ", destination.size(),
            " bytes, the route needs ", want_dst);
    reqs_.clear();
    for (int phase = 0; phase < 2; ++phase) {
      std::span<const std::byte> from =
          phase == 0 ? source : std::span<const std::byte>(destination);
      for (auto& s : steps_)  // pack
        if (s.phase == phase && s.is_send && !s.contiguous)
          DISTTRAIN_CUDA_CHECK(kernels::launch_copy_blocks(from.data(), s.staging.data(),
                                                           s.blocks.list(), es, b_->stream()));
      b_->group_start();
      for (auto& s : steps_) {
        if (s.phase != phase) continue;
        const route_message& m = plan_->messages()[static_cast<std::size_t>(s.msg)];
        const auto bytes = detail::element_bytes(m.elements, es, "route.message_bytes");
        if (s.is_send) {
          const std::byte* p =
              s.contiguous ? from.data() + detail::element_bytes(m.send_blocks[0].src_offset, es,
                                                                 "route.offset")
                           : s.staging.data();
          reqs_.push_back(b_->isend({p, bytes}, m.dst, opts_.tag));
        } else {
          std::byte* p =
              s.contiguous ? destination.data() + detail::element_bytes(m.recv_blocks[0].dst_offset,
                                                                        es, "route.offset")
                           : s.staging.data();
          reqs_.push_back(b_->irecv({p, bytes}, m.src, opts_.tag));
        }
      }
      b_->group_end();
      for (auto& s : steps_)  // unpack
        if (s.phase == phase && !s.is_send && !s.contiguous)
          DISTTRAIN_CUDA_CHECK(kernels::launch_copy_blocks(s.staging.data(), destination.data(),
                                                           s.blocks.list(), es, b_->stream()));
    }
    // Marks the end of the unpack kernels (requests only cover the NCCL operations).
    reqs_.push_back(b_->fence(opts_.tag));
  }

  /// @brief Waits until every operation of this rank's part completed on the stream.
  void wait() {
    const auto d =
        wait_deadline::after(opts_.timeout.count() >= 0 ? opts_.timeout : b_->options().timeout);
    for (auto& r : reqs_)
      if (r.valid()) detail::wait_until(*b_, r, d);
    reqs_.clear();
  }

 private:
  struct step {
    int msg = 0;
    int phase = 0;
    bool is_send = true;
    bool contiguous = true;
    kernels::device_blocks blocks;  // pack or unpack list (non-contiguous only)
    pool_type::lease staging;
  };

  void add_step(int i, int phase, bool is_send) {
    const route_message& m = plan_->messages()[static_cast<std::size_t>(i)];
    step& s = steps_.emplace_back();
    s.msg = i;
    s.phase = phase;
    s.is_send = is_send;
    s.contiguous = is_send ? m.contiguous_send() : m.contiguous_recv();
    if (!s.contiguous) {
      s.blocks.upload(is_send ? m.send_blocks : m.recv_blocks, b_->stream());
      s.staging = pool_->acquire(
          detail::element_bytes(m.elements, plan_->elem_size(), "route.message_bytes"));
    }
  }

  nccl_backend* b_;
  const route_plan* plan_;
  pool_type* pool_;
  transfer_options opts_;
  int me_;
  std::deque<step> steps_;
  std::vector<nccl_backend::request> reqs_;
};

}  // namespace disttrain
