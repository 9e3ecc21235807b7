#include "actors/draft_model_proposer.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "actors/speculative_decoding.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<draft_model_proposer>> draft_model_proposer::create(
    const models::decoder_layout& layout, const float* params, int target_vocab, int max_tokens,
    int kv_blocks, int block_size, int device, kernels::cpu::thread_pool* pool) {
  const models::decoder_config& c = layout.config();
  if (c.vocab != target_vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the draft model's vocabulary has ", c.vocab,
                                                   " tokens and the served "
                                                   "model's ",
                                                   target_vocab,
                                                   ": a draft model must share its tokenizer"));
  }
  TROUPE_ASSIGN_OR_RETURN(
      auto decoder,
      models::make_paged_decoder(layout, params, max_tokens, kv_blocks, block_size, device, pool));
  return std::unique_ptr<draft_model_proposer>(new draft_model_proposer(
      std::move(decoder), c.vocab, c.ctx, max_tokens, kv_blocks, block_size));
}

draft_model_proposer::draft_model_proposer(std::unique_ptr<models::paged_decoder> decoder,
                                           int vocab, int ctx, int max_tokens, int kv_blocks,
                                           int block_size)
    : decoder_(std::move(decoder)),
      vocab_(vocab),
      ctx_(ctx),
      max_tokens_(max_tokens),
      blocks_(kv_blocks, block_size) {}

void draft_model_proposer::forget(uint64_t id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  blocks_.release(it->second.blocks);
  held_.erase(it);
}

absl::StatusOr<std::vector<draft_model_proposer::proposal>> draft_model_proposer::propose(
    std::span<const sequence> sequences, int k) {
  std::vector<proposal> out(sequences.size());
  // A sequence whose catch-up reached its last token: it guesses `room` tokens, from the logits
  // at `row` of the latest forward pass.
  struct guessing {
    size_t index;
    int room;
    int row;
  };
  std::vector<guessing> active;
  // The first pass: each sequence's tokens from where what the cache holds departs from them
  // (at least its last token, whose logits give the first guess), within the token budget.
  std::vector<models::decode_request> batch;
  int budget = max_tokens_;
  for (size_t i = 0; i < sequences.size() && budget > 0; ++i) {
    const sequence& s = sequences[i];
    const int size = static_cast<int>(s.tokens.size());
    const int room = std::min(k, ctx_ - size);  // guesses at positions [size, size + room)
    if (room < 1) continue;
    held& h = held_[s.id];
    const auto differ =
        std::mismatch(h.tokens.begin(), h.tokens.end(), s.tokens.begin(), s.tokens.end());
    const int from = std::min(static_cast<int>(differ.first - h.tokens.begin()), size - 1);
    const int count = std::min(size - from, budget);
    if (!blocks_.reserve(h.blocks, from + count + room - 1)) continue;
    h.tokens.assign(s.tokens.begin(), s.tokens.begin() + from + count);
    if (from + count == size) active.push_back({i, room, static_cast<int>(batch.size())});
    batch.push_back(
        {s.tokens.data() + from, count, from, h.blocks.data(), static_cast<int>(h.blocks.size())});
    budget -= count;
  }
  // Then one guess per pass: drawn from the logits after the previous token, and run through the
  // model at its position for the next one.
  for (int step = 0; !batch.empty(); ++step) {
    logits_.resize(int64_t{models::logit_rows(batch)} * vocab_);
    TROUPE_RETURN_IF_ERROR(decoder_->forward(batch, logits_.data()));
    batch.clear();
    std::vector<guessing> next;
    for (const guessing& g : active) {
      const sequence& s = sequences[g.index];
      const actor::generation_request& r = *s.request;
      proposal& p = out[g.index];
      float* q = nullptr;
      if (r.temperature > 0.0f) {
        p.probs.resize(static_cast<size_t>(step + 1) * vocab_);
        q = p.probs.data() + static_cast<int64_t>(step) * vocab_;
      }
      const int size = static_cast<int>(s.tokens.size());
      const uint64_t output = size - r.prompt.size() + step;  // the guessed token's index
      p.tokens.push_back(draw_draft_token(logits_.data() + int64_t{g.row} * vocab_, vocab_,
                                          {r.temperature, r.top_k, r.top_p}, r.seed, output, q));
      if (step + 1 == g.room) continue;
      held& h = held_[s.id];
      h.tokens.push_back(p.tokens.back());
      next.push_back({g.index, g.room, static_cast<int>(batch.size())});
      batch.push_back(
          {&p.tokens.back(), 1, size + step, h.blocks.data(), static_cast<int>(h.blocks.size())});
    }
    active = std::move(next);
  }
  return out;
}

}  // namespace troupe::actors
