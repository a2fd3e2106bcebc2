// Normalizers of tokenizer.json (io/tokenizers/hf_normalizers.h).
#include "io/tokenizers/hf_normalizers.h"

#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/tokenizers/bert_normalizer.h"
#include "io/tokenizers/hf_byte_level.h"
#include "io/tokenizers/hf_pattern.h"
#include "io/tokenizers/hf_utf8.h"
#include "io/tokenizers/precompiled_charsmap.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

// Rebuilds *text from its code points: `map` appends the replacement of each one.
template <typename Map>
void map_code_points(std::string* text, Map map) {
  std::string out;
  out.reserve(text->size());
  for (size_t pos = 0; pos < text->size();) {
    const utf8::Decoded d = decode_utf8(*text, pos);
    map(d.cp, absl::string_view(*text).substr(pos, d.length), &out);
    pos += d.length;
  }
  text->swap(out);
}

class BertStep final : public Normalizer {
 public:
  explicit BertStep(BertNormalizerOptions o) : options_(o) {}
  void normalize(std::string* text) const override {
    std::string out;
    bert_normalize(*text, options_, &out);
    text->swap(out);
  }

 private:
  BertNormalizerOptions options_;
};

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(utf8::NormalForm form) : form_(form) {}
  void normalize(std::string* text) const override {
    // ASCII is invariant under all four forms; most text skips utf8proc.
    for (const char c : *text) {
      if (static_cast<unsigned char>(c) >= 0x80) {
        *text = utf8::normalize(*text, form_);
        return;
      }
    }
  }

 private:
  utf8::NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(std::string* text) const override {
    map_code_points(
        text, [](char32_t cp, absl::string_view, std::string* out) { append_lowercase(cp, out); });
  }
};

class StripAccents final : public Normalizer {
 public:
  void normalize(std::string* text) const override {
    map_code_points(text, [](char32_t cp, absl::string_view raw, std::string* out) {
      if (!utf8::is_mark(utf8::category(cp))) out->append(raw.data(), raw.size());
    });
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string* text) const override {
    size_t b = 0, e = text->size();
    if (left_) {
      while (b < e) {
        const utf8::Decoded d = decode_utf8(*text, b);
        if (!utf8::is_white_space(d.cp)) break;
        b += d.length;
      }
    }
    if (right_) {
      while (e > b) {
        size_t p = e - 1;
        while (p > b && (static_cast<unsigned char>((*text)[p]) & 0xC0) == 0x80) --p;
        if (!utf8::is_white_space(decode_utf8(*text, p).cp)) break;
        e = p;
      }
    }
    if (b == 0 && e == text->size()) return;
    *text = text->substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::unique_ptr<HfPattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string* text) const override {
    std::vector<PatternMatch> matches;
    pattern_->find_matches(*text, &matches);
    std::string out;
    out.reserve(text->size());
    for (const PatternMatch& m : matches) {
      if (m.is_match) {
        out += content_;
      } else {
        out.append(*text, m.begin, m.end - m.begin);
      }
    }
    text->swap(out);
  }

 private:
  std::unique_ptr<HfPattern> pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// SentencePiece's nmt_nfkc control-character rules (tokenizers' Nmt).
class Nmt final : public Normalizer {
 public:
  void normalize(std::string* text) const override {
    map_code_points(text, [](char32_t c, absl::string_view raw, std::string* out) {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
          c == 0x8F || c == 0x9F) {
        return;
      }
      if (c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
          (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 || c == 0x2581 ||
          c == 0xFEFF || c == 0xFFFD) {
        out->push_back(' ');
        return;
      }
      out->append(raw.data(), raw.size());
    });
  }
};

class PrecompiledStep final : public Normalizer {
 public:
  explicit PrecompiledStep(std::unique_ptr<PrecompiledCharsmap> map) : map_(std::move(map)) {}
  void normalize(std::string* text) const override { map_->normalize(text); }

 private:
  std::unique_ptr<PrecompiledCharsmap> map_;
};

class ByteLevelStep final : public Normalizer {
 public:
  void normalize(std::string* text) const override { *text = to_byte_level(*text); }
};

class SequenceStep final : public Normalizer {
 public:
  explicit SequenceStep(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(std::string* text) const override {
    for (const auto& s : steps_) s->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

absl::Status parse_bert(const Ctx& ctx, const json& n, const std::string& where,
                        std::unique_ptr<Normalizer>* out) {
  BertNormalizerOptions o;
  o.rules = BertNormalizerOptions::Rules::kHf;
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "clean_text", where, true, &o.clean_text));
  ANVIL_RETURN_IF_ERROR(
      get_bool(ctx, n, "handle_chinese_chars", where, true, &o.handle_chinese_chars));
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "lowercase", where, true, &o.lowercase));
  // strip_accents: null follows lowercase (tokenizers' BertNormalizer).
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "strip_accents", where, o.lowercase, &o.strip_accents));
  *out = std::make_unique<BertStep>(o);
  return absl::OkStatus();
}

absl::Status parse_precompiled(const Ctx& ctx, const json& n, const std::string& where,
                               std::unique_ptr<Normalizer>* out) {
  std::optional<std::string> b64;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, n, "precompiled_charsmap", where, &b64));
  if (!b64) {  // tokenizers: an absent or empty charsmap normalizes nothing
    *out = std::make_unique<SequenceStep>(std::vector<std::unique_ptr<Normalizer>>());
    return absl::OkStatus();
  }
  std::string blob;
  if (!absl::Base64Unescape(*b64, &blob)) {
    return ctx.bad(where + ".precompiled_charsmap", "is not base64");
  }
  if (blob.empty()) {
    *out = std::make_unique<SequenceStep>(std::vector<std::unique_ptr<Normalizer>>());
    return absl::OkStatus();
  }
  auto map = PrecompiledCharsmap::create(std::move(blob));
  if (!map.ok()) return ctx.bad(where, std::string(map.status().message()));
  *out = std::make_unique<PrecompiledStep>(std::move(map).value());
  return absl::OkStatus();
}

}  // namespace

absl::Status parse_normalizer(const Ctx& ctx, const json& n, const std::string& where,
                              std::unique_ptr<Normalizer>* out) {
  out->reset();
  if (n.is_null()) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(const std::string type, get_type(ctx, n, where));
  if (type == "Sequence") {
    ANVIL_ASSIGN_OR_RETURN(const json* list, get_array(ctx, n, "normalizers", where));
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      std::unique_ptr<Normalizer> step;
      ANVIL_RETURN_IF_ERROR(
          parse_normalizer(ctx, (*list)[i], absl::StrCat(where, ".normalizers[", i, "]"), &step));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    *out = std::make_unique<SequenceStep>(std::move(steps));
  } else if (type == "BertNormalizer") {
    return parse_bert(ctx, n, where, out);
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    const utf8::NormalForm form = type == "NFC"    ? utf8::NormalForm::kNFC
                                  : type == "NFD"  ? utf8::NormalForm::kNFD
                                  : type == "NFKC" ? utf8::NormalForm::kNFKC
                                                   : utf8::NormalForm::kNFKD;
    *out = std::make_unique<UnicodeForm>(form);
  } else if (type == "Lowercase") {
    *out = std::make_unique<Lowercase>();
  } else if (type == "StripAccents") {
    *out = std::make_unique<StripAccents>();
  } else if (type == "Strip") {
    bool left = true, right = true;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "strip_left", where, true, &left));
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "strip_right", where, true, &right));
    *out = std::make_unique<Strip>(left, right);
  } else if (type == "Replace") {
    ANVIL_ASSIGN_OR_RETURN(const PatternSpec spec, get_pattern(ctx, n, where));
    ANVIL_ASSIGN_OR_RETURN(auto pattern, HfPattern::create(ctx, spec, where + ".pattern"));
    std::optional<std::string> content;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, n, "content", where, &content));
    if (!content) return ctx.bad(where + ".content", "must be a string");
    *out = std::make_unique<Replace>(std::move(pattern), *content);
  } else if (type == "Prepend") {
    std::optional<std::string> prepend;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, n, "prepend", where, &prepend));
    if (!prepend) return ctx.bad(where + ".prepend", "must be a string");
    *out = std::make_unique<Prepend>(*prepend);
  } else if (type == "Nmt") {
    *out = std::make_unique<Nmt>();
  } else if (type == "Precompiled") {
    return parse_precompiled(ctx, n, where, out);
  } else if (type == "ByteLevel") {
    *out = std::make_unique<ByteLevelStep>();
  } else {
    return ctx.unsupported(where, type,
                           "supported: BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, "
                           "StripAccents, Strip, Replace, Prepend, Nmt, Precompiled, ByteLevel, "
                           "Sequence");
  }
  return absl::OkStatus();
}

}  // namespace anvil::io::hf_internal
