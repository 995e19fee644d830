// Timeline export: trace JSON parses with a track per rank; SVG is well-formed.
#include <set>
#include <string>
#include <vector>

#include "disttrain/schedule.hpp"
#include "disttrain/schedule/json.hpp"
#include "disttrain/sim.hpp"
#include "disttrain/sim/svg.hpp"
#include "disttrain/sim/trace.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
// Minimal XML well-formedness: balanced, properly nested tags; quoted
// attributes; no raw '<' or stray '&' in text. Returns "" when well-formed.
std::string xml_problem(const std::string& x) {
  std::vector<std::string> stack;
  std::size_t i = 0;
  bool root_seen = false;
  while (i < x.size()) {
    if (x[i] == '<') {
      if (x.compare(i, 4, "<!--") == 0) {
        const auto e = x.find("-->", i);
        if (e == std::string::npos) return "unterminated comment";
        i = e + 3;
        continue;
      }
      if (x.compare(i, 2, "<?") == 0) {
        const auto e = x.find("?>", i);
        if (e == std::string::npos) return "unterminated declaration";
        i = e + 2;
        continue;
      }
      // Find the end of the tag, honouring quotes.
      std::size_t j = i + 1;
      char quote = 0;
      for (; j < x.size(); ++j) {
        if (quote) {
          if (x[j] == quote)
            quote = 0;
          else if (x[j] == '<')
            return "raw '<' in attribute";
        } else if (x[j] == '"' || x[j] == '\'') {
          quote = x[j];
        } else if (x[j] == '>') {
          break;
        }
      }
      if (j >= x.size()) return "unterminated tag";
      std::string tag = x.substr(i + 1, j - i - 1);
      const bool closing = !tag.empty() && tag[0] == '/';
      const bool self = !tag.empty() && tag.back() == '/';
      std::string name = tag.substr(closing ? 1 : 0);
      name = name.substr(0, name.find_first_of(" \t\n/"));
      if (name.empty()) return "empty tag name";
      if (closing) {
        if (stack.empty() || stack.back() != name) return "mismatched </" + name + ">";
        stack.pop_back();
      } else if (!self) {
        if (stack.empty() && root_seen) return "second root element";
        stack.push_back(name);
        root_seen = true;
      }
      i = j + 1;
    } else {
      if (x[i] == '&') {
        const auto e = x.find(';', i);
        if (e == std::string::npos || e - i > 6) return "stray '&'";
      }
      if (x[i] == '>') return "raw '>' in text";
      ++i;
    }
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (!root_seen) return "no root element";
  return {};
}
}  // namespace

TEST_CASE("the well-formedness checker itself rejects broken XML") {
  CHECK(xml_problem("<a><b/></a>").empty());
  CHECK(!xml_problem("<a><b></a>").empty());
  CHECK(!xml_problem("<a>x & y</a>").empty());
  CHECK(!xml_problem("<a title=\"<\"/>").empty());
  CHECK(!xml_problem("<a></a><b></b>").empty());
}

TEST_CASE("Perfetto trace: valid JSON, one track per rank, kinds distinguishable") {
  multi_module_spec spec;
  spec.segments = {{.name = "enc<&>", .role = disttrain::module_role::encoder, .pp = 1, .dp = 2},
                   {.name = "backbone", .pp = 2, .dp = 3}};
  spec.num_microbatches = 6;
  const auto s = add_grad_sync(add_communication(make_multi_module(spec)));
  auto d = table_durations::uniform(1, 2);
  d.transfer_s = 0.25;
  d.sync = 1.0;
  const auto res = simulate(s, d);
  const std::string text = to_trace_json(s, res).dump();
  const auto j = parse_json(text, "trace");
  REQUIRE(j.contains("traceEvents"));
  std::set<int> pids;
  std::set<std::string> cats;
  std::size_t process_names = 0;
  for (const auto& e : j["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "process_name") ++process_names;
    if (e["ph"] == "X") {
      cats.insert(e["cat"].get<std::string>());
      CHECK(e["dur"].get<double>() >= 0.0);
    }
  }
  CHECK(pids.size() == s.ranks.size());
  CHECK(process_names == s.ranks.size());
  for (const char* c : {"forward", "backward", "comm", "grad_sync", "optimizer"})
    CHECK(cats.count(c) == 1);
  // Every F of the schedule appears as an event named F<mb>.
  std::size_t fs = 0;
  for (const auto& e : j["traceEvents"]) fs += e.value("cat", "") == "forward" ? 1U : 0U;
  CHECK(fs == static_cast<std::size_t>(3 * spec.num_microbatches));
  DISTTRAIN_CHECK_ERROR(to_trace_json(make_1f1b(2, 2), res), errc::invalid_argument,
                        "trace.result");
}

TEST_CASE("SVG timeline is well-formed and escapes names") {
  multi_module_spec spec;
  spec.segments = {{.name = "enc<&>\"", .role = disttrain::module_role::encoder, .pp = 1, .dp = 2},
                   {.name = "backbone", .pp = 2, .dp = 3},
                   {.name = "gen", .role = disttrain::module_role::generator, .pp = 1}};
  spec.num_microbatches = 6;
  spec.split_backward = true;
  const auto s = add_grad_sync(add_communication(make_multi_module(spec)));
  auto d = table_durations::uniform(1, 1, 1);
  d.transfer_s = 0.1;
  const auto svg = to_svg(s, simulate(s, d));
  INFO(svg.substr(0, 400));
  CHECK(xml_problem(svg).empty());
  CHECK(svg.find("enc&lt;&amp;&gt;&quot;") != std::string::npos);
  CHECK(svg.find("<svg") != std::string::npos);
  const auto svg2 = to_svg(add_communication(make_interleaved_1f1b(4, 8, 2)),
                           simulate(add_communication(make_interleaved_1f1b(4, 8, 2)),
                                    table_durations::uniform(0.5, 1)));
  CHECK(xml_problem(svg2).empty());
  svg_options bad;
  bad.width = 100;
  DISTTRAIN_CHECK_ERROR(to_svg(s, simulate(s, d), bad), errc::invalid_argument, "svg.width");
}
