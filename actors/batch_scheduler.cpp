#include "actors/batch_scheduler.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "actors/token_text.hpp"

namespace troupe::actors {

batch_scheduler::batch_scheduler(scheduler_options options, kv_block_pool& blocks)
    : options_(options), blocks_(blocks) {}

absl::Status batch_scheduler::add(generation_request request) {
  const int prompt = static_cast<int>(request.prompt.size());
  if (prompt == 0) return absl::InvalidArgumentError("the prompt is empty");
  if (request.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens must be at least 1, got ", request.max_tokens));
  }
  if (prompt >= options_.ctx) {
    return absl::OutOfRangeError(absl::StrCat("the prompt has ", prompt,
                                              " tokens; the context holds ", options_.ctx,
                                              " and one must be left to generate"));
  }
  const int longest = std::min(options_.ctx, prompt + request.max_tokens);
  if (blocks_.blocks_for(longest) > blocks_.total()) {
    return absl::OutOfRangeError(absl::StrCat(
        "a sequence of ", longest, " tokens needs ", blocks_.blocks_for(longest),
        " KV blocks, but the cache has ", blocks_.total(), "; shorten it or enlarge the cache"));
  }
  if (sequences_.count(request.id) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("request ", request.id, " is already queued"));
  }
  const uint64_t id = request.id;
  sequence s;
  s.tokens = request.prompt;
  s.request = std::move(request);
  sequences_.emplace(id, std::move(s));
  waiting_.push_back(id);
  return absl::OkStatus();
}

std::vector<generation_event> batch_scheduler::cancel(uint64_t id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end() || it->second.ended) return {};
  return finish(id, finish_reason::cancelled, output_size(id));
}

std::vector<generation_event> batch_scheduler::end(uint64_t id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end() || it->second.ended) return {};
  return finish(id, finish_reason::stop, output_size(id));
}

bool batch_scheduler::plan_chunk(uint64_t id, int& budget, std::vector<batch_chunk>& batch) {
  sequence& s = sequences_.at(id);
  if (s.ended) {
    // A padding row: one more position, while the context and the blocks allow.
    if (budget < 1 || s.computed + 1 > options_.ctx || !blocks_.reserve(s.blocks, s.computed + 1)) {
      return true;
    }
    if (s.computed == static_cast<int>(s.tokens.size())) s.tokens.push_back(0);
    batch.push_back({id, s.computed, 1, false});
    budget -= 1;
    return true;
  }
  const int known = static_cast<int>(s.tokens.size());
  // A mean-pooled embedding needs every prompt position's hidden state: no cached prefix.
  const bool admitted =
      s.blocks.empty() && options_.prefix_caching && s.request.pooling != actor::pooling_type::mean;
  const int hit = admitted ? take_cached_prefix(s) : 0;
  const int take = std::min(known - s.computed, budget);
  if (take <= 0 || !blocks_.reserve(s.blocks, s.computed + take)) {
    if (admitted) {  // it waits without holding its prefix's blocks
      blocks_.release(s.blocks);
      s.computed = s.cached = 0;
    }
    return take <= 0;  // false: no blocks
  }
  if (admitted) {
    prefix_cache_queries_ += known;
    prefix_cache_hits_ += hit;
  }
  const bool samples = s.computed + take == known;
  const int drafts = samples && take == 1 ? plan_drafts(s, budget - 1) : 0;
  s.drafts.clear();
  batch.push_back({id, s.computed, take + drafts, samples, drafts});
  budget -= take + drafts;
  if (options_.prefix_caching) note_in_flight(s, batch.back());
  return true;
}

int batch_scheduler::plan_drafts(sequence& s, int budget) {
  if (s.drafts.empty() || !options_.continuous) return 0;
  const int known = static_cast<int>(s.tokens.size());
  const int produced = known - static_cast<int>(s.request.prompt.size());
  // The step gives one token past the drafts it keeps: room for that one in the context and
  // max_tokens.
  const int drafts = std::min({static_cast<int>(s.drafts.size()), budget, options_.ctx - known - 1,
                               s.request.max_tokens - produced - 1});
  if (drafts <= 0 || !blocks_.reserve(s.blocks, known + drafts)) return 0;
  s.checked.assign(1, s.tokens.back());
  s.checked.insert(s.checked.end(), s.drafts.begin(), s.drafts.begin() + drafts);
  return drafts;
}

void batch_scheduler::set_drafts(uint64_t id, std::vector<int32_t> drafts) {
  auto it = sequences_.find(id);
  if (it != sequences_.end() && !it->second.ended) it->second.drafts = std::move(drafts);
}

const int32_t* batch_scheduler::chunk_tokens(const batch_chunk& chunk) const {
  const sequence& s = sequences_.at(chunk.id);
  return chunk.drafts > 0 ? s.checked.data() : s.tokens.data() + chunk.first_position;
}

void batch_scheduler::computed_draft(uint64_t id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return;  // it ended at that token
  sequence& s = it->second;
  s.computed = std::min(s.computed + 1, static_cast<int>(s.tokens.size()));
  cache_computed(s);
}

const std::vector<uint64_t>& batch_scheduler::hash_blocks(sequence& s) {
  if (!s.chain.empty() && s.chain.front() != salt_) s.chain.clear();  // hashed under old weights
  kv_block_pool::extend_hashes(s.chain, s.tokens, blocks_.block_size(), salt_);
  return s.chain;
}

bool batch_scheduler::prefix_in_flight(sequence& s) {
  if (!options_.prefix_caching || in_flight_.empty()) return false;
  const std::vector<uint64_t>& chain = hash_blocks(s);
  return std::any_of(chain.begin() + 1, chain.end(),
                     [this](uint64_t h) { return in_flight_.contains(h); });
}

void batch_scheduler::note_in_flight(sequence& s, const batch_chunk& chunk) {
  if (s.ended) return;
  hash_blocks(s);
  const int bs = blocks_.block_size();
  const int last = std::min<int>((chunk.first_position + chunk.count) / bs,
                                 static_cast<int>(s.chain.size()) - 1);
  for (int b = chunk.first_position / bs; b < last; ++b)
    in_flight_.insert(s.chain[b + 1]);
}

int batch_scheduler::take_cached_prefix(sequence& s) {
  // Short of the last token: its logits are what the sequence needs next.
  const int most = (static_cast<int>(s.tokens.size()) - 1) / blocks_.block_size();
  const int shared = blocks_.share_cached(s.blocks, hash_blocks(s), s.tokens, most);
  s.cached = shared;
  s.computed = shared * blocks_.block_size();
  return s.computed;
}

void batch_scheduler::cache_computed(sequence& s) {
  if (!options_.prefix_caching || s.ended) return;
  const int full = s.computed / blocks_.block_size();
  if (full > s.cached) blocks_.cache(s.blocks, hash_blocks(s), s.tokens, s.cached, full);
  s.cached = std::max(s.cached, full);
}

void batch_scheduler::new_weights(uint64_t version) {
  salt_ = version;
  blocks_.forget_cached();
}

uint64_t batch_scheduler::preempt_newest(std::vector<batch_chunk>& batch) {
  // The newest sequence still generating (an ended one's padding never needs a block).
  auto newest = std::find_if(running_.rbegin(), running_.rend(),
                             [this](uint64_t id) { return !sequences_.at(id).ended; });
  const uint64_t id = *newest;
  running_.erase(std::next(newest).base());
  sequence& s = sequences_.at(id);
  blocks_.release(s.blocks);
  s.computed = 0;  // recomputed from its tokens (or its cached prefix) when readmitted
  s.cached = 0;
  s.drafts.clear();
  waiting_.push_front(id);
  ++preemptions_;
  std::erase_if(batch, [id](const batch_chunk& c) { return c.id == id; });
  return id;
}

std::vector<batch_chunk> batch_scheduler::schedule() {
  std::vector<batch_chunk> batch;
  in_flight_.clear();
  int budget = options_.max_batch_tokens;
  const bool admit_into_running = options_.continuous;
  if (!options_.continuous) end_static_batch();
  if (!options_.continuous && running_.empty()) {
    // Static batching: a new batch of whole requests, run until every one has ended.
    while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_sequences) {
      running_.push_back(waiting_.front());
      waiting_.pop_front();
    }
  }
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    const uint64_t id = running_[i];
    if (plan_chunk(id, budget, batch)) {
      ++i;
      continue;
    }
    // Out of blocks: the newest running sequence makes room (or waits itself, if it is newest).
    const size_t before = batch.size();
    int returned = 0;
    for (const auto& c : batch)
      returned += c.count;
    preempt_newest(batch);
    for (const auto& c : batch)
      returned -= c.count;
    if (batch.size() < before) budget += returned;
  }
  while (admit_into_running && budget > 0 && !waiting_.empty() &&
         static_cast<int>(running_.size()) < options_.max_sequences) {
    const uint64_t id = waiting_.front();
    if (prefix_in_flight(sequences_.at(id))) break;  // shares it at the next iteration
    if (!plan_chunk(id, budget, batch)) break;  // it waits for blocks; nobody is preempted for it
    waiting_.pop_front();
    running_.push_back(id);
  }
  return batch;
}

void batch_scheduler::computed(const std::vector<batch_chunk>& batch) {
  for (const auto& c : batch) {
    auto it = sequences_.find(c.id);
    if (it != sequences_.end()) {
      it->second.computed = std::max(it->second.computed, c.first_position + c.count - c.drafts);
      cache_computed(it->second);
    }
  }
}

void batch_scheduler::attach_top(const sequence& s, int from, int to, generation_event& e) {
  const size_t k = static_cast<size_t>(std::max(0, s.request.top_logprobs));
  if (k == 0) return;
  e.top_tokens.assign(s.top_tokens.begin() + from * k, s.top_tokens.begin() + to * k);
  e.top_values.assign(s.top_values.begin() + from * k, s.top_values.begin() + to * k);
}

std::vector<generation_event> batch_scheduler::on_token(uint64_t id, int32_t token, float logprob,
                                                        std::span<const int32_t> top_tokens,
                                                        std::span<const float> top_values) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return {};
  sequence& s = it->second;
  s.tokens.push_back(token);
  s.logprobs.push_back(logprob);
  s.top_tokens.insert(s.top_tokens.end(), top_tokens.begin(), top_tokens.end());
  s.top_values.insert(s.top_values.end(), top_values.begin(), top_values.end());
  const int prompt = static_cast<int>(s.request.prompt.size());
  const int produced = static_cast<int>(s.tokens.size()) - prompt;
  const auto& stop_ids = s.request.stop_token_ids;
  // min_tokens: a stop token may be drawn once min_tokens tokens precede it (the engine masks
  // it before), and a stop string counts once the output has min_tokens tokens (vLLM's rules).
  if (produced > s.request.min_tokens &&
      std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
    return finish(id, finish_reason::stop,
                  produced - (s.request.include_stop_str_in_output ? 0 : 1));
  }
  // The earliest stop string in the text, looked for where this token's bytes could end one;
  // and how many bytes at the end might begin one, held back while streaming. Without stop
  // strings the text is not kept (a rollout's tokens cost nothing here).
  size_t stop_at = std::string::npos;
  size_t hold = 0;
  const bool stop_strings = !s.request.stop.empty();
  if (stop_strings) {
    const size_t before = s.text.size();  // the text before this token
    s.text += token_text(token);
    s.text_ends.push_back(s.text.size());
    const std::string_view text = s.text;
    for (const auto& stop : s.request.stop) {
      if (stop.empty()) continue;
      const size_t at = text.find(stop, before >= stop.size() ? before - stop.size() + 1 : 0);
      stop_at = std::min(stop_at, at);
      if (!s.request.stream) continue;  // nothing is released before the end
      for (size_t k = std::min(stop.size() - 1, text.size()); k > hold; --k) {
        if (text.ends_with(std::string_view(stop).substr(0, k))) {
          hold = k;
          break;
        }
      }
    }
  }
  if (stop_at != std::string::npos && produced >= s.request.min_tokens) {
    return finish(id, finish_reason::stop,
                  s.request.include_stop_str_in_output ? produced : kept_before_stop(s, stop_at));
  }
  if (produced >= s.request.max_tokens || static_cast<int>(s.tokens.size()) >= options_.ctx) {
    return finish(id, finish_reason::length, produced);
  }
  if (!s.request.stream) return {};  // wanted whole: its one event comes when it ends
  // The tokens whose bytes all lie before the held ones.
  const int releasable =
      stop_strings ? static_cast<int>(std::upper_bound(s.text_ends.begin(), s.text_ends.end(),
                                                       s.text.size() - hold) -
                                      s.text_ends.begin())
                   : produced;
  if (releasable <= s.released) return {};
  generation_event e{id,
                     std::vector<int32_t>(s.tokens.begin() + prompt + s.released,
                                          s.tokens.begin() + prompt + releasable),
                     s.released};
  e.logprobs.assign(s.logprobs.begin() + s.released, s.logprobs.begin() + releasable);
  attach_top(s, s.released, releasable, e);
  s.released = releasable;
  return {std::move(e)};
}

std::string_view batch_scheduler::token_text(int32_t token) const {
  return token_text_of(options_.token_text.get(), token);
}

// The tokens before the one in which the stop string starts; when it starts inside a token
// (a token holding text before the stop), every token stays, and the API cuts the text at the
// stop string (as vLLM keeps the token ids and cuts the text).
int batch_scheduler::kept_before_stop(const sequence& s, size_t at) {
  const auto first = std::upper_bound(s.text_ends.begin(), s.text_ends.end(), at);
  const size_t begins = first == s.text_ends.begin() ? 0 : *std::prev(first);
  return begins == at ? static_cast<int>(first - s.text_ends.begin())
                      : static_cast<int>(s.text_ends.size());
}

std::vector<generation_event> batch_scheduler::finish(uint64_t id, finish_reason reason, int keep) {
  sequence& s = sequences_.at(id);
  const int prompt = static_cast<int>(s.request.prompt.size());
  generation_event e{id, {}, s.released, true, reason};
  if (keep > s.released) {
    e.tokens.assign(s.tokens.begin() + prompt + s.released, s.tokens.begin() + prompt + keep);
    e.logprobs.assign(s.logprobs.begin() + s.released, s.logprobs.begin() + keep);
    attach_top(s, s.released, keep, e);
  }
  const bool in_static_batch =
      !options_.continuous && std::count(running_.begin(), running_.end(), id) > 0;
  if (in_static_batch) {
    s.ended = true;  // its row runs on until the batch ends
    return {std::move(e)};
  }
  blocks_.release(s.blocks);
  std::erase(running_, id);
  std::erase(waiting_, id);
  sequences_.erase(id);
  return {std::move(e)};
}

void batch_scheduler::end_static_batch() {
  for (uint64_t id : running_) {
    if (!sequences_.at(id).ended) return;
  }
  for (uint64_t id : running_) {
    blocks_.release(sequences_.at(id).blocks);
    sequences_.erase(id);
  }
  running_.clear();
}

const std::vector<int32_t>& batch_scheduler::tokens(uint64_t id) const {
  return sequences_.at(id).tokens;
}

const std::vector<int32_t>& batch_scheduler::block_table(uint64_t id) const {
  return sequences_.at(id).blocks;
}

const generation_request& batch_scheduler::request(uint64_t id) const {
  return sequences_.at(id).request;
}

bool batch_scheduler::generating(uint64_t id) const {
  const auto it = sequences_.find(id);
  return it != sequences_.end() && !it->second.ended;
}

int batch_scheduler::output_size(uint64_t id) const {
  const sequence& s = sequences_.at(id);
  return static_cast<int>(s.tokens.size() - s.request.prompt.size());
}

}  // namespace troupe::actors
