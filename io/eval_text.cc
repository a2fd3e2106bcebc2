// Zero-shot evaluation text (see eval_text.h): Megatron's wikitext detokenizer and word count,
// LAMBADA's context / target split, and whole-dataset token reads.
#include "io/eval_text.h"

#include <climits>
#include <cstddef>
#include <functional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "engine/status.h"
#include "io/durable_file.h"
#include "io/indexed_dataset.h"
#include "io/json_fields.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io {
namespace {

// Python's str.isspace() for one code point.
bool py_space(char32_t cp) { return utf8::is_white_space(cp) || (cp >= 0x1c && cp <= 0x1f); }

// Byte length of the whitespace prefix of valid UTF-8 `s`.
size_t space_prefix(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const utf8::Decoded d = utf8::decode_at(s, i);
    if (!py_space(d.cp)) break;
    i += static_cast<size_t>(d.length);
  }
  return i;
}

// Byte length of the whitespace suffix of valid UTF-8 `s`.
size_t space_suffix(absl::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (!py_space(utf8::decode_at(s, start).cp)) break;
    end = start;
  }
  return s.size() - end;
}

// Python's str.strip().
absl::string_view py_strip(absl::string_view s) {
  s.remove_prefix(space_prefix(s));
  s.remove_suffix(space_suffix(s));
  return s;
}

// re.sub(open \s*([^close]*?)\s* close, open \1 close, s): from each `open`, up to the next
// `close` (open == close: the next occurrence), the whitespace just inside the pair removed;
// an `open` with no `close` after it is left alone. Scanning resumes after the close.
std::string strip_inside(absl::string_view s, char open, char close) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t j = s[i] == open ? s.find(close, i + 1) : absl::string_view::npos;
    if (j == absl::string_view::npos) {
      out.push_back(s[i++]);
      continue;
    }
    absl::StrAppend(&out, absl::string_view(&open, 1), py_strip(s.substr(i + 1, j - i - 1)),
                    absl::string_view(&close, 1));
    i = j + 1;
  }
  return out;
}

// re.sub(r"/' [0-9]/", r"/'[0-9]/", s): Megatron's line replaces the matched text with the
// literal characters /'[0-9]/ (the replacement is not a pattern); kept as written.
std::string megatron_slash_quote(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s.substr(i, 3) == "/' " && i + 4 < s.size() && s[i + 3] >= '0' && s[i + 3] <= '9' &&
        s[i + 4] == '/') {
      out += "/'[0-9]/";
      i += 5;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

std::string replace(absl::string_view s, absl::string_view from, absl::string_view to) {
  return absl::StrReplaceAll(s, {{from, to}});
}

}  // namespace

absl::StatusOr<Detokenizer> parse_detokenizer(absl::string_view name) {
  if (name == "none") return Detokenizer::kNone;
  if (name == "wikitext") return Detokenizer::kWikitext;
  return absl::InvalidArgumentError(
      absl::StrCat("detokenizer \"", name, "\": expected none or wikitext"));
}

std::string wikitext_detokenize(absl::string_view text) {
  // Megatron's wikitext_detokenizer, in its order. Contractions:
  std::string s = replace(text, "s '", "s'");
  s = megatron_slash_quote(s);
  // Number separators.
  s = replace(s, " @-@ ", "-");
  s = replace(s, " @,@ ", ",");
  s = replace(s, " @.@ ", ".");
  // Punctuation.
  for (const char* p : {":", ";", ".", "!", "?"}) {
    s = replace(s, absl::StrCat(" ", p, " "), absl::StrCat(p, " "));
  }
  s = replace(s, " , ", ", ");
  // Double brackets.
  s = strip_inside(s, '(', ')');
  s = strip_inside(s, '[', ']');
  s = strip_inside(s, '{', '}');
  s = strip_inside(s, '"', '"');
  s = strip_inside(s, '\'', '\'');
  // Miscellaneous.
  s = replace(s, "= = = =", "====");
  s = replace(s, "= = =", "===");
  s = replace(s, "= =", "==");
  s = replace(s, " \u00b0 ", "\u00b0");
  s = replace(s, " \n", "\n");
  s = replace(s, "\n ", "\n");
  s = replace(s, " N ", " 1 ");
  s = replace(s, " 's", "'s");
  return s;
}

int64_t megatron_word_count(absl::string_view text) {
  int64_t n = 1;
  for (char c : py_strip(text)) n += c == ' ';
  return n;
}

absl::StatusOr<EvalText> load_eval_text(const std::string& path, const Tokenizer& tokenizer,
                                        Detokenizer detokenizer) {
  ANVIL_ASSIGN_OR_RETURN(std::string text, read_file(path));
  const size_t valid = utf8::valid_prefix_length(text);
  if (valid != text.size()) {
    return absl::DataLossError(
        absl::StrFormat("%s: invalid UTF-8 at byte %d (the text must be UTF-8)", path, valid));
  }
  EvalText out;
  out.words = megatron_word_count(text);
  if (detokenizer == Detokenizer::kWikitext) text = wikitext_detokenize(text);
  out.tokens = tokenizer.encode(text);
  return out;
}

absl::StatusOr<LambadaExample> lambada_split(absl::string_view text, const Tokenizer& tokenizer,
                                             bool strict) {
  LambadaExample e;
  if (!strict) {
    e.context = tokenizer.encode(text);
    if (e.context.size() < 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the text has %d token(s); needs a context and a last token", e.context.size()));
    }
    e.target.push_back(e.context.back());
    e.context.pop_back();
    return e;
  }
  // text.split()[-1]: the last run of non-whitespace.
  const absl::string_view trimmed = text.substr(0, text.size() - space_suffix(text));
  size_t start = trimmed.size();
  while (start > 0) {
    size_t cp_start = start - 1;
    while (cp_start > 0 && (static_cast<unsigned char>(trimmed[cp_start]) & 0xC0) == 0x80) {
      --cp_start;
    }
    if (py_space(utf8::decode_at(trimmed, cp_start).cp)) break;
    start = cp_start;
  }
  const absl::string_view last = trimmed.substr(start);
  if (last.empty()) return absl::InvalidArgumentError("the text has no word");
  // text.rfind(last) is `start`: only whitespace follows the last word.
  e.context = tokenizer.encode(py_strip(text.substr(0, start)));
  e.target = tokenizer.encode(absl::StrCat(" ", last));
  return e;
}

absl::StatusOr<std::vector<LambadaExample>> load_lambada(const std::string& path,
                                                         const Tokenizer& tokenizer, bool strict) {
  std::vector<LambadaExample> out;
  ANVIL_RETURN_IF_ERROR(
      for_each_jsonl(path, [&](const nlohmann::json& j, const std::string& where) -> absl::Status {
        ANVIL_ASSIGN_OR_RETURN(std::string text, json_string(j, "text", where));
        absl::StatusOr<LambadaExample> e = lambada_split(text, tokenizer, strict);
        if (!e.ok()) return absl::DataLossError(absl::StrCat(where, ": ", e.status().message()));
        out.push_back(*std::move(e));
        return absl::OkStatus();
      }));
  if (out.empty()) return absl::InvalidArgumentError(path + ": no examples");
  return out;
}

absl::StatusOr<std::vector<LabeledText>> load_labeled_texts(const std::string& path,
                                                            const Tokenizer& tokenizer) {
  std::vector<LabeledText> out;
  ANVIL_RETURN_IF_ERROR(
      for_each_jsonl(path, [&](const nlohmann::json& j, const std::string& where) -> absl::Status {
        ANVIL_ASSIGN_OR_RETURN(std::string text, json_string(j, "text", where));
        ANVIL_ASSIGN_OR_RETURN(int64_t label, json_int(j, "label", where));
        if (label < 0 || label > INT32_MAX) {
          return absl::DataLossError(
              absl::StrFormat("%s: label %d: expected 0 .. 2^31 - 1", where, label));
        }
        out.push_back({tokenizer.encode(text), static_cast<int32_t>(label)});
        if (out.back().tokens.empty())
          return absl::DataLossError(where + ": the text has no token");
        return absl::OkStatus();
      }));
  if (out.empty()) return absl::InvalidArgumentError(path + ": no examples");
  return out;
}

absl::StatusOr<std::vector<int32_t>> read_all_tokens(const std::string& prefix) {
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> d, IndexedDataset::open(prefix));
  std::vector<int32_t> out(static_cast<size_t>(d->total_tokens()));
  size_t at = 0;
  for (int64_t s = 0; s < d->num_sequences(); ++s) {
    const int64_t n = d->sizes()[static_cast<size_t>(s)];
    ANVIL_RETURN_IF_ERROR(d->read(s, 0, n, out.data() + at));
    at += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace anvil::io
