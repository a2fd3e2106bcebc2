// Hugging Face tokenizer.json: parsing (nlohmann_json, no exceptions: every access is
// type-checked first), added-token splitting as tokenizers' AddedVocabulary does, and the
// supported normalizers, pre-tokenizers, models and decoders (see hf_tokenizer.h).
#include "io/tokenizers/hf_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/status.h"
#include "io/tokenizers/bert_normalizer.h"
#include "io/tokenizers/factories.h"
#include "io/tokenizers/gpt2_bpe.h"
#include "io/tokenizers/hf_added_tokens.h"
#include "io/tokenizers/hf_text_steps.h"
#include "io/tokenizers/utf8.h"
#include "io/tokenizers/wordpiece.h"
#include "nlohmann/json.hpp"

namespace anvil::io {
namespace {

using hf_internal::AddedMatcher;
using hf_internal::AddedToken;
using hf_internal::NormKind;
using hf_internal::NormStep;
using hf_internal::Segment;
using json = nlohmann::json;

// ---- JSON access without exceptions ---------------------------------------------------------

// Records where a JSON text first fails to parse.
struct ErrorSax {
  size_t position = 0;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(std::string&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception&) {
    position = pos;
    return false;
  }
};

// Parses `text`; InvalidArgument "name:line:column: not valid JSON" on failure.
absl::StatusOr<json> parse_json(absl::string_view text, const std::string& name) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  ErrorSax sax;
  json::sax_parse(text.begin(), text.end(), &sax);
  // nlohmann reports the 1-based count of bytes read; point at the byte before it.
  const size_t at = std::min(sax.position > 0 ? sax.position - 1 : 0, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d:%d: not valid JSON", name, line, column));
}

// Context for messages: "HF tokenizer 'file': normalizer.lowercase must be a boolean".
struct Ctx {
  std::string name;
  absl::Status bad(const std::string& where, const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("HF tokenizer '", name, "': ", where, " ", what));
  }
  absl::Status unsupported(const std::string& component, const std::string& type,
                           const std::string& supported) const {
    return absl::UnimplementedError(absl::StrCat("HF tokenizer '", name, "': ", component,
                                                 " type '", type, "' is not supported (", supported,
                                                 ")"));
  }
};

// obj[key] as a bool; missing or null -> `fallback`.
absl::Status get_bool(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                      bool fallback, bool* out) {
  *out = fallback;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return ctx.bad(absl::StrCat(where, ".", key), "must be a boolean");
  *out = it->get<bool>();
  return absl::OkStatus();
}

// obj[key] as a string; missing or null -> nullopt.
absl::Status get_string(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                        std::optional<std::string>* out) {
  out->reset();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return ctx.bad(absl::StrCat(where, ".", key), "must be a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status get_id(const Ctx& ctx, const json& value, const std::string& where, int32_t* out) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() > INT32_MAX - 1) {
    return ctx.bad(where, "must be a token id (an integer in [0, 2^31-1))");
  }
  *out = static_cast<int32_t>(value.get<int64_t>());
  return absl::OkStatus();
}

absl::StatusOr<std::string> read_whole_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("HF tokenizer: cannot open '", path, "'"));
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return absl::NotFoundError(absl::StrCat("HF tokenizer: cannot read '", path, "'"));
  return data;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// ---- pipeline components ----------------------------------------------------------------------

enum class PreTokKind { kNone, kBert, kByteLevel };
enum class ModelKind { kBpe, kWordPiece };
enum class DecoderKind { kNone, kByteLevel, kWordPiece, kUnsupported };

absl::Status parse_normalizer(const Ctx& ctx, const json& n, const std::string& where,
                              std::vector<NormStep>* steps) {
  if (n.is_null()) return absl::OkStatus();
  if (!n.is_object()) return ctx.bad(where, "must be an object or null");
  std::optional<std::string> type;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, n, "type", where, &type));
  if (!type) return ctx.bad(where, "has no type");
  const std::string supported =
      "supported: BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, "
      "Sequence of these";
  if (*type == "Sequence") {
    const auto it = n.find("normalizers");
    if (it == n.end() || !it->is_array()) return ctx.bad(where + ".normalizers", "must be a list");
    for (size_t i = 0; i < it->size(); ++i) {
      ANVIL_RETURN_IF_ERROR(
          parse_normalizer(ctx, (*it)[i], absl::StrCat(where, ".normalizers[", i, "]"), steps));
    }
    return absl::OkStatus();
  }
  NormStep step{};
  if (*type == "BertNormalizer") {
    step.kind = NormKind::kBert;
    BertNormalizerOptions& o = step.bert;
    o.rules = BertNormalizerOptions::Rules::kHf;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "clean_text", where, true, &o.clean_text));
    ANVIL_RETURN_IF_ERROR(
        get_bool(ctx, n, "handle_chinese_chars", where, true, &o.handle_chinese_chars));
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "lowercase", where, true, &o.lowercase));
    // strip_accents: null follows lowercase (tokenizers' BertNormalizer).
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, n, "strip_accents", where, o.lowercase, &o.strip_accents));
  } else if (*type == "NFC") {
    step.kind = NormKind::kNfc;
  } else if (*type == "NFD") {
    step.kind = NormKind::kNfd;
  } else if (*type == "NFKC") {
    step.kind = NormKind::kNfkc;
  } else if (*type == "NFKD") {
    step.kind = NormKind::kNfkd;
  } else if (*type == "Lowercase") {
    step.kind = NormKind::kLowercase;
  } else {
    return ctx.unsupported("normalizer", *type, supported);
  }
  steps->push_back(step);
  return absl::OkStatus();
}

// The token named by a special_tokens_map.json / tokenizer_config.json value: a string or an
// AddedToken object {"content": ...}.
std::optional<std::string> special_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    const auto it = v.find("content");
    if (it != v.end() && it->is_string()) return it->get<std::string>();
  }
  return std::nullopt;
}

constexpr const char* kSpecialKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token"};

}  // namespace

// ---- state --------------------------------------------------------------------------------------

namespace hf_internal {

struct State {
  std::string name;
  std::vector<NormStep> normalizers;
  PreTokKind pre = PreTokKind::kNone;
  bool add_prefix_space = false;
  bool use_regex = true;

  ModelKind model = ModelKind::kBpe;
  std::unique_ptr<WordPieceModel> wordpiece;
  std::unique_ptr<Gpt2BpeTokenizer> bpe;
  bool ignore_merges = false;
  std::unordered_map<std::string, int32_t> bpe_id_of_bytes;  // only with ignore_merges
  std::optional<std::string> model_unk;

  // Model vocabulary by id as written in the file ("" for an id it lacks).
  std::vector<std::string> model_tokens;
  std::unordered_map<std::string, int32_t> model_ids;
  // Added tokens. The matchers point into this vector: build_matchers() runs after its last
  // change.
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, size_t> added_by_id;
  AddedMatcher raw_matcher;
  AddedMatcher normalized_matcher;

  DecoderKind decoder = DecoderKind::kNone;
  std::string decoder_type;
  std::string wordpiece_prefix = "##";
  bool wordpiece_cleanup = true;

  int64_t vocab_size = 0;
  SpecialTokens special;

  int32_t find_token(absl::string_view t) const {
    for (const AddedToken& a : added) {
      if (a.content == t) return a.id;
    }
    const auto it = model_ids.find(std::string(t));
    return it == model_ids.end() ? -1 : it->second;
  }

  void build_matchers() {
    raw_matcher = AddedMatcher();
    normalized_matcher = AddedMatcher();
    for (const AddedToken& a : added) {
      if (a.normalized) {
        normalized_matcher.add(apply_normalizers(normalizers, a.content), &a);
      } else {
        raw_matcher.add(a.content, &a);
      }
    }
    raw_matcher.finish();
    normalized_matcher.finish();
  }

  // Pre-tokenizes and runs the model over text that holds no added token.
  void encode_model(absl::string_view text, std::vector<int32_t>* out) const {
    if (text.empty()) return;
    if (model == ModelKind::kWordPiece) {
      if (pre == PreTokKind::kBert) {
        std::vector<std::pair<size_t, size_t>> words;
        bert_pre_tokenize(text, &words);
        for (const auto& [b, e] : words) wordpiece->encode_word(text.substr(b, e - b), out);
      } else {
        wordpiece->encode_word(text, out);
      }
      return;
    }
    // Byte-level BPE.
    absl::string_view input = text;
    std::string prefixed;
    if (add_prefix_space && text[0] != ' ') {
      prefixed = absl::StrCat(" ", text);
      input = prefixed;
    }
    if (use_regex && !ignore_merges) {
      bpe->encode(input, out);  // GPT-2's regex + merges, with its per-thread cache
      return;
    }
    auto run = [&](absl::string_view piece) {
      if (ignore_merges) {
        const auto it = bpe_id_of_bytes.find(std::string(piece));
        if (it != bpe_id_of_bytes.end()) {
          out->push_back(it->second);
          return;
        }
      }
      bpe->bpe(piece, out);
    };
    if (use_regex) {
      Gpt2PreTokenizer pre_tokenizer(input);
      absl::string_view piece;
      while (pre_tokenizer.next(&piece)) run(piece);
    } else {
      run(input);
    }
  }
};

}  // namespace hf_internal

using hf_internal::State;

// ---- loading ------------------------------------------------------------------------------------

HfTokenizer::HfTokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
HfTokenizer::~HfTokenizer() = default;

namespace {

absl::Status parse_model(const Ctx& ctx, const json& m, State* s) {
  if (!m.is_object()) return ctx.bad("model", "must be an object");
  std::optional<std::string> type;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "type", "model", &type));
  if (!type) {  // older files leave the type out
    if (m.contains("merges")) {
      type = "BPE";
    } else if (m.contains("max_input_chars_per_word")) {
      type = "WordPiece";
    } else {
      return ctx.bad("model", "has no type");
    }
  }
  if (*type != "BPE" && *type != "WordPiece") {
    return ctx.unsupported("model", *type, "supported: BPE (byte-level), WordPiece");
  }
  // The vocabulary: {"token": id, ...}.
  const auto v = m.find("vocab");
  if (v == m.end() || !v->is_object()) return ctx.bad("model.vocab", "must be an object");
  int32_t max_id = -1;
  for (auto it = v->begin(); it != v->end(); ++it) {
    int32_t id;
    ANVIL_RETURN_IF_ERROR(
        get_id(ctx, it.value(), absl::StrCat("model.vocab[\"", it.key(), "\"]"), &id));
    max_id = std::max(max_id, id);
  }
  if (max_id < 0) return ctx.bad("model.vocab", "is empty");
  s->model_tokens.assign(static_cast<size_t>(max_id) + 1, std::string());
  std::vector<bool> seen(static_cast<size_t>(max_id) + 1, false);
  for (auto it = v->begin(); it != v->end(); ++it) {
    const int32_t id = static_cast<int32_t>(it.value().get<int64_t>());
    if (seen[id]) {
      return ctx.bad(absl::StrCat("model.vocab[\"", it.key(), "\"]"),
                     absl::StrCat("reuses id ", id));
    }
    seen[id] = true;
    s->model_tokens[id] = it.key();
    s->model_ids[it.key()] = id;
  }
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "unk_token", "model", &s->model_unk));

  if (*type == "WordPiece") {
    s->model = ModelKind::kWordPiece;
    std::optional<std::string> prefix;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "continuing_subword_prefix", "model", &prefix));
    int max_chars = 100;
    if (const auto it = m.find("max_input_chars_per_word"); it != m.end() && !it->is_null()) {
      if (!it->is_number_unsigned() || it->get<uint64_t>() < 1) {
        return ctx.bad("model.max_input_chars_per_word", "must be a positive integer");
      }
      max_chars = static_cast<int>(std::min<uint64_t>(it->get<uint64_t>(), INT32_MAX));
    }
    const std::string unk = s->model_unk.value_or("[UNK]");
    const auto u = s->model_ids.find(unk);
    if (u == s->model_ids.end()) {
      return ctx.bad("model.unk_token", absl::StrCat("\"", unk, "\" is not in the vocabulary"));
    }
    s->wordpiece = std::make_unique<WordPieceModel>(s->model_tokens, u->second,
                                                    prefix.value_or("##"), max_chars);
    return absl::OkStatus();
  }

  s->model = ModelKind::kBpe;
  if (const auto it = m.find("dropout"); it != m.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      return ctx.unsupported("model", "BPE with dropout", "dropout must be null");
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::optional<std::string> affix;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, m, key, "model", &affix));
    if (affix && !affix->empty()) {
      return ctx.unsupported("model", absl::StrCat("BPE with ", key),
                             "only byte-level BPE without affixes is supported");
    }
  }
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, m, "ignore_merges", "model", false, &s->ignore_merges));
  // Merges: "left right" strings (older files) or ["left", "right"] pairs, rank = position.
  const auto mg = m.find("merges");
  if (mg == m.end() || !mg->is_array()) return ctx.bad("model.merges", "must be a list");
  std::string merges;
  merges.reserve(mg->size() * 12);
  for (size_t i = 0; i < mg->size(); ++i) {
    const json& e = (*mg)[i];
    const std::string where = absl::StrCat("model.merges[", i, "]");
    if (e.is_string()) {
      merges += e.get<std::string>();
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      const std::string a = e[0].get<std::string>(), b = e[1].get<std::string>();
      if (absl::StrContains(a, ' ') || absl::StrContains(b, ' ')) {
        return ctx.unsupported("model", "BPE with spaces inside merge parts",
                               "byte-level BPE has none");
      }
      absl::StrAppend(&merges, a, " ", b);
    } else {
      return ctx.bad(where, "must be \"a b\" or [\"a\", \"b\"]");
    }
    merges.push_back('\n');
  }
  // The merges engine of GPT2BPE, fed the file's vocabulary and merges.
  auto bpe = Gpt2BpeTokenizer::from_contents(v->dump(), absl::StrCat(ctx.name, ": model.vocab"),
                                             merges, absl::StrCat(ctx.name, ": model.merges"));
  if (!bpe.ok()) {
    if (absl::StrContains(bpe.status().message(), "byte alphabet") ||
        absl::StrContains(bpe.status().message(), "single-byte token")) {
      return absl::UnimplementedError(
          absl::StrCat("HF tokenizer '", ctx.name,
                       "': only byte-level BPE models (GPT-2's byte alphabet) are "
                       "supported: ",
                       bpe.status().message()));
    }
    return absl::InvalidArgumentError(std::string(bpe.status().message()));
  }
  s->bpe = std::move(bpe).value();
  if (s->ignore_merges) {
    for (int32_t id = 0; id < static_cast<int32_t>(s->model_tokens.size()); ++id) {
      const absl::string_view bytes = s->bpe->token_bytes(id);
      if (!bytes.empty()) s->bpe_id_of_bytes.emplace(std::string(bytes), id);
    }
  }
  return absl::OkStatus();
}

absl::Status parse_pre_tokenizer(const Ctx& ctx, const json& p, State* s) {
  if (p.is_null()) {
    s->pre = PreTokKind::kNone;
    return absl::OkStatus();
  }
  if (!p.is_object()) return ctx.bad("pre_tokenizer", "must be an object or null");
  std::optional<std::string> type;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, p, "type", "pre_tokenizer", &type));
  if (!type) return ctx.bad("pre_tokenizer", "has no type");
  if (*type == "BertPreTokenizer") {
    s->pre = PreTokKind::kBert;
  } else if (*type == "ByteLevel") {
    s->pre = PreTokKind::kByteLevel;
    ANVIL_RETURN_IF_ERROR(
        get_bool(ctx, p, "add_prefix_space", "pre_tokenizer", true, &s->add_prefix_space));
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, p, "use_regex", "pre_tokenizer", true, &s->use_regex));
  } else {
    return ctx.unsupported("pre_tokenizer", *type, "supported: BertPreTokenizer, ByteLevel");
  }
  return absl::OkStatus();
}

absl::Status parse_decoder(const Ctx& ctx, const json& d, State* s) {
  if (d.is_null()) {
    s->decoder = DecoderKind::kNone;
    return absl::OkStatus();
  }
  if (!d.is_object()) return ctx.bad("decoder", "must be an object or null");
  std::optional<std::string> type;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "type", "decoder", &type));
  s->decoder_type = type.value_or("(none)");
  if (type == "ByteLevel") {
    s->decoder = DecoderKind::kByteLevel;
  } else if (type == "WordPiece") {
    s->decoder = DecoderKind::kWordPiece;
    std::optional<std::string> prefix;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, d, "prefix", "decoder", &prefix));
    s->wordpiece_prefix = prefix.value_or("##");
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, d, "cleanup", "decoder", true, &s->wordpiece_cleanup));
  } else {
    s->decoder = DecoderKind::kUnsupported;  // decode() reports it; encode() does not need it
  }
  return absl::OkStatus();
}

absl::Status parse_added_tokens(const Ctx& ctx, const json& root, State* s) {
  const auto a = root.find("added_tokens");
  if (a == root.end() || a->is_null()) return absl::OkStatus();
  if (!a->is_array()) return ctx.bad("added_tokens", "must be a list");
  s->added.reserve(a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const json& e = (*a)[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!e.is_object()) return ctx.bad(where, "must be an object");
    AddedToken t;
    const auto id = e.find("id");
    if (id == e.end()) return ctx.bad(where, "has no id");
    ANVIL_RETURN_IF_ERROR(get_id(ctx, *id, where + ".id", &t.id));
    std::optional<std::string> content;
    ANVIL_RETURN_IF_ERROR(get_string(ctx, e, "content", where, &content));
    if (!content || content->empty()) return ctx.bad(where, "has no content");
    t.content = *content;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, e, "single_word", where, false, &t.single_word));
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, e, "lstrip", where, false, &t.lstrip));
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, e, "rstrip", where, false, &t.rstrip));
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, e, "special", where, false, &t.special));
    // tokenizers' default: normalized = !special.
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, e, "normalized", where, !t.special, &t.normalized));
    if (s->added_by_id.count(t.id)) return ctx.bad(where, absl::StrCat("reuses id ", t.id));
    s->added_by_id[t.id] = s->added.size();
    s->added.push_back(std::move(t));
  }
  return absl::OkStatus();
}

// Special token names from the directory's side files; empty map when there are none.
absl::StatusOr<std::map<std::string, std::string>> read_side_files(const std::string& dir,
                                                                   bool* found) {
  std::map<std::string, std::string> names;
  *found = false;
  // tokenizer_config.json first; special_tokens_map.json overrides it (transformers' order).
  for (const char* file : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string path = absl::StrCat(dir, "/", file);
    if (!is_regular_file(path)) continue;
    *found = true;
    ANVIL_ASSIGN_OR_RETURN(const std::string text, read_whole_file(path));
    ANVIL_ASSIGN_OR_RETURN(const json j, parse_json(text, path));
    if (!j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON object"));
    }
    for (const char* key : kSpecialKeys) {
      const auto it = j.find(key);
      if (it == j.end()) continue;
      if (const auto c = special_content(*it)) {
        names[key] = *c;
      } else if (it->is_null()) {
        names.erase(key);
      }
    }
  }
  return names;
}

void assign_special_tokens(const std::map<std::string, std::string>& names, bool from_files,
                           State* s) {
  SpecialTokens& sp = s->special;
  auto id_of = [&](const char* key) {
    const auto it = names.find(key);
    return it == names.end() ? -1 : s->find_token(it->second);
  };
  if (from_files) {
    sp.bos = id_of("bos_token");
    sp.eos = id_of("eos_token");
    sp.unk = id_of("unk_token");
    sp.sep = id_of("sep_token");
    sp.pad = id_of("pad_token");
    sp.cls = id_of("cls_token");
    sp.mask = id_of("mask_token");
  } else {
    auto first = [&](std::initializer_list<const char*> candidates) {
      for (const char* c : candidates) {
        const int32_t id = s->find_token(c);
        if (id >= 0) return id;
      }
      return -1;
    };
    sp.pad = first({"[PAD]", "<pad>"});
    sp.unk = s->model_unk ? s->find_token(*s->model_unk) : first({"[UNK]", "<unk>"});
    sp.cls = first({"[CLS]"});
    sp.sep = first({"[SEP]"});
    sp.mask = first({"[MASK]", "<mask>"});
    sp.bos = first({"<s>"});
    sp.eos = first({"</s>"});
    if (sp.bos < 0 && sp.eos < 0) {  // GPT-2: <|endoftext|> is bos and eos in transformers
      sp.bos = sp.eos = first({"<|endoftext|>"});
    }
  }
  sp.eod = sp.eos >= 0 ? sp.eos : s->find_token("<|endoftext|>");
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::from_json(absl::string_view text,
                                                                    const std::string& name,
                                                                    int vocab_extra_ids) {
  const Ctx ctx{name};
  if (vocab_extra_ids < 0) return ctx.bad("vocab_extra_ids", "must be >= 0");
  ANVIL_ASSIGN_OR_RETURN(const json root, parse_json(text, name));
  if (!root.is_object()) return ctx.bad("the file", "must hold a JSON object");
  auto s = std::make_unique<State>();
  s->name = name;
  if (const auto n = root.find("normalizer"); n != root.end()) {
    ANVIL_RETURN_IF_ERROR(parse_normalizer(ctx, *n, "normalizer", &s->normalizers));
  }
  if (const auto p = root.find("pre_tokenizer"); p != root.end()) {
    ANVIL_RETURN_IF_ERROR(parse_pre_tokenizer(ctx, *p, s.get()));
  }
  const auto m = root.find("model");
  if (m == root.end()) return ctx.bad("the file", "has no model");
  ANVIL_RETURN_IF_ERROR(parse_model(ctx, *m, s.get()));
  if (const auto d = root.find("decoder"); d != root.end()) {
    ANVIL_RETURN_IF_ERROR(parse_decoder(ctx, *d, s.get()));
  }
  if (s->model == ModelKind::kBpe && s->pre != PreTokKind::kByteLevel) {
    return ctx.unsupported("model", "BPE without a ByteLevel pre_tokenizer",
                           "only byte-level BPE is supported");
  }
  if (s->model == ModelKind::kWordPiece && s->pre == PreTokKind::kByteLevel) {
    return ctx.unsupported("pre_tokenizer", "ByteLevel with a WordPiece model",
                           "WordPiece takes BertPreTokenizer or none");
  }
  ANVIL_RETURN_IF_ERROR(parse_added_tokens(ctx, root, s.get()));

  // vocab_extra_ids: the missing <extra_id_k> become special added tokens after the vocabulary.
  int64_t size = static_cast<int64_t>(s->model_tokens.size());
  for (const AddedToken& a : s->added) size = std::max<int64_t>(size, int64_t{a.id} + 1);
  s->added.reserve(s->added.size() + vocab_extra_ids);
  for (int k = 0; k < vocab_extra_ids; ++k) {
    const std::string t = absl::StrCat("<extra_id_", k, ">");
    if (s->find_token(t) >= 0) continue;
    AddedToken a;
    a.content = t;
    a.id = static_cast<int32_t>(size++);
    a.special = true;
    s->added_by_id[a.id] = s->added.size();
    s->added.push_back(std::move(a));
  }
  s->vocab_size = size;
  for (int k = 0;; ++k) {
    const int32_t id = s->find_token(absl::StrCat("<extra_id_", k, ">"));
    if (id < 0) break;
    s->special.sentinels.push_back(id);
  }
  s->build_matchers();  // after the last change to s->added: the matchers point into it
  assign_special_tokens({}, /*from_files=*/false, s.get());
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(std::move(s)));
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::load(const std::string& path,
                                                               int vocab_extra_ids) {
  std::string file = path;
  std::string dir;
  if (is_directory(path)) {
    file = absl::StrCat(path, "/tokenizer.json");
    dir = path;
    if (!is_regular_file(file)) {
      return absl::NotFoundError(
          absl::StrCat("HF tokenizer: directory '", path, "' has no tokenizer.json"));
    }
  } else {
    const size_t slash = path.rfind('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  ANVIL_ASSIGN_OR_RETURN(const std::string text, read_whole_file(file));
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<HfTokenizer> tok, from_json(text, file, vocab_extra_ids));
  bool found = false;
  ANVIL_ASSIGN_OR_RETURN(const auto names, read_side_files(dir, &found));
  if (found) {
    const std::vector<int32_t> sentinels = tok->state_->special.sentinels;
    tok->state_->special = SpecialTokens();
    tok->state_->special.sentinels = sentinels;
    assign_special_tokens(names, /*from_files=*/true, tok->state_.get());
  }
  return tok;
}

// ---- encode / decode ----------------------------------------------------------------------------

void HfTokenizer::encode(absl::string_view text, std::vector<int32_t>* out) const {
  const State& s = *state_;
  std::string storage;
  const absl::string_view valid = utf8::replace_invalid(text, &storage);
  std::vector<Segment> raw;
  if (s.raw_matcher.empty()) {
    raw.push_back({0, valid.size(), -1});
  } else {
    s.raw_matcher.split(valid, &raw);
  }
  std::vector<Segment> inner;
  for (const Segment& seg : raw) {
    if (seg.id >= 0) {
      out->push_back(seg.id);
      continue;
    }
    const absl::string_view piece = valid.substr(seg.begin, seg.end - seg.begin);
    const std::string normalized =
        s.normalizers.empty() ? std::string(piece) : apply_normalizers(s.normalizers, piece);
    if (s.normalized_matcher.empty()) {
      s.encode_model(normalized, out);
      continue;
    }
    inner.clear();
    s.normalized_matcher.split(normalized, &inner);
    const absl::string_view nview(normalized);
    for (const Segment& sub : inner) {
      if (sub.id >= 0) {
        out->push_back(sub.id);
      } else {
        s.encode_model(nview.substr(sub.begin, sub.end - sub.begin), out);
      }
    }
  }
}

std::string HfTokenizer::token(int32_t id) const {
  const State& s = *state_;
  if (const auto it = s.added_by_id.find(id); it != s.added_by_id.end()) {
    return s.added[it->second].content;
  }
  if (id >= 0 && static_cast<size_t>(id) < s.model_tokens.size()) return s.model_tokens[id];
  return {};
}

int32_t HfTokenizer::token_to_id(absl::string_view token) const {
  return state_->find_token(token);
}

int64_t HfTokenizer::vocab_size() const { return state_->vocab_size; }
const SpecialTokens& HfTokenizer::special() const { return state_->special; }

absl::StatusOr<std::string> HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  const State& s = *state_;
  if (s.decoder == DecoderKind::kUnsupported) {
    return absl::UnimplementedError(absl::StrCat("HF tokenizer '", s.name, "': decoder type '",
                                                 s.decoder_type,
                                                 "' is not supported (supported: ByteLevel, "
                                                 "WordPiece, none)"));
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string t = token(ids[i]);
    if (t.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("HF tokenizer: token id %d at position %d is not in the vocabulary "
                          "(size %d)",
                          ids[i], i, s.vocab_size));
    }
    tokens.push_back(std::move(t));
  }
  std::string out;
  switch (s.decoder) {
    case DecoderKind::kNone:
      return absl::StrJoin(tokens, " ");
    case DecoderKind::kByteLevel:
      for (const std::string& t : tokens) hf_internal::append_byte_level(t, &out);
      return utf8::replace_invalid(out);
    case DecoderKind::kWordPiece:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string t = tokens[i];
        if (i > 0) {
          if (absl::StartsWith(t, s.wordpiece_prefix)) {
            t.erase(0, s.wordpiece_prefix.size());
          } else {
            t.insert(0, " ");
          }
        }
        out += s.wordpiece_cleanup ? hf_internal::wordpiece_cleanup(t) : t;
      }
      return out;
    case DecoderKind::kUnsupported:
      break;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> make_hf_tokenizer(const TokenizerOptions& options) {
  auto tok = HfTokenizer::load(options.vocab_file, options.vocab_extra_ids);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

}  // namespace anvil::io
