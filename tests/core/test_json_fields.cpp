// JSON descriptors (core/json.hpp): one list of fields drives the writer, the
// reader and the key check; and the library's own descriptors write exactly
// the keys their types had before (checked against literal JSON).
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "disttrain/core/json.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/reorder/json.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::json;

namespace {
struct knob {
  std::string name;
  int count = 4;
  double scale = 1.5;
  std::vector<int> sizes{1, 2};
};
constexpr auto knob_fields = std::tuple{disttrain::detail::required_field("name", &knob::name),
                                        disttrain::detail::optional_field("count", &knob::count),
                                        disttrain::detail::optional_field("scale", &knob::scale),
                                        disttrain::detail::optional_field("sizes", &knob::sizes)};

knob read(const std::string& text) {
  knob k;
  disttrain::detail::read_fields(disttrain::parse_json(text), k, knob_fields, "cfg.knob",
                                 {"comment"});
  return k;
}
}  // namespace

TEST_CASE("descriptor: write then read gives the value back") {
  const knob k{"fan", 9, 0.25, {3, 5, 7}};
  const json j = disttrain::detail::fields_to_json(k, knob_fields);
  CHECK(j == disttrain::parse_json(R"({"name": "fan", "count": 9, "scale": 0.25,
                                       "sizes": [3, 5, 7]})"));
  knob back;
  disttrain::detail::read_fields(j, back, knob_fields, "knob");
  CHECK(back.name == "fan");
  CHECK(back.count == 9);
  CHECK(back.scale == 0.25);
  CHECK(back.sizes == std::vector<int>{3, 5, 7});
}

TEST_CASE("descriptor: optional fields keep their default, extra keys are allowed") {
  const knob k = read(R"({"name": "fan", "comment": "free text"})");
  CHECK(k.count == 4);
  CHECK(k.scale == 1.5);
  CHECK(k.sizes == std::vector<int>{1, 2});
}

TEST_CASE("descriptor: errors name the field") {
  DISTTRAIN_CHECK_ERROR(read(R"({"count": 2})"), errc::parse_error, "cfg.knob.name");
  DISTTRAIN_CHECK_ERROR(read(R"({"name": "a", "count": 2.5})"), errc::parse_error,
                        "cfg.knob.count");
  DISTTRAIN_CHECK_ERROR(read(R"({"name": "a", "count": 4294967296})"), errc::parse_error,
                        "cfg.knob.count");
  DISTTRAIN_CHECK_ERROR(read(R"({"name": "a", "scael": 2})"), errc::parse_error, "cfg.knob.scael");
  try {
    (void)read(R"({"name": "a", "scael": 2})");
    FAIL("no throw");
  } catch (const disttrain::error& e) {
    CHECK(std::string(e.message()).find("did you mean 'scale'") != std::string::npos);
  }
  DISTTRAIN_CHECK_ERROR(read(R"([1, 2])"), errc::parse_error, "cfg.knob");
}

TEST_CASE("descriptor: a nested value's reader runs at the field's path") {
  struct box {
    knob inner;
    int size = 0;
  };
  constexpr auto read_knob = [](const json& j, std::string_view path) {
    knob k;
    disttrain::detail::read_fields(j, k, knob_fields, path);
    return k;
  };
  constexpr auto box_fields =
      std::tuple{disttrain::detail::required_field("inner", &box::inner, +read_knob),
                 disttrain::detail::optional_field("size", &box::size)};
  box b;
  disttrain::detail::read_fields(disttrain::parse_json(R"({"inner": {"name": "fan"}})"), b,
                                 box_fields, "cfg");
  CHECK(b.inner.name == "fan");
  CHECK(b.inner.count == 4);
  DISTTRAIN_CHECK_ERROR(
      disttrain::detail::read_fields(
          disttrain::parse_json(R"({"inner": {"name": "a", "count": 0.5}})"), b, box_fields, "cfg"),
      errc::parse_error, "cfg.inner.count");
  DISTTRAIN_CHECK_ERROR(
      disttrain::detail::read_fields(disttrain::parse_json(R"({"size": 2})"), b, box_fields, "cfg"),
      errc::parse_error, "cfg.inner");
}

TEST_CASE("descriptors of the library write the documented keys") {
  disttrain::memory_breakdown m;
  m.params = 1;
  m.grads = 2;
  m.optimizer = 3;
  m.activations = 4;
  CHECK(json(m) == disttrain::parse_json(R"({"params": 1.0, "grads": 2.0, "optimizer": 3.0,
                                             "activations": 4.0, "total": 10.0})"));
  const disttrain::topology_module g{"vit", disttrain::module_role::encoder, 2, 1, 3, false};
  const json jg = g;
  CHECK(jg == disttrain::parse_json(R"({"name": "vit", "role": "encoder", "tp": 2, "pp": 1,
                                        "dp": 3, "trainable": false, "colocated": false})"));
  // An efficiency curve written without its TP penalty reads as none.
  const auto e = disttrain::parse_json(R"({"e_max": 0.7, "flops_half": 2e10})")
                     .get<disttrain::efficiency_params>();
  CHECK(e.tp_penalty == 0.0);
  CHECK(e.e_max == 0.7);
  // An LLM without kv_heads has as many as heads.
  const auto llm = disttrain::parse_json(R"({"layers": 2, "hidden": 64, "heads": 4, "mlp": 128,
                                             "vocab": 100, "max_seq": 32})")
                       .get<disttrain::decoder_llm_arch>();
  CHECK(llm.kv_heads == 4);
  CHECK(json(llm)["type"] == "llm");
}

TEST_CASE("reorder_options: unknown keys and enum names are errors") {
  const auto read = [](const std::string& text) {
    return disttrain::parse_json(text).get<disttrain::reorder_options>();
  };
  const auto o = read(R"({"modules": [{"dp": 2}], "microbatches": 4, "order": "search"})");
  CHECK(o.order == disttrain::order_method::search);
  CHECK(o.microbatches == 4);
  CHECK(json(o)["order"] == "search");
  // A typo of an optional key used to keep its default silently.
  DISTTRAIN_CHECK_ERROR(read(R"({"modules": [{"dp": 2}], "microbatches": 4, "oder": "search"})"),
                        errc::parse_error, "reorder_options.oder");
  DISTTRAIN_CHECK_ERROR(read(R"({"modules": [{"dp": 2}], "microbatches": 4, "order": "best"})"),
                        errc::parse_error, "reorder_options.order");
  DISTTRAIN_CHECK_ERROR(read(R"({"modules": [{"dp": 2}], "microbatches": 4, "order": 1})"),
                        errc::parse_error, "reorder_options.order");
}
