#pragma once

// The preference pairs the reward-model and DPO trainer tests train on: a pattern a tiny model
// learns in a few steps.

#include "models/decoder/decoder_config.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::testing {

/// The last token of pair `pair`'s sequences.
inline int toy_pair_last(int pair, int salt) {
  return 6 + (pair + salt) % 5;
}

/// `pairs` preference pairs of config.ctx-token rows, the chosen sequence in row 2i and the
/// rejected one in 2i + 1: a prompt of 3 tokens, then a response to position
/// toy_pair_last(i, salt), the chosen one of tokens 5 and 6, the rejected one of 9 and 10;
/// padded with token 0. Every target is -1: each test sets what it trains on.
inline actor::token_batch toy_pairs(const models::decoder_config& config, int pairs, int salt) {
  actor::token_batch b;
  b.batch = 2 * pairs;
  b.ctx = config.ctx;
  const size_t n = static_cast<size_t>(b.batch) * b.ctx;
  b.tokens.assign(n, 0);
  b.targets.assign(n, -1);
  for (int row = 0; row < b.batch; ++row) {
    const int pair = row / 2;
    for (int t = 0; t <= toy_pair_last(pair, salt); ++t) {
      b.tokens[static_cast<size_t>(row) * b.ctx + t] =
          t < 3 ? (pair * 7 + t * 3 + salt) % config.vocab
                : (row % 2 == 0 ? 5 : 9) + (t + pair) % 2;
    }
  }
  b.global_targets = pairs;
  return b;
}

}  // namespace troupe::testing
