// The examples of the core part (disttrain/core/*.hpp): see snippets.hpp.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "disttrain/core.hpp"
#include "disttrain/core/checked.hpp"
#include "disttrain/core/format.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/core/topology.hpp"
#include "snippets.hpp"

namespace {

using disttrain::errc;

void check_header() {
  const int layers = 32, tp = 4, gpus_per_node = 8;
  const std::vector<char> bytes(16);
  //! [check_header]
  disttrain::require_positive(layers, "model.backbone.num_layers");
  disttrain::require(tp <= gpus_per_node, "plan.llm.tp", "tp ", tp, " exceeds the node's ",
                     gpus_per_node, " GPUs");
  if (bytes.size() % 4 != 0)
    disttrain::fail(disttrain::errc::parse_error, "payload", bytes.size(),
                    " bytes is not whole floats");
  //! [check_header]
}

void cat() {
  const int i = 3;
  //! [cat]
  std::string where = disttrain::cat("batch[", i, "].tokens");
  //! [cat]
  snippets::check(where == "batch[3].tokens", "cat");
}

void fail() {
  //! [fail]
  disttrain::fail(disttrain::errc::unsupported, "--trace", "needs a 1f1b plan");
  //! [fail]
}

void require() {
  const int n = 12, dp = 4;
  //! [require]
  disttrain::require(n % dp == 0, "batch", n, " samples do not split over dp ", dp);
  //! [require]
}

void require_positive() {
  const int gpus = 8;
  //! [require_positive]
  disttrain::require_positive(gpus, "cluster.num_gpus");
  //! [require_positive]
}

void require_non_negative() {
  const double reserve = 0.0;
  //! [require_non_negative]
  disttrain::require_non_negative(reserve, "cost.memory_reserve_bytes");
  //! [require_non_negative]
}

void require_in_range() {
  const double p = 0.1;
  //! [require_in_range]
  disttrain::require_in_range(p, 0.0, 1.0, "dropout");
  //! [require_in_range]
}

void ensure() {
  const int sent = 5, expected = 5;
  //! [ensure]
  disttrain::ensure(sent == expected, "router", "sent ", sent, " of ", expected);
  //! [ensure]
}

void checked() {
  const std::int64_t rows = 1024, hidden = 4096;
  //! [checked]
  const std::int64_t elems = disttrain::checked_mul(rows, hidden, "activation_shape.hidden");
  //! [checked]
  snippets::check(elems == 1024 * 4096, "checked_mul");
}

void error() {
  const int layers = 0;
  disttrain::errc code{};
  std::string where;
  //! [error]
  try {
    disttrain::require_positive(layers, "model.backbone.num_layers");
  } catch (const disttrain::error& e) {
    code = e.code();    // errc::invalid_argument
    where = e.where();  // "model.backbone.num_layers"
  }
  //! [error]
  snippets::check(code == errc::invalid_argument && where == "model.backbone.num_layers",
                  "error: code and where");
}

void format() {
  //! [format]
  fmt::print("{}\n", disttrain::errc::timeout);  // prints "timeout"
  //! [format]
  snippets::check(fmt::format("{}", disttrain::errc::timeout) == "timeout", "format errc");
}

void json() {
  //! [json]
  auto j = disttrain::parse_json(R"({"layers": 32})", "config.json");
  int layers = disttrain::json_get<int>(j, "layers", "model.backbone");
  //! [json]
  snippets::check(layers == 32, "json_get");
}

void topology() {
  //! [topology]
  disttrain::topology t({{"vit", disttrain::module_role::encoder, 2, 1, 2},
                         {"llm", disttrain::module_role::backbone, 2, 2, 3},
                         {"unet", disttrain::module_role::generator, 1, 1, 2}});
  int r = t.rank({disttrain::module_id{1}, disttrain::stage_id{0}, disttrain::replica_id{2},
                  1});  // 4 + (0 * 3 + 2) * 2 + 1 = 9
  //! [topology]
  snippets::check(r == 9, "topology rank");
}

void topology_groups() {
  //! [topology_groups]
  using disttrain::module_role;
  disttrain::topology t({{"vit", module_role::encoder, 2, 1, 2},
                         {"llm", module_role::backbone, 4, 2, 3},
                         {"sd", module_role::generator, 1, 1, 4}});
  // t.world_size() == 4 + 24 + 4; t.coord(5) is llm stage 0, replica 0, TP rank 1
  auto tp = t.tp_group(disttrain::module_id{1}, disttrain::stage_id{0},
                       disttrain::replica_id{2});  // {12, 13, 14, 15}
  auto b = t.boundary_group(0);                    // vit ranks 0..3 and llm stage-0 ranks 4..15
  int color = t.group_color(disttrain::group_kind::dp, 5);  // MPI_Comm_split's color
  //! [topology_groups]
  snippets::check(t.world_size() == 4 + 24 + 4, "world_size");
  snippets::check(
      t.coord(5) == disttrain::topology_coord{disttrain::module_id{1}, disttrain::stage_id{0},
                                              disttrain::replica_id{0}, 1},
      "coord(5)");
  snippets::check(tp == std::vector<int>{12, 13, 14, 15}, "tp_group");
  std::vector<int> first16;
  for (int r = 0; r < 16; ++r) first16.push_back(r);
  snippets::check(b == first16, "boundary_group(0)");
  // DP groups: vit has 2 (stage 0 x TP 2), llm stage 0 TP rank 1 is the fourth.
  snippets::check(color == 2 + 1, "group_color");
}

void version() {
  //! [version]
  static_assert(disttrain::version_major == DISTTRAIN_VERSION_MAJOR);
  //! [version]
}

}  // namespace

int main() {
  snippets::runner r("core");
  r.run("check_header", check_header);
  r.run("cat", cat);
  r.run("fail", [] { snippets::check_throws(errc::unsupported, fail, "fail throws"); });
  r.run("require", require);
  r.run("require_positive", require_positive);
  r.run("require_non_negative", require_non_negative);
  r.run("require_in_range", require_in_range);
  r.run("ensure", ensure);
  r.run("checked", checked);
  r.run("error", error);
  r.run("format", format);
  r.run("json", json);
  r.run("topology", topology);
  r.run("topology_groups", topology_groups);
  r.run("version", version);
  return r.finish();
}
