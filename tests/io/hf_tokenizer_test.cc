// Hugging Face tokenizer.json (io/tokenizers/hf_tokenizer.h) against the parity fixture: the
// gpt2 column with gpt2_tokenizer.json (byte-level BPE) and the bert_uncased column with
// bert_uncased_tokenizer.json (BertNormalizer + BertPreTokenizer + WordPiece). Both files and the
// ids were written by scripts/gpu/make_tokenizer_fixtures.py, which checked that
// tokenizers.Tokenizer.from_file on them reproduces ids two independent references agreed on.
// Also: added tokens (special and normalized, lstrip/rstrip/single_word), directories and side
// files, sentinels, decoders and round trips, errors naming the file/component, thread safety.
#include "io/tokenizers/hf_tokenizer.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tokenizers/factories.h"
#include "io/tokenizers/utf8.h"
#include "nlohmann/json.hpp"
#include "tests/io/io_test_util.h"
#include "tests/io/tokenizer_fixture_cases.h"

namespace anvil::io {
namespace {

using testing::describe_case;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::load_tokenizer_cases;
using testing::tokenizer_fixture;
using json = nlohmann::json;

std::unique_ptr<HfTokenizer> load_hf(const std::string& file, int extra_ids = 0) {
  auto tok = HfTokenizer::load(tokenizer_fixture(file), extra_ids);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// A fixture tokenizer.json, edited by `edit`, loaded from memory.
std::unique_ptr<HfTokenizer> load_edited(const std::string& file,
                                         const std::function<void(json*)>& edit) {
  json j = json::parse(testing::read_file(tokenizer_fixture(file)));
  edit(&j);
  auto tok = HfTokenizer::from_json(j.dump(), file + " (edited)");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

void expect_column(const Tokenizer& tok, const std::string& column) {
  const auto cases = load_tokenizer_cases();
  ASSERT_GE(cases.size(), 100u);
  for (const auto& c : cases) {
    ASSERT_TRUE(c.ids.count(column)) << describe_case(c);
    EXPECT_EQ(tok.encode(c.bytes), c.ids.at(column)) << describe_case(c);
  }
}

TEST(HfTokenizerTest, Gpt2MatchesFixture) {
  auto tok = load_hf("gpt2_tokenizer.json");
  ASSERT_NE(tok, nullptr);
  expect_column(*tok, "gpt2");
}

TEST(HfTokenizerTest, BertMatchesFixture) {
  auto tok = load_hf("bert_uncased_tokenizer.json");
  ASSERT_NE(tok, nullptr);
  expect_column(*tok, "bert_uncased");
}

TEST(HfTokenizerTest, FactoryTakesADirectory) {
  testing::ScratchDir dir;
  testing::write_file(dir.file("tokenizer.json"),
                      testing::read_file(tokenizer_fixture("bert_uncased_tokenizer.json")));
  TokenizerOptions o;
  o.type = "HF";
  o.vocab_file = dir.path();
  auto tok = make_hf_tokenizer(o);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->name(), "HF");
  expect_column(**tok, "bert_uncased");
}

TEST(HfTokenizerTest, SpecialTokensWithoutSideFiles) {
  auto gpt2 = load_hf("gpt2_tokenizer.json");
  ASSERT_NE(gpt2, nullptr);
  EXPECT_EQ(gpt2->vocab_size(), 50257);
  EXPECT_EQ(gpt2->special().eod, 50256);
  EXPECT_EQ(gpt2->special().eos, 50256);
  EXPECT_EQ(gpt2->special().bos, 50256);
  EXPECT_EQ(gpt2->special().pad, -1);
  EXPECT_TRUE(gpt2->special().sentinels.empty());

  auto bert = load_hf("bert_uncased_tokenizer.json");
  ASSERT_NE(bert, nullptr);
  EXPECT_EQ(bert->vocab_size(), 30522);
  const SpecialTokens& s = bert->special();
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.unk, 100);
  EXPECT_EQ(s.cls, 101);
  EXPECT_EQ(s.sep, 102);
  EXPECT_EQ(s.mask, 103);
  EXPECT_EQ(s.eos, -1);
  EXPECT_EQ(s.eod, -1);
  EXPECT_EQ(bert->token(101), "[CLS]");
  EXPECT_EQ(bert->token_to_id("hello"), 7592);
}

TEST(HfTokenizerTest, SpecialTokensFromSideFiles) {
  testing::ScratchDir dir;
  testing::write_file(dir.file("tokenizer.json"),
                      testing::read_file(tokenizer_fixture("bert_uncased_tokenizer.json")));
  testing::write_file(dir.file("tokenizer_config.json"),
                      R"({"cls_token": "[CLS]", "eos_token": "[MASK]", "model_max_length": 512})");
  // special_tokens_map.json overrides tokenizer_config.json.
  testing::write_file(
      dir.file("special_tokens_map.json"),
      R"({"eos_token": "[SEP]", "pad_token": {"content": "[PAD]", "lstrip": false}})");
  auto tok = HfTokenizer::load(dir.path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const SpecialTokens& s = (*tok)->special();
  EXPECT_EQ(s.eos, 102);
  EXPECT_EQ(s.eod, 102);  // = eos, as Megatron's PretrainedFromHF
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.cls, 101);
  EXPECT_EQ(s.mask, -1);  // named in neither file

  testing::write_file(dir.file("special_tokens_map.json"), "{\"eos_token\": ");
  auto bad = HfTokenizer::load(dir.path());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("special_tokens_map.json"));
}

TEST(HfTokenizerTest, SpecialAddedTokensAreMatchedInText) {
  auto gpt2 = load_hf("gpt2_tokenizer.json");
  ASSERT_NE(gpt2, nullptr);
  std::vector<int32_t> expected = gpt2->encode("Hello");
  expected.push_back(50256);
  const std::vector<int32_t> world = gpt2->encode(" world");
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(gpt2->encode("Hello<|endoftext|> world"), expected);
  // Not normalized, so the match is exact.
  for (const int32_t id : gpt2->encode("<|EndOfText|> <|endoftext")) EXPECT_NE(id, 50256);

  auto bert = load_hf("bert_uncased_tokenizer.json");
  ASSERT_NE(bert, nullptr);
  EXPECT_THAT(bert->encode("[CLS] Hello [SEP][MASK]"), ElementsAre(101, 7592, 102, 103));
  // normalized=false: "[cls]" is ordinary text ("[", "cl", "##s", "]").
  EXPECT_THAT(bert->encode("[cls]"), ::testing::Not(ElementsAre(101)));
}

TEST(HfTokenizerTest, SentinelsAppended) {
  auto tok = load_hf("gpt2_tokenizer.json", 2);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->special().sentinels, ElementsAre(50257, 50258));
  EXPECT_EQ(tok->vocab_size(), 50259);
  const std::vector<int32_t> ids = tok->encode("a<extra_id_1>b");
  EXPECT_THAT(ids, ElementsAre(64, 50258, 65));
  auto text = tok->decode(ids);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "a<extra_id_1>b");
}

TEST(HfTokenizerTest, ByteLevelDecodeRoundTrips) {
  auto tok = load_hf("gpt2_tokenizer.json");
  ASSERT_NE(tok, nullptr);
  for (const auto& c : load_tokenizer_cases()) {
    auto text = tok->decode(c.ids.at("gpt2"));
    ASSERT_TRUE(text.ok()) << describe_case(c) << ": " << text.status();
    // The byte-level model is lossless on the text it saw (ill-formed input replaced first).
    EXPECT_EQ(*text, utf8::replace_invalid(c.bytes)) << describe_case(c);
  }
  // A multi-byte character split across ids decodes lossily, as tokenizers does.
  const std::vector<int32_t> ids = tok->encode("\xE6\x97\xA5");
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(*tok->decode({ids[0]}), "\xEF\xBF\xBD");
  auto bad = tok->decode({50257});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("50257"));
}

TEST(HfTokenizerTest, WordPieceDecoderCleansUp) {
  auto tok = load_hf("bert_uncased_tokenizer.json");
  ASSERT_NE(tok, nullptr);
  auto text = tok->decode(tok->encode("Hello, World! Unaffable."));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hello, world! unaffable.");
  // tokenizers cleans up each token on its own, so " ' " never matches across tokens.
  EXPECT_EQ(*tok->decode(tok->encode("I'm")), "i ' m");
  EXPECT_EQ(*tok->decode({101, 7592, 102}), "[CLS] hello [SEP]");
}

TEST(HfTokenizerTest, PreTokenizerOptions) {
  auto base = load_hf("gpt2_tokenizer.json");
  ASSERT_NE(base, nullptr);
  auto prefixed = load_edited("gpt2_tokenizer.json",
                              [](json* j) { (*j)["pre_tokenizer"]["add_prefix_space"] = true; });
  ASSERT_NE(prefixed, nullptr);
  EXPECT_EQ(prefixed->encode("Hello world"), base->encode(" Hello world"));
  EXPECT_EQ(prefixed->encode(" Hello"), base->encode(" Hello"));  // already has one
  EXPECT_TRUE(prefixed->encode("").empty());

  auto ignore =
      load_edited("gpt2_tokenizer.json", [](json* j) { (*j)["model"]["ignore_merges"] = true; });
  ASSERT_NE(ignore, nullptr);
  EXPECT_THAT(ignore->encode(" Hello"), ElementsAre(18435));  // the word is a token
  EXPECT_EQ(ignore->encode("In the beginning"), base->encode("In the beginning"));

  // Without the regex the whole text is one piece: merges may cross the space.
  auto no_regex = load_edited("gpt2_tokenizer.json",
                              [](json* j) { (*j)["pre_tokenizer"]["use_regex"] = false; });
  ASSERT_NE(no_regex, nullptr);
  EXPECT_EQ(*no_regex->decode(no_regex->encode("Hello world  !")), "Hello world  !");
  EXPECT_THAT(no_regex->encode("Hello"), ElementsAre(15496));
}

// A tiny WordPiece tokenizer.json whose behaviour is known by construction.
std::string tiny_wordpiece(const json& added, const json& normalizer, const json& pre) {
  json j;
  j["version"] = "1.0";
  j["added_tokens"] = added;
  j["normalizer"] = normalizer;
  j["pre_tokenizer"] = pre;
  j["model"] = {{"type", "WordPiece"},
                {"unk_token", "[UNK]"},
                {"continuing_subword_prefix", "##"},
                {"max_input_chars_per_word", 100},
                {"vocab", {{"[UNK]", 0}, {"a", 1}, {"##b", 2}, {"hi", 3}, {"xy", 4}, {"ab", 5}}}};
  j["decoder"] = nullptr;
  return j.dump();
}

json added_token(const std::string& content, int id, bool special, bool lstrip, bool rstrip,
                 bool single_word, bool normalized) {
  return {{"id", id},          {"content", content}, {"single_word", single_word},
          {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", normalized},
          {"special", special}};
}

TEST(HfTokenizerTest, AddedTokenOptions) {
  const json bert_pre = {{"type", "BertPreTokenizer"}};
  // No pre-tokenizer: each text segment between added tokens is one WordPiece word, so
  // whitespace that lstrip/rstrip did not swallow makes the word unknown.
  {
    const json added = json::array({added_token("<m>", 10, true, true, true, false, false)});
    auto tok = HfTokenizer::from_json(tiny_wordpiece(added, nullptr, nullptr), "tiny");
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_THAT((*tok)->encode("a<m>hi"), ElementsAre(1, 10, 3));
    EXPECT_THAT((*tok)->encode("a  <m>  hi"), ElementsAre(1, 10, 3));
    EXPECT_EQ((*tok)->vocab_size(), 11);
  }
  {
    const json added = json::array({added_token("<m>", 10, true, false, false, false, false)});
    auto tok = HfTokenizer::from_json(tiny_wordpiece(added, nullptr, nullptr), "tiny");
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_THAT((*tok)->encode("a <m>hi"), ElementsAre(0, 10, 3));  // "a " is unknown
  }
  // single_word: only matched with no word character on either side.
  {
    const json added = json::array({added_token("xy", 4, false, false, false, true, false)});
    auto tok = HfTokenizer::from_json(tiny_wordpiece(added, nullptr, bert_pre), "tiny");
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_THAT((*tok)->encode("a xy hi"), ElementsAre(1, 4, 3));
    EXPECT_THAT((*tok)->encode("axy"), ElementsAre(0));  // not split off: "axy" is unknown
  }
  // normalized=true: matched after normalization, against the normalized content.
  {
    const json added = json::array({added_token("HI", 11, false, false, false, false, true)});
    const json lower = {{"type", "Sequence"},
                        {"normalizers", json::array({{{"type", "NFD"}}, {{"type", "Lowercase"}}})}};
    auto tok = HfTokenizer::from_json(tiny_wordpiece(added, lower, bert_pre), "tiny");
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_THAT((*tok)->encode("Hi A hI"), ElementsAre(11, 1, 11));
    EXPECT_THAT((*tok)->encode("AB"), ElementsAre(5));
  }
  // Longest match wins at the leftmost position.
  {
    const json added = json::array({added_token("<a>", 12, true, false, false, false, false),
                                    added_token("<a><b>", 13, true, false, false, false, false)});
    auto tok = HfTokenizer::from_json(tiny_wordpiece(added, nullptr, bert_pre), "tiny");
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_THAT((*tok)->encode("a<a><b><a>"), ElementsAre(1, 13, 12));
    EXPECT_EQ(*(*tok)->decode({1, 13, 12}), "a <a><b> <a>");  // no decoder: joined by ' '
  }
}

TEST(HfTokenizerTest, MissingCorruptAndUnsupported) {
  testing::ScratchDir dir;
  auto missing = HfTokenizer::load(dir.file("none.json"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("none.json"));

  auto no_file = HfTokenizer::load(dir.path());  // a directory without tokenizer.json
  EXPECT_EQ(no_file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_file.status().message()), HasSubstr("tokenizer.json"));

  const std::string good = testing::read_file(tokenizer_fixture("bert_uncased_tokenizer.json"));
  testing::write_file(dir.file("cut.json"), good.substr(0, 2000));
  auto cut = HfTokenizer::load(dir.file("cut.json"));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("cut.json:"));
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("not valid JSON"));

  auto expect_unimplemented = [&](const std::function<void(json*)>& edit, const char* what) {
    json j = json::parse(good);
    edit(&j);
    auto tok = HfTokenizer::from_json(j.dump(), "edited.json");
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented) << what;
    EXPECT_THAT(std::string(tok.status().message()), HasSubstr(what));
    EXPECT_THAT(std::string(tok.status().message()), HasSubstr("edited.json"));
  };
  expect_unimplemented([](json* j) { (*j)["model"]["type"] = "Wordish"; }, "Wordish");
  expect_unimplemented([](json* j) { (*j)["normalizer"] = {{"type", "Uppercase"}}; }, "Uppercase");
  expect_unimplemented(
      [](json* j) {
        (*j)["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
      },
      "UnicodeScripts");
  expect_unimplemented([](json* j) { (*j)["decoder"] = {{"type", "Reverse"}}; }, "Reverse");
  expect_unimplemented([](json* j) { (*j)["post_processor"] = {{"type", "Shuffle"}}; }, "Shuffle");

  // A regex Oniguruma rejects names the field and Oniguruma's reason.
  json r = json::parse(good);
  r["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "(unclosed"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  auto bad_regex = HfTokenizer::from_json(r.dump(), "edited.json");
  EXPECT_EQ(bad_regex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_regex.status().message()), HasSubstr("pre_tokenizer.pattern"));
  EXPECT_THAT(std::string(bad_regex.status().message()), HasSubstr("Oniguruma"));

  json j = json::parse(good);
  j["model"]["vocab"]["hello"] = "seven";
  auto bad_id = HfTokenizer::from_json(j.dump(), "edited.json");
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_id.status().message()), HasSubstr("hello"));

  j = json::parse(good);
  j["model"]["vocab"].erase("[UNK]");
  auto no_unk = HfTokenizer::from_json(j.dump(), "edited.json");
  EXPECT_EQ(no_unk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_unk.status().message()), HasSubstr("unk_token"));
}

// make_tokenizer (io/tokenizer.cc) reaches the WordPiece, SentencePiece and HF factories.
TEST(HfTokenizerTest, MakeTokenizerDispatches) {
  struct Case {
    const char* type;
    std::string vocab;
    const char* column;
  };
  const Case cases[] = {
      {"BertWordPieceLowerCase", testing::repo_path("data/bert/vocab.txt"), "bert_uncased"},
      {"BertWordPieceCase", testing::repo_path("data/bert/vocab.txt"), "bert_cased"},
      {"SentencePiece", testing::repo_path("data/t5/spm.model"), "spm"},
      {"HF", tokenizer_fixture("gpt2_tokenizer.json"), "gpt2"},
  };
  for (const Case& c : cases) {
    TokenizerOptions o;
    o.type = c.type;
    o.vocab_file = c.vocab;
    auto tok = make_tokenizer(o);
    ASSERT_TRUE(tok.ok()) << c.type << ": " << tok.status();
    expect_column(**tok, c.column);
  }
}

TEST(HfTokenizerTest, ConcurrentEncodeIsConsistent) {
  auto gpt2 = load_hf("gpt2_tokenizer.json");
  auto bert = load_hf("bert_uncased_tokenizer.json");
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(bert, nullptr);
  const auto cases = load_tokenizer_cases();
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep) {
        for (size_t i = 0; i < cases.size(); ++i) {
          const auto& c = cases[(i + t * 29) % cases.size()];
          if (gpt2->encode(c.bytes) != c.ids.at("gpt2")) ++mismatches[t];
          if (bert->encode(c.bytes) != c.ids.at("bert_uncased")) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace anvil::io
