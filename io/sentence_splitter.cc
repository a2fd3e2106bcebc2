// Rule-based English sentence splitting (see io/sentence_splitter.h for the rules and how they
// differ from NLTK punkt). One left-to-right pass over the bytes: find each terminator run,
// look at the word before it and the word after the whitespace, decide.
#include "io/sentence_splitter.h"

#include <algorithm>
#include <string>

namespace anvil::io {
namespace {

// Never a sentence end: titles before a name and Latin abbreviations used mid-sentence.
constexpr std::string_view kNeverSplit[] = {
    "mr",  "mrs", "ms",   "messrs", "mssrs", "mme", "mlle", "dr",  "prof",  "rev", "hon",
    "gen", "col", "capt", "lt",     "sgt",   "cpl", "maj",  "adm", "gov",   "sen", "rep",
    "fr",  "e.g", "i.e",  "cf",     "viz",   "vs",  "esp",  "ca",  "approx"};

// Usually not a sentence end, but can be one ("... Inc. The company"): a boundary only before
// a capitalized frequent sentence starter.
constexpr std::string_view kAbbreviations[] = {
    "etc",  "inc", "ltd",  "co",   "corp",  "llc",  "plc",  "jr",  "sr",   "st",   "ave",  "blvd",
    "rd",   "mt",  "ft",   "dept", "univ",  "assn", "bros", "est", "al",   "ed",   "eds",  "jan",
    "feb",  "apr", "jun",  "jul",  "aug",   "sep",  "sept", "oct", "nov",  "dec",  "mon",  "tue",
    "tues", "wed", "thu",  "thur", "thurs", "fri",  "min",  "max", "misc", "govt", "intl", "natl",
    "mfg",  "vol", "vols", "fig",  "figs",  "pp",   "ch",   "sec", "eq",   "eqs",  "refs", "dist"};

// Numbering abbreviations, some also words ("said no."): never a boundary before a number
// ("No. 5", "Fig. 3").
constexpr std::string_view kNumberAbbreviations[] = {
    "no",  "nos", "nr", "vol", "vols", "fig",  "figs", "p",   "pp",   "ch",
    "sec", "art", "eq", "eqs", "ref",  "refs", "op",   "tab", "para", "pg"};

// Frequent sentence starters (lowercased), as in punkt's learned `sent_starters`.
constexpr std::string_view kSentenceStarters[] = {
    "the",         "a",         "an",     "this",     "that",   "these",   "those",     "it",
    "its",         "he",        "she",    "we",       "they",   "i",       "you",       "there",
    "here",        "in",        "on",     "at",       "as",     "but",     "and",       "or",
    "so",          "if",        "when",   "while",    "after",  "before",  "however",   "then",
    "thus",        "therefore", "also",   "although", "though", "because", "since",     "what",
    "why",         "how",       "where",  "who",      "which",  "my",      "our",       "his",
    "her",         "their",     "your",   "one",      "some",   "many",    "most",      "all",
    "no",          "not",       "for",    "to",       "from",   "with",    "by",        "each",
    "every",       "both",      "yet",    "still",    "now",    "today",   "meanwhile", "moreover",
    "furthermore", "instead",   "indeed", "during",   "until",  "despite", "mr",        "mrs",
    "ms",          "dr",        "let",    "please",   "other",  "such",    "another",   "only",
    "even",        "under",     "over"};

template <size_t N>
bool contains(const std::string_view (&list)[N], std::string_view word) {
  return std::find(std::begin(list), std::end(list), word) != std::end(list);
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return is_upper(c) || is_lower(c); }

// Byte length of the whitespace character at text[i], else 0 (ASCII whitespace, U+00A0).
size_t space_len(std::string_view text, size_t i) {
  if (is_ascii_space(text[i])) return 1;
  if (text[i] == '\xc2' && i + 1 < text.size() && text[i + 1] == '\xa0') return 2;
  return 0;
}

// True when the 3 bytes at text[i] are E2 80 `third`.
bool is_e280(std::string_view text, size_t i, char third) {
  return i + 2 < text.size() && text[i] == '\xe2' && text[i + 1] == '\x80' && text[i + 2] == third;
}

// Terminator at text[i]: . ? ! (1 byte) or U+2026 … (3 bytes); 0 otherwise.
size_t terminator_len(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '.' || c == '?' || c == '!') return 1;
  return is_e280(text, i, '\xa6') ? 3 : 0;
}

// Closing quote or bracket at text[i]: " ' ) ] } ” ’ »; 0 otherwise.
size_t closer_len(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '"' || c == '\'' || c == ')' || c == ']' || c == '}') return 1;
  if (is_e280(text, i, '\x9d') || is_e280(text, i, '\x99')) return 3;
  if (c == '\xc2' && i + 1 < text.size() && text[i + 1] == '\xbb') return 2;
  return 0;
}

// Opening quote or bracket at text[i]: " ' ( [ { “ ‘ «; 0 otherwise.
size_t opener_len(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '"' || c == '\'' || c == '(' || c == '[' || c == '{') return 1;
  if (is_e280(text, i, '\x9c') || is_e280(text, i, '\x98')) return 3;
  if (c == '\xc2' && i + 1 < text.size() && text[i + 1] == '\xab') return 2;
  return 0;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (is_upper(c)) c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// "U.S", "Ph.D", "a.m": letters with inner periods (the final period is the terminator).
bool is_dotted_abbreviation(std::string_view word) {
  if (word.find('.') == std::string_view::npos) return false;
  for (const char c : word) {
    if (!is_alpha(c) && c != '.') return false;
  }
  return is_alpha(word.front());
}

bool all_digits(std::string_view word) {
  if (word.empty()) return false;
  for (const char c : word) {
    if (!is_digit(c)) return false;
  }
  return true;
}

}  // namespace

void SentenceSplitter::split(std::string_view text, std::vector<std::string_view>* out) const {
  const size_t n = text.size();
  size_t start = 0;  // the current sentence begins here
  size_t i = 0;
  while (i < n) {
    if (terminator_len(text, i) == 0) {
      ++i;
      continue;
    }
    // The terminator run, e.g. "." "?!" "..." "…".
    const size_t t0 = i;
    size_t j = i;
    int periods = 0;
    bool question_or_bang = false, ellipsis = false;
    for (size_t len; j < n && (len = terminator_len(text, j)) > 0; j += len) {
      if (len == 3) {
        ellipsis = true;
      } else if (text[j] == '.') {
        ++periods;
      } else {
        question_or_bang = true;
      }
    }
    for (size_t len; j < n && (len = closer_len(text, j)) > 0;) j += len;
    const size_t close_end = j;
    size_t k = j;
    for (size_t len; k < n && (len = space_len(text, k)) > 0;) k += len;
    i = close_end;
    // A boundary needs whitespace and then more text: "3.14", "e.g.," and a final "." are not.
    if (k == close_end || k >= n) continue;

    // The word before the terminators, without its opening / closing punctuation.
    size_t ws = t0;
    while (ws > start && !is_ascii_space(text[ws - 1]) &&
           !(text[ws - 1] == '\xa0' && ws >= 2 && text[ws - 2] == '\xc2')) {
      --ws;
    }
    std::string_view word = text.substr(ws, t0 - ws);
    for (size_t len; !word.empty() && (len = opener_len(word, 0)) > 0;) word.remove_prefix(len);
    while (!word.empty() && (word.back() == ')' || word.back() == ']' || word.back() == '"' ||
                             word.back() == '\'')) {
      word.remove_suffix(1);
    }
    // The next word, past opening quotes / brackets.
    size_t m = k;
    for (size_t len; m < n && (len = opener_len(text, m)) > 0;) m += len;
    const char next = m < n ? text[m] : ' ';
    size_t next_end = m;
    while (next_end < n && is_alpha(text[next_end])) ++next_end;
    const std::string next_word = ascii_lower(text.substr(m, next_end - m));

    bool boundary;
    if (question_or_bang) {
      boundary = !is_lower(next);
    } else if (ellipsis || periods >= 2) {
      boundary = is_upper(next);
    } else if (word.empty()) {
      boundary = true;  // a free-standing " . "
    } else {
      const std::string lw = ascii_lower(word);
      const size_t dash = lw.rfind('-');
      const std::string last = dash == std::string::npos ? lw : lw.substr(dash + 1);
      // Only whitespace between the sentence start and the word: it opens the sentence/line.
      bool opens_sentence = true;
      for (size_t p = start; p < ws; ++p) {
        if (!is_ascii_space(text[p])) opens_sentence = false;
      }
      if (!opens_sentence && ws > 0 && text[ws - 1] == '\n') opens_sentence = true;
      const bool single_letter = word.size() == 1 && is_alpha(word[0]);
      if (contains(kNeverSplit, lw) || contains(kNeverSplit, last) || is_lower(next)) {
        boundary = false;
      } else if (opens_sentence && (all_digits(word) || single_letter)) {
        boundary = false;  // "1. First item", "a. option"
      } else if (is_digit(next) && contains(kNumberAbbreviations, lw)) {
        boundary = false;
      } else if (contains(kAbbreviations, lw) || contains(kAbbreviations, last) ||
                 is_dotted_abbreviation(word) || single_letter) {
        boundary = is_upper(next) && contains(kSentenceStarters, next_word);
      } else {
        boundary = true;
      }
    }
    if (!boundary) continue;
    out->push_back(text.substr(start, (keep_newlines_ ? k : close_end) - start));
    start = k;
    i = k;
  }
  if (start < n) out->push_back(text.substr(start));
}

}  // namespace anvil::io
