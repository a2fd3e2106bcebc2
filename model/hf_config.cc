// config.json <-> [model] by the family tables (see hf_config.h).
#include "model/hf_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
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
                                                       {"qkv_bias", "false"},
                                                       {"rope_scaling", "none"},
                                                       {"sliding_window", "0"},
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

// config.json rope_scaling (JSON text) from [model] rope_scaling*: null, or HF's object.
std::string rope_scaling_json(const engine::Config& cfg, const engine::ConfigSchema& schema) {
  const std::string type = model_text(cfg, schema, "rope_scaling");
  if (type.empty() || type == "none") return "null";
  const std::string factor =
      absl::StrCat("\"factor\": ", number_text(cfg.get_float("model", "rope_scaling_factor")));
  if (type == "linear") return absl::StrCat("{", factor, ", \"rope_type\": \"linear\"}");
  return absl::StrCat(
      "{", factor,
      ", \"high_freq_factor\": ", number_text(cfg.get_float("model", "rope_high_freq_factor")),
      ", \"low_freq_factor\": ", number_text(cfg.get_float("model", "rope_low_freq_factor")),
      ", \"original_max_position_embeddings\": ",
      model_text(cfg, schema, "rope_original_max_position"), ", \"rope_type\": \"llama3\"}");
}

// [model] rope_scaling* from config.json's rope_scaling (absent or null: none). Its members come
// as fields "rope_scaling.<member>" (see hf_config.h). Types other than linear / llama3 and
// members those types do not have are refused by name.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> rope_scaling_values(
    const HfJsonFields& json, const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  auto it = json.find("rope_scaling");
  if (it == json.end() || it->second == "null") return out;
  std::map<std::string, std::string> member;  // without "rope_scaling."
  for (const auto& [k, v] : json) {
    if (absl::StartsWith(k, "rope_scaling.")) member[k.substr(13)] = v;
  }
  std::string type;
  for (const char* key : {"rope_type", "type"}) {  // "type": transformers before 4.45
    auto t = member.find(key);
    if (t == member.end()) continue;
    if (!type.empty() && type != t->second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": rope_scaling.rope_type ", type,
                                                     " and rope_scaling.type ", t->second,
                                                     " differ"));
    }
    type = t->second;
  }
  if (type == "\"default\"") return out;
  std::vector<std::pair<std::string, HfConfigField>> allowed;  // member -> [model] key
  if (type == "\"linear\"") {
    out.emplace_back("rope_scaling", "linear");
    allowed = {{"factor", {"rope_scaling.factor", "rope_scaling_factor", ConfigType::kFloat}}};
  } else if (type == "\"llama3\"") {
    out.emplace_back("rope_scaling", "llama3");
    allowed = {{"factor", {"rope_scaling.factor", "rope_scaling_factor", ConfigType::kFloat}},
               {"low_freq_factor",
                {"rope_scaling.low_freq_factor", "rope_low_freq_factor", ConfigType::kFloat}},
               {"high_freq_factor",
                {"rope_scaling.high_freq_factor", "rope_high_freq_factor", ConfigType::kFloat}},
               {"original_max_position_embeddings",
                {"rope_scaling.original_max_position_embeddings", "rope_original_max_position",
                 ConfigType::kInt}}};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": rope_scaling type ", type.empty() ? "(none given)" : type,
                     " is not supported (anvil implements \"linear\" and \"llama3\")"));
  }
  for (const auto& [name, v] : member) {
    if (name == "rope_type" || name == "type") continue;
    auto a = std::find_if(allowed.begin(), allowed.end(),
                          [&, n = name](const auto& p) { return p.first == n; });
    if (a == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": rope_scaling.", name, " = ", v,
                                                     " is not part of rope_scaling type ", type,
                                                     " as anvil implements it"));
    }
  }
  for (const auto& [name, field] : allowed) {
    auto m = member.find(name);
    if (m == member.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rope_scaling type ", type, " needs rope_scaling.", name));
    }
    // JSON integers are valid floats; an integral float (8192.0) an integer only as text "8192".
    std::string v = m->second;
    int64_t i = 0;
    double d = 0;
    if (field.type == ConfigType::kInt && !absl::SimpleAtoi(v, &i) && absl::SimpleAtod(v, &d) &&
        d == std::floor(d)) {
      v = number_text(d);
    }
    ANVIL_ASSIGN_OR_RETURN(std::string value, ini_value(field, v, where));
    out.emplace_back(field.anvil_key, value);
  }
  return out;
}

// transformers 5 writes rotary settings as one object, rope_parameters = {rope_type, rope_theta,
// and the scaling's members}, instead of rope_theta and rope_scaling: the fields rewritten as
// the older ones (rope_theta, and rope_scaling with its members unless rope_type is "default"),
// so that the one import reads both. A file holding both forms must agree on rope_theta, and
// may not give a non-null rope_scaling besides.
absl::Status legacy_rope_fields(HfJsonFields& json, const std::string& where) {
  auto it = json.find("rope_parameters");
  if (it == json.end() || it->second == "null") return absl::OkStatus();
  std::map<std::string, std::string> member;  // without "rope_parameters."
  for (const auto& [k, v] : json) {
    if (absl::StartsWith(k, "rope_parameters.")) member[k.substr(16)] = v;
  }
  auto theta = member.find("rope_theta");
  if (theta != member.end()) {
    auto old = json.find("rope_theta");
    if (old != json.end() && old->second != "null" && !same_value(old->second, theta->second)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rope_theta = ", old->second,
                       " but rope_parameters.rope_theta = ", theta->second));
    }
    json["rope_theta"] = theta->second;
    member.erase(theta);
  }
  auto type = member.find("rope_type");
  if (type == member.end() || type->second == "\"default\"") {
    member.erase("rope_type");
    if (!member.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rope_parameters.", member.begin()->first,
                       " without a rope_type other than \"default\" is not supported"));
    }
    return absl::OkStatus();
  }
  auto old = json.find("rope_scaling");
  if (old != json.end() && old->second != "null") {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": both rope_scaling and rope_parameters give a rope scaling"));
  }
  json["rope_scaling"] = "{...}";
  for (const auto& [name, v] : member) json["rope_scaling." + name] = v;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const HfFamily*> hf_family_of(const engine::Config& cfg,
                                             const engine::ConfigSchema& schema) {
  // Only the families of the checkpoint's [model] type: an encoder's options could otherwise
  // match GPT-2's.
  // Only the LLaMA-like families write num_key_value_heads: a grouped-query model of another
  // family would be read back by transformers with n_heads K/V heads (a different model).
  const std::string kv = model_text(cfg, schema, "n_kv_heads");
  const std::string heads = model_text(cfg, schema, "n_heads");
  const bool grouped = !kv.empty() && kv != "0" && kv != heads;
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
    if (grouped && std::none_of(f->config.begin(), f->config.end(), [](const HfConfigField& k) {
          return k.hf_key == "num_key_value_heads";
        })) {
      why.push_back(absl::StrCat(f->model_type, " has no grouped-query attention (n_kv_heads = ",
                                 kv, " < n_heads = ", heads, ")"));
      continue;
    }
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
    if (v == "0" && k.zero_is_heads) v = model_text(cfg, schema, "n_heads");
    if (v == "0" && k.zero_is_per_head) {
      v = absl::StrCat(cfg.get_int("model", "d_model") / cfg.get_int("model", "n_heads"));
    }
    out[k.hf_key] = v;
  }
  for (const HfFixedField& k : f.fixed) out[k.hf_key] = k.json_value;
  if (f.rope_scaling) out["rope_scaling"] = rope_scaling_json(cfg, schema);
  return out;
}

absl::StatusOr<HfImportedModel> hf_import_model(const HfFamily& f, const HfJsonFields& given,
                                                const engine::ConfigSchema& schema,
                                                const std::string& where) {
  HfJsonFields json = given;
  ANVIL_RETURN_IF_ERROR(legacy_rope_fields(json, where));
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
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", k.hf_key, " = ", v, " but ", source[k.anvil_key], " = ",
                         *have, ": anvil has one [model] ", k.anvil_key, " for both"));
      }
      continue;
    }
    values.emplace_back(k.anvil_key, v);
    source[k.anvil_key] = k.hf_key;
  }
  if (f.rope_scaling) {
    ANVIL_ASSIGN_OR_RETURN(auto rope, rope_scaling_values(json, where));
    for (auto& kv : rope) values.push_back(std::move(kv));
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
  // Mistral-Nemo, Gemma: heads wider than hidden_size / heads, which anvil cannot express.
  const std::string* d_model = find("d_model");
  auto hd = json.find("head_dim");
  int64_t d = 0, head_dim = 0;
  if (hd != json.end() && hd->second != "null" && d_model != nullptr &&
      absl::SimpleAtoi(*d_model, &d) &&
      (!absl::SimpleAtoi(hd->second, &head_dim) || head_dim * m.dims.n_heads != d)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": head_dim = ", hd->second, " but hidden_size / num_attention_heads = ", d, " / ",
        m.dims.n_heads, ": anvil's heads are d_model / n_heads wide"));
  }
  const std::string* kv = find("n_kv_heads");
  if (kv != nullptr && (!absl::SimpleAtoi(*kv, &m.dims.n_kv_heads) || m.dims.n_kv_heads <= 0 ||
                        m.dims.n_heads % m.dims.n_kv_heads != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": num_key_value_heads ", *kv,
                                                   " must be positive and divide "
                                                   "num_attention_heads ",
                                                   m.dims.n_heads));
  }
  const std::string* tie = find("tie_embeddings");
  m.tied = tie == nullptr || same_value(*tie, "true");
  for (const HfFixedField& k : f.fixed) {  // T5 v1.1: an untied lm_head
    if (k.hf_key == "tie_word_embeddings" && k.json_value == "false") m.tied = false;
  }
  return m;
}

}  // namespace anvil::model
