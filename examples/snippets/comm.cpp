// The examples of the comm part (disttrain/comm/*.hpp): see snippets.hpp.
// MPI-only examples are in comm_mpi.cpp; NCCL/CUDA ones stay in the headers.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "disttrain/comm.hpp"
#include "disttrain/comm/fault_backend.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "local_ranks.hpp"
#include "snippets.hpp"

namespace {

using namespace std::chrono_literals;
using snippets::check;

using snippets::run_ranks;

// A route of 4 samples from an encoder (DP 2, ranks 0 and 1) to a backbone
// (rank 2), `rows` x 8 floats per sample, and every rank's buffers for it.
struct small_route {
  disttrain::topology layout{{{"enc", disttrain::module_role::encoder, 1, 1, 2},
                              {"llm", disttrain::module_role::backbone, 1, 1, 1}}};
  disttrain::route_plan plan =
      disttrain::plan_boundary_route(layout, 0, disttrain::sample_placement::round_robin(4, 2),
                                     disttrain::sample_placement::round_robin(4, 1),
                                     disttrain::activation_shape{{1, 2, 3, 4}, 8, 4});
  std::vector<std::vector<float>> src, dst;
  small_route() {
    for (int r = 0; r < 3; ++r) {
      src.emplace_back(static_cast<std::size_t>(plan.source_elements(r)));
      dst.emplace_back(static_cast<std::size_t>(plan.destination_elements(r)));
      for (std::size_t i = 0; i < src.back().size(); ++i)
        src.back()[i] = static_cast<float>(r * 1000) + static_cast<float>(i);
    }
  }
};

//! [backend]
template <disttrain::comm_backend B>
void ping(B& b, std::span<std::byte> buf) {
  if (b.rank() == 0) {
    auto r = b.isend(buf, 1, 7);
    b.wait(r);
  } else if (b.rank() == 1) {
    auto r = b.irecv(buf, 0, 7);
    b.wait(r);
  }
}
//! [backend]

void backend() {
  disttrain::local_world world(2, {2000ms});
  std::vector<std::byte> got;
  run_ranks(world, [&](disttrain::local_backend& b) {
    std::vector<std::byte> buf(4, std::byte{static_cast<unsigned char>(b.rank() == 0 ? 9 : 0)});
    ping(b, buf);
    if (b.rank() == 1) got = buf;
  });
  check(got == std::vector<std::byte>(4, std::byte{9}), "rank 1 received rank 0's bytes");
}

void comm_options() {
  //! [comm_options]
  disttrain::comm_options o;
  o.timeout = std::chrono::milliseconds(200);  // short, for tests
  //! [comm_options]
  check(o.timeout.count() == 200, "comm_options");
}

void transfer_info() {
  //! [transfer_info]
  disttrain::transfer_info t{0, 3, 12, 4096, true};
  // t.where() == "rank 0 -> rank 3 tag 12"
  //! [transfer_info]
  check(t.where() == "rank 0 -> rank 3 tag 12", "where");
}

void wait_deadline() {
  disttrain::local_world world(2, {2000ms});
  run_ranks(world, [](disttrain::local_backend& backend) {
    std::vector<std::byte> a(8), b(8);
    std::vector<disttrain::local_backend::request> reqs;
    const int peer = 1 - backend.rank();
    reqs.push_back(backend.isend(a, peer, 1));
    reqs.push_back(backend.irecv(b, peer, 1));
    //! [wait_deadline]
    const auto d = disttrain::wait_deadline::after(std::chrono::milliseconds(2000));
    for (auto& r : reqs) backend.wait(r, d);  // a timeout says "within 2000 ms"
    //! [wait_deadline]
  });
}

void wait_all() {
  disttrain::local_world world(2, {2000ms});
  run_ranks(world, [](disttrain::local_backend& backend) {
    std::vector<std::byte> a(8), b(8);
    const int peer = 1 - backend.rank();
    std::vector<disttrain::local_backend::request> init;
    init.push_back(backend.isend(a, peer, 2));
    init.push_back(backend.irecv(b, peer, 2));
    //! [wait_all]
    std::vector<disttrain::local_backend::request> reqs = std::move(init);
    disttrain::wait_all(backend, reqs);
    //! [wait_all]
  });
}

void buffer_file() {
  //! [buffer_file]
  disttrain::buffer_pool pool;
  {
    auto b = pool.acquire(1 << 20);  // >= 1 MiB, 64-byte aligned
    disttrain::buffer_ref r = b.ref();
    std::memset(r.data, 0, r.size);
  }  // returned to the pool here
  // pool.stats().allocations == 1; the next acquire(1 << 20) reuses it
  //! [buffer_file]
  check(pool.stats().allocations == 1, "one allocation");
  { auto again = pool.acquire(1 << 20); }
  check(pool.stats().allocations == 1 && pool.stats().reuses == 1, "reused");
}

void buffer_ref() {
  //! [buffer_ref]
  std::vector<float> v(8);
  auto r = disttrain::buffer_ref::of(std::span(v));  // r.size == 32
  auto tail = r.subref(16, 16);
  //! [buffer_ref]
  check(r.size == 32 && tail.size == 16 && tail.data == r.data + 16, "subref");
}

void fault_backend() {
  small_route route;
  const auto& plan = route.plan;
  disttrain::local_world world(3, {std::chrono::milliseconds(100)});
  // Ranks 0 and 2 run their part of the route unfaulted on other threads (a
  // fault may make them fail: their errors are expected).
  std::vector<std::thread> others;
  for (int r : {0, 2})
    others.emplace_back([&, r] {
      disttrain::buffer_pool own;
      auto b = world.endpoint(r);
      try {
        disttrain::run_route(
            b, plan, std::as_bytes(std::span(route.src[static_cast<std::size_t>(r)])),
            std::as_writable_bytes(std::span(route.dst[static_cast<std::size_t>(r)])), own,
            {.verify = true});
      } catch (const disttrain::error&) {}
    });
  const auto src = std::as_bytes(std::span(route.src[1]));
  const auto dst = std::as_writable_bytes(std::span(route.dst[1]));
  disttrain::buffer_pool pool;
  std::size_t faults = 0;
  try {
    //! [fault_backend]
    auto ep = world.endpoint(1);
    disttrain::fault_options fo;
    fo.seed = 7;
    fo.rate = 0.2;
    fo.on_kill = [&](int r) { world.mark_dead(r); };
    disttrain::fault_backend<disttrain::local_backend> fb(ep, fo);
    disttrain::run_route(fb, plan, src, dst, pool, {.verify = true});
    for (const auto& f : fb.faults()) std::puts(disttrain::to_string(f.kind));
    //! [fault_backend]
    faults = fb.faults().size();
  } catch (const disttrain::error&) {
    faults = 1;  // a kill: rank 1 stops
  }
  for (auto& t : others) t.join();
  std::printf("fault_backend: %zu fault(s) on rank 1\n", faults);
}

void fault_options() {
  //! [fault_options]
  disttrain::fault_options o;
  o.seed = 42;
  o.rate = 0.1;  // one send in ten
  o.kinds = {disttrain::fault_kind::drop, disttrain::fault_kind::corrupt};
  //! [fault_options]
  check(o.kinds.size() == 2, "fault_options");
}

void local_backend_file() {
  // A failed wait on the thread would end the program (std::terminate).
  //! [local_backend_file]
  disttrain::local_world world(2);
  std::thread t([&] {
    auto b = world.endpoint(1);
    std::vector<std::byte> in(16);
    auto r = b.irecv(in, 0, 5);
    b.wait(r);
  });
  auto b = world.endpoint(0);
  std::vector<std::byte> out(16);
  auto r = b.isend(out, 1, 5);
  b.wait(r);
  t.join();
  //! [local_backend_file]
  // Reaching this line is the check: both waits returned.
}

void local_world() {
  //! [local_world]
  disttrain::local_world world(4, {std::chrono::milliseconds(500)});
  auto ep = world.endpoint(2);  // ep.rank() == 2, ep.size() == 4
  //! [local_world]
  check(ep.rank() == 2 && ep.size() == 4, "endpoint");
}

void local_backend() {
  disttrain::local_world world(2, {2000ms});
  std::vector<float> data{1, 2, 3, 4}, got(4);
  std::thread peer([&] {
    auto p = world.endpoint(1);
    auto r = p.irecv(std::as_writable_bytes(std::span(got)), 0, 0);
    p.wait(r);
  });
  //! [local_backend]
  auto b = world.endpoint(0);
  auto r = b.isend(std::as_bytes(std::span(data)), 1, 0);
  b.wait(r, std::chrono::milliseconds(100));
  //! [local_backend]
  peer.join();
  check(got == data, "rank 1 received data");
}

void route() {
  std::int64_t elements = 0;
  //! [route]
  disttrain::topology L({{"vit", disttrain::module_role::encoder, 2, 1, 2},
                         {"llm", disttrain::module_role::backbone, 4, 1, 3}});
  auto pa = disttrain::sample_placement::round_robin(6, 2);
  auto pb = disttrain::sample_placement::round_robin(6, 3);
  disttrain::activation_shape shape{{5, 7, 1, 9, 3, 4}, 1024, 2};
  auto plan = disttrain::plan_boundary_route(L, 0, pa, pb, shape);
  for (int i : plan.sends_of(0, 0)) {
    const auto& m = plan.messages()[static_cast<std::size_t>(i)];
    elements += m.elements;
  }
  // rank 4's part only; mine.message(i) == plan.messages()[i] for each of its messages
  auto mine = disttrain::plan_boundary_route(L, 0, pa, pb, shape, {.for_rank = 4});
  //! [route]
  check(elements > 0, "rank 0 sends in phase 0");
  for (const auto& m : mine.messages()) check(m.src == 4 || m.dst == 4, "a message of rank 4");
  for (const auto& m : mine.messages())
    check(plan.messages()[static_cast<std::size_t>(m.index)].elements == m.elements,
          "rank 4's part agrees with the whole plan");
}

void route_options() {
  //! [route_options]
  disttrain::route_options o{disttrain::split_axis::rows, true};
  //! [route_options]
  check(o.split == disttrain::split_axis::rows && o.fan_out && !o.backward, "route_options");
}

void route_transfer() {
  small_route route;
  disttrain::local_world world(3, {2000ms});
  run_ranks(world, [&](disttrain::local_backend& backend) {
    const auto& plan = route.plan;
    auto& src = route.src[static_cast<std::size_t>(backend.rank())];
    auto& dst = route.dst[static_cast<std::size_t>(backend.rank())];
    //! [route_transfer]
    disttrain::buffer_pool pool;
    disttrain::run_route(backend, plan, std::as_bytes(std::span(src)),
                         std::as_writable_bytes(std::span(dst)), pool, {.tag = 3});
    //! [route_transfer]
  });
  // Rank 2 holds samples 0..3 (1 + 2 + 3 + 4 rows of 8): sample 0 is rank 0's row 0.
  check(route.dst[2].size() == 80 && route.dst[2][0] == 0 && route.dst[2][8] == 1000,
        "the backbone received both encoder replicas' rows");
}

void transfer_options() {
  //! [transfer_options]
  disttrain::transfer_options o{
      .tag = 7, .verify = true, .timeout = std::chrono::milliseconds(500)};
  //! [transfer_options]
  check(o.tag == 7 && o.verify, "transfer_options");
}

void sample_placement_file() {
  //! [sample_placement_file]
  // 5 samples on 2 replicas: replica 0 gets {0, 3}, replica 1 gets {1, 2, 4}.
  auto p = disttrain::sample_placement::from_replica_map(std::vector<int>{0, 1, 1, 0, 1}, 2);
  // p.samples(1) == {1, 2, 4}; p.replica_of(3) == 0; p.position_of(4) == 2
  //! [sample_placement_file]
  check(p.samples(1) == std::vector<int>{1, 2, 4} && p.replica_of(3) == 0 && p.position_of(4) == 2,
        "placement");
}

void sample_placement() {
  //! [sample_placement]
  disttrain::sample_placement p({{2, 0}, {1}});  // replica 0 holds sample 2 then 0
  //! [sample_placement]
  check(p.samples(0) == std::vector<int>{2, 0} && p.position_of(0) == 1, "explicit placement");
}

void activation_shape() {
  //! [activation_shape]
  disttrain::activation_shape a{{128, 64, 300}, 4096, 2};  // 3 samples, bf16
  //! [activation_shape]
  a.validate();
  check(a.rows.size() == 3 && a.elem_size == 2, "activation_shape");
}

}  // namespace

int main() {
  snippets::runner r("comm");
  r.run("backend", backend);
  r.run("comm_options", comm_options);
  r.run("transfer_info", transfer_info);
  r.run("wait_deadline", wait_deadline);
  r.run("wait_all", wait_all);
  r.run("buffer_file", buffer_file);
  r.run("buffer_ref", buffer_ref);
  r.run("fault_backend", fault_backend);
  r.run("fault_options", fault_options);
  r.run("local_backend_file", local_backend_file);
  r.run("local_world", local_world);
  r.run("local_backend", local_backend);
  r.run("route", route);
  r.run("route_options", route_options);
  r.run("route_transfer", route_transfer);
  r.run("transfer_options", transfer_options);
  r.run("sample_placement_file", sample_placement_file);
  r.run("sample_placement", sample_placement);
  r.run("activation_shape", activation_shape);
  return r.finish();
}
