// bin/serve's OpenAI-style `logprobs` object of a completion choice (header only: bin/*.cc are the
// programs), from the Generator's events (model/infer/generation.h): with echo, every prompt token
// (the first has no log-probability: null), then the completion's tokens:
//   {"tokens": [text of each token], "token_logprobs": [log p or null],
//    "top_logprobs": [{text: log p} of the top alternatives, or null], "text_offset": [byte
//    offset of each token's text in the choice's text]}
// which is what lm-evaluation-harness's local-completions model reads (token_logprobs and
// top_logprobs of the context and continuation, from a request with echo, logprobs 1 and
// max_tokens 1).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/infer/generation.h"
#include "nlohmann/json.hpp"

namespace anvil::bin {

class ChoiceLogprobs {
 public:
  using TokenText = std::function<std::string(int32_t)>;
  explicit ChoiceLogprobs(TokenText text) : text_(std::move(text)) {}

  // The prompt's first token (echo): no log-probability.
  void add_first(int32_t token) { add(token, nullptr, nullptr); }
  // A scored prompt token or an output token of an event (prompt_token or has_token).
  void add(const model::GenerationEvent& e) {
    nlohmann::json top = nlohmann::json::object();
    for (const auto& [id, lp] : e.top) {
      const std::string t = text_(id);
      if (!top.contains(t)) top[t] = lp;  // two ids with one text: the likelier one
    }
    add(e.token, e.logprob, std::move(top));
  }
  // Drops the last token (a max_tokens = 0 echo request generates one that is not returned).
  void drop_last() {
    tokens_.erase(tokens_.end() - 1);
    logprobs_.erase(logprobs_.end() - 1);
    top_.erase(top_.end() - 1);
    offsets_.erase(offsets_.end() - 1);
  }
  nlohmann::json json() const { return json(0, tokens_.size()); }
  // The entries [from, to) alone (a streamed chunk's), offsets still counted from the choice's
  // start.
  nlohmann::json json(size_t from, size_t to) const {
    auto part = [&](const auto& v) { return std::vector(v.begin() + from, v.begin() + to); };
    return {{"tokens", part(tokens_)},
            {"token_logprobs", part(logprobs_)},
            {"top_logprobs", part(top_)},
            {"text_offset", part(offsets_)}};
  }
  size_t size() const { return tokens_.size(); }

 private:
  void add(int32_t token, nlohmann::json logprob, nlohmann::json top) {
    const std::string t = text_(token);
    offsets_.push_back(offset_);
    offset_ += static_cast<int64_t>(t.size());
    tokens_.push_back(t);
    logprobs_.push_back(std::move(logprob));
    top_.push_back(std::move(top));
  }

  TokenText text_;
  int64_t offset_ = 0;
  std::vector<std::string> tokens_;
  std::vector<nlohmann::json> logprobs_, top_;
  std::vector<int64_t> offsets_;
};

}  // namespace anvil::bin
