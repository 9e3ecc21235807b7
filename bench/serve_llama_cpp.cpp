// serve_bench --llama-cpp: troupe serve against llama.cpp on the same model, prompts and
// precision, in the same run. The model is a Llama of quantization_bench's shape (4 layers, dim
// 1024, 16 heads on 4 key/value heads, MLP 2816, its own output head) over a byte-level BPE of
// 8,192 ids trained on the Debian fortunes, with random weights: 247.5 MB in f32, past every
// cache, so that decoding reads its weights from memory as a real model's does. troupe serves the
// Hugging Face directory; llama.cpp (node-llama-cpp's prebuilt library for this CPU,
// bench/llama_cpp) reads `troupe export --format gguf` of it. Precisions: f32 against F32, and
// troupe's int8 weights (a scale per output channel) against llama.cpp's Q8_0 (a scale per 32).
//
// Each engine answers the same prompts (32-128 token ids) greedily with exactly --max-tokens
// tokens (ignore_eos): one stream at a time, then --clients at once. troupe runs on every core
// (serve.engine.threads: the machine's); llama.cpp on one thread and on every core, the better
// run of each load kept (llama_cpp_figures). troupe is measured over
// HTTP (streamed completions), llama.cpp in its own process without a server, so troupe's
// figures carry an HTTP hop that llama.cpp's do not. Figures are vLLM benchmark_serving's
// (ttft, tpot, itl, e2el, request_throughput, output_throughput); single-stream decode tokens/s
// is 1000 / mean tpot.

#include "bench/serve_llama_cpp.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"
#include "bench/serve_load.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "models/hf/hf_weights.hpp"
#include "nlohmann/json.hpp"

namespace troupe::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The prompts: token ids past the byte alphabet and the special tokens, of varied lengths.
std::vector<std::vector<int>> make_prompts(int count, int vocab) {
  std::vector<std::vector<int>> prompts(count);
  for (int i = 0; i < count; ++i) {
    const int length = 32 + (i * 37) % 97;
    for (int t = 0; t < length; ++t)
      prompts[i].push_back(300 + (i * 131 + t * 17) % (vocab - 300));
  }
  return prompts;
}

// The model directory: the tokenizer, then random weights of the Llama shape.
bool make_model(const llama_cpp_options& o, const fs::path& dir) {
  const std::string trained =
      read_command(absl::StrCat(o.troupe, " tokenizer train /usr/share/games/fortunes",
                                " --vocab-size 8192 --out ", dir.string(), " 2>&1"));
  if (!fs::exists(dir / "tokenizer.json")) {
    std::fprintf(stderr, "serve_bench: troupe tokenizer train failed: %s\n", trained.c_str());
    return false;
  }
  models::decoder_config c;
  c.family = models::decoder_family::llama;
  c.vocab = 8192, c.ctx = 1024, c.layers = 4, c.dim = 1024, c.heads = 16, c.kv_heads = 4;
  c.ffn = 2816, c.rope_theta = 500000.0, c.tied_embeddings = false;
  const models::decoder_layout layout(c, models::layer_range::all(c));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 1);
  const models::hf_model_config hf{models::hf_architecture_of(c), c};
  if (absl::Status s = models::write_hf_model(dir.string(), hf, layout.to_named(params.data()));
      !s.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", std::string(s.message()).c_str());
    return false;
  }
  return true;
}

// troupe serve on `dir`, ready on `port`; its pid, or -1.
pid_t start_troupe(const llama_cpp_options& o, const fs::path& dir, const fs::path& run_dir,
                   int port, const std::string& quantization) {
  std::error_code ignored;
  fs::remove_all(run_dir, ignored);  // a kept --work-dir's last run
  const pid_t pid =
      spawn({o.troupe, "serve", dir.string(), "--port", std::to_string(port), "--served-model-name",
             "m", "--run-dir", run_dir.string(), "--quantization", quantization, "--set",
             "serve.max_queue=4096", "--set",
             absl::StrCat("serve.engine.threads=", std::thread::hardware_concurrency())});
  httplib::Client probe("127.0.0.1", port);
  for (int i = 0; i < 1200; ++i) {  // loading and quantizing 247.5 MB takes seconds
    if (auto res = probe.Get("/health"); res && res->status == 200) return pid;
    if (waitpid(pid, nullptr, WNOHANG) == pid) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// vLLM benchmark_serving's figures of one load.
json figures(const load_result& r) {
  json out = {{"request_throughput", r.requests_per_s}, {"output_throughput", r.tokens_per_s}};
  for (const auto& [name, xs] : {std::pair{"ttft", &r.ttft_ms}, std::pair{"tpot", &r.tpot_ms},
                                 std::pair{"itl", &r.itl_ms}, std::pair{"e2el", &r.e2el_ms}}) {
    out[absl::StrCat("mean_", name, "_ms")] = mean(*xs);
    out[absl::StrCat("p50_", name, "_ms")] = percentile(*xs, 0.5);
    out[absl::StrCat("p99_", name, "_ms")] = percentile(*xs, 0.99);
  }
  return out;
}

json troupe_figures(int port, int clients, const std::vector<std::vector<int>>& prompts,
                    int max_tokens) {
  const auto body = [&](int i) {
    return json{{"model", "m"},     {"prompt", prompts[i]}, {"max_tokens", max_tokens},
                {"temperature", 0}, {"stream", true},       {"ignore_eos", true}}
        .dump();
  };
  const auto tokens = [&](int) { return max_tokens; };
  run_load(port, clients, clients, body, tokens);  // warm-up
  return figures(run_load(port, clients, static_cast<int>(prompts.size()), body, tokens));
}

// llama.cpp's figures of one load at its best thread count: on one thread and on every core
// (its threads spin at barriers, so on a machine this small the node thread that schedules its
// batches can make every core slower than one), the run with the higher output throughput.
json llama_cpp_figures(const llama_cpp_options& o, const fs::path& gguf, const fs::path& prompts,
                       int clients) {
  json best;
  std::vector<unsigned> thread_counts = {1};
  if (const unsigned cores = std::thread::hardware_concurrency(); cores > 1)
    thread_counts.push_back(cores);
  for (const unsigned threads : thread_counts) {
    const std::string line = read_command(
        absl::StrCat("/usr/bin/node ", o.source_dir, "/bench/llama_cpp/llama_cpp.mjs bench ",
                     gguf.string(), " ", prompts.string(), " --max-tokens ", o.max_tokens,
                     " --concurrency ", clients, " --threads ", threads));
    json out = json::parse(line, nullptr, false);
    if (!out.is_object()) {
      std::fprintf(stderr,
                   "serve_bench: llama.cpp gave no figures (run scripts/setup.sh for "
                   "bench/llama_cpp's npm packages)\n");
      return {};
    }
    out["threads"] = threads;
    if (best.empty() || out["output_throughput"] > best["output_throughput"]) best = out;
  }
  return best;
}

}  // namespace

int compare_with_llama_cpp(const llama_cpp_options& o) {
  const fs::path work = o.work_dir.empty()
                            ? fs::path(absl::StrCat("/tmp/serve_bench.", getpid(), ".llama_cpp"))
                            : fs::path(o.work_dir);
  const fs::path model = work / "model";
  fs::create_directories(work);
  if (!fs::exists(model / "config.json") && !make_model(o, model)) return 1;
  const auto single = make_prompts(o.single_stream_requests, 8192);
  const auto many = make_prompts(o.requests, 8192);
  const auto write_prompts = [&](const std::vector<std::vector<int>>& prompts, const char* name) {
    std::ofstream(work / name) << json(prompts).dump();
    return work / name;
  };
  const fs::path single_file = write_prompts(single, "single.json"),
                 many_file = write_prompts(many, "many.json");

  struct precision {
    const char* name;
    const char* quantization;  // troupe serve --quantization
    const char* outtype;       // troupe export --outtype
  };
  for (const precision& p : {precision{"f32", "none", "f32"}, precision{"int8", "int8", "q8_0"}}) {
    const fs::path gguf = work / absl::StrCat("model-", p.outtype, ".gguf");
    const std::string exported =
        read_command(absl::StrCat(o.troupe, " export ", model.string(), " --format gguf",
                                  " --outtype ", p.outtype, " --out ", gguf.string(), " 2>&1"));
    if (!fs::exists(gguf)) {
      std::fprintf(stderr, "serve_bench: troupe export failed: %s\n", exported.c_str());
      return 1;
    }
    const int port = 20000 + static_cast<int>(getpid() % 20000);
    const pid_t server =
        start_troupe(o, model, work / absl::StrCat("run-", p.name), port, p.quantization);
    if (server < 0) {
      std::fprintf(stderr, "serve_bench: troupe serve did not start; see %s\n",
                   (work / absl::StrCat("run-", p.name)).c_str());
      return 1;
    }
    const json troupe_one = troupe_figures(port, 1, single, o.max_tokens);
    const json troupe_many = troupe_figures(port, o.clients, many, o.max_tokens);
    kill(server, SIGTERM);
    waitpid(server, nullptr, 0);
    const json llama_one = llama_cpp_figures(o, gguf, single_file, 1);
    const json llama_many = llama_cpp_figures(o, gguf, many_file, o.clients);
    if (llama_one.empty() || llama_many.empty()) return 1;

    const json extra = {{"precision", absl::StrCat(p.name, " against llama.cpp ", p.outtype)},
                        {"model", "llama 4x1024, vocab 8192, 247.5 MB in f32"},
                        {"max_tokens", o.max_tokens},
                        {"troupe", {{"1", troupe_one}, {std::to_string(o.clients), troupe_many}}},
                        {"llama_cpp", {{"1", llama_one}, {std::to_string(o.clients), llama_many}}}};
    const auto decode_rate = [](const json& f) { return 1000.0 / f["mean_tpot_ms"].get<double>(); };
    report("serve_bench", absl::StrCat("llama_cpp_", p.name, "_single_stream_decode_tokens_per_s"),
           {decode_rate(troupe_one)}, "tokens/s", "llama.cpp", {decode_rate(llama_one)},
           better::higher, extra);
    report("serve_bench", absl::StrCat("llama_cpp_", p.name, "_output_throughput_", o.clients),
           {troupe_many["output_throughput"].get<double>()}, "tokens/s", "llama.cpp",
           {llama_many["output_throughput"].get<double>()}, better::higher);
    for (const char* name : {"p50_ttft_ms", "p99_ttft_ms", "p50_itl_ms", "p99_itl_ms"}) {
      report("serve_bench", absl::StrCat("llama_cpp_", p.name, "_", name, "_", o.clients),
             {troupe_many[name].get<double>()}, "ms", "llama.cpp", {llama_many[name].get<double>()},
             better::lower);
    }
  }
  if (o.work_dir.empty()) {
    std::error_code ignored;
    fs::remove_all(work, ignored);
  }
  return 0;
}

}  // namespace troupe::bench
