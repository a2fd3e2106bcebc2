// Generator (generation.h): request bookkeeping over the slots of a GptInference.
#include "model/infer/generation.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/status.h"

namespace anvil::model {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kNone:
      break;
  }
  return "";
}

namespace {

// log_softmax(logits)[token] and the k largest entries (id, log p), most likely first (ties:
// the smaller id), into e.
void score_token(absl::Span<const float> logits, int32_t token, int64_t k, GenerationEvent* e) {
  double mx = -INFINITY;
  for (float x : logits) mx = std::max(mx, static_cast<double>(x));
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  e->logprob = static_cast<double>(logits[static_cast<size_t>(token)]) - lse;
  e->top.clear();
  const size_t n = std::min(logits.size(), static_cast<size_t>(std::max<int64_t>(k, 0)));
  if (n == 0) return;  // echo without logprobs: the token's log p only
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = logits[static_cast<size_t>(a)];
                      const float lb = logits[static_cast<size_t>(b)];
                      return la > lb || (la == lb && a < b);
                    });
  for (size_t i = 0; i < n; ++i) {
    e->top.emplace_back(ids[i], static_cast<double>(logits[static_cast<size_t>(ids[i])]) - lse);
  }
}

}  // namespace

Generator::Generator(GptInference& model, int32_t eod, Detokenize detokenize)
    : model_(model), eod_(eod), detokenize_(std::move(detokenize)) {}

int64_t Generator::free_slots() const {
  int64_t used = 0;
  for (const Seq& s : seqs_) used += s.slot >= 0;
  return model_.shape().max_batch - used;
}

const std::vector<int32_t>* Generator::output(int64_t id) const {
  for (const Seq& s : seqs_) {
    if (s.id == id) return &s.out;
  }
  return nullptr;
}

bool Generator::cancel(int64_t id) {
  for (Seq& s : seqs_) {
    if (s.id == id && s.slot >= 0) {
      s.slot = -1;
      return true;
    }
  }
  return false;
}

GenerationEvent Generator::advance(Seq& s, std::vector<float> logits) {
  GenerationEvent e;
  e.id = s.id;
  std::vector<float> raw;
  if (s.req.logprobs >= 0) raw = logits;  // the sampler changes them in place
  const int32_t t = s.sampler.next(logits, s.context);
  if (s.req.logprobs >= 0) score_token(raw, t, s.req.logprobs, &e);
  if (t == eod_) {
    e.finished = FinishReason::kStop;
    // Scored like any token (OpenAI's logprobs list it; lm-evaluation-harness drops the last
    // entry as the generated one).
    e.eod_token = s.req.logprobs >= 0;
    e.token = t;
  } else {
    e.has_token = true;
    e.token = t;
    s.out.push_back(t);
    s.context.push_back(t);
  }
  if (detokenize_) e.text = detokenize_(s.out);
  for (const std::string& stop : s.req.stop) {
    const size_t at = stop.empty() ? std::string::npos : e.text.find(stop);
    if (at != std::string::npos) {
      e.text.resize(at);
      e.finished = FinishReason::kStop;
    }
  }
  const bool full = model_.length(s.slot) + 1 >= model_.shape().max_len;
  if (e.finished == FinishReason::kNone &&
      (static_cast<int64_t>(s.out.size()) >= s.req.max_new_tokens || full)) {
    e.finished = FinishReason::kLength;
  }
  if (e.finished != FinishReason::kNone) s.slot = -1;
  return e;
}

absl::StatusOr<std::vector<GenerationEvent>> Generator::start(
    const std::vector<std::pair<int64_t, GenerationRequest>>& requests, engine::Stream& stream) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  const int64_t max_len = model_.shape().max_len;
  if (static_cast<int64_t>(requests.size()) > free_slots()) {
    return bad("generation: ", requests.size(), " requests for ", free_slots(), " free slots");
  }
  for (const auto& [id, r] : requests) {
    const int64_t len = static_cast<int64_t>(r.prompt.size());
    if (len < 1) return bad("request ", id, ": the prompt is empty");
    if (len >= max_len) {
      return bad("request ", id, ": the prompt has ", len,
                 " tokens; with at least one new token it must be shorter than the context of ",
                 max_len, " tokens");
    }
    if (r.max_new_tokens < 1) {
      return bad("request ", id, ": max_new_tokens must be >= 1, got ", r.max_new_tokens);
    }
    absl::Status ok = r.sampling.validate();
    if (!ok.ok()) return bad("request ", id, ": ", ok.message());
    if (r.logprobs < -1 || r.logprobs > kMaxTopLogprobs) {
      return bad("request ", id, ": logprobs must be -1 (none) to ", kMaxTopLogprobs, ", got ",
                 r.logprobs);
    }
    if (!r.stop.empty() && !detokenize_) {
      return bad("request ", id, ": stop strings need a tokenizer to decode the output");
    }
  }
  // Finished requests are forgotten now; new ones take the lowest free slots.
  seqs_.erase(std::remove_if(seqs_.begin(), seqs_.end(), [](const Seq& s) { return s.slot < 0; }),
              seqs_.end());
  std::vector<bool> used(static_cast<size_t>(model_.shape().max_batch), false);
  for (const Seq& s : seqs_) used[static_cast<size_t>(s.slot)] = true;
  std::vector<int64_t> slots;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<bool> score;
  const size_t first = seqs_.size();
  for (const auto& [id, r] : requests) {
    const int64_t slot = std::find(used.begin(), used.end(), false) - used.begin();
    used[static_cast<size_t>(slot)] = true;
    seqs_.push_back(Seq{id, slot, r, Sampler(r.sampling), r.prompt, {}});
    slots.push_back(slot);
    prompts.push_back(r.prompt);
    score.push_back(r.echo);
  }
  std::vector<GenerationEvent> events;
  if (requests.empty()) return events;
  std::vector<float> logits;
  const size_t v = static_cast<size_t>(model_.config().vocab_size);
  // echo: prompt token p + 1 scored from the logits after position p, per request in order.
  std::vector<std::vector<GenerationEvent>> prompt_events(requests.size());
  absl::Status st = model_.prefill(
      slots, prompts, &logits, stream, score, [&](int64_t i, int64_t p, const float* row) {
        const GenerationRequest& r = requests[static_cast<size_t>(i)].second;
        GenerationEvent& e = prompt_events[static_cast<size_t>(i)].emplace_back();
        e.id = requests[static_cast<size_t>(i)].first;
        e.prompt_token = true;
        e.token = r.prompt[static_cast<size_t>(p + 1)];
        score_token(absl::MakeConstSpan(row, v), e.token, r.logprobs, &e);
      });
  if (!st.ok()) {
    seqs_.erase(seqs_.begin() + static_cast<std::ptrdiff_t>(first), seqs_.end());
    return st;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    for (GenerationEvent& e : prompt_events[i]) events.push_back(std::move(e));
    events.push_back(advance(seqs_[first + i], std::vector<float>(logits.begin() + i * v,
                                                                  logits.begin() + (i + 1) * v)));
  }
  return events;
}

absl::StatusOr<std::vector<GenerationEvent>> Generator::step(engine::Stream& stream) {
  std::vector<Seq*> run;
  std::vector<int64_t> slots;
  std::vector<int32_t> tokens;
  for (Seq& s : seqs_) {
    if (s.slot < 0) continue;
    run.push_back(&s);
    slots.push_back(s.slot);
    tokens.push_back(s.out.back());
  }
  std::vector<GenerationEvent> events;
  if (run.empty()) return events;
  std::vector<float> logits;
  ANVIL_RETURN_IF_ERROR(model_.decode(slots, tokens, &logits, stream));
  const size_t v = static_cast<size_t>(model_.config().vocab_size);
  for (size_t i = 0; i < run.size(); ++i) {
    events.push_back(
        advance(*run[i], std::vector<float>(logits.begin() + i * v, logits.begin() + (i + 1) * v)));
  }
  return events;
}

absl::StatusOr<std::vector<GenerationEvent>> generate_all(
    Generator& gen, const std::vector<GenerationRequest>& requests,
    std::vector<std::vector<int32_t>>* outputs, engine::Stream& stream,
    const std::function<void(const GenerationEvent&)>& on_event) {
  std::vector<GenerationEvent> last(requests.size());
  outputs->assign(requests.size(), {});
  size_t next = 0;
  auto take = [&](const std::vector<GenerationEvent>& events) {
    for (const GenerationEvent& e : events) {
      if (on_event) on_event(e);
      const size_t i = static_cast<size_t>(e.id);
      last[i] = e;
      if (e.finished != FinishReason::kNone) (*outputs)[i] = *gen.output(e.id);
    }
  };
  while (next < requests.size() || gen.running()) {
    std::vector<std::pair<int64_t, GenerationRequest>> batch;
    while (next < requests.size() && static_cast<int64_t>(batch.size()) < gen.free_slots()) {
      batch.emplace_back(static_cast<int64_t>(next), requests[next]);
      ++next;
    }
    if (!batch.empty()) {
      ANVIL_ASSIGN_OR_RETURN(std::vector<GenerationEvent> ev, gen.start(batch, stream));
      take(ev);
    }
    ANVIL_ASSIGN_OR_RETURN(std::vector<GenerationEvent> ev, gen.step(stream));
    take(ev);
  }
  return last;
}

size_t stable_prefix(const std::string& text, const std::vector<std::string>& stop) {
  size_t n = text.size();
  // A tail that is a proper prefix of a stop string may still become it.
  for (const std::string& s : stop) {
    for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), text.size()); k > 0; --k) {
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        n = std::min(n, text.size() - k);
        break;
      }
    }
  }
  // An incomplete UTF-8 sequence at the end: its lead byte announces more bytes than follow.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) n -= back;
    break;
  }
  return n;
}

}  // namespace anvil::model
