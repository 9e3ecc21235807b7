#include "actors/pair_reference.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "actors/dpo_objective.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/base/file_lock.hpp"
#include "runtime/base/status.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace troupe::actors {
namespace {

constexpr int pairs_per_pass = 32;

std::string hex(const XXH128_hash_t& h) {
  return absl::StrCat(absl::Hex(h.high64, absl::kZeroPad16), absl::Hex(h.low64, absl::kZeroPad16));
}

// The digest the cache is valid for: the reference weights, the pairs (their tokens and where
// their responses start) and ctx.
std::string key_of(const text_corpus& corpus, const std::vector<float>& weights, int ctx) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, weights.data(), weights.size() * sizeof(float));
  XXH3_128bits_update(state, &ctx, sizeof(ctx));
  for (const auto* pairs : {&corpus.train_pairs(), &corpus.val_pairs()}) {
    const uint64_t n = pairs->size();
    XXH3_128bits_update(state, &n, sizeof(n));
    for (const preference_example& p : *pairs) {
      for (const std::vector<int32_t>* ids : {&p.chosen, &p.rejected}) {
        const uint64_t length = ids->size();
        XXH3_128bits_update(state, &length, sizeof(length));
        XXH3_128bits_update(state, ids->data(), ids->size() * sizeof(int32_t));
      }
      XXH3_128bits_update(state, &p.prompt_tokens, sizeof(p.prompt_tokens));
    }
  }
  const std::string key = hex(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return key;
}

std::vector<float> logps_of(const std::vector<preference_example>& pairs, int ctx,
                            models::decoder_cpu_batch& model, const std::vector<float>& weights) {
  std::vector<float> out;
  out.reserve(2 * pairs.size());
  for (size_t first = 0; first < pairs.size(); first += pairs_per_pass) {
    const int n = static_cast<int>(std::min<size_t>(pairs_per_pass, pairs.size() - first));
    token_batch b{2 * n, ctx, std::vector<int32_t>(static_cast<size_t>(2 * n) * ctx),
                  std::vector<int32_t>(static_cast<size_t>(2 * n) * ctx)};
    for (int i = 0; i < n; ++i)
      fill_dpo_pair(b, 2 * i, pairs[first + i], nullptr);
    std::vector<float> per_position(b.tokens.size());
    model.log_probs(weights.data(), b.batch, ctx, b.tokens.data(), b.targets.data(), 1.0f,
                    per_position.data());
    const row_logps rows = sum_row_logps(b.targets.data(), per_position.data(), b.batch, ctx);
    for (double s : rows.sums)
      out.push_back(static_cast<float>(s));
  }
  return out;
}

absl::StatusOr<pair_reference> read_cache(const std::string& path, const std::string& key,
                                          const text_corpus& corpus) {
  absl::StatusOr<tensor::named_tensors> file = tensor::read_safetensors(path);
  if (!file.ok()) return file.status();
  const auto it = file->metadata.find("key");
  if (it == file->metadata.end() || it->second != key) {
    return absl::NotFoundError(absl::StrCat(path, " was made from other weights or pairs"));
  }
  pair_reference out;
  for (const auto& [name, values, pairs] :
       {std::tuple{"train", &out.train, corpus.train_pairs().size()},
        {"val", &out.val, corpus.val_pairs().size()}}) {
    TROUPE_ASSIGN_OR_RETURN(const tensor::tensor t, file->get(name));
    if (t.numel() != static_cast<int64_t>(2 * pairs)) {
      return absl::DataLossError(absl::StrCat(path, ": '", name, "' holds ", t.numel(),
                                              " log-probabilities for ", pairs, " pairs"));
    }
    values->assign(t.data<float>(), t.data<float>() + t.numel());
  }
  return out;
}

absl::Status write_cache(const std::string& path, const std::string& key,
                         const std::string& reference_dir, const pair_reference& r) {
  tensor::named_tensors file;
  for (const auto& [name, values] : {std::pair{"train", &r.train}, {"val", &r.val}}) {
    tensor::tensor t = tensor::tensor::host({static_cast<int64_t>(values->size())});
    std::copy(values->begin(), values->end(), t.data<float>());
    file.tensors.emplace_back(name, std::move(t));
  }
  file.metadata = {{"key", key}, {"reference", reference_dir}};
  const std::string partial = absl::StrCat(path, ".partial");
  TROUPE_RETURN_IF_ERROR(tensor::write_safetensors(partial, file));
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

pair_reference compute_pair_reference(const text_corpus& corpus,
                                      const models::decoder_config& model,
                                      const std::vector<float>& weights, int threads) {
  const models::decoder_layout layout(model, models::layer_range::all(model));
  models::decoder_cpu_batch forward(layout, 2 * pairs_per_pass, threads);
  return {logps_of(corpus.train_pairs(), model.ctx, forward, weights),
          logps_of(corpus.val_pairs(), model.ctx, forward, weights)};
}

std::string pair_reference_cache_path(const std::string& data_path) {
  return absl::StrCat(absl::StripSuffix(data_path, "/"), ".reference.safetensors");
}

absl::StatusOr<pair_reference> cached_pair_reference(const text_corpus& corpus,
                                                     const std::string& data_path,
                                                     const std::string& reference_path,
                                                     const std::string& setting,
                                                     const models::decoder_config& model,
                                                     int threads, pair_reference_source* source) {
  const models::decoder_layout layout(model, models::layer_range::all(model));
  TROUPE_ASSIGN_OR_RETURN(const std::vector<float> weights,
                          models::read_decoder_weights(layout, reference_path, setting));
  const std::string cache = pair_reference_cache_path(data_path);
  const std::string key = key_of(corpus, weights, model.ctx);
  if (source != nullptr) *source = {false, cache, key};
  // The ranks that start together take turns on the data's lock: the first computes.
  const file_lock lock(data_path);
  if (!lock.held()) {
    return absl::NotFoundError(absl::StrCat("cannot open ", data_path, " to lock it"));
  }
  if (absl::StatusOr<pair_reference> cached = read_cache(cache, key, corpus); cached.ok()) {
    return cached;
  }
  pair_reference computed = compute_pair_reference(corpus, model, weights, threads);
  TROUPE_RETURN_IF_ERROR(write_cache(cache, key, reference_path, computed));
  if (source != nullptr) source->computed = true;
  return computed;
}

}  // namespace troupe::actors
