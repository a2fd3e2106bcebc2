// BERT WordPiece (io/tokenizers/wordpiece.h) against the parity fixture: the bert_uncased and
// bert_cased columns of expected_ids.jsonl, which HF tokenizers' BertWordPieceTokenizer and a
// plain-Python BERT tokenizer (scripts/gpu/make_tokenizer_fixtures.py) agreed on, over
// data/bert/vocab.txt (bert-base-uncased). Also Megatron's added tokens, decode, the normalizer's
// rule sets, errors naming the file, and concurrent encodes.
#include "io/tokenizers/wordpiece.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tokenizers/bert_normalizer.h"
#include "io/tokenizers/factories.h"
#include "tests/io/io_test_util.h"
#include "tests/io/tokenizer_fixture_cases.h"

namespace anvil::io {
namespace {

using testing::describe_case;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::load_tokenizer_cases;
using testing::repo_path;

std::unique_ptr<BertWordPieceTokenizer> load_bert(bool lower_case, int extra_ids = 0,
                                                  int max_chars = 100) {
  WordPieceOptions o;
  o.vocab_file = repo_path("data/bert/vocab.txt");
  o.lower_case = lower_case;
  o.vocab_extra_ids = extra_ids;
  o.max_input_chars_per_word = max_chars;
  auto tok = BertWordPieceTokenizer::load(o);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

void expect_fixture_column(const Tokenizer& tok, const std::string& column) {
  const auto cases = load_tokenizer_cases();
  ASSERT_GE(cases.size(), 100u);
  int checked = 0;
  for (const auto& c : cases) {
    const auto it = c.ids.find(column);
    ASSERT_NE(it, c.ids.end()) << describe_case(c) << " has no column " << column;
    EXPECT_EQ(tok.encode(c.bytes), it->second) << describe_case(c);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
}

TEST(WordPieceTest, UncasedMatchesFixture) {
  auto tok = load_bert(true);
  ASSERT_NE(tok, nullptr);
  expect_fixture_column(*tok, "bert_uncased");
}

TEST(WordPieceTest, CasedMatchesFixture) {
  auto tok = load_bert(false);
  ASSERT_NE(tok, nullptr);
  expect_fixture_column(*tok, "bert_cased");
}

TEST(WordPieceTest, FactoryMatchesFixture) {
  TokenizerOptions o;
  o.type = "BertWordPieceLowerCase";
  o.vocab_file = repo_path("data/bert/vocab.txt");
  auto tok = make_wordpiece_tokenizer(o, /*lower_case=*/true);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->name(), "BertWordPieceLowerCase");
  expect_fixture_column(**tok, "bert_uncased");
}

TEST(WordPieceTest, KnownSegmentation) {
  auto tok = load_bert(true);
  ASSERT_NE(tok, nullptr);
  // (ids checked with the plain-Python reference of scripts/gpu/make_tokenizer_fixtures.py)
  const std::vector<int32_t> ids = tok->encode("UNAFFABLE Héllo,world");
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.emplace_back(tok->token(id));
  EXPECT_THAT(pieces, ElementsAre("una", "##ffa", "##ble", "hello", ",", "world"));
}

TEST(WordPieceTest, MegatronSpecialAndAddedTokens) {
  auto tok = load_bert(true, /*extra_ids=*/3);
  ASSERT_NE(tok, nullptr);
  const SpecialTokens& s = tok->special();
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.unk, 100);
  EXPECT_EQ(s.cls, 101);
  EXPECT_EQ(s.sep, 102);
  EXPECT_EQ(s.mask, 103);
  EXPECT_EQ(s.eod, -1);  // Megatron's BERT tokenizers have no EOD
  // [BOS] [EOS] then the sentinels, appended after the 30522 lines of vocab.txt.
  EXPECT_EQ(s.bos, 30522);
  EXPECT_EQ(s.eos, 30523);
  EXPECT_THAT(s.sentinels, ElementsAre(30524, 30525, 30526));
  EXPECT_EQ(tok->vocab_size(), 30527);
  EXPECT_EQ(tok->token(30522), "[BOS]");
  EXPECT_EQ(tok->token(30526), "<extra_id_2>");
  // Encode never produces them: the basic tokenizer splits the brackets off.
  for (const int32_t id : tok->encode("[BOS] <extra_id_0> [CLS]")) EXPECT_LT(id, 30522);

  auto cased = load_bert(false);
  ASSERT_NE(cased, nullptr);
  EXPECT_EQ(cased->name(), "BertWordPieceCase");
  EXPECT_EQ(cased->special().bos, 30522);  // Megatron adds them for both cases
  EXPECT_EQ(cased->vocab_size(), 30524);
}

TEST(WordPieceTest, DecodeJoinsPieces) {
  auto tok = load_bert(true, 1);
  ASSERT_NE(tok, nullptr);
  auto text = tok->decode(tok->encode("Hello, WORLD! unaffable"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hello , world ! unaffable");  // una ##ffa ##ble joined
  auto with_special = tok->decode({101, 7592, 102, tok->special().sentinels[0]});
  ASSERT_TRUE(with_special.ok());
  EXPECT_EQ(*with_special, "[CLS] hello [SEP] <extra_id_0>");
  EXPECT_EQ(*tok->decode({}), "");
  auto bad = tok->decode({7592, 30525});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("30525"));
  EXPECT_EQ(tok->decode({-1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WordPieceTest, LongWordLimit) {
  const std::string word(150, 'a');
  auto hf = load_bert(true);  // 100, as tokenizers
  ASSERT_NE(hf, nullptr);
  EXPECT_THAT(hf->encode(word), ElementsAre(100));
  auto megatron = load_bert(true, 0, 200);  // Google's / Megatron's WordpieceTokenizer
  ASSERT_NE(megatron, nullptr);
  const auto ids = megatron->encode(word);
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 100), 0);
  // A word of exactly the limit is still segmented.
  EXPECT_NE(hf->encode(std::string(100, 'a')), std::vector<int32_t>{100});
}

TEST(WordPieceTest, MissingAndCorruptVocab) {
  testing::ScratchDir dir;
  WordPieceOptions o;
  o.vocab_file = dir.file("nope.txt");
  auto missing = BertWordPieceTokenizer::load(o);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("nope.txt"));

  testing::write_file(dir.file("empty.txt"), "");
  o.vocab_file = dir.file("empty.txt");
  auto empty = BertWordPieceTokenizer::load(o);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("empty.txt"));

  // A binary file (here the SentencePiece model) is no vocab.txt: the required tokens are absent.
  o.vocab_file = repo_path("data/t5/spm.model");
  auto binary = BertWordPieceTokenizer::load(o);
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(binary.status().message()), HasSubstr("spm.model"));

  testing::write_file(dir.file("small.txt"), "[PAD]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  o.vocab_file = dir.file("small.txt");
  auto no_unk = BertWordPieceTokenizer::load(o);
  EXPECT_EQ(no_unk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_unk.status().message()), HasSubstr("[UNK]"));
}

TEST(WordPieceTest, SmallVocabRules) {
  testing::ScratchDir dir;
  // CRLF line ends and surrounding spaces are stripped (load_vocab's token.strip()).
  testing::write_file(dir.file("v.txt"),
                      "[PAD]\r\n[UNK]\r\n[CLS]\n[SEP]\n[MASK]\n  ab \nc\n##c\n##d\n[BOS]\n");
  WordPieceOptions o;
  o.vocab_file = dir.file("v.txt");
  o.vocab_extra_ids = 1;
  auto tok = BertWordPieceTokenizer::load(o);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->special().bos, 9);   // present: not added again
  EXPECT_EQ((*tok)->special().eos, 10);  // appended
  EXPECT_THAT((*tok)->special().sentinels, ElementsAre(11));
  EXPECT_EQ((*tok)->vocab_size(), 12);
  // Greedy longest match first; a word without a full segmentation is one [UNK].
  EXPECT_THAT((*tok)->encode("abcd c ab cx"), ElementsAre(5, 7, 8, 6, 5, 1));
}

TEST(WordPieceTest, NormalizerRuleSets) {
  BertNormalizerOptions py;  // lowercase + strip accents, Python rules
  std::string out;
  // 'İ' lowercases to "i̇" and then loses its dot; Å (U+212B) decomposes; NBSP -> space;
  // ZWSP (Cf) and BEL (Cc) are dropped; CJK gets spaces.
  bert_normalize("\xC4\xB0stanbul \xE2\x84\xAB\xC2\xA0x\xE2\x80\x8By\x07z\xE4\xB8\xAD", py, &out);
  EXPECT_EQ(out, "istanbul a xyz \xE4\xB8\xAD ");
  BertNormalizerOptions cased = py;
  cased.lowercase = false;
  cased.strip_accents = false;
  bert_normalize("\xC4\xB0 \xC3\xA9", cased, &out);
  EXPECT_EQ(out, "\xC4\xB0 \xC3\xA9");
  cased.lowercase = true;  // lowercase without stripping keeps the combining dot
  bert_normalize("\xC4\xB0", cased, &out);
  EXPECT_EQ(out, "i\xCC\x87");
  // Private use (Co): kept by the Python rules, dropped by tokenizers' (is_other).
  bert_normalize(
      "a\xEE\x80\x80"
      "b",
      py, &out);
  EXPECT_EQ(out,
            "a\xEE\x80\x80"
            "b");
  BertNormalizerOptions hf = py;
  hf.rules = BertNormalizerOptions::Rules::kHf;
  bert_normalize(
      "a\xEE\x80\x80"
      "b",
      hf, &out);
  EXPECT_EQ(out, "ab");
  // Ill-formed UTF-8 decodes to U+FFFD, which clean_text drops, one maximal subpart at a time.
  bert_normalize(
      "a\xE6\x97"
      "b\xFF"
      "c",
      py, &out);
  EXPECT_EQ(out, "abc");

  std::vector<std::pair<size_t, size_t>> words;
  const std::string text =
      "ab,c  d\xE2\x80\xA8"
      "e$";  // U+2028 separates like Python's split()
  bert_pre_tokenize(text, &words);
  std::vector<std::string> got;
  for (const auto& [b, e] : words) got.push_back(text.substr(b, e - b));
  EXPECT_THAT(got, ElementsAre("ab", ",", "c", "d", "e", "$"));
}

TEST(WordPieceTest, ConcurrentEncodeIsConsistent) {
  auto tok = load_bert(true);
  ASSERT_NE(tok, nullptr);
  const auto cases = load_tokenizer_cases();
  std::vector<std::vector<int32_t>> expected;
  for (const auto& c : cases) expected.push_back(tok->encode(c.bytes));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < cases.size(); ++i) {
          const size_t k = (i + t * 31) % cases.size();  // different orders per thread
          if (tok->encode(cases[k].bytes) != expected[k]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace anvil::io
