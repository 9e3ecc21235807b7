#include "apps/serve/openai_api.hpp"

#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe::apps {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);  // stray bytes become U+FFFD
}

constexpr int64_t max_choices = 16;  // `n`

api_error invalid(std::string message, std::string code = "") {
  return {400, "invalid_request_error", std::move(code), std::move(message)};
}

const char* finish_name(actor::finish_reason r) {
  return r == actor::finish_reason::stop ? "stop" : "length";
}

}  // namespace

std::string error_body(const api_error& e) {
  return dump({{"error",
                {{"message", e.message},
                 {"type", e.type},
                 {"param", nullptr},
                 {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}});
}

namespace {

// `key` of j: a list of token ids inside the vocabulary, or the 400 that names the bad one.
std::variant<std::vector<int32_t>, api_error> token_ids(
    const json& list, const char* key, const models::model_vocabulary& vocabulary) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= vocabulary.vocab_size()) {
      return invalid(absl::StrCat("'", key, "'[", i, "] must be a token id from 0 to ",
                                  vocabulary.vocab_size() - 1, ", not ", dump(t)));
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

// The prompt of a completion: a text, a list of one text, token ids, or a list of one such list.
std::variant<std::vector<int32_t>, api_error> prompt_tokens(
    const json& p, const models::model_vocabulary& vocabulary) {
  const json& one =
      p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array()) ? p[0] : p;
  if (one.is_string()) {
    if (one.get_ref<const std::string&>().empty()) return invalid("the prompt is empty");
    return vocabulary.encode(one.get<std::string>(), /*add_special_tokens=*/true);
  }
  if (one.is_array() && !one.empty()) return token_ids(one, "prompt", vocabulary);
  if (one.is_array()) return invalid("the prompt is empty");
  return invalid("'prompt' must be a string, a list of token ids, or a list of one of them");
}

}  // namespace

std::variant<completion_call, api_error> parse_completion(
    absl::string_view body, const api_limits& limits, bool chat,
    const models::model_vocabulary& vocabulary) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return invalid("the body is not valid JSON");
  if (!j.is_object()) return invalid("the body must be a JSON object");
  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "n", "user",
      "logprobs",
      // vLLM's extra sampling parameters
      "include_stop_str_in_output", "stop_token_ids", "ignore_eos"};
  for (const auto& [key, value] : j.items()) {
    if (common.count(key) == 0 && key != (chat ? "messages" : "prompt") &&
        !(chat && key == "top_logprobs")) {
      return invalid(absl::StrCat("unknown field '", key, "'"));
    }
  }
  completion_call call;
  call.chat = chat;
  auto& r = call.request;
  if (!j.contains("model") || !j["model"].is_string()) return invalid("'model' must be a string");
  if (j["model"] != limits.model) {
    return api_error{404, "invalid_request_error", "model_not_found",
                     absl::StrCat("the model '", j["model"].get<std::string>(),
                                  "' does not exist; this server serves '", limits.model, "'")};
  }
  if (chat) {
    absl::StatusOr<std::string> text =
        vocabulary.render_chat(j.value("messages", json()), /*add_generation_prompt=*/true);
    if (!text.ok()) return invalid(std::string(text.status().message()));
    if (text->empty()) return invalid("the prompt is empty");
    // A chat template writes the special tokens it wants (vLLM adds none for chat).
    r.prompt = vocabulary.encode(*text, /*add_special_tokens=*/false);
  } else {
    auto tokens = prompt_tokens(j.value("prompt", json()), vocabulary);
    if (auto* e = std::get_if<api_error>(&tokens)) return *e;
    r.prompt = std::get<std::vector<int32_t>>(std::move(tokens));
  }
  if (static_cast<int>(r.prompt.size()) >= limits.ctx) {
    return api_error{
        413, "invalid_request_error", "context_length_exceeded",
        absl::StrCat("this model's context is ", limits.ctx, " tokens; the prompt has ",
                     r.prompt.size(), ", and one must be left to generate")};
  }
  const auto number = [&](const char* key, double lo, double hi,
                          double fallback) -> std::variant<double, api_error> {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number()) return invalid(absl::StrCat("'", key, "' must be a number"));
    const double v = j[key];
    if (v < lo || v > hi) {
      return invalid(absl::StrCat("'", key, "' must be between ", lo, " and ", hi, ", got ", v));
    }
    return v;
  };
  const auto integer = [&](const char* key, int64_t lo, int64_t hi,
                           int64_t fallback) -> std::variant<int64_t, api_error> {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number_integer()) return invalid(absl::StrCat("'", key, "' must be an integer"));
    const int64_t v = j[key];
    if (v < lo || v > hi) {
      return invalid(absl::StrCat("'", key, "' must be between ", lo, " and ", hi, ", got ", v));
    }
    return v;
  };
  auto temperature = number("temperature", 0, 2, 1);
  auto top_p = number("top_p", 1e-9, 1, 1);
  auto top_k = integer("top_k", 0, 1 << 20, 0);
  auto max_tokens = integer("max_tokens", 1, 1 << 20, limits.default_max_tokens);
  auto seed = integer("seed", INT64_MIN, INT64_MAX, 0);
  auto n = integer("n", 1, max_choices, 1);
  for (auto* v : {&temperature, &top_p}) {
    if (auto* e = std::get_if<api_error>(v)) return *e;
  }
  for (auto* v : {&top_k, &max_tokens, &seed, &n}) {
    if (auto* e = std::get_if<api_error>(v)) return *e;
  }
  r.temperature = static_cast<float>(std::get<double>(temperature));
  r.top_p = static_cast<float>(std::get<double>(top_p));
  r.top_k = static_cast<int32_t>(std::get<int64_t>(top_k));
  r.max_tokens = static_cast<int32_t>(std::get<int64_t>(max_tokens));
  r.seed = static_cast<uint64_t>(std::get<int64_t>(seed));
  call.n = static_cast<int>(std::get<int64_t>(n));
  // completions: logprobs is the number of alternatives (0..5); chat: a bool, with top_logprobs.
  if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    if (chat) {
      if (!j["logprobs"].is_boolean()) return invalid("'logprobs' must be true or false");
      call.logprobs = j["logprobs"];
      auto top = integer("top_logprobs", 0, 20, 0);
      if (auto* e = std::get_if<api_error>(&top)) return *e;
      r.top_logprobs = static_cast<int32_t>(std::get<int64_t>(top));
    } else {
      auto top = integer("logprobs", 0, 5, 0);
      if (auto* e = std::get_if<api_error>(&top)) return *e;
      call.logprobs = true;
      r.top_logprobs = static_cast<int32_t>(std::get<int64_t>(top));
    }
  }
  if (chat && r.top_logprobs == 0 && j.contains("top_logprobs") && !j["top_logprobs"].is_null() &&
      !call.logprobs) {
    return invalid("'top_logprobs' needs 'logprobs': true");
  }
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& stop = j["stop"];
    if (stop.is_string()) {
      r.stop = {stop.get<std::string>()};
    } else if (stop.is_array() && stop.size() <= 4 &&
               std::all_of(stop.begin(), stop.end(), [](const json& s) { return s.is_string(); })) {
      for (const auto& s : stop)
        r.stop.push_back(s);
    } else {
      return invalid("'stop' must be a string or a list of at most 4 strings");
    }
  }
  if (j.contains("include_stop_str_in_output") && !j["include_stop_str_in_output"].is_null()) {
    if (!j["include_stop_str_in_output"].is_boolean()) {
      return invalid("'include_stop_str_in_output' must be true or false");
    }
    r.include_stop_str_in_output = j["include_stop_str_in_output"];
  }
  if (j.contains("stop_token_ids") && !j["stop_token_ids"].is_null()) {
    if (!j["stop_token_ids"].is_array()) return invalid("'stop_token_ids' must be a list of ids");
    auto ids = token_ids(j["stop_token_ids"], "stop_token_ids", vocabulary);
    if (auto* e = std::get_if<api_error>(&ids)) return *e;
    r.stop_token_ids = std::get<std::vector<int32_t>>(std::move(ids));
  }
  bool ignore_eos = false;
  if (j.contains("ignore_eos") && !j["ignore_eos"].is_null()) {
    if (!j["ignore_eos"].is_boolean()) return invalid("'ignore_eos' must be true or false");
    ignore_eos = j["ignore_eos"];
  }
  if (!ignore_eos) {
    r.stop_token_ids.insert(r.stop_token_ids.end(), limits.stop_token_ids.begin(),
                            limits.stop_token_ids.end());
  }
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) return invalid("'stream' must be true or false");
    call.stream = j["stream"];
  }
  return call;
}

std::string cut_at_stop(std::string text, const completion_call& call,
                        actor::finish_reason reason) {
  if (reason != actor::finish_reason::stop || call.request.include_stop_str_in_output) {
    return text;
  }
  size_t at = text.size();
  for (const auto& stop : call.request.stop) {
    if (!stop.empty()) at = std::min(at, text.find(stop));
  }
  text.resize(at);
  return text;
}

void choice_output::add(const actor::generation_event& e) {
  tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
  logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  top_tokens.insert(top_tokens.end(), e.top_tokens.begin(), e.top_tokens.end());
  top_values.insert(top_values.end(), e.top_values.begin(), e.top_values.end());
  if (e.finished) reason = e.reason;
}

namespace {

// OpenAI's logprobs object of `c`'s tokens, whose text starts at byte `offset` of the choice.
json logprobs_json(const choice_output& c, bool chat, size_t offset,
                   const models::model_vocabulary& vocabulary) {
  const size_t n = std::min(c.tokens.size(), c.logprobs.size());
  const size_t k = n == 0 ? 0 : c.top_tokens.size() / c.tokens.size();
  const auto token_text = [&](int32_t t) { return vocabulary.token_text(t); };
  if (chat) {
    json content = json::array();
    for (size_t i = 0; i < n; ++i) {
      json top = json::array();
      for (size_t a = 0; a < k; ++a) {
        const int32_t t = c.top_tokens[i * k + a];
        top.push_back({{"token", token_text(t)},
                       {"logprob", c.top_values[i * k + a]},
                       {"bytes", vocabulary.token_bytes(t)}});
      }
      content.push_back({{"token", token_text(c.tokens[i])},
                         {"logprob", c.logprobs[i]},
                         {"bytes", vocabulary.token_bytes(c.tokens[i])},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (size_t i = 0; i < n; ++i) {
    tokens.push_back(token_text(c.tokens[i]));
    values.push_back(c.logprobs[i]);
    offsets.push_back(offset + i);
    json top = json::object();
    for (size_t a = 0; a < k; ++a)
      top[token_text(c.top_tokens[i * k + a])] = c.top_values[i * k + a];
    tops.push_back(std::move(top));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", k > 0 ? std::move(tops) : json(nullptr)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace

std::string completion_body(const std::string& id, const api_limits& limits, int64_t created,
                            const completion_call& call, const std::vector<choice_output>& choices,
                            int prompt_tokens, const models::model_vocabulary& vocabulary) {
  json out = json::array();
  int completion_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const choice_output& c = choices[i];
    completion_tokens += static_cast<int>(c.tokens.size());
    // The engine's tokens are the model's own: they always decode.
    const std::string text =
        cut_at_stop(vocabulary.decode(c.tokens).value_or(std::string()), call, c.reason);
    json choice = {{"index", i}, {"finish_reason", finish_name(c.reason)}};
    if (call.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    choice["logprobs"] = call.logprobs ? logprobs_json(c, call.chat, 0, vocabulary) : json(nullptr);
    out.push_back(std::move(choice));
  }
  return dump({{"id", id},
               {"object", call.chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", limits.model},
               {"choices", std::move(out)},
               {"usage",
                {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens}}}});
}

std::string stream_chunk(const std::string& id, const api_limits& limits, int64_t created,
                         const completion_call& call, int index, const std::string& text,
                         const choice_output& piece, const actor::finish_reason* reason,
                         const models::model_vocabulary& vocabulary) {
  json choice = {{"index", index},
                 {"finish_reason", reason ? json(finish_name(*reason)) : json(nullptr)}};
  if (call.chat) {
    choice["delta"] = reason && text.empty() ? json::object() : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] =
      call.logprobs ? logprobs_json(piece, call.chat, 0, vocabulary) : json(nullptr);
  return "data: " +
         dump({{"id", id},
               {"object", call.chat ? "chat.completion.chunk" : "text_completion"},
               {"created", created},
               {"model", limits.model},
               {"choices", json::array({choice})}}) +
         "\n\n";
}

std::variant<std::string, api_error> tokenize(absl::string_view body, const api_limits& limits,
                                              const models::model_vocabulary& vocabulary) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid("the body must be a JSON object");
  const bool chat = j.contains("messages");
  static const std::set<std::string> known = {"model", "prompt", "messages", "add_special_tokens",
                                              "add_generation_prompt"};
  for (const auto& [key, value] : j.items()) {
    if (known.count(key) == 0) return invalid(absl::StrCat("unknown field '", key, "'"));
  }
  if (j.contains("model") && j["model"] != limits.model) {
    return api_error{404, "invalid_request_error", "model_not_found",
                     absl::StrCat("the model ", dump(j["model"]),
                                  " does not exist; this server serves '", limits.model, "'")};
  }
  const auto flag = [&](const char* key, bool fallback) -> std::variant<bool, api_error> {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean()) return invalid(absl::StrCat("'", key, "' must be true or false"));
    return j[key].get<bool>();
  };
  // vLLM's defaults: special tokens for a prompt; for messages the template writes them.
  auto special = flag("add_special_tokens", !chat);
  auto generation = flag("add_generation_prompt", true);
  for (auto* v : {&special, &generation}) {
    if (auto* e = std::get_if<api_error>(v)) return *e;
  }
  std::string text;
  if (chat) {
    auto rendered = vocabulary.render_chat(j["messages"], std::get<bool>(generation));
    if (!rendered.ok()) return invalid(std::string(rendered.status().message()));
    text = std::move(*rendered);
  } else {
    if (!j.contains("prompt") || !j["prompt"].is_string()) {
      return invalid("'prompt' (a string) or 'messages' is required");
    }
    text = j["prompt"].get<std::string>();
  }
  const std::vector<int32_t> tokens = vocabulary.encode(text, std::get<bool>(special));
  return dump({{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", limits.ctx}});
}

std::variant<std::string, api_error> detokenize(absl::string_view body, const api_limits& limits,
                                                const models::model_vocabulary& vocabulary) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid("the body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "model" && key != "tokens")
      return invalid(absl::StrCat("unknown field '", key, "'"));
  }
  if (j.contains("model") && j["model"] != limits.model) {
    return api_error{404, "invalid_request_error", "model_not_found",
                     absl::StrCat("the model ", dump(j["model"]),
                                  " does not exist; this server serves '", limits.model, "'")};
  }
  if (!j.contains("tokens") || !j["tokens"].is_array()) {
    return invalid("'tokens' must be a list of token ids");
  }
  auto tokens = token_ids(j["tokens"], "tokens", vocabulary);
  if (auto* e = std::get_if<api_error>(&tokens)) return *e;
  auto text = vocabulary.decode(std::get<std::vector<int32_t>>(tokens));
  if (!text.ok()) return invalid(std::string(text.status().message()));
  return dump({{"prompt", *text}});
}

std::string stream_done() {
  return "data: [DONE]\n\n";
}

}  // namespace troupe::apps
