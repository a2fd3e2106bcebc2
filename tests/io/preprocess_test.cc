// bin/preprocess's library end to end: the byte tokenizer, the UTF-8 check, preprocess_corpus
// (plain text and JSONL -> .bin/.idx, read back with IndexedDataset; multi-threaded output
// identical to single-threaded; bad-line handling with line numbers; sentence-level output) and
// merge_datasets (equal to preprocessing the concatenated input). Tokenizers here are small test
// doubles over the byte tokenizer; the GPT-2 end-to-end case uses make_tokenizer and the reference
// ids in tests/io/fixtures/tokenizers/expected_ids.jsonl.
#include "io/preprocess.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/byte_tokenizer.h"
#include "io/indexed_dataset.h"
#include "io/json_strings.h"
#include "io/tokenizer.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ScratchDir;

// The byte tokenizer behind the Tokenizer interface (ids = bytes, EOD 256). `drop` lists bytes
// that produce no token (to make empty sentences/documents); vocab >= 65500 forces int32 files.
class TestByteTokenizer : public Tokenizer {
 public:
  explicit TestByteTokenizer(std::string drop = "", int64_t vocab = 257)
      : drop_(std::move(drop)), vocab_(vocab) {
    special_.eod = 256;
  }
  void encode(absl::string_view text, std::vector<int32_t>* out) const override {
    for (const char c : text) {
      if (drop_.find(c) == std::string::npos) out->push_back(static_cast<unsigned char>(c));
    }
  }
  absl::StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override {
    return ByteTokenizer().decode(ids, "|");
  }
  int64_t vocab_size() const override { return vocab_; }
  const SpecialTokens& special() const override { return special_; }
  std::string name() const override { return "TestByte"; }

 private:
  std::string drop_;
  int64_t vocab_;
  SpecialTokens special_;
};

// ---- ByteTokenizer --------------------------------------------------------------------------

TEST(ByteTokenizer, RoundTripsEveryByte) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 257);
  EXPECT_EQ(tok.eod(), 256);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  auto back = tok.decode(ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, all);
  EXPECT_EQ(tok.encode("h\xc3\xa9"), (std::vector<int32_t>{104, 0xc3, 0xa9}));
}

TEST(ByteTokenizer, DecodeRendersEodAndRejectsUnknownIds) {
  const ByteTokenizer tok;
  auto s = tok.decode(std::vector<int32_t>{104, 105, 256, 33}, "<|eod|>");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "hi<|eod|>!");
  EXPECT_EQ(*tok.decode(std::vector<int32_t>{104, 256}), "h");
  auto bad = tok.decode(std::vector<int32_t>{1, 257});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("position 1"));
  EXPECT_FALSE(tok.decode(std::vector<int32_t>{-1}).ok());
}

TEST(FindInvalidUtf8, FollowsPythonsStrictDecoder) {
  constexpr size_t npos = std::string_view::npos;
  EXPECT_EQ(find_invalid_utf8(""), npos);
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the 8-byte path"), npos);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"), npos);
  EXPECT_EQ(find_invalid_utf8("abc\xff"), 3u);
  EXPECT_EQ(find_invalid_utf8("abcdefghij\x80xyz"), 10u);     // lone continuation byte
  EXPECT_EQ(find_invalid_utf8("a\xc0\xaf"), 1u);              // overlong '/'
  EXPECT_EQ(find_invalid_utf8("a\xc3"), 1u);                  // truncated
  EXPECT_EQ(find_invalid_utf8("\xe0\x80\xaf"), 0u);           // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("ok\xed\xa0\x80"), 2u);         // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);       // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xf0\x9f\x98"), 0u);           // truncated 4-byte
  EXPECT_EQ(find_invalid_utf8("\xe4\xb8\xad\xe6\x96x"), 3u);  // bad third byte
}

// ---- preprocess_corpus -----------------------------------------------------------------------

// All documents of a dataset, as strings (EOD -> '|', sentences separated by '/').
std::vector<std::string> read_docs(const std::string& prefix, TokenDType dtype = TokenDType::kU16) {
  auto ds = IndexedDataset::open(prefix);
  EXPECT_TRUE(ds.ok()) << ds.status();
  if (!ds.ok()) return {};
  std::vector<std::string> out;
  for (int64_t d = 0; d < (*ds)->num_documents(); ++d) {
    std::string doc;
    for (int64_t q = (*ds)->doc_idx()[d]; q < (*ds)->doc_idx()[d + 1]; ++q) {
      std::vector<int32_t> t((*ds)->sizes()[q]);
      EXPECT_TRUE((*ds)->read(q, 0, t.size(), t.data()).ok());
      if (q > (*ds)->doc_idx()[d]) doc += "/";
      doc += *ByteTokenizer().decode(t, "|");
    }
    out.push_back(doc);
  }
  EXPECT_EQ((*ds)->dtype(), dtype);
  return out;
}

// Runs preprocess_corpus, collecting the warnings.
struct RunResult {
  absl::StatusOr<PreprocessStats> stats;
  std::vector<std::string> warnings;
};
RunResult run(const PreprocessOptions& opt, const Tokenizer& tok = TestByteTokenizer()) {
  RunResult r;
  PreprocessCallbacks cb;
  cb.warning = [&](const std::string& m) { r.warnings.push_back(m); };
  r.stats = preprocess_corpus(opt, tok, cb);
  return r;
}

TEST(PreprocessCorpus, PlainTextParagraphsBecomeDocuments) {
  ScratchDir dir;
  testing::write_file(dir.file("c.txt"),
                      "\n\nFirst line\nsecond line\n\n\n  \t\nPara two\r\nwith CRLF\r\n\r\n"
                      "last, no newline");
  PreprocessOptions opt;
  opt.input = dir.file("c.txt");
  opt.output_prefix = dir.file("out");
  opt.append_eod = true;
  uint64_t last_bytes = 0, last_docs = 0;
  PreprocessCallbacks cb;
  cb.progress = [&](uint64_t b, uint64_t d) {
    EXPECT_GE(b, last_bytes);
    last_bytes = b;
    last_docs = d;
  };
  auto stats = preprocess_corpus(opt, TestByteTokenizer(), cb);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(read_docs(dir.file("out_text_document")),
            (std::vector<std::string>{"First line\nsecond line|", "Para two\nwith CRLF|",
                                      "last, no newline|"}));
  EXPECT_EQ(stats->records, 3);
  EXPECT_EQ(stats->lines, 11);
  EXPECT_EQ(stats->blank_lines, 6);
  EXPECT_EQ(last_docs, 3u);
  EXPECT_EQ(last_bytes, testing::read_file(dir.file("c.txt")).size());
  EXPECT_EQ(stats->input_bytes, last_bytes);
  ASSERT_EQ(stats->outputs.size(), 1u);
  EXPECT_EQ(stats->outputs[0].prefix, dir.file("out_text_document"));
  EXPECT_EQ(stats->outputs[0].documents, 3);
  EXPECT_EQ(stats->outputs[0].sequences, 3);
  EXPECT_EQ(stats->outputs[0].tokens, 22 + 1 + 18 + 1 + 16 + 1);
  EXPECT_EQ(stats->outputs[0].bytes, 2u * stats->outputs[0].tokens);
}

TEST(PreprocessCorpus, JsonlRecordsAndKeys) {
  ScratchDir dir;
  testing::write_file(dir.file("c.jsonl"),
                      "{\"text\": \"one\", \"title\": \"T1\"}\n"
                      "\n"
                      "{\"text\": \"\", \"title\": \"T2\"}\n"  // empty text: skipped, reported
                      "{\"title\": \"T3\", \"text\": \"three\\n\"}\r\n"
                      "  {\"text\": \"last\", \"title\": \"T4\"}  ");  // no final newline
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("j");
  opt.json_keys = {"text", "title"};
  const RunResult r = run(opt);
  ASSERT_TRUE(r.stats.ok()) << r.stats.status();
  EXPECT_EQ(r.stats->records, 4);
  EXPECT_EQ(r.stats->lines, 5);
  EXPECT_EQ(r.stats->blank_lines, 1);
  EXPECT_EQ(read_docs(dir.file("j_text_document")),
            (std::vector<std::string>{"one", "three\n", "last"}));
  EXPECT_EQ(read_docs(dir.file("j_title_document")),
            (std::vector<std::string>{"T1", "T2", "T3", "T4"}));
  ASSERT_EQ(r.stats->outputs.size(), 2u);
  EXPECT_EQ(r.stats->outputs[0].empty_documents, 1);
  EXPECT_EQ(r.stats->outputs[1].empty_documents, 0);
  EXPECT_THAT(r.warnings, ElementsAre(HasSubstr("c.jsonl:3: empty document (\"text\"")));
}

TEST(PreprocessCorpus, BadLinesStopWithTheFirstLineNumberOrAreSkippedAndCounted) {
  ScratchDir dir;
  std::string corpus = "{\"text\": \"ok\"}\n";
  for (int i = 0; i < 30; ++i) corpus += "{\"text\": \"fine\"}\n";
  corpus += "{\"text\": \"broken}\n";                // line 32: unterminated string
  corpus += "{\"txt\": \"x\"}\n";                    // line 33: missing key
  corpus += "{\"text\": 7}\n";                       // line 34: not a string
  for (int i = 0; i < 12; ++i) corpus += "[1, 2\n";  // lines 35..46
  corpus += "{\"text\": \"end\"}\n";
  testing::write_file(dir.file("c.jsonl"), corpus);
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("b");
  opt.max_reported = 3;
  for (const int workers : {1, 3}) {
    opt.workers = workers;
    opt.chunk_bytes = 40;  // several chunks: the first bad line in input order still wins
    const RunResult failed = run(opt);
    ASSERT_FALSE(failed.stats.ok());
    EXPECT_EQ(failed.stats.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(failed.stats.status().message()),
                HasSubstr("c.jsonl:32: column 18: unterminated string"));
    // A failed run leaves no output behind.
    EXPECT_FALSE(testing::file_exists(dir.file("b_text_document.idx")));
    EXPECT_FALSE(testing::file_exists(dir.file("b_text_document.bin")));

    opt.skip_bad_lines = true;
    const RunResult skipped = run(opt);
    opt.skip_bad_lines = false;
    ASSERT_TRUE(skipped.stats.ok()) << skipped.stats.status();
    EXPECT_EQ(skipped.stats->bad_lines, 15);
    EXPECT_EQ(skipped.stats->records, 32);
    EXPECT_EQ(skipped.stats->lines,
              skipped.stats->records + skipped.stats->blank_lines + skipped.stats->bad_lines);
    ASSERT_EQ(skipped.warnings.size(), 4u);
    EXPECT_THAT(skipped.warnings[0], HasSubstr("c.jsonl:32: skipped: column 18: unterminated"));
    EXPECT_THAT(skipped.warnings[1], HasSubstr("c.jsonl:33: skipped: missing key \"text\""));
    EXPECT_THAT(skipped.warnings[2], HasSubstr("c.jsonl:34: skipped: column 10: the value of"));
    EXPECT_THAT(skipped.warnings[3], HasSubstr("further skipped malformed lines are only counted"));
    const std::vector<std::string> docs = read_docs(dir.file("b_text_document"));
    ASSERT_EQ(docs.size(), 32u);
    EXPECT_EQ(docs.front(), "ok");
    EXPECT_EQ(docs.back(), "end");
    std::remove(dir.file("b_text_document.bin").c_str());
    std::remove(dir.file("b_text_document.idx").c_str());
  }
}

TEST(PreprocessCorpus, InvalidUtf8IsTokenizedAndReported) {
  ScratchDir dir;
  testing::write_file(dir.file("c.jsonl"),
                      "{\"text\": \"good\"}\n{\"text\": \"ba\xff"
                      "d\"}\n"
                      "{\"text\": \"\\u00e9 ok\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("u");
  const RunResult r = run(opt);
  ASSERT_TRUE(r.stats.ok()) << r.stats.status();
  EXPECT_EQ(r.stats->invalid_utf8, 1);
  EXPECT_THAT(r.warnings, ElementsAre(HasSubstr("c.jsonl:2: invalid UTF-8 in \"text\" at byte 2")));
  EXPECT_EQ(read_docs(dir.file("u_text_document")), (std::vector<std::string>{"good",
                                                                              "ba\xff"
                                                                              "d",
                                                                              "\xc3\xa9 ok"}));
}

TEST(PreprocessCorpus, LoneSurrogateEscapesAreReportedAsInvalidText) {
  ScratchDir dir;
  // Python's json.loads keeps a lone surrogate, which UTF-8 cannot encode: invalid text, like
  // invalid UTF-8. A pair, and an escaped U+FFFD itself, are valid.
  testing::write_file(dir.file("s.jsonl"),
                      "{\"text\": \"pair \\ud83d\\ude00 and \\ufffd\"}\n"
                      "{\"text\": \"lone \\ud800 high\"}\n"
                      "{\"title\": \"t\", \"text\": \"x\\ude00\\ud83d\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("s.jsonl");
  opt.output_prefix = dir.file("s");
  const RunResult r = run(opt);
  ASSERT_TRUE(r.stats.ok()) << r.stats.status();
  EXPECT_EQ(r.stats->invalid_utf8, 2);
  EXPECT_THAT(r.warnings,
              ElementsAre(HasSubstr("s.jsonl:2: invalid UTF-8 in \"text\": a lone surrogate "
                                    "escape at column 16 (tokenized with U+FFFD)"),
                          HasSubstr("s.jsonl:3: invalid UTF-8 in \"text\": a lone surrogate "
                                    "escape at column 26")));
  std::vector<std::string> v;
  std::vector<size_t> lone;
  ASSERT_TRUE(extract_json_strings(R"({"a": "\ud800", "b": "ok"})", {"b", "a"}, &v, &lone).ok());
  EXPECT_EQ(lone, (std::vector<size_t>{0, 8}));
}

TEST(PreprocessCorpus, SentenceLevelOutputFollowsMegatron) {
  ScratchDir dir;
  // '#' and '!' produce no tokens: the middle sentence of line 1 is dropped, line 2 is empty.
  testing::write_file(dir.file("c.jsonl"),
                      "{\"text\": \"Hi there. #!! Bye now.\"}\n"
                      "{\"text\": \"##!!\"}\n"
                      "{\"text\": \"Dr. Who left. He came back\\nThe end\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("s");
  opt.split_sentences = true;
  opt.append_eod = true;
  const TestByteTokenizer tok("#!");
  RunResult r = run(opt, tok);
  ASSERT_TRUE(r.stats.ok()) << r.stats.status();
  EXPECT_FALSE(testing::file_exists(dir.file("s_text_document.idx")));
  // EOD on the last sentence only; whitespace between sentences dropped.
  EXPECT_EQ(
      read_docs(dir.file("s_text_sentence")),
      (std::vector<std::string>{"Hi there./Bye now.|", "Dr. Who left./He came back\nThe end|"}));
  EXPECT_EQ(r.stats->outputs[0].sequences, 4);
  EXPECT_EQ(r.stats->outputs[0].empty_documents, 1);
  auto ds = IndexedDataset::open(dir.file("s_text_sentence"));
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ((*ds)->doc_idx(), (std::vector<int64_t>{0, 2, 4}));

  opt.keep_newlines = true;  // the whitespace after a sentence stays with it
  r = run(opt, tok);
  ASSERT_TRUE(r.stats.ok()) << r.stats.status();
  EXPECT_EQ(read_docs(dir.file("s_text_sentence")),
            (std::vector<std::string>{"Hi there. / /Bye now.|",  // "#!! " -> " "
                                      "Dr. Who left. /He came back\nThe end|"}));
}

TEST(PreprocessCorpus, LargeVocabularyWritesInt32) {
  ScratchDir dir;
  testing::write_file(dir.file("c.jsonl"), "{\"text\": \"abc\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("w");
  opt.append_eod = true;
  const RunResult r = run(opt, TestByteTokenizer("", 65500));
  ASSERT_TRUE(r.stats.ok()) << r.stats.status();
  EXPECT_EQ(r.stats->outputs[0].dtype, TokenDType::kI32);
  EXPECT_EQ(r.stats->outputs[0].bytes, 16u);
  EXPECT_EQ(read_docs(dir.file("w_text_document"), TokenDType::kI32),
            (std::vector<std::string>{"abc|"}));
}

// A random corpus with awkward content: blank lines, long lines, escapes, multi-byte text,
// sentence punctuation, malformed lines, empty texts.
std::string random_corpus(int lines, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> words = {
      "The",  "cat",        "sat.",         "Mr.",  "Smith",           "e.g.",
      "3.14", "caf\\u00e9", "\xe4\xb8\xad", "Why?", "\\\"quoted.\\\"", "a\\nb",
      "U.S.", "end."};
  std::string out;
  for (int i = 0; i < lines; ++i) {
    const int kind = static_cast<int>(rng() % 20);
    if (kind == 0) {
      out += "\n";
    } else if (kind == 1) {
      out += "{\"text\": broken\n";
    } else if (kind == 2) {
      out += "{\"text\": \"\", \"title\": \"t\"}\n";
    } else {
      const int n = kind == 3 ? 400 : static_cast<int>(rng() % 30);
      std::string text;
      for (int w = 0; w < n; ++w) text += (w ? " " : "") + words[rng() % words.size()];
      out += "{\"id\": " + std::to_string(i) + ", \"text\": \"" + text + "\", \"title\": \"T" +
             std::to_string(i) + ".\"}\n";
    }
  }
  return out;
}

TEST(PreprocessCorpus, MultiThreadedOutputIsIdenticalToSingleThreaded) {
  ScratchDir dir;
  testing::write_file(dir.file("c.jsonl"), random_corpus(3000, 7));
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.json_keys = {"text", "title"};
  opt.append_eod = true;
  opt.skip_bad_lines = true;
  for (const bool split : {false, true}) {
    opt.split_sentences = split;
    opt.output_prefix = dir.file("one");
    opt.workers = 1;
    opt.chunk_bytes = 1 << 24;
    const RunResult one = run(opt);
    ASSERT_TRUE(one.stats.ok()) << one.stats.status();
    EXPECT_GT(one.stats->bad_lines, 0);
    EXPECT_EQ(one.stats->lines, 3000);
    EXPECT_EQ(one.stats->lines, one.stats->records + one.stats->blank_lines + one.stats->bad_lines);
    struct Setting {
      int workers;
      size_t chunk_bytes;
    };
    for (const Setting s : {Setting{4, 1000}, Setting{3, 1}, Setting{8, 65536}}) {
      opt.output_prefix = dir.file("many");
      opt.workers = s.workers;
      opt.chunk_bytes = s.chunk_bytes;
      const RunResult many = run(opt);
      ASSERT_TRUE(many.stats.ok()) << many.stats.status();
      EXPECT_EQ(many.warnings, one.warnings);
      EXPECT_EQ(many.stats->records, one.stats->records);
      EXPECT_EQ(many.stats->bad_lines, one.stats->bad_lines);
      for (const std::string key : {"text", "title"}) {
        const std::string suffix = "_" + key + (split ? "_sentence" : "_document");
        for (const std::string ext : {".bin", ".idx"}) {
          EXPECT_EQ(testing::read_file(dir.file("many" + suffix + ext)),
                    testing::read_file(dir.file("one" + suffix + ext)))
              << key << ext << " workers " << s.workers << " chunk " << s.chunk_bytes;
        }
      }
    }
  }
}

TEST(PreprocessCorpus, MultiThreadedPlainTextIsIdenticalToo) {
  ScratchDir dir;
  std::mt19937 rng(3);
  std::string corpus;
  for (int p = 0; p < 500; ++p) {
    const int lines = 1 + static_cast<int>(rng() % 6);
    for (int l = 0; l < lines; ++l) corpus += "line " + std::to_string(rng() % 1000) + "\n";
    corpus += rng() % 3 == 0 ? "\n  \n" : "\n";
  }
  testing::write_file(dir.file("c.txt"), corpus);
  PreprocessOptions opt;
  opt.input = dir.file("c.txt");
  opt.append_eod = true;
  opt.output_prefix = dir.file("one");
  const RunResult one = run(opt);
  ASSERT_TRUE(one.stats.ok()) << one.stats.status();
  EXPECT_EQ(one.stats->records, 500);
  opt.output_prefix = dir.file("many");
  opt.workers = 4;
  opt.chunk_bytes = 50;
  const RunResult many = run(opt);
  ASSERT_TRUE(many.stats.ok()) << many.stats.status();
  EXPECT_EQ(many.stats->records, 500);
  for (const std::string ext : {".bin", ".idx"}) {
    EXPECT_EQ(testing::read_file(dir.file("many_text_document" + ext)),
              testing::read_file(dir.file("one_text_document" + ext)));
  }
}

TEST(PreprocessCorpus, FormatOverrideAndOptionErrors) {
  ScratchDir dir;
  testing::write_file(dir.file("data.dat"), "{\"text\": \"x\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("data.dat");
  opt.output_prefix = dir.file("o");
  opt.format = CorpusFormat::kJsonl;
  ASSERT_TRUE(run(opt).stats.ok());
  EXPECT_EQ(read_docs(dir.file("o_text_document")), (std::vector<std::string>{"x"}));
  opt.format = CorpusFormat::kAuto;  // .dat -> plain text: the raw line is the document
  ASSERT_TRUE(run(opt).stats.ok());
  EXPECT_EQ(read_docs(dir.file("o_text_document")),
            (std::vector<std::string>{"{\"text\": \"x\"}"}));

  PreprocessOptions bad = opt;
  bad.input = dir.file("missing.txt");
  EXPECT_EQ(run(bad).stats.status().code(), absl::StatusCode::kNotFound);
  bad = opt;
  bad.json_keys = {"body"};  // plain text has only 'text'
  EXPECT_EQ(run(bad).stats.status().code(), absl::StatusCode::kInvalidArgument);
  bad = opt;
  bad.output_prefix = dir.file("no/such/dir/p");
  EXPECT_EQ(run(bad).stats.status().code(), absl::StatusCode::kNotFound);
  bad = opt;
  bad.json_keys = {"text", "text"};  // two writers of one file
  EXPECT_THAT(std::string(run(bad).stats.status().message()), HasSubstr("given twice"));
  bad = opt;
  bad.workers = 0;
  EXPECT_THAT(std::string(run(bad).stats.status().message()), HasSubstr("--workers"));
  bad = opt;
  bad.workers = 100000;  // std::thread used to throw (abort) after the .tmp was created
  EXPECT_THAT(std::string(run(bad).stats.status().message()),
              HasSubstr("--workers must be in [1, 1024], got 100000"));
  bad = opt;
  bad.chunk_bytes = kMaxChunkBytes + 1;
  EXPECT_THAT(std::string(run(bad).stats.status().message()), HasSubstr("--chunk-kib"));
  class NoEod : public TestByteTokenizer {
   public:
    const SpecialTokens& special() const override { return none_; }
    SpecialTokens none_;
  };
  bad = opt;
  bad.append_eod = true;
  EXPECT_THAT(std::string(run(bad, NoEod()).stats.status().message()),
              HasSubstr("no end-of-document token"));
}

// Files in `dir` (names only), to show that a failed run leaves nothing behind.
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(PreprocessCorpus, RefusesAnInputThatIsAnOutput) {
  ScratchDir dir;
  // The input is named like the output .bin (and, second case, reached through a hard link):
  // writing the output would replace it.
  const std::string text = "{\"text\": \"keep me\"}\n";
  testing::write_file(dir.file("o_text_document.bin"), text);
  PreprocessOptions opt;
  opt.input = dir.file("o_text_document.bin");
  opt.output_prefix = dir.file("o");
  opt.format = CorpusFormat::kJsonl;
  RunResult r = run(opt);
  EXPECT_EQ(r.stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.stats.status().message()),
              HasSubstr("the input " + opt.input + " is the output " + opt.input));
  EXPECT_EQ(testing::read_file(opt.input), text);
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"o_text_document.bin"}));

  testing::write_file(dir.file("corpus.jsonl"), text);
  ASSERT_EQ(::link(dir.file("corpus.jsonl").c_str(), dir.file("p_text_document.idx").c_str()), 0);
  opt.input = dir.file("corpus.jsonl");
  opt.output_prefix = dir.file("./p");
  EXPECT_THAT(std::string(run(opt).stats.status().message()),
              HasSubstr("is the output " + dir.file("./p_text_document.idx")));
  EXPECT_EQ(testing::read_file(opt.input), text);
}

TEST(PreprocessCorpus, CancelledRunsLeaveNoFiles) {
  ScratchDir dir;
  const std::string corpus = random_corpus(4000, 7);
  ASSERT_GT(corpus.size(), 4u << 16);  // several 64 KiB reads: several chunks
  testing::write_file(dir.file("in.jsonl"), corpus);
  PreprocessOptions opt;
  opt.input = dir.file("in.jsonl");
  opt.output_prefix = dir.file("o");
  opt.skip_bad_lines = true;
  opt.workers = 2;
  // Cancelled once the first chunk is written (a signal handler's flag, in bin/preprocess).
  std::atomic<bool> written{false};
  PreprocessCallbacks cb;
  cb.progress = [&](uint64_t, uint64_t) { written = true; };
  cb.cancelled = [&] { return written.load(); };
  auto stats = preprocess_corpus(opt, TestByteTokenizer(), cb);
  EXPECT_TRUE(written);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"in.jsonl"}));

  // merge_datasets, cancelled before its first block.
  ASSERT_TRUE(run(opt).stats.ok());
  const std::string part = preprocess_output_prefix(opt.output_prefix, "text", false);
  auto merged = merge_datasets({part}, dir.file("m"), [] { return true; });
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(list_dir(dir.path()),
            (std::vector<std::string>{"in.jsonl", "o_text_document.bin", "o_text_document.idx"}));
}

TEST(PreprocessCorpus, AnInputThatChangesWhileReadIsAnError) {
  ScratchDir dir;
  std::string corpus;
  while (corpus.size() < (4u << 20)) corpus += "{\"text\": \"some words of text\"}\n";
  const std::string input = dir.file("in.jsonl");
  testing::write_file(input, corpus);
  PreprocessOptions opt;
  opt.input = input;
  opt.output_prefix = dir.file("o");
  opt.workers = 1;  // at most 4 chunks of 256 KiB in flight: the reader is far from 2 MiB
  // Truncated to 2 MiB when the first chunk is written: the reader meets the new end there.
  PreprocessCallbacks cb;
  cb.progress = [&](uint64_t, uint64_t) {
    if (::truncate(input.c_str(), 2 << 20) != 0) ADD_FAILURE() << "truncate failed";
  };
  auto stats = preprocess_corpus(opt, TestByteTokenizer(), cb);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(stats.status().message()),
              HasSubstr(input + " changed while it was read (" + std::to_string(corpus.size()) +
                        " bytes when opened, 2097152 now, 2097152 read)"));
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"in.jsonl"}));
}

// ---- GPT-2 end to end ------------------------------------------------------------------------

// The repository root, from this file's location (absolute in CMake builds).
std::string repo_root() {
  std::string here = __FILE__;
  for (int k = 0; k < 3; ++k) {
    const size_t slash = here.rfind('/');
    if (slash == std::string::npos) return ".";
    here.resize(slash);
  }
  return here;
}

// A JSON string literal holding `bytes` (raw bytes >= 0x80 pass through, invalid UTF-8 too).
std::string json_quote(const std::string& bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// From one line of expected_ids.jsonl: the text (the "hex" field) and the "gpt2" ids.
bool parse_fixture_line(const std::string& line, std::string* text, std::vector<int32_t>* ids) {
  std::vector<std::string> hex;
  if (!extract_json_strings(line, {"hex"}, &hex).ok()) return false;
  text->clear();
  for (size_t i = 0; i + 1 < hex[0].size(); i += 2) {
    text->push_back(static_cast<char>(std::stoi(hex[0].substr(i, 2), nullptr, 16)));
  }
  const size_t key = line.find("\"gpt2\": [");
  if (key == std::string::npos) return false;
  ids->clear();
  size_t pos = key + 9;
  while (pos < line.size() && line[pos] != ']') {
    size_t used = 0;
    ids->push_back(std::stoi(line.substr(pos), &used));
    pos += used;
    while (pos < line.size() && (line[pos] == ',' || line[pos] == ' ')) ++pos;
  }
  return true;
}

TEST(PreprocessCorpus, Gpt2EndToEndMatchesTheReferenceIds) {
  // Reference ids: tests/io/fixtures/tokenizers/expected_ids.jsonl (tiktoken r50k_base and HF
  // tokenizers agreeing; scripts/gpu/make_tokenizer_fixtures.py), Unicode and invalid UTF-8.
  std::istringstream fixture(
      testing::read_file(testing::fixture_dir() + "/tokenizers/expected_ids.jsonl"));
  ScratchDir dir;
  std::string corpus;
  std::vector<std::vector<int32_t>> expected;
  std::string line, text;
  std::vector<int32_t> ids;
  while (std::getline(fixture, line)) {
    ASSERT_TRUE(parse_fixture_line(line, &text, &ids)) << line;
    corpus +=
        "{\"id\": " + std::to_string(expected.size()) + ", \"text\": " + json_quote(text) + "}\n";
    if (ids.empty()) continue;  // an empty document is skipped
    ids.push_back(50256);       // --append-eod: <|endoftext|>
    expected.push_back(ids);
  }
  ASSERT_GT(expected.size(), 50u);
  testing::write_file(dir.file("c.jsonl"), corpus);

  TokenizerOptions t;
  t.type = "GPT2BPE";
  t.vocab_file = repo_root() + "/data/gpt2/encoder.json";
  t.merge_file = repo_root() + "/data/gpt2/vocab.bpe";
  auto tokenizer = make_tokenizer(t);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("g");
  opt.append_eod = true;
  opt.workers = 2;
  opt.chunk_bytes = 256;
  const RunResult r = run(opt, **tokenizer);
  ASSERT_TRUE(r.stats.ok()) << r.stats.status();
  EXPECT_GT(r.stats->invalid_utf8, 0);  // the fixture holds invalid UTF-8 on purpose

  auto ds = IndexedDataset::open(dir.file("g_text_document"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->dtype(), TokenDType::kU16);
  ASSERT_EQ((*ds)->num_documents(), static_cast<int64_t>(expected.size()));
  for (int64_t d = 0; d < (*ds)->num_documents(); ++d) {
    ASSERT_EQ((*ds)->doc_idx()[d + 1] - (*ds)->doc_idx()[d], 1);
    std::vector<int32_t> got((*ds)->sizes()[d]);
    EXPECT_TRUE((*ds)->read(d, 0, got.size(), got.data()).ok());
    EXPECT_EQ(got, expected[d]) << "document " << d;
  }
}

// ---- merge_datasets --------------------------------------------------------------------------

TEST(MergeDatasets, EqualsPreprocessingTheConcatenatedInput) {
  ScratchDir dir;
  const std::vector<std::string> parts = {random_corpus(300, 1), random_corpus(1, 2),
                                          random_corpus(200, 3)};
  std::string all;
  for (size_t i = 0; i < parts.size(); ++i) {
    testing::write_file(dir.file("p" + std::to_string(i) + ".jsonl"), parts[i]);
    all += parts[i];
  }
  testing::write_file(dir.file("all.jsonl"), all);
  for (const bool split : {false, true}) {
    PreprocessOptions opt;
    opt.append_eod = true;
    opt.skip_bad_lines = true;
    opt.split_sentences = split;
    opt.workers = 2;
    std::vector<std::string> prefixes;
    for (size_t i = 0; i < parts.size(); ++i) {
      opt.input = dir.file("p" + std::to_string(i) + ".jsonl");
      opt.output_prefix = dir.file("p" + std::to_string(i));
      ASSERT_TRUE(run(opt).stats.ok());
      prefixes.push_back(preprocess_output_prefix(opt.output_prefix, "text", split));
    }
    opt.input = dir.file("all.jsonl");
    opt.output_prefix = dir.file("all");
    ASSERT_TRUE(run(opt).stats.ok());
    const std::string merged = dir.file("merged");
    auto stats = merge_datasets(prefixes, merged);
    ASSERT_TRUE(stats.ok()) << stats.status();
    const std::string expected = preprocess_output_prefix(dir.file("all"), "text", split);
    EXPECT_EQ(testing::read_file(merged + ".bin"), testing::read_file(expected + ".bin"));
    EXPECT_EQ(testing::read_file(merged + ".idx"), testing::read_file(expected + ".idx"));
    auto ds = IndexedDataset::open(expected);
    ASSERT_TRUE(ds.ok());
    EXPECT_EQ(stats->documents, (*ds)->num_documents());
    EXPECT_EQ(stats->sequences, (*ds)->num_sequences());
    EXPECT_EQ(stats->bytes, testing::read_file(expected + ".bin").size());
  }
}

TEST(MergeDatasets, RefusesMixedDtypesAndBadArguments) {
  ScratchDir dir;
  testing::write_file(dir.file("c.jsonl"), "{\"text\": \"abc\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("small");
  ASSERT_TRUE(run(opt).stats.ok());
  opt.output_prefix = dir.file("big");
  ASSERT_TRUE(run(opt, TestByteTokenizer("", 100000)).stats.ok());
  const std::string small = dir.file("small_text_document"), big = dir.file("big_text_document");
  auto mixed = merge_datasets({small, big}, dir.file("m"));
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mixed.status().message()), HasSubstr("same dtype"));
  EXPECT_FALSE(testing::file_exists(dir.file("m.bin")));
  EXPECT_FALSE(merge_datasets({}, dir.file("m")).ok());
  EXPECT_FALSE(merge_datasets({small}, small).ok());
  // The same dataset under another name (links): refused, naming both paths.
  for (const char* ext : {".bin", ".idx"}) {
    ASSERT_EQ(::link((small + ext).c_str(), (dir.file("alias") + ext).c_str()), 0);
  }
  auto aliased = merge_datasets({small}, dir.file("alias"));
  EXPECT_THAT(std::string(aliased.status().message()),
              HasSubstr("the input " + small + ".bin is the output " + dir.file("alias.bin")));
  EXPECT_EQ(merge_datasets({small, dir.file("nope")}, dir.file("m")).status().code(),
            absl::StatusCode::kNotFound);
  // A single input is copied unchanged.
  ASSERT_TRUE(merge_datasets({small}, dir.file("copy")).ok());
  EXPECT_EQ(testing::read_file(dir.file("copy.idx")), testing::read_file(small + ".idx"));
}

}  // namespace
}  // namespace anvil::io
