// disttrain._core: the nanobind extension behind the `disttrain` Python package.
//
// A consumer of the headers like any trainer: it #includes the library and
// exposes a thin layer. Specs, plans and results cross the boundary as JSON
// text (the Python side turns them into dicts with the json module); the
// reorderer takes and returns NumPy arrays without copies beyond one pass.
// Every long call releases the GIL. disttrain::error becomes a subclass of
// disttrain.Error (python/disttrain/errors.py) carrying errc and where.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "disttrain/bind/data_plan.hpp"
#include "disttrain/bind/json.hpp"
#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/core/version.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/model/scenario.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain/reorder.hpp"
#include "disttrain/reorder/json.hpp"
#include "disttrain/sim/svg.hpp"
#include "disttrain/sim/trace.hpp"
#include "program_ext.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using disttrain::json;

// ---- specs, planner options, cost parameters --------------------------------

json parse(const std::string& text, std::string_view what) {
  return disttrain::parse_json(text, what);
}

// Planner options from the JSON object the Python layer builds from keyword
// arguments and a scenario's "planner" key: the library's reader (unknown keys
// are parse errors at planner.<key>, with a "did you mean").
disttrain::planner_options read_planner_options(const json& p) {
  return disttrain::read_planner_options(p, "planner");
}

// One planning problem: the scenario, its cost model and its request.
struct problem {
  disttrain::scenario sc;
  disttrain::cost_params cost;
  disttrain::analytic_cost_model cm;
  disttrain::plan_request req;

  static problem make(const std::string& scenario_json, const std::string& cost_json) {
    auto sc = disttrain::read_scenario(parse(scenario_json, "scenario"), "");
    // The GPU's calibrated defaults (as disttrain-plan), overridden field by field.
    disttrain::cost_params cp = disttrain::calibrated_cost_params(sc.cluster.gpu.name);
    if (!cost_json.empty()) {
      const json cj = parse(cost_json, "cost");
      if (!cj.is_null()) cp = disttrain::read_cost_params(cj, "cost", cp);
    }
    cp.validate_for(sc.cluster.gpu, "cost");
    disttrain::analytic_cost_model cm(sc.model, sc.cluster, cp);
    auto req = disttrain::make_request(sc);
    return problem{std::move(sc), cp, std::move(cm), std::move(req)};
  }
};

// A plan object, or anything holding one under "plan" (plan() / --json output).
disttrain::parallel_plan read_plan(const std::string& plan_json, const disttrain::scenario& sc) {
  const json pj = parse(plan_json, "plan");
  auto plan =
      (pj.is_object() && pj.contains("plan") ? pj.at("plan") : pj).get<disttrain::parallel_plan>();
  if (plan.global_batch != sc.global_batch_size)
    disttrain::fail(disttrain::errc::invalid_argument, "plan.global_batch", "is ",
                    plan.global_batch, ", but the scenario's global batch is ",
                    sc.global_batch_size,
                    " (set the scenario's global_batch_size to evaluate it for that batch)");
  return plan;
}

// The data objective's options from {"objective", "batches", "finalists"}
// (absent: disttrain-plan's defaults: sampled with the time objective).
disttrain::data_plan_options read_data_options(const json& d,
                                               const disttrain::planner_options& popt) {
  disttrain::data_plan_options o;
  o.objective = popt.objective == disttrain::plan_objective::time
                    ? disttrain::data_objective::sampled
                    : disttrain::data_objective::expected;
  if (d.is_null()) return o;
  disttrain::check_keys(d, {"objective", "batches", "finalists"}, "data_plan_options");
  if (d.contains("objective"))
    o.objective = disttrain::parse_data_objective(
        disttrain::json_get<std::string>(d, "objective", "data_plan_options"),
        "data_plan_options.objective");
  if (d.contains("batches"))
    o.batches = disttrain::json_get<int>(d, "batches", "data_plan_options");
  if (d.contains("finalists"))
    o.finalists = disttrain::json_get<int>(d, "finalists", "data_plan_options");
  return o;
}

std::string plan_impl(const std::string& scenario_json, const std::string& planner_json,
                      const std::string& cost_json, bool baseline, const std::string& data_json) {
  const auto pb = problem::make(scenario_json, cost_json);
  const auto popt = read_planner_options(parse(planner_json, "planner"));
  json out;
  if (baseline) {
    out = disttrain::plan_megatron_baseline(pb.cm, pb.req, popt);
  } else {
    const auto d = disttrain::plan_for_data(
        pb.cm, pb.req, pb.sc.data, popt,
        read_data_options(data_json.empty() ? json() : parse(data_json, "data"), popt));
    out = d.result;
    out["data_objective"] = std::string(disttrain::to_string(d.objective));
    if (d.objective == disttrain::data_objective::sampled) out["data_plan"] = d;
  }
  out["scenario"] = pb.sc.name;
  out["num_gpus"] = pb.sc.cluster.num_gpus;
  out["global_batch"] = pb.sc.global_batch_size;
  return out.dump();
}

// The four cases of disttrain-plan --iterations (bind/heterogeneity.hpp) with
// the planner's prediction, as the CLI's "heterogeneity" JSON.
std::string heterogeneity_impl(const std::string& scenario_json, const std::string& planner_json,
                               const std::string& cost_json, const std::string& data_json,
                               int iterations, std::optional<std::uint64_t> seed) {
  const auto pb = problem::make(scenario_json, cost_json);
  const auto popt = read_planner_options(parse(planner_json, "planner"));
  const auto d = disttrain::plan_for_data(
      pb.cm, pb.req, pb.sc.data, popt,
      read_data_options(data_json.empty() ? json() : parse(data_json, "data"), popt));
  const auto& ours = d.result;
  const auto base = disttrain::plan_megatron_baseline(pb.cm, pb.req, popt);
  const auto h = disttrain::simulate_heterogeneity(base.plan, ours.plan, pb.cm, pb.sc.data,
                                                   {.iterations = iterations, .seed = seed});
  json out = h;
  if (d.objective == disttrain::data_objective::sampled) {
    out["plan_reordered"]["predicted_mean_s"] = d.predicted.mean_s;
    out["plan_reordered"]["predicted_p90_s"] = d.predicted.p90_s;
    out["plan_reordered"]["predicted_mfu"] = d.predicted_mfu;
  }
  out["plan"] = ours.plan;
  out["baseline_plan"] = base.plan;
  out["data_objective"] = std::string(disttrain::to_string(d.objective));
  return out.dump();
}

std::string evaluate_impl(const std::string& plan_json, const std::string& scenario_json,
                          const std::string& cost_json) {
  const auto pb = problem::make(scenario_json, cost_json);
  const auto plan = read_plan(plan_json, pb.sc);
  const auto e = disttrain::evaluate(plan, pb.cm, pb.req.sample_workload);
  const json out{{"scenario", pb.sc.name},
                 {"plan", plan},
                 {"iteration_time_s", e.iteration_time_s},
                 {"mfu", e.mfu},
                 {"evaluation", e}};
  return out.dump();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) disttrain::fail(disttrain::errc::invalid_argument, path, "cannot open file for writing");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f) disttrain::fail(disttrain::errc::invalid_argument, path, "write failed");
}

std::string simulate_impl(const std::string& plan_json, const std::string& scenario_json,
                          const std::string& cost_json, const std::optional<std::string>& trace,
                          const std::optional<std::string>& svg) {
  const auto pb = problem::make(scenario_json, cost_json);
  const auto plan = read_plan(plan_json, pb.sc);
  const auto sim = disttrain::simulate_plan(plan, pb.cm, pb.req.sample_workload);
  if (trace)
    disttrain::write_json_file(*trace, disttrain::to_trace_json(sim.world, sim.result, &sim.topo),
                               0);
  if (svg) write_text(*svg, disttrain::to_svg(sim.world, sim.result, &sim.topo));
  const json out{{"scenario", pb.sc.name},
                 {"iteration_time_s", sim.result.iteration_time},
                 {"ops", sim.world.num_ops()},
                 {"trace", trace ? json(*trace) : json(nullptr)},
                 {"svg", svg ? json(*svg) : json(nullptr)}};
  return out.dump();
}

// ---- reorderer ----------------------------------------------------------------

using costs_array = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using ids_array = nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using tokens_array = nb::ndarray<const std::uint32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

disttrain::reorder_options read_reorder_options(const std::string& options_json) {
  const json j = parse(options_json, "reorder_options");
  disttrain::check_keys(j,
                        {"modules", "microbatches", "microbatch_group", "equal_count", "slots",
                         "balance", "order", "order_budget", "slot_search_budget",
                         "slot_search_below", "cut_search_budget", "exact_search_budget", "stages"},
                        "reorder_options");
  return j.get<disttrain::reorder_options>();  // validates
}

void check_shapes(const costs_array& costs, const std::optional<ids_array>& ids,
                  const std::optional<tokens_array>& tokens = std::nullopt) {
  const std::size_t n = costs.shape(0), K = costs.shape(1);
  disttrain::require(K >= 1 && K <= disttrain::max_reorder_modules, "costs", "must have 1..",
                     disttrain::max_reorder_modules, " columns (one per module), got ", K);
  if (ids)
    disttrain::require(ids->shape(0) == n, "ids", "has ", ids->shape(0), " entries, costs has ", n,
                       " rows");
  if (tokens)
    disttrain::require(tokens->shape(0) == n && tokens->shape(1) == K, "tokens", "has shape (",
                       tokens->shape(0), ", ", tokens->shape(1), "), costs has (", n, ", ", K, ")");
}

// Costs (n, K), optional ids (n,) and optional tokens (n, K) into sample_meta
// (shapes checked by check_shapes).
void to_meta(const costs_array& costs, const std::optional<ids_array>& ids,
             const std::optional<tokens_array>& tokens, std::vector<disttrain::sample_meta>& meta) {
  const std::size_t n = costs.shape(0), K = costs.shape(1);
  meta.resize(n);
  const double* c = costs.data();
  const std::uint64_t* id = ids ? ids->data() : nullptr;
  const std::uint32_t* t = tokens ? tokens->data() : nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    disttrain::sample_meta s{};
    s.id = id ? id[i] : static_cast<std::uint64_t>(i);
    for (std::size_t k = 0; k < K; ++k) s.cost[k] = c[i * K + k];
    if (t != nullptr)
      for (std::size_t k = 0; k < K; ++k) s.tokens[k] = t[i * K + k];
    s.modules = static_cast<std::uint32_t>(K);
    meta[i] = s;
  }
}

// A buffer handed to NumPy without a copy (uninitialised: every entry is written).
template <class T>
struct buffer {
  std::unique_ptr<T[]> p;
  std::size_t size = 0;
  void reset(std::size_t n) { p = std::make_unique_for_overwrite<T[]>(n), size = n; }
  nb::ndarray<nb::numpy, T> release_to_numpy(std::initializer_list<std::size_t> shape) {
    T* raw = p.release();
    nb::capsule owner(raw, [](void* q) noexcept { delete[] static_cast<T*>(q); });
    return nb::ndarray<nb::numpy, T>(raw, shape, owner);
  }
};

// The result, rows in input order (row i: the sample of costs[i]).
struct flat_result {
  buffer<std::uint64_t> id;
  buffer<std::uint32_t> microbatch, replica, offset;  // replica/offset: (n, K)
  std::vector<buffer<double>> load;                   // per module: (microbatches, dp)
  buffer<double> imbalance;
  double iteration_time = 0.0;
  std::uint32_t K = 0, m = 0;
  std::vector<std::uint32_t> dp;
};

void flatten(const disttrain::reorder_result& res, const std::vector<disttrain::sample_meta>& meta,
             bool ids_given, flat_result& f) {
  const std::size_t n = meta.size(), K = res.modules;
  f.K = res.modules;
  f.m = res.microbatches;
  f.dp.assign(res.dp.begin(), res.dp.begin() + K);
  f.id.reset(n);
  f.microbatch.reset(n);
  f.replica.reset(n * K);
  f.offset.reset(n * K);
  // res.samples is sorted by id: row r of the input is samples[r] when the ids
  // are the row numbers (the default) or arrive sorted; otherwise map back.
  bool sorted = true;
  for (std::size_t i = 1; ids_given && i < n && sorted; ++i) sorted = meta[i - 1].id < meta[i].id;
  std::vector<std::uint32_t> order;
  if (!sorted) {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return meta[a].id < meta[b].id; });
  }
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t row = sorted ? r : order[r];
    const auto& s = res.samples[r];
    f.id.p[row] = s.id;
    f.microbatch.p[row] = s.microbatch;
    for (std::size_t k = 0; k < K; ++k) {
      f.replica.p[row * K + k] = s.module[k].replica;
      f.offset.p[row * K + k] = s.module[k].offset;
    }
  }
  f.load.resize(K);
  for (std::size_t k = 0; k < K; ++k) {
    const std::size_t d = res.dp[k];
    f.load[k].reset(static_cast<std::size_t>(res.microbatches) * d);
    for (std::size_t j = 0; j < res.microbatches; ++j)
      for (std::size_t r = 0; r < d; ++r)
        f.load[k].p[j * d + r] = res.load.empty() ? 0.0 : res.load[res.cell_index(k, r, j)];
  }
  f.imbalance.reset(K);
  std::copy_n(res.imbalance.begin(), K, f.imbalance.p.get());
  f.iteration_time = res.iteration_time;
}

nb::dict to_dict(flat_result&& f) {
  const std::size_t n = f.id.size, K = f.K;
  nb::dict d;
  d["id"] = f.id.release_to_numpy({n});
  d["microbatch"] = f.microbatch.release_to_numpy({n});
  d["replica"] = f.replica.release_to_numpy({n, K});
  d["offset"] = f.offset.release_to_numpy({n, K});
  nb::list load;
  for (std::size_t k = 0; k < K; ++k) load.append(f.load[k].release_to_numpy({f.m, f.dp[k]}));
  d["load"] = load;
  d["imbalance"] = f.imbalance.release_to_numpy({K});
  d["iteration_time"] = f.iteration_time;
  d["microbatches"] = f.m;
  d["dp"] = f.dp;
  return d;
}

// A reusable reorderer (the C++ reorderer keeps its scratch buffers between
// batches). Calls on one object are serialised by a mutex: the GIL is released.
class py_reorderer {
 public:
  explicit py_reorderer(const std::string& options_json) : r_(read_reorder_options(options_json)) {}

  std::string options_json() const { return json(r_.options()).dump(); }

  // The arguments keep the NumPy arrays alive, so their memory is read with
  // the GIL released (the caller must not resize them meanwhile, as for any
  // GIL-releasing NumPy consumer).
  nb::dict assign(const costs_array& costs, const std::optional<ids_array>& ids,
                  const std::optional<tokens_array>& tokens) {
    check_shapes(costs, ids, tokens);
    flat_result f;
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(mu_);
      to_meta(costs, ids, tokens, meta_);
      r_.assign(meta_, res_);
      flatten(res_, meta_, ids.has_value(), f);
    }
    return to_dict(std::move(f));
  }

  std::string assign_json(const costs_array& costs, const std::optional<ids_array>& ids,
                          const std::optional<tokens_array>& tokens) {
    check_shapes(costs, ids, tokens);
    nb::gil_scoped_release release;
    std::lock_guard lock(mu_);
    to_meta(costs, ids, tokens, meta_);
    r_.assign(meta_, res_);
    return json(res_).dump();
  }

 private:
  disttrain::reorderer<> r_;
  disttrain::reorder_result res_;
  std::vector<disttrain::sample_meta> meta_;
  std::mutex mu_;
};

// Seconds per call of the C++ reorderer on the same instance (the benchmark's
// reference), as {"wall": [...], "cpu": [...]} (thread CPU time), `reps` timed
// calls. mode "assign": one reorderer and one result reused, the sample_meta
// built once outside the timing (benchmarks/bench_reorder.cpp's figure);
// "fill": the same plus refilling a reused sample_meta vector from the cost
// array each call (a C++ trainer holding its costs in an array, as the binding
// does); "fresh": a new reorderer and result per call, sample_meta prebuilt.
nb::dict bench_reorder_cpp(const costs_array& costs, const std::string& options_json, int reps,
                           const std::string& mode) {
  check_shapes(costs, std::nullopt);
  disttrain::require(mode == "assign" || mode == "fill" || mode == "fresh", "mode",
                     "expects assign, fill or fresh, got '", mode, "'");
  std::vector<disttrain::sample_meta> meta;
  to_meta(costs, std::nullopt, std::nullopt, meta);
  const auto opt = read_reorder_options(options_json);
  std::vector<double> wall, cpu;
  {
    nb::gil_scoped_release release;
    const auto thread_cpu = [] {
      timespec t{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
    };
    disttrain::reorderer<> reused(opt);
    disttrain::reorder_result res;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu();
      if (mode == "fresh") {
        disttrain::reorderer<> r(opt);
        disttrain::reorder_result one = r.assign(meta);
        if (one.samples.size() != meta.size())
          disttrain::fail(disttrain::errc::internal, "bench_reorder_cpp", "lost samples");
      } else {
        if (mode == "fill") to_meta(costs, std::nullopt, std::nullopt, meta);
        reused.assign(meta, res);
      }
      cpu.push_back(thread_cpu() - c0);
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  nb::dict d;
  d["wall"] = wall;
  d["cpu"] = cpu;
  return d;
}

// ---- errors -------------------------------------------------------------------

void raise_python_error(std::string_view errc, const std::string& where, const std::string& what,
                        const std::string& message) {
  nb::object mod = nb::module_::import_("disttrain.errors");
  nb::object cls = mod.attr("error_class")(std::string(errc));
  nb::object exc = cls(what, std::string(errc), where, message);
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "disttrain's C++ core (nanobind). Use the `disttrain` package, not this module.";
  m.attr("__version__") = DISTTRAIN_VERSION_STRING;
  m.attr("max_reorder_modules") = disttrain::max_reorder_modules;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const disttrain::error& e) {
      raise_python_error(disttrain::to_string(e.code()), e.where(), e.what(), e.message());
    } catch (const json::exception& e) {  // a mistyped field nlohmann reported itself
      raise_python_error("parse_error", "", std::string("disttrain: parse_error: ") + e.what(),
                         e.what());
    }
  });

  const auto release = nb::call_guard<nb::gil_scoped_release>();
  m.def(
      "scenario_preset",
      [](const std::string& name) {
        return json(disttrain::presets::scenario_preset(name)).dump();
      },
      "name"_a, "The built-in scenario `name` as JSON text.");
  m.def("scenario_preset_names", &disttrain::presets::scenario_preset_names);
  m.def(
      "model_preset",
      [](const std::string& name) { return json(disttrain::presets::model_preset(name)).dump(); },
      "name"_a);
  m.def("model_preset_names", &disttrain::presets::model_preset_names);
  m.def(
      "data_preset",
      [](const std::string& name) { return json(disttrain::presets::data_preset(name)).dump(); },
      "name"_a);
  m.def("data_preset_names", &disttrain::presets::data_preset_names);
  m.def(
      "cluster_preset",
      [](const std::string& name, int num_gpus) {
        return json(disttrain::presets::cluster_preset(name, num_gpus)).dump();
      },
      "name"_a, "num_gpus"_a);
  m.def("cluster_preset_names", &disttrain::presets::cluster_preset_names);

  m.def("plan", &plan_impl, "scenario"_a, "planner"_a, "cost"_a, "baseline"_a, "data"_a, release,
        "Plans the scenario (JSON text); returns the result as JSON text.");
  m.def("heterogeneity", &heterogeneity_impl, "scenario"_a, "planner"_a, "cost"_a, "data"_a,
        "iterations"_a, "seed"_a.none(), release,
        "The plan and the baseline on sampled batches, four cases; returns JSON text.");
  m.def("evaluate", &evaluate_impl, "plan"_a, "scenario"_a, "cost"_a, release,
        "Scores a plan on a scenario; returns JSON text.");
  m.def("simulate", &simulate_impl, "plan"_a, "scenario"_a, "cost"_a, "trace"_a.none(),
        "svg"_a.none(), release, "Simulates a plan's iteration; returns JSON text.");

  nb::class_<py_reorderer>(m, "Reorderer")
      .def(nb::init<const std::string&>(), "options"_a, "Reorderer from reorder_options JSON.")
      .def("options", &py_reorderer::options_json, "The options in use (JSON text).")
      .def("assign", &py_reorderer::assign, "costs"_a, "ids"_a.none(),
           "tokens"_a.none() = nb::none(),
           "Reorders one batch: costs (n, K) float64 C-contiguous, ids (n,) uint64 or None, "
           "tokens (n, K) uint32 or None (sizes for the modules' max_tokens).")
      .def("assign_json", &py_reorderer::assign_json, "costs"_a, "ids"_a.none(),
           "tokens"_a.none() = nb::none(),
           "Like assign, but the full reorder_result as JSON text.");
  m.def("bench_reorder_cpp", &bench_reorder_cpp, "costs"_a, "options"_a, "reps"_a, "mode"_a,
        "Seconds per call of the C++ reorderer on the same instance (benchmark reference).");
  add_program_bindings(m);
}
