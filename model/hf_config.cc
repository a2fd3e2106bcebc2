// config.json <-> [model] by the family tables (see hf_config.h).
#include "model/hf_config.h"

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"

namespace anvil::model {
namespace {

using engine::ConfigType;

// GPT-2's values of the GPT-variant [model] keys: what a build without them implements.
const std::map<std::string, std::string>& gpt2_values() {
  static const std::map<std::string, std::string> v = {{"position_embedding", "learned"},
                                                       {"rotary_base", "10000"},
                                                       {"rotary_percent", "1.0"},
                                                       {"embed_layernorm", "false"},
                                                       {"activation", "gelu"},
                                                       {"norm", "layernorm"},
                                                       {"bias", "true"},
                                                       {"tie_embeddings", "true"}};
  return v;
}

// Equal as numbers when both are numbers, as booleans when both are, else as text.
bool same_value(const std::string& a, const std::string& b) {
  double x = 0, y = 0;
  if (absl::SimpleAtod(a, &x) && absl::SimpleAtod(b, &y)) return x == y;
  bool p = false, q = false;
  if (absl::SimpleAtob(a, &p) && absl::SimpleAtob(b, &q)) return p == q;
  return a == b;
}

// JSON number text of v (finite): integral values below 2^53 as integers, others the shortest
// %g text that reads back as v.
std::string number_text(double v) {
  char buf[32];
  if (v == std::floor(v) && std::abs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    double back = 0;
    if (absl::SimpleAtod(buf, &back) && back == v) break;
  }
  return buf;
}

// [model] key's value as text; keys the schema lacks read as GPT-2's.
std::string model_text(const engine::Config& cfg, const engine::ConfigSchema& schema,
                       const std::string& key) {
  const engine::ConfigSchema::Key* k = schema.find("model", key);
  if (k == nullptr) {
    auto it = gpt2_values().find(key);
    return it == gpt2_values().end() ? "" : it->second;
  }
  switch (k->type) {
    case ConfigType::kInt:
      return absl::StrCat(cfg.get_int("model", key));
    case ConfigType::kFloat:
      return number_text(cfg.get_float("model", key));
    case ConfigType::kBool:
      return cfg.get_bool("model", key) ? "true" : "false";
    case ConfigType::kString:
      return cfg.get_string("model", key);
  }
  return "";
}

// A JSON value as [model] value text of `type`; InvalidArgument naming the field otherwise.
absl::StatusOr<std::string> ini_value(const HfConfigField& k, const std::string& json,
                                      const std::string& where) {
  if (json == "null" && k.zero_is_null) return std::string("0");
  int64_t i = 0;
  double d = 0;
  const bool ok = (k.type == ConfigType::kInt && absl::SimpleAtoi(json, &i)) ||
                  (k.type == ConfigType::kFloat && json != "true" && json != "false" &&
                   absl::SimpleAtod(json, &d) && std::isfinite(d)) ||
                  (k.type == ConfigType::kBool && (json == "true" || json == "false"));
  if (ok) return json;
  const char* want = k.type == ConfigType::kInt     ? "an integer"
                     : k.type == ConfigType::kFloat ? "a number"
                                                    : "true or false";
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", k.hf_key, ": expected ", want, ", got ", json));
}

}  // namespace

absl::StatusOr<const HfFamily*> hf_family_of(const engine::Config& cfg,
                                             const engine::ConfigSchema& schema) {
  // Only the families of the checkpoint's [model] type: an encoder's options could otherwise
  // match GPT-2's.
  // No family writes num_key_value_heads yet: a grouped-query model would be read back by
  // transformers with n_heads K/V heads, i.e. as a different model.
  const std::string kv = model_text(cfg, schema, "n_kv_heads");
  const std::string heads = model_text(cfg, schema, "n_heads");
  if (!kv.empty() && kv != "0" && kv != heads) {
    return absl::UnimplementedError(absl::StrCat(
        "[model] n_kv_heads = ", kv, " < n_heads = ", heads,
        " (grouped-query attention) is not exported to Hugging Face yet: config.json would need "
        "num_key_value_heads and the K/V projections their own shapes"));
  }
  std::string type = model_text(cfg, schema, "type");
  if (type.empty()) type = "gpt";
  auto family_type = [](const HfFamily& f) {
    for (const HfSetting& s : f.settings) {
      if (s.key == "type") return s.value;
    }
    return std::string("gpt");
  };
  std::vector<std::string> why;
  for (const HfFamily* f : hf_families()) {
    if (family_type(*f) != type) continue;
    const HfSetting* differs = nullptr;
    for (const HfSetting& s : f->settings) {
      if (!same_value(model_text(cfg, schema, s.key), s.value)) {
        differs = &s;
        break;
      }
    }
    if (differs == nullptr) return f;
    why.push_back(absl::StrCat(f->model_type, " needs ", differs->key, " = ", differs->value,
                               ", got ", model_text(cfg, schema, differs->key)));
  }
  if (why.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("[model] type ", type, ": no Hugging Face conversion yet"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "[model] is none of the Hugging Face families anvil converts: ", absl::StrJoin(why, "; ")));
}

HfJsonFields hf_config_fields(const HfFamily& f, const engine::Config& cfg,
                              const engine::ConfigSchema& schema) {
  HfJsonFields out;
  for (const HfConfigField& k : f.config) {
    std::string v = model_text(cfg, schema, k.anvil_key);
    if (v == "0" && k.zero_is_null) v = "null";
    if (v == "0" && k.zero_is_4d) v = absl::StrCat(4 * cfg.get_int("model", "d_model"));
    if (v == "0" && k.zero_is_per_head) {
      v = absl::StrCat(cfg.get_int("model", "d_model") / cfg.get_int("model", "n_heads"));
    }
    out[k.hf_key] = v;
  }
  for (const HfFixedField& k : f.fixed) out[k.hf_key] = k.json_value;
  return out;
}

absl::StatusOr<HfImportedModel> hf_import_model(const HfFamily& f, const HfJsonFields& json,
                                                const engine::ConfigSchema& schema,
                                                const std::string& where) {
  for (const HfFixedField& k : f.fixed) {
    auto it = json.find(k.hf_key);
    if (it != json.end() && !same_value(it->second, k.json_value)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", k.hf_key, " is ", it->second,
                                                     "; anvil's ", f.model_type, " implements ",
                                                     k.json_value));
    }
  }
  // [model] key -> (value, the config.json field it came from), in the order first given.
  std::vector<std::pair<std::string, std::string>> values;
  std::map<std::string, std::string> source;
  auto find = [&](const std::string& key) -> std::string* {
    for (auto& [k, v] : values) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  for (const HfConfigField& k : f.config) {
    auto it = json.find(k.hf_key);
    if (it == json.end()) continue;
    ANVIL_ASSIGN_OR_RETURN(std::string v, ini_value(k, it->second, where));
    if (const std::string* have = find(k.anvil_key)) {
      if (!same_value(*have, v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", k.hf_key, " = ", v, " but ", source[k.anvil_key], " = ", *have,
            ": anvil has one [model] ", k.anvil_key, " for both",
            k.hf_key == "num_key_value_heads" ? " (grouped-query attention is not implemented)"
                                              : ""));
      }
      continue;
    }
    values.emplace_back(k.anvil_key, v);
    source[k.anvil_key] = k.hf_key;
  }
  for (const HfSetting& s : f.settings) values.emplace_back(s.key, s.value);
  for (const HfSetting& s : f.import_defaults) {
    if (find(s.key) == nullptr) values.emplace_back(s.key, s.value);
  }

  HfImportedModel m;
  m.ini = "[model]\n";
  for (const auto& [key, v] : values) {
    if (schema.find("model", key) != nullptr) {
      absl::StrAppend(&m.ini, key, " = ", v, "\n");
      continue;
    }
    auto it = gpt2_values().find(key);
    if (it == gpt2_values().end() || !same_value(it->second, v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": a ", f.architecture, " needs [model] ", key, " = ", v,
          ", which this build of anvil does not have (it implements GPT-2's variant only)"));
    }
  }
  const std::string* heads = find("n_heads");
  if (heads == nullptr || !absl::SimpleAtoi(*heads, &m.dims.n_heads) || m.dims.n_heads <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no positive number of attention heads"));
  }
  const std::string* tie = find("tie_embeddings");
  m.tied = tie == nullptr || same_value(*tie, "true");
  for (const HfFixedField& k : f.fixed) {  // T5 v1.1: an untied lm_head
    if (k.hf_key == "tie_word_embeddings" && k.json_value == "false") m.tied = false;
  }
  return m;
}

}  // namespace anvil::model
