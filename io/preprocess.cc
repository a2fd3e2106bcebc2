// Corpus readers (plain-text paragraphs, JSONL records) feeding IndexedDatasetWriter; see
// io/preprocess.h. Input is streamed line by line, so memory stays flat for any corpus size.
#include "io/preprocess.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/byte_tokenizer.h"
#include "io/indexed_dataset.h"

namespace anvil::io {
namespace {

// ------------------------------------------------------------------------------------------
// Minimal JSON: validates a whole object, decodes only the wanted top-level string values.
// ------------------------------------------------------------------------------------------

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view s) : s_(s) {}

  absl::Status extract(const std::vector<std::string>& keys, std::vector<std::string>* values) {
    values->assign(keys.size(), std::string());
    std::vector<bool> found(keys.size(), false);
    skip_ws();
    if (!eat('{')) return error("expected '{' (each line must be one JSON object)");
    skip_ws();
    if (!eat('}')) {
      std::string key;
      while (true) {
        skip_ws();
        if (peek() != '"') return error("expected a string key");
        ANVIL_RETURN_IF_ERROR(parse_string(&key));
        skip_ws();
        if (!eat(':')) return error("expected ':' after a key");
        skip_ws();
        size_t wanted = keys.size();
        for (size_t i = 0; i < keys.size(); ++i) {
          if (keys[i] == key) wanted = i;
        }
        if (wanted < keys.size()) {
          if (peek() != '"') {
            return error(absl::StrCat("the value of key \"", key, "\" is not a string"));
          }
          ANVIL_RETURN_IF_ERROR(parse_string(&(*values)[wanted]));
          found[wanted] = true;
        } else {
          ANVIL_RETURN_IF_ERROR(skip_value(0));
        }
        skip_ws();
        if (eat(',')) continue;
        if (eat('}')) break;
        return error("expected ',' or '}' in an object");
      }
    }
    skip_ws();
    if (pos_ != s_.size()) return error("trailing characters after the JSON object");
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!found[i]) {
        return absl::InvalidArgumentError(absl::StrCat("missing key \"", keys[i], "\""));
      }
    }
    return absl::OkStatus();
  }

 private:
  static constexpr int kMaxDepth = 512;

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  bool eat_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("column ", pos_ + 1, ": ", what));
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads the 4 hex digits after "\u".
  absl::Status parse_hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex_digit(s_[pos_ + i]);
      if (h < 0) return error("bad hex digit in \\u escape");
      v = v * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    *out = v;
    return absl::OkStatus();
  }

  static void append_utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Parses a string starting at '"' into *out (decoded); out may be nullptr to skip.
  absl::Status parse_string(std::string* out) {
    if (out != nullptr) out->clear();
    ++pos_;  // opening quote
    while (true) {
      // Copy the run of plain bytes up to the next quote, backslash or control character.
      const size_t run = pos_;
      while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\' &&
             static_cast<unsigned char>(s_[pos_]) >= 0x20) {
        ++pos_;
      }
      if (out != nullptr) out->append(s_.data() + run, pos_ - run);
      if (pos_ >= s_.size()) return error("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c != '\\') return error("unescaped control character in a string");
      ++pos_;
      if (pos_ >= s_.size()) return error("unterminated escape");
      const char e = s_[pos_++];
      char plain = 0;
      switch (e) {
        case '"':
          plain = '"';
          break;
        case '\\':
          plain = '\\';
          break;
        case '/':
          plain = '/';
          break;
        case 'b':
          plain = '\b';
          break;
        case 'f':
          plain = '\f';
          break;
        case 'n':
          plain = '\n';
          break;
        case 'r':
          plain = '\r';
          break;
        case 't':
          plain = '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          ANVIL_RETURN_IF_ERROR(parse_hex4(&cp));
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate combines with an immediately following \uDC00-\uDFFF.
            uint32_t lo = 0;
            if (pos_ + 6 <= s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
              const size_t save = pos_;
              pos_ += 2;
              ANVIL_RETURN_IF_ERROR(parse_hex4(&lo));
              if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              } else {
                pos_ = save;  // not a pair: re-read that escape on its own
                cp = 0xFFFD;
              }
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = 0xFFFD;  // lone low surrogate
          }
          if (out != nullptr) append_utf8(cp, out);
          continue;
        }
        default:
          --pos_;
          return error(absl::StrCat("bad escape '\\", std::string(1, e), "'"));
      }
      if (out != nullptr) out->push_back(plain);
    }
  }

  absl::Status skip_number() {
    const size_t start = pos_;
    eat('-');
    if (eat_word("Infinity")) return absl::OkStatus();
    if (eat('0')) {
    } else if (absl::ascii_isdigit(peek())) {
      while (absl::ascii_isdigit(peek())) ++pos_;
    } else {
      pos_ = start;
      return error("bad number");
    }
    if (eat('.')) {
      if (!absl::ascii_isdigit(peek())) return error("bad number: digits expected after '.'");
      while (absl::ascii_isdigit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!absl::ascii_isdigit(peek())) return error("bad number: digits expected in exponent");
      while (absl::ascii_isdigit(peek())) ++pos_;
    }
    return absl::OkStatus();
  }

  absl::Status skip_value(int depth) {
    if (depth > kMaxDepth) return error("nesting too deep");
    const char c = peek();
    if (c == '"') return parse_string(nullptr);
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      skip_ws();
      if (eat(close)) return absl::OkStatus();
      while (true) {
        skip_ws();
        if (c == '{') {
          if (peek() != '"') return error("expected a string key");
          ANVIL_RETURN_IF_ERROR(parse_string(nullptr));
          skip_ws();
          if (!eat(':')) return error("expected ':' after a key");
          skip_ws();
        }
        ANVIL_RETURN_IF_ERROR(skip_value(depth + 1));
        skip_ws();
        if (eat(',')) continue;
        if (eat(close)) return absl::OkStatus();
        return error(c == '{' ? "expected ',' or '}' in an object"
                              : "expected ',' or ']' in an array");
      }
    }
    if (eat_word("true") || eat_word("false") || eat_word("null") || eat_word("NaN")) {
      return absl::OkStatus();
    }
    if (c == '-' || absl::ascii_isdigit(c) || c == 'I') {
      if (c == 'I') return eat_word("Infinity") ? absl::OkStatus() : error("unexpected 'I'");
      return skip_number();
    }
    if (pos_ >= s_.size()) return error("unexpected end of line, a value was expected");
    return error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// ------------------------------------------------------------------------------------------
// Line reader over a FILE* (getline handles lines of any length).
// ------------------------------------------------------------------------------------------

class LineReader {
 public:
  ~LineReader() {
    std::free(buf_);
    if (file_ != nullptr && file_ != stdin) std::fclose(file_);
  }
  absl::Status open(const std::string& path) {
    path_ = path;
    if (path == "-") {
      file_ = stdin;
    } else {
      file_ = std::fopen(path.c_str(), "rb");
      if (file_ == nullptr) {
        const int err = errno;
        const std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
        return err == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
      }
    }
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
    return absl::OkStatus();
  }
  // The next line without its '\n'; false at end of file (error() tells a read error).
  bool next(std::string_view* line) {
    const ssize_t n = ::getline(&buf_, &cap_, file_);
    if (n < 0) return false;
    bytes_ += static_cast<uint64_t>(n);
    ++line_no_;
    size_t len = static_cast<size_t>(n);
    if (len > 0 && buf_[len - 1] == '\n') --len;
    *line = std::string_view(buf_, len);
    return true;
  }
  absl::Status status() const {
    if (std::ferror(file_)) {
      return absl::DataLossError(absl::StrCat(path_, ": read error: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  uint64_t bytes() const { return bytes_; }
  int64_t line_no() const { return line_no_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  char* buf_ = nullptr;
  size_t cap_ = 0;
  uint64_t bytes_ = 0;
  int64_t line_no_ = 0;
};

bool is_blank(std::string_view line) {
  for (const char c : line) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// One output dataset per JSON key.
struct Sink {
  PreprocessOutput stats;
  std::unique_ptr<IndexedDatasetWriter> writer;
};

}  // namespace

absl::Status extract_json_strings(std::string_view line, const std::vector<std::string>& keys,
                                  std::vector<std::string>* values) {
  return JsonScanner(line).extract(keys, values);
}

absl::StatusOr<PreprocessStats> preprocess_corpus(const PreprocessOptions& options,
                                                  const PreprocessProgress& progress) {
  if (options.input.empty()) return absl::InvalidArgumentError("no input given (--input)");
  if (options.output_prefix.empty()) {
    return absl::InvalidArgumentError("no output prefix given (--output-prefix)");
  }
  if (!absl::EqualsIgnoreCase(options.tokenizer_type, "Byte")) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer type '", options.tokenizer_type,
                                                   "' is not supported yet (supported: Byte)"));
  }
  if (options.json_keys.empty()) return absl::InvalidArgumentError("--json-keys is empty");
  CorpusFormat format = options.format;
  if (format == CorpusFormat::kAuto) {
    format = absl::EndsWith(options.input, ".jsonl") || absl::EndsWith(options.input, ".json")
                 ? CorpusFormat::kJsonl
                 : CorpusFormat::kText;
  }
  if (format == CorpusFormat::kText &&
      (options.json_keys.size() != 1 || options.json_keys[0] != "text")) {
    return absl::InvalidArgumentError(
        "--json-keys applies to JSONL input only (plain text has the single key 'text')");
  }

  const ByteTokenizer tokenizer;
  const TokenDType dtype = token_dtype_for_vocab(tokenizer.vocab_size());
  PreprocessStats stats;
  if (options.input != "-") {
    struct stat st;
    if (::stat(options.input.c_str(), &st) == 0) stats.input_bytes = st.st_size;
  }
  LineReader reader;
  ANVIL_RETURN_IF_ERROR(reader.open(options.input));

  std::vector<Sink> sinks(options.json_keys.size());
  for (size_t i = 0; i < sinks.size(); ++i) {
    sinks[i].stats.prefix =
        absl::StrCat(options.output_prefix, "_", options.json_keys[i], "_document");
    ANVIL_ASSIGN_OR_RETURN(sinks[i].writer,
                           IndexedDatasetWriter::create(sinks[i].stats.prefix, dtype));
  }
  std::vector<int32_t> tokens;
  const size_t item = token_dtype_size(dtype);
  // Tokenizes one document's text into sink `i`; empty documents are skipped (no EOD either).
  auto emit = [&](size_t i, std::string_view text) -> absl::Status {
    if (text.empty()) return absl::OkStatus();
    tokens.clear();
    tokenizer.encode_append(text, &tokens);
    if (options.append_eod) tokens.push_back(tokenizer.eod());
    Sink& sink = sinks[i];
    ANVIL_RETURN_IF_ERROR(sink.writer->add_sequence(tokens));
    ANVIL_RETURN_IF_ERROR(sink.writer->end_document());
    ++sink.stats.documents;
    sink.stats.tokens += static_cast<int64_t>(tokens.size());
    sink.stats.bytes += tokens.size() * item;
    return absl::OkStatus();
  };
  auto report = [&]() {
    if (progress) progress(reader.bytes(), static_cast<uint64_t>(stats.input_documents));
  };

  std::string_view line;
  if (format == CorpusFormat::kText) {
    std::string paragraph;
    bool open = false;
    auto flush = [&]() -> absl::Status {
      if (!open) return absl::OkStatus();
      ++stats.input_documents;
      ANVIL_RETURN_IF_ERROR(emit(0, paragraph));
      paragraph.clear();
      open = false;
      report();
      return absl::OkStatus();
    };
    while (reader.next(&line)) {
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (is_blank(line)) {
        ANVIL_RETURN_IF_ERROR(flush());
        continue;
      }
      if (open) paragraph.push_back('\n');
      paragraph.append(line.data(), line.size());
      open = true;
    }
    ANVIL_RETURN_IF_ERROR(flush());
  } else {
    std::vector<std::string> values;
    while (reader.next(&line)) {
      if (is_blank(line)) continue;
      const absl::Status parsed = extract_json_strings(line, options.json_keys, &values);
      if (!parsed.ok()) {
        if (options.skip_bad_lines) {
          ++stats.skipped_lines;
          continue;
        }
        return absl::InvalidArgumentError(
            absl::StrCat(options.input, ":", reader.line_no(), ": ", parsed.message()));
      }
      ++stats.input_documents;
      for (size_t i = 0; i < sinks.size(); ++i) ANVIL_RETURN_IF_ERROR(emit(i, values[i]));
      report();
    }
  }
  ANVIL_RETURN_IF_ERROR(reader.status());
  if (stats.input_bytes == 0) stats.input_bytes = reader.bytes();
  for (Sink& sink : sinks) {
    ANVIL_RETURN_IF_ERROR(sink.writer->finish());
    stats.outputs.push_back(sink.stats);
  }
  return stats;
}

}  // namespace anvil::io
