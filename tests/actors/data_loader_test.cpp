#include "actors/data_loader.hpp"

#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "models/decoder/byte_vocab.hpp"
#include "models/tokenizer/bpe_trainer.hpp"
#include "models/vocab/hf_vocabulary.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::actors {
namespace {

std::string sample_text(size_t bytes) {
  std::string text;
  for (size_t i = 0; text.size() < bytes; ++i)
    text += "line " + std::to_string(i * 7919 % 1000) + "\n";
  return text.substr(0, bytes);
}

TEST(TextCorpus, HoldsOutTheLastFraction) {
  testing::temp_dir dir;
  dir.write("b.txt", std::string(900, 'b'));
  dir.write("a.txt", std::string(100, 'a'));
  dir.write("a.dat", "index");  // skipped like the fortunes package's index files
  auto corpus = text_corpus::load(dir.path().string(), 0.1, 16);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->train().size(), 900u);
  EXPECT_EQ(corpus->train().substr(0, 100), std::string(100, 'a'));  // name order
  EXPECT_EQ(corpus->val(), std::string(100, 'b'));
  EXPECT_NE(text_corpus::load(dir.path().string(), 0.1, 200).status().message().find("cannot hold"),
            std::string::npos);
  EXPECT_EQ(text_corpus::load(dir.file("missing"), 0.1, 16).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(text_corpus::load(dir.path().string(), 1.5, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataLoader, EverySampleOnceAnEpochAcrossRanksAndEpochBoundaries) {
  testing::temp_dir dir;
  auto corpus = *text_corpus::load(dir.write("t.txt", sample_text(20000)), 0.05, 32);
  auto r0 = *data_loader::create(corpus, 32, 6, 0, 2, 7);
  auto r1 = *data_loader::create(corpus, 32, 6, 1, 2, 7);
  auto whole = *data_loader::create(corpus, 32, 6, 0, 1, 7);
  const int64_t S = whole.samples_per_epoch();
  ASSERT_GT(S, 100);
  // Two epochs' worth of batches: every window appears exactly twice, and the two ranks
  // together see exactly what one rank sees at dp 1.
  std::multiset<std::string> seen;
  const int batches = static_cast<int>(2 * S / 6);
  for (int b = 0; b < batches; ++b) {
    token_batch a = r0.next(), c = r1.next(), w = whole.next();
    std::vector<int32_t> joined = a.tokens;
    joined.insert(joined.end(), c.tokens.begin(), c.tokens.end());
    ASSERT_EQ(joined, w.tokens) << "batch " << b;
    for (int row = 0; row < w.batch; ++row) {
      seen.insert(std::string(w.tokens.begin() + row * 32, w.tokens.begin() + (row + 1) * 32));
      EXPECT_EQ(w.targets[row * 32], w.tokens[row * 32 + 1]);  // targets are the next bytes
    }
  }
  std::set<std::string> distinct(seen.begin(), seen.end());
  for (const auto& window : distinct)
    EXPECT_LE(seen.count(window), 2u);
  EXPECT_EQ(static_cast<int64_t>(seen.size()), batches * 6);
}

TEST(DataLoader, ResumingAtTheCursorContinuesTheSameStream) {
  testing::temp_dir dir;
  auto corpus = *text_corpus::load(dir.write("t.txt", sample_text(8000)), 0.05, 16);
  auto straight = *data_loader::create(corpus, 16, 4, 0, 1, 3);
  for (int i = 0; i < 50; ++i)
    straight.next();
  const int64_t cursor = straight.cursor();
  auto resumed = *data_loader::create(corpus, 16, 4, 0, 1, 3);
  resumed.seek(cursor);
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(straight.next().tokens, resumed.next().tokens) << i;
  auto other_seed = *data_loader::create(corpus, 16, 4, 0, 1, 4);
  EXPECT_NE(other_seed.next().tokens, (*data_loader::create(corpus, 16, 4, 0, 1, 3)).next().tokens);
  EXPECT_TRUE(data_loader::create(corpus, 16, 5, 1, 2, 3).ok());   // shares of 3 and 2
  EXPECT_FALSE(data_loader::create(corpus, 16, 1, 0, 2, 3).ok());  // a rank without a sample
}

// A rank lost or joined between batches: the ranks of each batch's world, in rank order, hold
// exactly that batch of the dp=1 stream, with uneven shares when the world does not divide it,
// so no sample is skipped or repeated whatever the world does.
TEST(DataLoader, TheSamplesOfEachBatchAreTheSameWhateverTheWorldSize) {
  testing::temp_dir dir;
  auto corpus = *text_corpus::load(dir.write("t.txt", sample_text(8000)), 0.05, 16);
  auto whole = *data_loader::create(corpus, 16, 8, 0, 1, 3);
  const int worlds[] = {3, 3, 2, 1, 4, 3};
  for (int b = 0; b < 6; ++b) {
    const token_batch want = whole.next();
    std::vector<int32_t> joined;
    int64_t next_sample = want.first_sample;
    for (int r = 0; r < worlds[b]; ++r) {
      auto rank = *data_loader::create(corpus, 16, 8, r, worlds[b], 3);
      rank.seek(want.cursor);
      const token_batch part = rank.next();
      EXPECT_EQ(part.first_sample, next_sample) << "batch " << b << " rank " << r;
      EXPECT_EQ(part.batch, 8 / worlds[b] + (r < 8 % worlds[b] ? 1 : 0));
      next_sample += part.batch;
      joined.insert(joined.end(), part.tokens.begin(), part.tokens.end());
    }
    EXPECT_EQ(next_sample, want.first_sample + 8);
    EXPECT_EQ(joined, want.tokens) << "batch " << b << " over " << worlds[b] << " ranks";
  }
}

TEST(DataLoader, ValidationWindowsInTextOrder) {
  testing::temp_dir dir;
  auto corpus = *text_corpus::load(dir.write("t.txt", sample_text(8000)), 0.25, 16);
  auto loader = *data_loader::create(corpus, 16, 4, 0, 1, 3);
  const auto val = loader.validation(3, 10);
  ASSERT_EQ(val.size(), 4u);  // 3 + 3 + 3 + 1
  EXPECT_EQ(val.back().batch, 1);
  EXPECT_EQ(val[0].tokens[0], static_cast<uint8_t>(corpus.val()[0]));
  EXPECT_EQ(val[1].tokens[0], static_cast<uint8_t>(corpus.val()[3 * 16]));
}

// A tokenizer's ids replace the bytes: windows of ctx + 1 ids, every one trained once an epoch,
// the held-out windows in order; too few ids for a window is refused, naming the part.
TEST(DataLoader, TokenizedTextGivesWindowsOfIds) {
  testing::temp_dir dir;
  auto corpus = *text_corpus::load(dir.write("t.txt", sample_text(4000)), 0.25, 8);
  std::vector<int32_t> train(8 * 10 + 1), val(8 * 3 + 1);
  for (size_t i = 0; i < train.size(); ++i)
    train[i] = static_cast<int32_t>(1000 + i);
  for (size_t i = 0; i < val.size(); ++i)
    val[i] = static_cast<int32_t>(5000 + i);
  EXPECT_EQ(corpus.attach_tokens(train, {1, 2}, 8, "t.txt").message(),
            "t.txt: the held-out text is 2 tokens, less than one window of 9; name more text in "
            "data.path (or a larger data.val_fraction)");
  EXPECT_FALSE(corpus.tokenized());
  ASSERT_TRUE(corpus.attach_tokens(train, val, 8, "t.txt").ok());
  auto loader = *data_loader::create(corpus, 8, 5, 0, 1, 3);
  EXPECT_EQ(loader.samples_per_epoch(), 10);
  std::set<int32_t> firsts;
  for (int b = 0; b < 2; ++b) {
    const token_batch batch = loader.next();
    for (int row = 0; row < batch.batch; ++row) {
      const int32_t first = batch.tokens[row * 8];
      EXPECT_EQ((first - 1000) % 8, 0);
      for (int t = 0; t < 8; ++t) {
        EXPECT_EQ(batch.tokens[row * 8 + t], first + t);
        EXPECT_EQ(batch.targets[row * 8 + t], first + t + 1);
      }
      firsts.insert(first);
    }
  }
  EXPECT_EQ(firsts.size(), 10u);  // each window once in the epoch
  const auto held_out = loader.validation(2, 10);
  ASSERT_EQ(held_out.size(), 2u);  // 3 windows: 2 + 1
  EXPECT_EQ(held_out[1].tokens[0], 5000 + 16);
  EXPECT_EQ(held_out[1].targets[7], 5000 + 24);
}

}  // namespace
}  // namespace troupe::actors

namespace troupe::actors {
namespace {

TEST(PrefetchQueue, CreditsBoundWhatIsPreparedAndTheCursorCountsOnlyWhatWasTaken) {
  testing::temp_dir dir;
  auto corpus = *text_corpus::load(dir.write("t.txt", sample_text(8000)), 0.05, 16);
  auto reference = *data_loader::create(corpus, 16, 4, 0, 1, 3);
  prefetch_queue q(*data_loader::create(corpus, 16, 4, 0, 1, 3));
  EXPECT_FALSE(q.can_produce());  // nothing is prepared without credit
  q.grant(2);
  while (q.can_produce())
    q.produce();
  EXPECT_EQ(q.ready(), 2u);
  EXPECT_EQ(q.cursor(), 0);  // prepared, not taken
  EXPECT_EQ(q.take().tokens, reference.next().tokens);
  EXPECT_EQ(q.cursor(), 4);
  q.grant(1);  // the consumer returns a credit per batch taken
  q.produce();
  EXPECT_EQ(q.ready(), 2u);
  EXPECT_EQ(q.take().tokens, reference.next().tokens);
  EXPECT_EQ(q.take().tokens, reference.next().tokens);
  EXPECT_EQ(q.take().tokens, reference.next().tokens);  // none ready: made on demand
  EXPECT_EQ(q.cursor(), 16);

  // A resume drops what was prepared and gives the credits back.
  q.grant(2);
  q.produce();
  q.produce();
  q.seek(4);
  EXPECT_EQ(q.ready(), 0u);
  EXPECT_EQ(q.credits(), 2);
  reference.seek(4);
  EXPECT_EQ(q.take().tokens, reference.next().tokens);
}

}  // namespace
}  // namespace troupe::actors

namespace troupe::actors {
namespace {

// pretrain.data.format: sft. Each example is a row of its own: its bytes, padded; the targets
// are its next bytes where they are the response's (or an assistant message's), -1 elsewhere
// (the prompt, the chat template's headers, the padding); the batch counts its global batch's
// trained targets for the token mean.
TEST(SftData, ExamplesTrainOnTheResponseOnly) {
  testing::temp_dir dir;
  std::string lines = "{\"prompt\": \"2+3=\", \"response\": \"5\\n\"}\n\n";
  lines +=
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
      "{\"role\": \"assistant\", \"content\": \"yo\"}]}\n";
  for (int i = 0; i < 18; ++i)  // held out: the last tenth
    lines += "{\"prompt\": \"p" + std::to_string(i) + "\", \"response\": \"r\"}\n";
  auto corpus =
      text_corpus::load_sft(dir.write("a.jsonl", lines), 0.1, 32, models::byte_vocabulary());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_TRUE(corpus->supervised());
  ASSERT_EQ(corpus->train_examples().size(), 18u);
  ASSERT_EQ(corpus->val_examples().size(), 2u);
  EXPECT_EQ(corpus->val_examples()[1].tokens, models::tokens_of("p17r"));

  const sft_example& sum = corpus->train_examples()[0];
  EXPECT_EQ(sum.trained_targets(), 2);  // "5" and "\n"
  const sft_example& chat = corpus->train_examples()[1];
  EXPECT_EQ(chat.tokens, models::tokens_of("<|user|>\nhi\n<|assistant|>\nyo\n"));
  EXPECT_EQ(chat.trained_targets(), 3);  // "yo\n"

  // One global batch of every training example: the rows are the examples in the loader's
  // order, each trained only where its response is.
  auto loader = *data_loader::create(*corpus, 32, 18, 0, 1, 3);
  const token_batch b = loader.next();
  int64_t trained = 0;
  int checked = 0;
  for (int row = 0; row < b.batch; ++row) {
    const int32_t* tokens = b.tokens.data() + row * 32;
    const int32_t* targets = b.targets.data() + row * 32;
    for (int t = 0; t < 32; ++t)
      trained += targets[t] >= 0 ? 1 : 0;
    const std::string text(tokens, tokens + 4);
    if (text == "2+3=") {
      ++checked;
      const std::vector<int32_t> want = {-1, -1, -1, '5', '\n', -1};
      EXPECT_EQ(std::vector<int32_t>(targets, targets + 6), want);
      EXPECT_EQ(tokens[6], 0) << "padding";
    } else if (text == "<|us") {
      ++checked;
      for (int t = 0; t < 32; ++t) {
        const bool response = t + 1 >= 26 && t + 1 < 29;  // "yo\n" at bytes 26..28
        EXPECT_EQ(targets[t], response ? chat.tokens[t + 1] : -1) << t;
      }
    }
  }
  EXPECT_EQ(checked, 2);
  EXPECT_EQ(trained, 2 + 3 + 16);
  EXPECT_EQ(b.global_targets, trained);
  // Held-out batches are built the same way.
  const auto val = loader.validation(4, 100);
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val[0].batch, 2);
  EXPECT_EQ(val[0].targets[2], 'r');
}

TEST(SftData, BadLinesAreRefusedWithFileLineAndField) {
  testing::temp_dir dir;
  const std::string good = "{\"prompt\": \"a\", \"response\": \"b\"}\n";
  const auto refused = [&](const std::string& bad, int ctx = 32) {
    const std::string path = dir.write("bad.jsonl", good + bad + "\n" + good);
    const absl::Status s =
        text_corpus::load_sft(path, 0.1, ctx, models::byte_vocabulary()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(path + ":2: "), std::string::npos) << s;
    return std::string(s.message());
  };
  EXPECT_NE(refused("not json").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refused("{\"prompt\": \"a\"}").find("response is missing or not a string"),
            std::string::npos);
  EXPECT_NE(refused("{\"prompt\": \"\", \"response\": \"b\"}").find("prompt is empty"),
            std::string::npos);
  EXPECT_NE(refused("{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}")
                .find("messages[0].role must be system, user or assistant, not 'bot'"),
            std::string::npos);
  EXPECT_NE(refused("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}")
                .find("no assistant message"),
            std::string::npos);
  EXPECT_NE(refused("{\"prompt\": \"aaaa\", \"response\": \"bbbb\"}", 4)
                .find("the example is 8 tokens, longer than model.ctx + 1 = 5"),
            std::string::npos);
  // Too few examples to hold some out.
  EXPECT_NE(text_corpus::load_sft(dir.write("one.jsonl", good), 0.1, 32, models::byte_vocabulary())
                .status()
                .message()
                .find("1 examples cannot give a training and a validation set"),
            std::string::npos);
}

// data.format: pairs (app: reward_model). A pair is two rows, prompt + chosen then prompt +
// rejected, padded, each scored at its last byte (target 1, then 0; -1 elsewhere); a batch
// counts pairs, carries each pair's margin, and its global_targets are its global batch's pairs.
TEST(PairData, APairIsTwoRowsScoredAtTheirLastByte) {
  testing::temp_dir dir;
  std::string lines =
      "{\"prompt\": \"1+1=\", \"chosen\": \"2\\n\", \"rejected\": \"3\\n\", "
      "\"margin\": 0.5}\n";
  for (int i = 0; i < 9; ++i)  // the last one held out
    lines += "{\"prompt\": \"p" + std::to_string(i) +
             "\", \"chosen\": \"good\", \"rejected\": \"bad\"}\n";
  auto corpus =
      text_corpus::load_pairs(dir.write("pairs.jsonl", lines), 0.1, 16, models::byte_vocabulary());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_TRUE(corpus->pairs());
  EXPECT_EQ(corpus->rows_per_sample(), 2);
  ASSERT_EQ(corpus->train_pairs().size(), 9u);
  ASSERT_EQ(corpus->val_pairs().size(), 1u);
  EXPECT_EQ(corpus->train_pairs()[0].chosen, models::tokens_of("1+1=2\n"));
  EXPECT_EQ(corpus->train_pairs()[0].margin, 0.5f);

  auto loader = *data_loader::create(*corpus, 16, 9, 0, 1, 5);
  const token_batch b = loader.next();
  ASSERT_EQ(b.batch, 18);
  EXPECT_EQ(b.global_targets, 9);
  ASSERT_EQ(b.margins.size(), 9u);
  int checked = 0;
  for (int pair = 0; pair < 9; ++pair) {
    const int32_t* chosen = b.tokens.data() + 2 * pair * 16;
    if (std::string(chosen, chosen + 4) != "1+1=") continue;
    ++checked;
    EXPECT_EQ(b.margins[pair], 0.5f);
    const int32_t* rejected = chosen + 16;
    EXPECT_EQ(rejected[4], '3');
    const int32_t* chosen_targets = b.targets.data() + 2 * pair * 16;
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(chosen_targets[t], t == 5 ? 1 : -1) << t;  // "1+1=2\n": scored at the newline
      EXPECT_EQ(chosen_targets[16 + t], t == 5 ? 0 : -1) << t;
    }
    EXPECT_EQ(chosen[6], 0) << "padding";
  }
  EXPECT_EQ(checked, 1);
  const auto val = loader.validation(4, 100);
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val[0].batch, 2);
}

TEST(PairData, BadLinesAreRefusedWithFileLineAndField) {
  testing::temp_dir dir;
  const std::string good = "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n";
  const auto refused = [&](const std::string& bad, int ctx = 32) {
    const std::string path = dir.write("bad.jsonl", good + bad + "\n" + good);
    const absl::Status s =
        text_corpus::load_pairs(path, 0.1, ctx, models::byte_vocabulary()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(path + ":2: "), std::string::npos) << s;
    return std::string(s.message());
  };
  EXPECT_NE(refused("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refused("{\"prompt\": \"a\", \"chosen\": \"b\"}").find("rejected is missing"),
            std::string::npos);
  EXPECT_NE(
      refused("{\"prompt\": \"a\", \"chosen\": \"\", \"rejected\": \"c\"}").find("chosen is empty"),
      std::string::npos);
  EXPECT_NE(refused("{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"b\"}")
                .find("the same response"),
            std::string::npos);
  EXPECT_NE(refused("{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\", "
                    "\"margin\": \"big\"}")
                .find("margin is not a number"),
            std::string::npos);
  EXPECT_NE(refused("{\"prompt\": \"aaa\", \"chosen\": \"b\", \"rejected\": \"ccc\"}", 5)
                .find("prompt + rejected is 6 tokens, longer than model.ctx = 5"),
            std::string::npos);
}

// A chat model (a trained vocabulary with configs/chat/chatml.jinja): an empty response is a
// reply of no text, which still trains on and scores the template's end of turn.
TEST(ChatData, AnEmptyReplyIsItsEndOfTurn) {
  testing::temp_dir dir;
  tokenizers::bpe_training_options options;
  options.vocab_size = 300;
  options.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  auto trained = tokenizers::train_byte_level_bpe({"user assistant", "1,2,3"}, options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  tokenizers::tokenizer_config_options config;
  config.eos_token = "<|im_end|>";
  std::ifstream chatml(TROUPE_SOURCE_DIR "/configs/chat/chatml.jinja");
  config.chat_template.assign(std::istreambuf_iterator<char>(chatml), {});
  ASSERT_FALSE(config.chat_template.empty());
  ASSERT_TRUE(
      tokenizers::write_trained_tokenizer(dir.path().string(), *trained, options, config).ok());
  auto chat = models::hf_vocabulary::load(dir.path().string(), 300);
  ASSERT_TRUE(chat.ok()) << chat.status();
  const int32_t im_end = 2;
  // Each line twice: one trained on, one held out.
  const auto twice = [&](const std::string& name, const std::string& line) {
    return dir.write(name, line + "\n" + line + "\n");
  };

  auto sft = text_corpus::load_sft(twice("sft.jsonl", R"({"prompt": "1,2=", "response": ""})"), 0.5,
                                   32, **chat);
  ASSERT_TRUE(sft.ok()) << sft.status();
  const sft_example& e = sft->train_examples()[0];
  EXPECT_EQ((*chat)->decode(e.tokens).value(), "user\n1,2=\nassistant\n\n");
  EXPECT_EQ(e.trained_targets(), 2) << "<|im_end|> and its newline";

  auto pairs = text_corpus::load_pairs(
      twice("pairs.jsonl", R"({"prompt": "1,2=", "chosen": "3", "rejected": ""})"), 0.5, 32,
      **chat);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  const preference_example& p = pairs->train_pairs()[0];
  ASSERT_EQ(p.rejected.size(), static_cast<size_t>(p.prompt_tokens) + 2);
  EXPECT_EQ(p.rejected[p.prompt_tokens], im_end);
  EXPECT_NE(p.chosen, p.rejected);
  EXPECT_NE(
      text_corpus::load_pairs(
          twice("bad.jsonl", R"({"prompt": "", "chosen": "3", "rejected": "4"})"), 0.5, 32, **chat)
          .status()
          .message()
          .find("prompt is empty"),
      std::string::npos);
}

}  // namespace
}  // namespace troupe::actors
