// The model record of a checkpoint and the check on load (see arch_record.h).
#include "model/train/arch_record.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace anvil::model {
namespace {

using Record = std::map<std::string, std::string>;

// The keys a finetune may change: they do not change what a stored tensor means (dropout) or
// only how far a model is run (max_seq_len; a learned position table of another size is
// refused by the tensor load's shape check).
constexpr const char* kFinetuneKeys[] = {"max_seq_len", "hidden_dropout", "attention_dropout"};

// Names as the [model] schema spells them (gpt_arch_config.cc).
const char* name_of(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearned:
      return "learned";
    case PositionEmbedding::kAlibi:
      return "alibi";
    case PositionEmbedding::kRotary:
      return "rotary";
    case PositionEmbedding::kNone:
      return "none";
  }
  return "?";
}

const char* name_of(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kSwiglu:
      return "swiglu";
    case Activation::kGeglu:
      return "geglu";
    case Activation::kReglu:
      return "reglu";
    case Activation::kLiglu:
      return "liglu";
    case Activation::kGeluErf:
      return "gelu_erf";
  }
  return "?";
}

// The shortest decimal that reads back as v ("1e-05", not "9.99999975e-06").
std::string text(float v) {
  for (int digits = 6;; ++digits) {
    const std::string t = absl::StrFormat("%.*g", digits, v);
    if (digits == 9 || std::strtof(t.c_str(), nullptr) == v) return t;
  }
}
std::string text(bool v) { return v ? "true" : "false"; }

void add_gpt(const GptConfig& m, Record& r) {
  r["type"] = m.bert() ? "bert" : "gpt";
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"vocab_size", m.vocab_size},
                               {"max_seq_len", m.max_seq_len},
                               {"d_model", m.d_model},
                               {"n_heads", m.n_heads},
                               {"n_layers", m.n_layers},
                               {"ffn_hidden", m.ffn()}}) {
    r[key] = absl::StrCat(v);
  }
  // Only for grouped-query attention: records of multi-head models written before the key
  // existed stay equal.
  if (m.grouped_query()) r["n_kv_heads"] = absl::StrCat(m.kv_heads());
  r["ln_eps"] = text(m.ln_eps);
  r["hidden_dropout"] = text(m.hidden_dropout);
  r["attention_dropout"] = text(m.attention_dropout);
  r["position_embedding"] = name_of(m.position_embedding);
  if (m.position_embedding == PositionEmbedding::kRotary) {
    r["rotary_base"] = text(m.rotary_base);
    r["rotary_percent"] = text(m.rotary_percent);
    // Only when scaled: records of unscaled rotary models stay equal.
    const ops::RotaryScaling& rs = m.rope_scaling;
    if (rs.type != ops::RotaryScalingType::kNone) {
      r["rope_scaling"] = rs.type == ops::RotaryScalingType::kLinear ? "linear" : "llama3";
      r["rope_scaling_factor"] = text(rs.factor);
    }
    if (rs.type == ops::RotaryScalingType::kLlama3) {
      r["rope_low_freq_factor"] = text(rs.low_freq_factor);
      r["rope_high_freq_factor"] = text(rs.high_freq_factor);
      r["rope_original_max_position"] = absl::StrCat(rs.original_max_position);
    }
  }
  if (m.sliding_window > 0) r["sliding_window"] = absl::StrCat(m.sliding_window);
  r["embed_layernorm"] = text(m.embed_layernorm);
  r["activation"] = name_of(m.activation);
  r["norm"] = m.layernorm() ? "layernorm" : "rmsnorm";
  r["norm_placement"] = m.post_ln() ? "post" : "pre";
  r["bias"] = text(m.bias);
  if (m.qkv_bias && !m.bias) r["qkv_bias"] = "true";  // absent: as before the key existed
  r["tie_embeddings"] = text(m.tie_embeddings);
  if (m.bert()) {
    r["type_vocab_size"] = absl::StrCat(m.type_vocab_size);
    r["bert_binary_head"] = text(m.binary_head);
  }
}

void add_t5(const T5Config& t, Record& r) {
  r["type"] = "t5";
  r["t5_version"] = t.gated() ? "1.1" : "1.0";
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"vocab_size", t.vocab_size},
                               {"d_model", t.d_model},
                               {"d_kv", t.d_kv},
                               {"n_heads", t.n_heads},
                               {"ffn_hidden", t.d_ff},
                               {"n_layers", t.n_encoder_layers},
                               {"decoder_layers", t.n_decoder_layers},
                               {"relative_buckets", t.num_buckets},
                               {"relative_max_distance", t.max_distance}}) {
    r[key] = absl::StrCat(v);
  }
  r["ln_eps"] = text(t.eps);
  r["hidden_dropout"] = text(t.dropout);
}

// FNV-1a (64 bit) of the tokenizer's files in order, as hex: the same files under another path
// give the same value, an edited vocabulary another. "unreadable PATH" when a file cannot be
// read (the run's tokenizer setup names the problem first).
std::string files_hash(const TokenizerConfig& t) {
  uint64_t h = 14695981039346656037ull;
  for (std::string path : {t.vocab_file, t.merge_file}) {
    if (path.empty()) continue;
    if (std::filesystem::is_directory(path)) path += "/tokenizer.json";  // HF: a directory
    std::ifstream in(path, std::ios::binary);
    if (!in) return "unreadable " + path;
    for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) {
      h = (h ^ static_cast<unsigned char>(*it)) * 1099511628211ull;
    }
  }
  return absl::StrFormat("%016x", h);
}

std::string value_or_none(const Record& r, const std::string& key) {
  auto it = r.find(key);
  return it == r.end() ? "(none)" : it->second;
}

// "[model] n_layers" / "[tokenizer] type".
std::string key_name(const std::string& key) {
  const size_t dot = key.find('.');
  return dot == std::string::npos
             ? absl::StrCat("[model] ", key)
             : absl::StrCat("[", key.substr(0, dot), "] ", key.substr(dot + 1));
}

}  // namespace

std::map<std::string, std::string> checkpoint_model_record(const TrainConfig& cfg) {
  Record r;
  if (cfg.model.t5()) {
    add_t5(cfg.t5, r);
  } else {
    add_gpt(cfg.model, r);
  }
  if (!cfg.tokenizer.type.empty()) {
    r["tokenizer.type"] = cfg.tokenizer.type;
    r["tokenizer.vocab_extra_ids"] = absl::StrCat(cfg.tokenizer.vocab_extra_ids);
    r["tokenizer.files"] = files_hash(cfg.tokenizer);
  }
  return r;
}

bool finetune_may_change(const std::string& key) {
  for (const char* k : kFinetuneKeys) {
    if (key == k) return true;
  }
  return false;
}

absl::Status check_checkpoint_model(const std::map<std::string, std::string>& saved,
                                    const TrainConfig& cfg, const std::string& where) {
  const Record run = checkpoint_model_record(cfg);
  std::vector<std::string> diffs;
  auto differs = [&](const std::string& key, const std::string& value) {
    const std::string have = value_or_none(run, key);
    if (have == value || (cfg.checkpoint.finetune && finetune_may_change(key))) return false;
    diffs.push_back(absl::StrCat(key_name(key), ": checkpoint ", value, ", config ", have));
    return true;
  };
  // Another family: its other keys say nothing.
  auto type = saved.find("type");
  if (type == saved.end() || !differs("type", type->second)) {
    for (const auto& [key, value] : saved) {
      if (key != "type") differs(key, value);
    }
  }
  if (diffs.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      where, " was saved from another model (", absl::StrJoin(diffs, "; "),
      "): a checkpoint loads into the same architecture and tokenizer only",
      cfg.checkpoint.finetune ? ""
                              : absl::StrCat(" ([checkpoint] finetune = true may change ",
                                             absl::StrJoin(kFinetuneKeys, ", "), ")")));
}

}  // namespace anvil::model
