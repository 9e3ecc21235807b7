// The memory wall's trade-offs on the 8-layer model (dim 256, 8 heads, ctx 128, vocab 256),
// measured on one rank in the same run (issue 18's parallel_bench):
//
// - activation_checkpointing_{blocks,every_2}: the activations a rank holds for backward at its
//   batch (decoder_cpu_batch::activation_bytes: the residual stream, one segment's blocks, the
//   head) against keeping every block's (target <= 0.3 with blocks), and the step time (forward,
//   backward and AdamW) against it (target <= 1.4x), alternating repeat by repeat.
//
// - pp2_m{4,8,16}_tokens_per_s: two pipeline stages (1F1B, m micro-batches) against two
//   data-parallel ranks, one core each (two ranks as threads of this process, their groups over
//   Gloo on loopback), the same global batch of 16 sequences (target: m = 8 at least 0.8 of
//   dp's); and each pipeline run's bubble (the stages' idle share of the schedule) against
//   (pp - 1) / (m + pp - 1) (target: within 0.05 at m = 8).
//
// - pp2_m{4,8,16}_rank_memory_mb: the largest stage's memory (parameters, gradients, optimizer
//   state, stashed activations) against one rank with the whole model (target <= 0.6).
//
// - zb1_pp2_m{4,8}_tokens_per_s: the zero-bubble schedule (backward in halves, the weight halves
//   filling the bubbles) against 1F1B on the same two stages; its bubble against 1F1B's (the
//   issue's "a smaller bubble", reported as their ratio).
//
// - tp2_tokens_per_s: two tensor-parallel ranks against two data-parallel ranks, one core each,
//   the same global batch; and the share of the step the tensor-parallel sums take.
//
//   parallel_bench [--repeats R] [--steps S] [--threads T]
//                  [--only checkpointing|pipeline|tensor|zero3]

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "actors/trainer.hpp"
#include "bench/bench_report.hpp"
#include "models/decoder/adamw_optimizer.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace {

using namespace troupe;

constexpr models::decoder_config model{256, 128, 8, 256, 8};
constexpr int batch = 8;

// One configuration of a rank: its model replicas with `segment` (0: no checkpointing).
struct rank_model {
  rank_model(int threads, int segment)
      : layout(model, models::layer_range::all(model)),
        params(layout.total()),
        grads(layout.total()),
        optimizer(layout, 0, layout.total(), {}),
        runner(layout, batch, threads, segment),
        tokens(batch * model.ctx),
        targets(batch * model.ctx) {
    layout.initialize(params.data(), 1);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>((i * 2654435761u) >> 8) & 255;
      targets[i] = static_cast<int32_t>((i * 40503u + 7) >> 4) & 255;
    }
  }

  // Seconds per step over `steps` steps.
  double step_s(int steps) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      std::memset(grads.data(), 0, grads.size() * sizeof(float));
      runner.run(params.data(), grads.data(), batch, model.ctx, tokens.data(), targets.data(),
                 1.0f / (batch * model.ctx));
      optimizer.step(params.data(), grads.data(), 1e-4f, 1.0f);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  }

  models::decoder_layout layout;
  std::vector<float> params, grads;
  models::adamw_optimizer optimizer;
  models::decoder_cpu_batch runner;
  std::vector<int32_t> tokens, targets;
};

void activation_checkpointing(int threads, int steps, int repeats) {
  rank_model none(threads, 0);
  for (const auto& [name, segment] : {std::pair{"blocks", 1}, {"every_2", 2}}) {
    rank_model checkpointed(threads, segment);
    none.step_s(1), checkpointed.step_s(1);  // warm up
    std::vector<double> ours, theirs;
    for (int r = 0; r < repeats; ++r) {
      if (r % 2 == 0) {
        ours.push_back(checkpointed.step_s(steps));
        theirs.push_back(none.step_s(steps));
      } else {
        theirs.push_back(none.step_s(steps));
        ours.push_back(checkpointed.step_s(steps));
      }
    }
    const nlohmann::json extra = {{"layers", model.layers}, {"dim", model.dim},
                                  {"batch", batch},         {"ctx", model.ctx},
                                  {"threads", threads},     {"segment", segment}};
    const double mine = static_cast<double>(checkpointed.runner.activation_bytes()) / 1e6;
    const double full = static_cast<double>(none.runner.activation_bytes()) / 1e6;
    const nlohmann::json memory = {
        {"bench", "parallel_bench"},
        {"metric", std::string("activation_checkpointing_") + name + "_activation_mb"},
        {"value", mine},
        {"unit", "MB"},
        {"baseline", "every block's activations kept"},
        {"baseline_value", full},
        {"ratio", full / mine}};
    std::printf("%s\n", memory.dump().c_str());
    bench::report("parallel_bench", std::string("activation_checkpointing_") + name + "_step_s",
                  ours, "s", "every block's activations kept", theirs, bench::better::lower, extra);
  }
}

// Sequences of the text the ranks read: made up, every byte value present.
actors::text_corpus bench_corpus() {
  std::string text;
  for (uint32_t x = 1; text.size() < (1u << 20);) {
    x = x * 1664525u + 1013904223u;
    text.push_back(static_cast<char>(x >> 24));
  }
  return *actors::text_corpus::from_text(std::move(text), 0.05, model.ctx, "parallel_bench");
}

struct grid_result {
  double tokens_per_s = 0;
  double bubble = 0;        // the stages' idle share (pipelines)
  double tensor_share = 0;  // of the step, summing over the tensor-parallel group
};

// How two ranks split the work.
enum class split { data, pipeline, tensor };

// `steps` steps (after one) of two ranks, each on one core: data parallel (at ZeRO stage
// `zero`), two pipeline stages over `micro_batches` micro-batches, or two tensor-parallel ranks
// of each block.
grid_result two_ranks(
    split how, int micro_batches, int steps, const actors::text_corpus& corpus,
    actors::pipeline_schedule_kind schedule = actors::pipeline_schedule_kind::one_f_one_b,
    actors::zero_stage zero = actors::zero_stage::none) {
  constexpr int global = 16;
  comm::memory_store store;
  std::vector<double> seconds(2), busy(2), idle(2), summing(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      const models::layer_range range =
          how == split::pipeline
              ? models::layer_range{r * model.layers / 2, (r + 1) * model.layers / 2}
              : models::layer_range::all(model);
      const models::decoder_layout layout(
          model, range, models::decoder_head::lm,
          how == split::tensor ? models::tensor_parallel{r, 2} : models::tensor_parallel{});
      auto group = comm::make_gloo_communicator(store, {.name = "two", .rank = r, .size = 2});
      if (!group.ok()) std::abort();
      actors::trainer_options o;
      o.global_batch = global;
      o.threads = 1;
      o.overlap_comm = false;
      o.zero = zero;
      if (how == split::pipeline) o.pipeline = {2, r, micro_batches, schedule};
      auto t = actors::trainer::create(layout, o, how == split::data ? group->get() : nullptr,
                                       how == split::pipeline ? group->get() : nullptr,
                                       how == split::tensor ? group->get() : nullptr);
      if (!t.ok()) std::abort();
      const bool shares = how == split::data;  // the others read the same batch
      auto loader = *actors::data_loader::create(corpus, model.ctx, global, shares ? r : 0,
                                                 shares ? 2 : 1, 1);
      if (!(*t)->step(loader.next()).ok()) std::abort();  // warm up
      const auto start = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) {
        if (!(*t)->step(loader.next()).ok()) std::abort();
        busy[r] += (*t)->last_pipeline_times().busy_s;
        idle[r] += (*t)->last_pipeline_times().idle_s;
        summing[r] += (*t)->last_pipeline_times().tensor_sum_s;
      }
      seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  }
  for (auto& t : ranks)
    t.join();
  grid_result g;
  const double slowest = std::max(seconds[0], seconds[1]);
  g.tokens_per_s = static_cast<double>(steps) * global * model.ctx / slowest;
  if (how == split::pipeline) {
    g.bubble = (idle[0] + idle[1]) / (busy[0] + busy[1] + idle[0] + idle[1]);
  }
  if (how == split::tensor) g.tensor_share = std::max(summing[0], summing[1]) / slowest;
  return g;
}

// A rank's parameters, gradients, optimizer state and activations (as trainer::create allocates
// them) at pp = 2 with m micro-batches, against one rank holding the whole model, in the same
// passes of 16 / m sequences (train.micro_batch), and in one pass of the whole batch. 1F1B's first
// stage stashes pp micro-batches of half the blocks: as many activations as pp = 1's pass.
void pipeline_memory() {
  constexpr int global = 16;
  auto mb = [](int64_t bytes) { return static_cast<double>(bytes) / 1e6; };
  auto total = [](const actors::trainer_memory& x) {
    return x.parameters + x.gradients + x.optimizer + x.activations;
  };
  auto parts = [&](const actors::trainer_memory& x) {
    return nlohmann::json{{"parameters", mb(x.parameters)},
                          {"gradients", mb(x.gradients)},
                          {"optimizer", mb(x.optimizer)},
                          {"activations", mb(x.activations)}};
  };
  const models::decoder_layout whole(model, models::layer_range::all(model));
  actors::trainer_options o;
  o.global_batch = global;
  o.threads = 1;
  const actors::trainer_memory one_pass = actors::trainer::memory(whole, o, 1);
  for (int m : {4, 8, 16}) {
    actors::trainer_memory stage_peak;
    for (int s = 0; s < 2; ++s) {
      actors::trainer_options p = o;
      p.pipeline = {2, s, m, actors::pipeline_schedule_kind::one_f_one_b};
      const models::decoder_layout stage(model, {s * model.layers / 2, (s + 1) * model.layers / 2});
      const actors::trainer_memory x = actors::trainer::memory(stage, p, 1);
      if (total(x) > total(stage_peak)) stage_peak = x;
    }
    actors::trainer_options passes = o;
    passes.micro_batch = global / m;
    const actors::trainer_memory pp1 = actors::trainer::memory(whole, passes, 1);
    const nlohmann::json row = {{"bench", "parallel_bench"},
                                {"metric", "pp2_m" + std::to_string(m) + "_rank_memory_mb"},
                                {"value", mb(total(stage_peak))},
                                {"unit", "MB"},
                                {"baseline", "pp 1 in the same passes (train.micro_batch " +
                                                 std::to_string(global / m) + ")"},
                                {"baseline_value", mb(total(pp1))},
                                {"ratio", mb(total(stage_peak)) / mb(total(pp1))},
                                {"stage", parts(stage_peak)},
                                {"pp1", parts(pp1)},
                                {"pp1_one_pass_mb", mb(total(one_pass))},
                                {"ratio_to_one_pass", mb(total(stage_peak)) / mb(total(one_pass))},
                                {"layers", model.layers},
                                {"dim", model.dim}};
    std::printf("%s\n", row.dump().c_str());
  }
}

void pipeline_against_data_parallel(int steps, int repeats) {
  pipeline_memory();
  const actors::text_corpus corpus = bench_corpus();
  for (int m : {4, 8, 16}) {
    std::vector<double> ours, theirs, bubbles;
    for (int r = 0; r < repeats; ++r) {
      const grid_result pp = two_ranks(split::pipeline, m, steps, corpus);
      ours.push_back(pp.tokens_per_s);
      bubbles.push_back(pp.bubble);
      theirs.push_back(two_ranks(split::data, 1, steps, corpus).tokens_per_s);
    }
    bench::report("parallel_bench", "pp2_m" + std::to_string(m) + "_tokens_per_s", ours, "tokens/s",
                  "dp 2, one core per rank, the same global batch of 16", theirs,
                  bench::better::higher,
                  {{"micro_batches", m},
                   {"bubble", bench::median(bubbles)},
                   {"bubble_theory", actors::theoretical_bubble(2, m)},
                   {"layers", model.layers},
                   {"dim", model.dim}});
  }
  // Zero bubble against 1F1B, the same stages and micro-batches, alternating.
  for (int m : {4, 8}) {
    std::vector<double> ours, theirs, zb_bubbles, one_bubbles;
    for (int r = 0; r < repeats; ++r) {
      const grid_result zb =
          two_ranks(split::pipeline, m, steps, corpus, actors::pipeline_schedule_kind::zb1);
      const grid_result one = two_ranks(split::pipeline, m, steps, corpus);
      ours.push_back(zb.tokens_per_s);
      theirs.push_back(one.tokens_per_s);
      zb_bubbles.push_back(zb.bubble);
      one_bubbles.push_back(one.bubble);
    }
    const double zb_bubble = bench::median(zb_bubbles), one_bubble = bench::median(one_bubbles);
    bench::report(
        "parallel_bench", "zb1_pp2_m" + std::to_string(m) + "_tokens_per_s", ours, "tokens/s",
        "1f1b, the same 2 stages and micro-batches", theirs, bench::better::higher,
        {{"micro_batches", m},
         {"bubble", zb_bubble},
         {"bubble_1f1b", one_bubble},
         {"bubble_ratio", one_bubble > 0 ? zb_bubble / one_bubble : 0.0},
         {"bubble_theory", actors::ideal_bubble(actors::pipeline_schedule_kind::zb1, 2, m)},
         {"bubble_theory_1f1b", actors::theoretical_bubble(2, m)}});
  }
}

// Two tensor-parallel ranks (four heads and half the MLP each, four all-reduces per block and
// micro-batch) against two data-parallel ranks, the same global batch, alternating.
void tensor_against_data_parallel(int steps, int repeats) {
  const actors::text_corpus corpus = bench_corpus();
  std::vector<double> ours, theirs, shares;
  for (int r = 0; r < repeats; ++r) {
    const grid_result tp = two_ranks(split::tensor, 1, steps, corpus);
    ours.push_back(tp.tokens_per_s);
    shares.push_back(tp.tensor_share);
    theirs.push_back(two_ranks(split::data, 1, steps, corpus).tokens_per_s);
  }
  bench::report("parallel_bench", "tp2_tokens_per_s", ours, "tokens/s",
                "dp 2, one core per rank, the same global batch of 16", theirs,
                bench::better::higher,
                {{"allreduce_share", bench::median(shares)},
                 {"layers", model.layers},
                 {"dim", model.dim},
                 {"heads", model.heads}});
}

// ZeRO-3 against ZeRO-1 on two data-parallel ranks: what a rank allocates (trainer::memory:
// for ZeRO-3 its chunks, the staging buffers, and the most it holds gathered at once), and
// tokens/s, alternating.
void zero3_against_zero1(int steps, int repeats) {
  constexpr int global = 16;
  auto mb = [](int64_t bytes) { return static_cast<double>(bytes) / 1e6; };
  const models::decoder_layout whole(model, models::layer_range::all(model));
  actors::trainer_options o;
  o.global_batch = global;
  o.threads = 1;
  o.zero = actors::zero_stage::one;
  const actors::trainer_memory one = actors::trainer::memory(whole, o, 2);
  o.zero = actors::zero_stage::three;
  const actors::trainer_memory three = actors::trainer::memory(whole, o, 2);
  const auto parts = [&](const actors::trainer_memory& x) {
    return nlohmann::json{{"parameters", mb(x.parameters)},
                          {"gradients", mb(x.gradients)},
                          {"optimizer", mb(x.optimizer)}};
  };
  const int64_t ours = three.parameters + three.optimizer, theirs = one.parameters + one.optimizer;
  const int64_t ours_all = ours + three.gradients, theirs_all = theirs + one.gradients;
  // The same ratio for larger groups (allocations only: nothing is run).
  nlohmann::json larger;
  for (int ranks : {4, 8}) {
    actors::trainer_options p = o;
    p.global_batch = 8 * ranks;
    p.zero = actors::zero_stage::one;
    const actors::trainer_memory a = actors::trainer::memory(whole, p, ranks);
    p.zero = actors::zero_stage::three;
    const actors::trainer_memory b = actors::trainer::memory(whole, p, ranks);
    larger["dp" + std::to_string(ranks)] = static_cast<double>(b.parameters + b.optimizer) /
                                           static_cast<double>(a.parameters + a.optimizer);
  }
  const nlohmann::json row = {
      {"bench", "parallel_bench"},
      {"metric", "zero3_dp2_parameter_and_optimizer_mb"},
      {"value", mb(ours)},
      {"unit", "MB"},
      {"baseline", "ZeRO-1 at dp 2"},
      {"baseline_value", mb(theirs)},
      {"ratio", static_cast<double>(ours) / static_cast<double>(theirs)},
      {"with_gradients_ratio", static_cast<double>(ours_all) / static_cast<double>(theirs_all)},
      {"ratio_at", larger},
      {"zero3", parts(three)},
      {"zero1", parts(one)},
      {"layers", model.layers},
      {"dim", model.dim}};
  std::printf("%s\n", row.dump().c_str());
  const actors::text_corpus corpus = bench_corpus();
  std::vector<double> z3, z1;
  for (int r = 0; r < repeats; ++r) {
    const auto schedule = actors::pipeline_schedule_kind::one_f_one_b;
    z3.push_back(
        two_ranks(split::data, 1, steps, corpus, schedule, actors::zero_stage::three).tokens_per_s);
    z1.push_back(
        two_ranks(split::data, 1, steps, corpus, schedule, actors::zero_stage::one).tokens_per_s);
  }
  bench::report("parallel_bench", "zero3_dp2_tokens_per_s", z3, "tokens/s",
                "ZeRO-1, dp 2, one core per rank, the same global batch of 16", z1,
                bench::better::higher, {{"layers", model.layers}, {"dim", model.dim}});
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5, steps = 3;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--only" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "checkpointing" ||
                std::string(argv[i + 1]) == "pipeline" || std::string(argv[i + 1]) == "tensor" ||
                std::string(argv[i + 1]) == "zero3")) {
      only = argv[++i];
    } else {
      return bench::unknown_argument("parallel_bench", arg);
    }
  }
  if (only.empty() || only == "checkpointing") activation_checkpointing(threads, steps, repeats);
  if (only.empty() || only == "pipeline") pipeline_against_data_parallel(steps, repeats);
  if (only.empty() || only == "tensor") tensor_against_data_parallel(steps, repeats);
  if (only.empty() || only == "zero3") zero3_against_zero1(steps, repeats);
  return 0;
}
