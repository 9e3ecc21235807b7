#include "models/tokenizer/tokenizer.hpp"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "models/tokenizer/bpe_trainer.hpp"
#include "models/tokenizer/incremental_detokenizer.hpp"
#include "tests/models/tokenizer/tokenizer_fixture.hpp"

namespace troupe::tokenizers {
namespace {

using nlohmann::json;
using testing::byte_level_tokenizer;
using testing::sentencepiece_tokenizer;

std::unique_ptr<tokenizer> make(const json& j) {
  auto t = tokenizer::from_json(j.dump(), "tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string refusal(const json& j) {
  auto t = tokenizer::from_json(j.dump(), "dir/tokenizer.json");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : std::string(t.status().message());
}

int32_t id_of(const tokenizer& t, const std::string& token) {
  const auto id = t.token_to_id(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id.value_or(-1);
}

TEST(Tokenizer, ByteLevelBpeMergesTheLowestRankFirst) {
  auto t = make(byte_level_tokenizer({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}}));
  EXPECT_EQ(t->encode("hello"), std::vector<int32_t>{id_of(*t, "hello")});
  // "help": he, l, p (no merge makes "hel").
  EXPECT_EQ(t->encode("help"), (std::vector<int32_t>{id_of(*t, "he"), 'l', 'p'}));
}

TEST(Tokenizer, ATieGoesToTheLeftmostPair) {
  auto t = make(byte_level_tokenizer({{"a", "a"}}));
  EXPECT_EQ(t->encode("aaa"), (std::vector<int32_t>{id_of(*t, "aa"), 'a'}));
}

TEST(Tokenizer, ByteLevelWordsComeFromGpt2sRegexAndSpacesBecomeG) {
  auto t = make(byte_level_tokenizer({{"\xC4\xA0", "w"}}));  // "Ġ" + "w"
  const int32_t space_w = id_of(*t, "\xC4\xA0w");
  EXPECT_EQ(t->encode("a world"), (std::vector<int32_t>{'a', space_w, 'o', 'r', 'l', 'd'}));
  // Every byte has a token, whatever the text: a byte's id is its value here.
  const std::string bytes = "\x01\xFF\x80";  // invalid UTF-8: read as U+FFFD U+FFFD U+FFFD
  EXPECT_EQ(t->encode(bytes).size(), 7u);
  EXPECT_EQ(*t->decode(t->encode("a world \xE4\xB8\xAD")), "a world \xE4\xB8\xAD");
}

TEST(Tokenizer, IgnoreMergesTakesAWordThatIsInTheVocabularyWhole) {
  json j = byte_level_tokenizer({{"b", "c"}});
  j["model"]["vocab"]["abc"] = 300;
  EXPECT_EQ(make(j)->encode("abc"), (std::vector<int32_t>{'a', 256}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(make(j)->encode("abc"), std::vector<int32_t>{300});
}

TEST(Tokenizer, AddedTokensAreMatchedLeftmostLongestAndKeptWhole) {
  json j = byte_level_tokenizer({});
  j["added_tokens"] = {
      {{"id", 1000}, {"content", "<|im_start|>"}, {"special", true}, {"normalized", false}},
      {{"id", 1001}, {"content", "<think>"}, {"special", false}, {"normalized", false}},
      {{"id", 1002}, {"content", "<|im"}, {"special", true}, {"normalized", false}}};
  auto t = make(j);
  EXPECT_EQ(t->encode("a<|im_start|>b<think>"), (std::vector<int32_t>{'a', 1000, 'b', 1001}));
  EXPECT_EQ(t->encode("<|im_end"), (std::vector<int32_t>{1002, '_', 'e', 'n', 'd'}));
  EXPECT_EQ(t->vocab_size(), 1003);
  EXPECT_TRUE(t->is_special(1000));
  EXPECT_FALSE(t->is_special(1001));
  EXPECT_EQ(*t->decode(std::vector<int32_t>{'a', 1000, 'b', 1001}), "a<|im_start|>b<think>");
  EXPECT_EQ(*t->decode(std::vector<int32_t>{'a', 1000, 'b', 1001}, true), "ab<think>");
}

TEST(Tokenizer, AddedTokensStripTheirSpacesAndMatchSingleWordsOnlyWhenAsked) {
  json j = byte_level_tokenizer({});
  j["added_tokens"] = {
      {{"id", 1000},
       {"content", "<mask>"},
       {"lstrip", true},
       {"rstrip", true},
       {"normalized", false}},
      {{"id", 1001}, {"content", "ab"}, {"single_word", true}, {"normalized", false}}};
  auto t = make(j);
  EXPECT_EQ(t->encode("x  <mask>  y"), (std::vector<int32_t>{'x', 1000, 'y'}));
  EXPECT_EQ(t->encode("cab ab"), (std::vector<int32_t>{'c', 'a', 'b', ' ', 1001}));
}

TEST(Tokenizer, SentencePieceStyleBpeWithByteFallback) {
  auto t = make(sentencepiece_tokenizer());
  const int32_t sp_hi = id_of(*t, "\xE2\x96\x81hi"), sp_h = id_of(*t, "\xE2\x96\x81h");
  const int32_t e = id_of(*t, "e"), llo = id_of(*t, "llo");
  // "▁hi▁hello": ▁h merges before "▁hello" could form, so it stays ▁h e llo.
  EXPECT_EQ(t->encode("hi hello"), (std::vector<int32_t>{sp_hi, sp_h, e, llo}));
  EXPECT_EQ(t->encode("hi hello", true), (std::vector<int32_t>{1, sp_hi, sp_h, e, llo}));
  // é is not in the vocabulary: its two bytes' tokens.
  EXPECT_EQ(t->encode("\xC3\xA9"),
            (std::vector<int32_t>{id_of(*t, "\xE2\x96\x81"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(*t->decode(t->encode("hi hello \xC3\xA9", true), true), "hi hello \xC3\xA9");
  EXPECT_EQ(*t->decode(t->encode("hi", true)), "<s> hi");
  // A run of byte tokens that is not UTF-8 decodes to one U+FFFD per byte.
  EXPECT_EQ(*t->decode(std::vector<int32_t>{3 + 0xC3, 3 + 'a'}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Tokenizer, AnUnknownCharacterWithoutByteFallbackIsUnkFusedWhenAsked) {
  json j = sentencepiece_tokenizer();
  j["model"]["byte_fallback"] = false;
  auto t = make(j);
  EXPECT_EQ(t->encode("\xC3\xA9\xC3\xA9"), (std::vector<int32_t>{id_of(*t, "\xE2\x96\x81"), 0}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(make(j)->encode("\xC3\xA9\xC3\xA9"),
            (std::vector<int32_t>{id_of(*t, "\xE2\x96\x81"), 0, 0}));
}

TEST(Tokenizer, MetaspacePreTokenizerAndDecoder) {
  json j = sentencepiece_tokenizer();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"},
                        {"replacement", "\xE2\x96\x81"},
                        {"prepend_scheme", "first"},
                        {"split", false}};
  j["decoder"] = {{"type", "Metaspace"},
                  {"replacement", "\xE2\x96\x81"},
                  {"prepend_scheme", "first"},
                  {"split", false}};
  auto t = make(j);
  const std::vector<int32_t> ids = t->encode("hi hello");
  EXPECT_EQ(ids.front(), id_of(*t, "\xE2\x96\x81hi"));
  EXPECT_EQ(*t->decode(ids), "hi hello");
  // "first": no ▁ before text that follows an added token.
  EXPECT_EQ(t->encode("</s>hi"), (std::vector<int32_t>{2, id_of(*t, "hi")}));
}

TEST(Tokenizer, SplitBehaviours) {
  json j = byte_level_tokenizer({});
  auto split = [&](const std::string& behavior, bool invert) {
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"String", "-"}}},
           {"behavior", behavior},
           {"invert", invert}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    j["model"]["ignore_merges"] = true;
    j["model"]["vocab"]["a-"] = 400;
    j["model"]["vocab"]["-b"] = 401;
    j["model"]["vocab"]["--"] = 402;
    return make(j)->encode("a--b");
  };
  EXPECT_EQ(split("Isolated", false), (std::vector<int32_t>{'a', '-', '-', 'b'}));
  EXPECT_EQ(split("Removed", false), (std::vector<int32_t>{'a', 'b'}));
  EXPECT_EQ(split("MergedWithPrevious", false), (std::vector<int32_t>{400, '-', 'b'}));
  EXPECT_EQ(split("MergedWithNext", false), (std::vector<int32_t>{'a', '-', 401}));
  EXPECT_EQ(split("Contiguous", false), (std::vector<int32_t>{'a', 402, 'b'}));
  EXPECT_EQ(split("Removed", true), (std::vector<int32_t>{'-', '-'}));
}

TEST(Tokenizer, UnicodeNormalizationComposes) {
  json j = byte_level_tokenizer({});
  // The merge's parts are spelt in the byte-level alphabet: é is bytes C3 A9, "Ã" and "©".
  j["model"]["merges"] = json::array({json::array({"\xC3\x83", "\xC2\xA9"})});
  j["model"]["vocab"]["\xC3\x83\xC2\xA9"] = 256;
  j["normalizer"] = {{"type", "NFC"}};
  auto t = make(j);
  EXPECT_EQ(t->encode("e\xCC\x81"), std::vector<int32_t>{256});  // e + combining acute → é
}

TEST(Tokenizer, RefusesWhatItDoesNotImplementByKeyAndValue) {
  json j = byte_level_tokenizer({});
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Whitespace"}}}}};
  EXPECT_EQ(refusal(j),
            "dir/tokenizer.json: pre_tokenizer.pretokenizers[1].type: 'Whitespace' is not "
            "supported; troupe reads Split, ByteLevel, Metaspace, Digits, Sequence");
  j = byte_level_tokenizer({});
  j["model"]["type"] = "WordPiece";
  EXPECT_EQ(refusal(j),
            "dir/tokenizer.json: model.type: 'WordPiece' is not supported; troupe "
            "reads BPE");
  j = byte_level_tokenizer({});
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(refusal(j).find("normalizer.type: 'Lowercase' is not supported"), std::string::npos);
  j = byte_level_tokenizer({});
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(refusal(j).find("decoder.type: 'WordPiece' is not supported"), std::string::npos);
  j = byte_level_tokenizer({});
  j["model"]["dropout"] = 0.1;
  EXPECT_NE(refusal(j).find("model.dropout: 0.1 is not supported"), std::string::npos);
}

TEST(Tokenizer, RefusesAFileThatContradictsItself) {
  json j = byte_level_tokenizer({});
  j["model"]["merges"] = json::array({json::array({"x", "zz"})});
  EXPECT_EQ(refusal(j),
            "dir/tokenizer.json: model: model.merges[0] ('x' 'zz'): 'zz' is not in model.vocab");
  j = byte_level_tokenizer({});
  j["model"]["vocab"].erase("a");
  EXPECT_NE(refusal(j).find("has no token for byte 0x61 ('a')"), std::string::npos);
  j = sentencepiece_tokenizer();
  j["model"]["unk_token"] = "<missing>";
  EXPECT_NE(refusal(j).find("model.unk_token '<missing>' is not in model.vocab"),
            std::string::npos);
  j = byte_level_tokenizer({});
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(refusal(j).find("pre_tokenizer.pattern.Regex: the regex '(a' does not compile"),
            std::string::npos);
  EXPECT_EQ(std::string(tokenizer::from_json("{\"model\": ", "t.json").status().message()),
            "t.json: is not valid JSON");
  EXPECT_EQ(tokenizer::load("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

// What stop strings are matched on: each token's own bytes inside a text, part of a character
// included, with no leading space stripped.
TEST(Tokenizer, ATokensBytesAreWhatItStandsForInsideAText) {
  auto bytes = make(byte_level_tokenizer({{"\xC4\xA0", "w"}}));
  EXPECT_EQ(bytes->token_bytes(id_of(*bytes, "\xC4\xA0w")), " w");
  EXPECT_EQ(bytes->token_bytes(0xE4), "\xE4");  // a third of 中
  auto pieces = make(sentencepiece_tokenizer());
  EXPECT_EQ(pieces->token_bytes(id_of(*pieces, "\xE2\x96\x81hello")), " hello");
  EXPECT_EQ(pieces->token_bytes(3 + 0xC3), "\xC3");
  EXPECT_EQ(pieces->token_bytes(2), "</s>");
  EXPECT_EQ(pieces->token_bytes(100000), "");
}

TEST(Tokenizer, DecodingAnIdNoTokenHasIsAnErrorNamingIt) {
  auto t = make(byte_level_tokenizer({}));
  const auto text = t->decode(std::vector<int32_t>{'a', 99999});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(),
            "token id 99999 (at index 1) is not in the vocabulary (ids 0 to 255)");
}

TEST(Tokenizer, EncodesTheSameFromManyThreadsAtOnce) {
  auto t = make(byte_level_tokenizer({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"\xC4\xA0", "w"}}));
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("hello world " + std::to_string(i) + " \xE4\xB8\xAD hell wow " +
                    std::string(i % 7, 'l'));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& text : texts)
    expected.push_back(t->encode(text));
  // Fresh words race into the shared cache from every thread.
  auto fresh =
      make(byte_level_tokenizer({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"\xC4\xA0", "w"}}));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < texts.size(); ++i) {
        const size_t j = (i * 7 + static_cast<size_t>(k) * 31) % texts.size();
        if (fresh->encode(texts[j]) != expected[j]) ++wrong;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(IncrementalDetokenizer, NeverReleasesHalfACharacter) {
  auto t = make(byte_level_tokenizer({}));
  const std::vector<int32_t> prompt = t->encode("say:");
  incremental_detokenizer stream(*t, prompt);
  // 中 is three byte tokens; 😀 four.
  std::string released;
  std::vector<std::string> steps;
  for (int32_t id : t->encode("a\xE4\xB8\xAD\xF0\x9F\x98\x80!")) {
    auto piece = stream.push(id);
    ASSERT_TRUE(piece.ok());
    steps.push_back(*piece);
    released += *piece;
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"a", "", "", "\xE4\xB8\xAD", "", "", "",
                                             "\xF0\x9F\x98\x80", "!"}));
  EXPECT_EQ(*stream.finish(), "");
  EXPECT_EQ(released, "a\xE4\xB8\xAD\xF0\x9F\x98\x80!");
}

TEST(IncrementalDetokenizer, FinishReleasesWhatAnUnfinishedCharacterLeft) {
  auto t = make(byte_level_tokenizer({}));
  incremental_detokenizer stream(*t, {});
  EXPECT_EQ(*stream.push(0xE4), "");
  EXPECT_EQ(*stream.push(0xB8), "");
  EXPECT_EQ(*stream.finish(), "\xEF\xBF\xBD");
  EXPECT_FALSE(stream.push(123456).ok());
}

TEST(IncrementalDetokenizer, KeepsTheDecodersContextAcrossTokens) {
  auto t = make(sentencepiece_tokenizer());
  const std::vector<int32_t> ids = t->encode("hi hello hi", true);
  incremental_detokenizer stream(*t, std::vector<int32_t>{ids[0]});
  std::string released;
  for (size_t i = 1; i < ids.size(); ++i)
    released += *stream.push(ids[i]);
  released += *stream.finish();
  // The spaces between words survive although each token is released on its own.
  EXPECT_EQ(released, *t->decode(std::vector<int32_t>(ids.begin() + 1, ids.end())));
}

TEST(BpeTrainer, LearnsTheCorpussFrequentPairsUntilNoneIsLeft) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("the cat sat on the mat; the hat is on the cat " + std::to_string(i % 7));
  bpe_training_options options;
  options.vocab_size = 300;
  auto trained = train_byte_level_bpe(texts, options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  auto t = make(*trained);
  // <|endoftext|>, the 256 bytes, and a merge per pair seen twice until whole words are
  // tokens: this corpus runs out of pairs before 300 ids.
  EXPECT_EQ(t->token_to_id("<|endoftext|>"), 0);
  EXPECT_GT(t->vocab_size(), 257 + 10);
  EXPECT_LT(t->vocab_size(), 300);
  EXPECT_EQ(t->encode(" the").size(), 1u);
  EXPECT_EQ(t->encode(texts[3]).size(), 15u);  // one token per pre-tokenized word
  EXPECT_EQ(*t->decode(t->encode(texts[3] + "<|endoftext|>\xE4\xB8\xAD")),
            texts[3] + "<|endoftext|>\xE4\xB8\xAD");
  // A smaller vocabulary stops at its size.
  options.vocab_size = 265;
  auto smaller = train_byte_level_bpe(texts, options);
  ASSERT_TRUE(smaller.ok());
  EXPECT_EQ(make(*smaller)->vocab_size(), 265);
}

TEST(BpeTrainer, RefusesAVocabularyWithNoRoomForMerges) {
  bpe_training_options options;
  options.vocab_size = 257;
  const auto r = train_byte_level_bpe({"abc"}, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--vocab-size 257 leaves no room for merges: the 1 special tokens and the 256 bytes "
            "take 257 ids");
  options.vocab_size = 400;
  options.special_tokens = {"<s>", "<s>"};
  EXPECT_FALSE(train_byte_level_bpe({"abc"}, options).ok());
}

}  // namespace
}  // namespace troupe::tokenizers
