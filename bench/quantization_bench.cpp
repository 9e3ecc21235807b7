// Weight-only quantization's decode speed on the CPU, in one run: a Llama-shaped model whose f32
// weights (about 200 MB) exceed every cache level, decoded a token at a time by the CPU decoder
// with its block weights in f32 (the baseline), int8 (one scale per output channel, the output
// head too) and int4 (groups of 128 inputs), as serve.engine.quantization quantizes them. Decoding
// one token reads every weight once, so its speed is the memory's: int8 reads a quarter of f32's
// bytes, int4 an eighth. Lines:
//   decode_tokens_per_s   one stream, and 16 streams in one batch (aggregate), against f32;
//                         And one stream after a 1,024-token prompt with the KV cache in int8,
//                         against the f32 cache (its bytes per token beside).
//   gemv_weight_gb_per_s  one [11008, 4096] layer (Llama 2 7B's MLP) times one vector: the
//                         quantized kernel's weight bytes per second against OpenBLAS's sgemv
//                         on the f32 matrix (the raw baseline), and its speed-up in time.
//
//   quantization_bench [--layers 4] [--dim 1024] [--ffn 2816] [--tokens 48] [--repeats 3]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <cblas.h>

#include "bench/bench_report.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/matmul.hpp"
#include "kernels/quantized_matmul.hpp"
#include "models/decoder/cpu_paged_decoder.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using troupe::models::cpu_paged_decoder;
using troupe::models::decode_request;
using troupe::models::weight_quantization;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Prefills `streams` prompts of `prompt_tokens`, then decodes `tokens` greedy tokens of each;
// returns the decode phase's output tokens per second.
double decode_speed(cpu_paged_decoder& decoder, int vocab, int streams, int tokens, int block_size,
                    int prompt_tokens = 16) {
  const int positions = prompt_tokens + tokens;
  const int blocks_each = (positions + block_size - 1) / block_size;
  std::vector<std::vector<int32_t>> seqs(streams), tables(streams);
  for (int s = 0; s < streams; ++s) {
    for (int t = 0; t < prompt_tokens; ++t)
      seqs[s].push_back((s * 131 + t * 17) % vocab);
    for (int b = 0; b < blocks_each; ++b)
      tables[s].push_back(s * blocks_each + b);
  }
  std::vector<float> logits(int64_t{streams} * vocab);
  std::vector<decode_request> batch;
  const auto step = [&] {
    if (const auto ok = decoder.forward(batch, logits.data()); !ok.ok()) {
      std::fprintf(stderr, "quantization_bench: %s\n", std::string(ok.message()).c_str());
      std::exit(1);
    }
    for (int s = 0; s < streams; ++s) {
      const float* row = logits.data() + int64_t{s} * vocab;
      seqs[s].push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
    }
  };
  for (int s = 0; s < streams; ++s)
    batch.push_back({seqs[s].data(), prompt_tokens, 0, tables[s].data(), blocks_each});
  step();  // the prefill
  const auto t0 = clock_type::now();
  for (int t = 1; t < tokens; ++t) {
    for (int s = 0; s < streams; ++s) {
      const int at = static_cast<int>(seqs[s].size()) - 1;
      batch[s] = {seqs[s].data() + at, 1, at, tables[s].data(), blocks_each};
    }
    step();
  }
  return (tokens - 1) * streams / seconds_since(t0);
}

// One [rows, cols] layer times one vector: the quantized kernel against OpenBLAS's sgemv.
void gemv_lines(int repeats) {
  const int rows = 11008, cols = 4096;
  std::vector<float> w(int64_t{rows} * cols), x(cols), y(rows);
  uint32_t state = 1;
  for (auto& v : w) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  }
  for (int k = 0; k < cols; ++k)
    x[k] = static_cast<float>(k % 7) - 3.0f;
  troupe::kernels::cpu::set_blas_threads(1);
  for (const int bits : {8, 4}) {
    const int group = bits == 8 ? cols : 128;
    troupe::kernels::quantized_matrix q{bits, rows, cols, group};
    std::vector<uint8_t> ints(rows * q.row_bytes());
    std::vector<float> scales(int64_t{rows} * q.groups());
    troupe::kernels::cpu::quantize_symmetric(w.data(), cols, 1, bits, rows, cols, group,
                                             ints.data(), scales.data());
    q.q = ints.data();
    q.scales = scales.data();
    const double bytes = static_cast<double>(ints.size() + scales.size() * sizeof(float));
    std::vector<double> ours, theirs, speedup;
    for (int r = 0; r < repeats * 5; ++r) {
      auto t0 = clock_type::now();
      troupe::kernels::cpu::quantized_matmul(y.data(), x.data(), q, nullptr, 1);
      const double quantized = seconds_since(t0);
      t0 = clock_type::now();
      cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, w.data(), cols, x.data(), 1, 0.0f,
                  y.data(), 1);
      const double f32 = seconds_since(t0);
      ours.push_back(bytes / quantized / 1e9);
      theirs.push_back(static_cast<double>(w.size()) * sizeof(float) / f32 / 1e9);
      speedup.push_back(f32 / quantized);
    }
    troupe::bench::report("quantization_bench", "gemv_weight_gb_per_s", ours, "GB/s",
                          "OpenBLAS sgemv on the f32 matrix", theirs, troupe::bench::better::higher,
                          {{"bits", bits},
                           {"shape", {rows, cols}},
                           {"group_size", group},
                           {"time_speedup", troupe::bench::median(speedup)}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 4, dim = 1024, ffn = 2816, tokens = 48, repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::max(1, std::atoi(argv[++i])) : 1; };
    if (a == "--layers") {
      layers = next();
    } else if (a == "--dim") {
      dim = next();
    } else if (a == "--ffn") {
      ffn = next();
    } else if (a == "--tokens") {
      tokens = std::max(2, next());
    } else if (a == "--repeats") {
      repeats = next();
    } else {
      return troupe::bench::unknown_argument("quantization_bench", a);
    }
  }
  troupe::models::decoder_config c{8192, 2048, layers, dim, dim / 64};
  c.family = troupe::models::decoder_family::llama;
  c.kv_heads = c.heads / 4;
  c.ffn = ffn;
  c.tied_embeddings = false;
  if (auto ok = c.validate(); !ok.ok()) {
    std::fprintf(stderr, "quantization_bench: %s\n", std::string(ok.message()).c_str());
    return 2;
  }
  const troupe::models::decoder_layout layout(c, troupe::models::layer_range::all(c));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 1);
  const int streams_max = 16, block_size = 16, prompt_tokens = 16;
  const int blocks = streams_max * ((prompt_tokens + tokens + block_size - 1) / block_size);
  troupe::kernels::cpu::thread_pool pool(
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  troupe::kernels::cpu::set_blas_threads(1);
  struct variant {
    weight_quantization q;
    std::unique_ptr<cpu_paged_decoder> decoder;
  };
  std::vector<variant> variants;
  for (const weight_quantization q : {weight_quantization{}, weight_quantization::serving(8, 0),
                                      weight_quantization::serving(4, 0)}) {
    auto d = std::make_unique<cpu_paged_decoder>(layout, params.data(), streams_max * prompt_tokens,
                                                 blocks, block_size, &pool);
    if (auto ok = d->quantize(q); !ok.ok()) {
      std::fprintf(stderr, "quantization_bench: %s\n", std::string(ok.message()).c_str());
      return 1;
    }
    variants.push_back({q, std::move(d)});
  }
  const double f32_bytes = static_cast<double>(layout.total()) * sizeof(float);
  for (const int streams : {1, streams_max}) {
    // speeds[v][r]: variant v's tokens/s in repeat r, the variants back to back in each repeat.
    std::vector<std::vector<double>> speeds(variants.size());
    for (int r = 0; r < repeats; ++r) {
      for (size_t v = 0; v < variants.size(); ++v)
        speeds[v].push_back(
            decode_speed(*variants[v].decoder, c.vocab, streams, tokens, block_size));
    }
    for (size_t v = 1; v < variants.size(); ++v) {
      troupe::bench::report("quantization_bench", "decode_tokens_per_s", speeds[v], "tokens/s",
                            "the f32 decoder", speeds[0], troupe::bench::better::higher,
                            {{"weights", variants[v].q.describe()},
                             {"streams", streams},
                             {"model_f32_mb", f32_bytes / 1e6},
                             {"layers", layers},
                             {"dim", dim},
                             {"ffn", ffn}});
    }
  }
  // The KV cache in int8 at a long context: one stream after a prompt of 1,024 tokens, f32
  // weights, the cache's bytes per token and the decode speed against the f32 cache.
  const int long_prompt = 1024;
  const int long_blocks = (long_prompt + tokens + block_size - 1) / block_size;
  cpu_paged_decoder f32_kv(layout, params.data(), long_prompt, long_blocks, block_size, &pool);
  cpu_paged_decoder int8_kv(layout, params.data(), long_prompt, long_blocks, block_size, &pool,
                            troupe::models::kv_cache_dtype::int8);
  std::vector<double> ours, theirs;
  for (int r = 0; r < repeats; ++r) {
    theirs.push_back(decode_speed(f32_kv, c.vocab, 1, tokens, block_size, long_prompt));
    ours.push_back(decode_speed(int8_kv, c.vocab, 1, tokens, block_size, long_prompt));
  }
  const double positions = static_cast<double>(long_blocks) * block_size;
  troupe::bench::report(
      "quantization_bench", "decode_tokens_per_s", ours, "tokens/s", "the f32 KV cache", theirs,
      troupe::bench::better::higher,
      {{"kv_cache", "int8"},
       {"context", long_prompt},
       {"kv_bytes_per_token", static_cast<double>(int8_kv.cache().bytes()) / positions},
       {"f32_kv_bytes_per_token", static_cast<double>(f32_kv.cache().bytes()) / positions}});
  gemv_lines(repeats);
  return 0;
}
