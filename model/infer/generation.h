// Text generation over a GptInference's cache slots with continuous batching: requests start
// (prefill, together) whenever slots are free, and every step decodes one token of every running
// sequence in one batch, so a request that arrives while others run joins at the next step.
// Per request, after each sampled token t (model/infer/sampling.h):
//   t == eod                      -> finished, "stop" (t is not part of the output; with
//                                    logprobs its event still carries t and its score)
//   else t is appended; when a stop string occurs in the output text (detokenize(output)),
//                                    finished, "stop", the text cut before the stop string
//   output has max_new_tokens     -> finished, "length"
//   the slot's cache is full      -> finished, "length" (prompt + output = max_len)
// Log-probabilities (OpenAI's logprobs, for scoring clients such as lm-evaluation-harness):
// a request with logprobs = k >= 0 gets, with each token, log p(token) and the k most likely
// tokens with theirs, from log_softmax of the model's logits (before temperature, top-k/p and
// the repetition penalty). With echo the prompt is scored too: its prefill reads out the logits
// of every position (GptInference::prefill's score), and start() reports each prompt token
// after the first as a prompt-token event with its log-probability given the tokens before it,
// before the request's first output token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/stream.h"
#include "model/infer/gpt_inference.h"
#include "model/infer/sampling.h"

namespace anvil::model {

inline constexpr int64_t kMaxTopLogprobs = 20;  // alternatives per token (OpenAI allows 5)

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, 1 .. max_len of them
  int64_t max_new_tokens = 16;  // >= 1
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (need a detokenizer)
  int64_t logprobs = -1;          // -1: none; k >= 0: log p and the top k alternatives per token
  bool echo = false;              // score the prompt tokens after the first (prompt events)
};

enum class FinishReason { kNone, kStop, kLength };
const char* finish_reason_name(FinishReason r);  // "", "stop", "length"

// What one request did in a start() or step(): at most one new token.
struct GenerationEvent {
  int64_t id = 0;
  bool has_token = false;     // a token was appended to the output
  bool prompt_token = false;  // echo: `token` is the next prompt token, scored (not output)
  bool eod_token = false;     // with logprobs: `token` is the EOD that ended it (not output)
  int32_t token = 0;
  // With logprobs >= 0 (or a prompt token): log p(token | the tokens before it), and the top
  // alternatives (id, log p), most likely first.
  double logprob = 0.0;
  std::vector<std::pair<int32_t, double>> top;
  FinishReason finished = FinishReason::kNone;
  std::string text;  // the whole output text so far (with a detokenizer; cut at a stop string)
};

class Generator {
 public:
  // Output ids -> text; required for stop strings. May be empty.
  using Detokenize = std::function<std::string(const std::vector<int32_t>&)>;
  Generator(GptInference& model, int32_t eod, Detokenize detokenize);

  int64_t free_slots() const;
  bool running() const { return free_slots() < model_.shape().max_batch; }
  // Prefills requests (at most free_slots(), each with a caller-chosen id) together and samples
  // each one's first token. InvalidArgument (nothing started) naming the request when one is
  // bad: an empty or too long prompt, max_new_tokens < 1, bad sampling, stop without a
  // detokenizer.
  absl::StatusOr<std::vector<GenerationEvent>> start(
      const std::vector<std::pair<int64_t, GenerationRequest>>& requests, engine::Stream& stream);
  // One token of every running request.
  absl::StatusOr<std::vector<GenerationEvent>> step(engine::Stream& stream);
  // Stops a running request (its slot is free afterwards); false when it is not running.
  bool cancel(int64_t id);
  // The output ids of a running or just finished request (finished ones are kept until the
  // next start()).
  const std::vector<int32_t>* output(int64_t id) const;

 private:
  struct Seq {
    int64_t id = 0;
    int64_t slot = -1;  // -1: finished
    GenerationRequest req;
    Sampler sampler;
    std::vector<int32_t> context;  // prompt + output (the repetition penalty's ids)
    std::vector<int32_t> out;
    size_t forced = 0;  // echo: prompt[forced] is the next prompt token to score (0: none left)
    int32_t input = 0;  // the token the next decode step appends
  };
  // Samples from `logits` for s and fills its event; frees the slot when it finishes.
  GenerationEvent advance(Seq& s, std::vector<float> logits);

  GptInference& model_;
  int32_t eod_;
  Detokenize detokenize_;
  std::vector<Seq> seqs_;
};

// Runs every request to its end, starting new ones as slots free up; returns each request's
// final event (in request order; .text only with a detokenizer) and fills outputs (token ids).
// on_event, when set, sees every event as it happens.
absl::StatusOr<std::vector<GenerationEvent>> generate_all(
    Generator& gen, const std::vector<GenerationRequest>& requests,
    std::vector<std::vector<int32_t>>* outputs, engine::Stream& stream,
    const std::function<void(const GenerationEvent&)>& on_event = nullptr);

// For streaming: the length of the prefix of `text` that can be sent now and never changes:
// without the tail that could still begin a stop string, and without an incomplete UTF-8
// sequence at the end.
size_t stable_prefix(const std::string& text, const std::vector<std::string>& stop);

}  // namespace anvil::model
