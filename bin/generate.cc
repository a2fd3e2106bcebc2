// bin/generate: text from a checkpoint (docs/eval.md#generation).
//   generate CKPT --prompt TEXT [--max-new-tokens N] [--greedy] [--temperature T] [--top-k K]
//            [--top-p P] [--repetition-penalty R] [--seed S] [--stop STR]... [--device D]
//            [--batch-size B] [--max-len L] [--dry-run] [--tokenizer-type T --vocab-file F
//            [--merge-file F]]
//   generate CKPT --input prompts.jsonl [--output out.jsonl] [same options]
// One prompt: the prompt and its completion go to --output or stdout. --input: one
// {"prompt": ...} object per line; each result is a line {"prompt", "completion", "tokens",
// "finish_reason"} in input order (to --output or stdout). --output is written whole or not at
// all (a temporary renamed into place). Prompts run batched (B at a time; a finished one's slot
// takes the next prompt at once). Prompt i samples with seed S + i. Timing (time to first token,
// tokens/s) goes to stderr. --dry-run prints the memory plan (parameters, KV cache, activations)
// and loads nothing. Under mpirun / srun the model is split over all ranks (tensor parallelism).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bin/inference_setup.h"
#include "engine/status.h"
#include "model/infer/generation.h"
#include "nlohmann/json.hpp"

namespace {

using json = nlohmann::json;
namespace model = anvil::model;

constexpr char kUsage[] =
    "usage: generate CKPT (--prompt TEXT | --input prompts.jsonl) [--output FILE]\n"
    "         [--max-new-tokens N] [--greedy] [--temperature T] [--top-k K] [--top-p P]\n"
    "         [--repetition-penalty R] [--seed S] [--stop STR]... [--device auto|cpu|cuda]\n"
    "         [--batch-size B] [--max-len L] [--dry-run]\n"
    "         [--tokenizer-type T --vocab-file F [--merge-file F]]\n";

struct Flags {
  anvil::bin::InferenceOptions inf;
  std::string prompt, input, output;
  bool have_prompt = false;
  int64_t max_new_tokens = 32;
  int64_t batch_size = 8;
  model::SamplingParams sampling;
  std::vector<std::string> stop;
};

absl::Status bad(const std::string& m) { return absl::InvalidArgumentError(m); }

absl::StatusOr<Flags> parse(int argc, char** argv) {
  Flags f;
  std::vector<std::string> a(argv + 1, argv + argc);
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& k = a[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= a.size()) return bad(k + " needs a value");
      return a[++i];
    };
    auto number = [&](auto* out) -> absl::Status {
      ANVIL_ASSIGN_OR_RETURN(std::string v, value());
      bool ok;
      if constexpr (std::is_same_v<std::remove_pointer_t<decltype(out)>, float>) {
        ok = absl::SimpleAtof(v, out);
      } else {
        ok = absl::SimpleAtoi(v, out);
      }
      return ok ? absl::OkStatus()
                : bad(k + ": expected a number, got '" + anvil::bin::cut_for_message(v) + "'");
    };
    absl::Status st;
    ANVIL_ASSIGN_OR_RETURN(const bool tokenizer_flag,
                           anvil::bin::parse_tokenizer_flag(a, &i, &f.inf));
    if (tokenizer_flag) {
      continue;
    } else if (k == "--prompt") {
      ANVIL_ASSIGN_OR_RETURN(f.prompt, value());
      f.have_prompt = true;
    } else if (k == "--input") {
      ANVIL_ASSIGN_OR_RETURN(f.input, value());
    } else if (k == "--output") {
      ANVIL_ASSIGN_OR_RETURN(f.output, value());
    } else if (k == "--max-new-tokens") {
      st = number(&f.max_new_tokens);
    } else if (k == "--greedy") {
      f.sampling.greedy = true;
    } else if (k == "--temperature") {
      st = number(&f.sampling.temperature);
    } else if (k == "--top-k") {
      st = number(&f.sampling.top_k);
    } else if (k == "--top-p") {
      st = number(&f.sampling.top_p);
    } else if (k == "--repetition-penalty") {
      st = number(&f.sampling.repetition_penalty);
    } else if (k == "--seed") {
      st = number(&f.sampling.seed);
    } else if (k == "--stop") {
      ANVIL_ASSIGN_OR_RETURN(std::string s, value());
      f.stop.push_back(s);
    } else if (k == "--device") {
      ANVIL_ASSIGN_OR_RETURN(f.inf.device, value());
    } else if (k == "--batch-size") {
      st = number(&f.batch_size);
    } else if (k == "--max-len") {
      st = number(&f.inf.max_len);
    } else if (k == "--dry-run") {
      f.inf.dry_run = true;
    } else if (!k.empty() && k[0] == '-') {
      return bad("unknown option " + k);
    } else if (f.inf.checkpoint.empty()) {
      f.inf.checkpoint = k;
    } else {
      return bad("unexpected argument " + k);
    }
    ANVIL_RETURN_IF_ERROR(st);
  }
  if (f.inf.checkpoint.empty()) return bad("no checkpoint directory given");
  if (f.have_prompt == !f.input.empty()) return bad("give exactly one of --prompt and --input");
  if (f.max_new_tokens < 1) return bad("--max-new-tokens must be >= 1");
  if (f.batch_size < 1) return bad("--batch-size must be >= 1");
  ANVIL_RETURN_IF_ERROR(f.sampling.validate());
  return f;
}

// The prompts of a JSONL file: one {"prompt": "..."} per line (blank lines skipped).
absl::StatusOr<std::vector<std::string>> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path + ": cannot open the prompts file");
  std::vector<std::string> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
      return bad(absl::StrCat(path, ":", n, ": expected a JSON object {\"prompt\": \"...\"}"));
    }
    out.push_back(j["prompt"].get<std::string>());
  }
  if (out.empty()) return bad(path + ": no prompts");
  return out;
}

// `text` to `path` through a temporary in the same directory, renamed into place: a failure
// leaves neither a partial file under `path` nor the temporary.
absl::Status write_whole(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return absl::DataLossError(path + ": cannot write the results");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::DataLossError(path + ": cannot write the results (rename of " + tmp + ")");
  }
  return absl::OkStatus();
}

absl::Status run(const Flags& f) {
  std::vector<std::string> texts;
  if (f.have_prompt) {
    texts.push_back(f.prompt);
  } else {
    ANVIL_ASSIGN_OR_RETURN(texts, read_prompts(f.input));
  }
  anvil::bin::InferenceOptions o = f.inf;
  // Under mpirun / srun: tensor parallelism over all ranks. Each rank runs the same loop on
  // the same all-gathered logits, so all choose the same tokens; rank 0 writes the results.
  ANVIL_ASSIGN_OR_RETURN(anvil::bin::TpLaunch tp, anvil::bin::start_tp(f.inf.device, &o));
  const bool lead = tp.rank == 0;
  // Slots for the prompts at hand; a dry run plans for --batch-size itself.
  o.max_batch = f.inf.dry_run ? f.batch_size
                              : std::min<int64_t>(f.batch_size, static_cast<int64_t>(texts.size()));
  ANVIL_ASSIGN_OR_RETURN(anvil::bin::InferenceSetup s, anvil::bin::open_for_inference(o));
  const int64_t max_len = o.max_len ? o.max_len : s.config.model.max_seq_len;
  if (f.inf.dry_run) {
    if (!lead) return absl::OkStatus();
    std::printf("generate --dry-run: %s on %s, batch %lld x %lld positions\n%s", s.dir.c_str(),
                std::string(anvil::engine::device_name(s.precision.device)).c_str(),
                static_cast<long long>(o.max_batch), static_cast<long long>(max_len),
                s.plan.format().c_str());
    std::printf("KV cache: %zu bytes ([layers, batch, positions, 2, heads, head_dim] %s)\n",
                s.plan.category_bytes("kv_cache"),
                std::string(anvil::engine::dtype_name(s.precision.act)).c_str());
    return absl::OkStatus();
  }
  if (!s.tokenizer) {
    return absl::FailedPreconditionError(s.dir +
                                         ": the checkpoint's config has no [tokenizer], so text "
                                         "prompts cannot be encoded; give --tokenizer-type and "
                                         "--vocab-file (and --merge-file)");
  }
  std::vector<model::GenerationRequest> reqs;
  for (size_t i = 0; i < texts.size(); ++i) {
    model::GenerationRequest r;
    r.prompt = s.tokenizer->encode(texts[i]);
    if (r.prompt.empty()) return bad(absl::StrCat("prompt ", i + 1, " is empty (no tokens)"));
    if (static_cast<int64_t>(r.prompt.size()) >= max_len) {
      return bad(absl::StrCat("prompt ", i + 1, " has ", r.prompt.size(),
                              " tokens; the model's context is ", max_len,
                              " tokens (prompt + at least one new token)"));
    }
    r.max_new_tokens = f.max_new_tokens;
    r.sampling = f.sampling;
    r.sampling.seed = f.sampling.seed + i;
    r.stop = f.stop;
    reqs.push_back(std::move(r));
  }
  const anvil::io::Tokenizer& tok = *s.tokenizer;
  model::Generator gen(*s.model, s.eod, [&tok](const std::vector<int32_t>& ids) {
    absl::StatusOr<std::string> t = tok.decode(ids);
    return t.ok() ? *t : std::string();
  });
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  double ttft = -1.0;
  int64_t new_tokens = 0;
  std::vector<std::vector<int32_t>> outputs;
  ANVIL_ASSIGN_OR_RETURN(
      std::vector<model::GenerationEvent> done,
      model::generate_all(gen, reqs, &outputs, *s.stream, [&](const model::GenerationEvent& e) {
        if (ttft < 0) ttft = std::chrono::duration<double>(Clock::now() - t0).count();
        new_tokens += e.has_token;
      }));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!lead) return absl::OkStatus();
  std::string result;
  if (f.have_prompt) {
    result = texts[0] + done[0].text + "\n";
  } else {
    for (size_t i = 0; i < texts.size(); ++i) {
      json j = {{"prompt", texts[i]},
                {"completion", done[i].text},
                {"tokens", outputs[i].size()},
                {"finish_reason", model::finish_reason_name(done[i].finished)}};
      result += j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    }
  }
  if (f.output.empty()) {
    std::fwrite(result.data(), 1, result.size(), stdout);
  } else {
    ANVIL_RETURN_IF_ERROR(write_whole(f.output, result));
  }
  std::fprintf(stderr,
               "generate: %zu prompt(s), %lld new tokens in %.3f s: %.1f tokens/s; time to first "
               "token %.1f ms (%s, batch %lld, tp %d)\n",
               texts.size(), static_cast<long long>(new_tokens), secs,
               secs > 0 ? static_cast<double>(new_tokens) / secs : 0.0, ttft * 1e3,
               std::string(anvil::engine::device_name(s.precision.device)).c_str(),
               static_cast<long long>(o.max_batch), o.shard.tp);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Flags> f = parse(argc, argv);
  if (!f.ok()) {
    std::fprintf(stderr, "generate: error: %s\n%s", std::string(f.status().message()).c_str(),
                 kUsage);
    return 2;
  }
  const absl::Status s = run(*f);
  if (!s.ok()) {
    std::fprintf(stderr, "generate: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
