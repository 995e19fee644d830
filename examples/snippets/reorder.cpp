// The examples of the reorder part (disttrain/reorder/*.hpp): see snippets.hpp.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "disttrain/reorder.hpp"
#include "disttrain/reorder/json.hpp"
#include "snippets.hpp"

namespace {

using snippets::check;

// A host's sample type and its per-module costs, as the sample_cost examples use them.
namespace host {
struct my_sample {
  std::uint64_t id = 0;
  double vit = 0, llm = 0;
};
double enc(const my_sample& s) { return s.vit; }
double llm(const my_sample& s) { return s.llm; }
double gen(const my_sample&) { return 0.5; }
}  // namespace host

// The host's loader of the sample_meta example: converts to a batch of any sample type.
struct any_batch {
  template <class T>
  operator std::vector<T>() const {  // NOLINT(google-explicit-constructor)
    return {T{1, 0.5, 2.0}, T{2, 1.5, 1.0}};
  }
};

// n samples with ids 40, 41, ... and uneven costs over `modules` modules.
std::vector<disttrain::sample_meta> make_batch(std::size_t n, std::size_t modules) {
  std::vector<disttrain::sample_meta> batch(n);
  for (std::size_t i = 0; i < n; ++i) {
    batch[i].id = 40 + i;
    for (std::size_t k = 0; k < modules; ++k)
      batch[i].cost[k] = 1.0 + static_cast<double>((i * 7 + k * 3) % 5);
  }
  return batch;
}

// Encoder DP 2 and backbone DP 3, 4 microbatches (the reorderer examples).
disttrain::reorder_options two_modules() {
  disttrain::reorder_options o;
  o.modules = {{"encoder", 2}, {"backbone", 3}};
  o.microbatches = 4;
  return o;
}

// A sample map of 24 samples (ids 40..63) on two_modules().
disttrain::reorder_result two_module_map() {
  disttrain::reorderer<> r(two_modules());
  return r.assign(make_batch(24, 2));
}

bool near(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b)); }

void assignment() {
  disttrain::reorderer<> reorderer(two_modules());
  const auto batch = make_batch(24, 2);
  const std::uint32_t my_dp_rank = 1;
  std::vector<std::uint64_t> loaded;
  auto load_sample = [&](std::uint64_t id) { loaded.push_back(id); };
  //! [assignment]
  disttrain::reorder_result res = reorderer.assign(batch);
  for (std::uint32_t j = 0; j < res.microbatches; ++j)
    for (std::uint32_t idx : res.cell(/*module*/ 1, /*replica*/ my_dp_rank, j))
      load_sample(res.samples[idx].id);
  disttrain::validate(res);  // throws if any sample is lost or duplicated
  disttrain::json j = res;   // to_json
  //! [assignment]
  std::size_t mine = 0;
  for (const auto& p : res.samples)
    if (p.module[1].replica == my_dp_rank) ++mine;
  check(!loaded.empty() && loaded.size() == mine, "backbone replica 1 loads its samples");
  check(j.get<disttrain::reorder_result>().samples.size() == 24, "JSON round trip");
}

void module_place() {
  //! [module_place]
  disttrain::module_place p{.replica = 2, .offset = 0};
  //! [module_place]
  check(p.replica == 2 && p.offset == 0, "module_place");
}

void sample_place() {
  const auto res = two_module_map();
  //! [sample_place]
  const disttrain::sample_place& p = res.samples[0];
  std::uint32_t enc_replica = p.module[0].replica;
  //! [sample_place]
  check(enc_replica < 2, "an encoder replica");
}

void reorder_result() {
  const auto res = two_module_map();
  //! [reorder_result]
  auto span = res.cell(0, 1, 3);  // encoder replica 1, microbatch 3
  double t = res.slowest(1, 3);   // slowest backbone replica's load in microbatch 3
  const auto* p = res.find(42);   // placement of sample id 42 (or nullptr)
  //! [reorder_result]
  check(!span.empty() && t > 0 && p != nullptr && p->id == 42, "cell, slowest, find");
}

void validate() {
  const auto res = two_module_map();
  //! [validate]
  disttrain::validate(res);
  //! [validate]
}

void multimodal_cost_file() {
  //! [multimodal_cost_file]
  disttrain::multimodal_cost cost{
      .encoder = {0, 1e-6, 1e-10}, .backbone = {0, 4e-6, 2e-10}, .generator = {5e-3, 0, 0}};
  disttrain::multimodal_sample s{
      .id = 1, .text_tokens = 300, .image_tokens = {256, 1024}, .generated_tokens = {4096}};
  std::array<double, 3> c = cost(s);  // {encoder, backbone, generator}
  //! [multimodal_cost_file]
  const double backbone_t = 300 + 256 + 1024;
  check(near(c[0], 1e-6 * (256 + 1024) + 1e-10 * (256.0 * 256 + 1024.0 * 1024)), "encoder cost");
  check(near(c[1], 4e-6 * backbone_t + 2e-10 * backbone_t * backbone_t), "backbone cost");
  check(near(c[2], 5e-3), "generator cost");
}

void multimodal_sample() {
  //! [multimodal_sample]
  disttrain::multimodal_sample s{
      .id = 3, .text_tokens = 512, .image_tokens = {576}, .generated_tokens = {}};
  //! [multimodal_sample]
  check(s.image_tokens.size() == 1 && s.generated_tokens.empty(), "multimodal_sample");
}

void token_cost() {
  //! [token_cost]
  disttrain::token_cost c{.per_item = 0, .linear = 1, .quadratic = 0.5};
  double v = c(4.0);  // 12
  //! [token_cost]
  check(v == 12, "token_cost");
}

void multimodal_cost() {
  //! [multimodal_cost]
  disttrain::multimodal_cost cost;
  cost.backbone = {0, 1.0, 0.0};
  disttrain::multimodal_sample s;
  s.text_tokens = 8;
  double t = cost(s)[1];  // 8
  //! [multimodal_cost]
  check(t == 8, "backbone cost of 8 tokens");
}

void options_file() {
  //! [options_file]
  disttrain::reorder_options o;
  o.modules = {{"encoder", 2}, {"backbone", 3}, {"generator", 2}};
  o.microbatches = 8;
  o.stages = disttrain::chain_stages(std::vector<std::uint32_t>{1, 4, 1});
  o.validate();
  //! [options_file]
  check(o.stages.size() == 6, "six scoring stages");
}

void reorder_module() {
  //! [reorder_module]
  disttrain::reorder_module m{"backbone", 3};
  disttrain::reorder_module e{.name = "encoder", .dp = 2, .max_samples = 4, .max_tokens = 16384};
  //! [reorder_module]
  check(!m.limited() && e.limited(), "limits");
}

void pipeline_stage() {
  //! [pipeline_stage]
  disttrain::pipeline_stage s{.module = 1, .forward_scale = 0.25, .backward_scale = 0.5};
  //! [pipeline_stage]
  check(s.module == 1 && s.backward_scale == 0.5, "pipeline_stage");
}

void chain_stages() {
  //! [chain_stages]
  auto st = disttrain::chain_stages(std::vector<std::uint32_t>{1, 4, 1});  // 6 stages
  //! [chain_stages]
  check(st.size() == 6 && st[1].module == 1 && near(st[1].forward_scale, 0.25), "chain_stages");
}

void reorder_options() {
  //! [reorder_options]
  disttrain::reorder_options o;
  o.modules = {{"encoder", 2}, {"backbone", 3}};
  o.microbatches = 4;
  //! [reorder_options]
  o.validate();
  check(o.modules.size() == 2, "reorder_options");
}

void arrival_order() {
  const disttrain::reorder_options opts = two_modules();
  const auto meta = make_batch(24, 2);
  //! [arrival_order]
  disttrain::reorderer<> plain(disttrain::arrival_order(opts));
  disttrain::reorder_result as_loaded = plain.assign(meta);  // meta in arrival order
  //! [arrival_order]
  check(as_loaded.samples[0].microbatch == 0 && as_loaded.samples[23].microbatch == 3,
        "microbatch j is the j-th run of samples");
}

// Per-microbatch stage times for the ordering examples: 4 microbatches x 2 stages.
struct four_by_two {
  std::vector<double> f{1, 1, 3, 3, 1, 1, 2, 2}, b{2, 2, 6, 6, 2, 2, 4, 4};
  disttrain::microbatch_times times{4, 2, f, b};
};

void ordering() {
  const four_by_two data;
  const auto& times = data.times;
  const std::size_t m = 4;
  //! [ordering]
  disttrain::pipeline_time eval;
  disttrain::microbatch_orderer ord;
  std::vector<std::uint32_t> perm(m);  // perm[position] = original microbatch
  double T = ord.order(times, eval, disttrain::order_method::search, perm);
  //! [ordering]
  check(T <= eval(times), "never worse than the given order");
}

void order_method() {
  //! [order_method]
  auto m = disttrain::order_method::paper;
  //! [order_method]
  check(m != disttrain::reorder_options{}.order, "paper is not the default");
}

void microbatch_orderer() {
  const four_by_two data;
  const auto& times = data.times;
  disttrain::pipeline_time eval;
  std::vector<std::uint32_t> perm(4);
  //! [microbatch_orderer]
  disttrain::microbatch_orderer ord;
  ord.budget = 500;
  double T = ord.order(times, eval, disttrain::order_method::search, perm);
  //! [microbatch_orderer]
  check(T > 0 && perm.size() == 4, "order");
}

void partition() {
  //! [partition]
  disttrain::partitioner p;
  std::vector<double> costs{5, 4, 3, 3, 2, 1};
  std::vector<std::uint32_t> bin(costs.size());
  double max_load =
      p.partition(costs, 2, /*equal_count=*/false, disttrain::balance_method::refined, bin);  // 9
  //! [partition]
  check(max_load == 9, "refined: optimal split 9 + 9");
}

void balance_method() {
  //! [balance_method]
  auto m = disttrain::balance_method::karmarkar_karp;
  //! [balance_method]
  check(m != disttrain::reorder_options{}.balance, "karmarkar_karp is not the default");
}

void partitioner() {
  //! [partitioner]
  disttrain::partitioner p;
  std::vector<std::uint32_t> bin(3);
  p.partition(std::vector<double>{3, 2, 1}, 2, false, disttrain::balance_method::lpt, bin);
  // bin == {0, 1, 1}
  //! [partitioner]
  check(bin == std::vector<std::uint32_t>{0, 1, 1}, "LPT");
}

void pipeline_time_file() {
  //! [pipeline_time_file]
  std::vector<double> f{1, 1, 1, 1}, b{2, 2, 2, 2};  // 2 microbatches x 2 stages
  disttrain::microbatch_times t{2, 2, f, b};
  disttrain::pipeline_time eval;  // 1F1B
  double T = eval(t);             // (m + S - 1) * (f + b) = 9
  //! [pipeline_time_file]
  check(T == 9, "1F1B time");
}

void microbatch_times() {
  const four_by_two data;
  const std::size_t m = 4, S = 2;
  const std::vector<double>&forward = data.f, &backward = data.b;
  //! [microbatch_times]
  disttrain::microbatch_times t{m, S, forward, backward};
  double f = t.forward_at(0, S - 1);
  //! [microbatch_times]
  check(f == 1, "forward_at");
}

double my_simulate(const disttrain::microbatch_times& t) {
  disttrain::pipeline_time eval;
  return eval(t);
}

void order_objective() {
  //! [order_objective]
  auto makespan = [](const disttrain::microbatch_times& t) { return my_simulate(t); };
  static_assert(disttrain::order_objective<decltype(makespan)>);
  //! [order_objective]
  check(makespan(four_by_two{}.times) > 0, "makespan");
}

void pipeline_time() {
  const four_by_two data;
  const auto& times = data.times;
  //! [pipeline_time]
  disttrain::pipeline_time eval{disttrain::pipeline_kind::one_f_one_b};
  double T = eval(times);
  //! [pipeline_time]
  check(T == my_simulate(times), "the default is 1F1B");
}

void reorderer_file() {
  const std::vector<std::vector<disttrain::sample_meta>> loader = {make_batch(24, 2),
                                                                   make_batch(12, 2)};
  int fed = 0;
  auto feed = [&](const disttrain::reorder_result& res) {
    fed += static_cast<int>(res.samples.size());
  };
  //! [reorderer_file]
  disttrain::reorder_options o;
  o.modules = {{"encoder", 2}, {"backbone", 3}};
  o.microbatches = 4;
  disttrain::reorderer<> r(o);
  disttrain::reorder_result res;
  for (auto& batch : loader) {  // std::vector<disttrain::sample_meta>
    r.assign(batch, res);       // reuses res's buffers
    feed(res);
  }
  //! [reorderer_file]
  check(fed == 24 + 12, "both batches fed");
}

void reorderer() {
  const disttrain::reorder_options opts = two_modules();
  const auto meta = make_batch(24, 2);
  //! [reorderer]
  disttrain::reorderer<> r(opts);
  disttrain::reorder_result res = r.assign(meta);
  //! [reorderer]
  check(res.samples.size() == 24 && res.microbatches == 4, "assign");
}

void sample_meta_file() {
  auto load = [] { return any_batch{}; };
  //! [sample_meta_file]
  struct my_sample {
    std::uint64_t id;
    double vit, llm;
  };
  auto cost = [](const my_sample& s) { return std::array<double, 2>{s.vit, s.llm}; };
  std::vector<my_sample> batch = load();
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(batch, cost, meta);  // ids taken from my_sample::id
  //! [sample_meta_file]
  check(meta.size() == 2 && meta[1].id == 2 && meta[1].cost[0] == 1.5 && meta[1].modules == 2,
        "describe_batch");
}

void sample_meta() {
  //! [sample_meta]
  disttrain::sample_meta s{.id = 7, .cost = {2.0e-3, 9.5e-3, 0.0, 0.0}};
  s.tokens = {1024, 4096};  // encoder patches, backbone sequence length
  //! [sample_meta]
  check(s.cost[1] == 9.5e-3 && s.tokens[1] == 4096, "sample_meta");
}

void module_costs() {
  //! [module_costs]
  disttrain::module_costs c;
  c.count = 2;
  c[1] = 0.5;
  //! [module_costs]
  check(c.size() == 2 && c[1] == 0.5, "module_costs");
}

void module_cost_vector() {
  //! [module_cost_vector]
  static_assert(disttrain::module_cost_vector<std::array<double, 3>>);
  //! [module_cost_vector]
}

void sample_cost() {
  using host::enc, host::gen, host::llm, host::my_sample;
  //! [sample_cost]
  auto cost = [](const my_sample& s) { return std::array<double, 3>{enc(s), llm(s), gen(s)}; };
  static_assert(disttrain::sample_cost<decltype(cost), my_sample>);
  //! [sample_cost]
  check(cost(my_sample{.id = 1, .vit = 2, .llm = 3})[2] == 0.5, "sample_cost");
}

void default_sample_id() {
  using host::my_sample;
  //! [default_sample_id]
  std::uint64_t id = disttrain::default_sample_id{}(my_sample{.id = 9}, 0);  // 9
  //! [default_sample_id]
  check(id == 9, "default_sample_id");
}

void validate_sample_costs() {
  const auto meta = make_batch(6, 3);
  //! [validate_sample_costs]
  disttrain::validate_sample_costs(meta[3], 3, 3);
  //! [validate_sample_costs]
}

void describe_batch() {
  const disttrain::multimodal_cost coeffs{
      .encoder = {0, 1e-6, 0}, .backbone = {0, 4e-6, 0}, .generator = {5e-3, 0, 0}};
  const std::vector<disttrain::multimodal_sample> samples = {
      {.id = 5, .text_tokens = 100, .image_tokens = {256}, .generated_tokens = {}},
      {.id = 6, .text_tokens = 300, .image_tokens = {}, .generated_tokens = {1024}}};
  //! [describe_batch]
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(samples, disttrain::multimodal_cost{coeffs}, meta);
  //! [describe_batch]
  check(meta.size() == 2 && meta[0].id == 5 && meta[1].cost[2] == 5e-3, "describe_batch");
}

}  // namespace

int main() {
  snippets::runner r("reorder");
  r.run("assignment", assignment);
  r.run("module_place", module_place);
  r.run("sample_place", sample_place);
  r.run("reorder_result", reorder_result);
  r.run("validate", validate);
  r.run("multimodal_cost_file", multimodal_cost_file);
  r.run("multimodal_sample", multimodal_sample);
  r.run("token_cost", token_cost);
  r.run("multimodal_cost", multimodal_cost);
  r.run("options_file", options_file);
  r.run("reorder_module", reorder_module);
  r.run("pipeline_stage", pipeline_stage);
  r.run("chain_stages", chain_stages);
  r.run("reorder_options", reorder_options);
  r.run("arrival_order", arrival_order);
  r.run("ordering", ordering);
  r.run("order_method", order_method);
  r.run("microbatch_orderer", microbatch_orderer);
  r.run("partition", partition);
  r.run("balance_method", balance_method);
  r.run("partitioner", partitioner);
  r.run("pipeline_time_file", pipeline_time_file);
  r.run("microbatch_times", microbatch_times);
  r.run("order_objective", order_objective);
  r.run("pipeline_time", pipeline_time);
  r.run("reorderer_file", reorderer_file);
  r.run("reorderer", reorderer);
  r.run("sample_meta_file", sample_meta_file);
  r.run("sample_meta", sample_meta);
  r.run("module_costs", module_costs);
  r.run("module_cost_vector", module_cost_vector);
  r.run("sample_cost", sample_cost);
  r.run("default_sample_id", default_sample_id);
  r.run("validate_sample_costs", validate_sample_costs);
  r.run("describe_batch", describe_batch);
  return r.finish();
}
