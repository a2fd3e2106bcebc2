// Tests of the zero-shot evaluation text (io/eval_text.h).
// Wikitext detokenizer: three texts whose expected output is Megatron-DeepSpeed's
// tasks/zeroshot_gpt/detokenizer.py wikitext_detokenizer run by Python on the same input
// (number separators, punctuation, bracket and quote pairs, heading markers, " N ", the
// /'[0-9]/ literal, U+3000 inside brackets, a lone "(" left alone), with Python's word count
// len(text.strip().split(" ")) of each. LAMBADA: strict and non-strict splits worked by hand
// with the byte tokenizer (trailing whitespace, a Unicode space between words), GPT-2 BPE
// consistency (strict target = encode(" " + last word), non-strict target = the last token),
// JSONL errors naming the line. load_eval_text: words of the raw text, tokens of the
// detokenized one, invalid UTF-8 refused with its offset. read_all_tokens: the fixture's
// listing. load_labeled_texts (bin/finetune's JSONL): text and label, bad lines named.
#include "io/eval_text.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "io/byte_tokenizer.h"
#include "io/tokenizer.h"
#include "tests/io/io_test_util.h"
#include "tests/io/tokenizer_fixture_cases.h"

namespace anvil::io {
namespace {

struct DetokCase {
  std::string in, out;
  int64_t words;
};

// Expected values from Python: wikitext_detokenizer(in) and len(in.strip().split(" ")).
const std::vector<DetokCase>& detok_cases() {
  static const std::vector<DetokCase> cases = {
      {" = Valkyria Chronicles III = \n \n Senj\u014d no Valkyria 3 : Unrecorded Chronicles ( "
       "Japanese : \u6226\u5834\u306e\u30f4\u30a1\u30eb\u30ad\u30e5\u30ea\u30a23 , lit . Valkyria "
       "of the Battlefield 3 ) , commonly referred to as Valkyria Chronicles III outside Japan , "
       "is a tactical role @-@ playing video game . \n",
       " = Valkyria Chronicles III =\n\nSenj\u014d no Valkyria 3: Unrecorded Chronicles "
       "(Japanese: \u6226\u5834\u306e\u30f4\u30a1\u30eb\u30ad\u30e5\u30ea\u30a23, lit. Valkyria "
       "of the Battlefield 3), commonly referred to as Valkyria Chronicles III outside Japan, is "
       "a tactical role-playing video game.\n",
       47},
      {" = = Gameplay = = \n It costs 1 @,@ 000 dollars , or 3 @.@ 5 % ; the players ' guns ! Is "
       "it ? \" quoted text \" and ' single ' [ bracket ] { brace } ( open \n",
       " == Gameplay ==\nIt costs 1,000 dollars, or 3.5 %; the players'guns! Is it? \"quoted "
       "text\" and' single ' [bracket] {brace} ( open\n",
       43},
      {"The N words , 20 \u00b0 C and it 's /' 5/ fine . = = = = Deep = = = = \u3000( "
       "\u3000wide\u3000 ) end",
       "The 1 words, 20\u00b0C and it's /'[0-9]/ fine. ==== Deep ==== \u3000(wide) end", 27},
  };
  return cases;
}

TEST(WikitextDetokenize, MatchesMegatronsPython) {
  for (const DetokCase& c : detok_cases()) {
    EXPECT_EQ(wikitext_detokenize(c.in), c.out) << c.in;
    EXPECT_EQ(megatron_word_count(c.in), c.words) << c.in;
  }
}

TEST(MegatronWordCount, SplitsOnSingleSpacesAfterStrip) {
  EXPECT_EQ(megatron_word_count("  a b  c \n"), 4);  // ['a', 'b', '', 'c']
  EXPECT_EQ(megatron_word_count(""), 1);             // [''] in Python
  EXPECT_EQ(megatron_word_count(" \t\n"), 1);
  EXPECT_EQ(megatron_word_count("a\nb c"), 2);  // newlines do not split
  EXPECT_EQ(megatron_word_count("\u3000a b\u3000"), 2);
}

TEST(ParseDetokenizer, NamesTheChoices) {
  EXPECT_EQ(*parse_detokenizer("wikitext"), Detokenizer::kWikitext);
  EXPECT_EQ(*parse_detokenizer("none"), Detokenizer::kNone);
  auto bad = parse_detokenizer("ptb");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("none or wikitext"), std::string::npos);
}

std::vector<int32_t> bytes(const std::string& s) { return ByteTokenizer().encode(s); }

TEST(LambadaSplit, StrictAndNonStrictByHandWithBytes) {
  const ByteTokenizer tok;
  // Non-strict: the last token (byte) is the target.
  auto ns = lambada_split("ab cd", tok, false);
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(ns->context, bytes("ab c"));
  EXPECT_EQ(ns->target, bytes("d"));
  // Strict: the last word with its leading space; the context stripped.
  auto st = lambada_split("ab cd", tok, true);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->context, bytes("ab"));
  EXPECT_EQ(st->target, bytes(" cd"));
  // Trailing whitespace: strict ignores it, non-strict predicts it (as Megatron).
  auto st2 = lambada_split(" x  yz \n", tok, true);
  ASSERT_TRUE(st2.ok());
  EXPECT_EQ(st2->context, bytes("x"));
  EXPECT_EQ(st2->target, bytes(" yz"));
  auto ns2 = lambada_split(" x  yz \n", tok, false);
  ASSERT_TRUE(ns2.ok());
  EXPECT_EQ(ns2->target, bytes("\n"));
  // A Unicode space (U+3000) separates words in Python's split().
  auto u = lambada_split("p\u3000q", tok, true);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->context, bytes("p"));
  EXPECT_EQ(u->target, bytes(" q"));
  // The last word repeated earlier: the context keeps the earlier one.
  auto rep = lambada_split("go go", tok, true);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->context, bytes("go"));
  EXPECT_EQ(rep->target, bytes(" go"));
  EXPECT_FALSE(lambada_split("  \n", tok, true).ok());
  EXPECT_FALSE(lambada_split("a", tok, false).ok());
}

TEST(LambadaSplit, Gpt2BpeStrictTargetIsTheWholeLastWord) {
  auto tok = make_tokenizer({"GPT2BPE", testing::repo_path("data/gpt2/encoder.json"),
                             testing::repo_path("data/gpt2/vocab.bpe")});
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text = "Their guide that evening was the famous Dr. Anticonstitutionnel";
  auto st = lambada_split(text, **tok, true);
  auto ns = lambada_split(text, **tok, false);
  ASSERT_TRUE(st.ok() && ns.ok());
  const std::vector<int32_t> word = (*tok)->encode(" Anticonstitutionnel");
  ASSERT_GT(word.size(), 1u);  // a word of several BPE tokens: the two variants differ
  EXPECT_EQ(st->target, word);
  EXPECT_EQ(st->context, (*tok)->encode("Their guide that evening was the famous Dr."));
  const std::vector<int32_t> all = (*tok)->encode(text);
  EXPECT_EQ(ns->target, std::vector<int32_t>{all.back()});
  EXPECT_EQ(ns->context, std::vector<int32_t>(all.begin(), all.end() - 1));
}

TEST(LoadLambada, ReadsJsonlAndNamesBadLines) {
  testing::ScratchDir dir;
  const ByteTokenizer tok;
  const std::string good = dir.file("good.jsonl");
  testing::write_file(good, "{\"text\": \"ab cd\"}\n\n{\"text\": \"x y\", \"id\": 3}\n");
  auto ex = load_lambada(good, tok, true);
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->size(), 2u);
  EXPECT_EQ((*ex)[1].target, bytes(" y"));

  auto expect_error = [&](const std::string& body, const std::string& needle) {
    const std::string p = dir.file("bad.jsonl");
    testing::write_file(p, body);
    auto r = load_lambada(p, tok, true);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(std::string(r.status().message()).find(needle), std::string::npos)
        << r.status().message();
  };
  expect_error("{\"text\": \"a b\"}\n{\"txt\": \"a b\"}\n", "bad.jsonl:2");
  expect_error("{\"text\": \"a b\"}\nnot json\n", "bad.jsonl:2");
  expect_error("[1, 2]\n", "bad.jsonl:1: expected a JSON object");
  expect_error("{\"text\": \"  \"}\n", "bad.jsonl:1: the text has no word");
  expect_error("\n\n", "no examples");
  EXPECT_FALSE(load_lambada(dir.file("missing.jsonl"), tok, true).ok());
}

TEST(LoadLabeledTexts, ReadsTextAndLabelAndNamesBadLines) {
  testing::ScratchDir dir;
  const ByteTokenizer tok;
  const std::string p = dir.file("c.jsonl");
  testing::write_file(p, "{\"text\": \"ab\", \"label\": 1}\n\n{\"label\": 0, \"text\": \"c\"}\n");
  auto ex = load_labeled_texts(p, tok);
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->size(), 2u);
  EXPECT_EQ((*ex)[0].tokens, bytes("ab"));
  EXPECT_EQ((*ex)[0].label, 1);
  EXPECT_EQ((*ex)[1].label, 0);
  for (const auto& [body, needle] : std::vector<std::pair<std::string, std::string>>{
           {"{\"text\": \"ab\"}\n", "c.jsonl:1: no field \"label\""},
           {"{\"text\": \"ab\", \"label\": -1}\n", "c.jsonl:1: label -1"},
           {"{\"text\": \"\", \"label\": 0}\n", "c.jsonl:1: the text has no token"},
           {"{\"text\": \"a\", \"label\": \"x\"}\n", "c.jsonl:1"}}) {
    testing::write_file(p, body);
    auto r = load_labeled_texts(p, tok);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(std::string(r.status().message()).find(needle), std::string::npos)
        << r.status().message();
  }
}

TEST(LoadEvalText, WordsFromRawTextTokensFromDetokenized) {
  testing::ScratchDir dir;
  const ByteTokenizer tok;
  const DetokCase& c = detok_cases()[1];
  const std::string p = dir.file("wiki.txt");
  testing::write_file(p, c.in);
  auto t = load_eval_text(p, tok, Detokenizer::kWikitext);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->words, c.words);
  EXPECT_EQ(t->tokens, bytes(c.out));
  auto raw = load_eval_text(p, tok, Detokenizer::kNone);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->tokens, bytes(c.in));

  testing::write_file(p,
                      "abc\xff"
                      "def");
  auto bad = load_eval_text(p, tok, Detokenizer::kNone);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("invalid UTF-8 at byte 3"), std::string::npos);
}

TEST(ReadAllTokens, EveryDocumentInOrder) {
  for (const char* name : {"megatron_u16", "megatron_i32"}) {
    const std::string prefix = testing::fixture_dir() + "/" + name;
    std::vector<int32_t> want;
    for (const auto& doc : testing::read_listing(prefix + ".txt")) {
      for (const auto& seq : doc) want.insert(want.end(), seq.begin(), seq.end());
    }
    auto got = read_all_tokens(prefix);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << name;
  }
  EXPECT_FALSE(read_all_tokens(testing::fixture_dir() + "/nothing_here").ok());
}

}  // namespace
}  // namespace anvil::io
