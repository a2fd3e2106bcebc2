// Components of the tokenizer.json pipeline on small hand-made cases whose expected values follow
// from tokenizers' definitions (the real-file parity is tests/io/hf_parity_test.cc):
//   - the Llama 3 / Qwen Split scanners (hf_fast_splits.h) against Oniguruma on generated text;
//   - HfPattern: Oniguruma's reading of BLOOM's nested class (PCRE2 rejects the pattern), and
//     the onig crate's find_iter rule for empty matches;
//   - BPE: byte_fallback, unk with and without fuse_unk, continuing_subword_prefix and
//     end_of_word_suffix, ignore_merges;
//   - Unigram: the Viterbi best path, fused unknowns, byte_fallback;
//   - decoders without a real file here (BPEDecoder, CTC) and Strip's counts.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tokenizers/hf_decoders.h"
#include "io/tokenizers/hf_fast_splits.h"
#include "io/tokenizers/hf_pattern.h"
#include "io/tokenizers/hf_tokenizer.h"
#include "nlohmann/json.hpp"

namespace anvil::io::hf_internal {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> match_strings(const HfPattern& p, const std::string& text) {
  std::vector<PatternMatch> m;
  p.find_matches(text, &m);
  std::vector<std::string> out;
  for (const PatternMatch& x : m) {
    out.push_back((x.is_match ? "+" : "-") + text.substr(x.begin, x.end - x.begin));
  }
  return out;
}

TEST(HfPatternTest, BloomNestedClassIsOnePunctuationSet) {
  // Oniguruma: [^(\s|[.,!?…。，、।۔،])] is one class: not '(' '|' ')' whitespace or the set.
  auto p = HfPattern::create(Ctx{"t"}, {true, " ?[^(\\s|[.,!?…。，、।۔،])]+"}, "pattern");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(match_strings(**p, "a,b (c|d) e。f"),
              ElementsAre("+a", "-,", "+b", "- (", "+c", "-|", "+d", "-)", "+ e", "-。", "+f"));
}

TEST(HfPatternTest, EmptyMatchesFollowTheOnigCrate) {
  auto p = HfPattern::create(Ctx{"t"}, {true, "x*"}, "pattern");
  ASSERT_TRUE(p.ok()) << p.status();
  // (0,0) matches; the empty match at 2 right after "x" is skipped; (3,3) matches.
  EXPECT_THAT(match_strings(**p, "axb"), ElementsAre("+", "-a", "+x", "-b", "+"));
  auto lit = HfPattern::create(Ctx{"t"}, {false, "ab"}, "pattern");
  ASSERT_TRUE(lit.ok());
  EXPECT_THAT(match_strings(**lit, "xabab"), ElementsAre("-x", "+ab", "+ab"));
  EXPECT_THAT(match_strings(**lit, ""), ElementsAre("-"));
}

// The hand-written Llama 3 / Qwen scanners against Oniguruma running the patterns themselves, on
// 20000 generated strings over letters, digits, White_Space (CR, LF, tab, NBSP, U+3000),
// apostrophes with the contraction letters in both cases and U+017F, punctuation, emoji, CJK and
// combining marks.
TEST(HfFastSplitTest, MatchesOniguruma) {
  const std::vector<std::string> alphabet = {
      "a", "Z",      "s",          "S",      "t",      "T",  "r",      "E",      "v",      "l",
      "L", "d",      "m",          "\u017f", "'",      "'",  "0",      "7",      "\u0663", "\u00bd",
      " ", " ",      " ",          "\t",     "\r",     "\n", "\u00a0", "\u3000", ".",      "!",
      "(", "\u2026", "\U0001F917", "\u4e2d", "\u0301", "_",  "-",      "\u00e9"};
  std::mt19937 rng(7);
  for (const auto& [pattern, digits] :
       {std::pair<const char*, int>{kLlama3SplitPattern, 3}, {kQwenSplitPattern, 1}}) {
    auto onig = HfPattern::create(Ctx{"t"}, {true, pattern}, "pattern");
    ASSERT_TRUE(onig.ok()) << onig.status();
    ASSERT_EQ(fast_split_digits(pattern), digits);
    for (int k = 0; k < 10000; ++k) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
      std::vector<PatternMatch> want;
      (*onig)->find_matches(text, &want);
      std::vector<PatternMatch> got;
      for (size_t pos = 0; pos < text.size();) {
        const size_t len = llama3_match_length(text, pos, digits);
        got.push_back({pos, pos + len, true});
        pos += len;
      }
      ASSERT_EQ(got.size(), want.size()) << testing::PrintToString(text);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(want[i].is_match && got[i].begin == want[i].begin && got[i].end == want[i].end)
            << testing::PrintToString(text) << " match " << i;
      }
    }
  }
}

// The Tekken (Mistral NeMo) scanner against Oniguruma, the same way, over letters of every case
// class (Lu, Ll, Lt, Lm, Lo), marks, digits, White_Space, punctuation with '/', emoji.
TEST(HfFastSplitTest, TekkenMatchesOniguruma) {
  const std::vector<std::string> alphabet = {
      "a",      "z",      "A",      "Q",      "\u00e9",     "\u00c9", "\u01c5", "\u02b0",
      "\u4e2d", "\u05d0", "\u0301", "\u0903", "\u20dd",     "0",      "7",      "\u0663",
      "\u00bd", " ",      " ",      " ",      "\t",         "\r",     "\n",     "\u00a0",
      "\u3000", "/",      "/",      ".",      "'",          "!",      "-",      "\u2026",
      "\u200d", "_",      "\u0433", "\u0413", "\U0001F917", "\u0085", "\ufeff"};
  auto onig = HfPattern::create(Ctx{"t"}, {true, kTekkenSplitPattern}, "pattern");
  ASSERT_TRUE(onig.ok()) << onig.status();
  std::mt19937 rng(13);
  for (int k = 0; k < 20000; ++k) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<PatternMatch> want;
    (*onig)->find_matches(text, &want);
    std::vector<PatternMatch> got;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = tekken_match_length(text, pos);
      got.push_back({pos, pos + len, true});
      pos += len;
    }
    ASSERT_EQ(got.size(), want.size()) << testing::PrintToString(text);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(want[i].is_match && got[i].begin == want[i].begin && got[i].end == want[i].end)
          << testing::PrintToString(text) << " match " << i;
    }
  }
}

// The BLOOM scanner against Oniguruma, the same way.
TEST(HfFastSplitTest, BloomMatchesOniguruma) {
  const std::vector<std::string> alphabet = {
      "a",      "Z", "7",      " ",          " ",      " ",      "\t",     "\n",
      "\u00a0", "(", "|",      ")",          "[",      "]",      ".",      ",",
      "!",      "?", "\u2026", "\u3002",     "\uff0c", "\u3001", "\u0964", "\u06d4",
      "\u060c", "'", "-",      "\U0001F917", "\u4e2d", "\u0301"};
  auto onig = HfPattern::create(Ctx{"t"}, {true, kBloomSplitPattern}, "pattern");
  ASSERT_TRUE(onig.ok()) << onig.status();
  std::mt19937 rng(11);
  for (int k = 0; k < 10000; ++k) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<PatternMatch> want, got;
    (*onig)->find_matches(text, &want);
    bloom_find_matches(text, &got);
    ASSERT_EQ(got.size(), want.size()) << testing::PrintToString(text);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].begin == want[i].begin && got[i].end == want[i].end &&
                  got[i].is_match == want[i].is_match)
          << testing::PrintToString(text) << " piece " << i;
    }
  }
}

std::unique_ptr<HfTokenizer> make(const nlohmann::json& model,
                                  const nlohmann::json& pre = nullptr) {
  nlohmann::json j = {{"model", model}, {"pre_tokenizer", pre}, {"added_tokens", nullptr}};
  auto tok = HfTokenizer::from_json(j.dump(), "test.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(HfBpeTest, ByteFallbackAndUnknowns) {
  nlohmann::json m = {{"type", "BPE"},
                      {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}, {"<0x63>", 4}}},
                      {"merges", {"a b"}},
                      {"unk_token", "<unk>"},
                      {"byte_fallback", true},
                      {"fuse_unk", true}};
  auto fused = make(m);
  ASSERT_NE(fused, nullptr);
  EXPECT_THAT(fused->encode("abc"), ElementsAre(3, 4));   // 'c' -> <0x63>
  EXPECT_THAT(fused->encode("abdd"), ElementsAre(3, 0));  // "dd": one fused unk
  EXPECT_THAT(fused->encode("dad"), ElementsAre(0, 1, 0));
  m["fuse_unk"] = false;
  auto unfused = make(m);
  EXPECT_THAT(unfused->encode("abdd"), ElementsAre(3, 0, 0));
  m.erase("unk_token");
  auto no_unk = make(m);
  EXPECT_THAT(no_unk->encode("adb"), ElementsAre(3));  // d dropped (as tokenizers), a b merged
  auto decoded = fused->decode({3, 4});
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, "ab <0x63>");  // no decoder: tokens joined by ' '
}

TEST(HfBpeTest, PrefixSuffixAndIgnoreMerges) {
  nlohmann::json m = {
      {"type", "BPE"},
      {"vocab", {{"a", 0}, {"##b", 1}, {"ab", 2}, {"##c</w>", 3}, {"abc</w>", 4}, {"c</w>", 5}}},
      {"merges", {"a ##b", "ab ##c</w>"}},
      {"continuing_subword_prefix", "##"},
      {"end_of_word_suffix", "</w>"}};
  auto tok = make(m);
  ASSERT_NE(tok, nullptr);
  // a ##b ##c</w> -> ab ##c</w> -> abc</w> (the prefix dropped from each right part).
  EXPECT_THAT(tok->encode("abc"), ElementsAre(4));
  EXPECT_THAT(tok->encode("c"), ElementsAre(5));
  nlohmann::json m2 = {{"type", "BPE"},
                       {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"bc", 3}, {"abc", 4}}},
                       {"merges", {"b c"}},
                       {"ignore_merges", true}};
  auto whole = make(m2);
  EXPECT_THAT(whole->encode("abc"), ElementsAre(4));  // in the vocabulary: taken whole
  EXPECT_THAT(whole->encode("cbc"), ElementsAre(2, 3));
  m2["ignore_merges"] = false;
  EXPECT_THAT(make(m2)->encode("abc"), ElementsAre(0, 3));  // "abc" is not reachable by merges
}

TEST(HfUnigramTest, ViterbiUnknownsAndByteFallback) {
  nlohmann::json m = {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", nlohmann::json::array()}};
  for (const auto& [piece, score] : std::vector<std::pair<std::string, double>>{{"<unk>", 0.0},
                                                                                {"a", -1.0},
                                                                                {"b", -2.0},
                                                                                {"ab", -2.5},
                                                                                {"abc", -10.0},
                                                                                {"c", -3.0},
                                                                                {"<0x64>", -5.0}}) {
    m["vocab"].push_back(nlohmann::json::array({piece, score}));
  }
  auto tok = make(m);
  ASSERT_NE(tok, nullptr);
  // a+b+c = -6, ab+c = -5.5, abc = -10: ab c.
  EXPECT_THAT(tok->encode("abc"), ElementsAre(3, 5));
  // 'd' and 'e' have no piece: one fused unknown (score min - 10 each).
  EXPECT_THAT(tok->encode("abde"), ElementsAre(3, 0));
  m["byte_fallback"] = true;
  auto bytes = make(m);
  // The fused unknown "d" is <0x64>; "de" has no <0x65>, so it stays unk.
  EXPECT_THAT(bytes->encode("abd"), ElementsAre(3, 6));
  EXPECT_THAT(bytes->encode("abde"), ElementsAre(3, 0));
}

std::string decode_with(const nlohmann::json& d, std::vector<std::string> tokens) {
  std::unique_ptr<Decoder> decoder;
  const absl::Status st = parse_decoder(Ctx{"t"}, d, "decoder", &decoder);
  EXPECT_TRUE(st.ok()) << st;
  return decode_tokens(decoder.get(), std::move(tokens));
}

TEST(HfDecoderTest, BpeDecoderCtcAndStrip) {
  EXPECT_EQ(decode_with({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "you</w>"}),
            "hello you");
  EXPECT_EQ(decode_with({{"type", "CTC"}, {"pad_token", "<pad>"}, {"word_delimiter_token", "|"}},
                        {"h", "h", "<pad>", "i", "|", "y", "o", "u"}),
            "hi you");
  EXPECT_EQ(decode_with({{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 1}},
                        {"   a  ", " b"}),
            " a b");
  EXPECT_EQ(decode_with({{"type", "ByteFallback"}}, {"<0xE2>", "<0x82>", "<0xAC>", "x", "<0xFF>"}),
            "€x\xEF\xBF\xBD");
}

}  // namespace
}  // namespace anvil::io::hf_internal
