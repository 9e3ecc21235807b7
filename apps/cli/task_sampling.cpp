#include "apps/cli/task_sampling.hpp"

#include <map>
#include <thread>

#include "models/decoder/decoder_source.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::cli {

absl::StatusOr<task_policy> load_task_policy(const data_task& task, const std::string& policy,
                                             const std::string& setting) {
  task_policy out;
  out.layout =
      std::make_unique<models::decoder_layout>(task.model, models::layer_range::all(task.model));
  TROUPE_ASSIGN_OR_RETURN(out.params, models::read_decoder_weights(*out.layout, policy, setting));
  actors::inference_engine::options o;
  o.scheduler.ctx = task.model.ctx;
  o.scheduler.max_sequences = 64;
  o.scheduler.max_batch_tokens = 1024;
  o.kv_blocks = 64 * ((task.model.ctx + o.block_size - 1) / o.block_size);
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  TROUPE_ASSIGN_OR_RETURN(out.engine,
                          actors::inference_engine::create(*out.layout, out.params.data(), o));
  return out;
}

absl::StatusOr<std::vector<std::vector<task_response>>> sample_responses(
    actors::inference_engine& engine, const tasks::text_task& task, const tasks::task_codec& codec,
    const std::vector<std::string>& prompts, int samples, double temperature, uint64_t seed) {
  std::map<uint64_t, std::pair<std::vector<int32_t>, bool>> generated;  // by id: tokens, ended
  const auto id_of = [&](size_t p, int k) { return p * static_cast<uint64_t>(samples) + k; };
  const int max_tokens = codec.max_response_tokens(task.max_response_bytes());  // renders a reply
  for (size_t p = 0; p < prompts.size(); ++p) {
    TROUPE_ASSIGN_OR_RETURN(const std::vector<int32_t> prompt, codec.prompt_tokens(prompts[p]));
    for (int k = 0; k < samples; ++k) {
      actor::generation_request r;
      r.id = id_of(p, k);
      r.prompt = prompt;
      r.temperature = static_cast<float>(temperature);
      r.seed = seed * 0x9e3779b97f4a7c15ull + r.id;  // a sampling stream per response
      r.max_tokens = max_tokens;
      codec.set_stop(r);
      r.stream = false;
      TROUPE_RETURN_IF_ERROR(engine.add(std::move(r)));
    }
  }
  while (!engine.idle()) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<actor::generation_event> events, engine.step());
    for (const auto& e : events) {
      auto& [tokens, ended] = generated[e.id];
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) ended = e.reason == actor::finish_reason::stop;
    }
  }
  std::vector<std::vector<task_response>> out(prompts.size(), std::vector<task_response>(samples));
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int k = 0; k < samples; ++k) {
      const auto& [tokens, ended] = generated[id_of(p, k)];
      out[p][k] = {codec.example_text(tokens, ended),
                   task.reward(prompts[p], codec.response_text(tokens, ended), ended)};
    }
  }
  return out;
}

bool is_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace troupe::cli
