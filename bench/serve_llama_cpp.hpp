#pragma once

// serve_bench --llama-cpp: troupe serve against llama.cpp on the same model, prompts and
// precision (serve_llama_cpp.cpp).

#include <string>

namespace troupe::bench {

struct llama_cpp_options {
  std::string troupe;      ///< the troupe binary
  std::string source_dir;  ///< the source tree (bench/llama_cpp)
  int clients = 16;
  int requests = 32;  ///< at `clients` concurrent streams
  int single_stream_requests = 6;
  int max_tokens = 64;
  std::string work_dir;  ///< kept, and its model reused when there; "" a temporary one
};

/// Prints the comparison's JSON lines; 0, or 1 when an engine could not run.
[[nodiscard]] int compare_with_llama_cpp(const llama_cpp_options& options);

}  // namespace troupe::bench
