// The byte tokenizer, the JSONL string extractor and preprocess_corpus end to end (plain text
// paragraphs and JSONL records -> .bin/.idx, read back with IndexedDataset).
#include "io/preprocess.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/byte_tokenizer.h"
#include "io/indexed_dataset.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

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

// ---- JSON extraction ------------------------------------------------------------------------

std::string text_of(const std::string& line) {
  std::vector<std::string> v;
  const absl::Status s = extract_json_strings(line, {"text"}, &v);
  EXPECT_TRUE(s.ok()) << line << ": " << s;
  return s.ok() ? v[0] : "<error>";
}

absl::Status parse_error(const std::string& line) {
  std::vector<std::string> v;
  const absl::Status s = extract_json_strings(line, {"text"}, &v);
  EXPECT_FALSE(s.ok()) << "accepted: " << line;
  return s;
}

TEST(ExtractJsonStrings, DecodesEscapes) {
  EXPECT_EQ(text_of(R"({"text": "hello"})"), "hello");
  EXPECT_EQ(text_of(R"(  {"text":""}  )"), "");
  EXPECT_EQ(text_of(R"({"text": "a\"b\\c\/d\b\f\n\r\t"})"), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(text_of(R"({"text": "caf\u00e9 \u20AC"})"), "caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(text_of(R"({"text": "\u0000x"})"), std::string("\0x", 2));
  // A surrogate pair is one code point (U+1F600), 4 UTF-8 bytes.
  EXPECT_EQ(text_of(R"({"text": "\ud83d\ude00!"})"), "\xf0\x9f\x98\x80!");
  // Lone surrogates (Python keeps them; UTF-8 cannot) become U+FFFD.
  EXPECT_EQ(text_of(R"({"text": "\ud83dx"})"), "\xef\xbf\xbdx");
  EXPECT_EQ(text_of(R"({"text": "\ude00"})"), "\xef\xbf\xbd");
  EXPECT_EQ(text_of(R"({"text": "\ud83d\u0041"})"),
            "\xef\xbf\xbd"
            "A");
  // Raw UTF-8 and even invalid bytes pass through untouched.
  EXPECT_EQ(text_of("{\"text\": \"\xe4\xb8\xad\xff\"}"), "\xe4\xb8\xad\xff");
}

TEST(ExtractJsonStrings, SkipsOtherValuesAndFindsTopLevelKeysOnly) {
  const std::string line =
      R"({"meta": {"text": "nested", "a": [1, -2.5e+3, true, false, null, {"b": []}]},)"
      R"( "id": 12, "score": -0.0, "nan": NaN, "inf": -Infinity, "text": "top", "x": "y"})";
  EXPECT_EQ(text_of(line), "top");
  // Duplicate keys: the last one wins, as in Python's json.
  EXPECT_EQ(text_of(R"({"text": "first", "text": "second"})"), "second");
  std::vector<std::string> v;
  ASSERT_TRUE(extract_json_strings(R"({"title": "T", "body": "B"})", {"body", "title"}, &v).ok());
  EXPECT_EQ(v, (std::vector<std::string>{"B", "T"}));
}

TEST(ExtractJsonStrings, ErrorsNameTheProblemAndColumn) {
  EXPECT_THAT(std::string(parse_error(R"({"id": 1})").message()), HasSubstr("missing key"));
  EXPECT_THAT(std::string(parse_error(R"({"text": 5})").message()), HasSubstr("not a string"));
  EXPECT_THAT(std::string(parse_error(R"({"text": null})").message()), HasSubstr("not a string"));
  EXPECT_THAT(std::string(parse_error(R"(["text"])").message()), HasSubstr("column 1"));
  EXPECT_THAT(std::string(parse_error(R"({"text": "abc)").message()), HasSubstr("unterminated"));
  EXPECT_THAT(std::string(parse_error(R"({"text": "a",})").message()), HasSubstr("column 14"));
  EXPECT_THAT(std::string(parse_error(R"({"text": "a"} x)").message()), HasSubstr("trailing"));
  EXPECT_THAT(std::string(parse_error(R"({"text": "\x"})").message()), HasSubstr("bad escape"));
  EXPECT_THAT(std::string(parse_error(R"({"text": "\u12"})").message()), HasSubstr("\\u"));
  EXPECT_THAT(std::string(parse_error("{\"text\": \"a\tb\"}").message()),
              HasSubstr("control character"));
  (void)parse_error(R"({"a": 01, "text": ""})");
  (void)parse_error(R"({"a": 1., "text": ""})");
  (void)parse_error(R"({"a": [1 2], "text": ""})");
  (void)parse_error(R"({"a": tru, "text": ""})");
  (void)parse_error(R"({text: ""})");
  (void)parse_error("");
  (void)parse_error(std::string(2000, '[') + std::string(2000, ']'));  // nesting limit, no overflow
}

// ---- preprocess_corpus -----------------------------------------------------------------------

// All documents of a dataset, as strings (EOD -> '|').
std::vector<std::string> read_docs(const std::string& prefix) {
  auto ds = IndexedDataset::open(prefix);
  EXPECT_TRUE(ds.ok()) << ds.status();
  if (!ds.ok()) return {};
  std::vector<std::string> out;
  for (int64_t d = 0; d < (*ds)->num_documents(); ++d) {
    std::string doc;
    for (int64_t q = (*ds)->doc_idx()[d]; q < (*ds)->doc_idx()[d + 1]; ++q) {
      std::vector<int32_t> t((*ds)->sizes()[q]);
      (*ds)->read(q, 0, t.size(), t.data());
      doc += *ByteTokenizer().decode(t, "|");
    }
    out.push_back(doc);
  }
  EXPECT_EQ((*ds)->dtype(), TokenDType::kU16);
  return out;
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
  auto stats = preprocess_corpus(opt, [&](uint64_t b, uint64_t d) {
    EXPECT_GE(b, last_bytes);
    last_bytes = b;
    last_docs = d;
  });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(read_docs(dir.file("out_text_document")),
            (std::vector<std::string>{"First line\nsecond line|", "Para two\nwith CRLF|",
                                      "last, no newline|"}));
  EXPECT_EQ(stats->input_documents, 3);
  EXPECT_EQ(last_docs, 3u);
  EXPECT_EQ(stats->input_bytes, testing::read_file(dir.file("c.txt")).size());
  ASSERT_EQ(stats->outputs.size(), 1u);
  EXPECT_EQ(stats->outputs[0].prefix, dir.file("out_text_document"));
  EXPECT_EQ(stats->outputs[0].documents, 3);
  EXPECT_EQ(stats->outputs[0].tokens, 22 + 1 + 18 + 1 + 16 + 1);
  EXPECT_EQ(stats->outputs[0].bytes, 2u * stats->outputs[0].tokens);
}

TEST(PreprocessCorpus, JsonlRecordsAndKeys) {
  ScratchDir dir;
  testing::write_file(dir.file("c.jsonl"),
                      "{\"text\": \"one\", \"title\": \"T1\"}\n"
                      "\n"
                      "{\"text\": \"\", \"title\": \"T2\"}\n"  // empty text: skipped
                      "{\"title\": \"T3\", \"text\": \"three\\n\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("j");
  opt.json_keys = {"text", "title"};
  auto stats = preprocess_corpus(opt, nullptr);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->input_documents, 3);
  EXPECT_EQ(read_docs(dir.file("j_text_document")), (std::vector<std::string>{"one", "three\n"}));
  EXPECT_EQ(read_docs(dir.file("j_title_document")), (std::vector<std::string>{"T1", "T2", "T3"}));
}

TEST(PreprocessCorpus, BadJsonlLineFailsWithLineNumberOrIsSkipped) {
  ScratchDir dir;
  testing::write_file(dir.file("c.jsonl"),
                      "{\"text\": \"ok\"}\n{\"text\": \"broken}\n{\"txt\": \"x\"}\n"
                      "{\"text\": \"fine\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("c.jsonl");
  opt.output_prefix = dir.file("b");
  auto failed = preprocess_corpus(opt, nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("c.jsonl:2: column"));
  // A failed run leaves no output behind.
  EXPECT_FALSE(testing::file_exists(dir.file("b_text_document.idx")));
  EXPECT_FALSE(testing::file_exists(dir.file("b_text_document.bin")));

  opt.skip_bad_lines = true;
  auto skipped = preprocess_corpus(opt, nullptr);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->skipped_lines, 2);
  EXPECT_EQ(read_docs(dir.file("b_text_document")), (std::vector<std::string>{"ok", "fine"}));
}

TEST(PreprocessCorpus, FormatOverrideAndOptionErrors) {
  ScratchDir dir;
  testing::write_file(dir.file("data.dat"), "{\"text\": \"x\"}\n");
  PreprocessOptions opt;
  opt.input = dir.file("data.dat");
  opt.output_prefix = dir.file("o");
  opt.format = CorpusFormat::kJsonl;
  ASSERT_TRUE(preprocess_corpus(opt, nullptr).ok());
  EXPECT_EQ(read_docs(dir.file("o_text_document")), (std::vector<std::string>{"x"}));
  opt.format = CorpusFormat::kAuto;  // .dat -> plain text: the raw line is the document
  ASSERT_TRUE(preprocess_corpus(opt, nullptr).ok());
  EXPECT_EQ(read_docs(dir.file("o_text_document")),
            (std::vector<std::string>{"{\"text\": \"x\"}"}));

  PreprocessOptions bad = opt;
  bad.tokenizer_type = "GPT2BPETokenizer";
  EXPECT_THAT(std::string(preprocess_corpus(bad, nullptr).status().message()),
              HasSubstr("not supported"));
  bad = opt;
  bad.input = dir.file("missing.txt");
  EXPECT_EQ(preprocess_corpus(bad, nullptr).status().code(), absl::StatusCode::kNotFound);
  bad = opt;
  bad.json_keys = {"body"};  // plain text has only 'text'
  EXPECT_EQ(preprocess_corpus(bad, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  bad = opt;
  bad.output_prefix = dir.file("no/such/dir/p");
  EXPECT_EQ(preprocess_corpus(bad, nullptr).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace anvil::io
