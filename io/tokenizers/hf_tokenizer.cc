// Hugging Face tokenizer.json: the pipeline (normalizer, added tokens, pre-tokenizer, model,
// post-processor, decoder; each family in its own io/tokenizers/hf_*.cc) and the special-token
// conventions (see hf_tokenizer.h).
#include "io/tokenizers/hf_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/tokenizers/factories.h"
#include "io/tokenizers/hf_added_tokens.h"
#include "io/tokenizers/hf_decoders.h"
#include "io/tokenizers/hf_json.h"
#include "io/tokenizers/hf_models.h"
#include "io/tokenizers/hf_normalizers.h"
#include "io/tokenizers/hf_post_processors.h"
#include "io/tokenizers/hf_pre_tokenizers.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io {
namespace {

using hf_internal::AddedMatcher;
using hf_internal::AddedToken;
using hf_internal::Ctx;
using hf_internal::get_bool;
using hf_internal::get_id;
using hf_internal::get_string;
using hf_internal::json;
using hf_internal::parse_json;
using hf_internal::Piece;
using hf_internal::Segment;

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
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  // Added tokens. The matchers point into this vector: build_matchers() runs after its last
  // change.
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, size_t> added_by_id;
  AddedMatcher raw_matcher;
  AddedMatcher normalized_matcher;

  int64_t vocab_size = 0;
  SpecialTokens special;

  int32_t find_token(absl::string_view t) const {
    for (const AddedToken& a : added) {
      if (a.content == t) return a.id;
    }
    return model->token_to_id(t);
  }

  void build_matchers() {
    raw_matcher = AddedMatcher();
    normalized_matcher = AddedMatcher();
    for (const AddedToken& a : added) {
      if (a.normalized) {
        std::string content = a.content;
        if (normalizer) normalizer->normalize(&content);
        normalized_matcher.add(std::move(content), &a);
      } else {
        raw_matcher.add(a.content, &a);
      }
    }
    raw_matcher.finish();
    normalized_matcher.finish();
  }

  // Pre-tokenizer and model over one normalized segment with no added tokens in it.
  // `first`: the segment starts the text.
  void encode_segment(absl::string_view text, bool first, std::vector<int32_t>* out) const {
    if (text.empty()) return;
    if (pre_tokenizer == nullptr) {
      model->tokenize(text, out);
      return;
    }
    std::vector<Piece> pieces;
    pieces.push_back({std::string(text), first});
    pre_tokenizer->pre_tokenize(&pieces);
    for (const Piece& p : pieces) model->tokenize(p.text, out);
  }

  // Normalizer, normalized added tokens, then encode_segment, for one raw segment.
  void encode_raw(absl::string_view piece, bool first, std::vector<int32_t>* out) const {
    std::string normalized(piece);
    if (normalizer) normalizer->normalize(&normalized);
    if (normalized_matcher.empty()) {
      encode_segment(normalized, first, out);
      return;
    }
    std::vector<Segment> inner;
    normalized_matcher.split(normalized, &inner);
    const absl::string_view nview(normalized);
    for (const Segment& sub : inner) {
      if (sub.id >= 0) {
        out->push_back(sub.id);
      } else {
        encode_segment(nview.substr(sub.begin, sub.end - sub.begin), first && sub.begin == 0, out);
      }
    }
  }
};

}  // namespace hf_internal

using hf_internal::State;

// ---- loading ------------------------------------------------------------------------------------

HfTokenizer::HfTokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
HfTokenizer::~HfTokenizer() = default;

namespace {

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
    const auto& unk = s->model->unk_token();
    sp.unk = unk ? s->find_token(*unk) : first({"[UNK]", "<unk>"});
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

// The five components, each from its field (a missing field = null).
absl::Status parse_components(const Ctx& ctx, const json& root, State* s) {
  static const json kNull;
  auto field = [&](const char* key) -> const json& {
    const auto it = root.find(key);
    return it == root.end() ? kNull : *it;
  };
  ANVIL_RETURN_IF_ERROR(
      hf_internal::parse_normalizer(ctx, field("normalizer"), "normalizer", &s->normalizer));
  ANVIL_RETURN_IF_ERROR(hf_internal::parse_pre_tokenizer(ctx, field("pre_tokenizer"),
                                                         "pre_tokenizer", &s->pre_tokenizer));
  const auto m = root.find("model");
  if (m == root.end()) return ctx.bad("the file", "has no model");
  ANVIL_RETURN_IF_ERROR(hf_internal::parse_model(ctx, *m, &s->model));
  ANVIL_RETURN_IF_ERROR(hf_internal::parse_post_processor(ctx, field("post_processor"),
                                                          "post_processor", &s->post_processor));
  return hf_internal::parse_decoder(ctx, field("decoder"), "decoder", &s->decoder);
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
  ANVIL_RETURN_IF_ERROR(parse_components(ctx, root, s.get()));
  ANVIL_RETURN_IF_ERROR(parse_added_tokens(ctx, root, s.get()));

  // vocab_extra_ids: the missing <extra_id_k> become special added tokens after the vocabulary.
  int64_t size = static_cast<int64_t>(s->model->tokens().size());
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
  if (s.raw_matcher.empty()) {
    s.encode_raw(valid, /*first=*/true, out);
    return;
  }
  std::vector<Segment> raw;
  s.raw_matcher.split(valid, &raw);
  for (const Segment& seg : raw) {
    if (seg.id >= 0) {
      out->push_back(seg.id);
    } else {
      s.encode_raw(valid.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, out);
    }
  }
}

void HfTokenizer::encode_with_special_tokens(absl::string_view text,
                                             std::vector<int32_t>* out) const {
  std::vector<int32_t> ids;
  encode(text, &ids);
  if (state_->post_processor) state_->post_processor->process(&ids);
  out->insert(out->end(), ids.begin(), ids.end());
}

std::string HfTokenizer::token(int32_t id) const {
  const State& s = *state_;
  if (const auto it = s.added_by_id.find(id); it != s.added_by_id.end()) {
    return s.added[it->second].content;
  }
  const auto& tokens = s.model->tokens();
  if (id >= 0 && static_cast<size_t>(id) < tokens.size()) return tokens[id];
  return {};
}

int32_t HfTokenizer::token_to_id(absl::string_view token) const {
  return state_->find_token(token);
}

int64_t HfTokenizer::vocab_size() const { return state_->vocab_size; }
const SpecialTokens& HfTokenizer::special() const { return state_->special; }

absl::StatusOr<std::string> HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  const State& s = *state_;
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
  return hf_internal::decode_tokens(s.decoder.get(), std::move(tokens));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> make_hf_tokenizer(const TokenizerOptions& options) {
  auto tok = HfTokenizer::load(options.vocab_file, options.vocab_extra_ids);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

}  // namespace anvil::io
