#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/vocab/model_vocabulary.hpp"
#include "runtime/actor/message_types.hpp"
#include "runtime/base/even_split.hpp"

namespace troupe::actors {

/// One supervised example (SFT): its tokens, and per token whether the loss covers it (a
/// response's token, or an assistant message's).
struct sft_example {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> trained;
  /// How many of the example's next-byte targets the loss covers.
  [[nodiscard]] int64_t trained_targets() const;
};

/// One preference pair (app: reward_model, app: dpo): the tokens of the prompt followed by the
/// chosen response, and by the rejected one.
struct preference_example {
  std::vector<int32_t> chosen, rejected;
  float margin = 0;  ///< how much more the chosen one must score (TRL's optional margin column)
  int prompt_tokens = 0;  ///< where the responses start
};

/// Each pair's reference log-probabilities (app: dpo), two a pair (chosen, rejected) in the
/// corpus's order: the training pairs' and the held-out ones'.
struct pair_reference {
  std::vector<float> train, val;
};

/// Byte-level text for pretraining: every text file under a path, concatenated in name order,
/// with the last `val_fraction` held out for evaluation; or (load_sft) supervised examples; or
/// (load_pairs) preference pairs.
class text_corpus {
 public:
  /// Reads `path` (a file, or a directory as text_files() lists it). Errors name the path and
  /// say when the text is too short to hold one training and one validation window.
  [[nodiscard]] static absl::StatusOr<text_corpus> load(const std::string& path,
                                                        double val_fraction, int ctx);
  /// The same from text in memory (a task's generated text); `origin` names it in errors.
  [[nodiscard]] static absl::StatusOr<text_corpus> from_text(std::string text, double val_fraction,
                                                             int ctx, const std::string& origin);
  /// Supervised fine-tuning data (pretrain.data.format: sft, sft_data.cpp): the JSONL files
  /// under `path` in name order, each line {"prompt": string, "response": string} or
  /// {"messages": [{"role", "content"}, ...]}, made `vocabulary`'s tokens as
  /// models/vocab/chat_tokens.hpp says (a Hugging Face model's chat template, or troupe's byte
  /// text), the last `val_fraction` of the examples held out. The loss covers only the
  /// response (the assistant messages). INVALID_ARGUMENT naming FILE:LINE and the field for a
  /// line that is none of these, an empty prompt or response, or an example longer than ctx + 1
  /// tokens.
  [[nodiscard]] static absl::StatusOr<text_corpus> load_sft(
      const std::string& path, double val_fraction, int ctx,
      const models::model_vocabulary& vocabulary);

  /// Preference pairs (data.format: pairs, preference_data.cpp): the JSONL files under `path`
  /// in name order, each line {"prompt": string, "chosen": string, "rejected": string} and an
  /// optional "margin" (a number: -log sigmoid(r_chosen - r_rejected - margin)), each response
  /// in `vocabulary`'s tokens after the prompt's (as load_sft's examples), the last
  /// `val_fraction` held out. INVALID_ARGUMENT naming FILE:LINE and the field for a line that is
  /// not one, an empty field, a chosen response equal to the rejected one, or a sequence longer
  /// than ctx tokens.
  [[nodiscard]] static absl::StatusOr<text_corpus> load_pairs(
      const std::string& path, double val_fraction, int ctx,
      const models::model_vocabulary& vocabulary);

  [[nodiscard]] const std::string& train() const { return train_; }
  [[nodiscard]] const std::string& val() const { return val_; }
  /// Makes text a tokenizer's: the training and the held-out text as token ids (each encoded
  /// whole), whose windows of ctx + 1 ids replace the bytes'. INVALID_ARGUMENT, naming
  /// `origin`, when either is shorter than one window.
  [[nodiscard]] absl::Status attach_tokens(std::vector<int32_t> train, std::vector<int32_t> val,
                                           int ctx, const std::string& origin);
  /// Whether the text's samples are token ids (attach_tokens()) rather than bytes.
  [[nodiscard]] bool tokenized() const { return !train_tokens_.empty(); }
  [[nodiscard]] const std::vector<int32_t>& train_tokens() const { return train_tokens_; }
  [[nodiscard]] const std::vector<int32_t>& val_tokens() const { return val_tokens_; }
  /// Whether the corpus is supervised examples (load_sft) rather than text.
  [[nodiscard]] bool supervised() const { return !train_examples_.empty(); }
  [[nodiscard]] const std::vector<sft_example>& train_examples() const { return train_examples_; }
  [[nodiscard]] const std::vector<sft_example>& val_examples() const { return val_examples_; }
  /// Whether the corpus is preference pairs (load_pairs).
  [[nodiscard]] bool pairs() const { return !train_pairs_.empty(); }
  /// The rows of a batch one sample takes: 2 for a preference pair, else 1.
  [[nodiscard]] int rows_per_sample() const { return pairs() ? 2 : 1; }
  [[nodiscard]] const std::vector<preference_example>& train_pairs() const { return train_pairs_; }
  [[nodiscard]] const std::vector<preference_example>& val_pairs() const { return val_pairs_; }
  /// Makes preference pairs DPO's: each row trained on its response's tokens, with the
  /// reference's log-probabilities. INVALID_ARGUMENT unless they are two a pair.
  [[nodiscard]] absl::Status attach_reference(pair_reference reference);
  /// Whether the pairs are DPO's (attach_reference()) rather than a reward model's.
  [[nodiscard]] bool dpo() const { return pairs() && !reference_.train.empty(); }
  [[nodiscard]] const pair_reference& reference() const { return reference_; }

 private:
  text_corpus(std::string train, std::string val)
      : train_(std::move(train)), val_(std::move(val)) {}
  text_corpus(std::vector<sft_example> train, std::vector<sft_example> val)
      : train_examples_(std::move(train)), val_examples_(std::move(val)) {}
  text_corpus(std::vector<preference_example> train, std::vector<preference_example> val)
      : train_pairs_(std::move(train)), val_pairs_(std::move(val)) {}
  static absl::Status check_val_fraction(double val_fraction);
  std::string train_, val_;
  std::vector<int32_t> train_tokens_, val_tokens_;
  std::vector<sft_example> train_examples_, val_examples_;
  std::vector<preference_example> train_pairs_, val_pairs_;
  pair_reference reference_;
};

/// Rows `row` (chosen) and `row` + 1 (rejected) of `out` from a DPO pair: each sequence's tokens
/// (padded with 0), and as targets the next token at each position that predicts a response
/// token (prompt_tokens - 1 .. length - 2), -1 elsewhere. `reference`: its two log-probabilities,
/// or null (out.reference_logps untouched).
void fill_dpo_pair(actor::token_batch& out, int row, const preference_example& pair,
                   const float* reference);

using actor::token_batch;

/// The sample stream of one data-parallel rank. Samples are the windows of ctx + 1 bytes (or
/// token ids, for tokenized text) at stride ctx over the training text, or a supervised corpus's
/// examples, each a row of its own (padded; the targets outside its response are -1), or preference
/// pairs, each two rows (the chosen sequence, then the rejected one, padded; a reward model's
/// scored at its last byte, the one target that is not -1: 1 on the chosen row, 0 on the rejected,
/// as actors/reward_objective.hpp reads them; DPO's trained on its response, fill_dpo_pair()); a
/// batch's counts (global_batch, local_batch()) are then pairs. Epoch e visits them in an
/// order shuffled by (seed, e); the stream is epochs end to end, so a global sample index g is
/// sample perm_e[g mod S] of epoch e = g / S. Global batch b is stream indices [b * global, (b + 1)
/// * global); rank r takes the r-th of dp slices split as evenly as possible (even_split). Every
/// sample is used exactly once per epoch at any dp, also when dp changes between batches (a rank
/// lost or joined), and the whole state is one number, the next global index: resuming at it
/// replays nothing and skips nothing.
class data_loader {
 public:
  /// global_batch must be at least dp_size.
  [[nodiscard]] static absl::StatusOr<data_loader> create(const text_corpus& corpus, int ctx,
                                                          int global_batch, int dp_rank,
                                                          int dp_size, uint64_t seed);

  /// This rank's share of the next global batch; advances the cursor by one global batch.
  token_batch next();

  /// The next global sample index (what a checkpoint saves).
  [[nodiscard]] int64_t cursor() const { return cursor_; }
  void seek(int64_t cursor) { cursor_ = cursor; }
  /// Continues as rank `dp_rank` of `dp_size` (the group changed); INVALID_ARGUMENT, changing
  /// nothing, unless the global batch gives that rank a sample.
  [[nodiscard]] absl::Status reshard(int dp_rank, int dp_size);
  [[nodiscard]] int64_t samples_per_epoch() const { return samples_; }
  [[nodiscard]] int local_batch() const {
    return static_cast<int>(even_split{global_batch_, dp_size_}.size(dp_rank_));
  }

  /// Up to `max_windows` held-out samples (windows, examples or pairs), in order, as batches of
  /// `batch` samples (the last one may be shorter).
  [[nodiscard]] std::vector<token_batch> validation(int batch, int max_windows) const;

 private:
  data_loader(const text_corpus& corpus, int ctx, int global_batch, int dp_rank, int dp_size,
              uint64_t seed);
  int64_t sample_at(int64_t global_index);
  // The window of text (bytes, or token ids) at `offset`: its ctx symbols, and the next ones as
  // targets.
  void fill(token_batch& out, int row, const std::string& text, int64_t offset) const;
  void fill(token_batch& out, int row, const std::vector<int32_t>& ids, int64_t offset) const;
  void fill(token_batch& out, int row, const sft_example& example) const;
  // Rows `row` (chosen) and `row` + 1 (rejected) of the pair `index` of `pairs` (the training
  // or the held-out ones, with their `reference`).
  void fill(token_batch& out, int row, const std::vector<preference_example>& pairs,
            const std::vector<float>& reference, int64_t index) const;
  [[nodiscard]] int rows_per_sample() const { return corpus_->rows_per_sample(); }
  // The targets the loss covers in the global batch whose stream indices start at `first`.
  [[nodiscard]] int64_t trained_targets(int64_t first);

  const text_corpus* corpus_;
  int ctx_, global_batch_, dp_rank_, dp_size_;
  uint64_t seed_;
  int64_t samples_ = 0;
  int64_t cursor_ = 0;
  int64_t perm_epoch_ = -1;
  std::vector<int64_t> perm_;
};

/// Credit-based prefetch in front of a data_loader: the consumer grants credits, the producer
/// prepares at most that many batches ahead, and every batch handed over uses one up, so the
/// queue is bounded by the credits outstanding (back-pressure without a fixed buffer size).
class prefetch_queue {
 public:
  explicit prefetch_queue(data_loader loader) : loader_(std::move(loader)) {}

  /// Allows `n` more batches to be prepared ahead.
  void grant(int n) { credits_ += n; }
  /// Whether a batch may be prepared now.
  [[nodiscard]] bool can_produce() const { return credits_ > 0; }
  /// Prepares one batch ahead, using one credit.
  void produce();
  /// The next batch: a prepared one, or (when none is ready) one made now.
  token_batch take();

  [[nodiscard]] size_t ready() const { return ready_.size(); }
  [[nodiscard]] int credits() const { return credits_; }
  /// Where the next batch the consumer has not received starts: what a checkpoint saves.
  [[nodiscard]] int64_t cursor() const;
  /// Drops prepared batches and continues from `cursor` (a resume).
  void seek(int64_t cursor);
  /// seek(cursor) as rank `dp_rank` of `dp_size` (data_loader::reshard).
  [[nodiscard]] absl::Status seek(int64_t cursor, int dp_rank, int dp_size);

 private:
  data_loader loader_;
  std::vector<token_batch> ready_;  // oldest first
  int credits_ = 0;
};

}  // namespace troupe::actors
