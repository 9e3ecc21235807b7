// Reading tokenizer.json (HF tokenizers' serialization) into tokenizer_parts. Every component
// type troupe does not implement is refused by its key path, its value and what is supported,
// rather than encoded differently from HF.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/tokenizer/tokenizer.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"

namespace troupe::tokenizers {

namespace {

using nlohmann::json;

// The file and the key path of the value being read, for messages.
struct place {
  absl::string_view file;
  std::string path;

  [[nodiscard]] place operator/(absl::string_view key) const {
    return {file, path.empty() ? std::string(key) : absl::StrCat(path, ".", key)};
  }
  [[nodiscard]] place operator[](size_t i) const { return {file, absl::StrCat(path, "[", i, "]")}; }
  [[nodiscard]] absl::Status error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", path, ": ", what));
  }
};

absl::Status unsupported(const place& at, absl::string_view type,
                         std::initializer_list<absl::string_view> supported) {
  return (at / "type")
      .error(absl::StrCat("'", type, "' is not supported; troupe reads ",
                          absl::StrJoin(supported, ", ")));
}

absl::StatusOr<const json*> member(const json& j, absl::string_view key, const place& at) {
  if (!j.is_object()) return at.error("must be an object");
  const auto it = j.find(key);
  if (it == j.end()) return (at / key).error("is missing");
  return &*it;
}

absl::StatusOr<std::string> string_of(const json& j, absl::string_view key, const place& at) {
  TROUPE_ASSIGN_OR_RETURN(const json* v, member(j, key, at));
  if (!v->is_string()) return (at / key).error(absl::StrCat("must be a string, not ", v->dump()));
  return v->get<std::string>();
}

// A boolean that may be absent (its default then).
absl::StatusOr<bool> flag_of(const json& j, absl::string_view key, bool fallback, const place& at) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    return (at / key).error(absl::StrCat("must be true or false, not ", it->dump()));
  return it->get<bool>();
}

// A string that may be absent or null.
absl::StatusOr<std::optional<std::string>> optional_string_of(const json& j, absl::string_view key,
                                                              const place& at) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return (at / key).error(absl::StrCat("must be a string, not ", it->dump()));
  return std::optional<std::string>(it->get<std::string>());
}

absl::StatusOr<text_pattern> pattern_of(const json& j, const place& at) {
  TROUPE_ASSIGN_OR_RETURN(const json* p, member(j, "pattern", at));
  const place here = at / "pattern";
  if (p->is_object() && p->contains("String") && (*p)["String"].is_string()) {
    return text_pattern::literal((*p)["String"].get<std::string>());
  }
  if (p->is_object() && p->contains("Regex") && (*p)["Regex"].is_string()) {
    auto r = text_pattern::regex((*p)["Regex"].get<std::string>());
    if (!r.ok()) return (here / "Regex").error(r.status().message());
    return r;
  }
  return here.error(
      absl::StrCat("must be {\"String\": text} or {\"Regex\": expression}, not ", p->dump()));
}

absl::StatusOr<std::string> type_of(const json& j, const place& at) {
  return string_of(j, "type", at);
}

// A "Sequence": each entry of the list at `key` read into `out` by `read`.
template <class Step>
absl::Status read_sequence(const json& j, const char* key, const place& at,
                           absl::Status (*read)(const json&, const place&, std::vector<Step>&),
                           std::vector<Step>& out) {
  TROUPE_ASSIGN_OR_RETURN(const json* list, member(j, key, at));
  if (!list->is_array()) return (at / key).error("must be a list");
  for (size_t i = 0; i < list->size(); ++i)
    TROUPE_RETURN_IF_ERROR(read((*list)[i], (at / key)[i], out));
  return absl::OkStatus();
}

// --- normalizer ---------------------------------------------------------------------------

absl::Status read_normalizer(const json& j, const place& at, std::vector<normalizer_step>& out) {
  if (j.is_null()) return absl::OkStatus();
  TROUPE_ASSIGN_OR_RETURN(const std::string type, type_of(j, at));
  using form = unicode_normalization::form;
  if (type == "Sequence") {
    TROUPE_RETURN_IF_ERROR(read_sequence(j, "normalizers", at, &read_normalizer, out));
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    out.push_back(unicode_normalization{type == "NFC"    ? form::nfc
                                        : type == "NFD"  ? form::nfd
                                        : type == "NFKC" ? form::nfkc
                                                         : form::nfkd});
  } else if (type == "Replace") {
    TROUPE_ASSIGN_OR_RETURN(text_pattern pattern, pattern_of(j, at));
    TROUPE_ASSIGN_OR_RETURN(std::string content, string_of(j, "content", at));
    out.push_back(replace_step{std::move(pattern), std::move(content)});
  } else if (type == "Prepend") {
    TROUPE_ASSIGN_OR_RETURN(std::string text, string_of(j, "prepend", at));
    out.push_back(prepend_step{std::move(text)});
  } else if (type == "Strip") {
    TROUPE_ASSIGN_OR_RETURN(const bool left, flag_of(j, "strip_left", true, at));
    TROUPE_ASSIGN_OR_RETURN(const bool right, flag_of(j, "strip_right", true, at));
    out.push_back(strip_step{left, right});
  } else {
    return unsupported(at, type,
                       {"NFC", "NFD", "NFKC", "NFKD", "Replace", "Prepend", "Strip", "Sequence"});
  }
  return absl::OkStatus();
}

// --- pre-tokenizer ------------------------------------------------------------------------

absl::StatusOr<split_behavior> behavior_of(const json& j, const place& at) {
  TROUPE_ASSIGN_OR_RETURN(const std::string b, string_of(j, "behavior", at));
  if (b == "Isolated") return split_behavior::isolated;
  if (b == "Removed") return split_behavior::removed;
  if (b == "MergedWithPrevious") return split_behavior::merged_with_previous;
  if (b == "MergedWithNext") return split_behavior::merged_with_next;
  if (b == "Contiguous") return split_behavior::contiguous;
  return (at / "behavior")
      .error(absl::StrCat("'", b,
                          "' is not one of Isolated, Removed, MergedWithPrevious, "
                          "MergedWithNext, Contiguous"));
}

absl::StatusOr<metaspace_step::prepend> prepend_scheme_of(const json& j, const place& at) {
  // Files written before prepend_scheme existed say add_prefix_space instead.
  if (!j.contains("prepend_scheme")) {
    TROUPE_ASSIGN_OR_RETURN(const bool add, flag_of(j, "add_prefix_space", true, at));
    return add ? metaspace_step::prepend::always : metaspace_step::prepend::never;
  }
  TROUPE_ASSIGN_OR_RETURN(const std::string s, string_of(j, "prepend_scheme", at));
  if (s == "always") return metaspace_step::prepend::always;
  if (s == "first") return metaspace_step::prepend::first;
  if (s == "never") return metaspace_step::prepend::never;
  return (at / "prepend_scheme").error(absl::StrCat("'", s, "' is not always, first or never"));
}

absl::Status read_pre_tokenizer(const json& j, const place& at,
                                std::vector<pre_tokenizer_step>& out) {
  if (j.is_null()) return absl::OkStatus();
  TROUPE_ASSIGN_OR_RETURN(const std::string type, type_of(j, at));
  if (type == "Sequence") {
    TROUPE_RETURN_IF_ERROR(read_sequence(j, "pretokenizers", at, &read_pre_tokenizer, out));
  } else if (type == "Split") {
    TROUPE_ASSIGN_OR_RETURN(text_pattern pattern, pattern_of(j, at));
    TROUPE_ASSIGN_OR_RETURN(const split_behavior behavior, behavior_of(j, at));
    TROUPE_ASSIGN_OR_RETURN(const bool invert, flag_of(j, "invert", false, at));
    out.push_back(split_step{std::move(pattern), behavior, invert});
  } else if (type == "Digits") {
    // HF splits at char::is_numeric: each digit alone, or runs of them.
    TROUPE_ASSIGN_OR_RETURN(const bool each, flag_of(j, "individual_digits", false, at));
    out.push_back(split_step{*text_pattern::regex(R"(\p{N})"),
                             each ? split_behavior::isolated : split_behavior::contiguous, false});
  } else if (type == "ByteLevel") {
    TROUPE_ASSIGN_OR_RETURN(const bool prefix, flag_of(j, "add_prefix_space", true, at));
    TROUPE_ASSIGN_OR_RETURN(const bool regex, flag_of(j, "use_regex", true, at));
    out.push_back(byte_level_step{prefix, regex});
  } else if (type == "Metaspace") {
    metaspace_step m;
    TROUPE_ASSIGN_OR_RETURN(m.replacement, string_of(j, "replacement", at));
    TROUPE_ASSIGN_OR_RETURN(m.scheme, prepend_scheme_of(j, at));
    TROUPE_ASSIGN_OR_RETURN(m.split, flag_of(j, "split", true, at));
    out.push_back(std::move(m));
  } else {
    return unsupported(at, type, {"Split", "ByteLevel", "Metaspace", "Digits", "Sequence"});
  }
  return absl::OkStatus();
}

// --- model --------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<bpe_model>> read_model(const json& j, const place& at,
                                                      bool byte_level) {
  if (!j.is_object()) return at.error("must be an object");
  const std::string type = j.contains("type") && j["type"].is_string()
                               ? j["type"].get<std::string>()
                               : std::string("BPE");
  if (type != "BPE") return unsupported(at, type, {"BPE"});
  if (j.contains("dropout") && !j["dropout"].is_null() &&
      !(j["dropout"].is_number() && j["dropout"].get<double>() == 0.0)) {
    return (at / "dropout")
        .error(absl::StrCat(j["dropout"].dump(),
                            " is not supported: BPE "
                            "dropout is for training; set it to null"));
  }
  bpe_options options;
  options.byte_level = byte_level;
  TROUPE_ASSIGN_OR_RETURN(options.unk_token, optional_string_of(j, "unk_token", at));
  TROUPE_ASSIGN_OR_RETURN(options.fuse_unk, flag_of(j, "fuse_unk", false, at));
  TROUPE_ASSIGN_OR_RETURN(options.byte_fallback, flag_of(j, "byte_fallback", false, at));
  TROUPE_ASSIGN_OR_RETURN(options.ignore_merges, flag_of(j, "ignore_merges", false, at));
  TROUPE_ASSIGN_OR_RETURN(auto prefix, optional_string_of(j, "continuing_subword_prefix", at));
  TROUPE_ASSIGN_OR_RETURN(auto suffix, optional_string_of(j, "end_of_word_suffix", at));
  options.continuing_subword_prefix = prefix.value_or("");
  options.end_of_word_suffix = suffix.value_or("");

  TROUPE_ASSIGN_OR_RETURN(const json* vocab_json, member(j, "vocab", at));
  if (!vocab_json->is_object()) return (at / "vocab").error("must be an object of token: id");
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(vocab_json->size());
  for (const auto& [token, id] : vocab_json->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return (at / "vocab")
          .error(absl::StrCat("token '", token, "' has id ", id.dump(),
                              ", not a whole number from 0 to 2^31-1"));
    }
    vocab.emplace_back(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  TROUPE_ASSIGN_OR_RETURN(const json* merges_json, member(j, "merges", at));
  if (!merges_json->is_array()) return (at / "merges").error("must be a list");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json->size());
  for (size_t i = 0; i < merges_json->size(); ++i) {
    const json& m = (*merges_json)[i];
    // Either "left right" (older files) or ["left", "right"].
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return (at / "merges")[i].error(absl::StrCat("'", s, "' is not two tokens and a space"));
      }
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return (at / "merges")[i].error(
          absl::StrCat("must be \"left right\" or [left, right], not ", m.dump()));
    }
  }
  auto model = bpe_model::create(std::move(vocab), merges, std::move(options));
  if (!model.ok()) return at.error(model.status().message());
  return model;
}

// --- added tokens -------------------------------------------------------------------------

absl::StatusOr<std::vector<added_token>> read_added_tokens(const json& j, const place& at) {
  std::vector<added_token> out;
  if (j.is_null()) return out;
  if (!j.is_array()) return at.error("must be a list");
  for (size_t i = 0; i < j.size(); ++i) {
    const place here = at[i];
    const json& t = j[i];
    added_token a;
    TROUPE_ASSIGN_OR_RETURN(const json* id, member(t, "id", here));
    if (!id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > INT32_MAX) {
      return (here / "id")
          .error(absl::StrCat(id->dump(), " is not a whole number from 0 to 2^31-1"));
    }
    a.id = static_cast<int32_t>(id->get<int64_t>());
    TROUPE_ASSIGN_OR_RETURN(a.content, string_of(t, "content", here));
    if (a.content.empty()) return (here / "content").error("is empty");
    TROUPE_ASSIGN_OR_RETURN(a.special, flag_of(t, "special", false, here));
    TROUPE_ASSIGN_OR_RETURN(a.normalized, flag_of(t, "normalized", !a.special, here));
    TROUPE_ASSIGN_OR_RETURN(a.lstrip, flag_of(t, "lstrip", false, here));
    TROUPE_ASSIGN_OR_RETURN(a.rstrip, flag_of(t, "rstrip", false, here));
    TROUPE_ASSIGN_OR_RETURN(a.single_word, flag_of(t, "single_word", false, here));
    out.push_back(std::move(a));
  }
  return out;
}

// --- post-processor -----------------------------------------------------------------------

absl::Status read_post_processor(const json& j, const place& at, special_template& out) {
  if (j.is_null()) return absl::OkStatus();
  TROUPE_ASSIGN_OR_RETURN(const std::string type, type_of(j, at));
  if (type == "ByteLevel") return absl::OkStatus();  // offsets only, no ids
  if (type == "Sequence") {
    TROUPE_RETURN_IF_ERROR(read_sequence(j, "processors", at, &read_post_processor, out));
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return unsupported(at, type, {"TemplateProcessing", "ByteLevel", "Sequence"});
  }
  TROUPE_ASSIGN_OR_RETURN(const json* single, member(j, "single", at));
  TROUPE_ASSIGN_OR_RETURN(const json* specials, member(j, "special_tokens", at));
  if (!single->is_array()) return (at / "single").error("must be a list");
  special_template t;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    const place here = (at / "single")[i];
    if (item.contains("Sequence")) {
      t.push_back(-1);
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].is_object()) {
      return here.error(
          absl::StrCat("must be {\"Sequence\": ..} or {\"SpecialToken\": ..}, not ", item.dump()));
    }
    TROUPE_ASSIGN_OR_RETURN(const std::string name,
                            string_of(item["SpecialToken"], "id", here / "SpecialToken"));
    const auto it = specials->find(name);
    if (it == specials->end() || !it->is_object() || !it->contains("ids") ||
        !(*it)["ids"].is_array()) {
      return (at / "special_tokens")
          .error(absl::StrCat("has no entry with the ids of '", name, "', which single[", i,
                              "] names"));
    }
    for (const json& id : (*it)["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return (at / "special_tokens" / name)
            .error(absl::StrCat("ids holds ", id.dump(), ", not a token id"));
      }
      t.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  out = std::move(t);
  return absl::OkStatus();
}

// --- decoder ------------------------------------------------------------------------------

absl::Status read_decoder(const json& j, const place& at, std::vector<decoder_step>& out) {
  if (j.is_null()) return absl::OkStatus();
  TROUPE_ASSIGN_OR_RETURN(const std::string type, type_of(j, at));
  if (type == "Sequence") {
    TROUPE_RETURN_IF_ERROR(read_sequence(j, "decoders", at, &read_decoder, out));
  } else if (type == "ByteLevel") {
    out.push_back(byte_level_decode{});
  } else if (type == "ByteFallback") {
    out.push_back(byte_fallback_decode{});
  } else if (type == "Fuse") {
    out.push_back(fuse_decode{});
  } else if (type == "Strip") {
    strip_decode s;
    TROUPE_ASSIGN_OR_RETURN(s.content, string_of(j, "content", at));
    TROUPE_ASSIGN_OR_RETURN(const json* start, member(j, "start", at));
    TROUPE_ASSIGN_OR_RETURN(const json* stop, member(j, "stop", at));
    if (!start->is_number_unsigned() || !stop->is_number_unsigned()) {
      return at.error("start and stop must be counts");
    }
    s.start = start->get<int>();
    s.stop = stop->get<int>();
    out.push_back(std::move(s));
  } else if (type == "Replace") {
    TROUPE_ASSIGN_OR_RETURN(text_pattern pattern, pattern_of(j, at));
    TROUPE_ASSIGN_OR_RETURN(std::string content, string_of(j, "content", at));
    out.push_back(replace_decode{std::move(pattern), std::move(content)});
  } else if (type == "Metaspace") {
    metaspace_decode m;
    TROUPE_ASSIGN_OR_RETURN(m.replacement, string_of(j, "replacement", at));
    TROUPE_ASSIGN_OR_RETURN(const auto scheme, prepend_scheme_of(j, at));
    m.prepends = scheme != metaspace_step::prepend::never;
    out.push_back(std::move(m));
  } else {
    return unsupported(
        at, type,
        {"ByteLevel", "ByteFallback", "Fuse", "Strip", "Replace", "Metaspace", "Sequence"});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<tokenizer>> tokenizer::from_json(absl::string_view text,
                                                                absl::string_view where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": is not valid JSON"));
  }
  const place root{where, ""};
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  auto get = [&](const char* key) -> const json& {
    static const json null;
    const auto it = j.find(key);
    return it == j.end() ? null : *it;
  };
  tokenizer_parts parts;
  TROUPE_ASSIGN_OR_RETURN(parts.added_tokens,
                          read_added_tokens(get("added_tokens"), root / "added_tokens"));
  std::vector<normalizer_step> normalize;
  TROUPE_RETURN_IF_ERROR(read_normalizer(get("normalizer"), root / "normalizer", normalize));
  parts.normalize = normalizer(std::move(normalize));
  std::vector<pre_tokenizer_step> pre;
  TROUPE_RETURN_IF_ERROR(read_pre_tokenizer(get("pre_tokenizer"), root / "pre_tokenizer", pre));
  for (size_t i = 0; i + 1 < pre.size(); ++i) {
    if (std::holds_alternative<byte_level_step>(pre[i])) {
      return (root / "pre_tokenizer")
          .error("ByteLevel must be the last pre-tokenizer (troupe maps bytes in the model)");
    }
  }
  parts.pre_tokenize = pre_tokenizer(std::move(pre));
  TROUPE_ASSIGN_OR_RETURN(const json* model, member(j, "model", root));
  TROUPE_ASSIGN_OR_RETURN(parts.model,
                          read_model(*model, root / "model", parts.pre_tokenize.byte_level()));
  TROUPE_RETURN_IF_ERROR(
      read_post_processor(get("post_processor"), root / "post_processor", parts.post_process));
  std::vector<decoder_step> decode;
  TROUPE_RETURN_IF_ERROR(read_decoder(get("decoder"), root / "decoder", decode));
  parts.decode = decoder(std::move(decode));
  for (int32_t id : parts.post_process) {
    const bool known = id < 0 || parts.model->id_to_token(id) != nullptr ||
                       std::any_of(parts.added_tokens.begin(), parts.added_tokens.end(),
                                   [&](const added_token& a) { return a.id == id; });
    if (!known) {
      return (root / "post_processor")
          .error(absl::StrCat("adds token id ", id, ", which no token has"));
    }
  }
  return std::make_unique<tokenizer>(std::move(parts));
}

}  // namespace troupe::tokenizers
