// Typed ini configuration on top of libinih. inih tokenizes lines ([section], key = value); this
// file feeds it the text through its own line reader so that the behaviour does not depend on how
// the installed libinih was built:
//   - every line is counted here (the handler then knows its line number without
//     INI_HANDLER_LINENO),
//   - leading whitespace is removed, so an indented line is never glued to the previous key as a
//     multi-line continuation (INI_ALLOW_MULTILINE is on in Debian's build),
//   - inline comments starting with ';' or '#' after whitespace are removed (Debian's build only
//     strips ';'),
//   - a line longer than inih's buffer (INI_MAX_LINE = 200 there, longer lines are silently cut)
//     passes its value through a side slot instead of the buffer,
//   - section headers are checked here, so an unknown section is an error even when it is empty.
// Values are validated and canonicalized once at load ("1_0" or "ten" for an int is an error,
// "YES" becomes "true"); getters re-parse the canonical text, which cannot fail.
#include "engine/config.h"

#include <ini.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"

namespace anvil::engine {
namespace {

// Debian's Abseil is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0), so
// absl::StrCat and the strip helpers do not take std::string_view; these small ones do.
template <class T>
std::string to_piece(const T& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else {
    return std::string(std::string_view(v));
  }
}

template <class... Args>
void append(std::string* out, const Args&... args) {
  (out->append(to_piece(args)), ...);
}

template <class... Args>
std::string cat(const Args&... args) {
  std::string out;
  append(&out, args...);
  return out;
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  return s;
}

std::string_view trim(std::string_view s) {
  s = trim_left(s);
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

const char* type_name(ConfigType type) {
  switch (type) {
    case ConfigType::kInt:
      return "int";
    case ConfigType::kFloat:
      return "float";
    case ConfigType::kBool:
      return "bool";
    case ConfigType::kString:
      return "string";
  }
  return "?";
}

std::string full_name(std::string_view section, std::string_view key) {
  return cat(section, ".", key);
}

// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions, so the common
// typo "stpes" is one edit away from "steps". '-' and '_' compare equal (Megatron's flags are
// spelled --hidden-size, our keys hidden_size).
int edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    if (x == '-') x = '_';
    if (y == '-') y = '_';
    return absl::ascii_tolower(x) == absl::ascii_tolower(y);
  };
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = same(a[i - 1], b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  const int limit = std::max(1, std::min(3, static_cast<int>(word.size()) / 3));
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const int distance = edit_distance(word, c);
    if (distance < best_distance) {
      best_distance = distance;
      best = c;
    }
  }
  return best;
}

std::vector<std::string> section_names(const ConfigSchema& schema) {
  std::vector<std::string> sections;
  for (const ConfigSchema::Key& k : schema.keys()) {
    if (std::find(sections.begin(), sections.end(), k.section) == sections.end()) {
      sections.push_back(k.section);
    }
  }
  return sections;
}

bool has_section(const ConfigSchema& schema, std::string_view section) {
  for (const ConfigSchema::Key& k : schema.keys()) {
    if (k.section == section) return true;
  }
  return false;
}

// "unknown section [modle] (known: model, train; did you mean [model]?)"
std::string unknown_section_message(const ConfigSchema& schema, std::string_view section) {
  const std::vector<std::string> sections = section_names(schema);
  std::string msg = cat("unknown section [", section, "] (known: ", absl::StrJoin(sections, ", "));
  const std::string guess = closest(section, sections);
  if (!guess.empty()) append(&msg, "; did you mean [", guess, "]?");
  return msg + ")";
}

// "[train] unknown key 'stpes' (did you mean 'steps'?)"; a key that exists in another section is
// pointed there ("did you mean [optim] lr?"), which is the usual mistake of a Megatron user who
// knows the flag but not our grouping.
std::string unknown_key_message(const ConfigSchema& schema, std::string_view section,
                                std::string_view key) {
  std::string msg = cat("[", section, "] unknown key '", key, "'");
  for (const ConfigSchema::Key& k : schema.keys()) {
    if (k.key == key) return cat(msg, " (did you mean [", k.section, "] ", key, "?)");
  }
  std::vector<std::string> same_section, other;
  for (const ConfigSchema::Key& k : schema.keys()) {
    (k.section == section ? same_section : other).push_back(k.key);
  }
  std::string guess = closest(key, same_section);
  if (!guess.empty()) return cat(msg, " (did you mean '", guess, "'?)");
  guess = closest(key, other);
  if (!guess.empty()) {
    for (const ConfigSchema::Key& k : schema.keys()) {
      if (k.key == guess) return cat(msg, " (did you mean [", k.section, "] ", guess, "?)");
    }
  }
  return cat(msg, " (known: ", absl::StrJoin(same_section, ", "), ")");
}

// Plain decimal with an optional sign: "1e3", "0x10", "1_000" and "12.0" are rejected so that an
// int never silently means something other than what was typed.
bool is_decimal(std::string_view text) {
  const size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  if (i == text.size()) return false;
  for (size_t j = i; j < text.size(); ++j) {
    if (text[j] < '0' || text[j] > '9') return false;
  }
  return true;
}

bool parse_int(std::string_view text, int64_t* out) {
  if (!is_decimal(text)) return false;
  const std::string s(text);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

bool parse_float(std::string_view text, double* out) {
  if (text.empty() || absl::ascii_isspace(static_cast<unsigned char>(text[0]))) return false;
  const std::string s(text);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  // Underflow to a denormal or zero is fine (1e-400 is 0 for every purpose here); overflow is
  // caught by isfinite.
  *out = v;
  return true;
}

bool parse_bool(std::string_view text, bool* out) {
  const std::string s = absl::AsciiStrToLower(std::string(text));
  if (s == "true" || s == "1" || s == "yes" || s == "on") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "0" || s == "no" || s == "off") {
    *out = false;
    return true;
  }
  return false;
}

// Removes a ';' or '#' comment that starts the line or follows whitespace, as configparser and
// inih do for ';' ("steps = 10  # ten" is 10, "path = run#3" keeps its '#').
std::string_view strip_comment(std::string_view line) {
  for (size_t i = 0; i < line.size(); ++i) {
    if ((line[i] == ';' || line[i] == '#') &&
        (i == 0 || absl::ascii_isspace(static_cast<unsigned char>(line[i - 1])))) {
      return line.substr(0, i);
    }
  }
  return line;
}

// Shortest "%g" text that reads back to exactly `v`, so dump() round-trips and stays readable
// (0.1 rather than 0.10000000000000001).
std::string format_float(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// A value quoted in a message: its first 64 bytes, then "..." (a value may be megabytes).
std::string shown(std::string_view text) {
  constexpr size_t kShown = 64;
  return text.size() <= kShown ? std::string(text) : cat(text.substr(0, kShown), "...");
}

// Validates `text` against the key's type and choices. On success stores the canonical text in
// *canonical; on failure stores what was expected in *what ("expected an integer, got 'ten'").
bool canonicalize(const ConfigSchema::Key& k, std::string_view text, std::string* canonical,
                  std::string* what) {
  switch (k.type) {
    case ConfigType::kInt: {
      int64_t v = 0;
      if (!parse_int(text, &v)) {
        *what = is_decimal(text)
                    ? cat("expected a 64-bit integer, got '", shown(text), "' (out of range)")
                    : cat("expected an integer, got '", shown(text), "'");
        return false;
      }
      *canonical = std::to_string(v);
      return true;
    }
    case ConfigType::kFloat: {
      double v = 0;
      if (!parse_float(text, &v)) {
        *what = cat("expected a finite number, got '", shown(text), "'");
        return false;
      }
      *canonical = format_float(v);
      return true;
    }
    case ConfigType::kBool: {
      bool v = false;
      if (!parse_bool(text, &v)) {
        *what =
            cat("expected a boolean (true/false, yes/no, on/off, 1/0), got '", shown(text), "'");
        return false;
      }
      *canonical = v ? "true" : "false";
      return true;
    }
    case ConfigType::kString: {
      // Only overrides and defaults can hold these; the file syntax cannot, so dump() could not
      // write them back.
      if (text.find('\n') != std::string_view::npos || strip_comment(text).size() != text.size() ||
          trim(text).size() != text.size()) {
        *what = cat("'", shown(text),
                    "' cannot be written in an ini file (line break, surrounding "
                    "whitespace, or ';'/'#' after whitespace)");
        return false;
      }
      if (!k.choices.empty() &&
          std::find(k.choices.begin(), k.choices.end(), text) == k.choices.end()) {
        *what =
            cat("expected one of ", absl::StrJoin(k.choices, ", "), ", got '", shown(text), "'");
        const std::string guess = closest(text, k.choices);
        if (!guess.empty()) absl::StrAppend(what, " (did you mean '", guess, "'?)");
        return false;
      }
      *canonical = std::string(text);
      return true;
    }
  }
  return false;
}

struct Entry {
  std::string text, origin;
  int line = 0;  // line in the file, 0 for defaults and overrides
};

// State shared by the line reader and the key handler during one ini_parse_stream call.
struct ParseState {
  std::string_view text;
  const std::string* name = nullptr;
  const ConfigSchema* schema = nullptr;
  std::map<std::string, Entry>* values = nullptr;
  size_t pos = 0;
  int lineno = 0;       // line most recently handed to inih; its handler calls come before the next
  std::string section;  // the section of the latest header seen by read_line (for messages)
  // A line too long for inih's buffer hands its value over here; inih sees kLongValueMark.
  bool has_long_value = false;
  std::string long_value;
  // The first error (the lowest line wins; inih keeps parsing after an error).
  int error_line = 0;
  std::string error;

  void fail(int line, std::string msg) {
    if (error_line != 0 && error_line <= line) return;
    error_line = line;
    error = cat(*name, ":", line, ": ", msg);
  }
};

constexpr char kLongValueMark[] = "\x01";

std::string_view line_of(std::string_view text, int lineno) {
  size_t pos = 0;
  for (int i = 1; i < lineno && pos != std::string_view::npos; ++i) {
    pos = text.find('\n', pos);
    if (pos != std::string_view::npos) ++pos;
  }
  if (pos == std::string_view::npos || pos > text.size()) return {};
  std::string_view line = text.substr(pos);
  line = line.substr(0, line.find('\n'));
  return trim(line);
}

// ini_reader: fgets-like, one physical line per call (see the file comment for what it changes).
char* read_line(char* buf, int size, void* stream) {
  auto* st = static_cast<ParseState*>(stream);
  if (st->pos >= st->text.size()) return nullptr;
  size_t end = st->text.find('\n', st->pos);
  if (end == std::string_view::npos) end = st->text.size();
  std::string_view line = st->text.substr(st->pos, end - st->pos);
  st->pos = end + 1;
  ++st->lineno;
  st->has_long_value = false;
  if (st->lineno == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // UTF-8 BOM
  line = trim(strip_comment(trim_left(line)));

  if (!line.empty() && line[0] == '[') {
    const size_t close = line.find(']');
    if (close != std::string_view::npos) {
      const std::string_view section = line.substr(1, close - 1);
      st->section = std::string(section);
      if (!has_section(*st->schema, section)) {
        st->fail(st->lineno, unknown_section_message(*st->schema, section));
      }
    }
  }
  // inih reads lines as C strings: a NUL byte would silently drop the rest of the line.
  if (line.find('\0') != std::string_view::npos) {
    const std::string_view key = trim(line.substr(0, line.find_first_of("=:")));
    st->fail(st->lineno, cat("[", st->section, "] ", key.substr(0, key.find('\0')),
                             ": the line contains a NUL byte (\\0); expected text"));
    line = {};
  }

  std::string out(line);
  // inih needs room for "\n\0" and wants one more byte to tell a full line from a cut one.
  const size_t capacity = size > 3 ? static_cast<size_t>(size) - 3 : 0;
  if (out.size() > capacity) {
    const size_t eq = out.find_first_of("=:");
    if (eq != std::string::npos && eq + 3 <= capacity) {
      st->long_value = std::string(trim(out.substr(eq + 1)));
      st->has_long_value = true;
      out = cat(out.substr(0, eq + 1), " ", kLongValueMark);
    } else {
      // No key = value split that fits: hand inih something it rejects, reported as malformed.
      out = "[";
    }
  }
  std::memcpy(buf, out.data(), out.size());
  buf[out.size()] = '\n';
  buf[out.size() + 1] = '\0';
  return buf;
}

// ini_handler: one call per key = value line. Returns 0 on error (inih then reports that line as
// its first error unless an earlier line was malformed).
int on_key(void* user, const char* section_c, const char* key_c, const char* value_c) {
  auto* st = static_cast<ParseState*>(user);
  const int line = st->lineno;
  const std::string_view section(section_c), key(key_c);
  std::string_view value(value_c);
  if (st->has_long_value && value == kLongValueMark) value = st->long_value;
  if (key.empty()) {
    st->fail(line, cat("malformed line '", shown(line_of(st->text, line)),
                       "' (expected [section] or key = value)"));
    return 0;
  }
  if (section.empty()) {
    st->fail(line, cat("key '", key, "' is outside any [section]"));
    return 0;
  }
  if (!has_section(*st->schema, section)) {
    st->fail(line, unknown_section_message(*st->schema, section));
    return 0;
  }
  const ConfigSchema::Key* k = st->schema->find(section, key);
  if (k == nullptr) {
    st->fail(line, unknown_key_message(*st->schema, section, key));
    return 0;
  }
  Entry& entry = (*st->values)[full_name(section, key)];
  if (entry.line != 0) {
    st->fail(line, cat("[", section, "] ", key, ": duplicate key, already set at ", *st->name, ":",
                       entry.line));
    return 0;
  }
  std::string canonical, what;
  if (!canonicalize(*k, value, &canonical, &what)) {
    st->fail(line, cat("[", section, "] ", key, ": ", what));
    return 0;
  }
  entry = Entry{std::move(canonical), cat(*st->name, ":", line), line};
  return 1;
}

// "train.steps=100" -> ("train", "steps", "100"); false when malformed.
bool split_override(std::string_view text, std::string_view* section, std::string_view* key,
                    std::string_view* value) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) return false;
  const std::string_view lhs = trim(text.substr(0, eq));
  const size_t dot = lhs.find('.');
  if (dot == std::string_view::npos) return false;
  *section = trim(lhs.substr(0, dot));
  *key = trim(lhs.substr(dot + 1));
  *value = trim(text.substr(eq + 1));
  return !section->empty() && !key->empty();
}

// The value behind a getter: CHECKs that the schema declares the key with the getter's type.
template <class Map>
const auto& checked_value(const ConfigSchema* schema, const Map& values, std::string_view section,
                          std::string_view key, ConfigType type) {
  ANVIL_CHECK_MSG(schema != nullptr, "Config used before a successful load");
  const ConfigSchema::Key* k = schema->find(section, key);
  ANVIL_CHECK_MSG(k != nullptr,
                  cat("config key [", section, "] ", key, " is not declared in the schema"));
  ANVIL_CHECK_MSG(k->type == type, cat("config key [", section, "] ", key, " is ",
                                       type_name(k->type), ", read as ", type_name(type)));
  auto it = values.find(full_name(section, key));
  ANVIL_CHECK(it != values.end());
  return it->second;
}

bool is_alias(const ConfigSchema& schema, const ConfigSchema::Key& k) {
  for (const ConfigSchema::Alias& a : schema.aliases()) {
    if (a.section == k.section && a.alias == k.key) return true;
  }
  return false;
}

// Where a setting was made: 0 for the file, N for "override N" (later places win).
int64_t setting_rank(const Entry& e) {
  constexpr std::string_view kOverride = "override ";
  if (e.origin.compare(0, kOverride.size(), kOverride) != 0) return 0;
  return std::strtoll(e.origin.c_str() + kOverride.size(), nullptr, 10);
}

// Stores every alias setting under its key (ConfigSchema::add_alias): of an alias and its key
// set in different places the later setting wins; the same place twice is ambiguous.
absl::Status resolve_aliases(const ConfigSchema& schema, std::map<std::string, Entry>* values) {
  for (const ConfigSchema::Alias& a : schema.aliases()) {
    auto ia = values->find(full_name(a.section, a.alias));
    if (ia == values->end()) continue;
    const std::string key = full_name(a.section, a.key);
    auto ik = values->find(key);
    if (ik != values->end()) {
      const int64_t ra = setting_rank(ia->second), rk = setting_rank(ik->second);
      if (ra == rk) {
        return absl::InvalidArgumentError(cat(ia->second.origin, ": [", a.section, "] ", a.alias,
                                              " is an alias of ", a.key, ", which is also set (",
                                              ik->second.origin, "): set one of the two"));
      }
      if (ra < rk) {
        values->erase(ia);
        continue;
      }
    }
    (*values)[key] = std::move(ia->second);
    values->erase(ia);
  }
  return absl::OkStatus();
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// ConfigSchema

void ConfigSchema::add_alias(std::string section, std::string alias, std::string key) {
  ANVIL_CHECK_MSG(find(section, alias) != nullptr && find(section, key) != nullptr,
                  cat("config alias [", section, "] ", alias, " -> ", key, ": declare both first"));
  aliases_.push_back(Alias{std::move(section), std::move(alias), std::move(key)});
}

void ConfigSchema::add(std::string section, std::string key, ConfigType type,
                       std::string default_value, std::string doc,
                       std::vector<std::string> choices) {
  // Names must survive the ini syntax and the "section.key=value" override syntax.
  auto valid_name = [](const std::string& s) {
    return !s.empty() && s.find_first_of(" \t\r\n[]=:.;#") == std::string::npos;
  };
  ANVIL_CHECK_MSG(valid_name(section), cat("bad config section name '", section, "'"));
  ANVIL_CHECK_MSG(valid_name(key), cat("bad config key name '", key, "'"));
  ANVIL_CHECK_MSG(find(section, key) == nullptr,
                  cat("config key [", section, "] ", key, " declared twice"));
  ANVIL_CHECK_MSG(choices.empty() || type == ConfigType::kString,
                  cat("config key [", section, "] ", key, ": choices need kString"));
  Key k{std::move(section), std::move(key), type, "", std::move(doc), std::move(choices)};
  std::string what;
  ANVIL_CHECK_MSG(canonicalize(k, default_value, &k.default_value, &what),
                  cat("default of config key [", k.section, "] ", k.key, ": ", what));
  keys_.push_back(std::move(k));
}

const ConfigSchema::Key* ConfigSchema::find(std::string_view section, std::string_view key) const {
  for (const Key& k : keys_) {
    if (k.section == section && k.key == key) return &k;
  }
  return nullptr;
}

std::string ConfigSchema::markdown() const {
  // Table cells cannot hold '|' or newlines.
  auto cell = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '|') {
        out += "\\|";
      } else {
        out += (c == '\n') ? ' ' : c;
      }
    }
    return out;
  };
  std::string out;
  for (const std::string& section : section_names(*this)) {
    if (!out.empty()) out += "\n";
    append(&out, "## [", section, "]\n\n| key | type | default | description |\n",
           "|---|---|---|---|\n");
    for (const Key& k : keys_) {
      if (k.section != section) continue;
      std::string doc = cell(k.doc);
      if (!k.choices.empty()) {
        if (!doc.empty() && doc.back() != '.') doc += ".";
        append(&doc, doc.empty() ? "" : " ", "One of: ",
               absl::StrJoin(k.choices, ", ",
                             [&](std::string* o, const std::string& c) {
                               absl::StrAppend(o, "`", cell(c), "`");
                             }),
               ".");
      }
      const std::string def =
          k.default_value.empty() ? "(empty)" : cat("`", cell(k.default_value), "`");
      append(&out, "| `", k.key, "` | ", type_name(k.type), " | ", def, " | ", doc, " |\n");
    }
  }
  return out;
}

// ----------------------------------------------------------------------------------------------
// Config

absl::StatusOr<Config> Config::load_file(const std::string& path, const ConfigSchema& schema,
                                         const std::vector<std::string>& overrides) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(cat("config file '", path, "' not found"));
    return absl::InvalidArgumentError(
        cat("cannot open config file '", path, "': ", std::strerror(err)));
  }
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    return absl::InvalidArgumentError(
        cat("cannot read config file '", path, "': ", std::strerror(err)));
  }
  return load_string(text, path, schema, overrides);
}

absl::StatusOr<Config> Config::load_string(const std::string& text, const std::string& name,
                                           const ConfigSchema& schema,
                                           const std::vector<std::string>& overrides) {
  std::map<std::string, Entry> values;
  ParseState st;
  st.text = text;
  st.name = &name;
  st.schema = &schema;
  st.values = &values;
  const int rc = ini_parse_stream(read_line, &st, on_key, &st);
  if (rc == -2) return absl::ResourceExhaustedError("libinih: out of memory");
  if (rc > 0 && (st.error_line == 0 || rc < st.error_line)) {
    return absl::InvalidArgumentError(cat(name, ":", rc, ": malformed line '",
                                          shown(line_of(text, rc)),
                                          "' (expected [section] or key = value)"));
  }
  if (st.error_line != 0) return absl::InvalidArgumentError(st.error);

  for (size_t i = 0; i < overrides.size(); ++i) {
    const std::string origin = cat("override ", i + 1);
    std::string_view section, key, value;
    if (!split_override(overrides[i], &section, &key, &value)) {
      return absl::InvalidArgumentError(
          cat("override '", overrides[i], "': expected section.key=value"));
    }
    if (!has_section(schema, section)) {
      return absl::InvalidArgumentError(
          cat(origin, ": ", unknown_section_message(schema, section)));
    }
    const ConfigSchema::Key* k = schema.find(section, key);
    if (k == nullptr) {
      return absl::InvalidArgumentError(
          cat(origin, ": ", unknown_key_message(schema, section, key)));
    }
    std::string canonical, what;
    if (!canonicalize(*k, value, &canonical, &what)) {
      return absl::InvalidArgumentError(cat(origin, ": [", section, "] ", key, ": ", what));
    }
    // Later overrides win over earlier ones and over the file.
    values[full_name(section, key)] = Entry{std::move(canonical), origin, 0};
  }

  ANVIL_RETURN_IF_ERROR(resolve_aliases(schema, &values));
  Config config;
  config.schema_ = &schema;
  for (const ConfigSchema::Key& k : schema.keys()) {
    auto it = values.find(full_name(k.section, k.key));
    if (it == values.end()) {
      config.values_[full_name(k.section, k.key)] = Value{k.default_value, "default"};
    } else {
      config.values_[full_name(k.section, k.key)] =
          Value{std::move(it->second.text), std::move(it->second.origin)};
    }
  }
  return config;
}

int64_t Config::get_int(std::string_view section, std::string_view key) const {
  int64_t v = 0;
  ANVIL_CHECK(parse_int(checked_value(schema_, values_, section, key, ConfigType::kInt).text, &v));
  return v;
}

double Config::get_float(std::string_view section, std::string_view key) const {
  double v = 0;
  ANVIL_CHECK(
      parse_float(checked_value(schema_, values_, section, key, ConfigType::kFloat).text, &v));
  return v;
}

bool Config::get_bool(std::string_view section, std::string_view key) const {
  bool v = false;
  ANVIL_CHECK(
      parse_bool(checked_value(schema_, values_, section, key, ConfigType::kBool).text, &v));
  return v;
}

std::string Config::get_string(std::string_view section, std::string_view key) const {
  return checked_value(schema_, values_, section, key, ConfigType::kString).text;
}

std::string Config::origin(std::string_view section, std::string_view key) const {
  ANVIL_CHECK_MSG(schema_ != nullptr, "Config used before a successful load");
  auto it = values_.find(full_name(section, key));
  ANVIL_CHECK_MSG(it != values_.end(),
                  cat("config key [", section, "] ", key, " is not declared in the schema"));
  return it->second.origin;
}

absl::Status Config::error(std::string_view section, std::string_view key,
                           std::string_view what) const {
  return absl::InvalidArgumentError(
      cat(origin(section, key), ": [", section, "] ", key, ": ", what));
}

std::string Config::dump() const {
  ANVIL_CHECK_MSG(schema_ != nullptr, "Config used before a successful load");
  std::string out;
  for (const std::string& section : section_names(*schema_)) {
    if (!out.empty()) out += "\n";
    append(&out, "[", section, "]\n");
    for (const ConfigSchema::Key& k : schema_->keys()) {
      if (k.section != section || is_alias(*schema_, k)) continue;
      const std::string& text = values_.at(full_name(k.section, k.key)).text;
      append(&out, k.key, " =", text.empty() ? "" : " ", text, "\n");
    }
  }
  return out;
}

}  // namespace anvil::engine
