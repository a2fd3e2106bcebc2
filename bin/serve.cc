// bin/serve: an OpenAI-style completions endpoint over a checkpoint (docs/eval.md#generation).
//   serve CKPT [--port N (0: any free port)] [--host H] [--device D] [--batch-size B]
//         [--max-len L] [--tokenizer-type T --vocab-file F [--merge-file F]]
//         [--threads N] [--max-connections-per-client N] [--request-timeout SECONDS]
//         [--chat-template FILE]
// POST /v1/chat/completions: the same over `messages`, rendered into the prompt by the chat
// template (bin/openai_chat.h; --chat-template, else the checkpoint's
// tokenizer/tokenizer_config.json), answered as chat.completion (chunks with stream). GET
// /v1/models lists the served model. Every failure is an OpenAI error object
// {"error": {"message", "type", "code"}} with its HTTP status (unknown routes 404, wrong method
// 405). POST /v1/completions with a JSON body: prompt (a string, a list of strings, a list of token
// ids or a list of such lists), max_tokens (default 16, capped so prompt + completion fit the
// context; 0 only with echo), temperature (1), top_p (1), top_k (0: off), repetition_penalty
// (1), stop (string or list), seed (default: random), logprobs (null, or k: each token's log
// probability and its k likeliest alternatives, bin/openai_logprobs.h), echo (false: the prompt
// is returned, and scored with logprobs), stream (false; not with echo; with logprobs, each
// chunk carries the entries of its tokens). The response is a text_completion object; with
// stream = true, server-sent events `data: {...}` carry the text as it grows, then
// `data: [DONE]`. Bad requests get a 4xx
// {"error": {"message": ..., "type": "invalid_request_error"}}. GET /health answers "ok".
// Connections (bin/connection_guard.h): --threads workers (default 32) serve them; a request
// must arrive whole within --request-timeout seconds (default 30; else 408), and one client
// holds at most --max-connections-per-client (default 16, below --threads; more get 503).
// Requests from all connections are batched: one scheduler thread (model/
// generation_scheduler.h) decodes every running request in one batch per step.
// Under mpirun / srun the model is split over all ranks (tensor parallelism, as bin/generate):
// rank 0 serves HTTP, and its scheduler's decisions of each iteration (cancellations, requests
// started, a decode step) are broadcast to the other ranks (model/infer/schedule_broadcast.h),
// which replay them: every rank runs the same prefills and decode steps on the same all-gathered
// logits, so all sample the same tokens.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bin/connection_guard.h"
#include "bin/inference_setup.h"
#include "bin/openai_chat.h"
#include "bin/openai_logprobs.h"
#include "engine/status.h"
#include "model/infer/generation.h"
#include "model/infer/generation_scheduler.h"
#include "model/infer/schedule_broadcast.h"
#include "nlohmann/json.hpp"
#include "parallel/comm.h"

namespace {

using json = nlohmann::json;
namespace model = anvil::model;

constexpr char kUsage[] =
    "usage: serve CKPT [--port N] [--host H] [--device auto|cpu|cuda] [--batch-size B]\n"
    "         [--max-len L] [--tokenizer-type T --vocab-file F [--merge-file F]]\n"
    "         [--threads N] [--max-connections-per-client N] [--request-timeout SECONDS]\n"
    "         [--chat-template FILE (.jinja or tokenizer_config.json)]\n";

// Stop strings per request: OpenAI's limit is 4; lm-evaluation-harness may send more.
constexpr size_t kMaxStops = 16;
constexpr char kStopShape[] = "'stop' must be a string or a list of up to 16 strings";

struct Flags {
  anvil::bin::InferenceOptions inf;
  std::string host = "127.0.0.1";
  int port = 8000;
  int threads = 32;             // HTTP workers
  int per_client = 16;          // open connections of one client (IP address)
  double request_timeout = 30;  // seconds for a whole request to arrive
  std::string chat_template;    // "" : the checkpoint's tokenizer/tokenizer_config.json
};

absl::StatusOr<Flags> parse(int argc, char** argv) {
  Flags f;
  f.inf.max_batch = 8;
  const std::vector<std::string> a(argv + 1, argv + argc);
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& k = a[i];
    const bool has_value = i + 1 < a.size();
    auto integer = [&](auto* out) { return has_value && absl::SimpleAtoi(a[++i], out); };
    bool ok = true;
    ANVIL_ASSIGN_OR_RETURN(const bool tokenizer_flag,
                           anvil::bin::parse_tokenizer_flag(a, &i, &f.inf));
    if (tokenizer_flag) {
      continue;
    } else if (k == "--port") {
      ok = integer(&f.port) && f.port >= 0 && f.port < 65536;
    } else if (k == "--chat-template" && has_value) {
      f.chat_template = a[++i];
    } else if (k == "--host" && has_value) {
      f.host = a[++i];
    } else if (k == "--device" && has_value) {
      f.inf.device = a[++i];
    } else if (k == "--batch-size") {
      ok = integer(&f.inf.max_batch) && f.inf.max_batch >= 1;
    } else if (k == "--max-len") {
      ok = integer(&f.inf.max_len) && f.inf.max_len >= 0;
    } else if (k == "--threads") {
      ok = integer(&f.threads) && f.threads >= 2 && f.threads <= 4096;
    } else if (k == "--max-connections-per-client") {
      ok = integer(&f.per_client) && f.per_client >= 1;
    } else if (k == "--request-timeout") {
      ok = has_value && absl::SimpleAtod(a[++i], &f.request_timeout) && f.request_timeout > 0 &&
           f.request_timeout <= 86400;
    } else if (!k.empty() && k[0] != '-' && f.inf.checkpoint.empty()) {
      f.inf.checkpoint = k;
    } else {
      return absl::InvalidArgumentError("unknown or incomplete option " + k);
    }
    if (!ok) return absl::InvalidArgumentError("bad value for " + k);
  }
  if (f.inf.checkpoint.empty()) return absl::InvalidArgumentError("no checkpoint directory given");
  if (f.per_client >= f.threads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-connections-per-client ", f.per_client, " must be below --threads ", f.threads,
        " (one client must not take every worker from /health and the others)"));
  }
  return f;
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const char* code = nullptr) {
  if (code == nullptr) {
    code = status == 400   ? "invalid_request"
           : status == 404 ? "not_found"
           : status == 405 ? "method_not_allowed"
           : status == 408 ? "timeout"
                           : nullptr;
  }
  const json j = anvil::bin::openai_error(status, message, code);
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// What a number of the request body must be: an integer or any number, at least lo (more than
// lo with lo_open) and at most hi (infinity: no limit).
struct Range {
  bool integer = false;
  double lo = 0;
  bool lo_open = false;
  double hi = 0;
};

// A limit as people write it: 1000000, not 1e+06.
std::string limit_text(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrCat(v);
}

// body[key] into *v (absent or null: def). Else the message naming the rule broken and the
// limit, with the value given (cut: it may be megabytes).
std::optional<std::string> number(const json& body, const char* key, const Range& r, double def,
                                  double* v) {
  if (!body.contains(key) || body[key].is_null()) {
    *v = def;
    return std::nullopt;
  }
  const json& x = body[key];
  const std::string name = absl::StrCat("'", key, "'");
  const std::string got = ", got " + anvil::bin::cut_for_message(dump(x));
  if (!x.is_number() || (r.integer && !x.is_number_integer())) {
    return absl::StrCat(name, " must be ", r.integer ? "an integer" : "a number", got);
  }
  *v = x.get<double>();
  if (r.lo_open ? !(*v > r.lo) : !(*v >= r.lo)) {
    return absl::StrCat(name, " must be ", r.lo_open ? "> " : ">= ", limit_text(r.lo), got);
  }
  if (!(*v <= r.hi)) return absl::StrCat(name, " must be <= ", limit_text(r.hi), got);
  return std::nullopt;
}

// Output ids -> text with `tok` (undecodable: empty).
model::Generator::Detokenize detokenizer(const anvil::io::Tokenizer& tok) {
  return [&tok](const std::vector<int32_t>& ids) {
    absl::StatusOr<std::string> t = tok.decode(ids);
    return t.ok() ? *t : std::string();
  };
}

class Server {
 public:
  // observer: tensor parallelism's broadcast of the scheduler's decisions (null: one rank).
  Server(anvil::bin::InferenceSetup setup, std::string model_name, model::ScheduleObserver observer,
         std::optional<anvil::bin::ChatTemplate> chat)
      : chat_(std::move(chat)),
        s_(std::move(setup)),
        name_(std::move(model_name)),
        max_len_(s_.model->shape().max_len),
        gen_(*s_.model, s_.eod, detokenizer(*s_.tokenizer)),
        scheduler_(gen_, *s_.stream, std::move(observer)) {}

  // busy: the connection guard's mark, kept until the response is written (a stream's end).
  void completions(const httplib::Request& req, httplib::Response& res,
                   std::shared_ptr<void> busy) {
    complete(req.body, res, std::move(busy), false);
  }

  // /v1/chat/completions: the body translated into a completion of the rendered conversation.
  void chat(const httplib::Request& req, httplib::Response& res, std::shared_ptr<void> busy) {
    json body;
    if (auto bad = anvil::bin::chat_to_completion(chat_ ? &*chat_ : nullptr, req.body, &body)) {
      send_error(res, 400, *bad);
      return;
    }
    complete(body.dump(), res, std::move(busy), true);
  }

  const std::string& name() const { return name_; }

 private:
  void complete(const std::string& body, httplib::Response& res, std::shared_ptr<void> busy,
                bool is_chat) {
    Parsed p;
    if (const std::optional<std::string> bad = parse_request(body, &p)) {
      send_error(res, 400, *bad);
      return;
    }
    std::vector<model::GenerationRequest>& reqs = p.reqs;
    const bool stream = p.stream;
    const std::string id = absl::StrCat(is_chat ? "chatcmpl-" : "cmpl-", ++counter_);
    const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    std::vector<std::shared_ptr<model::GenerationScheduler::Job>> jobs;
    for (model::GenerationRequest& r : reqs) jobs.push_back(scheduler_.submit(r));
    auto chunk = [=](size_t index, const std::string& text, const char* finish) {
      if (is_chat) {
        return anvil::bin::chat_chunk(
            id, created, name_, text.empty() ? json::object() : json{{"content", text}}, finish);
      }
      json c = {{"index", index}, {"text", text}, {"logprobs", nullptr}};
      c["finish_reason"] = finish ? json(finish) : json(nullptr);
      return json{{"id", id},
                  {"object", "text_completion"},
                  {"created", created},
                  {"model", name_},
                  {"choices", json::array({c})}};
    };
    if (!stream) {
      json choices = json::array();
      int64_t prompt_tokens = 0, completion_tokens = 0;
      for (size_t i = 0; i < jobs.size(); ++i) {
        model::GenerationEvent e, last;
        anvil::bin::ChoiceLogprobs lp([this](int32_t t) { return token_text(t); });
        if (p.echo) lp.add_first(reqs[i].prompt[0]);
        int64_t generated = 0, scored = 0;  // output tokens; output entries of lp (with EOD)
        while (jobs[i]->next(&e)) {
          completion_tokens += e.has_token;
          generated += e.has_token;
          if (e.prompt_token || e.has_token || e.eod_token) lp.add(e);
          scored += e.has_token || e.eod_token;
          last = e;
        }
        if (!jobs[i]->status().ok()) {
          send_error(res, 500, std::string(jobs[i]->status().message()));
          for (auto& j : jobs) j->cancel();
          return;
        }
        prompt_tokens += static_cast<int64_t>(reqs[i].prompt.size());
        std::string text = last.text;
        if (p.zero_tokens) {  // echo of the prompt only: the one generated token is not returned
          text.clear();
          completion_tokens -= generated;
          if (scored > 0) lp.drop_last();
        }
        if (p.echo) text = p.prompt_texts[i] + text;
        json c = chunk(i, text, model::finish_reason_name(last.finished))["choices"][0];
        if (p.zero_tokens) c["finish_reason"] = "length";
        if (is_chat) c["text"] = text;  // read back below into the chat message
        if (p.logprobs >= 0) c["logprobs"] = lp.json();
        choices.push_back(std::move(c));
      }
      json out = chunk(0, "", nullptr);
      out["choices"] = choices;
      if (is_chat) {  // one choice (n = 1)
        out["object"] = "chat.completion";
        out["choices"] = json::array(
            {{{"index", 0},
              {"message", {{"role", "assistant"}, {"content", choices[0]["text"]}}},
              {"logprobs",
               p.logprobs >= 0 ? anvil::bin::chat_logprobs(choices[0]["logprobs"]) : json(nullptr)},
              {"finish_reason", choices[0]["finish_reason"]}}});
      }
      out["usage"] = {{"prompt_tokens", prompt_tokens},
                      {"completion_tokens", completion_tokens},
                      {"total_tokens", prompt_tokens + completion_tokens}};
      res.set_content(dump(out), "application/json");
      return;
    }
    // Streaming: the choices one after the other (later ones run meanwhile), each as the stable
    // part of its text grows, then its finish reason; then [DONE].
    // With logprobs, each chunk carries the entries of the tokens scored since the last chunk.
    struct State {
      size_t job = 0, sent = 0;
      bool done = false;
      bool role_sent = false;  // chat: the first chunk's delta is {"role": "assistant"}
      std::optional<anvil::bin::ChoiceLogprobs> lp;  // the current job's (logprobs requested)
      size_t lp_sent = 0;                            // its entries sent
    };
    auto st = std::make_shared<State>();
    const int64_t logprobs = p.logprobs;
    auto text_of = [this](int32_t t) { return token_text(t); };
    if (logprobs >= 0) st->lp.emplace(text_of);
    auto stops = std::make_shared<std::vector<std::vector<std::string>>>();
    for (const model::GenerationRequest& r : reqs) stops->push_back(r.stop);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [st, jobs, stops, chunk, is_chat, id, created, text_of, name = name_](
            size_t, httplib::DataSink& sink) {
          auto send = [&](const std::string& line) { return sink.write(line.data(), line.size()); };
          if (is_chat && !st->role_sent) {
            st->role_sent = true;
            return send("data: " +
                        dump(anvil::bin::chat_chunk(
                            id, created, name, {{"role", "assistant"}, {"content", ""}}, nullptr)) +
                        "\n\n");
          }
          if (st->job == jobs.size()) {
            st->done = true;
            send("data: [DONE]\n\n");
            sink.done();
            return true;
          }
          model::GenerationEvent e;
          auto& job = jobs[st->job];
          if (!job->next(&e)) {  // failed or cancelled
            const json err =
                anvil::bin::openai_error(500, std::string(job->status().message()), nullptr);
            send("data: " + dump(err) + "\n\n");
            st->job = jobs.size();
            return true;
          }
          const bool fin = e.finished != model::FinishReason::kNone;
          const size_t upto = fin ? e.text.size() : model::stable_prefix(e.text, (*stops)[st->job]);
          std::string delta = upto > st->sent ? e.text.substr(st->sent, upto - st->sent) : "";
          st->sent = std::max(st->sent, upto);
          if (st->lp && (e.has_token || e.eod_token)) st->lp->add(e);
          bool ok = true;
          if (!delta.empty() || fin) {
            json c = chunk(st->job, delta, fin ? model::finish_reason_name(e.finished) : nullptr);
            if (st->lp) {
              const json part = st->lp->json(st->lp_sent, st->lp->size());
              c["choices"][0]["logprobs"] = is_chat ? anvil::bin::chat_logprobs(part) : part;
              st->lp_sent = st->lp->size();
            }
            ok = send("data: " + dump(c) + "\n\n");
          }
          if (fin) {
            ++st->job;
            st->sent = 0;
            if (st->lp) {
              st->lp.emplace(text_of);
              st->lp_sent = 0;
            }
          }
          return ok;  // false: the client is gone
        },
        [st, jobs, busy](bool success) {
          if (!success || !st->done) {
            for (auto& j : jobs) j->cancel();
          }
        });
  }

  struct Parsed {
    std::vector<model::GenerationRequest> reqs;
    std::vector<std::string> prompt_texts;  // each prompt as text (echo)
    bool stream = false, echo = false;
    bool zero_tokens = false;  // max_tokens 0 (echo only)
    int64_t logprobs = -1;
  };

  // The text of one token (for logprobs; bytes that are not UTF-8 on their own become U+FFFD
  // when the JSON is written).
  std::string token_text(int32_t t) const {
    absl::StatusOr<std::string> s = s_.tokenizer->decode({t});
    return s.ok() ? *s : std::string();
  }

  // The prompts of the body: strings, or token ids (checked against the vocabulary) with their
  // decoded text; the error message of a bad one.
  std::optional<std::string> parse_prompts(const json& p, Parsed* out) {
    auto bad = [](const std::string& m) { return std::optional<std::string>(m); };
    const int64_t vocab = s_.model->config().vocab_size;
    auto ids = [&](const json& a, size_t i) -> std::optional<std::string> {
      std::vector<int32_t> t;
      for (const json& x : a) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab) {
          return bad(
              absl::StrCat("prompt ", i, ": token ids must be integers in [0, ", vocab, ")"));
        }
        t.push_back(x.get<int32_t>());
      }
      absl::StatusOr<std::string> text = s_.tokenizer->decode(t);
      out->prompt_texts.push_back(text.ok() ? *text : std::string());
      out->reqs.emplace_back().prompt = std::move(t);
      return std::nullopt;
    };
    auto text = [&](const std::string& t) {
      out->prompt_texts.push_back(t);
      out->reqs.emplace_back().prompt = s_.tokenizer->encode(t);
    };
    const char* kShapes =
        "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists";
    if (p.is_string()) {
      text(p.get<std::string>());
    } else if (p.is_array() && !p.empty() && p[0].is_number()) {
      if (auto e = ids(p, 0)) return e;
    } else if (p.is_array() && !p.empty()) {
      for (const json& x : p) {
        if (x.is_string()) {
          text(x.get<std::string>());
        } else if (x.is_array()) {
          if (auto e = ids(x, out->reqs.size())) return e;
        } else {
          return bad(kShapes);
        }
      }
    } else {
      return bad(kShapes);
    }
    if (out->reqs.size() > 64) return bad("at most 64 prompts per request");
    return std::nullopt;
  }

  // Validates the body into requests; returns the error message of a bad one.
  std::optional<std::string> parse_request(const std::string& body, Parsed* out) {
    auto bad = [](const std::string& m) { return std::optional<std::string>(m); };
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad("the request body is not valid JSON");
    if (!j.is_object()) return bad("the request body must be a JSON object");
    if (!j.contains("prompt")) return bad("'prompt' is required");
    if (auto e = parse_prompts(j["prompt"], out)) return e;
    auto flag = [&](const char* key, bool* v) {
      if (!j.contains(key) || j[key].is_null()) return true;
      if (!j[key].is_boolean()) return false;
      *v = j[key].get<bool>();
      return true;
    };
    if (!flag("stream", &out->stream)) return bad("'stream' must be true or false");
    if (!flag("echo", &out->echo)) return bad("'echo' must be true or false");
    double max_tokens, temperature, top_p, top_k, penalty, n, logprobs;
    const double kNoLimit = std::numeric_limits<double>::infinity();
    if (auto e =
            number(j, "logprobs", {true, 0, false, static_cast<double>(model::kMaxTopLogprobs)}, -1,
                   &logprobs)) {
      return e;
    }
    out->logprobs = static_cast<int64_t>(logprobs);
    if (out->stream && out->echo) {
      return bad("'echo' is not supported with 'stream'");
    }
    // Any larger max_tokens is capped by the context below.
    if (auto e = number(j, "max_tokens", {true, out->echo ? 0.0 : 1.0, false, kNoLimit}, 16,
                        &max_tokens)) {
      return out->echo || j["max_tokens"] != 0 ? e : bad(*e + " (0 only with 'echo')");
    }
    out->zero_tokens = max_tokens == 0;
    if (auto e = number(j, "temperature", {false, 0, false, 1e6}, 1, &temperature)) return e;
    if (auto e = number(j, "top_p", {false, 0, true, 1}, 1, &top_p)) return e;
    if (auto e = number(j, "top_k", {true, 0, false, kNoLimit}, 0, &top_k)) return e;
    if (auto e = number(j, "repetition_penalty", {false, 0, true, 1e6}, 1, &penalty)) return e;
    if (number(j, "n", {true, 1, false, 1}, 1, &n)) return bad("only 'n' = 1 is supported");
    uint64_t seed = std::random_device{}();
    if (j.contains("seed") && !j["seed"].is_null()) {
      if (!j["seed"].is_number_integer()) return bad("'seed' must be an integer");
      seed = j["seed"].get<uint64_t>();
    }
    std::vector<std::string> stop;
    if (j.contains("stop") && !j["stop"].is_null()) {
      const json& s = j["stop"];
      if (s.is_string()) {
        stop.push_back(s.get<std::string>());
      } else if (s.is_array() && s.size() <= kMaxStops) {
        for (const json& x : s) {
          if (!x.is_string()) return bad(kStopShape);
          stop.push_back(x.get<std::string>());
        }
      } else {
        return bad(kStopShape);
      }
    }
    for (size_t i = 0; i < out->reqs.size(); ++i) {
      model::GenerationRequest& r = out->reqs[i];
      const int64_t len = static_cast<int64_t>(r.prompt.size());
      if (len == 0) return bad(absl::StrCat("prompt ", i, " is empty"));
      if (len >= max_len_) {
        return bad(absl::StrCat("prompt ", i, " has ", len, " tokens; the context holds ", max_len_,
                                " (prompt + at least one new token)"));
      }
      // Capped by the context: prompt + completion <= max_len (max_tokens 0: one, not returned).
      r.max_new_tokens =
          std::max(static_cast<int64_t>(std::min(max_tokens, static_cast<double>(max_len_ - len))),
                   int64_t{1});
      r.sampling.temperature = static_cast<float>(temperature);
      r.sampling.top_p = static_cast<float>(top_p);
      r.sampling.top_k = static_cast<int64_t>(std::min(top_k, 1e18));  // any k >= vocab: all
      r.sampling.repetition_penalty = static_cast<float>(penalty);
      r.sampling.seed = seed + i;
      r.stop = stop;
      r.logprobs = out->logprobs;
      r.echo = out->echo;
    }
    return std::nullopt;
  }

  std::optional<anvil::bin::ChatTemplate> chat_;
  anvil::bin::InferenceSetup s_;
  std::string name_;
  int64_t max_len_;
  model::Generator gen_;
  model::GenerationScheduler scheduler_;
  std::atomic<int64_t> counter_{0};
};

int run(const Flags& f) {
  anvil::bin::InferenceOptions o = f.inf;
  absl::StatusOr<anvil::bin::TpLaunch> tp = anvil::bin::start_tp(f.inf.device, &o);
  if (!tp.ok()) {
    std::fprintf(stderr, "serve: error: %s\n", std::string(tp.status().message()).c_str());
    return 1;
  }
  // The TP group's CPU communicator carries the scheduler's decisions (null: one rank). A rank
  // that fails to set up ends them all (the others would wait for rank 0's steps).
  anvil::parallel::Comm* control = o.shard.tp > 1 ? tp->runtime->comms().tp.get() : nullptr;
  auto fail = [&](const std::string& message) {
    if (control != nullptr) tp->runtime->abort("serve: error: " + message);
    std::fprintf(stderr, "serve: error: %s\n", message.c_str());
    return 1;
  };
  absl::StatusOr<anvil::bin::InferenceSetup> setup = anvil::bin::open_for_inference(o);
  if (!setup.ok()) return fail(std::string(setup.status().message()));
  if (!setup->tokenizer) {
    return fail(setup->dir +
                ": the checkpoint's config has no [tokenizer], so text prompts cannot be "
                "encoded; give --tokenizer-type and --vocab-file (and --merge-file)");
  }
  if (tp->rank != 0) {  // a replica of rank 0's generator, driven by its scheduler's steps
    model::Generator gen(*setup->model, setup->eod, detokenizer(*setup->tokenizer));
    model::replay_schedule(gen, *setup->stream,
                           [control] { return model::receive_schedule_step(*control); });
    return 0;
  }
  model::ScheduleObserver observer;
  if (control != nullptr) {
    observer = [control](const model::ScheduleStep& step) {
      model::send_schedule_step(*control, step);
    };
  }
  const std::string dir = setup->dir;
  const std::string device(anvil::engine::device_name(setup->precision.device));
  absl::StatusOr<std::optional<anvil::bin::ChatTemplate>> chat =
      anvil::bin::load_chat_template(f.chat_template, dir);
  if (!chat.ok()) {
    std::fprintf(stderr, "serve: error: %s\n", std::string(chat.status().message()).c_str());
    return 1;
  }
  const std::string chat_source = *chat ? (*chat)->source : "none (chat requests get a 400)";
  Server server(std::move(*setup), dir, std::move(observer), std::move(*chat));
  httplib::Server http;
  std::unique_ptr<anvil::bin::ConnectionGuard> guard;  // once the port is known
  http.Post("/v1/completions", [&](const httplib::Request& req, httplib::Response& res) {
    try {
      server.completions(req, res, guard->busy(req.remote_addr, req.remote_port));
    } catch (const std::exception& e) {  // nlohmann::json throws on misuse; never crash
      send_error(res, 500, std::string("internal error: ") + e.what());
    }
  });
  http.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    try {
      server.chat(req, res, guard->busy(req.remote_addr, req.remote_port));
    } catch (const std::exception& e) {
      send_error(res, 500, std::string("internal error: ") + e.what());
    }
  });
  http.Get("/v1/models", [&](const httplib::Request& req, httplib::Response& res) {
    const std::shared_ptr<void> busy = guard->busy(req.remote_addr, req.remote_port);
    const json model = {
        {"id", server.name()}, {"object", "model"}, {"created", 0}, {"owned_by", "anvil"}};
    res.set_content(dump({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  // The known routes under another method: 405 (httplib would answer 404).
  auto wrong_method = [](const char* allowed) {
    return [allowed](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allowed);
      send_error(res, 405, req.method + " " + req.path + " is not allowed (use " + allowed + ")");
    };
  };
  for (const char* p : {"/v1/completions", "/v1/chat/completions"}) {
    http.Get(p, wrong_method("POST"));
    http.Put(p, wrong_method("POST"));
    http.Delete(p, wrong_method("POST"));
  }
  for (const char* p : {"/v1/models", "/health"}) {
    http.Post(p, wrong_method("GET"));
    http.Put(p, wrong_method("GET"));
    http.Delete(p, wrong_method("GET"));
  }
  // Unknown routes and httplib's own failures (e.g. a body over the limit): an OpenAI error.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, 404,
                 "unknown route " + req.method + " " + req.path +
                     " (routes: POST /v1/completions, POST /v1/chat/completions, "
                     "GET /v1/models, GET /health)");
    } else {
      send_error(res, res.status, "the request failed with HTTP " + std::to_string(res.status),
                 res.status == 413 ? "request_too_large" : nullptr);
    }
  });
  http.Get("/health", [&](const httplib::Request& req, httplib::Response& res) {
    const std::shared_ptr<void> busy = guard->busy(req.remote_addr, req.remote_port);
    res.set_content("ok\n", "text/plain");
  });
  http.new_task_queue = [n = f.threads] { return new httplib::ThreadPool(n); };
  http.set_payload_max_length(16u << 20);
  const int port = f.port == 0 ? http.bind_to_any_port(f.host) : f.port;
  if (port < 0 || (f.port != 0 && !http.bind_to_port(f.host, f.port))) {
    std::fprintf(stderr, "serve: error: cannot listen on %s:%d\n", f.host.c_str(), f.port);
    return 1;
  }
  anvil::bin::widen_listen_backlog(port);
  guard = std::make_unique<anvil::bin::ConnectionGuard>(
      port,
      std::chrono::duration_cast<anvil::bin::ConnectionGuard::Clock::duration>(
          std::chrono::duration<double>(f.request_timeout)),
      f.per_client);
  std::printf("serve: chat template %s\n", chat_source.c_str());
  std::printf("serve: %s on %s, batch %lld, tp %d: listening on http://%s:%d\n", dir.c_str(),
              device.c_str(), static_cast<long long>(f.inf.max_batch), o.shard.tp, f.host.c_str(),
              port);
  std::fflush(stdout);
  return http.listen_after_bind() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Flags> f = parse(argc, argv);
  if (!f.ok()) {
    std::fprintf(stderr, "serve: error: %s\n%s", std::string(f.status().message()).c_str(), kUsage);
    return 2;
  }
  return run(*f);
}
