// bin/serve's chat side (header only: bin/*.cc are the programs): the chat template (from
// --chat-template FILE, a .jinja file or a tokenizer_config.json, else the checkpoint's
// tokenizer/tokenizer_config.json), the translation of a /v1/chat/completions body into the
// /v1/completions body that bin/serve already validates and runs (the prompt: the template
// rendered with messages, add_generation_prompt = true, bos_token, eos_token), and the
// chat.completion / chat.completion.chunk objects of the answer.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "io/jinja/template.h"
#include "nlohmann/json.hpp"

namespace anvil::bin {

struct ChatTemplate {
  io::jinja::Template tmpl;
  std::string bos, eos;  // tokenizer_config.json's bos_token / eos_token ("" if absent)
  std::string source;    // the file it came from (messages)
};

// bos_token / eos_token: a string or an AddedToken dict {"content": ...}.
inline std::string special_token_text(const nlohmann::json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const nlohmann::json& t = cfg[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"];
  return "";
}

// The chat template of `flag_file` (empty: `ckpt_dir`/tokenizer/tokenizer_config.json); nullopt
// when neither gives one; an error for an unreadable or malformed file or template.
inline absl::StatusOr<std::optional<ChatTemplate>> load_chat_template(const std::string& flag_file,
                                                                      const std::string& ckpt_dir) {
  const std::string path =
      flag_file.empty() ? ckpt_dir + "/tokenizer/tokenizer_config.json" : flag_file;
  std::error_code ec;
  if (flag_file.empty() && !std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("chat template ", path, ": cannot read"));
  std::stringstream ss;
  ss << f.rdbuf();
  ChatTemplate c;
  c.source = path;
  std::string source = ss.str();
  if (absl::EndsWith(path, ".json")) {
    const nlohmann::json cfg = nlohmann::json::parse(source, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) {
      return absl::InvalidArgumentError(path + ": not a JSON object");
    }
    if (!cfg.contains("chat_template") || cfg["chat_template"].is_null()) {
      if (flag_file.empty()) return std::nullopt;
      return absl::InvalidArgumentError(path + ": no chat_template");
    }
    if (!cfg["chat_template"].is_string()) {
      return absl::InvalidArgumentError(
          path + ": chat_template must be a string (lists of named templates are not supported)");
    }
    source = cfg["chat_template"];
    c.bos = special_token_text(cfg, "bos_token");
    c.eos = special_token_text(cfg, "eos_token");
  }
  absl::StatusOr<io::jinja::Template> t = io::jinja::Template::parse(source);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", t.status().message()));
  c.tmpl = std::move(*t);
  return std::optional<ChatTemplate>(std::move(c));
}

// A /v1/chat/completions body -> the /v1/completions body of the same request (prompt: the
// rendered conversation); the error message of a bad one.
inline std::optional<std::string> chat_to_completion(const ChatTemplate* chat,
                                                     const std::string& body, nlohmann::json* out) {
  using ojson = nlohmann::ordered_json;
  const ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "the request body is not valid JSON";
  if (!j.is_object()) return "the request body must be a JSON object";
  if (!j.contains("messages")) return "'messages' is required";
  const ojson& m = j["messages"];
  if (!m.is_array() || m.empty()) return "'messages' must be a non-empty list of messages";
  for (size_t i = 0; i < m.size(); ++i) {
    if (!m[i].is_object() || !m[i].contains("role") || !m[i]["role"].is_string()) {
      return absl::StrCat("messages[", i, "] must be an object with a string 'role'");
    }
    if (!m[i].contains("content") || !(m[i]["content"].is_string() || m[i]["content"].is_array())) {
      return absl::StrCat("messages[", i, "].content must be a string or a list of parts");
    }
  }
  if (chat == nullptr) {
    return std::string(
        "this model has no chat template: the checkpoint keeps no tokenizer/"
        "tokenizer_config.json with a chat_template; start bin/serve with --chat-template FILE "
        "(a .jinja file or a tokenizer_config.json), or use /v1/completions");
  }
  // logprobs (true/false) + top_logprobs (k): the completion's logprobs k (bin/serve checks k).
  int64_t top = -1;
  if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    if (!j["logprobs"].is_boolean()) return std::string("'logprobs' must be true or false");
    if (j["logprobs"].get<bool>()) top = 0;
  }
  if (j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
    if (top < 0) return std::string("'top_logprobs' needs 'logprobs': true");
    if (!j["top_logprobs"].is_number_integer())
      return std::string("'top_logprobs' must be an integer");
    top = j["top_logprobs"].get<int64_t>();
  }
  const ojson context = {{"messages", m},
                         {"add_generation_prompt", true},
                         {"bos_token", chat->bos},
                         {"eos_token", chat->eos},
                         {"tools", nullptr}};
  absl::StatusOr<std::string> prompt = chat->tmpl.render(context);
  if (!prompt.ok()) {
    return absl::StrCat("the chat template (", chat->source,
                        ") failed: ", prompt.status().message());
  }
  nlohmann::json c = {{"prompt", *prompt}};
  for (const char* key : {"stream", "stop", "temperature", "top_p", "seed", "n", "max_tokens"}) {
    if (j.contains(key)) c[key] = nlohmann::json::parse(j[key].dump());
  }
  if (j.contains("max_completion_tokens") && !j["max_completion_tokens"].is_null()) {
    c["max_tokens"] = nlohmann::json::parse(j["max_completion_tokens"].dump());
  }
  if (top >= 0) c["logprobs"] = top;
  *out = std::move(c);
  return std::nullopt;
}

// The completion choice's logprobs ({"tokens", "token_logprobs", "top_logprobs"},
// bin/openai_logprobs.h) in the chat shape: {"content": [{"token", "logprob", "bytes",
// "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
inline nlohmann::json chat_logprobs(const nlohmann::json& lp) {
  auto bytes = [](const std::string& t) {
    nlohmann::json b = nlohmann::json::array();
    for (unsigned char c : t) b.push_back(static_cast<int>(c));
    return b;
  };
  nlohmann::json content = nlohmann::json::array();
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    const std::string t = lp["tokens"][i];
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [k, v] : lp["top_logprobs"][i].items()) {
      top.push_back({{"token", k}, {"logprob", v}, {"bytes", bytes(k)}});
    }
    std::sort(top.begin(), top.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a["logprob"].get<double>() > b["logprob"].get<double>();
    });
    content.push_back({{"token", t},
                       {"logprob", lp["token_logprobs"][i]},
                       {"bytes", bytes(t)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// A chat.completion.chunk (delta: {"role": ...} / {"content": ...} / {}).
inline nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                                 nlohmann::json delta, const char* finish) {
  nlohmann::json c = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}};
  c["finish_reason"] = finish ? nlohmann::json(finish) : nlohmann::json(nullptr);
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", nlohmann::json::array({c})}};
}

// The OpenAI error object; type from the status (4xx: invalid_request_error, else server_error).
inline nlohmann::json openai_error(int status, const std::string& message, const char* code) {
  return {{"error",
           {{"message", message},
            {"type", status < 500 ? "invalid_request_error" : "server_error"},
            {"code", code ? nlohmann::json(code) : nlohmann::json(nullptr)}}}};
}

}  // namespace anvil::bin
