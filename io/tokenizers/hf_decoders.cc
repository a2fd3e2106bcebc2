// Decoders of tokenizer.json (io/tokenizers/hf_decoders.h).
#include "io/tokenizers/hf_decoders.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/status.h"
#include "io/tokenizers/hf_byte_level.h"
#include "io/tokenizers/hf_pattern.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>* tokens) const override {
    std::string bytes;
    for (const std::string& t : *tokens) append_byte_level(t, &bytes);
    tokens->assign(1, utf8::replace_invalid(bytes));
  }
};

// "<0xXX>" -> the byte; -1 otherwise.
int byte_of(const std::string& t) {
  if (t.size() != 6 || !absl::StartsWith(t, "<0x") || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens->size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8::is_valid(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : *tokens) {
      const int b = byte_of(t);
      if (b >= 0) {
        pending.push_back(static_cast<char>(b));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens->swap(out);
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>* tokens) const override {
    tokens->assign(1, absl::StrJoin(*tokens, ""));
  }
};

class Strip final : public Decoder {
 public:
  Strip(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      const std::u32string cps = utf8::decode(t);
      size_t b = 0;
      for (size_t i = 0; i < start_ && i < cps.size() && cps[i] == content_; ++i) b = i + 1;
      size_t e = cps.size();
      for (size_t i = 0; i < stop_ && i < cps.size(); ++i) {
        const size_t index = cps.size() - i - 1;
        if (cps[index] != content_) break;
        e = index;
      }
      t = b < e ? utf8::encode(cps.substr(b, e - b)) : std::string();
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class Replace final : public Decoder {
 public:
  Replace(std::unique_ptr<HfPattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    std::vector<PatternMatch> m;
    for (std::string& t : *tokens) {
      pattern_->find_matches(t, &m);
      std::string out;
      for (const PatternMatch& x : m) {
        if (x.is_match) {
          out += content_;
        } else {
          out.append(t, x.begin, x.end - x.begin);
        }
      }
      t.swap(out);
    }
  }

 private:
  std::unique_ptr<HfPattern> pattern_;
  std::string content_;
};

class Metaspace final : public Decoder {
 public:
  Metaspace(char32_t replacement, bool prepend) : replacement_(replacement), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string out;
      const std::string& t = (*tokens)[i];
      for (size_t pos = 0; pos < t.size();) {
        const utf8::Decoded d = utf8::decode_at(t, pos);
        if (d.cp != replacement_) {
          out.append(t, pos, d.length);
        } else if (i != 0 || !prepend_) {  // tokenizers drops every one in the first token
          out.push_back(' ');
        }
        pos += d.length;
      }
      (*tokens)[i].swap(out);
    }
  }

 private:
  char32_t replacement_;
  bool prepend_;
};

std::string wordpiece_cleanup(const std::string& token) {
  return absl::StrReplaceAll(token, {{" .", "."},
                                     {" ?", "?"},
                                     {" !", "!"},
                                     {" ,", ","},
                                     {" ' ", "'"},
                                     {" n't", "n't"},
                                     {" 'm", "'m"},
                                     {" do not", " don't"},
                                     {" 's", "'s"},
                                     {" 've", "'ve"},
                                     {" 're", "'re"}});
}

class WordPiece final : public Decoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& t = (*tokens)[i];
      if (i != 0) {
        if (absl::StartsWith(t, prefix_)) {
          t.erase(0, prefix_.size());
        } else {
          t.insert(0, " ");
        }
      }
      if (cleanup_) t = wordpiece_cleanup(t);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      const std::string with = i + 1 == tokens->size() ? "" : " ";
      (*tokens)[i] = absl::StrReplaceAll((*tokens)[i], {{suffix_, with}});
    }
  }

 private:
  std::string suffix_;
};

class Ctc final : public Decoder {
 public:
  Ctc(std::string pad, std::string delimiter, bool cleanup)
      : pad_(std::move(pad)), delimiter_(std::move(delimiter)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < tokens->size(); ++i) {
      if (i > 0 && (*tokens)[i] == (*tokens)[i - 1]) continue;  // dedup
      std::string t = absl::StrReplaceAll((*tokens)[i], {{pad_, ""}});
      if (cleanup_) t = absl::StrReplaceAll(wordpiece_cleanup(t), {{delimiter_, " "}});
      if (!t.empty()) out.push_back(std::move(t));
    }
    tokens->swap(out);
  }

 private:
  std::string pad_, delimiter_;
  bool cleanup_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

absl::Status get_one_char(const Ctx& ctx, const json& d, const char* key, const std::string& where,
                          char32_t fallback, char32_t* out) {
  std::optional<std::string> s;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, d, key, where, &s));
  *out = fallback;
  if (!s) return absl::OkStatus();
  const std::u32string cps = utf8::decode(*s);
  if (cps.size() != 1) return ctx.bad(absl::StrCat(where, ".", key), "must be one character");
  *out = cps[0];
  return absl::OkStatus();
}

absl::Status parse_metaspace(const Ctx& ctx, const json& d, const std::string& where,
                             std::unique_ptr<Decoder>* out) {
  char32_t rep = 0x2581;
  ANVIL_RETURN_IF_ERROR(get_one_char(ctx, d, "replacement", where, 0x2581, &rep));
  std::optional<std::string> scheme;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "prepend_scheme", where, &scheme));
  bool prepend = true;
  if (scheme) {
    if (*scheme != "always" && *scheme != "first" && *scheme != "never") {
      return ctx.bad(where + ".prepend_scheme", "must be always, first or never");
    }
    prepend = *scheme != "never";
  } else {
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, d, "add_prefix_space", where, true, &prepend));
  }
  *out = std::make_unique<Metaspace>(rep, prepend);
  return absl::OkStatus();
}

absl::Status parse_strip(const Ctx& ctx, const json& d, const std::string& where,
                         std::unique_ptr<Decoder>* out) {
  char32_t content = ' ';
  ANVIL_RETURN_IF_ERROR(get_one_char(ctx, d, "content", where, ' ', &content));
  uint64_t start = 0, stop = 0;
  ANVIL_RETURN_IF_ERROR(get_uint(ctx, d, "start", where, 0, &start));
  ANVIL_RETURN_IF_ERROR(get_uint(ctx, d, "stop", where, 0, &stop));
  *out = std::make_unique<Strip>(content, start, stop);
  return absl::OkStatus();
}

absl::Status parse_simple(const Ctx& ctx, const json& d, const std::string& where,
                          const std::string& type, std::unique_ptr<Decoder>* out) {
  if (type == "WordPiece") {
    std::optional<std::string> prefix;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "prefix", where, &prefix));
    bool cleanup = true;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, d, "cleanup", where, true, &cleanup));
    *out = std::make_unique<WordPiece>(prefix.value_or("##"), cleanup);
  } else if (type == "BPEDecoder") {
    std::optional<std::string> suffix;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "suffix", where, &suffix));
    *out = std::make_unique<BpeDecoder>(suffix.value_or("</w>"));
  } else if (type == "CTC") {
    std::optional<std::string> pad, delimiter;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "pad_token", where, &pad));
    ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "word_delimiter_token", where, &delimiter));
    bool cleanup = true;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, d, "cleanup", where, true, &cleanup));
    *out = std::make_unique<Ctc>(pad.value_or("<pad>"), delimiter.value_or("|"), cleanup);
  } else if (type == "Replace") {
    ANVIL_ASSIGN_OR_RETURN(const PatternSpec spec, get_pattern(ctx, d, where));
    ANVIL_ASSIGN_OR_RETURN(auto pattern, HfPattern::create(ctx, spec, where + ".pattern"));
    std::optional<std::string> content;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "content", where, &content));
    if (!content) return ctx.bad(where + ".content", "must be a string");
    *out = std::make_unique<Replace>(std::move(pattern), *content);
  } else {
    return ctx.unsupported(where, type,
                           "supported: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, "
                           "WordPiece, BPEDecoder, CTC, Sequence");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status parse_decoder(const Ctx& ctx, const json& d, const std::string& where,
                           std::unique_ptr<Decoder>* out) {
  out->reset();
  if (d.is_null()) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(const std::string type, get_type(ctx, d, where));
  if (type == "Sequence") {
    ANVIL_ASSIGN_OR_RETURN(const json* list, get_array(ctx, d, "decoders", where));
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      std::unique_ptr<Decoder> step;
      ANVIL_RETURN_IF_ERROR(
          parse_decoder(ctx, (*list)[i], absl::StrCat(where, ".decoders[", i, "]"), &step));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    *out = std::make_unique<Sequence>(std::move(steps));
  } else if (type == "ByteLevel") {
    *out = std::make_unique<ByteLevel>();
  } else if (type == "ByteFallback") {
    *out = std::make_unique<ByteFallback>();
  } else if (type == "Fuse") {
    *out = std::make_unique<Fuse>();
  } else if (type == "Strip") {
    return parse_strip(ctx, d, where, out);
  } else if (type == "Metaspace") {
    return parse_metaspace(ctx, d, where, out);
  } else {
    return parse_simple(ctx, d, where, type, out);
  }
  return absl::OkStatus();
}

std::string decode_tokens(const Decoder* decoder, std::vector<std::string> tokens) {
  if (decoder == nullptr) return absl::StrJoin(tokens, " ");
  decoder->decode_chain(&tokens);
  return absl::StrJoin(tokens, "");
}

}  // namespace anvil::io::hf_internal
