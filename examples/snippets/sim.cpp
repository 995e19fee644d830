// The examples of the sim part (disttrain/sim/*.hpp): see snippets.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "disttrain/schedule.hpp"
#include "disttrain/schedule/json.hpp"
#include "disttrain/sim.hpp"
#include "disttrain/sim/format.hpp"
#include "disttrain/sim/svg.hpp"
#include "disttrain/sim/trace.hpp"
#include "small_world.hpp"
#include "snippets.hpp"

namespace {

using snippets::check;

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// Reads a file written by an example, then removes it.
std::string take_file(const char* path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  return text;
}

void bound_simulator() {
  const snippets::small_world sw;
  const auto& topo = sw.topo;
  const auto& chain = sw.chain;
  const auto& map = sw.map;
  const auto& shapes = sw.shapes;
  //! [bound_simulator]
  disttrain::bound_world w = disttrain::bind_world(topo, chain, map, shapes);
  disttrain::table_durations d{.forward = {1.0}, .backward = {2.0}, .bytes_per_s = 1e9};
  disttrain::sim_result res = disttrain::simulate_bound(w, d);
  double t = res.iteration_time, waited = res.exposed(3);
  //! [bound_simulator]
  check(res.world_size() == 5 && t > 0 && waited >= 0 && waited < t, "simulate_bound");
}

void sim_result_bound() {
  const snippets::small_world sw;
  const auto world = disttrain::bind_world(sw.topo, sw.chain, sw.map, sw.shapes);
  const disttrain::table_durations durations;  // F 1 s, B 2 s, free messages
  auto res = disttrain::simulate_bound(world, durations);
  auto iv = res.interval(/*rank*/ 2, /*op*/ 5);
  double f = res.busy_fraction(2);  // busy / iteration_time
  check(iv.end >= iv.start && f > 0 && f <= 1, "interval and busy_fraction");
}

void duration_model() {
  //! [duration_model]
  auto d = disttrain::table_durations::uniform(/*F*/ 1.0, /*B*/ 2.0);
  static_assert(disttrain::activation_model<disttrain::table_durations>);
  //! [duration_model]
  check(d.forward == std::vector<double>{1.0} && d.backward == std::vector<double>{2.0}, "uniform");
}

void table_durations() {
  //! [table_durations]
  disttrain::table_durations d;
  d.forward = {1.0, 1.5};  // two stages
  d.backward = {2.0, 3.0};
  d.microbatch_scale = {1, 1, 3};  // microbatch 2 is three times larger
  d.transfer_s = 0.1;
  //! [table_durations]
  const auto s = disttrain::add_communication(disttrain::make_1f1b(2, 3));
  disttrain::table_durations plain;
  plain.forward = d.forward;
  plain.backward = d.backward;
  check(disttrain::simulate(s, d).iteration_time > disttrain::simulate(s, plain).iteration_time,
        "a straggler and transfers make the iteration longer");
}

void format() {
  const auto s = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  const auto d = disttrain::table_durations::uniform(1.0, 2.0);
  //! [format]
  auto res = disttrain::simulate(s, d);
  fmt::print("{}", disttrain::format_sim_summary(s, res));
  fmt::print("{}", disttrain::format_timeline(s, res, 80));
  // rank   0 |FFFFFFFFFF..............BBBBBFFFBBBBFFFBBBBBFFBBBBBFFBBBBB...BBBB...BBBBB..BBBBB|
  //! [format]
  check(disttrain::format_timeline(s, res, 80)
                .find("rank   0 "
                      "|FFFFFFFFFF..............BBBBBFFFBBBBFFFBBBBBFFBBBBBFFBBBBB...BBBB...BBBBB.."
                      "BBBBB|") != std::string::npos,
        "format_timeline: the line shown");
}

void simulator_file() {
  //! [simulator_file]
  auto s = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  disttrain::simulator sim(s);
  auto res = sim.run(disttrain::table_durations::uniform(1.0, 2.0));
  // res.iteration_time == (8 + 4 - 1) * 3, res.bubble_fraction[r] == 3/11
  //! [simulator_file]
  check(near(res.iteration_time, (8 + 4 - 1) * 3), "iteration time");
  for (double b : res.bubble_fraction) check(near(b, 3.0 / 11), "bubble fraction");
}

void sim_options() {
  //! [sim_options]
  disttrain::sim_options o;
  o.overlap_comm = false;  // a send blocks its rank until the transfer ends
  //! [sim_options]
  auto d = disttrain::table_durations::uniform(1.0, 2.0);
  d.transfer_s = 0.5;
  const auto s = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  check(disttrain::simulate(s, d, o).iteration_time > disttrain::simulate(s, d).iteration_time,
        "blocking sends are slower");
}

void sim_result() {
  const auto s = disttrain::add_communication(disttrain::make_1f1b(2, 4));
  //! [sim_result]
  auto res = disttrain::simulate(s, disttrain::table_durations::uniform(1, 2));
  double t = res.iteration_time;
  auto iv = res.interval(/*rank*/ 0, /*op index*/ 3);
  double mfu = res.mfu(/*model FLOPs*/ 1e15, /*sum of GPU peaks*/ 8 * 989e12);
  //! [sim_result]
  check(near(t, (4 + 2 - 1) * 3) && iv.end >= iv.start, "iteration time and an interval");
  check(near(mfu, 1e15 / (t * 8 * 989e12)), "mfu");
}

void simulator() {
  const auto schedule = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  const std::vector<disttrain::table_durations> duration_models = {
      disttrain::table_durations::uniform(1.0, 2.0), disttrain::table_durations::uniform(0.5, 1.0)};
  const std::vector<disttrain::pipeline_schedule> candidate_schedules = {
      schedule, disttrain::add_communication(disttrain::make_gpipe(4, 8))};
  const auto durations = disttrain::table_durations::uniform(1.0, 2.0);
  double best = std::numeric_limits<double>::infinity();
  //! [simulator]
  disttrain::simulator sim(schedule);
  for (const auto& candidate : duration_models)
    best = std::min(best, sim.run(candidate).iteration_time);
  disttrain::sim_result res;
  for (const auto& s : candidate_schedules) {
    sim.reset(s);  // validates s (throws schedule_error)
    sim.run(durations, res);
  }
  //! [simulator]
  check(near(best, (8 + 4 - 1) * 1.5), "best of the duration models");
  check(near(res.iteration_time,
             disttrain::simulate(candidate_schedules[1], durations).iteration_time),
        "res holds the last candidate's run");
}

void svg_file() {
  const auto s = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  const auto durations = disttrain::table_durations::uniform(1.0, 2.0);
  //! [svg_file]
  std::string svg = disttrain::to_svg(s, disttrain::simulate(s, durations));
  std::ofstream("iteration.svg") << svg;
  //! [svg_file]
  check(svg.find("<svg") != std::string::npos && take_file("iteration.svg") == svg,
        "iteration.svg");
}

void svg_options() {
  //! [svg_options]
  disttrain::svg_options o;
  o.width = 1600;
  o.show_comm = false;
  //! [svg_options]
  const auto s = disttrain::add_communication(disttrain::make_1f1b(2, 2));
  const auto res = disttrain::simulate(s, disttrain::table_durations::uniform(1.0, 2.0));
  check(disttrain::to_svg(s, res, o).find("width=\"1600\"") != std::string::npos, "svg width");
}

void svg_bound() {
  const snippets::small_world sw;
  const auto& topo = sw.topo;
  const auto world = disttrain::bind_world(sw.topo, sw.chain, sw.map, sw.shapes);
  const disttrain::table_durations d;
  //! [svg_bound]
  std::string svg = disttrain::to_svg(world, disttrain::simulate_bound(world, d), &topo);
  //! [svg_bound]
  check(svg.find("<svg") != std::string::npos && svg.find("llm") != std::string::npos, "bound SVG");
}

void trace_file() {
  const auto s = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  const auto durations = disttrain::table_durations::uniform(1.0, 2.0);
  //! [trace_file]
  auto res = disttrain::simulate(s, durations);
  disttrain::write_json_file("iteration.trace.json", disttrain::to_trace_json(s, res));
  //! [trace_file]
  const auto j = disttrain::parse_json(take_file("iteration.trace.json"));
  check(j.contains("traceEvents") && !j["traceEvents"].empty(), "iteration.trace.json");
}

void trace_bound() {
  const snippets::small_world sw;
  const auto& topo = sw.topo;
  const auto world = disttrain::bind_world(sw.topo, sw.chain, sw.map, sw.shapes);
  const disttrain::table_durations durations;
  //! [trace_bound]
  auto res = disttrain::simulate_bound(world, durations);
  disttrain::write_json_file("bound.trace.json", disttrain::to_trace_json(world, res, &topo));
  //! [trace_bound]
  const auto j = disttrain::parse_json(take_file("bound.trace.json"));
  check(j.contains("traceEvents") && !j["traceEvents"].empty(), "bound.trace.json");
}

}  // namespace

int main() {
  snippets::runner r("sim");
  r.run("bound_simulator", bound_simulator);
  r.run("sim_result_bound", sim_result_bound);
  r.run("duration_model", duration_model);
  r.run("table_durations", table_durations);
  r.run("format", format);
  r.run("simulator_file", simulator_file);
  r.run("sim_options", sim_options);
  r.run("sim_result", sim_result);
  r.run("simulator", simulator);
  r.run("svg_file", svg_file);
  r.run("svg_options", svg_options);
  r.run("svg_bound", svg_bound);
  r.run("trace_file", trace_file);
  r.run("trace_bound", trace_bound);
  return r.finish();
}
