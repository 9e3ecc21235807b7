// Parsing and checking the OpenAI API's request bodies (and vLLM's /tokenize, /detokenize).

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "actors/json_grammar.hpp"
#include "apps/serve/openai_api.hpp"
#include "apps/serve/openai_json.hpp"

namespace troupe::apps {

using openai_json::dump;
using openai_json::invalid;
using openai_json::json;

namespace {

constexpr int64_t max_choices = 16;  // `n`

// A list of token ids inside the vocabulary (`key`, quoted, names it in errors), or the 400 that
// names the bad one.
std::variant<std::vector<int32_t>, api_error> token_ids(
    const json& list, const std::string& key, const models::model_vocabulary& vocabulary) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= vocabulary.vocab_size()) {
      return invalid(absl::StrCat(key, "[", i, "] must be a token id from 0 to ",
                                  vocabulary.vocab_size() - 1, ", not ", dump(t)));
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

constexpr size_t max_prompts = 64;  // a completion's batch of prompts

// The prompts of a completion (or an embeddings call's inputs: `field` names them): a text or
// token ids, or a batch of either.
std::variant<std::vector<std::vector<int32_t>>, api_error> prompt_list(
    const json& p, const models::model_vocabulary& vocabulary,
    const std::string& field = "prompt") {
  const auto one = [&](const json& x,
                       const std::string& key) -> std::variant<std::vector<int32_t>, api_error> {
    if (x.is_string()) {
      if (x.get_ref<const std::string&>().empty()) return invalid(absl::StrCat(key, " is empty"));
      return vocabulary.encode(x.get<std::string>(), /*add_special_tokens=*/true);
    }
    if (x.is_array() && !x.empty()) return token_ids(x, key, vocabulary);
    if (x.is_array()) return invalid(absl::StrCat(key, " is empty"));
    return invalid(absl::StrCat(key, " must be a string or a list of token ids"));
  };
  std::vector<std::vector<int32_t>> prompts;
  const bool batch = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  if (!batch) {
    if (!p.is_string() && !p.is_array()) {
      return invalid(
          absl::StrCat("'", field, "' must be a string, a list of token ids, or a list of either"));
    }
    auto tokens = one(p, absl::StrCat("'", field, "'"));
    if (auto* e = std::get_if<api_error>(&tokens)) return *e;
    prompts.push_back(std::get<std::vector<int32_t>>(std::move(tokens)));
    return prompts;
  }
  if (p.size() > max_prompts) {
    return invalid(absl::StrCat("'", field, "' holds ", p.size(), " of them; a call takes at most ",
                                max_prompts, ": split the batch"));
  }
  for (size_t i = 0; i < p.size(); ++i) {
    auto tokens = one(p[i], absl::StrCat("'", field, "'[", i, "]"));
    if (auto* e = std::get_if<api_error>(&tokens)) return *e;
    prompts.push_back(std::get<std::vector<int32_t>>(std::move(tokens)));
  }
  return prompts;
}

// The messages as the chat template reads them: each content given as text parts joined into
// one text (vLLM's "string" content format, which the shipped templates expect; other part
// types are refused), and tool calls' arguments as objects.
// An assistant message's tool calls carry their arguments as JSON text (OpenAI's); templates
// read them as objects (vLLM hands them so).
std::variant<json, api_error> template_messages(const json& messages) {
  if (!messages.is_array()) return messages;  // the template's renderer names the problem
  json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    json& m = out[i];
    if (m.is_object() && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (json& c : m["tool_calls"]) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("arguments") || !c["function"]["arguments"].is_string()) {
          continue;
        }
        json arguments = json::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
        if (arguments.is_object()) c["function"]["arguments"] = std::move(arguments);
      }
    }
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    std::string text;
    for (size_t k = 0; k < m["content"].size(); ++k) {
      const json& part = m["content"][k];
      if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        const std::string type =
            part.is_object() && part.contains("type") ? dump(part["type"]) : "none";
        return invalid(absl::StrCat("'messages'[", i, "].content[", k,
                                    "] must be a text part {\"type\": \"text\", \"text\": \"...\"}",
                                    " (type ", type, "); this model reads text only"));
      }
      if (k > 0) text += '\n';
      text += part["text"].get_ref<const std::string&>();
    }
    m["content"] = std::move(text);
  }
  return out;
}

// A JSON body's fields, each checked for type and range; a field that is absent or null gives
// the fallback.
struct body_fields {
  const json& j;

  template <class T>
  using result = std::variant<T, api_error>;

  result<double> number(const char* key, double lo, double hi, double fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number()) return invalid(absl::StrCat("'", key, "' must be a number"));
    const double v = j[key];
    if (v < lo || v > hi) {
      return invalid(absl::StrCat("'", key, "' must be between ", lo, " and ", hi, ", got ", v));
    }
    return v;
  }
  result<int64_t> integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number_integer()) return invalid(absl::StrCat("'", key, "' must be an integer"));
    const int64_t v = j[key];
    if (v < lo || v > hi) {
      return invalid(absl::StrCat("'", key, "' must be between ", lo, " and ", hi, ", got ", v));
    }
    return v;
  }
  result<bool> flag(const char* key, bool fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_boolean()) return invalid(absl::StrCat("'", key, "' must be true or false"));
    return j[key].get<bool>();
  }
  bool given(const char* key) const { return j.contains(key) && !j[key].is_null(); }
};

// Assigns a checked field to `out`, or returns its error from the enclosing function.
#define TROUPE_FIELD(out, expr)                                                     \
  do {                                                                              \
    auto field_ = (expr);                                                           \
    if (auto* e_ = std::get_if<api_error>(&field_)) return *e_;                     \
    out = static_cast<std::remove_reference_t<decltype(out)>>(std::get<0>(field_)); \
  } while (false)

// OpenAI's logit_bias: {"token id": bias in [-100, 100], ...}.
std::variant<std::vector<actor::token_bias>, api_error> logit_bias(
    const json& bias, const models::model_vocabulary& vocabulary) {
  if (!bias.is_object()) return invalid("'logit_bias' must map token ids to biases");
  std::vector<actor::token_bias> out;
  for (const auto& [key, value] : bias.items()) {
    int64_t token = -1;
    if (!absl::SimpleAtoi(key, &token) || token < 0 || token >= vocabulary.vocab_size()) {
      return invalid(absl::StrCat("'logit_bias' key '", key, "' must be a token id from 0 to ",
                                  vocabulary.vocab_size() - 1));
    }
    if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100) {
      return invalid(absl::StrCat("'logit_bias' of token ", token,
                                  " must be a number between -100 and 100, not ", dump(value)));
    }
    out.push_back({static_cast<int32_t>(token), value.get<float>()});
  }
  return out;
}

// The sampling fields of a completion call into its request and flags.
std::optional<api_error> parse_sampling(const body_fields& f, bool chat, const api_limits& limits,
                                        const models::model_vocabulary& vocabulary,
                                        completion_call& call) {
  actor::generation_request& r = call.request;
  const json& j = f.j;
  TROUPE_FIELD(r.temperature, f.number("temperature", 0, 2, 1));
  TROUPE_FIELD(r.top_p, f.number("top_p", 1e-9, 1, 1));
  TROUPE_FIELD(r.top_k, f.integer("top_k", 0, 1 << 20, 0));
  // Chat's max_completion_tokens is max_tokens' newer name.
  const char* max_key =
      chat && f.given("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (chat && f.given("max_completion_tokens") && f.given("max_tokens")) {
    return invalid("give 'max_completion_tokens' or 'max_tokens', not both");
  }
  TROUPE_FIELD(r.max_tokens, f.integer(max_key, 1, 1 << 20, limits.default_max_tokens));
  TROUPE_FIELD(r.min_tokens, f.integer("min_tokens", 0, r.max_tokens, 0));
  call.seeded = f.given("seed");
  TROUPE_FIELD(r.seed, f.integer("seed", INT64_MIN, INT64_MAX, 0));
  TROUPE_FIELD(call.n, f.integer("n", 1, max_choices, 1));
  TROUPE_FIELD(r.frequency_penalty, f.number("frequency_penalty", -2, 2, 0));
  TROUPE_FIELD(r.presence_penalty, f.number("presence_penalty", -2, 2, 0));
  TROUPE_FIELD(r.repetition_penalty, f.number("repetition_penalty", 0, 100, 1));
  if (r.repetition_penalty <= 0) return invalid("'repetition_penalty' must be above 0");
  if (f.given("logit_bias")) TROUPE_FIELD(r.logit_bias, logit_bias(j["logit_bias"], vocabulary));
  // completions: logprobs is the number of alternatives (0..5); chat: a bool, with top_logprobs.
  if (f.given("logprobs")) {
    if (chat) {
      TROUPE_FIELD(call.logprobs, f.flag("logprobs", false));
      TROUPE_FIELD(r.top_logprobs, f.integer("top_logprobs", 0, 20, 0));
    } else {
      TROUPE_FIELD(r.top_logprobs, f.integer("logprobs", 0, 5, 0));
      call.logprobs = true;
    }
  }
  if (chat && f.given("top_logprobs") && !call.logprobs) {
    return invalid("'top_logprobs' needs 'logprobs': true");
  }
  if (f.given("stop")) {
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
  TROUPE_FIELD(r.include_stop_str_in_output, f.flag("include_stop_str_in_output", false));
  if (f.given("stop_token_ids")) {
    if (!j["stop_token_ids"].is_array()) return invalid("'stop_token_ids' must be a list of ids");
    TROUPE_FIELD(r.stop_token_ids, token_ids(j["stop_token_ids"], "'stop_token_ids'", vocabulary));
  }
  bool ignore_eos = false;
  TROUPE_FIELD(ignore_eos, f.flag("ignore_eos", false));
  if (!ignore_eos) {
    r.stop_token_ids.insert(r.stop_token_ids.end(), limits.stop_token_ids.begin(),
                            limits.stop_token_ids.end());
  }
  return std::nullopt;
}

// The streaming fields: stream, and stream_options (only with stream: true).
std::optional<api_error> parse_streaming(const body_fields& f, completion_call& call) {
  TROUPE_FIELD(call.stream, f.flag("stream", false));
  if (!f.given("stream_options")) return std::nullopt;
  const json& options = f.j["stream_options"];
  if (!call.stream) return invalid("'stream_options' is only allowed with 'stream': true");
  if (!options.is_object()) return invalid("'stream_options' must be an object");
  for (const auto& [key, value] : options.items()) {
    if (key != "include_usage") {
      return invalid(absl::StrCat("unknown field 'stream_options.", key,
                                  "'; troupe reads 'stream_options.include_usage'"));
    }
  }
  TROUPE_FIELD(call.include_usage, body_fields{options}.flag("include_usage", false));
  return std::nullopt;
}

// A function's name as OpenAI allows it: [A-Za-z0-9_-]{1,64}.
bool function_name(const json& name) {
  if (!name.is_string()) return false;
  const std::string& s = name.get_ref<const std::string&>();
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// Checks `tools`, OpenAI's function definitions; their names, in order.
std::variant<std::vector<std::string>, api_error> tool_names(const json& tools) {
  const char* shape = R"({"type": "function", "function": {"name": ..., "description": ..., )"
                      R"("parameters": {...}}})";
  if (!tools.is_array() || tools.empty()) {
    return invalid(absl::StrCat("'tools' must be a non-empty list of ", shape));
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const bool function = t.is_object() && t.value("type", json()) == "function" &&
                          t.contains("function") && t["function"].is_object();
    if (!function || t.size() != 2) {
      return invalid(absl::StrCat("'tools'[", i, "] must be ", shape));
    }
    for (const auto& [key, value] : t["function"].items()) {
      if (key != "name" && key != "description" && key != "parameters" && key != "strict") {
        return invalid(absl::StrCat("unknown field 'tools'[", i, "].function.", key));
      }
    }
    if (!function_name(t["function"].value("name", json()))) {
      return invalid(
          absl::StrCat("'tools'[", i, "].function.name must be 1 to 64 letters, digits, _ or -"));
    }
    if (t["function"].contains("parameters") && !t["function"]["parameters"].is_object()) {
      return invalid(absl::StrCat("'tools'[", i, "].function.parameters must be a JSON schema"));
    }
    names.push_back(t["function"]["name"]);
  }
  return names;
}

// Chat's tools, tool_choice and parallel_tool_calls. A named choice guides the reply by the
// function's parameters, "required" by a list of calls of the tools (vLLM's schema: each item a
// {"name": const, "parameters": ...} of one tool); parameters are read in their written order
// from the body's own text.
std::optional<api_error> parse_tools(const body_fields& f, absl::string_view body,
                                     completion_call& call) {
  if (!f.given("tools")) {
    if (f.given("tool_choice")) return invalid("'tool_choice' needs 'tools'");
    return std::nullopt;
  }
  const json& tools = f.j["tools"];
  auto checked = tool_names(tools);
  if (auto* e = std::get_if<api_error>(&checked)) return *e;
  const std::vector<std::string> names = std::get<std::vector<std::string>>(std::move(checked));
  call.tools = tools;
  call.tool_choice = completion_call::tool_use::automatic;
  bool parallel = true;  // "required": more than one call; "auto" returns every call made
  TROUPE_FIELD(parallel, f.flag("parallel_tool_calls", true));
  if (!f.given("tool_choice")) return std::nullopt;
  const json& choice = f.j["tool_choice"];
  if (choice == "none") {
    call.tool_choice = completion_call::tool_use::none;
    return std::nullopt;
  }
  if (choice == "auto") return std::nullopt;
  const auto ordered = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
  const auto parameters_of = [&](size_t i) {
    const auto& function = ordered["tools"][i]["function"];
    return function.contains("parameters") ? function["parameters"]
                                           : nlohmann::ordered_json{{"type", "object"}};
  };
  if (choice == "required") {  // guided as a list of calls, each a tool's name and parameters
    if (!call.request.json_schema.empty()) {
      return invalid("give 'response_format' or tool_choice \"required\", not both");
    }
    nlohmann::ordered_json alternatives = nlohmann::ordered_json::array();
    for (size_t i = 0; i < names.size(); ++i) {
      alternatives.push_back(
          {{"type", "object"},
           {"properties", {{"name", {{"const", names[i]}}}, {"parameters", parameters_of(i)}}},
           {"required", {"name", "parameters"}}});
    }
    nlohmann::ordered_json schema = {
        {"type", "array"}, {"minItems", 1u}, {"items", {{"anyOf", std::move(alternatives)}}}};
    if (!parallel) schema["maxItems"] = 1u;
    if (auto grammar = actors::json_grammar::compile(schema); !grammar.ok()) {
      return invalid(
          absl::StrCat("'tools' for tool_choice \"required\": ", grammar.status().message()));
    }
    call.tool_choice = completion_call::tool_use::required;
    call.request.json_schema = schema.dump();
    return std::nullopt;
  }
  const bool named = choice.is_object() && choice.value("type", json()) == "function" &&
                     choice.contains("function") && choice["function"].is_object() &&
                     choice["function"].contains("name");
  if (!named) {
    return invalid(R"('tool_choice' must be "none", "auto", "required" or {"type": "function", )"
                   R"("function": {"name": ...}})");
  }
  const json& name = choice["function"]["name"];
  const auto at = std::find(names.begin(), names.end(), name);
  if (at == names.end()) {
    return invalid(absl::StrCat("'tool_choice' names ", dump(name), ", which is not in 'tools'"));
  }
  if (!call.request.json_schema.empty()) {
    return invalid("give 'response_format' or a named 'tool_choice', not both");
  }
  call.tool_choice = completion_call::tool_use::named;
  call.named_tool = *at;
  const nlohmann::ordered_json parameters = parameters_of(at - names.begin());
  if (auto grammar = actors::json_grammar::compile(parameters); !grammar.ok()) {
    return invalid(absl::StrCat("'tools'[", at - names.begin(),
                                "].function.parameters: ", grammar.status().message()));
  }
  call.request.json_schema = parameters.dump();
  return std::nullopt;
}

// OpenAI's response_format: "text", "json_object" (any JSON object) or "json_schema" (a value of
// the schema, its properties in their written order, so read from the body's own text).
std::optional<api_error> parse_response_format(const body_fields& f, absl::string_view body,
                                               completion_call& call) {
  if (!f.given("response_format")) return std::nullopt;
  const json& format = f.j["response_format"];
  const std::string type =
      format.is_object() && format.contains("type") && format["type"].is_string()
          ? format["type"].get<std::string>()
          : "";
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    call.request.json_schema = R"({"type": "object"})";
    return std::nullopt;
  }
  if (type != "json_schema") {
    return invalid(R"('response_format' must be {"type": "text"}, {"type": "json_object"} or )"
                   R"({"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}})");
  }
  const auto ordered = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
  const auto& spec = ordered["response_format"];
  if (!spec.contains("json_schema") || !spec["json_schema"].is_object() ||
      !spec["json_schema"].contains("schema")) {
    return invalid("'response_format.json_schema.schema' is missing");
  }
  const auto& schema = spec["json_schema"]["schema"];
  if (auto grammar = actors::json_grammar::compile(schema); !grammar.ok()) {
    return invalid(
        absl::StrCat("'response_format.json_schema.schema': ", grammar.status().message()));
  }
  call.request.json_schema = schema.dump();  // checked shallow enough to write
  return std::nullopt;
}

#undef TROUPE_FIELD

// Fields of OpenAI's completion and chat APIs that this server does not take, and what to do
// instead: refused by name rather than as unknown, which would suggest a typo.
const char* unsupported_field(const std::string& key) {
  static const std::map<std::string, const char*> fields = {
      {"best_of", "ask for n choices and pick among them"},
      {"suffix",
       "insertion needs a fill-in-the-middle model; send the text before it as the prompt"},
      {"functions", "OpenAI's deprecated function calling: send tools"},
      {"function_call", "OpenAI's deprecated function calling: send tool_choice"},
      {"prediction",
       "Predicted Outputs: the server's own speculative decoding "
       "(serve.engine.speculative_config) finds the text a reply repeats from its prompt"},
      {"modalities", "the server's models write text only"},
      {"audio", "the server's models write text only"},
      {"store", "the server keeps no completions"},
      {"metadata", "the server keeps no completions"},
      {"service_tier", "the server has one tier"},
      {"reasoning_effort", "the served model's chat template decides how it reasons"},
      {"web_search_options", "the server has no search tool; pass one as a tool"}};
  const auto it = fields.find(key);
  return it == fields.end() ? nullptr : it->second;
}

}  // namespace

int completion_call::prompt_tokens() const {
  int total = 0;
  for (const auto& p : prompts)
    total += static_cast<int>(p.size());
  return total;
}

std::variant<completion_call, api_error> parse_completion(
    absl::string_view body, const api_limits& limits, bool chat,
    const models::model_vocabulary& vocabulary) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return invalid("the body is not valid JSON");
  if (!j.is_object()) return invalid("the body must be a JSON object");
  static const std::set<std::string> common = {"model", "max_tokens", "temperature", "top_p",
                                               "top_k", "seed", "stop", "stream", "stream_options",
                                               "n", "user", "logprobs", "frequency_penalty",
                                               "presence_penalty", "logit_bias", "response_format",
                                               // vLLM's extra sampling parameters
                                               "include_stop_str_in_output", "stop_token_ids",
                                               "ignore_eos", "min_tokens", "repetition_penalty"};
  static const std::set<std::string> completions_only = {"prompt", "echo"};
  static const std::set<std::string> chat_only = {
      "messages",    "top_logprobs",        "tools",
      "tool_choice", "parallel_tool_calls", "max_completion_tokens"};
  for (const auto& [key, value] : j.items()) {
    if (common.count(key) == 0 && (chat ? chat_only : completions_only).count(key) == 0) {
      if (const char* instead = unsupported_field(key)) {
        return invalid(absl::StrCat("'", key, "' is not supported: ", instead));
      }
      return invalid(absl::StrCat("unknown field '", key, "'"));
    }
  }
  completion_call call;
  call.chat = chat;
  if (!j.contains("model") || !j["model"].is_string()) return invalid("'model' must be a string");
  if (j["model"] != limits.model) {
    return api_error{404, "invalid_request_error", "model_not_found",
                     absl::StrCat("the model '", j["model"].get<std::string>(),
                                  "' does not exist; this server serves '", limits.model, "'")};
  }
  const body_fields fields{j};
  if (auto e = parse_response_format(fields, body, call)) return *e;
  if (chat) {
    if (auto e = parse_tools(fields, body, call)) return *e;
    auto messages = template_messages(j.value("messages", json()));
    if (auto* e = std::get_if<api_error>(&messages)) return *e;
    absl::StatusOr<std::string> text = vocabulary.render_chat(
        std::get<json>(messages), /*add_generation_prompt=*/true, call.tools);
    if (!text.ok()) return invalid(std::string(text.status().message()));
    if (text->empty()) return invalid("the prompt is empty");
    // A chat template writes the special tokens it wants (vLLM adds none for chat).
    call.prompts.push_back(vocabulary.encode(*text, /*add_special_tokens=*/false));
  } else {
    auto prompts = prompt_list(j.value("prompt", json()), vocabulary);
    if (auto* e = std::get_if<api_error>(&prompts)) return *e;
    call.prompts = std::get<std::vector<std::vector<int32_t>>>(std::move(prompts));
  }
  for (size_t i = 0; i < call.prompts.size(); ++i) {
    if (static_cast<int>(call.prompts[i].size()) >= limits.ctx) {
      return api_error{413, "invalid_request_error", "context_length_exceeded",
                       absl::StrCat("this model's context is ", limits.ctx, " tokens; the prompt",
                                    call.prompts.size() > 1 ? absl::StrCat(" ", i) : "", " has ",
                                    call.prompts[i].size(), ", and one must be left to generate")};
    }
  }
  if (auto e = parse_sampling(fields, chat, limits, vocabulary, call)) return *e;
  if (auto e = parse_streaming(fields, call)) return *e;
  if (!chat) {
    auto echo = fields.flag("echo", false);
    if (auto* e = std::get_if<api_error>(&echo)) return *e;
    call.echo = std::get<bool>(echo);
    if (call.echo && call.logprobs) {
      return invalid(
          "'echo' with 'logprobs' is not supported (the prompt's log-probs): ask for "
          "one of them");
    }
  }
  if (call.choices() > max_choices * 4) {
    return invalid(absl::StrCat("'n' × the prompts is ", call.choices(),
                                "; a call generates at most ", max_choices * 4, " choices"));
  }
  return call;
}

std::variant<std::string, api_error> tokenize(absl::string_view body, const api_limits& limits,
                                              const models::model_vocabulary& vocabulary) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid("the body must be a JSON object");
  const bool chat = j.contains("messages");
  static const std::set<std::string> known = {
      "model", "prompt", "messages", "add_special_tokens", "add_generation_prompt", "tools"};
  for (const auto& [key, value] : j.items()) {
    if (known.count(key) == 0) return invalid(absl::StrCat("unknown field '", key, "'"));
  }
  if (j.contains("model") && j["model"] != limits.model) {
    return api_error{404, "invalid_request_error", "model_not_found",
                     absl::StrCat("the model ", dump(j["model"]),
                                  " does not exist; this server serves '", limits.model, "'")};
  }
  const body_fields fields{j};
  // vLLM's defaults: special tokens for a prompt; for messages the template writes them.
  auto special = fields.flag("add_special_tokens", !chat);
  auto generation = fields.flag("add_generation_prompt", true);
  for (auto* v : {&special, &generation}) {
    if (auto* e = std::get_if<api_error>(v)) return *e;
  }
  std::string text;
  if (j.contains("tools")) {  // rendered by the chat template, as a chat completion's
    if (!chat) return invalid("'tools' goes with 'messages'");
    auto names = tool_names(j["tools"]);
    if (auto* e = std::get_if<api_error>(&names)) return *e;
  }
  if (chat) {
    auto messages = template_messages(j["messages"]);
    if (auto* e = std::get_if<api_error>(&messages)) return *e;
    auto rendered = vocabulary.render_chat(std::get<json>(messages), std::get<bool>(generation),
                                           j.value("tools", json()));
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

std::variant<embedding_call, api_error> parse_embeddings(
    absl::string_view body, const api_limits& limits, const models::model_vocabulary& vocabulary) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return invalid("the body is not valid JSON");
  if (!j.is_object()) return invalid("the body must be a JSON object");
  static const std::set<std::string> known = {"model", "input", "encoding_format", "user",
                                              "dimensions"};
  for (const auto& [key, value] : j.items()) {
    if (known.count(key) == 0) return invalid(absl::StrCat("unknown field '", key, "'"));
  }
  if (!j.contains("model") || !j["model"].is_string()) return invalid("'model' must be a string");
  if (j["model"] != limits.model) {
    return api_error{404, "invalid_request_error", "model_not_found",
                     absl::StrCat("the model '", j["model"].get<std::string>(),
                                  "' does not exist; this server serves '", limits.model, "'")};
  }
  if (j.contains("dimensions")) {
    return invalid(
        "'dimensions' is not supported: the embeddings have the model's width; leave it out");
  }
  embedding_call call;
  if (j.contains("encoding_format")) {
    const json& format = j["encoding_format"];
    if (format != "float" && format != "base64") {
      return invalid(
          absl::StrCat("'encoding_format' must be \"float\" or \"base64\", not ", dump(format)));
    }
    call.base64 = format == "base64";
  }
  if (!j.contains("input")) {
    return invalid("'input' is required: a text, a list of token ids, or a list of either");
  }
  auto inputs = prompt_list(j["input"], vocabulary, "input");
  if (auto* e = std::get_if<api_error>(&inputs)) return *e;
  call.inputs = std::get<std::vector<std::vector<int32_t>>>(std::move(inputs));
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (static_cast<int>(call.inputs[i].size()) >= limits.ctx) {
      return api_error{413, "invalid_request_error", "context_length_exceeded",
                       absl::StrCat("this model's context is ", limits.ctx, " tokens; input ", i,
                                    " has ", call.inputs[i].size(), ": shorten it")};
    }
  }
  return call;
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
  auto tokens = token_ids(j["tokens"], "'tokens'", vocabulary);
  if (auto* e = std::get_if<api_error>(&tokens)) return *e;
  auto text = vocabulary.decode(std::get<std::vector<int32_t>>(tokens));
  if (!text.ok()) return invalid(std::string(text.status().message()));
  return dump({{"prompt", *text}});
}

}  // namespace troupe::apps
