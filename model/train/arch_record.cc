// The model record of a checkpoint and the check on load (see arch_record.h).
#include "model/train/arch_record.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"
#include "model/train/family.h"

namespace anvil::model {
namespace {

using Record = std::map<std::string, std::string>;

// The keys a finetune may change: they do not change what a stored tensor means (dropout) or
// only how far a model is run (max_seq_len; a learned position table of another size is
// refused by the tensor load's shape check).
constexpr const char* kFinetuneKeys[] = {"max_seq_len", "hidden_dropout", "attention_dropout"};

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

// Keys written only when not at their default (so that older records stay byte-identical):
// absent means the default, and a run that sets them against an older record is refused too.
constexpr std::pair<const char*, const char*> kDefaultedKeys[] = {
    {"vocab_padding_in_loss", "false"}};

std::string value_or_none(const Record& r, const std::string& key) {
  auto it = r.find(key);
  if (it != r.end()) return it->second;
  for (const auto& [k, v] : kDefaultedKeys) {
    if (key == k) return v;
  }
  return "(none)";
}

// "[model] n_layers" / "[tokenizer] type".
std::string key_name(const std::string& key) {
  const size_t dot = key.find('.');
  return dot == std::string::npos
             ? absl::StrCat("[model] ", key)
             : absl::StrCat("[", key.substr(0, dot), "] ", key.substr(dot + 1));
}

}  // namespace

std::string record_text(float v) {
  for (int digits = 6;; ++digits) {
    const std::string t = absl::StrFormat("%.*g", digits, v);
    if (digits == 9 || std::strtof(t.c_str(), nullptr) == v) return t;
  }
}

std::map<std::string, std::string> checkpoint_model_record(const TrainConfig& cfg) {
  Record r;
  const Family& family = family_of(cfg);
  r["type"] = family.type;
  family.model_record(cfg, r);
  if (!cfg.tokenizer.type.empty()) {
    r["tokenizer.type"] = cfg.tokenizer.type;
    r["tokenizer.vocab_extra_ids"] = absl::StrCat(cfg.tokenizer.vocab_extra_ids);
    r["tokenizer.files"] = files_hash(cfg.tokenizer);
  }
  return r;
}

void add_vocab_padding_record(bool in_loss, int64_t padded_vocab,
                              std::map<std::string, std::string>& r) {
  if (!in_loss) return;
  r["vocab_padding_in_loss"] = "true";
  r["padded_vocab"] = absl::StrCat(padded_vocab);
}

absl::StatusOr<int64_t> saved_loss_padding(const std::map<std::string, std::string>& saved, int tp,
                                           const std::string& where) {
  auto on = saved.find("vocab_padding_in_loss");
  if (on == saved.end() || on->second != "true") return int64_t{0};
  auto it = saved.find("padded_vocab");
  int64_t padded = 0;
  if (it == saved.end() || !absl::SimpleAtoi(it->second, &padded) || padded < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the model record has vocab_padding_in_loss = true but no valid padded_vocab"));
  }
  if (padded % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " was saved with [model] vocab_padding_in_loss = true and ", padded,
        " padded vocabulary rows (parameters of the model), which TP ", tp, " does not divide"));
  }
  return padded;
}

absl::Status adopt_vocab_padding(const std::map<std::string, std::string>& saved, int tp,
                                 const std::string& where, GptConfig& m) {
  ANVIL_ASSIGN_OR_RETURN(const int64_t padded, saved_loss_padding(saved, tp, where));
  if (padded == 0) return absl::OkStatus();
  m.vocab_padding_in_loss = true;
  m.padded_vocab = padded;
  return absl::OkStatus();
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
    for (const auto& [key, value] : kDefaultedKeys) {
      if (saved.count(key) == 0) differs(key, value);
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
