#include "actors/data_loader.hpp"

#include <fstream>
#include <numeric>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "actors/text_source.hpp"
#include "kernels/sampling.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

absl::StatusOr<text_corpus> text_corpus::load(const std::string& path, double val_fraction,
                                              int ctx) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> files, text_files(path));
  std::string text;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::UnavailableError(absl::StrCat(file, ": cannot read"));
    std::stringstream s;
    s << in.rdbuf();
    text += s.str();
  }
  return from_text(std::move(text), val_fraction, ctx, path);
}

absl::Status text_corpus::check_val_fraction(double val_fraction) {
  if (val_fraction <= 0.0 || val_fraction >= 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.val_fraction ", val_fraction, " must be inside (0, 1)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<text_corpus> text_corpus::from_text(std::string text, double val_fraction, int ctx,
                                                   const std::string& origin) {
  TROUPE_RETURN_IF_ERROR(check_val_fraction(val_fraction));
  const size_t val_bytes = static_cast<size_t>(text.size() * val_fraction);
  const size_t train_bytes = text.size() - val_bytes;
  if (train_bytes < static_cast<size_t>(ctx) + 1 || val_bytes < static_cast<size_t>(ctx) + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", text.size(),
        " bytes of text cannot hold a training and a validation window "
        "of ",
        ctx + 1, " bytes with val_fraction ", val_fraction, "; name more text in data.path"));
  }
  return text_corpus(text.substr(0, train_bytes), text.substr(train_bytes));
}

absl::Status text_corpus::attach_tokens(std::vector<int32_t> train, std::vector<int32_t> val,
                                        int ctx, const std::string& origin) {
  for (const auto& [part, ids] : {std::pair{"training", &train}, {"held-out", &val}}) {
    if (ids->size() < static_cast<size_t>(ctx) + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": the ", part, " text is ", ids->size(), " tokens, less than one window of ",
          ctx + 1, "; name more text in data.path (or a larger data.val_fraction)"));
    }
  }
  train_tokens_ = std::move(train);
  val_tokens_ = std::move(val);
  return absl::OkStatus();
}

namespace {

absl::Status check_share(int global_batch, int dp_rank, int dp_size) {
  if (dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size || global_batch < dp_size) {
    return absl::InvalidArgumentError(absl::StrCat("train.batch ", global_batch,
                                                   " must give each of the ", dp_size,
                                                   " data-parallel ranks a sample at least"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<data_loader> data_loader::create(const text_corpus& corpus, int ctx,
                                                int global_batch, int dp_rank, int dp_size,
                                                uint64_t seed) {
  TROUPE_RETURN_IF_ERROR(check_share(global_batch, dp_rank, dp_size));
  return data_loader(corpus, ctx, global_batch, dp_rank, dp_size, seed);
}

absl::Status data_loader::reshard(int dp_rank, int dp_size) {
  TROUPE_RETURN_IF_ERROR(check_share(global_batch_, dp_rank, dp_size));
  dp_rank_ = dp_rank;
  dp_size_ = dp_size;
  return absl::OkStatus();
}

data_loader::data_loader(const text_corpus& corpus, int ctx, int global_batch, int dp_rank,
                         int dp_size, uint64_t seed)
    : corpus_(&corpus),
      ctx_(ctx),
      global_batch_(global_batch),
      dp_rank_(dp_rank),
      dp_size_(dp_size),
      seed_(seed),
      samples_(corpus.pairs()        ? static_cast<int64_t>(corpus.train_pairs().size())
               : corpus.supervised() ? static_cast<int64_t>(corpus.train_examples().size())
               : corpus.tokenized() ? (static_cast<int64_t>(corpus.train_tokens().size()) - 1) / ctx
                                    : (static_cast<int64_t>(corpus.train().size()) - 1) / ctx) {}

int64_t data_loader::sample_at(int64_t global_index) {
  const int64_t epoch = global_index / samples_;
  if (epoch != perm_epoch_) {  // Fisher-Yates on counter-based draws: the same order anywhere
    perm_.resize(samples_);
    std::iota(perm_.begin(), perm_.end(), 0);
    const uint64_t epoch_seed = seed_ * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(epoch);
    for (int64_t i = samples_ - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(kernels::seeded_uniform(epoch_seed, i) * (i + 1));
      std::swap(perm_[i], perm_[std::min(j, i)]);
    }
    perm_epoch_ = epoch;
  }
  return perm_[global_index % samples_];
}

void data_loader::fill(token_batch& out, int row, const std::string& text, int64_t offset) const {
  for (int t = 0; t < ctx_; ++t) {
    out.tokens[static_cast<size_t>(row) * ctx_ + t] = static_cast<uint8_t>(text[offset + t]);
    out.targets[static_cast<size_t>(row) * ctx_ + t] = static_cast<uint8_t>(text[offset + t + 1]);
  }
}

void data_loader::fill(token_batch& out, int row, const std::vector<int32_t>& ids,
                       int64_t offset) const {
  const size_t at = static_cast<size_t>(row) * ctx_;
  std::copy_n(ids.begin() + offset, ctx_, out.tokens.begin() + static_cast<int64_t>(at));
  std::copy_n(ids.begin() + offset + 1, ctx_, out.targets.begin() + static_cast<int64_t>(at));
}

void data_loader::fill(token_batch& out, int row, const sft_example& example) const {
  const int n = static_cast<int>(example.tokens.size());  // at most ctx + 1 (load_sft)
  for (int t = 0; t < ctx_; ++t) {
    const size_t at = static_cast<size_t>(row) * ctx_ + t;
    out.tokens[at] = t < n ? example.tokens[t] : 0;
    out.targets[at] = t + 1 < n && example.trained[t + 1] ? example.tokens[t + 1] : -1;
  }
}

void fill_dpo_pair(token_batch& out, int row, const preference_example& pair,
                   const float* reference) {
  for (const auto& [ids, r] : {std::pair{&pair.chosen, row}, {&pair.rejected, row + 1}}) {
    const int n = static_cast<int>(ids->size());  // at most ctx (load_pairs)
    for (int t = 0; t < out.ctx; ++t) {
      const size_t at = static_cast<size_t>(r) * out.ctx + t;
      out.tokens[at] = t < n ? (*ids)[t] : 0;
      out.targets[at] = t >= pair.prompt_tokens - 1 && t < n - 1 ? (*ids)[t + 1] : -1;
    }
  }
  if (reference != nullptr) {
    out.reference_logps.resize(out.batch);
    out.reference_logps[row] = reference[0];
    out.reference_logps[row + 1] = reference[1];
  }
}

absl::Status text_corpus::attach_reference(pair_reference reference) {
  if (reference.train.size() != 2 * train_pairs_.size() ||
      reference.val.size() != 2 * val_pairs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reference log-probabilities are ", reference.train.size(), " and ",
                     reference.val.size(), " for ", train_pairs_.size(), " training and ",
                     val_pairs_.size(), " held-out preference pairs; they must be two a pair"));
  }
  reference_ = std::move(reference);
  return absl::OkStatus();
}

void data_loader::fill(token_batch& out, int row, const std::vector<preference_example>& pairs,
                       const std::vector<float>& reference, int64_t index) const {
  const preference_example& pair = pairs[index];
  if (corpus_->dpo()) return fill_dpo_pair(out, row, pair, reference.data() + 2 * index);
  out.margins.resize(out.batch / 2);
  out.margins[row / 2] = pair.margin;
  for (const auto& [ids, label, r] :
       {std::tuple{&pair.chosen, 1, row}, std::tuple{&pair.rejected, 0, row + 1}}) {
    const int n = static_cast<int>(ids->size());  // at most ctx (load_pairs)
    for (int t = 0; t < ctx_; ++t) {
      const size_t at = static_cast<size_t>(r) * ctx_ + t;
      out.tokens[at] = t < n ? (*ids)[t] : 0;
      out.targets[at] = t == n - 1 ? label : -1;
    }
  }
}

int64_t data_loader::trained_targets(int64_t first) {
  if (corpus_->pairs()) return global_batch_;  // the pairs: a reward model's mean
  if (!corpus_->supervised()) return int64_t{global_batch_} * ctx_;
  int64_t n = 0;
  for (int64_t g = first; g < first + global_batch_; ++g)
    n += corpus_->train_examples()[sample_at(g)].trained_targets();
  return n;
}

token_batch data_loader::next() {
  const int local = local_batch(), rows = local * rows_per_sample();
  token_batch out{rows, ctx_, std::vector<int32_t>(static_cast<size_t>(rows) * ctx_),
                  std::vector<int32_t>(static_cast<size_t>(rows) * ctx_), 0};
  out.cursor = cursor_;
  out.first_sample = cursor_ + even_split{global_batch_, dp_size_}.begin(dp_rank_);
  out.global_targets = trained_targets(cursor_);
  for (int row = 0; row < local; ++row) {
    const int64_t sample = sample_at(out.first_sample + row);
    if (corpus_->pairs()) {
      fill(out, 2 * row, corpus_->train_pairs(), corpus_->reference().train, sample);
    } else if (corpus_->supervised()) {
      fill(out, row, corpus_->train_examples()[sample]);
    } else if (corpus_->tokenized()) {
      fill(out, row, corpus_->train_tokens(), sample * ctx_);
    } else {
      fill(out, row, corpus_->train(), sample * ctx_);
    }
  }
  cursor_ += global_batch_;
  return out;
}

std::vector<token_batch> data_loader::validation(int batch, int max_windows) const {
  const std::string& val = corpus_->val();
  const int64_t symbols = corpus_->tokenized() ? static_cast<int64_t>(corpus_->val_tokens().size())
                                               : static_cast<int64_t>(val.size());
  const int64_t windows = std::min<int64_t>(
      max_windows, corpus_->pairs()        ? static_cast<int64_t>(corpus_->val_pairs().size())
                   : corpus_->supervised() ? static_cast<int64_t>(corpus_->val_examples().size())
                                           : (symbols - 1) / ctx_);
  std::vector<token_batch> out;
  for (int64_t first = 0; first < windows; first += batch) {
    const int samples = static_cast<int>(std::min<int64_t>(batch, windows - first));
    const int rows = samples * rows_per_sample();
    token_batch b{rows, ctx_, std::vector<int32_t>(static_cast<size_t>(rows) * ctx_),
                  std::vector<int32_t>(static_cast<size_t>(rows) * ctx_), first};
    for (int row = 0; row < samples; ++row) {
      if (corpus_->pairs()) {
        fill(b, 2 * row, corpus_->val_pairs(), corpus_->reference().val, first + row);
      } else if (corpus_->supervised()) {
        fill(b, row, corpus_->val_examples()[first + row]);
      } else if (corpus_->tokenized()) {
        fill(b, row, corpus_->val_tokens(), (first + row) * ctx_);
      } else {
        fill(b, row, val, (first + row) * ctx_);
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

void prefetch_queue::produce() {
  if (credits_ <= 0) return;
  --credits_;
  ready_.push_back(loader_.next());
}

token_batch prefetch_queue::take() {
  if (ready_.empty()) return loader_.next();
  token_batch b = std::move(ready_.front());
  ready_.erase(ready_.begin());
  return b;
}

int64_t prefetch_queue::cursor() const {
  return ready_.empty() ? loader_.cursor() : ready_.front().cursor;
}

void prefetch_queue::seek(int64_t cursor) {
  credits_ += static_cast<int>(ready_.size());  // the dropped batches' credits come back
  ready_.clear();
  loader_.seek(cursor);
}

absl::Status prefetch_queue::seek(int64_t cursor, int dp_rank, int dp_size) {
  TROUPE_RETURN_IF_ERROR(loader_.reshard(dp_rank, dp_size));
  seek(cursor);
  return absl::OkStatus();
}

}  // namespace troupe::actors
