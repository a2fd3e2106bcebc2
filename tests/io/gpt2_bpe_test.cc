// GPT-2 byte-level BPE (io/tokenizers/gpt2_bpe): token ids equal the references on every line
// of tests/io/fixtures/tokenizers/expected_ids.jsonl (generated on the GPU machine by
// scripts/gpu/make_tokenizer_fixtures.py, where tiktoken's r50k_base and HF tokenizers'
// ByteLevelBPETokenizer had to agree before a line was written); the hand-written
// pre-tokenizer equals PCRE2 running GPT-2's regex; decode inverts encode; the two merge
// strategies agree; encoding from 4 threads equals serial encoding; bad files give located
// errors.
#include "io/tokenizers/gpt2_bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tokenizers/factories.h"
#include "io/tokenizers/utf8.h"
#include "nlohmann/json.hpp"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using ::testing::HasSubstr;

// The repository root: three levels above this file (absolute in CMake builds), else the
// working directory (CTest runs from the root).
std::string repo_path(const std::string& rel) {
  std::string here = __FILE__;
  for (int k = 0; k < 3; ++k) {
    const size_t slash = here.rfind('/');
    if (slash == std::string::npos) return rel;
    here.resize(slash);
  }
  return here + "/" + rel;
}

const Gpt2BpeTokenizer& gpt2() {
  static const Gpt2BpeTokenizer* tok = [] {
    auto t = Gpt2BpeTokenizer::load(repo_path("data/gpt2/encoder.json"),
                                    repo_path("data/gpt2/vocab.bpe"));
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      return static_cast<Gpt2BpeTokenizer*>(nullptr);
    }
    return t->release();
  }();
  if (tok == nullptr) std::abort();
  return *tok;
}

struct FixtureCase {
  std::string input;  // raw bytes, possibly ill-formed UTF-8
  std::vector<int32_t> gpt2;
};

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

const std::vector<FixtureCase>& fixtures() {
  static const std::vector<FixtureCase> cases = [] {
    std::vector<FixtureCase> out;
    std::istringstream in(
        testing::read_file(testing::fixture_dir() + "/tokenizers/expected_ids.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(j.is_discarded()) << line;
      if (j.is_discarded()) continue;
      out.push_back(
          {from_hex(j.at("hex").get<std::string>()), j.at("gpt2").get<std::vector<int32_t>>()});
    }
    return out;
  }();
  return cases;
}

std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F) {
      out.push_back(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", b);
      out += buf;
    }
  }
  return out;
}

// ---- token ids against the references -----------------------------------------------------

TEST(Gpt2Bpe, MatchesReferenceIdsOnEveryFixture) {
  ASSERT_GE(fixtures().size(), 100u);
  int invalid_inputs = 0;
  for (const FixtureCase& c : fixtures()) {
    EXPECT_EQ(gpt2().encode(c.input), c.gpt2) << "input \"" << printable(c.input) << "\"";
    invalid_inputs += !utf8::is_valid(c.input);
  }
  EXPECT_GE(invalid_inputs, 5);  // the fixtures include ill-formed UTF-8
}

TEST(Gpt2Bpe, DecodeInvertsEncode) {
  for (const FixtureCase& c : fixtures()) {
    auto text = gpt2().decode(gpt2().encode(c.input));
    ASSERT_TRUE(text.ok()) << text.status();
    // Ill-formed input was encoded as its U+FFFD replacement, so that is what comes back.
    EXPECT_EQ(*text, utf8::replace_invalid(c.input)) << printable(c.input);
    if (utf8::is_valid(c.input)) {
      EXPECT_EQ(*text, c.input);
    }
  }
  // Random well-formed text over a mixed alphabet.
  std::mt19937 rng(11);
  const std::u32string pool =
      U"abcXYZ019 \t\n\r'!?.,éß日本🤖\u00a0\u0085\u2003\u0301\u0661\ufffd";
  for (int trial = 0; trial < 300; ++trial) {
    std::u32string cps;
    const int len = rng() % 60;
    for (int k = 0; k < len; ++k) cps.push_back(pool[rng() % pool.size()]);
    const std::string s = utf8::encode(cps);
    auto text = gpt2().decode(gpt2().encode(s));
    ASSERT_TRUE(text.ok());
    ASSERT_EQ(*text, s);
  }
}

TEST(Gpt2Bpe, VocabularyAndSpecialTokens) {
  const Gpt2BpeTokenizer& tok = gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.special().eod, 50256);
  EXPECT_EQ(tok.special().pad, -1);
  EXPECT_EQ(tok.name(), "GPT2BPE");
  EXPECT_EQ(tok.token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(tok.token_bytes(50257), "");
  // Special-token text is ordinary text (tiktoken's encode_ordinary).
  const std::vector<int32_t> ids = tok.encode("<|endoftext|>");
  EXPECT_THAT(ids, ::testing::Not(::testing::Contains(50256)));
  EXPECT_EQ(ids, (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(*tok.decode({50256}), "<|endoftext|>");
  // Appends to what is already there.
  std::vector<int32_t> out = {7};
  tok.encode("Hello world", &out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 15496, 995}));
}

TEST(Gpt2Bpe, DecodeRejectsUnknownIdsAndReturnsRawBytes) {
  const Gpt2BpeTokenizer& tok = gpt2();
  auto bad = tok.decode({15496, 50257});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("position 1"));
  EXPECT_FALSE(tok.decode({-1}).ok());
  // "日" is three byte tokens' worth of BPE; decoding only a prefix of its ids gives bytes
  // that are not valid UTF-8, returned as they are.
  const std::vector<int32_t> ids = tok.encode("\xe6\x97\xa5");
  ASSERT_GE(ids.size(), 2u);
  auto head = tok.decode({ids[0]});
  ASSERT_TRUE(head.ok());
  EXPECT_FALSE(utf8::is_valid(*head));
  EXPECT_EQ(*head + *tok.decode(std::vector<int32_t>(ids.begin() + 1, ids.end())), "\xe6\x97\xa5");
}

// ---- pre-tokenization vs PCRE2 --------------------------------------------------------------

// GPT-2's pattern with \s spelled out as the White_Space set: PCRE2's UCP \s lacks U+0085, while
// the references' regex engines (Rust regex, Oniguruma) use White_Space.
const char kWs[] =
    R"(\t-\r \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";

std::string pcre2_pattern() {
  const std::string ws = kWs;
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + ws + "\\p{L}\\p{N}]+|[" + ws +
         "]+(?![^" + ws + "])|[" + ws + "]+";
}

class Pcre2Splitter {
 public:
  explicit Pcre2Splitter(const std::string& pat = pcre2_pattern()) {
    int err;
    PCRE2_SIZE err_off;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.c_str()), pat.size(),
                          PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    EXPECT_NE(code_, nullptr) << "PCRE2 error " << err << " at " << err_off;
    match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~Pcre2Splitter() {
    pcre2_match_data_free(match_);
    pcre2_code_free(code_);
  }

  // Whether PCRE2's Unicode tables (which may be older or newer than utf8proc's) know `cp`.
  static bool assigned(char32_t cp) {
    static pcre2_code* const cn = [] {
      int err;
      PCRE2_SIZE err_off;
      return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(R"(^[\p{Cn}\p{Cs}]$)"),
                           PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    }();
    const std::string s = utf8::encode(std::u32string(1, cp));
    pcre2_match_data* m = pcre2_match_data_create_from_pattern(cn, nullptr);
    const int rc =
        pcre2_match(cn, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, m, nullptr);
    pcre2_match_data_free(m);
    return rc < 0;
  }

  std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    size_t offset = 0;
    while (offset < text.size()) {
      // PCRE2 validates the whole subject's UTF-8 on every call unless told not to: once is
      // enough.
      const uint32_t options = offset == 0 ? 0 : PCRE2_NO_UTF_CHECK;
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                 offset, options, match_, nullptr);
      if (rc < 0) {
        ADD_FAILURE() << "PCRE2 found no match at " << offset << " in " << printable(text);
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match_);
      EXPECT_EQ(ov[0], offset) << "PCRE2 skipped text in " << printable(text);
      out.emplace_back(text.substr(ov[0], ov[1] - ov[0]));
      offset = ov[1];
    }
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* match_ = nullptr;
};

std::vector<std::string> scanner_split(const std::string& text) {
  std::vector<std::string> out;
  for (const absl::string_view p : gpt2_pretokenize(text)) out.emplace_back(p);
  return out;
}

TEST(Gpt2PreTokenizer, Examples) {
  using V = std::vector<std::string>;
  EXPECT_EQ(scanner_split("Hello  world"), (V{"Hello", " ", " world"}));
  EXPECT_EQ(scanner_split("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(scanner_split("x   "), (V{"x", "   "}));
  EXPECT_EQ(scanner_split("I'm they'll 'sam CAN'T"),
            (V{"I", "'m", " they", "'ll", " '", "sam", " CAN", "'", "T"}));
  EXPECT_EQ(scanner_split("!!'s 12ab"), (V{"!!'", "s", " 12", "ab"}));
  EXPECT_EQ(scanner_split(" \t x"), (V{" \t", " x"}));
  EXPECT_EQ(scanner_split(""), V{});
}

TEST(Gpt2PreTokenizer, MatchesPcre2OnFixturesAndRandomStrings) {
  Pcre2Splitter pcre;
  for (const FixtureCase& c : fixtures()) {
    const std::string text = utf8::replace_invalid(c.input);
    ASSERT_EQ(scanner_split(text), pcre.split(text)) << printable(text);
  }
  // Random strings over the characters where the alternatives interact: ASCII and other
  // spaces (U+0085 NEL, NBSP, EM SPACE, ideographic space), apostrophes and contraction
  // letters, digits of several kinds (Nd, Nl, No), marks, symbols, controls that are not
  // White_Space (1C, 200B ZWSP, FEFF), CJK, emoji, U+FFFD.
  const std::u32string pool =
      U"  \t\n\r\v\f'''srtevlmdSA1!.-_é日🤖\u0085\u00a0\u2003\u3000\u1680\u202f\u2028"
      U"\u0661\u2167\u00bd\u0301\u20ac\u001c\u200b\ufeff\ufffd\u0000";
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20000; ++trial) {
    std::u32string cps;
    const int len = rng() % 24;
    for (int k = 0; k < len; ++k) cps.push_back(pool[rng() % pool.size()]);
    const std::string text = utf8::encode(cps);
    ASSERT_EQ(scanner_split(text), pcre.split(text)) << printable(text);
  }
  // Random assigned code points anywhere in the BMP and the SMP (categories from utf8proc vs
  // PCRE2's own tables). Code points unassigned in either library are skipped: the two may
  // know different Unicode versions (PCRE2 10.42: 14.0; utf8proc 2.8: 15.0), and so may the
  // references (a letter added in Unicode 15 such as U+1DF28 is "other" to an older table).
  std::uniform_int_distribution<uint32_t> cp_dist(0, 0x1FFFF);
  for (int trial = 0; trial < 3000; ++trial) {
    std::u32string cps;
    const int len = rng() % 16;
    while (static_cast<int>(cps.size()) < len) {
      const char32_t cp = rng() % 3 == 0 ? pool[rng() % pool.size()] : cp_dist(rng);
      const utf8::Category cat = utf8::category(cp);
      if (cat == utf8::Category::kCn || cat == utf8::Category::kCs) continue;
      if (!Pcre2Splitter::assigned(cp)) continue;
      cps.push_back(cp);
    }
    const std::string text = utf8::encode(cps);
    ASSERT_EQ(scanner_split(text), pcre.split(text)) << printable(text);
  }
}

TEST(Gpt2PreTokenizer, MatchesPcre2WithTheLiteralPatternAndOnTheKjvCorpus) {
  // kGpt2SplitPattern itself, with PCRE2's \s, on inputs without U+0085 (the one White_Space
  // character PCRE2's UCP \s lacks).
  Pcre2Splitter literal(kGpt2SplitPattern);
  for (const FixtureCase& c : fixtures()) {
    const std::string text = utf8::replace_invalid(c.input);
    ASSERT_EQ(text.find("\xc2\x85"), std::string::npos);
    ASSERT_EQ(scanner_split(text), literal.split(text)) << printable(text);
  }
  const std::string kjv = repo_path("data/demo/kjv.txt");
  if (!testing::file_exists(kjv)) GTEST_SKIP() << kjv << " missing (scripts/prepare-demo-data.sh)";
  const std::string text = testing::read_file(kjv);
  const std::vector<std::string> a = scanner_split(text), b = Pcre2Splitter().split(text);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "piece " << i;
}

// ---- merges -----------------------------------------------------------------------------------

TEST(Gpt2Bpe, MergeStrategiesAgree) {
  const Gpt2BpeTokenizer& tok = gpt2();
  std::mt19937 rng(5);
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  auto check = [&](const std::string& piece) {
    std::vector<int32_t> scan, heap;
    tok.bpe(piece, &scan, Gpt2BpeTokenizer::MergeStrategy::kScan);
    tok.bpe(piece, &heap, Gpt2BpeTokenizer::MergeStrategy::kHeap);
    ASSERT_EQ(scan, heap) << printable(piece);
    ASSERT_EQ(*tok.decode(scan), piece);
  };
  for (const FixtureCase& c : fixtures()) {
    for (const absl::string_view p : gpt2_pretokenize(utf8::replace_invalid(c.input))) {
      check(std::string(p));
    }
  }
  for (int trial = 0; trial < 300; ++trial) {
    std::string piece = rng() % 2 ? " " : "";
    const int len = 1 + rng() % 400;
    // Skewed letter frequencies so that common merges fire.
    for (int k = 0; k < len; ++k) piece.push_back(letters[std::min(rng() % 26, rng() % 26)]);
    check(piece);
  }
  check(std::string(300, 'a'));
  check("\xff\xfe\xfd\xfc");
}

TEST(Gpt2Bpe, LongPiecesStayFast) {
  // One 200k-letter piece: the heap strategy keeps it O(n log n) (the scan would be O(n^2)).
  std::string text(200000, 'a');
  for (size_t i = 0; i < text.size(); i += 7) text[i] = 'b';
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = gpt2().encode(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
  EXPECT_EQ(*gpt2().decode(ids), text);
}

// ---- threads and the cache ------------------------------------------------------------------

std::vector<std::string> corpus() {
  std::vector<std::string> docs;
  for (const FixtureCase& c : fixtures()) docs.push_back(c.input);
  std::mt19937 rng(99);
  const std::vector<std::string> words = {"the",  " of",   " and", " Lord", " unto", "\n", "  ",
                                          "日本", " 🤖", "'s",   " 1234", "!!",    "é",  "\xff"};
  for (int d = 0; d < 400; ++d) {
    std::string doc;
    const int n = 5 + rng() % 200;
    for (int k = 0; k < n; ++k) doc += words[rng() % words.size()];
    // Unique words too, so that small caches keep evicting.
    doc += " w" + std::to_string(rng());
    docs.push_back(doc);
  }
  const std::string kjv = repo_path("data/demo/kjv.txt");
  if (testing::file_exists(kjv)) {
    std::ifstream f(kjv, std::ios::binary);
    std::string chunk(64 * 1024, '\0');
    for (int k = 0; k < 8 && f.read(chunk.data(), chunk.size()); ++k) docs.push_back(chunk);
  }
  return docs;
}

TEST(Gpt2Bpe, EncodeFromFourThreadsEqualsSerial) {
  const std::vector<std::string> docs = corpus();
  // A cache of 64 words empties itself every few documents: eviction runs concurrently too.
  for (const size_t cache_words : {size_t{64}, Gpt2BpeTokenizer::kDefaultCacheWords}) {
    auto tok = Gpt2BpeTokenizer::load(repo_path("data/gpt2/encoder.json"),
                                      repo_path("data/gpt2/vocab.bpe"), cache_words);
    ASSERT_TRUE(tok.ok()) << tok.status();
    std::vector<std::vector<int32_t>> serial;
    for (const std::string& d : docs) serial.push_back(gpt2().encode(d));
    std::vector<std::vector<std::vector<int32_t>>> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        got[t].resize(docs.size());
        for (int rep = 0; rep < 2; ++rep) {
          // Each thread walks the documents from a different start.
          for (size_t k = 0; k < docs.size(); ++k) {
            const size_t i = (k + t * docs.size() / 4) % docs.size();
            got[t][i] = (*tok)->encode(docs[i]);
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < 4; ++t) {
      for (size_t i = 0; i < docs.size(); ++i) {
        ASSERT_EQ(got[t][i], serial[i])
            << "thread " << t << " doc " << i << " cache_words " << cache_words;
      }
    }
  }
}

TEST(Gpt2Bpe, ManyTokenizersPerThread) {
  // More tokenizers than a thread keeps caches for; each must still give the same ids.
  std::vector<std::unique_ptr<Gpt2BpeTokenizer>> toks;
  for (int k = 0; k < 6; ++k) {
    auto t = Gpt2BpeTokenizer::load(repo_path("data/gpt2/encoder.json"),
                                    repo_path("data/gpt2/vocab.bpe"), 16);
    ASSERT_TRUE(t.ok());
    toks.push_back(std::move(*t));
  }
  for (int rep = 0; rep < 3; ++rep) {
    for (const auto& t : toks) {
      for (const FixtureCase& c : fixtures()) ASSERT_EQ(t->encode(c.input), c.gpt2);
    }
  }
}

// ---- loading errors -----------------------------------------------------------------------------

// GPT-2's bytes_to_unicode(), written out again independently of the implementation.
std::string byte_char(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  if (printable) return utf8::encode(std::u32string(1, static_cast<char32_t>(b)));
  int n = 0;
  for (int x = 0; x < b; ++x) {
    n += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
  }
  return utf8::encode(std::u32string(1, static_cast<char32_t>(256 + n)));
}

// A small vocabulary: the 256 byte tokens one per line (ids 0..255), then `extra` lines.
std::string mini_vocab(const std::vector<std::string>& extra) {
  std::string j = "{\n";
  for (int b = 0; b < 256; ++b) {
    nlohmann::json key = byte_char(b);
    j += "  " + key.dump() + ": " + std::to_string(b) + ",\n";
  }
  for (const std::string& e : extra) j += "  " + e + ",\n";
  j += "  \"<|endoftext|>\": 1000\n}\n";
  return j;
}

absl::Status load_error(const std::string& vocab, const std::string& merges) {
  return Gpt2BpeTokenizer::from_contents(vocab, "vocab.json", merges, "merges.txt").status();
}

TEST(Gpt2BpeLoad, SmallVocabularyWorks) {
  // "ab" = 300, "Ġab" = 301, ranks: a b (0), Ġ ab (1).
  const std::string g = byte_char(' ');
  auto tok = Gpt2BpeTokenizer::from_contents(
      mini_vocab({"\"ab\": 300", "\"" + g + "ab\": 301"}), "vocab.json",
      "#version: 0.2\r\na b\r\n" + g + " ab\r\n\r\n", "merges.txt");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 1001);
  EXPECT_EQ((*tok)->special().eod, 1000);
  EXPECT_EQ((*tok)->encode("ab ab abc"), (std::vector<int32_t>{300, 301, 301, 'c'}));
  EXPECT_FALSE((*tok)->decode({500}).ok());  // a hole in the id range
}

TEST(Gpt2BpeLoad, ErrorsNameFileAndLine) {
  const std::string merges = "#version: 0.2\na b\n";
  const std::string vocab = mini_vocab({"\"ab\": 300"});
  ASSERT_TRUE(load_error(vocab, merges).ok());

  auto expect = [](const absl::Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(what)) << s;
  };
  // The byte tokens take lines 2..257; extra entries start at line 258.
  expect(load_error(mini_vocab({"\"ab\": 300", "\"cd\": 1.5"}), merges), "vocab.json:259:");
  expect(load_error(mini_vocab({"\"ab\": 300", "\"cd\": -3"}), merges), "negative token id");
  expect(load_error(mini_vocab({"\"ab\": 300", "\"cd\": 300"}), merges), "reuses id 300");
  expect(load_error(mini_vocab({"\"ab\": 300", "\"a b\": 301"}), merges),
         "outside GPT-2's byte alphabet");
  expect(load_error(mini_vocab({"\"ab\": 300", "\"cd\": \"x\""}), merges),
         "a string instead of a token id");
  expect(load_error(vocab.substr(0, vocab.size() / 2), merges), "invalid JSON");
  expect(load_error(mini_vocab({"\"ab\": 300", "\"cd\" 7"}), merges), "vocab.json:259:");
  expect(load_error("[1, 2]", merges), "expected a JSON object");
  expect(load_error("{}", merges), "empty");
  {
    std::string no_a = vocab;
    const std::string a_line = "  \"a\": 97,\n";
    no_a.erase(no_a.find(a_line), a_line.size());
    expect(load_error(no_a, ""), "lacks the single-byte token \"a\"");
  }
  expect(load_error(vocab, "#version: 0.2\na b\na b c\n"), "merges.txt:3:");
  expect(load_error(vocab, "#version: 0.2\nab\n"), "merges.txt:2:");
  expect(load_error(vocab, "a b\nab xyz\n"), "merges.txt:2: \"xyz\" is not in the vocabulary");
  expect(load_error(vocab, "a b\nb c\n"), "merges.txt:2: the merge \"bc\"");

  auto missing = Gpt2BpeTokenizer::load("/nonexistent/encoder.json", "/nonexistent/vocab.bpe");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/encoder.json"));
  auto missing_merges =
      Gpt2BpeTokenizer::load(repo_path("data/gpt2/encoder.json"), "/nonexistent/vocab.bpe");
  EXPECT_EQ(missing_merges.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing_merges.status().message()), HasSubstr("/nonexistent/vocab.bpe"));
}

TEST(Gpt2BpeLoad, Factories) {
  TokenizerOptions o;
  o.type = "GPT2BPE";
  EXPECT_EQ(make_gpt2_tokenizer(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.vocab_file = repo_path("data/gpt2/encoder.json");
  o.merge_file = repo_path("data/gpt2/vocab.bpe");
  auto tok = make_gpt2_tokenizer(o);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->encode("Hello, world!"), (std::vector<int32_t>{15496, 11, 995, 0}));
  o.vocab_extra_ids = 3;
  EXPECT_FALSE(make_gpt2_tokenizer(o).ok());

  TokenizerOptions b;
  b.type = "Byte";
  auto byte = make_byte_tokenizer(b);
  ASSERT_TRUE(byte.ok());
  EXPECT_EQ((*byte)->vocab_size(), 257);
  EXPECT_EQ((*byte)->special().eod, 256);
  EXPECT_EQ((*byte)->encode("hi"), (std::vector<int32_t>{'h', 'i'}));
  EXPECT_EQ(*(*byte)->decode({'h', 256, 'i'}), "hi");
  b.vocab_file = "x";
  EXPECT_FALSE(make_byte_tokenizer(b).ok());
}

}  // namespace
}  // namespace anvil::io
