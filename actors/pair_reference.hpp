#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/data_loader.hpp"
#include "models/decoder/decoder_config.hpp"

namespace troupe::actors {

/// DPO's reference log-probabilities of a corpus's preference pairs, computed once and cached
/// with the data set, as TRL's precompute_ref_log_probs does: each sequence's response
/// log-probability (the sum over the tokens fill_dpo_pair() trains on, at temperature 1) under
/// the reference model `weights` (a language model of `model`, flat as decoder_layout lays it out),
/// forward only on `threads` cores.
[[nodiscard]] pair_reference compute_pair_reference(const text_corpus& corpus,
                                                    const models::decoder_config& model,
                                                    const std::vector<float>& weights, int threads);

/// Where the reference log-probabilities of the pairs at `data_path` (a file or a directory)
/// are cached: beside it, "<data_path>.reference.safetensors".
[[nodiscard]] std::string pair_reference_cache_path(const std::string& data_path);

/// What cached_pair_reference() did.
struct pair_reference_source {
  bool computed = false;  ///< false: read from the cache
  std::string cache;      ///< the cache file
  std::string key;        ///< the reference weights' and the pairs' digest it is valid for
};

/// The reference log-probabilities of `corpus` (read from `data_path`) under the checkpoint at
/// `reference_path` (a run, checkpoints or checkpoint directory; `setting` names it in errors):
/// read from the cache beside the data when it was made from the same weights and the same
/// pairs, else computed and written there (atomically, under a lock, so that ranks starting
/// together compute it once). A changed reference checkpoint or pair file makes it stale.
[[nodiscard]] absl::StatusOr<pair_reference> cached_pair_reference(
    const text_corpus& corpus, const std::string& data_path, const std::string& reference_path,
    const std::string& setting, const models::decoder_config& model, int threads,
    pair_reference_source* source = nullptr);

}  // namespace troupe::actors
