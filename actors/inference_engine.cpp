#include "actors/inference_engine.hpp"

#include "absl/strings/str_cat.h"
#include "actors/logits_processor.hpp"
#include "kernels/sampling.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<inference_engine>> inference_engine::create(
    const models::decoder_layout& layout, const float* params, options o) {
  if (o.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("inference engine: threads is ", o.threads, "; it must be at least 1"));
  }
  // Between two iterations the engine samples, schedules and (in a worker) answers its messages
  // on one thread, for longer than the pool's spin: its other threads keep looking, yielding
  // their cores, rather than block and take longer to wake than the gap (docs/compute.md).
  std::unique_ptr<kernels::cpu::thread_pool> pool;
  if (o.threads > 1 && o.device < 0) {
    pool = std::make_unique<kernels::cpu::thread_pool>(
        o.threads, kernels::cpu::thread_pool::default_spin, std::chrono::microseconds(250));
  }
  TROUPE_ASSIGN_OR_RETURN(
      auto decoder, models::make_paged_decoder(layout, params, o.scheduler.max_batch_tokens,
                                               o.kv_blocks, o.block_size, o.device, pool.get(),
                                               {o.quantization, o.prequantized, o.kv_cache_dtype}));
  std::unique_ptr<draft_model_proposer> drafter;
  if (o.speculative.enabled() && o.draft_layout != nullptr) {
    TROUPE_ASSIGN_OR_RETURN(
        drafter, draft_model_proposer::create(*o.draft_layout, o.draft_params,
                                              layout.config().vocab, o.scheduler.max_batch_tokens,
                                              o.kv_blocks, o.block_size, o.device, pool.get()));
  }
  return std::unique_ptr<inference_engine>(
      new inference_engine(layout, std::move(pool), std::move(decoder), std::move(drafter), o));
}

inference_engine::inference_engine(const models::decoder_layout& layout,
                                   std::unique_ptr<kernels::cpu::thread_pool> pool,
                                   std::unique_ptr<models::paged_decoder> decoder,
                                   std::unique_ptr<draft_model_proposer> drafter, options o)
    : layout_(layout),
      speculative_(o.speculative),
      pool_(std::move(pool)),
      decoder_(std::move(decoder)),
      drafter_(std::move(drafter)),
      blocks_(o.kv_blocks, o.block_size),
      scheduler_(o.scheduler, blocks_),
      guided_(o.scheduler.token_text, layout.config().vocab) {}

absl::Status inference_engine::add(generation_request request) {
  const int vocab = layout_.config().vocab;
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0 || request.prompt[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", i, " is ", request.prompt[i],
                                                     ", outside the vocabulary [0, ", vocab, ")"));
    }
  }
  if (request.top_logprobs < 0 || request.top_logprobs > vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs is ", request.top_logprobs, "; it must be in [0, ", vocab, "]"));
  }
  TROUPE_RETURN_IF_ERROR(check_logit_adjustments(request, vocab));
  std::shared_ptr<const json_grammar> grammar;  // structured output's
  if (!request.json_schema.empty()) {
    TROUPE_ASSIGN_OR_RETURN(grammar, json_grammar::compile(request.json_schema));
  }
  const uint64_t id = request.id;
  TROUPE_RETURN_IF_ERROR(scheduler_.add(std::move(request)));
  if (grammar != nullptr) guided_.add(id, std::move(grammar));
  return absl::OkStatus();
}

std::vector<generation_event> inference_engine::cancel(uint64_t id) {
  guided_.forget(id);
  pooled_.erase(id);
  std::vector<generation_event> events = scheduler_.cancel(id);
  for (auto& e : events)
    e.weights_version = weights_version_;
  forget_ended(events);
  return events;
}

void inference_engine::forget_ended(const std::vector<generation_event>& events) {
  if (!speculative_.enabled()) return;
  for (const auto& e : events) {
    if (!e.finished) continue;
    draft_probs_.erase(e.id);
    if (drafter_ != nullptr) drafter_->forget(e.id);
  }
}

absl::Status inference_engine::swap_weights(const float* params, uint64_t version) {
  if (!idle()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "weights swap to version ", version, " while ", scheduler_.running(), " requests run and ",
        scheduler_.waiting(), " wait: swap between generations"));
  }
  TROUPE_RETURN_IF_ERROR(decoder_->set_weights(params));
  weights_version_ = version;
  scheduler_.new_weights(version);  // the cached prefixes' keys and values are the old weights'
  return absl::OkStatus();
}

absl::StatusOr<std::vector<generation_event>> inference_engine::step() {
  const std::vector<batch_chunk> batch = scheduler_.schedule();
  last_batch_tokens_ = 0;
  last_batch_sequences_ = static_cast<int>(batch.size());
  if (batch.empty()) return std::vector<generation_event>{};
  std::vector<models::decode_request> requests;
  requests.reserve(batch.size());
  for (const auto& c : batch) {
    const auto& table = scheduler_.block_table(c.id);
    const actor::pooling_type pooling = scheduler_.request(c.id).pooling;
    // A pooling request's hidden states: each of its rows for a mean, else its last.
    const bool pools = pooling != actor::pooling_type::none;
    const int rows = !pools ? 1 + c.drafts : pooling == actor::pooling_type::mean ? c.count : 1;
    requests.push_back({scheduler_.chunk_tokens(c), c.count, c.first_position, table.data(),
                        static_cast<int>(table.size()), rows, pools});
    last_batch_tokens_ += c.count;
  }
  const int vocab = layout_.config().vocab, dim = layout_.config().dim;
  logits_.resize(int64_t{models::logit_rows(requests)} * vocab);
  hidden_.resize(int64_t{models::hidden_rows(requests)} * dim);
  TROUPE_RETURN_IF_ERROR(decoder_->forward(requests, logits_.data(), hidden_.data()));
  scheduler_.computed(batch);
  std::vector<int64_t> first_row(batch.size() + 1, 0), first_hidden(batch.size() + 1, 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    first_row[i + 1] = first_row[i] + (requests[i].hidden ? 0 : requests[i].logit_rows);
    first_hidden[i + 1] = first_hidden[i] + (requests[i].hidden ? requests[i].logit_rows : 0);
  }
  // The draws are independent (each seeded by its request and output index): on the pool.
  draws_.resize(batch.size());
  kernels::cpu::parallel_for(pool_.get(), static_cast<int64_t>(batch.size()), [&](int64_t i) {
    if (batch[i].samples && !requests[i].hidden) {
      draw_tokens(batch[i], logits_.data() + first_row[i] * vocab, draws_[i]);
    }
  });
  std::vector<generation_event> events;
  for (size_t i = 0; i < batch.size(); ++i) {
    const batch_chunk& c = batch[i];
    if (requests[i].hidden) {
      pool_chunk(c, hidden_.data() + first_hidden[i] * dim, events);
      continue;
    }
    if (!c.samples) continue;
    const draw& d = draws_[i];
    const size_t first = events.size();
    if (d.dead_end) {  // no token keeps the output in its grammar: it ends where it is
      for (auto& e : scheduler_.end(c.id))
        events.push_back(std::move(e));
      guided_.forget(c.id);
    } else {
      const size_t k = d.tokens.empty() ? 0 : d.top_tokens.size() / d.tokens.size();
      for (size_t j = 0; j < d.tokens.size(); ++j) {
        for (auto& e : scheduler_.on_token(c.id, d.tokens[j], d.logprobs[j],
                                           std::span(d.top_tokens).subspan(j * k, k),
                                           std::span(d.top_values).subspan(j * k, k)))
          events.push_back(std::move(e));
        if (static_cast<int>(j) < d.accepted) scheduler_.computed_draft(c.id);
      }
      if (guided_.guides(c.id)) guide(c.id, d.tokens.front(), events);
    }
    for (size_t k = first; k < events.size(); ++k)
      events[k].weights_version = weights_version_;
    if (c.drafts > 0) {
      ++speculation_.drafts;
      speculation_.draft_tokens += c.drafts;
      speculation_.accepted_tokens += d.accepted;
    }
  }
  forget_ended(events);
  if (speculative_.enabled()) TROUPE_RETURN_IF_ERROR(propose_drafts(batch));
  return events;
}

void inference_engine::pool_chunk(const batch_chunk& c, const float* rows,
                                  std::vector<generation_event>& events) {
  if (!scheduler_.generating(c.id)) return;  // a static batch's row of an ended sequence
  const int dim = layout_.config().dim;
  const bool mean = scheduler_.request(c.id).pooling == actor::pooling_type::mean;
  if (mean) {
    std::vector<double>& sum = pooled_[c.id];
    if (c.first_position == 0) sum.assign(dim, 0.0);  // from the start (again, if preempted)
    for (int j = 0; j < c.count; ++j) {
      for (int k = 0; k < dim; ++k)
        sum[k] += rows[int64_t{j} * dim + k];
    }
  }
  if (!c.samples) return;
  std::vector<float> embedding(rows, rows + dim);  // the last token's
  if (mean) {
    const std::vector<double>& sum = pooled_[c.id];
    const double tokens = c.first_position + c.count;
    for (int k = 0; k < dim; ++k)
      embedding[k] = static_cast<float>(sum[k] / tokens);
    pooled_.erase(c.id);
  }
  for (auto& e : scheduler_.end(c.id)) {
    e.weights_version = weights_version_;
    if (e.finished) e.embedding = embedding;
    events.push_back(std::move(e));
  }
}

void inference_engine::draw_tokens(const batch_chunk& c, float* logits, draw& d) {
  const int vocab = layout_.config().vocab;
  const generation_request& r = scheduler_.request(c.id);
  const std::span<const int32_t> sequence = scheduler_.tokens(c.id);
  const int32_t* drafts = scheduler_.chunk_tokens(c) + 1;
  const size_t prompt = r.prompt.size();
  const uint64_t output = scheduler_.output_size(c.id);
  const kernels::sampling_params params{r.temperature, r.top_k, r.top_p};
  d.tokens.clear(), d.logprobs.clear(), d.top_tokens.clear(), d.top_values.clear();
  d.accepted = 0;
  d.dead_end = false;
  // The sequence and its drafts: position j's penalties see the output and the drafts before j.
  thread_local std::vector<int32_t> context;
  if (adjusts_logits(r)) {
    context.assign(sequence.begin(), sequence.end());
    context.insert(context.end(), drafts, drafts + c.drafts);
  }
  for (int j = 0; j <= c.drafts; ++j) {
    float* row = logits + int64_t{j} * vocab;
    if (adjusts_logits(r)) {
      adjust_logits(row, vocab, r, std::span(context).first(prompt),
                    std::span(context).subspan(prompt, sequence.size() - prompt + j));
    }
    int32_t token = 0;
    bool accepted = false;
    if (j < c.drafts) {
      const auto probs = draft_probs_.find(c.id);  // a draft model's q; none: prompt lookup's
      const float* q = probs == draft_probs_.end() || probs->second.empty()
                           ? nullptr
                           : probs->second.data() + int64_t{j} * vocab;
      const draft_verdict v =
          verify_draft_token(row, vocab, params, r.seed, output + j, drafts[j], q);
      token = v.token;
      accepted = v.accepted;
    } else {  // no draft here (a plain decode step), or every draft stood: one more token
      d.dead_end = guided_.guides(c.id) && !guided_.mask(c.id, row, r.stop_token_ids);
      token = kernels::cpu::sample_token(row, vocab, params, r.seed, output + j);
    }
    d.tokens.push_back(token);
    d.logprobs.push_back(kernels::cpu::token_log_prob(row, vocab, r.temperature, token));
    if (r.top_logprobs > 0) {
      const size_t at = d.top_tokens.size();
      d.top_tokens.resize(at + r.top_logprobs);
      d.top_values.resize(at + r.top_logprobs);
      kernels::cpu::top_log_probs(row, vocab, r.temperature, r.top_logprobs,
                                  d.top_tokens.data() + at, d.top_values.data() + at);
    }
    if (!accepted) break;
    ++d.accepted;
  }
}

absl::Status inference_engine::propose_drafts(const std::vector<batch_chunk>& batch) {
  std::vector<draft_model_proposer::sequence> going_on;
  for (const batch_chunk& c : batch) {
    if (!c.samples || !scheduler_.generating(c.id) || guided_.guides(c.id)) continue;
    going_on.push_back({c.id, scheduler_.tokens(c.id), &scheduler_.request(c.id)});
  }
  const int k = speculative_.num_speculative_tokens;
  const int limit = speculative_.disable_by_batch_size;
  if (limit > 0 && static_cast<int>(scheduler_.running()) > limit) {
    for (const auto& s : going_on)
      scheduler_.set_drafts(s.id, {});
    return absl::OkStatus();
  }
  if (drafter_ == nullptr) {
    for (const auto& s : going_on) {
      scheduler_.set_drafts(s.id, propose_by_prompt_lookup(s.tokens, speculative_.prompt_lookup_min,
                                                           speculative_.prompt_lookup_max, k));
    }
    return absl::OkStatus();
  }
  TROUPE_ASSIGN_OR_RETURN(auto proposals, drafter_->propose(going_on, k));
  for (size_t i = 0; i < going_on.size(); ++i) {
    draft_probs_[going_on[i].id] = std::move(proposals[i].probs);
    scheduler_.set_drafts(going_on[i].id, std::move(proposals[i].tokens));
  }
  return absl::OkStatus();
}

void inference_engine::guide(uint64_t id, int32_t token, std::vector<generation_event>& events) {
  const bool ended = !events.empty() && events.back().id == id && events.back().finished;
  if (!ended && guided_.advance(id, token)) return;
  if (!ended) {
    for (auto& e : scheduler_.end(id))
      events.push_back(std::move(e));
  }
  guided_.forget(id);
}

}  // namespace troupe::actors
