// The JSONL string extractor of bin/preprocess (io/json_strings.h): escapes, surrogates, keys
// at the top level only, and errors that name the problem and the column.
#include "io/json_strings.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::io {
namespace {

using ::testing::HasSubstr;

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

// ---- find_invalid_utf8 ----------------------------------------------------------------------

}  // namespace
}  // namespace anvil::io
