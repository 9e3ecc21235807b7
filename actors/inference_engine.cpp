#include "actors/inference_engine.hpp"

#include "absl/strings/str_cat.h"
#include "actors/logits_processor.hpp"
#include "kernels/sampling.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<inference_engine>> inference_engine::create(
    const models::gpt_layout& layout, const float* params, options o) {
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
      auto decoder, models::make_gpt_decoder(layout, params, o.scheduler.max_batch_tokens,
                                             o.kv_blocks, o.block_size, o.device, pool.get(),
                                             {o.quantization, o.prequantized, o.kv_cache_dtype}));
  return std::unique_ptr<inference_engine>(
      new inference_engine(layout, std::move(pool), std::move(decoder), o));
}

inference_engine::inference_engine(const models::gpt_layout& layout,
                                   std::unique_ptr<kernels::cpu::thread_pool> pool,
                                   std::unique_ptr<models::gpt_decoder> decoder, options o)
    : layout_(layout),
      pool_(std::move(pool)),
      decoder_(std::move(decoder)),
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
  std::vector<generation_event> events = scheduler_.cancel(id);
  for (auto& e : events)
    e.weights_version = weights_version_;
  return events;
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
    requests.push_back({scheduler_.tokens(c.id).data() + c.first_position, c.count,
                        c.first_position, table.data(), static_cast<int>(table.size())});
    last_batch_tokens_ += c.count;
  }
  const int vocab = layout_.config().vocab;
  logits_.resize(batch.size() * vocab);
  TROUPE_RETURN_IF_ERROR(decoder_->forward(requests, logits_.data()));
  scheduler_.computed(batch);
  // The draws are independent (each seeded by its request and output index): on the pool.
  draws_.resize(batch.size());
  kernels::cpu::parallel_for(pool_.get(), static_cast<int64_t>(batch.size()), [&](int64_t i) {
    const batch_chunk& c = batch[i];
    if (!c.samples) return;
    const generation_request& r = scheduler_.request(c.id);
    float* logits = logits_.data() + i * vocab;
    if (adjusts_logits(r)) {
      const std::span<const int32_t> sequence = scheduler_.tokens(c.id);
      const size_t prompt = r.prompt.size();
      adjust_logits(logits, vocab, r, sequence.first(prompt), sequence.subspan(prompt));
    }
    draw& d = draws_[i];
    d.dead_end = guided_.guides(c.id) && !guided_.mask(c.id, logits, r.stop_token_ids);
    d.token = kernels::cpu::sample_token(logits, vocab, {r.temperature, r.top_k, r.top_p}, r.seed,
                                         scheduler_.output_size(c.id));
    d.logprob = kernels::cpu::token_log_prob(logits, vocab, r.temperature, d.token);
    d.top_tokens.resize(r.top_logprobs);
    d.top_values.resize(r.top_logprobs);
    if (r.top_logprobs > 0) {
      kernels::cpu::top_log_probs(logits, vocab, r.temperature, r.top_logprobs, d.top_tokens.data(),
                                  d.top_values.data());
    }
  });
  std::vector<generation_event> events;
  for (size_t i = 0; i < batch.size(); ++i) {
    const batch_chunk& c = batch[i];
    if (!c.samples) continue;
    const draw& d = draws_[i];
    const size_t first = events.size();
    if (d.dead_end) {  // no token keeps the output in its grammar: it ends where it is
      for (auto& e : scheduler_.end(c.id))
        events.push_back(std::move(e));
      guided_.forget(c.id);
    } else {
      for (auto& e : scheduler_.on_token(c.id, d.token, d.logprob, d.top_tokens, d.top_values))
        events.push_back(std::move(e));
      if (guided_.guides(c.id)) guide(c.id, d.token, events);
    }
    for (size_t k = first; k < events.size(); ++k)
      events[k].weights_version = weights_version_;
  }
  return events;
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
