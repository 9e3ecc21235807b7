#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/sampling.hpp"

namespace troupe::actors {

/// Speculative decoding (vLLM's `speculative_config`): a proposer guesses the next few tokens of
/// a sequence, the model checks them all in one forward pass (the logits after the last token
/// and after each draft token), and every draft token up to the first rejected one is kept,
/// plus one token the model draws. The output is distributed as without speculation; greedy
/// output is the same tokens.
struct speculative_options {
  /// Draft tokens proposed per sequence and step; 0: no speculation.
  int num_speculative_tokens = 0;
  /// Prompt lookup (vLLM's "ngram" method): the n-gram that ends the sequence, of at most
  /// prompt_lookup_max and at least prompt_lookup_min tokens, looked up earlier in it.
  int prompt_lookup_min = 5;  // vLLM's defaults
  int prompt_lookup_max = 5;
  /// vLLM's disable_by_batch_size: no drafts while more sequences than this run (a large batch
  /// is compute-bound already, and rejected drafts cost it); 0: always draft.
  int disable_by_batch_size = 0;
  [[nodiscard]] bool enabled() const { return num_speculative_tokens > 0; }
};

/// Prompt lookup (vLLM's ngram proposer): the longest n-gram of [min_n, max_n] tokens that ends
/// `tokens` and also occurs earlier in them (at its earliest place among the longest), and the at
/// most `k` tokens that followed it there. Empty when no such n-gram occurs.
[[nodiscard]] std::vector<int32_t> propose_by_prompt_lookup(std::span<const int32_t> tokens,
                                                            int min_n, int max_n, int k);

/// A draft model's draw of draft token at output index `counter` (its own uniform stream, apart
/// from the ones plain sampling and verify_draft_token use): the most likely token at
/// temperature 0, else a draw from the request's sampling distribution of the draft's `logits`,
/// which it writes normalized to probs[vocab] (the q that verify_draft_token checks against).
[[nodiscard]] int32_t draw_draft_token(const float* logits, int vocab,
                                       const kernels::sampling_params& p, uint64_t seed,
                                       uint64_t counter, float* probs);

/// What checking one draft token gave: whether it stands, and the token the output gets at its
/// position (the draft token, or the one drawn in its place).
struct draft_verdict {
  bool accepted = false;
  int32_t token = 0;
};

/// Checks draft token `draft` against the model's logits at its position (speculative sampling:
/// Leviathan et al. 2023, Chen et al. 2023). With p the request's sampling distribution there
/// (kernels::cpu::sampling_weights) and q the proposer's, the draft is accepted with probability
/// min(1, p(draft) / q(draft)); otherwise the token is drawn from max(0, p - q), normalized. The
/// token that results is distributed as p exactly. `draft_probs` is q over the vocabulary, or
/// null for a proposer sure of its guess (prompt lookup: q is 1 at the draft). Greedy
/// (temperature 0): accepted when the draft is the most likely token, else that token. The two
/// uniform draws are (seed, counter)'s, apart from the ones plain sampling uses.
[[nodiscard]] draft_verdict verify_draft_token(const float* logits, int vocab,
                                               const kernels::sampling_params& p, uint64_t seed,
                                               uint64_t counter, int32_t draft,
                                               const float* draft_probs = nullptr);

}  // namespace troupe::actors
